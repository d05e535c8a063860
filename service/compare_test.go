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

// compareStore opens a store in a new directory, without syncs, on a
// fixed clock, closed when t ends.
func compareStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{Dir: t.TempDir(), NoSync: true,
		Clock: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCompareRunsAgreesWithWholeCompare compares random runs through the
// store's diff (CompareRuns) and checks it against Compare of the two
// states loaded whole: two branches of one context, two contexts that
// share their first commits' ops, a context with itself, and an empty
// context against the others.
func TestCompareRunsAgreesWithWholeCompare(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 12; seed++ {
		st := compareStore(t)
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

// TestCompareRunsLoadsNeitherSideWhole: comparing an old commit of a
// context of 3,000 artifacts with its head, where only edges between
// unchanged artifacts differ, reads the producers of those artifacts by
// point lookups at the old commit (store.ReadSparse): the store's caches
// grow by a small part of what loading that commit's state whole adds
// (store.ReadAt, measured after it as the oracle), and the producers are
// right.
func TestCompareRunsLoadsNeitherSideWhole(t *testing.T) {
	ctx := context.Background()
	st := compareStore(t)
	if _, err := st.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	id := func(i int) string { return fmt.Sprintf("x%05d", i) }
	var ops []graph.Op
	for i := range n {
		data, _ := hashing.CanonicalizeObject(json.RawMessage(fmt.Sprintf(`{"v":%d}`, i)))
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: id(i), Type: "note", ProducedBy: fmt.Sprintf("agent-%d", i%7), Data: data})
		if i > 0 {
			ops = append(ops, graph.Op{Op: graph.OpLink, From: id(i), Rel: "cites", To: id(i - 1)})
		}
	}
	old, err := st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: "m", Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	// Only edges change: their from artifacts are in neither side's diff.
	ops = ops[:0]
	for _, i := range []int{100, 1500, 2999} {
		ops = append(ops, graph.Op{Op: graph.OpUnlink, From: id(i), Rel: "cites", To: id(i - 1)},
			graph.Op{Op: graph.OpLink, From: id(i), Rel: "cites", To: id(i - 50)})
	}
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: "m", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	before := st.CachedBytes()
	got, err := CompareRuns(ctx, st, "c", old.Commit.ID.String(), "c", "main")
	if err != nil {
		t.Fatal(err)
	}
	compared := st.CachedBytes() - before
	var producers []string
	for _, g := range got.Divergences {
		producers = append(producers, g.Producer)
	}
	// 100 % 7 = 2, 1500 % 7 = 2, 2999 % 7 = 3.
	if fmt.Sprint(producers) != "[agent-2 agent-3]" {
		t.Fatalf("divergences by producer %v, want [agent-2 agent-3]: %+v", producers, got.Divergences)
	}
	before = st.CachedBytes()
	if err := st.ReadAt(ctx, "c", old.Commit, func(v *store.View) error {
		if v.State.IsLazy() || len(v.State.Artifacts()) != n {
			return fmt.Errorf("ReadAt: lazy %v, %d artifacts: not the oracle this test needs", v.State.IsLazy(), len(v.State.Artifacts()))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	whole := st.CachedBytes() - before
	t.Logf("the caches grew by %d bytes comparing, by %d more loading side a whole", compared, whole)
	if whole < 100_000 || compared*10 > whole {
		t.Fatalf("comparing grew the caches by %d bytes; loading side a whole grows them by %d: the comparison loaded a state whole", compared, whole)
	}
}

// TestCompareDiffSizesItsGroupsAndTakesTheDiff: over random pairs of
// states, CompareDiff's groups hold lists sized exactly (no growth
// garbage: two big runs' comparison lists millions), and it lets each of
// the diff's lists go once grouped.
func TestCompareDiffSizesItsGroupsAndTakesTheDiff(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		var states [2]*graph.State
		for i := range states {
			st := graph.NewState(nil)
			for range 6 {
				if ops := compareOps(r, st); len(ops) > 0 {
					next := st.Clone()
					if _, err := next.ApplyOps(ops); err == nil {
						st = next
					}
				}
			}
			states[i] = st
		}
		d := replay.Diff(states[0], states[1], nil, nil)
		if d.Empty() {
			continue
		}
		producerOf := func(id string) string {
			for _, st := range states {
				if a := st.Artifact(id); a != nil {
					return a.ProducedBy
				}
			}
			return ""
		}
		out := CompareDiff(CompareSide{Context: "a"}, CompareSide{Context: "b", ContextHash: hashing.Sum([]byte("b"))}, d, producerOf)
		for _, g := range out.Divergences {
			for name, lc := range map[string][2]int{
				"only_in_a": {len(g.OnlyInA), cap(g.OnlyInA)}, "only_in_b": {len(g.OnlyInB), cap(g.OnlyInB)},
				"changed": {len(g.Changed), cap(g.Changed)}, "edges_only_in_a": {len(g.EdgesOnlyInA), cap(g.EdgesOnlyInA)},
				"edges_only_in_b": {len(g.EdgesOnlyInB), cap(g.EdgesOnlyInB)}, "edges_changed": {len(g.EdgesChanged), cap(g.EdgesChanged)},
			} {
				if lc[0] != lc[1] {
					t.Fatalf("seed %d, producer %q: %s holds %d in room for %d", seed, g.Producer, name, lc[0], lc[1])
				}
			}
		}
		if d.Added != nil || d.Removed != nil || d.Changed != nil || d.EdgesAdded != nil || d.EdgesRemoved != nil || d.EdgesChanged != nil {
			t.Fatalf("seed %d: the diff's lists are still held after CompareDiff", seed)
		}
	}
}
