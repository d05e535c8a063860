package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// nodeCalls is a driver that counts its point-read calls (those that read
// state-map nodes among others) and the keys they ask for.
type nodeCalls struct {
	*memkv.Driver
	calls, keys atomic.Int64
	// failCall, when set, is the number of the GetMany call that fails.
	failCall atomic.Int64
}

func (d *nodeCalls) Get(ctx context.Context, key []byte) ([]byte, error) {
	d.calls.Add(1)
	d.keys.Add(1)
	return d.Driver.Get(ctx, key)
}

func (d *nodeCalls) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if n := d.calls.Add(1); n == d.failCall.Load() {
		return nil, errors.New("a read that fails once")
	}
	d.keys.Add(int64(len(keys)))
	return d.Driver.GetMany(ctx, keys)
}

// TestDiffStatesPrefetched: the diff of two maps read a level at a time
// (prefetchDiff) is the diff read a node at a time — between two
// contexts' runs, which share nothing, between commits of one context,
// and between a state and an empty one — and with the node cache empty,
// the diff of two contexts' maps of 3,000 artifacts and edges each, or
// of one of them and the empty map (read whole), makes a few driver
// calls a level instead of one a node.
func TestDiffStatesPrefetched(t *testing.T) {
	ctx := context.Background()
	d := &nodeCalls{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	c := diffRun(t, s, "c", "a", 3000, 1, false)
	o := diffRun(t, s, "o", "a", 3000, 2, false)
	empty := &replay.Commit{}
	pairs := []struct {
		what     string
		from, to *replay.Commit
	}{
		{"two contexts' runs", c[2], o[2]},
		{"the same, the other way", o[2], c[2]},
		{"one context's first and last commits", c[0], c[2]},
		{"one context's last two commits", c[2], c[1]},
		{"a state and an empty one", c[2], empty},
		{"an empty state and one", empty, o[1]},
		{"a commit and itself", c[1], c[1]},
	}
	for _, p := range pairs {
		want, err := rawDiffOver(ctx, s, p.from, p.to)
		if err != nil {
			t.Fatal(err)
		}
		s.nodes.clear()
		before := d.calls.Load()
		got, err := s.DiffStates(ctx, p.from, p.to)
		if err != nil {
			t.Fatal(err)
		}
		calls := d.calls.Load() - before
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the prefetched diff differs: %d added, %d removed, %d changed, %d edges added, %d removed; want %d, %d, %d, %d, %d",
				p.what, len(got.Added), len(got.Removed), len(got.Changed), len(got.EdgesAdded), len(got.EdgesRemoved),
				len(want.Added), len(want.Removed), len(want.Changed), len(want.EdgesAdded), len(want.EdgesRemoved))
		}
		if p.what == "two contexts' runs" {
			if len(want.Changed) < 2990 || len(want.EdgesAdded) < 2900 {
				t.Fatalf("%s: %d artifacts changed, %d edges added: the runs share more than the test means", p.what, len(want.Changed), len(want.EdgesAdded))
			}
		}
		if p.from == p.to && calls != 0 {
			t.Errorf("%s: %d driver calls; a diff of a map with itself reads nothing", p.what, calls)
		}
		if (p.what == "two contexts' runs" || p.what == "a state and an empty one") && calls > 24 {
			t.Errorf("%s: %d driver calls with the node cache empty; want a few a level", p.what, calls)
		}
	}
}

// TestDiffWindowsMatchTheWholeDiff: a diff read a window at a time
// (diffWindows, with windows far smaller than the maps) lists exactly
// what the diff read node by node does — between commits of one context
// (aligned windows), between two contexts whose ids share nothing (the
// merged walks, the larger side pushed either way), between a state and
// the empty one, and between maps with a few shared and many distinct
// keys — and stops with its context.
func TestDiffWindowsMatchTheWholeDiff(t *testing.T) {
	ctx := context.Background()
	s := openWithContext(t, Options{NoSync: true})
	s.diffWindow = 300
	c := diffRun(t, s, "c", "a", 3000, 1, true)
	o := diffRun(t, s, "o", "s", 1200, 2, true)
	p := diffRun(t, s, "p", "a", 2000, 3, true)
	empty := &replay.Commit{}
	for _, pr := range []struct {
		what     string
		from, to *replay.Commit
	}{
		{"one context's first and last commits", c[0], c[2]},
		{"one context's last two commits", c[2], c[1]},
		{"two contexts sharing no id, the larger first", c[2], o[2]},
		{"the same, the smaller first", o[2], c[2]},
		{"two contexts with the same ids", c[2], p[2]},
		{"the same, the other way", p[1], c[2]},
		{"a state and an empty one", c[2], empty},
		{"an empty state and one", empty, o[1]},
	} {
		want, err := rawDiffOver(ctx, s, pr.from, pr.to)
		if err != nil {
			t.Fatal(err)
		}
		if pr.from != pr.to && len(want.Added)+len(want.Removed)+len(want.Changed) == 0 {
			t.Fatalf("%s: the diff is empty; the test means it not to be", pr.what)
		}
		// And against the diff of the two states loaded whole.
		whole := wholeDiff(t, s, pr.from, pr.to)
		if !reflect.DeepEqual(whole, want) {
			t.Errorf("%s: the maps' diff differs from the whole states' diff: %d added, %d removed, %d changed, %d edges added, %d removed; want %d, %d, %d, %d, %d",
				pr.what, len(want.Added), len(want.Removed), len(want.Changed), len(want.EdgesAdded), len(want.EdgesRemoved),
				len(whole.Added), len(whole.Removed), len(whole.Changed), len(whole.EdgesAdded), len(whole.EdgesRemoved))
		}
		s.nodes.clear()
		got, err := s.DiffStates(ctx, pr.from, pr.to)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the diff in windows differs: %d added, %d removed, %d changed, %d edges added, %d removed; want %d, %d, %d, %d, %d",
				pr.what, len(got.Added), len(got.Removed), len(got.Changed), len(got.EdgesAdded), len(got.EdgesRemoved),
				len(want.Added), len(want.Removed), len(want.Changed), len(want.EdgesAdded), len(want.EdgesRemoved))
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.DiffStates(rctx, c[2], o[2]); !errors.Is(err, context.Canceled) {
		t.Errorf("a diff under an ended context: %v, want context.Canceled", err)
	}
}

// TestMergeWalksStopsAtAFailedRead: when a node of the side the merge of
// two walks pulls is gone, the merge returns the failed read without
// going on through the side it pushes — a diff read node by node would
// call fn no more either.
func TestMergeWalksStopsAtAFailedRead(t *testing.T) {
	ctx := context.Background()
	d := memkv.New()
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	s.diffWindow = 300
	fill := func(ctxID, format string, n int) *replay.Commit {
		if ctxID != "c" {
			if _, err := s.CreateContext(ctx, ctxID, ModeObserve); err != nil {
				t.Fatal(err)
			}
		}
		var ops []graph.Op
		for i := range n {
			ops = append(ops, notePut(fmt.Sprintf(format, i), i, "x"))
		}
		return mustCommit(t, s, ctxID, ops...)
	}
	small, big := fill("c", "a0%05d", 3000), fill("o", "a1%05d", 8000)
	// A leaf of the small side's artifacts, half way through them.
	var leaves []trieChild
	var collect func(ref trieChild) error
	collect = func(ref trieChild) error {
		n, err := s.node(ref.id)
		if err != nil || n.leaf {
			if err == nil && len(n.entries) > 0 && bytes.HasPrefix(n.entries[0].key, []byte("aa0")) {
				leaves = append(leaves, ref)
			}
			return err
		}
		for _, c := range n.children {
			if c.count > 0 {
				if err := collect(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := collect(rootOf(small)); err != nil {
		t.Fatal(err)
	}
	gone := leaves[len(leaves)/2]
	if err := d.Commit(ctx, kv.Batch{Deletes: [][]byte{keyNode(gone.id)}}); err != nil {
		t.Fatal(err)
	}
	s.nodes.clear()
	for _, order := range [][2]*replay.Commit{{small, big}, {big, small}} {
		calls := 0
		err := s.diffWindows(ctx, rootOf(order[0]), rootOf(order[1]), 2, func(k, old, new []byte) error {
			calls++
			return nil
		})
		if !errors.Is(err, errNodeMissing) {
			t.Fatalf("a diff with a node gone: %v, want the missing node", err)
		}
		if calls >= 3000 {
			t.Errorf("the merge called fn %d times; the side it pulls failed half way through its 3,000 entries", calls)
		}
	}
}

// wholeDiff is replay.Diff of the states at commits from and to (the
// empty commit: the empty state) loaded whole, without trust.
func wholeDiff(t *testing.T, s *Store, from, to *replay.Commit) *replay.DiffResult {
	t.Helper()
	ctx := context.Background()
	load := func(c *replay.Commit) *graph.State {
		if c.RootCount == 0 {
			return graph.NewState(nil)
		}
		var st *graph.State
		for _, ctxID := range []string{"c", "o", "p"} {
			if err := s.ReadCommit(ctx, ctxID, c, func(v *View) error { st = v.State.Clone(); return nil }); err == nil {
				return st
			}
		}
		t.Fatalf("commit %s is of none of the test's contexts", c.ID.Short())
		return nil
	}
	return replay.Diff(load(from), load(to), nil, nil)
}

// diffRun writes, in three commits into context ctxID (created unless it
// is "c"), n artifacts prefix0, prefix1, … each (but the first) derived
// from an earlier one picked by seed, and returns the commits; with
// shared, the last commit also writes two artifacts every such run has,
// one the same in all, one differing by seed.
func diffRun(t *testing.T, s *Store, ctxID, prefix string, n, seed int, shared bool) []*replay.Commit {
	t.Helper()
	if ctxID != "c" {
		if _, err := s.CreateContext(context.Background(), ctxID, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	var commits []*replay.Commit
	for part := range 3 {
		var ops []graph.Op
		for i := part * n / 3; i < (part+1)*n/3; i++ {
			id := fmt.Sprintf("%s%d", prefix, i)
			ops = append(ops, notePut(id, i*seed, "run"))
			if i > 0 {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("%s%d", prefix, (i*7919+seed)%i)})
			}
		}
		if part == 2 && shared {
			ops = append(ops, notePut("shared-1", 1, "same"), notePut("shared-2", seed, "differs"))
		}
		commits = append(commits, mustCommit(t, s, ctxID, ops...))
	}
	return commits
}
