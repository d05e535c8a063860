package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// slowReads is a driver whose batched reads take a while and are
// counted while under way.
type slowReads struct {
	kv.Driver
	inFlight atomic.Int64
}

func (d *slowReads) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	time.Sleep(200 * time.Microsecond)
	return d.Driver.GetMany(ctx, keys)
}

// TestWalkReadsTheNextPartAhead walks a map of tens of thousands of
// entries, whose parts are read a window at a time: the walk reads the
// next part's nodes while it yields the one before, yields every entry
// in key order all the same, leaves no read under way once it returns
// (whether it stopped early or not), and fails on a node it cannot read
// only when it reaches it.
func TestWalkReadsTheNextPartAhead(t *testing.T) {
	ctx := context.Background()
	d := &slowReads{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	var ops []graph.Op
	for i := range 30_000 {
		ops = append(ops, notePut(fmt.Sprintf("a%05d", i), i, "x"))
	}
	root := rootOf(mustCommit(t, s, "c", ops...))

	// Every entry of the map, in key order, through the node cache.
	var want [][]byte
	if _, err := walkFrom(s, mustNode(t, s, root), nil, nil, func(k, _ []byte) bool {
		want = append(want, bytes.Clone(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) < 30_000 {
		t.Fatalf("the map holds %d entries, want at least 30,000", len(want))
	}

	walk := func(stopAt int) (got [][]byte, w *rangeWalk, err error) {
		s.nodes.clear()
		w = s.newRangeWalk(ctx, s, 2, nil, func(k, _ []byte) bool {
			got = append(got, bytes.Clone(k))
			return len(got) != stopAt
		})
		_, err = w.run(root, nil)
		if n := d.inFlight.Load(); n != 0 {
			t.Errorf("stopping at %d: %d reads still under way after the walk returned", stopAt, n)
		}
		if w.ahead != nil {
			t.Errorf("stopping at %d: the walk returned with a read ahead it had not waited for", stopAt)
		}
		return got, w, err
	}
	got, w, err := walk(-1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("the walk yielded %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
	t.Logf("read ahead: %d parts", w.readAhead)
	if w.readAhead < 5 {
		t.Errorf("%d parts were read ahead, want the walk's later parts (at least 5)", w.readAhead)
	}
	for _, stop := range []int{1, 300, 2_000, 9_999, len(want) / 2} {
		got, _, err := walk(stop)
		if err != nil || len(got) != stop {
			t.Errorf("stopping at %d: %d entries, %v", stop, len(got), err)
		}
	}

	// A node of the last part gone: a walk that stops before it does not
	// see it, one that reaches it fails.
	var last trieChild
	var down func(ref trieChild)
	down = func(ref trieChild) {
		last = ref
		if n := mustNode(t, s, ref); !n.leaf {
			for c := len(n.children) - 1; c >= 0; c-- {
				if n.children[c].count > 0 {
					down(n.children[c])
					return
				}
			}
		}
	}
	down(root)
	if err := d.Commit(ctx, kv.Batch{Deletes: [][]byte{keyNode(last.id)}}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := walk(len(want) / 2); err != nil || len(got) != len(want)/2 {
		t.Errorf("a walk stopping half way with the last leaf gone: %d entries, %v", len(got), err)
	}
	if _, _, err := walk(-1); !errors.Is(err, errNodeMissing) {
		t.Errorf("a whole walk with the last leaf gone: %v, want the missing node", err)
	}
}

func mustNode(t *testing.T, s *Store, ref trieChild) *trieNode {
	t.Helper()
	n, err := s.node(ref.id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMiddleArtifact: the middle a map names is the artifact half of its
// artifacts sort before — whatever other entries (edges, tombstones,
// trust) it holds around them — and a map of fewer than splitMin
// artifacts is not split; a view of it lists its ids in order through
// the two halves.
func TestMiddleArtifact(t *testing.T) {
	ctx := context.Background()
	s := openWithContext(t, Options{Driver: memkv.New(), ReserveBytes: -1})
	for _, n := range []int{splitMin - 1, splitMin, 3*splitMin + 17} {
		ctxID := fmt.Sprintf("c%d", n)
		if _, err := s.CreateContext(ctx, ctxID, ModeObserve); err != nil {
			t.Fatal(err)
		}
		var ops []graph.Op
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%x", i*7919%100003)
			ids = append(ids, id)
			ops = append(ops, notePut(id, i, "x"))
			if i > 0 {
				ops = append(ops, link(id, "mentions", ids[i/2]))
			}
		}
		ops = append(ops, notePut("zz-gone", 0, "x"))
		mustCommit(t, s, ctxID, ops...)
		c := mustCommit(t, s, ctxID, graph.Op{Op: graph.OpDelete, ID: "zz-gone"})
		slices.Sort(ids)
		mid, ok := newMapSource(ctx, s, ctxID, c).MiddleArtifact()
		switch {
		case n < splitMin && ok:
			t.Errorf("%d artifacts: split at %q, want no split", n, mid)
		case n >= splitMin && (!ok || mid != ids[len(ids)/2]):
			t.Errorf("%d artifacts: split at %q, %v; want %q", n, mid, ok, ids[len(ids)/2])
		}
		s.nodes.clear()
		if err := s.ReadCommit(ctx, ctxID, c, func(v *View) error {
			if got := v.State.ArtifactIDs(); !slices.Equal(got, ids) {
				t.Errorf("%d artifacts: a view lists %d ids, not the %d in order", n, len(got), len(ids))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
