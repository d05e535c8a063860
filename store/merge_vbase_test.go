package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// storeOneSidedCrissCross builds in s replay's one-sided criss-cross:
// main holds b0; x adds a=v1 with an edge a -mentions-> b0 {p:1} and y
// adds b (x's commit first or y's); each merges the other's commit; then
// x commits after. It returns main's commit, the merge bases' own merge
// base.
func storeOneSidedCrissCross(t *testing.T, s *Store, xFirst bool, after ...graph.Op) hashing.Digest {
	t.Helper()
	ctx := context.Background()
	b := mustCommit(t, s, "c", put("b0", "note", map[string]any{}))
	for _, br := range []string{"x", "y"} {
		if err := s.CreateBranch(ctx, "c", br, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	cm := func(br string, ops ...graph.Op) *replay.Commit {
		r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br, Author: "t", Message: "m", Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return r.Commit
	}
	xOps := []graph.Op{put("a", "note", map[string]any{"v": 1}), linkWith("a", "mentions", "b0", `{"p":1}`)}
	var x1, y1 *replay.Commit
	if xFirst {
		x1, y1 = cm("x", xOps...), cm("y", put("b", "note", map[string]any{}))
	} else {
		y1, x1 = cm("y", put("b", "note", map[string]any{})), cm("x", xOps...)
	}
	for _, m := range [][2]string{{"x", y1.ID.String()}, {"y", x1.ID.String()}} {
		if _, err := s.Merge(ctx, "c", m[0], m[1], nil, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	cm("x", after...)
	return b.ID
}

// TestStoreMergeCrissCrossOneSided: after a criss-cross in which only x
// added a (and an edge of it), x edits them, or deletes them; merging y
// into x, or x into y, is clean — the virtual base of the merge bases
// holds a as x added it — and the store's merge returns what
// replay.MergeCommits returns (ops, hash), the same in both commit
// orders, its merge commit folds to its hash and fsck finds nothing.
func TestStoreMergeCrissCrossOneSided(t *testing.T) {
	ctx := context.Background()
	cases := map[string][]graph.Op{
		"edit":   {put("a", "note", map[string]any{"v": 2}), linkWith("a", "mentions", "b0", `{"p":2}`)},
		"delete": {{Op: graph.OpUnlink, From: "a", Rel: "mentions", To: "b0"}, {Op: graph.OpDelete, ID: "a"}},
	}
	for _, kind := range []string{"edit", "delete"} {
		for _, into := range []string{"x", "y"} {
			hashes := map[bool]hashing.Digest{}
			for _, xFirst := range []bool{true, false} {
				name := fmt.Sprintf("%s, x's commit first %v, into %s", kind, xFirst, into)
				s := crissCrossStore(t)
				anc := storeOneSidedCrissCross(t, s, xFirst, cases[kind]...)
				other := map[string]string{"x": "y", "y": "x"}[into]
				ours, theirs := mustResolve(t, s, "c", into), mustResolve(t, s, "c", other)
				want, err := replay.MergeCommits(ctx, s.Source("c"), ours.ID, theirs.ID, nil, replay.Options{})
				if err != nil {
					t.Fatalf("%s: replay.MergeCommits: %v", name, err)
				}
				got, err := s.Merge(ctx, "c", into, other, nil, "", "")
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(got.Bases) != 2 || got.BasesAncestor == nil || *got.BasesAncestor != anc {
					t.Errorf("%s: bases %v, their ancestor %v; want two, and %s", name, got.Bases, got.BasesAncestor, anc.Short())
				}
				if g, w := mergeOutcome(t, got.Ops, got.Commit.ContextHash, got.Resolved, got.Unused, nil),
					mergeOutcome(t, want.Plan.Ops, want.Plan.ContextHash, want.Plan.Resolved, want.Plan.Unused, nil); g != w {
					t.Fatalf("%s: the store merged\n%s\nreplay.MergeCommits\n%s", name, g, w)
				}
				var a *graph.Artifact
				var e *graph.Edge
				if err := s.Read(ctx, "c", into, func(v *View) error {
					a, e = v.State.Artifact("a"), v.State.Edge(graph.EdgeKey{From: "a", Rel: "mentions", To: "b0"})
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				switch {
				case kind == "edit" && (a == nil || a.ContentHash != hashing.ContentHash(cases[kind][0].Data) || e == nil || string(e.Attrs) != `{"p":2}`):
					t.Errorf("%s: a %+v, edge %+v after the merge; want x's edits", name, a, e)
				case kind == "delete" && (a != nil || e != nil):
					t.Errorf("%s: a %+v, edge %+v after the merge; want both gone", name, a, e)
				}
				if _, err := replay.Fold(ctx, s.Source("c"), got.Commit.ID, replay.Options{}); err != nil {
					t.Fatalf("%s: fold of the merge commit: %v", name, err)
				}
				mustCheck(t, s)
				hashes[xFirst] = got.Commit.ContextHash
			}
			if hashes[true] != hashes[false] {
				t.Errorf("%s into %s: the two commit orders hash to %s and %s", kind, into, hashes[true], hashes[false])
			}
		}
	}
}
