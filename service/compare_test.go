package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// compareOps returns a random batch on state st over a pool of 40 ids:
// puts by one of three producers, links (from the larger id to the
// smaller) with random attrs, unlinks, and deletions with the artifact's
// edges. A batch that does not apply is drawn again by the caller.
func compareOps(r *rand.Rand, st *graph.State) []graph.Op {
	id := func() string { return fmt.Sprintf("x%02d", r.IntN(40)) }
	var ops []graph.Op
	for range 6 {
		switch k := r.IntN(10); {
		case k < 4:
			data, _ := hashing.CanonicalizeObject(json.RawMessage(fmt.Sprintf(`{"v":%d}`, r.IntN(3))))
			ops = append(ops, graph.Op{Op: graph.OpPut, ID: id(), Type: "note", ProducedBy: fmt.Sprintf("agent-%d", r.IntN(3)), Data: data})
		case k < 8:
			from, to := id(), id()
			if from < to {
				from, to = to, from
			}
			if from == to || st.Artifact(from) == nil || st.Artifact(to) == nil {
				continue
			}
			ops = append(ops, graph.Op{Op: graph.OpLink, From: from, Rel: "cites", To: to, Attrs: json.RawMessage(fmt.Sprintf(`{"w":%d}`, r.IntN(2)))})
		case k < 9:
			if es := st.Edges(); len(es) > 0 {
				e := es[r.IntN(len(es))]
				ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
			}
		default:
			x := id()
			if st.Artifact(x) == nil {
				continue
			}
			for _, e := range append(st.Out(x), st.In(x)...) {
				ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
			}
			ops = append(ops, graph.Op{Op: graph.OpDelete, ID: x})
		}
	}
	return ops
}

// TestCompareRunsAgreesWithWholeCompare compares random runs through the
// store's diff (CompareRuns) and checks it against Compare of the two
// states loaded whole: two branches of one context, two contexts that
// share their first commits' ops, a context with itself, and an empty
// context against the others.
func TestCompareRunsAgreesWithWholeCompare(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 12; seed++ {
		st, err := store.Open(ctx, store.Options{Dir: t.TempDir(), NoSync: true,
			Clock: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 21))
		commit := func(ctxID, branch string) {
			for range 50 {
				var ops []graph.Op
				if err := st.Read(ctx, ctxID, branch, func(v *store.View) error { ops = compareOps(r, v.State); return nil }); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Commit(ctx, store.CommitRequest{Context: ctxID, Branch: branch, Author: "t", Message: "m", Ops: ops}); err == nil {
					return
				}
			}
			t.Fatal("no random batch applied in 50 draws")
		}
		for _, c := range []string{"a", "b", "e"} {
			if _, err := st.CreateContext(ctx, c, store.ModeObserve); err != nil {
				t.Fatal(err)
			}
		}
		for range 6 {
			commit("a", "main")
		}
		// b starts with a's ops: the same ids and producers, other commits.
		var shared []graph.Op
		if err := st.Read(ctx, "a", "main", func(v *store.View) error {
			for _, x := range v.State.Artifacts() {
				obj, err := st.Object(ctx, x.ContentHash)
				if err != nil {
					return err
				}
				shared = append(shared, graph.Op{Op: graph.OpPut, ID: x.ID, Type: x.Type, ProducedBy: x.ProducedBy, Data: obj})
			}
			for _, e := range v.State.Edges() {
				shared = append(shared, graph.Op{Op: graph.OpLink, From: e.From, Rel: e.Rel, To: e.To, Attrs: e.Attrs})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Commit(ctx, store.CommitRequest{Context: "b", Author: "t", Message: "m", Ops: shared}); err != nil {
			t.Fatal(err)
		}
		head := mustResolveRef(t, st, "a", "main")
		if err := st.CreateBranch(ctx, "a", "alt", head.ID); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			commit("a", "main")
			commit("a", "alt")
			commit("b", "main")
		}
		cases := [][4]string{{"a", "main", "a", "alt"}, {"a", "alt", "a", "main"}, {"a", "main", "b", "main"},
			{"b", "main", "a", "alt"}, {"a", "main", "a", "main"}, {"a", head.ID.String(), "a", "main"},
			{"e", "main", "a", "main"}, {"a", "alt", "e", "main"}, {"e", "main", "e", "main"}}
		for _, c := range cases {
			got, err := CompareRuns(ctx, st, c[0], c[1], c[2], c[3])
			if err != nil {
				t.Fatal(err)
			}
			ca, cb := mustResolveRef(t, st, c[0], c[1]), mustResolveRef(t, st, c[2], c[3])
			var want Comparison
			err = st.ReadCommit(ctx, c[0], ca, func(va *store.View) error {
				return st.ReadCommit(ctx, c[2], cb, func(vb *store.View) error {
					want = Compare(got.A, got.B, va.State, vb.State)
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Fatalf("seed %d, %v: CompareRuns\n%s\nCompare of the whole states\n%s", seed, c, g, w)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustResolveRef(t *testing.T, st *store.Store, ctxID, ref string) *replay.Commit {
	t.Helper()
	c, err := st.Resolve(context.Background(), ctxID, ref)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
