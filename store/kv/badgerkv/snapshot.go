package badgerkv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/store/kv"
)

// A point read in Badger opens a read transaction, and a new read
// transaction waits until every write given a commit timestamp before it
// is done, its syncs included: a read of a state-map node would wait
// behind another context's bulk write, or behind every small commit's
// fsync. Records whose key names their value never change, so GetSame
// reads them in a shared read transaction taken a little earlier (a
// snapshot), and looks only the keys it lacks up again, in a transaction
// of their own. A goroutine takes each snapshot, so no reader waits for
// one.

// snapshotMaxAge is how old a snapshot may grow before a read asks for a
// newer one; it serves on until that one is taken, which waits behind
// the writes in flight. Badger keeps the versions an open transaction may
// read, so a snapshot held for long would keep overwritten values from
// being compacted away; an idle one is dropped after at most twice this.
const snapshotMaxAge = time.Second

// snapshot is a read transaction shared by GetSame calls.
type snapshot struct {
	txn  *badger.Txn
	born time.Time
	// refs counts the reads using it, plus one while it is the current
	// snapshot; the last release discards it. Under snapshots.mu.
	refs int
}

// snapshots keeps the current snapshot and renews it in a goroutine of
// its own (run).
type snapshots struct {
	db     *badger.DB
	maxAge time.Duration // snapshotMaxAge; shorter in tests
	mu     sync.Mutex
	cur    *snapshot
	used   bool // cur served a read since it was taken
	// drops counts drop calls: a transaction taken while one ran may
	// predate the deletes that called it, and is not installed.
	drops uint64
	renew chan struct{} // asks run for a newer snapshot (capacity 1)
	// taken, when set (tests), runs in take between taking a transaction
	// and installing it.
	taken func()
}

func newSnapshots(db *badger.DB) *snapshots {
	return &snapshots{db: db, maxAge: snapshotMaxAge, renew: make(chan struct{}, 1)}
}

// acquire returns the current snapshot for a read, which must release
// it, or nil when there is none yet (one is asked for).
func (s *snapshots) acquire() *snapshot {
	s.mu.Lock()
	cur := s.cur
	if cur != nil {
		cur.refs++
		s.used = true
	}
	s.mu.Unlock()
	if cur == nil || time.Since(cur.born) > s.maxAge {
		s.ask()
	}
	return cur
}

// release ends a read's use of sn.
func (s *snapshots) release(sn *snapshot) {
	s.mu.Lock()
	sn.refs--
	last := sn.refs == 0
	s.mu.Unlock()
	if last {
		sn.txn.Discard()
	}
}

// ask asks run for a newer snapshot, unless it has been asked already.
func (s *snapshots) ask() {
	select {
	case s.renew <- struct{}{}:
	default:
	}
}

// drop ends the current snapshot: reads that start after drop returns
// do not see what it saw. The driver calls it after a write that deleted
// keys, so that GetSame never finds a key whose delete has returned.
func (s *snapshots) drop() {
	s.mu.Lock()
	old := s.cur
	s.cur, s.used = nil, false
	s.drops++
	s.mu.Unlock()
	if old != nil {
		s.release(old)
	}
}

// take takes a new snapshot and makes it the current one, again if a
// drop ran meanwhile; Badger's wait for the writes in flight is spent
// here, not in a read.
func (s *snapshots) take() {
	for {
		s.mu.Lock()
		drops := s.drops
		s.mu.Unlock()
		txn := s.db.NewTransaction(false)
		if s.taken != nil {
			s.taken()
		}
		s.mu.Lock()
		if s.drops != drops {
			s.mu.Unlock()
			txn.Discard()
			continue
		}
		old := s.cur
		s.cur, s.used = &snapshot{txn: txn, born: time.Now(), refs: 1}, false
		s.mu.Unlock()
		if old != nil {
			s.release(old)
		}
		return
	}
}

// run takes a new snapshot when asked and drops one that served no read
// for maxAge, until stop is closed; then it drops the current one.
func (s *snapshots) run(stop <-chan struct{}) {
	tick := time.NewTicker(s.maxAge)
	defer tick.Stop()
	defer s.drop()
	for {
		select {
		case <-stop:
			return
		case <-s.renew:
			s.take()
		case <-tick.C:
			s.mu.Lock()
			idle := s.cur != nil && !s.used
			s.used = false
			s.mu.Unlock()
			if idle {
				s.drop()
			}
		}
	}
}

// GetSame implements kv.SameGetter: keys are read in the current
// snapshot, and the keys it lacks — written after it was taken, or not
// at all — in a new read transaction, as GetMany reads them. A value the
// snapshot cannot give back (*kv.UnreadableError: a value-log file
// collected after it was taken) is read again as GetMany does it; any
// other error is returned.
func (d *Driver) GetSame(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	sn := d.snaps.acquire()
	if sn == nil {
		return d.getManyAgain(ctx, keys)
	}
	out, err := d.getIn(ctx, sn.txn, keys)
	d.snaps.release(sn)
	var lost *kv.UnreadableError
	if errors.As(err, &lost) {
		return d.getManyAgain(ctx, keys)
	}
	if err != nil {
		return nil, fmt.Errorf("badgerkv: get: %w", err)
	}
	var missing []int
	for i, v := range out {
		if v == nil {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	// The snapshot may be older than these keys: read them afresh, and
	// ask for a newer snapshot if one of them is there.
	again := make([][]byte, len(missing))
	for j, i := range missing {
		again[j] = keys[i]
	}
	vals, err := d.getManyAgain(ctx, again)
	if err != nil {
		return nil, err
	}
	for j, i := range missing {
		if vals[j] != nil {
			out[i] = vals[j]
			d.snaps.ask()
		}
	}
	return out, nil
}
