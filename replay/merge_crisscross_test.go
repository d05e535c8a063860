package replay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// mergeCommit merges commit theirs into branch ours of m, as m.merge
// does a branch.
func (m *memChain) mergeCommit(ours string, theirs hashing.Digest, res map[string]Resolution) (*MergeOutcome, error) {
	m.heads["\x00theirs"] = theirs
	defer delete(m.heads, "\x00theirs")
	return m.merge(ours, "\x00theirs", res)
}

// reviewCrissCross builds the criss-cross a reviewer found: x sets z=a
// and y sets z=b (x's commit first, or y's); x merges y's commit keeping
// a, y merges x's commit keeping b. Each merge commit is the other's
// criss-cross.
func reviewCrissCross(t *testing.T, xFirst bool) *memChain {
	m := newMemChain(t)
	m.commit("main", tPut("z", "note", map[string]any{"v": "base"}), tPut("keep", "note", map[string]any{}))
	m.branch("x", "main")
	m.branch("y", "main")
	var x1, y1 *Commit
	if xFirst {
		x1 = m.commit("x", tPut("z", "note", map[string]any{"v": "a"}))
		y1 = m.commit("y", tPut("z", "note", map[string]any{"v": "b"}))
	} else {
		y1 = m.commit("y", tPut("z", "note", map[string]any{"v": "b"}))
		x1 = m.commit("x", tPut("z", "note", map[string]any{"v": "a"}))
	}
	keep := map[string]Resolution{"z": {Take: TakeOurs}}
	if _, err := m.mergeCommit("x", y1.ID, keep); err != nil {
		t.Fatal(err)
	}
	if _, err := m.mergeCommit("y", x1.ID, keep); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMergeCrissCrossConflicts: merging y into x after the criss-cross
// above reports z as an edit_edit conflict — the two merge bases
// disagree on it and the sides differ — whichever of x's and y's
// commits came first; resolved, it takes what the resolution says, in
// both orders.
func TestMergeCrissCrossConflicts(t *testing.T) {
	for _, xFirst := range []bool{true, false} {
		m := reviewCrissCross(t, xFirst)
		_, err := m.merge("x", "y", nil)
		var ce *ConflictError
		if !errors.As(err, &ce) || conflictSummary(ce.Conflicts) != "z=edit_edit" {
			t.Errorf("x's commit first %v: merging y into x: %v; want one edit_edit conflict on z", xFirst, err)
			continue
		}
		if c := ce.Conflicts[0]; c.Base != nil || c.Ours == nil || c.Theirs == nil {
			t.Errorf("x's commit first %v: conflict %+v: want no base (the bases disagree), both sides", xFirst, c)
		}
		out, err := m.merge("x", "y", map[string]Resolution{"z": {Take: TakeTheirs}})
		if err != nil {
			t.Fatalf("x's commit first %v: resolved: %v", xFirst, err)
		}
		if z := m.state("x").Artifact("z"); z == nil || z.ContentHash != hashing.ContentHash(tPut("z", "note", map[string]any{"v": "b"}).Data) {
			t.Errorf("x's commit first %v: z after taking theirs: %+v (ops %s)", xFirst, z, mustJSON(t, out.Plan.Ops))
		}
	}
}

// TestMergeCrissCrossAgreedSidesMergeClean: when both cross merges
// settled z the same way, the sides agree on it and the merge takes it
// without a conflict though the bases disagree.
func TestMergeCrissCrossAgreedSidesMergeClean(t *testing.T) {
	for _, xFirst := range []bool{true, false} {
		m := newMemChain(t)
		m.commit("main", tPut("z", "note", map[string]any{"v": "base"}))
		m.branch("x", "main")
		m.branch("y", "main")
		var x1, y1 *Commit
		if xFirst {
			x1, y1 = m.commit("x", tPut("z", "note", map[string]any{"v": "a"})), m.commit("y", tPut("z", "note", map[string]any{"v": "b"}))
		} else {
			y1, x1 = m.commit("y", tPut("z", "note", map[string]any{"v": "b"})), m.commit("x", tPut("z", "note", map[string]any{"v": "a"}))
		}
		if _, err := m.mergeCommit("x", y1.ID, map[string]Resolution{"z": {Take: TakeOurs}}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.mergeCommit("y", x1.ID, map[string]Resolution{"z": {Take: TakeTheirs}}); err != nil {
			t.Fatal(err)
		}
		m.commit("y", tPut("w", "note", map[string]any{}))
		out, err := m.merge("x", "y", nil)
		if err != nil {
			t.Fatalf("x's commit first %v: %v", xFirst, err)
		}
		if got := mustJSON(t, opIDs(out.Plan.Ops)); got != `["w"]` {
			t.Errorf("x's commit first %v: merge ops on %s, want w only", xFirst, got)
		}
	}
}

func opIDs(ops []graph.Op) []string {
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

// bestCommonAncestors returns, the simple way, the best common ancestors
// of ids in m (the common ancestors of them all that no other common
// ancestor descends from), sorted by id.
func bestCommonAncestors(m *memChain, ids ...hashing.Digest) []hashing.Digest {
	anc := func(id hashing.Digest) map[hashing.Digest]bool {
		seen := map[hashing.Digest]bool{}
		todo := []hashing.Digest{id}
		for len(todo) > 0 {
			c := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[c] {
				continue
			}
			seen[c] = true
			todo = append(todo, m.commits[c].Parents...)
		}
		return seen
	}
	var common []hashing.Digest
	for id := range anc(ids[0]) {
		all := true
		for _, o := range ids[1:] {
			all = all && anc(o)[id]
		}
		if all {
			common = append(common, id)
		}
	}
	var best []hashing.Digest
	for _, c := range common {
		redundant := false
		for _, d := range common {
			if d != c && anc(d)[c] {
				redundant = true
				break
			}
		}
		if !redundant {
			best = append(best, c)
		}
	}
	slices.SortFunc(best, func(x, y hashing.Digest) int { return slices.Compare(x[:], y[:]) })
	return best
}

// crissCrossShapes names the histories crissCrossCase builds.
var crissCrossShapes = []string{"fork", "criss-cross", "criss-cross+commits", "three-bases", "nested", "merged-back"}

// crissCrossCase builds one history of shape on a fresh chain, its side
// commits drawn from seed: every side's changes come from a generator of
// its own and every merge's resolutions from one of their own, so the
// states do not depend on xFirst, which only orders the commits (x's
// before y's, or the other way round). It returns the chain with
// branches x and y to merge.
func crissCrossCase(t *testing.T, shape string, seed uint64, xFirst bool) *memChain {
	t.Helper()
	m := newMemChain(t)
	if ops := randomOps(rand.New(rand.NewPCG(seed, 1)), m.state("main"), "b", 24); len(ops) > 0 {
		m.commit("main", ops...)
	}
	sides := []string{"x", "y", "w"}
	rs := map[string]*rand.Rand{}
	for i, s := range sides {
		m.branch(s, "main")
		rs[s] = rand.New(rand.NewPCG(seed, uint64(10+i)))
	}
	order := func(names ...string) []string {
		if !xFirst {
			names = slices.Clone(names)
			slices.Reverse(names)
		}
		return names
	}
	step := 0
	change := func(names ...string) map[string]hashing.Digest {
		step++
		at := map[string]hashing.Digest{}
		for _, s := range order(names...) {
			if ops := randomOps(rs[s], m.state(s), fmt.Sprintf("n%d-", step), 6); len(ops) > 0 {
				if _, err := m.tryCommit(s, nil, ops...); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			at[s] = m.heads[s]
		}
		return at
	}
	mergeInto := func(ours string, theirs hashing.Digest, key uint64) {
		r := rand.New(rand.NewPCG(seed, 100+key))
		res := map[string]Resolution{}
		for range 4 {
			_, err := m.mergeCommit(ours, theirs, res)
			var ce *ConflictError
			if !errors.As(err, &ce) {
				if err != nil {
					t.Fatalf("seed %d: merge into %s: %v", seed, ours, err)
				}
				return
			}
			for _, c := range ce.Conflicts {
				res[c.Key] = Resolution{Take: []string{TakeOurs, TakeTheirs}[r.IntN(2)]}
			}
		}
		t.Fatalf("seed %d: merge into %s still conflicts after 4 rounds", seed, ours)
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
			mergeInto(mi.ours, mi.theirs, mi.key)
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
		// Each of these merges is a criss-cross of its own.
		run(into{"x", at["y"], 3}, into{"y", at["x"], 4})
	case "merged-back":
		// x merges y, then y merges x: one base, reached through a
		// merge.
		change("x", "y")
		mergeInto("x", m.heads["y"], 1)
		at := change("x", "y")
		mergeInto("y", at["x"], 2)
		change("x", "y")
	default:
		t.Fatalf("no shape %q", shape)
	}
	return m
}

// mergeOutcomeOf renders what merging theirs into ours with res gives:
// its kind, and the conflicts or the plan's ops, hash and settled
// conflicts.
func mergeOutcomeOf(t *testing.T, out *MergeOutcome, err error) string {
	var ce *ConflictError
	switch {
	case errors.As(err, &ce):
		return "conflicts " + mustJSON(t, ce.Conflicts)
	case err != nil:
		return "error " + err.Error()
	case out.Plan == nil:
		return string(out.Kind)
	}
	return fmt.Sprintf("%s ops %s hash %s resolved %s unused %v", out.Kind, mustJSON(t, out.Plan.Ops), out.Plan.ContextHash, mustJSON(t, out.Plan.Resolved), out.Plan.Unused)
}

// TestMergeCrissCrossShapes builds histories of several shapes — a plain
// fork, criss-crosses of two and three merge bases, a criss-cross of
// merge commits that were criss-crosses themselves, a merge back and
// forth with one base — each twice, x's commits first and y's first,
// and merges y into x: the outcome (the conflicts, then with every
// conflict settled by a seeded coin the ops, hash and settled conflicts)
// is the same in both orders; the conflicts are those a per-key oracle
// finds from the whole states of the bases and of their own merge base
// (found the simple way), an artifact or edge on which the merge bases
// disagree being merged against the value every base that changed it
// since that ancestor changed it to, and, when two changed it differently
// or the bases have no single merge base (the nested criss-cross), a
// conflict exactly when the two sides differ on it; and the merge
// commits and folds.
func TestMergeCrissCrossShapes(t *testing.T) {
	ctx := context.Background()
	multi, virtual, noBase := 0, 0, 0
	for _, shape := range crissCrossShapes {
		for seed := uint64(1); seed <= 12; seed++ {
			var outcomes [2][]string
			for i, xFirst := range []bool{true, false} {
				m := crissCrossCase(t, shape, seed, xFirst)
				ours, theirs := m.heads["x"], m.heads["y"]
				bases := bestCommonAncestors(m, ours, theirs)
				if len(bases) > 1 {
					multi++
				}
				var baseStates []*graph.State
				for _, b := range bases {
					baseStates = append(baseStates, m.states[b])
				}
				var ancestor *graph.State
				if len(bases) > 1 {
					if anc := bestCommonAncestors(m, bases...); len(anc) == 1 {
						ancestor = m.states[anc[0]]
					}
				}
				out, err := MergeCommits(ctx, m, ours, theirs, nil, Options{})
				outcomes[i] = append(outcomes[i], mergeOutcomeOf(t, out, err))
				// MergeOver does not depend on the order of the bases, and
				// the scope of the diffs from one base to the sides and to
				// the other bases is enough.
				os, ts, po := m.state("x"), m.state("y"), planOutcome(t)
				whole := po(MergeOver(baseStates, ancestor, os, ts, nil))
				diffs := []*DiffResult{Diff(baseStates[0], os, nil, nil), Diff(baseStates[0], ts, nil, nil)}
				for _, b := range baseStates[1:] {
					diffs = append(diffs, Diff(baseStates[0], b, nil, nil))
				}
				if got := po(MergeOverWithinData(baseStates, ancestor, os, ts, ScopeOf(diffs...), nil, nil)); got != whole {
					t.Errorf("%s seed %d: MergeOverWithinData\n%s\nMergeOver\n%s", shape, seed, got, whole)
				}
				if got := po(MergeOver(reversed(baseStates), ancestor, os, ts, nil)); got != whole {
					t.Errorf("%s seed %d: the bases reversed\n%s\nin order\n%s", shape, seed, got, whole)
				}
				var ce *ConflictError
				res := map[string]Resolution{}
				var got []Conflict
				if errors.As(err, &ce) {
					got = ce.Conflicts
				}
				if err == nil || ce != nil {
					v, n := checkConflictOracleBases(t, fmt.Sprintf("%s seed %d x first %v", shape, seed, xFirst), baseStates, ancestor, m.state("x"), m.state("y"), got)
					virtual, noBase = virtual+v, noBase+n
				}
				if ce != nil {
					r := rand.New(rand.NewPCG(seed, 77))
					for range 4 {
						for _, c := range ce.Conflicts {
							res[c.Key] = Resolution{Take: []string{TakeOurs, TakeTheirs}[r.IntN(2)]}
						}
						if _, err = MergeCommits(ctx, m, ours, theirs, res, Options{}); !errors.As(err, &ce) {
							break
						}
					}
				} else if err != nil {
					t.Fatalf("%s seed %d: %v", shape, seed, err)
				}
				out, err = m.merge("x", "y", res)
				outcomes[i] = append(outcomes[i], mergeOutcomeOf(t, out, err))
				if err != nil {
					t.Fatalf("%s seed %d x first %v: resolved merge: %v", shape, seed, xFirst, err)
				}
				if _, err := Fold(ctx, m, m.heads["x"], Options{Objects: ObjectsAll}); err != nil {
					t.Fatalf("%s seed %d: %v", shape, seed, err)
				}
			}
			for j := range outcomes[0] {
				if outcomes[0][j] != outcomes[1][j] {
					t.Errorf("%s seed %d, merge %d: x's commits first\n%s\ny's first\n%s", shape, seed, j, outcomes[0][j], outcomes[1][j])
				}
			}
		}
	}
	if multi == 0 || virtual == 0 || noBase == 0 {
		t.Fatalf("%d cases of several merge bases, %d keys merged against a virtual base, %d with none: the shapes do not exercise them all", multi, virtual, noBase)
	}
}

// checkConflictOracleBases is checkConflictOracle over several merge
// bases and their own merge base ancestor (nil: none, or not one): an
// artifact or edge the bases agree on conflicts when both sides changed
// it differently; one they disagree on is compared, base by base, with
// ancestor — when every base that differs from it has the same, that is
// its virtual base, and it conflicts as one the bases agree on; otherwise
// it conflicts when the sides differ. It returns how many keys the bases
// disagreed on had a virtual base, and how many had none.
func checkConflictOracleBases(t *testing.T, name string, bases []*graph.State, ancestor, ours, theirs *graph.State, got []Conflict) (virtual, none int) {
	t.Helper()
	want := map[string]bool{}
	val := func(s *graph.State, id string) string {
		if a := s.Artifact(id); a != nil {
			return a.Type + a.ContentHash.String() + a.ProducedBy
		}
		return ""
	}
	eval := func(s *graph.State, k graph.EdgeKey) string {
		if e := s.Edge(k); e != nil {
			return "+" + string(e.Attrs)
		}
		return ""
	}
	const unknown = "\x00unknown"
	// base merges the bases' values vs (and the ancestor's, anc, when
	// there is one) as the oracle says.
	base := func(vs []string, anc string, hasAnc bool) string {
		if !slices.ContainsFunc(vs, func(v string) bool { return v != vs[0] }) {
			return vs[0]
		}
		changed := map[string]bool{}
		for _, v := range vs {
			if v != anc {
				changed[v] = true
			}
		}
		if !hasAnc || len(changed) != 1 {
			none++
			return unknown
		}
		virtual++
		for v := range changed {
			return v
		}
		return unknown
	}
	all := append(slices.Clone(bases), ours, theirs)
	for _, id := range unionIDs(all...) {
		var vs []string
		for _, s := range bases {
			vs = append(vs, val(s, id))
		}
		anc := ""
		if ancestor != nil {
			anc = val(ancestor, id)
		}
		b := base(vs, anc, ancestor != nil)
		o, th := val(ours, id), val(theirs, id)
		if o != b && th != b && o != th {
			want[id] = true
		}
	}
	for _, k := range unionEdges(all...) {
		var vs []string
		for _, s := range bases {
			vs = append(vs, eval(s, k))
		}
		anc := ""
		if ancestor != nil {
			anc = eval(ancestor, k)
		}
		b := base(vs, anc, ancestor != nil)
		o, th := eval(ours, k), eval(theirs, k)
		if o != b && th != b && o != th {
			want["edge:"+k.String()] = true
		}
	}
	for _, c := range got {
		switch c.Kind {
		case ConflictEditEdit, ConflictDeleteEdit, ConflictEdgeAttrs, ConflictEdgeDeleteEdit:
			if !want[c.Key] {
				t.Errorf("%s: unexpected conflict %s (%s)", name, c.Key, c.Kind)
			}
			delete(want, c.Key)
		}
	}
	for k := range want {
		t.Errorf("%s: missing conflict %s", name, k)
	}
	return virtual, none
}

// countingSource counts the commits read through it.
type countingSource struct {
	Source
	reads int
}

func (c *countingSource) GetCommit(ctx context.Context, id hashing.Digest) (*Commit, error) {
	c.reads++
	return c.Source.GetCommit(ctx, id)
}

// TestMergeBasesRandomDAG builds random histories of four branches that
// commit and merge each other's heads and older commits, and checks
// MergeBases against every best common ancestor found the simple way
// (from the commits' whole ancestries), ordered highest Seq first with
// MergeBase's first, and MergeBasesOf of three commits likewise; and
// that when the first base is the only one and
// each side reaches it by a single path, MergeBases reads no more commits
// than MergeBase.
func TestMergeBasesRandomDAG(t *testing.T) {
	ctx := context.Background()
	several, same := 0, 0
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		m := newMemChain(t)
		branches := []string{"b0", "b1", "b2", "b3"}
		for _, b := range branches {
			m.branch(b, "main")
		}
		n := 0
		for range 40 {
			b := branches[r.IntN(len(branches))]
			n++
			op := tPut(fmt.Sprintf("a%d", n), "note", map[string]any{})
			var extra []hashing.Digest
			if r.IntN(3) == 0 {
				// A merge of another branch's head, or of an older commit.
				other := m.heads[branches[r.IntN(len(branches))]]
				if r.IntN(3) == 0 {
					other = m.order[r.IntN(len(m.order))].ID
				}
				if other != m.heads[b] {
					extra = []hashing.Digest{other}
				}
			}
			if _, err := m.tryCommit(b, extra, op); err != nil {
				t.Fatal(err)
			}
		}
		for range 30 {
			a, b := m.order[r.IntN(len(m.order))].ID, m.order[r.IntN(len(m.order))].ID
			if r.IntN(2) == 0 {
				a, b = m.heads[branches[r.IntN(4)]], m.heads[branches[r.IntN(4)]]
			}
			src := &countingSource{Source: m}
			got, err := MergeBases(ctx, src, a, b)
			if err != nil {
				t.Fatal(err)
			}
			want := bestCommonAncestors(m, a, b)
			ids := make([]hashing.Digest, 0, len(got))
			for i, c := range got {
				ids = append(ids, c.ID)
				if i > 0 && !(got[i-1].Seq > c.Seq) {
					t.Fatalf("seed %d: bases out of order: seq %d before %d", seed, got[i-1].Seq, c.Seq)
				}
			}
			slices.SortFunc(ids, func(x, y hashing.Digest) int { return slices.Compare(x[:], y[:]) })
			if !slices.Equal(ids, want) {
				t.Fatalf("seed %d: MergeBases of %s and %s: %v, want %v", seed, a.Short(), b.Short(), ids, want)
			}
			one := &countingSource{Source: m}
			first, err := MergeBase(ctx, one, a, b)
			if err != nil || first.ID != got[0].ID {
				t.Fatalf("seed %d: MergeBase %v (%v), MergeBases' first %s", seed, first, err, got[0].ID.Short())
			}
			if len(got) > 1 {
				several++
			} else if src.reads == one.reads {
				same++
			}
			// MergeBasesOf of three commits against the simple way.
			c := m.order[r.IntN(len(m.order))].ID
			of, err := MergeBasesOf(ctx, m, a, b, c)
			if err != nil {
				t.Fatal(err)
			}
			ofIDs := make([]hashing.Digest, 0, len(of))
			for _, x := range of {
				ofIDs = append(ofIDs, x.ID)
			}
			slices.SortFunc(ofIDs, func(x, y hashing.Digest) int { return slices.Compare(x[:], y[:]) })
			if want := bestCommonAncestors(m, a, b, c); !slices.Equal(ofIDs, want) {
				t.Fatalf("seed %d: MergeBasesOf %s, %s and %s: %v, want %v", seed, a.Short(), b.Short(), c.Short(), ofIDs, want)
			}
		}
	}
	if several == 0 || same == 0 {
		t.Fatalf("%d cases of several bases, %d of one read as cheaply: the histories do not exercise both", several, same)
	}
}

// TestMergeBasesForkReadsAsMergeBase: two branches forked from main and
// changed, each by a line of commits, have one merge base; MergeBases
// finds it reading exactly the commits MergeBase reads.
func TestMergeBasesForkReadsAsMergeBase(t *testing.T) {
	ctx := context.Background()
	m := newMemChain(t)
	for i := range 5 {
		m.commit("main", tPut(fmt.Sprintf("m%d", i), "note", map[string]any{}))
	}
	m.branch("x", "main")
	m.branch("y", "main")
	for i := range 4 {
		m.commit("x", tPut(fmt.Sprintf("x%d", i), "note", map[string]any{}))
		m.commit("y", tPut(fmt.Sprintf("y%d", i), "note", map[string]any{}))
	}
	one, all := &countingSource{Source: m}, &countingSource{Source: m}
	b, err := MergeBase(ctx, one, m.heads["x"], m.heads["y"])
	if err != nil {
		t.Fatal(err)
	}
	bs, err := MergeBases(ctx, all, m.heads["x"], m.heads["y"])
	if err != nil || len(bs) != 1 || bs[0].ID != b.ID {
		t.Fatalf("MergeBases %v (%v), MergeBase %s", bs, err, b.ID.Short())
	}
	if one.reads != all.reads {
		t.Fatalf("MergeBases read %d commits, MergeBase %d", all.reads, one.reads)
	}
}

func reversed[T any](s []T) []T {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// planOutcome returns a function rendering what a merge of states
// returned.
func planOutcome(t *testing.T) func(*MergePlan, error) string {
	return func(p *MergePlan, err error) string {
		var ce *ConflictError
		switch {
		case errors.As(err, &ce):
			return "conflicts " + mustJSON(t, ce.Conflicts)
		case err != nil:
			return "error " + err.Error()
		}
		return fmt.Sprintf("ops %s hash %s resolved %s unused %v", mustJSON(t, p.Ops), p.ContextHash, mustJSON(t, p.Resolved), p.Unused)
	}
}
