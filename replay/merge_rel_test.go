package replay

import (
	"errors"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

// TestMergeCycleThroughRelationTheirsDefines: a dependency relation that
// only theirs defines still carries dependencies in the merge. A cycle its
// edges close with ours' is a cycle conflict up front, and the resolution
// of that conflict settles it, so the merge lands.
func TestMergeCycleThroughRelationTheirsDefines(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours", tLink("p1", "uses", "p2"))
	m.commit("theirs",
		tPut(graph.RelationDefID("rests_on"), graph.TypeRelationDef, map[string]any{"name": "rests_on", "depends": true}),
		tLink("p2", "rests_on", "p1"))
	ce := mustConflict(t, m, nil, "cycle:p2 -rests_on-> p1=cycle")
	if c := ce.Conflicts[0]; c.Edge == nil || c.Edge.Rel != "rests_on" {
		t.Fatalf("cycle conflict: %s", mustJSON(t, c))
	}
	for _, take := range []string{TakeOurs, TakeTheirs} {
		mm := mergeFixture(t)
		mm.commit("ours", tLink("p1", "uses", "p2"))
		mm.commit("theirs",
			tPut(graph.RelationDefID("rests_on"), graph.TypeRelationDef, map[string]any{"name": "rests_on", "depends": true}),
			tLink("p2", "rests_on", "p1"))
		out, err := mm.merge("ours", "theirs", map[string]Resolution{"cycle:p2 -rests_on-> p1": {Take: take}})
		var again *ConflictError
		if errors.As(err, &again) {
			t.Fatalf("take %s: the resolved cycle is asked about again: %s", take, conflictSummary(again.Conflicts))
		}
		if err != nil {
			t.Fatalf("take %s: %v", take, err)
		}
		if len(out.Plan.Unused) != 0 || len(out.Plan.Resolved) != 1 {
			t.Fatalf("take %s: resolved %s, unused %v", take, conflictSummary(out.Plan.Resolved), out.Plan.Unused)
		}
		st := mm.state("ours")
		ours := st.Edge(graph.EdgeKey{From: "p1", Rel: "uses", To: "p2"}) != nil
		theirs := st.Edge(graph.EdgeKey{From: "p2", Rel: "rests_on", To: "p1"}) != nil
		if ours != (take == TakeOurs) || theirs != (take == TakeTheirs) {
			t.Fatalf("take %s: ours' edge %v, theirs' edge %v", take, ours, theirs)
		}
	}
}

// TestMergeOneResolutionSettlesACycleReportedTwice: one cycle closed by
// two of theirs' edges is reported at both (either one closes it). A
// resolution of either settles it: the merge lands with the edge that
// resolution names dropped and the other kept, not with the other
// conflict asked about again — nor, once both are answered, with the
// resolution given first ignored and the other edge dropped instead.
func TestMergeOneResolutionSettlesACycleReportedTwice(t *testing.T) {
	setup := func() *memChain {
		m := mergeFixture(t)
		m.commit("ours", tLink("p1", "uses", "n"), tLink("x", "uses", "p2"))
		m.commit("theirs", tLink("n", "uses", "x"), tLink("p2", "uses", "p1"))
		return m
	}
	mustConflict(t, setup(), nil, "cycle:n -uses-> x=cycle cycle:p2 -uses-> p1=cycle")
	nx := graph.EdgeKey{From: "n", Rel: "uses", To: "x"}
	p2p1 := graph.EdgeKey{From: "p2", Rel: "uses", To: "p1"}
	for _, c := range []struct {
		key        string
		drop, keep graph.EdgeKey
	}{
		{"cycle:n -uses-> x", nx, p2p1},
		{"cycle:p2 -uses-> p1", p2p1, nx},
	} {
		m := setup()
		out, err := m.merge("ours", "theirs", map[string]Resolution{c.key: {Take: TakeOurs}})
		if err != nil {
			t.Fatalf("resolving %s: %v", c.key, err)
		}
		st := m.state("ours")
		if st.Edge(c.drop) != nil || st.Edge(c.keep) == nil || len(out.Plan.Unused) != 0 {
			t.Fatalf("resolving %s: %s dropped %v, %s kept %v, unused %v", c.key, c.drop, st.Edge(c.drop) == nil, c.keep, st.Edge(c.keep) != nil, out.Plan.Unused)
		}
	}
}

// TestMergeCycleTakeTheirsBreaksEveryPath: taking theirs for a cycle
// keeps theirs' edge and drops ours' edges along the cycle — along every
// path that closes it, not only the shortest: with two paths of ours back
// to theirs' edge, the resolution settles the conflict instead of the
// same conflict coming back with it.
func TestMergeCycleTakeTheirsBreaksEveryPath(t *testing.T) {
	setup := func() *memChain {
		m := mergeFixture(t)
		m.commit("ours", tLink("p1", "uses", "n"), tLink("n", "uses", "p2"), tLink("p1", "uses", "x"), tLink("x", "uses", "p2"))
		m.commit("theirs", tLink("p2", "uses", "p1"))
		return m
	}
	mustConflict(t, setup(), nil, "cycle:p2 -uses-> p1=cycle")
	m := setup()
	out, err := m.merge("ours", "theirs", map[string]Resolution{"cycle:p2 -uses-> p1": {Take: TakeTheirs}})
	if err != nil {
		t.Fatalf("take theirs: %v", err)
	}
	st := m.state("ours")
	if st.Edge(graph.EdgeKey{From: "p2", Rel: "uses", To: "p1"}) == nil || len(out.Plan.Resolved) != 1 {
		t.Fatalf("theirs' edge kept %v, resolved %s", st.Edge(graph.EdgeKey{From: "p2", Rel: "uses", To: "p1"}) != nil, conflictSummary(out.Plan.Resolved))
	}
	if st.Edge(graph.EdgeKey{From: "p1", Rel: "uses", To: "n"}) != nil && st.Edge(graph.EdgeKey{From: "n", Rel: "uses", To: "p2"}) != nil ||
		st.Edge(graph.EdgeKey{From: "p1", Rel: "uses", To: "x"}) != nil && st.Edge(graph.EdgeKey{From: "x", Rel: "uses", To: "p2"}) != nil {
		t.Fatal("a path of ours closing the cycle is left whole")
	}
}
