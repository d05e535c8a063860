package store

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrNoSpace: the file system of the data directory has less free space
// than the store keeps in reserve (Options.ReserveBytes). Writes are
// refused before Badger could run out of room mid-write; reads go on, and
// writes resume by themselves once space is freed.
var ErrNoSpace = errors.New("not enough free disk space")

// DefaultReserveBytes is the free space writes leave on the data
// directory's file system by default: room for Badger to flush a memtable
// and finish the group in flight.
const DefaultReserveBytes = 64 << 20

// checkSpace refuses a write group when the data directory's file system
// has less than the reserve free. A store over a driver of its own
// (Options.Driver: a database server) has no data directory to check.
func (s *Store) checkSpace() error {
	reserve := s.reserve.Load()
	if reserve <= 0 || s.dir == "" {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		// A vanished or unreadable directory cannot take writes.
		return fmt.Errorf("%w: the data directory %s cannot be read (%v); check that it exists and is writable", ErrWriteFailed, s.dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free < reserve {
		return fmt.Errorf("%w: %d MiB free on the file system of %s, and artifactd keeps %d MiB in reserve; free space (writes resume by themselves) or lower serve --reserve",
			ErrNoSpace, free>>20, s.dir, reserve>>20)
	}
	return nil
}

// SetReserveBytes changes the free space writes leave on the data
// directory's file system (negative: no check); it takes effect at the
// next write group.
func (s *Store) SetReserveBytes(n int64) { s.reserve.Store(n) }

// NoteCorruption records that a read found corrupt or missing records
// (errors.Is(err, ErrCorrupt)). From then on the store refuses writes and
// Health reports it, so a server stops claiming readiness and stops
// building on records it cannot trust. Other errors are ignored.
func (s *Store) NoteCorruption(err error) {
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return
	}
	s.corrupt.CompareAndSwap(nil, &err)
}

// Health returns nil when the store may serve: not closed, no write
// failure, no corruption noted, and room on disk for writes. The error
// says what to do.
func (s *Store) Health() error {
	if p := s.corrupt.Load(); p != nil {
		where := "--store <the store's URL>"
		if s.dir != "" {
			where = "--data " + s.dir
		}
		return fmt.Errorf("%w: %v; stop artifactd and run `artifactd fsck %s`", ErrCorrupt, *p, where)
	}
	if err := s.writeFailure(); err != nil {
		return err
	}
	return s.checkSpace()
}
