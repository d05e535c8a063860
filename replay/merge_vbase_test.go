package replay

import (
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// oneSidedCrissCross builds a criss-cross in which only x touches
// artifact a: main holds b0; x adds a=v1 with an edge a -mentions-> b0
// {p:1} (x1) and y adds b (y1), x's commit first or y's; x merges y1 and
// y merges x1, so x and y have two merge bases, x1 and y1, whose own
// merge base (main's commit) lacks a. Then x commits after.
func oneSidedCrissCross(t *testing.T, xFirst bool, after ...graph.Op) *memChain {
	t.Helper()
	m := newMemChain(t)
	m.commit("main", tPut("b0", "note", map[string]any{}))
	m.branch("x", "main")
	m.branch("y", "main")
	xOps := []graph.Op{tPut("a", "note", map[string]any{"v": 1}), tLinkAttrs("a", "mentions", "b0", map[string]any{"p": 1})}
	var x1, y1 *Commit
	if xFirst {
		x1, y1 = m.commit("x", xOps...), m.commit("y", tPut("b", "note", map[string]any{}))
	} else {
		y1, x1 = m.commit("y", tPut("b", "note", map[string]any{})), m.commit("x", xOps...)
	}
	if _, err := m.mergeCommit("x", y1.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := m.mergeCommit("y", x1.ID, nil); err != nil {
		t.Fatal(err)
	}
	m.commit("x", after...)
	return m
}

// TestMergeCrissCrossOneSidedAddThenEdit: x added a (and an edge of it)
// before the criss-cross and edits both after it. The merge bases
// disagree on a (x1 has it, y1 does not), but only x1 changed it since
// their own merge base, so the virtual base holds a=v1: merging y into x
// keeps x's edit, merging x into y takes it, without a conflict, in
// both commit orders, to the same state.
func TestMergeCrissCrossOneSidedAddThenEdit(t *testing.T) {
	edit := []graph.Op{tPut("a", "note", map[string]any{"v": 2}), tLinkAttrs("a", "mentions", "b0", map[string]any{"p": 2})}
	hashes := map[string]hashing.Digest{}
	for _, xFirst := range []bool{true, false} {
		for _, into := range []string{"x", "y"} {
			name := fmt.Sprintf("x's commit first %v, into %s", xFirst, into)
			m := oneSidedCrissCross(t, xFirst, edit...)
			other := map[string]string{"x": "y", "y": "x"}[into]
			out, err := m.merge(into, other, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(out.Bases) != 2 || out.Ancestor == nil || out.Ancestor.ID != m.heads["main"] {
				t.Fatalf("%s: %d merge bases, their ancestor %v; want 2, and main's commit", name, len(out.Bases), out.Ancestor)
			}
			st := m.state(into)
			if a := st.Artifact("a"); a == nil || a.ContentHash != hashing.ContentHash(tPut("a", "note", map[string]any{"v": 2}).Data) {
				t.Errorf("%s: a after the merge %+v, want v2 (ops %s)", name, a, mustJSON(t, out.Plan.Ops))
			}
			if e := st.Edge(graph.EdgeKey{From: "a", Rel: "mentions", To: "b0"}); e == nil || string(e.Attrs) != `{"p":2}` {
				t.Errorf("%s: edge after the merge %+v, want p=2", name, e)
			}
			if h, ok := hashes[into]; ok && h != out.Plan.ContextHash {
				t.Errorf("%s: hash %s, the other commit order %s", name, out.Plan.ContextHash, h)
			}
			hashes[into] = out.Plan.ContextHash
		}
	}
}

// TestMergeCrissCrossOneSidedDelete: x added a before the criss-cross
// and deletes it after; merging y (which still has a as x1 added it)
// into x, or x into y, deletes a without a conflict, in both orders.
func TestMergeCrissCrossOneSidedDelete(t *testing.T) {
	for _, xFirst := range []bool{true, false} {
		for _, into := range []string{"x", "y"} {
			name := fmt.Sprintf("x's commit first %v, into %s", xFirst, into)
			m := oneSidedCrissCross(t, xFirst, tUnlink("a", "mentions", "b0"), tDel("a"))
			other := map[string]string{"x": "y", "y": "x"}[into]
			out, err := m.merge(into, other, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			st := m.state(into)
			if st.Artifact("a") != nil || st.Edge(graph.EdgeKey{From: "a", Rel: "mentions", To: "b0"}) != nil || st.Artifact("b") == nil {
				t.Errorf("%s: a or its edge left, or b gone, after the merge (ops %s)", name, mustJSON(t, out.Plan.Ops))
			}
		}
	}
}

// TestMergeCrissCrossBothBasesChangedConflicts: when each merge base
// changed z differently since their own merge base (the reviewer's
// criss-cross, z=a against z=b from z=base), there is no virtual base
// for z and a side that edits it afterwards still conflicts (marked
// BasesDisagree, no base).
func TestMergeCrissCrossBothBasesChangedConflicts(t *testing.T) {
	for _, xFirst := range []bool{true, false} {
		m := reviewCrissCross(t, xFirst)
		m.commit("x", tPut("z", "note", map[string]any{"v": "c"}))
		_, err := m.merge("x", "y", nil)
		var ce *ConflictError
		if !errors.As(err, &ce) || conflictSummary(ce.Conflicts) != "z=edit_edit" || !ce.Conflicts[0].BasesDisagree || ce.Conflicts[0].Base != nil {
			t.Errorf("x's commit first %v: %v; want one edit_edit on z, bases disagreeing", xFirst, err)
		}
	}
}
