package store

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
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
// The file system is asked at most every spaceRecheck while its last
// answer left more than spaceMargin above the reserve, and before every
// write group below that: a statfs costs about 20 µs here, a twentieth of
// a one-artifact commit, and no write group fills a gibibyte in a tenth
// of a second.
func (s *Store) checkSpace() error {
	reserve := s.reserve.Load()
	if reserve <= 0 || s.dir == "" {
		return nil
	}
	s.space.Lock()
	defer s.space.Unlock()
	if s.space.free-reserve > spaceMargin && time.Since(s.space.at) < spaceRecheck {
		return nil
	}
	free, err := s.space.statfs(s.dir)
	if err != nil {
		s.space.at = time.Time{}
		// A vanished or unreadable directory cannot take writes.
		return fmt.Errorf("%w: the data directory %s cannot be read (%v); check that it exists and is writable", ErrWriteFailed, s.dir, err)
	}
	s.space.free, s.space.at = free, time.Now()
	if free < reserve {
		// The data directory is not named: the message reaches every
		// writer, whose operator knows where it is.
		return fmt.Errorf("%w: %d MiB free on the data directory's file system, and artifactd keeps %d MiB in reserve; free space (writes resume by themselves) or lower serve --reserve-bytes",
			ErrNoSpace, free>>20, reserve>>20)
	}
	return nil
}

// spaceRecheck and spaceMargin bound how stale checkSpace's last answer
// may be: it is used again for spaceRecheck while it left more than
// spaceMargin above the reserve.
const (
	spaceRecheck = 100 * time.Millisecond
	spaceMargin  = 1 << 30
)

// freeSpace is checkSpace's last answer from the file system.
type freeSpace struct {
	sync.Mutex
	free int64     // bytes free for unprivileged writes
	at   time.Time // when asked; zero: ask next time
	// statfs asks the file system of dir (freeBytes; tests replace it).
	statfs func(dir string) (int64, error)
}

// freeBytes returns the bytes free for unprivileged writes on the file
// system of dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
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
