package graph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forkDump renders everything a reader of s can observe about the ids
// n0…n(nids-1) and the types of the generator, in a fixed order.
func forkDump(s *State, nids int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hash %s artifacts %d edges %d tombstones %d\n", s.Hash(), s.NumArtifacts(), s.NumEdges(), s.NumTombstones())
	for _, a := range s.Artifacts() {
		fmt.Fprintf(&b, "a %s %s v%d %s %s\n", a.ID, a.Type, a.Version, a.ContentHash, a.ProducedBy)
	}
	for _, e := range s.Edges() {
		fmt.Fprintf(&b, "e %s %s\n", e.Key(), e.Attrs)
	}
	for i := range nids {
		id := "n" + strconv.Itoa(i)
		fmt.Fprintf(&b, "%s last %d out %v in %v deps %v dependents %v\n", id, s.LastVersion(id),
			tqEdgeStrings(s.Out(id)), tqEdgeStrings(s.In(id)), s.DependsOn(id), s.Dependents(id))
	}
	for _, typ := range forkTypes {
		fmt.Fprintf(&b, "type %s %d\n", typ, s.countOf(typ))
	}
	// Iteration must agree with the sorted listings.
	n := 0
	s.RangeArtifacts(func(a *Artifact) bool { n++; return s.Artifact(a.ID) == a })
	m := 0
	s.RangeEdges(func(e *Edge) bool { m++; return s.Edge(e.Key()) == e })
	fmt.Fprintf(&b, "ranged %d %d\n", n, m)
	return b.String()
}

var forkTypes = []string{"claim", "answer", "evidence", "question", "tool_error", "fetch_verdict", "mystery"}

// forkOps returns the ops of one random commit against s. With hub set,
// half the links point at n0, whose edge set soon outgrows a list, so
// forks hold deltas over it.
func forkOps(r *rand.Rand, s *State, nids int, hub bool) []Op {
	id := func() string { return "n" + strconv.Itoa(r.IntN(nids)) }
	existing := func() string {
		if ids := s.ArtifactIDs(); len(ids) > 0 && r.IntN(10) > 0 {
			return ids[r.IntN(len(ids))]
		}
		return id()
	}
	rels := []string{"derived_from", "supported_by", "uses", "mentions", "cites"}
	if _, ok := s.RelationDef("rests_on"); ok {
		rels = append(rels, "rests_on")
	}
	putOp := func(x string) Op {
		if r.IntN(3) == 0 {
			v := [...]string{"RETRIEVED", "RETRIEVED", "FAILED", "UNKNOWN"}[r.IntN(4)]
			return tqFetch(x, v, "r"+strconv.Itoa(r.IntN(2)))
		}
		return tqPutData(x, forkTypes[[...]int{0, 1, 2, 3, 4, 6}[r.IntN(6)]], map[string]any{"v": r.IntN(3)})
	}
	var ops []Op
	if ids := s.ArtifactIDs(); hub && len(ids) > 0 {
		for range 1 + r.IntN(3) {
			if from := ids[r.IntN(len(ids))]; from != "n0" {
				ops = append(ops, tqLink(from, rels[r.IntN(len(rels))], "n0"))
			}
		}
	}
	if r.IntN(6) == 0 {
		// Definitions in the commit: a user type the generator also puts
		// artifacts of (so that their base changes with it) and a user
		// dependency relation, each recorded again now and then with a
		// new description.
		defs, err := DefinitionOps(s,
			[]TypeDef{{Name: "mystery", Role: RoleSource, Description: "d" + strconv.Itoa(r.IntN(3))}},
			[]RelationDef{{Name: "rests_on", Depends: true, Description: "d" + strconv.Itoa(r.IntN(3))}})
		if err != nil {
			panic(err)
		}
		ops = append(ops, defs...)
	}
	unlinked := map[EdgeKey]bool{}
	for range 1 + r.IntN(5) {
		switch k := r.IntN(10); {
		case k < 3:
			ops = append(ops, putOp(id()))
		case k < 7:
			op := tqLink(existing(), rels[r.IntN(len(rels))], existing())
			if hub && r.IntN(2) == 0 {
				op.To = "n0"
			}
			if r.IntN(4) == 0 {
				op.Attrs = []byte(`{"w":` + strconv.Itoa(r.IntN(2)) + `}`)
			}
			ops = append(ops, op)
		case k < 9:
			if es := s.Edges(); len(es) > 0 {
				if e := es[r.IntN(len(es))]; !unlinked[e.Key()] {
					unlinked[e.Key()] = true
					ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
				}
			}
		default:
			x := id()
			if hub && x == "n0" {
				continue // the hub stays
			}
			for _, e := range append(s.Out(x), s.In(x)...) {
				if !unlinked[e.Key()] {
					unlinked[e.Key()] = true
					ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
				}
			}
			ops = append(ops, tqDel(x))
			if r.IntN(3) == 0 {
				ops = append(ops, putOp(x))
			}
		}
	}
	return ops
}

func taintStrings(es []*TaintError) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

// TestForkMatchesWhole is the fork oracle. A head takes groups of
// commits the way the store's committer decides them: each group on a
// fork of the head, each commit on a fork of the group's fork, absorbed
// when accepted and dropped when refused; the group is absorbed by the
// head, or dropped as a failed write. After every step the forks must
// show exactly what a whole state that applied (and undid) the same
// commits shows, their trust index must equal a full pass, and the head
// must not change until it absorbs its group.
func TestForkMatchesWhole(t *testing.T) {
	seeds := 120
	if testing.Short() {
		seeds = 20
	}
	hubs, big, accepted := 0, 0, 0
	for seed := range seeds {
		maxIn, n := forkRun(t, uint64(seed), false)
		accepted += n
		if seed%2 == 1 {
			hubs++
			if maxIn > edgeSetMax {
				big++
			}
		}
	}
	if accepted < 15*seeds {
		t.Fatalf("only %d commits accepted over %d seeds; the generator is too weak", accepted, seeds)
	}
	if big < hubs/2 {
		t.Fatalf("the hub outgrew a list in only %d of %d hub runs; the generator is too weak", big, hubs)
	}
}

// forkRun runs one seed and returns the largest in-degree of the hub n0
// (odd seeds have one) and how many commits the head took. With lazy set
// the head is a state over a source (NewStateOver) made from the whole
// state, made again from time to time from what the head shows, as the
// store rebases a cached head on its newest durable commit.
func forkRun(t *testing.T, seed uint64, lazy bool) (maxIn, accepted int) {
	r := rand.New(rand.NewPCG(seed, 7))
	nids := 6 + r.IntN(20)
	hub := seed%2 == 1
	if hub {
		nids = 30 + r.IntN(20)
	}
	// The base follows the definitions of the state it judges, as the
	// store's does: a fork that records a type judges by it.
	baseOf := func(st *State) BaseFunc { return st.Base(nil) }
	head := NewState(nil)
	if hub {
		tqApply(t, head, tqPut("n0", "question"))
	}
	whole := head.Clone()
	if lazy {
		head = overSource(t, head)
	}
	hidx := NewTrustIndexFor(head, baseOf)
	widx := NewTrustIndexFor(whole, baseOf)
	if lazy {
		hidx = overTrust(hidx, baseOf)
	}
	for g := range 40 {
		before := forkDump(head, nids)
		beforeSum := hidx.Summary()
		gf, gt := head.Fork(), hidx.Fork()
		for c := range 1 + r.IntN(4) {
			ops := forkOps(r, gf, nids, hub)
			child := gf.Fork()
			ch, err := child.ApplyOps(ops)
			wch, werr := whole.ApplyOps(ops)
			if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
				t.Fatalf("seed %d group %d commit %d: fork says %v, whole state says %v", seed, g, c, err, werr)
			}
			if err != nil {
				continue
			}
			if got, want := taintStrings(TaintedLinks(child, gt, ch)), taintStrings(TaintedLinks(whole, widx, wch)); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d group %d commit %d: tainted links on the fork %v, on the whole state %v", seed, g, c, got, want)
			}
			// Applying and judging at once (ApplyTainted, as the store
			// decides) finds the same links and leaves the index the
			// commit makes.
			applied := gt.Fork()
			if got, want := taintStrings(applied.ApplyTainted(child, ch)), taintStrings(TaintedLinks(child, gt, ch)); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d group %d commit %d: ApplyTainted found %v, TaintedLinks %v", seed, g, c, got, want)
			}
			if err := applied.Verify(child); err != nil {
				t.Fatalf("seed %d group %d commit %d: the index ApplyTainted left: %v", seed, g, c, err)
			}
			if got, want := forkDump(child, nids), forkDump(whole, nids); got != want {
				t.Fatalf("seed %d group %d commit %d: the commit's fork shows\n%s\nthe whole state\n%s", seed, g, c, got, want)
			}
			if r.IntN(5) == 0 {
				// Refused after deciding (a check, quarantine): dropped.
				whole.Undo(wch)
				continue
			}
			if err := gf.Absorb(child); err != nil {
				t.Fatal(err)
			}
			gt.Apply(gf, ch)
			widx.Apply(whole, wch)
			accepted++
			if got, want := forkDump(gf, nids), forkDump(whole, nids); got != want {
				t.Fatalf("seed %d group %d commit %d: the group's fork shows\n%s\nthe whole state\n%s", seed, g, c, got, want)
			}
			if err := gt.Verify(gf); err != nil {
				t.Fatalf("seed %d group %d commit %d: %v", seed, g, c, err)
			}
			if gt.Summary() != widx.Summary() {
				t.Fatalf("seed %d group %d commit %d: summary %+v on the fork, %+v whole", seed, g, c, gt.Summary(), widx.Summary())
			}
		}
		if got := forkDump(head, nids); got != before || hidx.Summary() != beforeSum {
			t.Fatalf("seed %d group %d: the head changed before it absorbed its group", seed, g)
		}
		if r.IntN(5) == 0 {
			// The group's write failed: the head stays as it was.
			whole, widx = wholeCopy(head), hidx.Clone()
			continue
		}
		if err := head.Absorb(gf); err != nil {
			t.Fatal(err)
		}
		if err := hidx.Absorb(gt); err != nil {
			t.Fatal(err)
		}
		if got, want := forkDump(head, nids), forkDump(whole, nids); got != want {
			t.Fatalf("seed %d group %d: the head shows\n%s\nthe whole state\n%s", seed, g, got, want)
		}
		if err := hidx.Verify(head); err != nil {
			t.Fatalf("seed %d group %d: %v", seed, g, err)
		}
		if lazy {
			if err := lazyInvariants(head); err != nil {
				t.Fatalf("seed %d group %d: after absorb: %v", seed, g, err)
			}
			if err := hidx.Err(); err != nil {
				t.Fatal(err)
			}
			if r.IntN(3) == 0 {
				head, hidx = overSource(t, head), overTrust(hidx, baseOf)
				if got, want := forkDump(head, nids), forkDump(whole, nids); got != want {
					t.Fatalf("seed %d group %d: the rebased head shows\n%s\nthe whole state\n%s", seed, g, got, want)
				}
			}
		} else if err := wholeInvariants(head); err != nil {
			t.Fatalf("seed %d group %d: after absorb: %v", seed, g, err)
		}
		if hub && head.inOf("n0").len() > maxIn {
			maxIn = head.inOf("n0").len()
		}
		if got, want := hidx.Report(head), ComputeTrust(head, baseOf(head)); !reflect.DeepEqual(got.PoisonRoots, want.PoisonRoots) || !reflect.DeepEqual(got.Quarantined, want.Quarantined) {
			t.Fatalf("seed %d group %d: report after absorb differs from a full pass", seed, g)
		}
	}
	return maxIn, accepted
}

// wholeInvariants checks that a whole state holds no fork markers, no
// delta edge sets, and counts that match its maps.
func wholeInvariants(s *State) error {
	if s.under != nil {
		return errors.New("a fork, not a whole state")
	}
	for id, a := range s.artifacts {
		if a == nil {
			return fmt.Errorf("artifact %s: a removal marker", id)
		}
	}
	for id, v := range s.tombstones {
		if v == 0 {
			return fmt.Errorf("tombstone %s: a removal marker", id)
		}
	}
	for k, e := range s.edges {
		if e == nil {
			return fmt.Errorf("edge %s: a removal marker", k)
		}
	}
	for _, adj := range []map[string]*edgeSet{s.out, s.in} {
		for id, es := range adj {
			if es.under != nil || es.gone != nil {
				return fmt.Errorf("edge set of %s: a delta", id)
			}
			if es.len() == 0 {
				return fmt.Errorf("edge set of %s: empty", id)
			}
		}
	}
	for typ, n := range s.typeCount {
		if n <= 0 {
			return fmt.Errorf("type %s: count %d", typ, n)
		}
	}
	if s.nArt != len(s.artifacts) || s.nTomb != len(s.tombstones) || s.nEdge != len(s.edges) {
		return fmt.Errorf("counts %d/%d/%d, maps %d/%d/%d", s.nArt, s.nTomb, s.nEdge, len(s.artifacts), len(s.tombstones), len(s.edges))
	}
	return nil
}

// TestForkAbsorbStale: a fork of a state that changed since, a fork of
// another state, and a fork already absorbed are refused, changing
// nothing.
func TestForkAbsorbStale(t *testing.T) {
	s := NewState(nil)
	tqApply(t, s, tqPut("a", "claim"))
	f := s.Fork()
	tqApply(t, f, tqPut("b", "claim"))
	tqApply(t, s, tqPut("c", "claim"))
	if err := s.Absorb(f); !errors.Is(err, ErrForkStale) {
		t.Fatalf("absorb of a stale fork: %v", err)
	}
	if s.Artifact("b") != nil {
		t.Fatal("a refused absorb changed the state")
	}
	other := NewState(nil)
	g := other.Fork()
	if err := s.Absorb(g); !errors.Is(err, ErrForkStale) {
		t.Fatalf("absorb of another state's fork: %v", err)
	}
	h := s.Fork()
	tqApply(t, h, tqPut("d", "claim"))
	if err := s.Absorb(h); err != nil {
		t.Fatal(err)
	}
	if err := s.Absorb(h); !errors.Is(err, ErrForkStale) {
		t.Fatalf("second absorb of one fork: %v", err)
	}
	if got := s.ArtifactIDs(); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Fatalf("ids %v", got)
	}

	idx := NewTrustIndex(s, tqBase)
	tf := idx.Fork()
	idx2 := NewTrustIndex(s, tqBase)
	if err := idx2.Absorb(tf); !errors.Is(err, ErrForkStale) {
		t.Fatalf("absorb of another index's fork: %v", err)
	}
}

// TestForkClone: Clone of a fork is a whole state equal to what the fork
// shows, and changing it changes neither the fork nor the state below.
func TestForkClone(t *testing.T) {
	s := NewState(nil)
	tqApply(t, s, tqPut("a", "claim"), tqPut("b", "claim"), tqLink("b", "derived_from", "a"))
	f := s.Fork()
	tqApply(t, f, tqUnlink("b", "derived_from", "a"), tqDel("a"), tqPut("c", "claim"), tqLink("c", "derived_from", "b"))
	c := f.Clone()
	if c.IsFork() {
		t.Fatal("Clone of a fork is a fork")
	}
	if got, want := forkDump(c, 4), forkDump(f, 4); got != want {
		t.Fatalf("clone shows\n%s\nfork\n%s", got, want)
	}
	fBefore, sBefore := forkDump(f, 4), forkDump(s, 4)
	tqApply(t, c, tqPut("a", "claim"))
	if forkDump(f, 4) != fBefore || forkDump(s, 4) != sBefore {
		t.Fatal("changing the clone changed the fork or its state")
	}
	if c.LastVersion("a") != 2 {
		t.Fatalf("re-created artifact version %d, want 2 (tombstone kept)", c.LastVersion("a"))
	}
}

// BenchmarkForkHubCommit: one commit of a claim linked to a hub with 100k
// dependents, applied in place (as before forks) and decided on a fork
// that the state then absorbs (as the store does). The fork's edge set of
// the hub is a delta, so both cost about the same, whatever the hub's
// degree.
func BenchmarkForkHubCommit(b *testing.B) {
	const deps = 100_000
	build := func() *State {
		s := NewState(nil)
		ops := []Op{tqPut("hub", "question")}
		for i := range deps {
			id := "c" + strconv.Itoa(i)
			ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "hub"))
		}
		tqApply(b, s, ops...)
		return s
	}
	commit := func(i int) []Op {
		id := "new" + strconv.Itoa(i)
		return []Op{tqPut(id, "claim"), tqLink(id, "derived_from", "hub")}
	}
	b.Run("in-place", func(b *testing.B) {
		s := build()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if _, err := s.ApplyOps(commit(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fork-absorb", func(b *testing.B) {
		s := build()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			f := s.Fork()
			if _, err := f.ApplyOps(commit(i)); err != nil {
				b.Fatal(err)
			}
			if err := s.Absorb(f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
