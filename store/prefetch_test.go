package store

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

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
// audit's, View.Whole) reads its map's nodes at most readerWorkers parts
// at once — half the cores — while a head loaded whole for the committer
// still reads prefetchWorkers at once. A read that took every processor
// left other contexts' commits waiting to be scheduled.
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
