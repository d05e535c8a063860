package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// crissCrossStore opens a store in memory with a context "c" whose node
// and head caches hold next to nothing, so that merges read their states
// over their maps (it says so in its log, which is dropped).
func crissCrossStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1, CacheBytes: 1024,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(context.Background(), "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s
}

// mergeSettled merges commit theirs into branch ours, settling every
// conflict by a coin drawn from r (in as many rounds as a resolution
// leaves new ones, a cycle say).
func mergeSettled(t *testing.T, s *Store, ours string, theirs hashing.Digest, r *rand.Rand) *MergeResult {
	t.Helper()
	res := map[string]replay.Resolution{}
	for range 4 {
		got, err := s.Merge(context.Background(), "c", ours, theirs.String(), res, "", "")
		var ce *replay.ConflictError
		if !errors.As(err, &ce) {
			if err != nil {
				t.Fatalf("merge %s into %s: %v", theirs.Short(), ours, err)
			}
			return got
		}
		for _, c := range ce.Conflicts {
			res[c.Key] = replay.Resolution{Take: []string{replay.TakeOurs, replay.TakeTheirs}[r.IntN(2)]}
		}
	}
	t.Fatalf("merge %s into %s still conflicts after 4 rounds", theirs.Short(), ours)
	return nil
}

// TestStoreMergeCrissCrossConflicts: x sets z=a, y sets z=b; x merges
// y's commit keeping a, y merges x's commit keeping b. Merging y into x
// then reports z as an edit_edit conflict — the two merge bases disagree
// on it and the sides differ — whichever of x's and y's commits came
// first, and resolved it takes theirs' b in both orders, to the same
// context hash.
func TestStoreMergeCrissCrossConflicts(t *testing.T) {
	ctx := context.Background()
	var hashes []hashing.Digest
	for _, xFirst := range []bool{true, false} {
		s := crissCrossStore(t)
		b := mustCommit(t, s, "c", put("z", "note", map[string]any{"v": "base"}))
		for _, br := range []string{"x", "y"} {
			if err := s.CreateBranch(ctx, "c", br, b.ID); err != nil {
				t.Fatal(err)
			}
		}
		cm := func(br, v string) *replay.Commit {
			r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br, Author: "t", Message: "m", Ops: []graph.Op{put("z", "note", map[string]any{"v": v})}})
			if err != nil {
				t.Fatal(err)
			}
			return r.Commit
		}
		var x1, y1 *replay.Commit
		if xFirst {
			x1, y1 = cm("x", "a"), cm("y", "b")
		} else {
			y1, x1 = cm("y", "b"), cm("x", "a")
		}
		keep := map[string]replay.Resolution{"z": {Take: replay.TakeOurs}}
		for _, m := range [][2]string{{"x", y1.ID.String()}, {"y", x1.ID.String()}} {
			res, err := s.Merge(ctx, "c", m[0], m[1], keep, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if res.Base != b.ID || res.Bases != nil {
				t.Fatalf("merge into %s: base %s, bases %v; want %s alone", m[0], res.Base.Short(), res.Bases, b.ID.Short())
			}
		}
		before := mustResolve(t, s, "c", "x")
		_, err := s.Merge(ctx, "c", "x", "y", nil, "", "")
		var ce *replay.ConflictError
		if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Key != "z" || ce.Conflicts[0].Kind != replay.ConflictEditEdit {
			t.Errorf("x's commit first %v: merging y into x: %v; want one edit_edit conflict on z", xFirst, err)
			continue
		}
		if head := mustResolve(t, s, "c", "x"); head.ID != before.ID {
			t.Fatalf("a refused merge moved x to %s", head.ID.Short())
		}
		res, err := s.Merge(ctx, "c", "x", "y", map[string]replay.Resolution{"z": {Take: replay.TakeTheirs}}, "", "")
		if err != nil {
			t.Fatalf("x's commit first %v: resolved: %v", xFirst, err)
		}
		var z string
		if err := s.Read(ctx, "c", "x", func(v *View) error {
			d, err := v.Data(v.State.Artifact("z"))
			z = string(d)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if z != `{"v":"b"}` {
			t.Errorf("x's commit first %v: z = %s after taking theirs, want b", xFirst, z)
		}
		if want := []hashing.Digest{x1.ID, y1.ID}; !xFirst && !slices.Equal(res.Bases, []hashing.Digest{x1.ID, y1.ID}) ||
			xFirst && !slices.Equal(res.Bases, []hashing.Digest{y1.ID, x1.ID}) || res.Base != res.Bases[0] {
			t.Errorf("x's commit first %v: base %s, bases %v; want both of %v, the later first", xFirst, res.Base.Short(), res.Bases, want)
		}
		hashes = append(hashes, res.Commit.ContextHash)
		mustCheck(t, s)
	}
	if len(hashes) == 2 && hashes[0] != hashes[1] {
		t.Errorf("the resolved merges hash to %s and %s", hashes[0], hashes[1])
	}
}

// storeCrissCross builds a history of shape (replay's shapes: a fork,
// criss-crosses of two and three merge bases, a criss-cross of merge
// commits that were criss-crosses themselves, a merge back and forth)
// in s over a context of a few hundred artifacts, some resting on fetch
// verdicts. Each side's changes come from a generator of its own and
// every merge's resolutions from one of their own, so the states do not
// depend on xFirst, which only orders the commits.
func storeCrissCross(t *testing.T, s *Store, shape string, seed uint64, xFirst bool) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 1))
	var ops []graph.Op
	for i := range 3 {
		ops = append(ops, put(fmt.Sprintf("fv%d", i), "fetch_verdict", map[string]any{"url": "https://example.org", "verdict": "RETRIEVED"}))
	}
	for i := range 200 {
		ops = append(ops, put(fmt.Sprintf("a%03d", i), "note", map[string]any{"i": i}))
		switch {
		case i < 12:
			ops = append(ops, link(fmt.Sprintf("a%03d", i), "derived_from", fmt.Sprintf("fv%d", i%3)))
		case i > 0:
			ops = append(ops, link(fmt.Sprintf("a%03d", i), "derived_from", fmt.Sprintf("a%03d", r.IntN(i))))
		}
	}
	base := mustCommit(t, s, "c", ops...)
	rs := map[string]*rand.Rand{}
	for i, br := range []string{"x", "y", "w"} {
		if err := s.CreateBranch(ctx, "c", br, base.ID); err != nil {
			t.Fatal(err)
		}
		rs[br] = rand.New(rand.NewPCG(seed, uint64(10+i)))
	}
	step := 0
	change := func(names ...string) map[string]hashing.Digest {
		step++
		if !xFirst {
			names = slices.Clone(names)
			slices.Reverse(names)
		}
		at := map[string]hashing.Digest{}
		for _, br := range names {
			// A fetch verdict of its own, now and then, so that merges
			// change trust.
			r := rs[br]
			var fv []graph.Op
			if r.IntN(2) == 0 {
				fv = append(fv, put(fmt.Sprintf("fv%d", r.IntN(3)), "fetch_verdict", map[string]any{"url": "https://example.org",
					"verdict": []string{"RETRIEVED", "FAILED"}[r.IntN(2)], "reason": "http_status:503"}))
			}
			ok := false
			for range 50 {
				var ops []graph.Op
				if err := s.Read(ctx, "c", br, func(v *View) error {
					ops = randomSideOps(r, v.State, fmt.Sprintf("n%d-", step), 6)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br, Author: "t", Message: "m", Ops: append(slices.Clone(fv), ops...)}); err == nil {
					ok = true
					break
				}
			}
			if !ok {
				t.Fatalf("seed %d: no random batch applied on %s in 50 draws", seed, br)
			}
			at[br] = mustResolve(t, s, "c", br).ID
		}
		return at
	}
	type into struct {
		ours   string
		theirs hashing.Digest
		key    uint64
	}
	run := func(ms ...into) {
		if !xFirst {
			ms = slices.Clone(ms)
			slices.Reverse(ms)
		}
		for _, mi := range ms {
			mergeSettled(t, s, mi.ours, mi.theirs, rand.New(rand.NewPCG(seed, 100+mi.key)))
		}
	}
	switch shape {
	case "fork":
		change("x", "y")
		change("x", "y")
	case "criss-cross", "criss-cross+commits":
		at := change("x", "y")
		run(into{"x", at["y"], 1}, into{"y", at["x"], 2})
		if shape == "criss-cross+commits" {
			change("x", "y")
		}
	case "three-bases":
		at := change("x", "y", "w")
		run(into{"x", at["y"], 1}, into{"y", at["x"], 2})
		run(into{"x", at["w"], 3}, into{"y", at["w"], 4})
	case "nested":
		at := change("x", "y")
		run(into{"x", at["y"], 1}, into{"y", at["x"], 2})
		at = change("x", "y")
		run(into{"x", at["y"], 3}, into{"y", at["x"], 4})
	case "merged-back":
		change("x", "y")
		run(into{"x", mustResolve(t, s, "c", "y").ID, 1})
		at := change("x", "y")
		run(into{"y", at["x"], 2})
		change("x", "y")
	default:
		t.Fatalf("no shape %q", shape)
	}
}

// TestStoreMergeCrissCrossAgreesWithReplay builds each of replay's
// history shapes in a store, twice (x's commits first, then y's), and
// merges y into x: the store's merge, which reads the sides' diffs and
// the states through their maps, returns what replay.MergeCommits
// returns on the chain folded whole — the same conflicts, and with them
// settled the same ops, merged hash and settled conflicts — and the same
// in both orders; the conflicts are those a per-key oracle finds from the
// whole states of the merge bases and of their own merge base (both found
// the simple way: crissCrossConflictOracle); the merge commit folds to
// its hash, its trust is the oracle's merged state's, and fsck finds
// nothing.
func TestStoreMergeCrissCrossAgreesWithReplay(t *testing.T) {
	ctx := context.Background()
	virtual, noBase := 0, 0
	shapes := []string{"fork", "criss-cross", "criss-cross+commits", "three-bases", "nested", "merged-back"}
	for _, shape := range shapes {
		for seed := uint64(1); seed <= 6; seed++ {
			var outcomes [2][]string
			for i, xFirst := range []bool{true, false} {
				name := fmt.Sprintf("%s seed %d x first %v", shape, seed, xFirst)
				s := crissCrossStore(t)
				storeCrissCross(t, s, shape, seed, xFirst)
				ours, theirs := mustResolve(t, s, "c", "x"), mustResolve(t, s, "c", "y")
				oracle := func(res map[string]replay.Resolution) (*replay.MergeOutcome, string) {
					out, err := replay.MergeCommits(ctx, s.Source("c"), ours.ID, theirs.ID, res, replay.Options{})
					if err != nil || out.Plan == nil {
						return out, mergeOutcome(t, nil, hashing.Digest{}, nil, nil, err) + kindOf(out)
					}
					return out, mergeOutcome(t, out.Plan.Ops, out.Plan.ContextHash, out.Plan.Resolved, out.Plan.Unused, nil)
				}
				_, want := oracle(nil)
				res := map[string]replay.Resolution{}
				_, err := replay.MergeCommits(ctx, s.Source("c"), ours.ID, theirs.ID, nil, replay.Options{})
				wantKeys, v, n := crissCrossConflictOracle(t, s, ours.ID, theirs.ID)
				virtual, noBase = virtual+v, noBase+n
				var gotKeys []string
				var ce *replay.ConflictError
				if errors.As(err, &ce) {
					for _, c := range ce.Conflicts {
						switch c.Kind {
						case replay.ConflictEditEdit, replay.ConflictDeleteEdit, replay.ConflictEdgeAttrs, replay.ConflictEdgeDeleteEdit:
							gotKeys = append(gotKeys, c.Key)
						}
					}
				}
				if !slices.Equal(gotKeys, wantKeys) {
					t.Errorf("%s: conflicts %v, the per-key oracle's %v", name, gotKeys, wantKeys)
				}
				if err != nil {
					var ce *replay.ConflictError
					if !errors.As(err, &ce) {
						t.Fatalf("%s: %v", name, err)
					}
					r := rand.New(rand.NewPCG(seed, 77))
					for range 4 {
						for _, c := range ce.Conflicts {
							res[c.Key] = replay.Resolution{Take: []string{replay.TakeOurs, replay.TakeTheirs}[r.IntN(2)]}
						}
						if _, err = replay.MergeCommits(ctx, s.Source("c"), ours.ID, theirs.ID, res, replay.Options{}); !errors.As(err, &ce) {
							break
						}
					}
					got, err := s.Merge(ctx, "c", "x", "y", nil, "", "")
					gotS := mergeOutcome(t, nil, hashing.Digest{}, nil, nil, err)
					if err == nil {
						gotS = mergeOutcome(t, got.Ops, got.Commit.ContextHash, got.Resolved, got.Unused, nil)
					}
					if gotS != want {
						t.Fatalf("%s: the store merged\n%s\nreplay.MergeCommits\n%s", name, gotS, want)
					}
					outcomes[i] = append(outcomes[i], gotS)
				}
				out, want := oracle(res)
				got, err := s.Merge(ctx, "c", "x", "y", res, "", "")
				if err != nil {
					t.Fatalf("%s: resolved merge: %v", name, err)
				}
				gotS := mergeOutcome(t, got.Ops, got.Commit.ContextHash, got.Resolved, got.Unused, nil)
				if gotS != want {
					t.Fatalf("%s: with resolutions the store merged\n%s\nreplay.MergeCommits\n%s", name, gotS, want)
				}
				outcomes[i] = append(outcomes[i], gotS)
				// The merge commit folds to its hash, and its trust is
				// that of the oracle's merged state.
				if _, err := replay.Fold(ctx, s.Source("c"), got.Commit.ID, replay.Options{}); err != nil {
					t.Fatalf("%s: fold of the merge commit: %v", name, err)
				}
				wantTrust := maps.Collect(graph.NewTrustIndexFor(out.Plan.State, s.baseFor).Unconfirmed())
				var gotTrust map[string]graph.Status
				if err := s.Read(ctx, "c", "x", func(v *View) error {
					gotTrust = maps.Collect(v.Trust.Unconfirmed())
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if g, w := mustJSONString(t, gotTrust), mustJSONString(t, wantTrust); g != w {
					t.Fatalf("%s: trust after the merge\n%s\nthe oracle's\n%s", name, g, w)
				}
				outcomes[i] = append(outcomes[i], mustJSONString(t, gotTrust))
				mustCheck(t, s)
			}
			if !slices.Equal(outcomes[0], outcomes[1]) {
				for j := range min(len(outcomes[0]), len(outcomes[1])) {
					if outcomes[0][j] != outcomes[1][j] {
						t.Errorf("%s seed %d, outcome %d: x's commits first\n%s\ny's first\n%s", shape, seed, j, outcomes[0][j], outcomes[1][j])
					}
				}
				if len(outcomes[0]) != len(outcomes[1]) {
					t.Errorf("%s seed %d: x's commits first the merge conflicted %v, y's first %v", shape, seed, len(outcomes[0]) > 2, len(outcomes[1]) > 2)
				}
			}
		}
	}
	if virtual == 0 || noBase == 0 {
		t.Fatalf("%d keys the merge bases disagree on merged against a virtual base, %d with none: the shapes do not exercise both", virtual, noBase)
	}
}

// crissCrossConflictOracle returns, sorted, the keys of the artifact and
// edge conflicts of merging commit theirs into ours of context "c" in s,
// found per key from whole folded states, with no merge code: the merge
// bases and their own merge base (the ancestor) are found the simple way,
// from the commits' whole ancestries. A key the bases agree on conflicts
// when both sides changed it, differently. One they disagree on has a
// virtual base when there is one ancestor and every base that differs
// from it has the same; then it conflicts as one they agree on, and
// otherwise when the sides differ. It also returns how many disagreed
// keys had a virtual base, and how many had none.
func crissCrossConflictOracle(t *testing.T, s *Store, ours, theirs hashing.Digest) (keys []string, virtual, none int) {
	t.Helper()
	ctx := context.Background()
	anc := func(id hashing.Digest) map[hashing.Digest]bool {
		seen := map[hashing.Digest]bool{}
		for todo := []hashing.Digest{id}; len(todo) > 0; {
			c := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[c] {
				continue
			}
			seen[c] = true
			cm, err := s.GetCommit(ctx, "c", c)
			if err != nil {
				t.Fatal(err)
			}
			todo = append(todo, cm.Parents...)
		}
		return seen
	}
	best := func(ids ...hashing.Digest) []hashing.Digest {
		var common, out []hashing.Digest
		for id := range anc(ids[0]) {
			all := true
			for _, o := range ids[1:] {
				all = all && anc(o)[id]
			}
			if all {
				common = append(common, id)
			}
		}
		for _, c := range common {
			if !slices.ContainsFunc(common, func(d hashing.Digest) bool { return d != c && anc(d)[c] }) {
				out = append(out, c)
			}
		}
		return out
	}
	fold := func(id hashing.Digest) *graph.State {
		res, err := replay.Fold(ctx, s.Source("c"), id, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res.State
	}
	var bases []*graph.State
	baseIDs := best(ours, theirs)
	for _, b := range baseIDs {
		bases = append(bases, fold(b))
	}
	var ancestor *graph.State
	if len(baseIDs) > 1 {
		if a := best(baseIDs...); len(a) == 1 {
			ancestor = fold(a[0])
		}
	}
	os, ts := fold(ours), fold(theirs)
	const unknown = "\x00unknown"
	check := func(key string, val func(*graph.State) string) {
		vs := make([]string, len(bases))
		for i, b := range bases {
			vs[i] = val(b)
		}
		b := vs[0]
		if slices.ContainsFunc(vs, func(v string) bool { return v != b }) {
			changed := map[string]bool{}
			for _, v := range vs {
				if ancestor == nil || v != val(ancestor) {
					changed[v] = true
				}
			}
			b = unknown
			if ancestor != nil && len(changed) == 1 {
				for v := range changed {
					b = v
				}
				virtual++
			} else {
				none++
			}
		}
		if o, th := val(os), val(ts); o != b && th != b && o != th {
			keys = append(keys, key)
		}
	}
	ids := map[string]bool{}
	edges := map[graph.EdgeKey]bool{}
	for _, st := range append(slices.Clone(bases), os, ts) {
		for _, id := range st.ArtifactIDs() {
			ids[id] = true
		}
		for _, e := range st.Edges() {
			edges[e.Key()] = true
		}
	}
	for id := range ids {
		check(replay.ArtifactKey(id), func(st *graph.State) string {
			if a := st.Artifact(id); a != nil {
				return a.Type + a.ContentHash.String() + a.ProducedBy
			}
			return ""
		})
	}
	for k := range edges {
		check(replay.EdgeConflictKey(k), func(st *graph.State) string {
			if e := st.Edge(k); e != nil {
				return "+" + string(e.Attrs)
			}
			return ""
		})
	}
	slices.Sort(keys)
	return keys, virtual, none
}

// kindOf names the kind of a merge that wrote no plan.
func kindOf(out *replay.MergeOutcome) string {
	if out == nil {
		return ""
	}
	return string(out.Kind)
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
