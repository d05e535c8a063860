package store

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv"
)

// inFlightKV counts the driver's GetMany calls and the most of them that
// ran at once; each takes a few milliseconds, so that parts read together
// overlap. It has no GetSame: kv.GetSame reads through GetMany.
type inFlightKV struct {
	kv.Driver
	mu             sync.Mutex
	calls, now, hi int
}

func (d *inFlightKV) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	d.mu.Lock()
	d.calls++
	d.now++
	d.hi = max(d.hi, d.now)
	d.mu.Unlock()
	time.Sleep(3 * time.Millisecond)
	defer func() {
		d.mu.Lock()
		d.now--
		d.mu.Unlock()
	}()
	return d.Driver.GetMany(ctx, keys)
}

// TestReaderPrefetchLeavesProcessors: a view loaded whole for a read (an
// audit's, View.Whole) and a view of an old commit walking its map read
// the map's nodes at most readerWorkers parts at once — half the cores —
// while a head loaded whole for the committer still reads
// prefetchWorkers at once. A read that took every processor left other
// contexts' commits waiting to be scheduled.
func TestReaderPrefetchLeavesProcessors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if readerWorkers() >= prefetchWorkers {
		t.Fatalf("readerWorkers() = %d with GOMAXPROCS 4, want fewer than %d", readerWorkers(), prefetchWorkers)
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, c := checkpointedBig(t, dir)
	defer s.Close()
	cs, err := s.ctxState("big")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		load func() error
		want int
	}{
		{"a view loaded whole", func() error {
			return s.Read(ctx, "big", "", func(v *View) error {
				if !v.State.IsLazy() {
					t.Fatal("the reopened head is not over its map")
				}
				w, err := v.Whole(ctx)
				if err == nil && w.State.IsLazy() {
					t.Fatal("Whole did not load the state")
				}
				return err
			})
		}, readerWorkers()},
		{"a head loaded whole", func() error {
			_, _, _, err := s.openHead(s, cs.info, c, false)
			return err
		}, prefetchWorkers},
		{"a view of an old commit walking its map", func() error {
			return s.ReadSparse(ctx, "big", c, func(v *View) error {
				if !v.State.IsLazy() {
					t.Fatal("the view is not over its map")
				}
				n := 0
				v.State.RangeEdges(func(*graph.Edge) bool { n++; return true })
				if n != 4999 {
					t.Fatalf("walked %d edges, want 4999", n)
				}
				return nil
			})
		}, readerWorkers()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.nodes.clear()
			orig := s.kv
			d := &inFlightKV{Driver: orig}
			s.kv, s.readPart = d, 8
			err := tc.load()
			s.kv, s.readPart = orig, prefetchPart
			if err != nil {
				t.Fatal(err)
			}
			if d.calls < 4*tc.want {
				t.Fatalf("the load read %d parts; the test needs at least %d", d.calls, 4*tc.want)
			}
			if d.hi != tc.want {
				t.Errorf("at most %d parts read at once over %d reads, want %d", d.hi, d.calls, tc.want)
			}
		})
	}
}

// TestLazyHeadOpenKeepsPrefetchWorkers: a head opened over its map walks
// it for its context hash's leaves when it is too small for a checkpoint
// (leavesAt); that walk is the committer's and other readers', and reads
// prefetchWorkers parts at once, not a client's share.
func TestLazyHeadOpenKeepsPrefetchWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(context.Background(), "mid", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, s, "mid", claimChain(2000)...)
	if wantsCheckpoint(c) || !indexed(c) {
		t.Fatal("want an indexed state below leafCheckpointMin")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	cs, err := s.ctxState("mid")
	if err != nil {
		t.Fatal(err)
	}
	s.nodes.clear()
	orig := s.kv
	d := &inFlightKV{Driver: orig}
	s.kv, s.readPart = d, 8
	_, _, _, err = s.openHead(s, cs.info, c, true)
	s.kv, s.readPart = orig, prefetchPart
	if err != nil {
		t.Fatal(err)
	}
	if d.hi != prefetchWorkers {
		t.Errorf("a head opened over its map read at most %d parts at once over %d reads, want prefetchWorkers (%d)", d.hi, d.calls, prefetchWorkers)
	}
}

// TestReaderWorkersOf: half the cores, at least one, at most
// prefetchWorkers — a big machine's read does not take a PostgreSQL
// driver's whole pool.
func TestReaderWorkersOf(t *testing.T) {
	for _, tc := range []struct{ cores, want int }{{1, 1}, {2, 1}, {3, 1}, {4, 2}, {6, 3}, {8, 4}, {16, 4}, {64, 4}} {
		if got := readerWorkersOf(tc.cores); got != tc.want {
			t.Errorf("readerWorkersOf(%d) = %d, want %d", tc.cores, got, tc.want)
		}
	}
}

// cancelAfterKV cancels a read's context at its after-th GetMany.
type cancelAfterKV struct {
	kv.Driver
	n      atomic.Int64
	after  int64
	cancel context.CancelFunc
}

func (d *cancelAfterKV) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if d.n.Add(1) == d.after {
		d.cancel()
	}
	return d.Driver.GetMany(ctx, keys)
}

// TestWholeCancelledMidway: a view's whole load (View.Whole) and an old
// commit's (ReadCommit) read under the read's context; cancelled part
// way, each returns the context's error — not corruption, the store
// stays healthy, nothing is cached — and the next load is whole.
func TestWholeCancelledMidway(t *testing.T) {
	s, c := checkpointedBig(t, t.TempDir())
	defer s.Close()
	loads := []struct {
		name string
		load func(ctx context.Context) (int, error)
	}{
		{"View.Whole", func(ctx context.Context) (n int, err error) {
			err = s.Read(ctx, "big", "", func(v *View) error {
				w, err := v.Whole(ctx)
				if err == nil {
					n = w.State.NumArtifacts()
				}
				return err
			})
			return n, err
		}},
		{"ReadCommit", func(ctx context.Context) (n int, err error) {
			err = s.ReadCommit(ctx, "big", c, func(v *View) error {
				n = v.State.NumArtifacts()
				return nil
			})
			return n, err
		}},
	}
	for _, l := range loads {
		for _, after := range []int64{1, 2, 3, 5, 8} {
			s.nodes.clear()
			ctx, cancel := context.WithCancel(context.Background())
			orig := s.kv
			d := &cancelAfterKV{Driver: orig, after: after, cancel: cancel}
			s.kv, s.readPart = d, 8
			_, err := l.load(ctx)
			s.kv, s.readPart = orig, prefetchPart
			cancel()
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cancelled after %d reads: %v", l.name, after, err)
			}
			if h := s.Health(); h != nil {
				t.Fatalf("health after a cancelled %s: %v", l.name, h)
			}
			if _, ok := s.states.Get(stateKey("big", c)); ok {
				t.Fatalf("%s cancelled after %d reads cached a state", l.name, after)
			}
			if n, err := l.load(context.Background()); err != nil || n != 5000 {
				t.Fatalf("%s after a cancelled one: %d artifacts, %v", l.name, n, err)
			}
			s.states.Clear()
		}
	}
}
