package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

// TestAfterOverTheMapMatchesWhole: a head over its state map with
// commits above it, and a view of an older commit read through its map
// alone (ReadSparse), yield the artifacts after an id and the edges after
// an edge key exactly as the same states loaded whole do — for cursors
// that are ids, between ids, past them all, longer than any id, and
// garbage with zero bytes (an edge key whose From or Rel holds one sorts
// differently by its bytes, which is how the map orders them).
func TestAfterOverTheMapMatchesWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "a-", "a-b", "a.b", "a/b", "a/b/c", "ab", "abc", "b", "bé", "béx", "effect:", "effect:1", "z", "zz", "~"}
	var ops []graph.Op
	for _, id := range ids {
		ops = append(ops, put(id, "claim", map[string]any{"id": id}))
	}
	for i, a := range ids {
		for j, b := range ids {
			if (i*7+j*3)%5 == 0 && a != b {
				ops = append(ops, link(a, []string{"cites", "mentions", "contradicts"}[(i+j)%3], b))
			}
		}
	}
	ops = append(ops, put("q-lonely", "claim", map[string]any{}))
	first := mustCommit(t, s, "c", ops...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	mustCommit(t, s, "c", put("a-a", "claim", map[string]any{}), graph.Op{Op: graph.OpDelete, ID: "q-lonely"},
		graph.Op{Op: graph.OpUnlink, From: "a", Rel: "contradicts", To: "a/b/c"}, link("a-a", "cites", "a"))
	cursors := []string{"", "\x00", "\xff", "\xff\xff\xff", "a\x00", "a\x00\x00", "a-\x00b", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}
	for _, id := range append(ids, "a-a") {
		cursors = append(cursors, id, id+"\x00", id+"!", id[:len(id)-1])
	}
	var edgeCursors []graph.EdgeKey
	for _, c := range cursors {
		edgeCursors = append(edgeCursors, graph.EdgeKey{From: c}, graph.EdgeKey{From: c, Rel: "cites"}, graph.EdgeKey{From: c, Rel: "cites\x00"},
			graph.EdgeKey{From: c, Rel: "cites", To: "a"}, graph.EdgeKey{From: c, Rel: "d", To: "\x00x"}, graph.EdgeKey{From: c, Rel: "mentions", To: "zzzzzzzzzzzzzzzzz\x00"})
	}
	check := func(what string, v *View) error {
		if !v.State.IsLazy() {
			return fmt.Errorf("%s: not read through its map", what)
		}
		w, err := v.Whole(ctx)
		if err != nil {
			return err
		}
		for _, c := range cursors {
			var got, want []string
			for a := range v.State.ArtifactsAfter(c) {
				got = append(got, a.ID+" "+a.Type)
			}
			for a := range w.State.ArtifactsAfter(c) {
				want = append(want, a.ID+" "+a.Type)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s: after %q: %q, want %q", what, c, got, want)
			}
		}
		for _, k := range edgeCursors {
			var got, want []graph.EdgeKey
			for e := range v.State.EdgesAfter(k) {
				got = append(got, e.Key())
			}
			for e := range w.State.EdgesAfter(k) {
				want = append(want, e.Key())
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s: edges after %q: %d %v, want %d %v", what, k, len(got), got, len(want), want)
			}
		}
		return v.Err()
	}
	if err := s.Read(ctx, "c", "", func(v *View) error { return check("the head", v) }); err != nil {
		t.Fatal(err)
	}
	if err := s.ReadSparse(ctx, "c", first, func(v *View) error { return check("the first commit", v) }); err != nil {
		t.Fatal(err)
	}
}

// TestAfterStopsWhenTheReadEnds: a walk from a key over a view's map —
// a page whose filter matches little — stops soon after the read's
// context ends, as a whole walk does, and the read reports the context's
// error rather than a short answer.
func TestAfterStopsWhenTheReadEnds(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 80_000
	var ops []graph.Op
	for i := range n {
		ops = append(ops, put(fmt.Sprintf("a%06d", i), "claim", map[string]any{}))
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("later", "claim", map[string]any{}))
	walk := func(what string, each func(st *graph.State, fn func())) {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		seen := 0
		err := s.ReadSparse(rctx, "c", old, func(v *View) error {
			if !v.State.IsLazy() {
				return errors.New("not read through its map")
			}
			each(v.State, func() {
				if seen++; seen == 10 {
					cancel() // the client went away
				}
			})
			return nil
		})
		if !errors.Is(err, context.Canceled) || seen-10 > 2*afterCheck {
			t.Errorf("%s: walked %d of %d entries after the read's context ended, and the read returned %v", what, seen-10, n, err)
		}
	}
	walk("ArtifactsAfter", func(st *graph.State, fn func()) {
		for range st.ArtifactsAfter("") {
			fn()
		}
	})
	walk("ArtifactsAfter from an id", func(st *graph.State, fn func()) {
		for range st.ArtifactsAfter("a000100") {
			fn()
		}
	})
}
