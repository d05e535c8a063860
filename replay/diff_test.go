package replay

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// diffLine renders a diff compactly for table tests.
func diffLine(d *DiffResult) string {
	var parts []string
	for _, c := range d.Added {
		parts = append(parts, fmt.Sprintf("+%s@%d", c.ID, c.New.Version))
	}
	for _, c := range d.Removed {
		parts = append(parts, fmt.Sprintf("-%s@%d", c.ID, c.Old.Version))
	}
	for _, c := range d.Changed {
		parts = append(parts, fmt.Sprintf("~%s@%d->%d", c.ID, c.Old.Version, c.New.Version))
	}
	for _, e := range d.EdgesAdded {
		parts = append(parts, fmt.Sprintf("+(%s %s %s)%s", e.From, e.Rel, e.To, e.NewAttrs))
	}
	for _, e := range d.EdgesRemoved {
		parts = append(parts, fmt.Sprintf("-(%s %s %s)", e.From, e.Rel, e.To))
	}
	for _, e := range d.EdgesChanged {
		parts = append(parts, fmt.Sprintf("~(%s %s %s)%s->%s", e.From, e.Rel, e.To, e.OldAttrs, e.NewAttrs))
	}
	for _, tc := range d.Trust {
		parts = append(parts, fmt.Sprintf("!%s:%s->%s", tc.ID, tc.Old, tc.New))
	}
	return strings.Join(parts, " ")
}

func TestDiffTable(t *testing.T) {
	// The base every case starts from: a question, a RETRIEVED fetch, a
	// claim resting on both, an answer supported by the claim.
	base := []graph.Op{
		tPut("q", "question", map[string]any{"text": "why?"}),
		tPut("f", "fetch_verdict", verdict("RETRIEVED")),
		tPut("c", "claim", map[string]any{"text": "because"}),
		tPut("a", "answer", map[string]any{"text": "because, says f"}),
		tLink("c", "derived_from", "f"),
		tLink("c", "derived_from", "q"),
		tLink("a", "supported_by", "c"),
		tLink("a", "mentions", "q"),
	}
	cases := []struct {
		name string
		ops  []graph.Op
		want string
	}{
		{"nothing", nil, ""},
		{"add", []graph.Op{tPut("n", "note", map[string]any{"x": 1})}, "+n@1"},
		{"add quarantined", []graph.Op{tPut("e", "tool_error", map[string]any{}), tPut("n", "note", map[string]any{}), tLink("n", "uses", "e")},
			"+e@1 +n@1 +(n uses e) !e:->poison_root !n:->quarantined"},
		{"change", []graph.Op{tPut("c", "claim", map[string]any{"text": "because!"})}, "~c@1->2"},
		{"change producer only", []graph.Op{{Op: graph.OpPut, ID: "q", Type: "question", ProducedBy: "other", Data: []byte(`{"text":"why?"}`)}}, "~q@1->2"},
		{"remove", []graph.Op{tUnlink("a", "supported_by", "c"), tUnlink("a", "mentions", "q"), tDel("a")},
			"-a@1 -(a mentions q) -(a supported_by c)"},
		{"edge attrs", []graph.Op{tLinkAttrs("a", "mentions", "q", map[string]any{"w": 2})}, `~(a mentions q)->{"w":2}`},
		{"poison a root", []graph.Op{tPut("f", "fetch_verdict", verdict("FAILED"))},
			"~f@1->2 !a:confirmed->quarantined !c:confirmed->quarantined !f:confirmed->poison_root"},
		{"cut the poisoned path", []graph.Op{tPut("f", "fetch_verdict", verdict("FAILED")), tUnlink("c", "derived_from", "f")},
			"~f@1->2 -(c derived_from f) !f:confirmed->poison_root"},
		{"non-dependency edge carries no trust", []graph.Op{tPut("e", "tool_error", map[string]any{}), tLink("a", "mentions", "e")},
			"+e@1 +(a mentions e) !e:->poison_root"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := graph.NewState(nil)
			if _, err := from.ApplyOps(base); err != nil {
				t.Fatal(err)
			}
			to := from.Clone()
			if _, err := to.ApplyOps(tc.ops); err != nil {
				t.Fatal(err)
			}
			d := Diff(from, to, statusOf(from), statusOf(to))
			if got := diffLine(d); got != tc.want {
				t.Errorf("diff:\n got %s\nwant %s", got, tc.want)
			}
			if d.Empty() != (tc.want == "") {
				t.Errorf("Empty() = %v", d.Empty())
			}
			// The one-sided trust computation agrees from either side.
			for _, side := range []Side{SideFrom, SideTo} {
				known := to
				if side == SideFrom {
					known = from
				}
				d2 := Diff(from, to, nil, nil)
				DiffTrust(d2, known, statusOf(known), side, baseLoading(from, to))
				if got := diffLine(d2); got != tc.want {
					t.Errorf("DiffTrust from side %d:\n got %s\nwant %s", side, got, tc.want)
				}
			}
			// Reversed, adds become removes and versions swap.
			back := Diff(to, from, nil, nil)
			if len(back.Added) != len(d.Removed) || len(back.Removed) != len(d.Added) || len(back.EdgesAdded) != len(d.EdgesRemoved) {
				t.Errorf("reverse diff is not the mirror: %s", diffLine(back))
			}
		})
	}
}

func TestDiffJSONShape(t *testing.T) {
	from := graph.NewState(nil)
	to := from.Clone()
	if _, err := to.ApplyOps([]graph.Op{tPut("n", "note", map[string]any{})}); err != nil {
		t.Fatal(err)
	}
	got := mustJSON(t, Diff(from, to, nil, nil))
	want := `{"added":[{"id":"n","new":{"type":"note","version":1,"content_hash":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","produced_by":"test"}}],"removed":[],"changed":[],"edges_added":[],"edges_removed":[],"edges_changed":[],"trust":[]}`
	if got != want {
		t.Errorf("json:\n got %s\nwant %s", got, want)
	}
}

// randomOps returns ops that change st at random: new artifacts of a few
// types (some fetch verdicts FAILED), new dependency and other edges
// pointing to older artifacts (so no cycle), edits, unlinks and deletes.
func randomOps(r *rand.Rand, st *graph.State, prefix string, n int) []graph.Op {
	var ops []graph.Op
	ids := st.ArtifactIDs()
	nid := 0
	for i := 0; i < n; i++ {
		before := len(ops)
		switch k := r.IntN(12); {
		case k < 4 || len(ids) < 3:
			id := fmt.Sprintf("%s%03d", prefix, nid)
			nid++
			switch r.IntN(4) {
			case 0:
				v := "RETRIEVED"
				if r.IntN(3) == 0 {
					v = "FAILED"
				}
				ops = append(ops, tPut(id, "fetch_verdict", verdict(v)))
			case 1:
				ops = append(ops, tPut(id, "question", map[string]any{"q": id}))
			default:
				ops = append(ops, tPut(id, "claim", map[string]any{"c": id, "n": r.IntN(3)}))
			}
			for j := 0; j < 2 && len(ids) > 0; j++ {
				rel := "derived_from"
				if r.IntN(4) == 0 {
					rel = "cites"
				}
				ops = append(ops, tLink(id, rel, ids[r.IntN(len(ids))]))
			}
			ids = append(ids, id)
		case k < 7:
			id := ids[r.IntN(len(ids))]
			if a := st.Artifact(id); a != nil && a.Type == "fetch_verdict" {
				v := "RETRIEVED"
				if r.IntN(2) == 0 {
					v = "FAILED"
				}
				ops = append(ops, tPut(id, "fetch_verdict", verdict(v)))
			} else if a != nil {
				ops = append(ops, tPut(id, a.Type, map[string]any{"edit": r.IntN(1000)}))
			}
		case k < 9:
			id := ids[r.IntN(len(ids))]
			if out := st.Out(id); len(out) > 0 {
				e := out[r.IntN(len(out))]
				ops = append(ops, tUnlink(e.From, e.Rel, e.To))
			}
		case k >= 10:
			// An edge between two existing artifacts, either way round:
			// across branches these close cycles and disagree on attrs.
			from, to := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]
			if r.IntN(2) == 0 {
				ops = append(ops, tLinkAttrs(from, "uses", to, map[string]any{"w": r.IntN(2)}))
			} else {
				ops = append(ops, tLink(from, "uses", to))
			}
		default:
			id := ids[r.IntN(len(ids))]
			if a := st.Artifact(id); a != nil {
				out, in := st.Out(id), st.In(id)
				for _, e := range append(out, in...) {
					ops = append(ops, tUnlink(e.From, e.Rel, e.To))
				}
				ops = append(ops, tDel(id))
			}
		}
		// Keep the batch valid: drop this step's ops when the batch no
		// longer applies (ids may then name artifacts that do not exist;
		// later steps using them are dropped the same way).
		if _, err := st.Clone().ApplyOps(ops); err != nil {
			ops = ops[:before]
		}
	}
	return ops
}

// TestDiffTrustOracle checks the one-sided trust computation (what the
// store's fast diff uses) against comparing two full trust passes, over
// random states and random changes.
func TestDiffTrustOracle(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		from := graph.NewState(nil)
		if ops := randomOps(r, from, "b", 40); len(ops) > 0 {
			if _, err := from.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d: base: %v", seed, err)
			}
		}
		to := from.Clone()
		for step := 0; step < 3; step++ {
			ops := randomOps(r, to, fmt.Sprintf("s%d-", step), 8)
			if _, err := to.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d: step: %v", seed, err)
			}
		}
		want := diffLine(Diff(from, to, statusOf(from), statusOf(to)))
		// Through a third state, such as a branch head further on.
		third := to.Clone()
		if _, err := third.ApplyOps(randomOps(r, third, "t-", 8)); err != nil {
			t.Fatal(err)
		}
		for _, side := range []Side{SideFrom, SideTo} {
			st := to
			if side == SideFrom {
				st = from
			}
			d := Diff(from, to, nil, nil)
			DiffTrustVia(d, third, statusOf(third), side, Diff(st, third, nil, nil), baseLoading(from, to, third))
			if got := diffLine(d); got != want {
				t.Fatalf("seed %d via a third state from side %d:\n got %s\nwant %s", seed, side, got, want)
			}
		}
		for _, side := range []Side{SideFrom, SideTo} {
			known := to
			if side == SideFrom {
				known = from
			}
			d := Diff(from, to, nil, nil)
			DiffTrust(d, known, statusOf(known), side, baseLoading(from, to))
			if got := diffLine(d); got != want {
				t.Fatalf("seed %d side %d:\n got %s\nwant %s", seed, side, got, want)
			}
		}
	}
}

// baseLoading is the trust base of DESIGN.md for artifacts that may come
// without payloads (as a diff rebuilds them), loading the payload by
// content hash from the given states, as the store loads it from its
// object store.
func baseLoading(states ...*graph.State) graph.BaseFunc {
	data := map[hashing.Digest][]byte{}
	for _, st := range states {
		for _, a := range st.Artifacts() {
			data[a.ContentHash] = a.Data
		}
	}
	return graph.RoleBase(nil, func(a *graph.Artifact) (string, string) {
		return graph.VerdictFromData(data[a.ContentHash])
	})
}

// TestDiffBuilderMatchesNewDiff: deltas handed to a DiffBuilder one at a
// time, in any order, make the diff NewDiff makes of them as a list —
// added, removed, changed and same artifacts and edges, over random
// delta lists.
func TestDiffBuilderMatchesNewDiff(t *testing.T) {
	art := func(r *rand.Rand, id string) *graph.Artifact {
		if r.IntN(4) == 0 {
			return nil
		}
		return &graph.Artifact{ID: id, Type: []string{"claim", "note"}[r.IntN(2)], Version: int64(1 + r.IntN(2)),
			ContentHash: hashing.Sum([]byte{byte(r.IntN(2))}), ProducedBy: []string{"", "m"}[r.IntN(2)]}
	}
	attrs := func(r *rand.Rand) []byte {
		if r.IntN(2) == 0 {
			return nil
		}
		return []byte(fmt.Sprintf(`{"w":%d}`, r.IntN(2)))
	}
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		var arts []ArtifactDelta
		var edges []EdgeDelta
		for i := range r.IntN(60) {
			id := fmt.Sprintf("a%d", i)
			arts = append(arts, ArtifactDelta{ID: id, Old: art(r, id), New: art(r, id)})
		}
		for i := range r.IntN(60) {
			edges = append(edges, EdgeDelta{Key: graph.EdgeKey{From: fmt.Sprintf("a%d", i), Rel: "cites", To: "b"},
				OldPresent: r.IntN(3) > 0, NewPresent: r.IntN(3) > 0, OldAttrs: attrs(r), NewAttrs: attrs(r)})
		}
		want := diffLine(NewDiff(arts, edges))
		var b DiffBuilder
		for _, i := range r.Perm(len(arts) + len(edges)) {
			if i < len(arts) {
				b.AddArtifact(arts[i])
			} else {
				b.AddEdge(edges[i-len(arts)])
			}
		}
		if got := diffLine(b.Result()); got != want {
			t.Fatalf("seed %d: the builder made\n%s\nwant\n%s", seed, got, want)
		}
	}
}
