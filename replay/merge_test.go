package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// mergeFixture returns a chain whose main holds a small graph, with
// branches ours and theirs at main.
func mergeFixture(t *testing.T) *memChain {
	m := newMemChain(t)
	m.commit("main",
		tPut("q", "question", map[string]any{"text": "why?"}),
		tPut("f", "fetch_verdict", verdict("RETRIEVED")),
		tPut("c", "claim", map[string]any{"text": "base"}),
		tPut("a", "answer", map[string]any{"text": "answer"}),
		tPut("n", "note", map[string]any{"n": 0}),
		tPut("x", "note", map[string]any{"x": 0}),
		tPut("p1", "note", map[string]any{}),
		tPut("p2", "note", map[string]any{"p": 2}),
		tLink("c", "derived_from", "f"),
		tLink("a", "supported_by", "c"),
		tLink("x", "mentions", "q"),
	)
	m.branch("ours", "main")
	m.branch("theirs", "main")
	return m
}

func conflictSummary(cs []Conflict) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s", c.Key, c.Kind))
	}
	return strings.Join(parts, " ")
}

// mustConflict merges theirs into ours and expects exactly the listed
// conflicts, all at once, with ours' head unchanged.
func mustConflict(t *testing.T, m *memChain, res map[string]Resolution, want string) *ConflictError {
	t.Helper()
	before := m.head("ours")
	_, err := m.merge("ours", "theirs", res)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
		t.Fatalf("merge: %v, want a *ConflictError", err)
	}
	if got := conflictSummary(ce.Conflicts); got != want {
		t.Fatalf("conflicts:\n got %s\nwant %s", got, want)
	}
	if m.head("ours") != before {
		t.Fatal("a refused merge moved ours")
	}
	return ce
}

func TestMergeConflictEditEdit(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours", tPut("c", "claim", map[string]any{"text": "ours"}))
	m.commit("theirs", tPut("c", "claim", map[string]any{"text": "theirs"}))
	ce := mustConflict(t, m, nil, "c=edit_edit")
	c := ce.Conflicts[0]
	if c.Base == nil || c.Base.Version != 1 || c.Ours.Version != 2 || c.Theirs.Version != 2 || c.Ours.ContentHash == c.Theirs.ContentHash {
		t.Fatalf("conflict sides: %s", mustJSON(t, c))
	}
}

func TestMergeConflictDeleteEdit(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours", tDel("n"))
	m.commit("theirs", tPut("n", "note", map[string]any{"n": 1}))
	ce := mustConflict(t, m, nil, "n=delete_edit")
	if c := ce.Conflicts[0]; c.Ours != nil || c.Theirs == nil || c.Base == nil {
		t.Fatalf("conflict sides: %s", mustJSON(t, c))
	}
	// And the mirror image.
	m = mergeFixture(t)
	m.commit("ours", tPut("n", "note", map[string]any{"n": 1}))
	m.commit("theirs", tDel("n"))
	mustConflict(t, m, nil, "n=delete_edit")
}

func TestMergeConflictEdgeToDeleted(t *testing.T) {
	m := mergeFixture(t)
	m.commit("theirs", tUnlink("x", "mentions", "q"), tDel("x"))
	m.commit("ours", tLink("a", "mentions", "x"), tLink("p1", "uses", "x"))
	ce := mustConflict(t, m, nil, "x=dangling_edge")
	c := ce.Conflicts[0]
	if c.DeletedBy != "theirs" || len(c.Edges) != 2 || c.Edges[0].From != "a" || c.Edges[1].From != "p1" {
		t.Fatalf("dangling conflict: %s", mustJSON(t, c))
	}
	// Ours deleted, theirs linked.
	m = mergeFixture(t)
	m.commit("ours", tUnlink("x", "mentions", "q"), tDel("x"))
	m.commit("theirs", tLink("a", "mentions", "x"))
	ce = mustConflict(t, m, nil, "x=dangling_edge")
	if ce.Conflicts[0].DeletedBy != "ours" {
		t.Fatalf("deleted_by = %q", ce.Conflicts[0].DeletedBy)
	}
}

func TestMergeConflictCycle(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours", tLink("p1", "uses", "p2"))
	m.commit("theirs", tLink("p2", "derived_from", "p1"))
	ce := mustConflict(t, m, nil, "cycle:p2 -derived_from-> p1=cycle")
	if got := strings.Join(ce.Conflicts[0].Cycle, " "); got != "p2 p1 p2" {
		t.Fatalf("cycle = %s", got)
	}
	// A cycle through several edges of each side.
	m = mergeFixture(t)
	m.commit("ours", tLink("p1", "uses", "n"), tLink("x", "uses", "p2"))
	m.commit("theirs", tLink("n", "uses", "x"), tLink("p2", "uses", "p1"))
	ce = mustConflict(t, m, nil, "cycle:n -uses-> x=cycle cycle:p2 -uses-> p1=cycle")
	if got := strings.Join(ce.Conflicts[0].Cycle, " "); got != "n x p2 p1 n" {
		t.Fatalf("cycle = %s", got)
	}
}

// TestMergeAllConflictsAtOnce puts every kind in one merge: all are
// reported together, and the clean changes beside them are not applied.
func TestMergeAllConflictsAtOnce(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours",
		tPut("c", "claim", map[string]any{"text": "ours"}),
		tDel("n"),
		tLink("a", "mentions", "x"),
		tLink("p1", "uses", "p2"),
		tLinkAttrs("a", "cites", "q", map[string]any{"w": 1}),
		tPut("o1", "note", map[string]any{"clean": "ours"}))
	m.commit("theirs",
		tPut("c", "claim", map[string]any{"text": "theirs"}),
		tPut("n", "note", map[string]any{"n": 1}),
		tUnlink("x", "mentions", "q"), tDel("x"),
		tLink("p2", "derived_from", "p1"),
		tLinkAttrs("a", "cites", "q", map[string]any{"w": 2}),
		tPut("t1", "note", map[string]any{"clean": "theirs"}))
	ce := mustConflict(t, m, nil, "c=edit_edit cycle:p2 -derived_from-> p1=cycle edge:a -cites-> q=edge_attrs n=delete_edit x=dangling_edge")
	for _, c := range ce.Conflicts {
		if c.Detail == "" {
			t.Errorf("%s: no detail", c.Key)
		}
	}
	// Resolving only some of them still reports the rest, and applies
	// nothing.
	mustConflict(t, m, map[string]Resolution{"c": {Take: TakeOurs}, "n": {Take: TakeTheirs}},
		"cycle:p2 -derived_from-> p1=cycle edge:a -cites-> q=edge_attrs x=dangling_edge")
	// All resolved: one merge commit.
	out, err := m.merge("ours", "theirs", map[string]Resolution{
		"c": {Take: TakeOurs}, "n": {Take: TakeTheirs}, "x": {Take: TakeOurs},
		"cycle:p2 -derived_from-> p1": {Take: TakeOurs},
		"edge:a -cites-> q":           {Value: json.RawMessage(`{"w":3}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := m.state("ours")
	if a := st.Artifact("c"); a.ContentHash != hashing.ContentHash([]byte(`{"text":"ours"}`)) {
		t.Errorf("c = %+v", a)
	}
	if a := st.Artifact("n"); a == nil || a.Version != 2 || a.ContentHash != hashing.ContentHash([]byte(`{"n":1}`)) {
		t.Errorf("n = %+v", a)
	}
	if st.Artifact("x") == nil || st.Edge(graph.EdgeKey{From: "a", Rel: "mentions", To: "x"}) == nil {
		t.Error("x kept by ours, with ours' edge to it")
	}
	if st.Edge(graph.EdgeKey{From: "x", Rel: "mentions", To: "q"}) != nil {
		t.Error("theirs' unlink of x -mentions-> q is a clean change and is taken")
	}
	if st.Edge(graph.EdgeKey{From: "p2", Rel: "derived_from", To: "p1"}) != nil || st.Edge(graph.EdgeKey{From: "p1", Rel: "uses", To: "p2"}) == nil {
		t.Error("cycle resolved with ours: theirs' edge dropped")
	}
	if e := st.Edge(graph.EdgeKey{From: "a", Rel: "cites", To: "q"}); e == nil || string(e.Attrs) != `{"w":3}` {
		t.Errorf("edge attrs value: %+v", e)
	}
	if st.Artifact("o1") == nil || st.Artifact("t1") == nil {
		t.Error("clean changes of both sides are in the merge")
	}
	if len(out.Plan.Resolved) != 5 || len(out.Plan.Unused) != 0 {
		t.Errorf("resolved %d, unused %v", len(out.Plan.Resolved), out.Plan.Unused)
	}
	if h := m.head("ours"); len(h.Parents) != 2 || h.Parents[1] != m.heads["theirs"] {
		t.Error("merge commit parents")
	}
	// The merged chain folds.
	if _, err := Fold(context.Background(), m, m.heads["ours"], Options{Objects: ObjectsAll}); err != nil {
		t.Fatal(err)
	}
}

func TestMergeResolutions(t *testing.T) {
	type check func(t *testing.T, st *graph.State)
	artifact := func(id string, version int64, data string) check {
		return func(t *testing.T, st *graph.State) {
			t.Helper()
			a := st.Artifact(id)
			switch {
			case data == "" && a != nil:
				t.Errorf("%s exists (v%d), want it deleted", id, a.Version)
			case data != "" && a == nil:
				t.Errorf("%s missing", id)
			case data != "" && (a.Version != version || a.ContentHash != hashing.ContentHash([]byte(data))):
				t.Errorf("%s = v%d %s, want v%d %s", id, a.Version, a.ContentHash.Short(), version, data)
			}
		}
	}
	edge := func(from, rel, to string, want bool) check {
		return func(t *testing.T, st *graph.State) {
			t.Helper()
			if got := st.Edge(graph.EdgeKey{From: from, Rel: rel, To: to}) != nil; got != want {
				t.Errorf("edge %s %s %s present = %v", from, rel, to, got)
			}
		}
	}
	editEdit := func(m *memChain) {
		m.commit("ours", tPut("c", "claim", map[string]any{"text": "ours"}))
		m.commit("theirs", tPut("c", "claim", map[string]any{"text": "theirs"}))
	}
	deleteEdit := func(m *memChain) {
		m.commit("ours", tPut("n", "note", map[string]any{"n": "ours"}))
		m.commit("theirs", tUnlink("x", "mentions", "q"), tDel("x"), tDel("n"))
	}
	dangling := func(m *memChain) {
		m.commit("theirs", tUnlink("x", "mentions", "q"), tDel("x"))
		m.commit("ours", tLink("a", "mentions", "x"))
	}
	danglingOursDeleted := func(m *memChain) {
		m.commit("ours", tUnlink("x", "mentions", "q"), tDel("x"))
		m.commit("theirs", tLink("a", "mentions", "x"))
	}
	cycle := func(m *memChain) {
		m.commit("ours", tLink("p1", "uses", "p2"))
		m.commit("theirs", tLink("p2", "derived_from", "p1"))
	}
	edgeAttrs := func(m *memChain) {
		m.commit("ours", tLinkAttrs("a", "cites", "q", map[string]any{"w": 1}))
		m.commit("theirs", tLinkAttrs("a", "cites", "q", map[string]any{"w": 2}))
	}
	val := func(v string) Resolution { return Resolution{Value: json.RawMessage(v)} }
	cases := []struct {
		name   string
		setup  func(m *memChain)
		key    string
		res    Resolution
		checks []check
	}{
		{"edit/edit ours", editEdit, "c", Resolution{Take: TakeOurs}, []check{artifact("c", 2, `{"text":"ours"}`)}},
		// Theirs' version 2 is not above ours' 2: it becomes 3.
		{"edit/edit theirs", editEdit, "c", Resolution{Take: TakeTheirs}, []check{artifact("c", 3, `{"text":"theirs"}`)}},
		{"edit/edit value", editEdit, "c", val(`{"text": "both"}`), []check{artifact("c", 3, `{"text":"both"}`)}},
		{"delete/edit ours", deleteEdit, "n", Resolution{Take: TakeOurs}, []check{artifact("n", 2, `{"n":"ours"}`), artifact("x", 0, "")}},
		{"delete/edit theirs", deleteEdit, "n", Resolution{Take: TakeTheirs}, []check{artifact("n", 0, "")}},
		{"delete/edit value", deleteEdit, "n", val(`{"n":"new"}`), []check{artifact("n", 3, `{"n":"new"}`)}},
		{"dangling: theirs deleted, keep it (ours)", dangling, "x", Resolution{Take: TakeOurs},
			[]check{artifact("x", 1, `{"x":0}`), edge("a", "mentions", "x", true), edge("x", "mentions", "q", false)}},
		{"dangling: theirs deleted, delete it (theirs)", dangling, "x", Resolution{Take: TakeTheirs},
			[]check{artifact("x", 0, ""), edge("a", "mentions", "x", false)}},
		{"dangling: value", dangling, "x", val(`{"x":"kept"}`), []check{artifact("x", 2, `{"x":"kept"}`), edge("a", "mentions", "x", true)}},
		// Ours deleted x at v1; keeping it re-creates it above the tombstone.
		{"dangling: ours deleted, keep it (theirs)", danglingOursDeleted, "x", Resolution{Take: TakeTheirs},
			[]check{artifact("x", 2, `{"x":0}`), edge("a", "mentions", "x", true)}},
		{"dangling: ours deleted, delete it (ours)", danglingOursDeleted, "x", Resolution{Take: TakeOurs},
			[]check{artifact("x", 0, ""), edge("a", "mentions", "x", false)}},
		{"cycle ours", cycle, "cycle:p2 -derived_from-> p1", Resolution{Take: TakeOurs},
			[]check{edge("p1", "uses", "p2", true), edge("p2", "derived_from", "p1", false)}},
		{"cycle theirs", cycle, "cycle:p2 -derived_from-> p1", Resolution{Take: TakeTheirs},
			[]check{edge("p1", "uses", "p2", false), edge("p2", "derived_from", "p1", true)}},
		{"edge attrs theirs", edgeAttrs, "edge:a -cites-> q", Resolution{Take: TakeTheirs},
			[]check{func(t *testing.T, st *graph.State) {
				if e := st.Edge(graph.EdgeKey{From: "a", Rel: "cites", To: "q"}); e == nil || string(e.Attrs) != `{"w":2}` {
					t.Errorf("edge = %+v", e)
				}
			}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mergeFixture(t)
			tc.setup(m)
			out, err := m.merge("ours", "theirs", map[string]Resolution{tc.key: tc.res})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Plan.Resolved) != 1 || out.Plan.Resolved[0].Key != tc.key {
				t.Fatalf("resolved = %s", conflictSummary(out.Plan.Resolved))
			}
			for _, c := range tc.checks {
				c(t, m.state("ours"))
			}
			if _, err := Fold(context.Background(), m, m.heads["ours"], Options{Objects: ObjectsAll}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMergeBadResolution(t *testing.T) {
	m := mergeFixture(t)
	m.commit("ours", tLink("p1", "uses", "p2"), tPut("c", "claim", map[string]any{"text": "ours"}))
	m.commit("theirs", tLink("p2", "derived_from", "p1"), tPut("c", "claim", map[string]any{"text": "theirs"}))
	for _, res := range []map[string]Resolution{
		{"c": {Take: "mine"}, "cycle:p2 -derived_from-> p1": {Take: TakeOurs}},
		{"c": {Value: json.RawMessage(`[1]`)}, "cycle:p2 -derived_from-> p1": {Take: TakeOurs}},
		{"c": {Take: TakeOurs}, "cycle:p2 -derived_from-> p1": {Value: json.RawMessage(`{}`)}},
	} {
		if _, err := m.merge("ours", "theirs", res); !errors.Is(err, ErrResolution) {
			t.Errorf("%v: err %v, want ErrResolution", res, err)
		}
	}
	out, err := m.merge("ours", "theirs", map[string]Resolution{"c": {Take: TakeOurs}, "cycle:p2 -derived_from-> p1": {Take: TakeOurs}, "nope": {Take: TakeOurs}})
	if err != nil || strings.Join(out.Plan.Unused, ",") != "nope" {
		t.Fatalf("unused resolution: %v %v", out, err)
	}
}

func TestMergeCleanChanges(t *testing.T) {
	m := mergeFixture(t)
	// Theirs edits c twice (v3) and adds t1; ours makes the same change to
	// n as theirs (taken once) and adds o1.
	m.commit("theirs", tPut("c", "claim", map[string]any{"text": "t1"}))
	m.commit("theirs", tPut("c", "claim", map[string]any{"text": "t2"}), tPut("n", "note", map[string]any{"n": "same"}), tPut("t1", "note", map[string]any{}))
	m.commit("ours", tPut("n", "note", map[string]any{"n": "same"}), tPut("o1", "note", map[string]any{}))
	out, err := m.merge("ours", "theirs", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != MergeThreeWay {
		t.Fatalf("kind %s", out.Kind)
	}
	var got []string
	for _, op := range out.Plan.Ops {
		got = append(got, fmt.Sprintf("%s %s%s v%d", op.Op, op.ID, op.From, op.Version))
	}
	if strings.Join(got, "; ") != "put c v3; put t1 v1" {
		t.Fatalf("ops = %s", strings.Join(got, "; "))
	}
	st := m.state("ours")
	if a := st.Artifact("c"); a.Version != 3 || a.ContentHash != hashing.ContentHash([]byte(`{"text":"t2"}`)) {
		t.Fatalf("c = %+v", a)
	}
	if a := st.Artifact("n"); a.Version != 2 {
		t.Fatalf("n = %+v", a)
	}
}

func TestMergeFastForwardAndUpToDate(t *testing.T) {
	ctx := context.Background()
	m := mergeFixture(t)
	// Nothing changed anywhere: up to date.
	out, err := m.merge("ours", "theirs", nil)
	if err != nil || out.Kind != MergeUpToDate {
		t.Fatalf("no changes: %v %v", out, err)
	}
	// Theirs has no change since the base, ours has: still up to date, and
	// ours does not move.
	m.commit("ours", tPut("o1", "note", map[string]any{}))
	head := m.heads["ours"]
	out, err = m.merge("ours", "theirs", nil)
	if err != nil || out.Kind != MergeUpToDate || m.heads["ours"] != head {
		t.Fatalf("theirs unchanged: %v %v", out, err)
	}
	// Theirs is behind ours: merging ours into theirs fast-forwards theirs,
	// no commit written.
	n := len(m.order)
	out, err = m.merge("theirs", "ours", nil)
	if err != nil || out.Kind != MergeFastForward || m.heads["theirs"] != head || len(m.order) != n {
		t.Fatalf("fast-forward: %v %v", out, err)
	}
	// Merging a commit into itself.
	if ms, err := PrepareMerge(ctx, m, head, head); err != nil || ms.Kind != MergeUpToDate {
		t.Fatalf("self merge: %v %v", ms, err)
	}
}

func TestMergeBaseAfterMerges(t *testing.T) {
	ctx := context.Background()
	m := mergeFixture(t)
	m.commit("ours", tPut("o1", "note", map[string]any{}))
	m.commit("theirs", tPut("t1", "note", map[string]any{}))
	if _, err := m.merge("ours", "theirs", nil); err != nil {
		t.Fatal(err)
	}
	t1 := m.heads["theirs"]
	m.commit("theirs", tPut("t2", "note", map[string]any{}))
	// The base of the next merge is theirs' first commit, not main.
	base, err := MergeBase(ctx, m, m.heads["ours"], m.heads["theirs"])
	if err != nil || base.ID != t1 {
		t.Fatalf("base = %v, want %s: %v", base, t1.Short(), err)
	}
	out, err := m.merge("ours", "theirs", nil)
	if err != nil || len(out.Plan.Ops) != 1 || out.Plan.Ops[0].ID != "t2" {
		t.Fatalf("second merge: %+v %v", out, err)
	}
	// Criss-cross: merge ours back into theirs, then both change.
	if out, err := m.merge("theirs", "ours", nil); err != nil || out.Kind != MergeFastForward {
		t.Fatalf("back merge: %v %v", out, err)
	}
}

// ---- property tests ----

// randomMergeCase builds a base from random ops and two branches with
// random changes on each.
func randomMergeCase(t *testing.T, seed uint64) *memChain {
	r := rand.New(rand.NewPCG(seed, 99))
	m := newMemChain(t)
	if ops := randomOps(r, m.state("main"), "b", 30); len(ops) > 0 {
		m.commit("main", ops...)
	}
	m.branch("ours", "main")
	m.branch("theirs", "main")
	for _, side := range []string{"ours", "theirs"} {
		for step := 0; step < 2; step++ {
			// The same prefix on both sides makes same-id adds (add/add
			// conflicts and identical adds) likely.
			if ops := randomOps(r, m.state(side), fmt.Sprintf("n%d-", step), 6); len(ops) > 0 {
				if _, err := m.tryCommit(side, nil, ops...); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		}
	}
	return m
}

// TestMergeDeterministic: the same inputs give the same ops and the same
// merged hash every time, whatever the map orders, and the merge agrees
// with a simple per-artifact, per-edge oracle.
func TestMergeDeterministic(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 60; seed++ {
		m := randomMergeCase(t, seed)
		ms, err := PrepareMerge(ctx, m, m.heads["ours"], m.heads["theirs"])
		if err != nil {
			t.Fatal(err)
		}
		base, ours, theirs := m.states[ms.Base.ID], m.state("ours"), m.state("theirs")
		// First pass: collect the conflicts, resolve each by a seeded coin.
		var res map[string]Resolution
		_, err = Merge(base, ours, theirs, nil)
		var ce *ConflictError
		if errors.As(err, &ce) {
			checkConflictOracle(t, seed, base, ours, theirs, ce.Conflicts)
			r := rand.New(rand.NewPCG(seed, 5))
			res = map[string]Resolution{}
			for _, c := range ce.Conflicts {
				res[c.Key] = Resolution{Take: []string{TakeOurs, TakeTheirs}[r.IntN(2)]}
			}
		} else if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var first string
		var firstHash hashing.Digest
		for run := 0; run < 5; run++ {
			// A fresh map each run, filled in a shuffled order.
			keys := make([]string, 0, len(res))
			for k := range res {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			rand.New(rand.NewPCG(uint64(run), 1)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			again := make(map[string]Resolution, len(keys))
			for _, k := range keys {
				again[k] = res[k]
			}
			plan, err := Merge(base, ours, theirs, again)
			if errors.As(err, &ce) && run == 0 {
				// A combination of resolutions can leave a cycle to resolve
				// in a second round; settle it the same way.
				for _, c := range ce.Conflicts {
					res[c.Key] = Resolution{Take: TakeOurs}
				}
				run = -1
				continue
			}
			if err != nil {
				t.Fatalf("seed %d run %d: %v", seed, run, err)
			}
			got := mustJSON(t, plan.Ops)
			if run == 0 {
				first, firstHash = got, plan.ContextHash
				if ours.Hash() == m.state("ours").Hash() && plan.State.Hash() != plan.ContextHash {
					t.Fatal("plan state and hash disagree")
				}
				continue
			}
			if got != first || plan.ContextHash != firstHash {
				t.Fatalf("seed %d: run %d differs:\n%s\n%s", seed, run, got, first)
			}
		}
		// Committing it works and the chain folds.
		if _, err := m.merge("ours", "theirs", res); err != nil {
			t.Fatalf("seed %d: commit: %v", seed, err)
		}
		if m.head("ours").ContextHash != firstHash {
			t.Fatalf("seed %d: committed hash differs", seed)
		}
		if _, err := Fold(ctx, m, m.heads["ours"], Options{Objects: ObjectsAll}); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// Merging theirs again changes nothing.
		if out, err := m.merge("ours", "theirs", nil); err != nil || out.Kind != MergeUpToDate {
			t.Fatalf("seed %d: second merge: %v %v", seed, out, err)
		}
	}
}

// checkConflictOracle recomputes, the simple way, which artifacts and
// edges both sides changed differently and checks that exactly those are
// artifact and edge conflicts.
func checkConflictOracle(t *testing.T, seed uint64, base, ours, theirs *graph.State, got []Conflict) {
	t.Helper()
	want := map[string]bool{}
	val := func(s *graph.State, id string) string {
		if a := s.Artifact(id); a != nil {
			return a.Type + a.ContentHash.String() + a.ProducedBy
		}
		return ""
	}
	for _, id := range unionIDs(base, ours, theirs) {
		b, o, th := val(base, id), val(ours, id), val(theirs, id)
		if o != b && th != b && o != th {
			want[id] = true
		}
	}
	eval := func(s *graph.State, k graph.EdgeKey) string {
		if e := s.Edge(k); e != nil {
			return "+" + string(e.Attrs)
		}
		return ""
	}
	for _, k := range unionEdges(base, ours, theirs) {
		b, o, th := eval(base, k), eval(ours, k), eval(theirs, k)
		if o != b && th != b && o != th {
			want["edge:"+k.String()] = true
		}
	}
	for _, c := range got {
		switch c.Kind {
		case ConflictEditEdit, ConflictDeleteEdit, ConflictEdgeAttrs, ConflictEdgeDeleteEdit:
			if !want[c.Key] {
				t.Errorf("seed %d: unexpected conflict %s (%s)", seed, c.Key, c.Kind)
			}
			delete(want, c.Key)
		}
	}
	for k := range want {
		t.Errorf("seed %d: missing conflict %s", seed, k)
	}
}

// TestMergeWithinAgreesWithMerge: a merge that looks only at what the two
// sides' diffs name returns what the merge of every artifact and edge
// returns — the same conflicts, and with resolutions the same ops, hash
// and settled conflicts — and a scope that leaves out a change the merge
// needs does not.
func TestMergeWithinAgreesWithMerge(t *testing.T) {
	ctx := context.Background()
	outcome := func(p *MergePlan, err error) string {
		var ce *ConflictError
		switch {
		case errors.As(err, &ce):
			return "conflicts " + mustJSON(t, ce.Conflicts)
		case err != nil:
			return "error " + err.Error()
		}
		return fmt.Sprintf("ops %s hash %s resolved %s unused %v", mustJSON(t, p.Ops), p.ContextHash, mustJSON(t, p.Resolved), p.Unused)
	}
	var differs [2]int // merges that went otherwise without ours' diff, without theirs'
	for seed := uint64(1); seed <= 80; seed++ {
		m := randomMergeCase(t, seed)
		ms, err := PrepareMerge(ctx, m, m.heads["ours"], m.heads["theirs"])
		if err != nil {
			t.Fatal(err)
		}
		base, ours, theirs := m.states[ms.Base.ID], m.state("ours"), m.state("theirs")
		scope := ScopeOf(Diff(base, ours, nil, nil), Diff(base, theirs, nil, nil))
		// Resolutions: none, then each conflict settled by a seeded coin.
		resolutions := []map[string]Resolution{nil}
		var ce *ConflictError
		if _, err := Merge(base, ours, theirs, nil); errors.As(err, &ce) {
			r := rand.New(rand.NewPCG(seed, 7))
			res := map[string]Resolution{}
			for _, c := range ce.Conflicts {
				res[c.Key] = Resolution{Take: []string{TakeOurs, TakeTheirs}[r.IntN(2)]}
			}
			resolutions = append(resolutions, res)
		}
		for _, res := range resolutions {
			want := outcome(Merge(base, ours, theirs, res))
			if got := outcome(MergeWithin(base, ours, theirs, scope, res)); got != want {
				t.Fatalf("seed %d: MergeWithin:\n%s\nMerge:\n%s", seed, got, want)
			}
			// Repeats and any order give the same.
			twice := MergeScope{IDs: append(slices.Clone(scope.IDs), scope.IDs...), Edges: append(slices.Clone(scope.Edges), scope.Edges...)}
			slices.Reverse(twice.IDs)
			slices.Reverse(twice.Edges)
			if got := outcome(MergeWithin(base, ours, theirs, twice, res)); got != want {
				t.Fatalf("seed %d: a scope with repeats, reversed:\n%s\nMerge:\n%s", seed, got, want)
			}
		}
		// Without one side's diff the merge can go wrong: without
		// theirs', theirs' changes are not merged; without ours', an edge
		// of theirs to an artifact ours deleted is dropped instead of
		// being a conflict.
		want := outcome(Merge(base, ours, theirs, nil))
		if outcome(MergeWithin(base, ours, theirs, ScopeOf(Diff(base, ours, nil, nil)), nil)) != want {
			differs[0]++
		}
		if outcome(MergeWithin(base, ours, theirs, ScopeOf(Diff(base, theirs, nil, nil)), nil)) != want {
			differs[1]++
		}
	}
	if differs[0] == 0 || differs[1] == 0 {
		t.Fatalf("leaving a side's changes out of the scope changed %v merges: the test cannot tell a scope that holds too little", differs)
	}
}

// unionIDs returns the ids of states' artifacts, sorted, without repeats.
func unionIDs(states ...*graph.State) []string {
	seen := map[string]bool{}
	var ids []string
	for _, s := range states {
		for _, id := range s.ArtifactIDs() {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// unionEdges returns the keys of states' edges, sorted, without repeats.
func unionEdges(states ...*graph.State) []graph.EdgeKey {
	seen := map[graph.EdgeKey]bool{}
	var keys []graph.EdgeKey
	for _, s := range states {
		for _, e := range s.Edges() {
			if k := e.Key(); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return edgeKeyLess(keys[i], keys[j]) })
	return keys
}
