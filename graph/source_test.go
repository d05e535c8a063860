package graph

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// stateSource serves a whole state as a Source, counting the reads: the
// stand-in for the store's state map in these tests.
type stateSource struct {
	s            *State
	points       atomic.Int64 // point reads and edge-set reads
	edgesRead    atomic.Int64 // edges returned by Out and In
	walks        atomic.Int64 // whole walks
	fail         error
	failAfter    int64 // with fail: reads after this many fail
	failedReads  atomic.Int64
	firstFailure atomic.Pointer[error]
}

func newStateSource(s *State) *stateSource { return &stateSource{s: s} }

// read counts a point read and reports whether it fails.
func (src *stateSource) read() bool {
	n := src.points.Add(1)
	if src.fail != nil && n > src.failAfter {
		src.failedReads.Add(1)
		err := fmt.Errorf("read %d: %w", n, src.fail)
		src.firstFailure.CompareAndSwap(nil, &err)
		return false
	}
	return true
}

func (src *stateSource) Artifact(id string) *Artifact {
	if !src.read() {
		return nil
	}
	return src.s.Artifact(id)
}

func (src *stateSource) Tombstone(id string) int64 {
	if !src.read() {
		return 0
	}
	return src.s.tomb(id)
}

func (src *stateSource) Edge(k EdgeKey) *Edge {
	if !src.read() {
		return nil
	}
	return src.s.Edge(k)
}

func (src *stateSource) Out(id string) []*Edge {
	if !src.read() {
		return nil
	}
	es := src.s.Out(id)
	src.edgesRead.Add(int64(len(es)))
	return es
}

func (src *stateSource) In(id string) []*Edge {
	if !src.read() {
		return nil
	}
	es := src.s.In(id)
	src.edgesRead.Add(int64(len(es)))
	return es
}

func (src *stateSource) TypeCount(typ string) int {
	if !src.read() {
		return 0
	}
	return src.s.countOf(typ)
}

func (src *stateSource) Artifacts() iter.Seq[*Artifact] {
	src.walks.Add(1)
	return func(yield func(*Artifact) bool) {
		for _, a := range src.s.allArtifacts() {
			if !yield(a) {
				return
			}
		}
	}
}

func (src *stateSource) Tombstones() iter.Seq2[string, int64] {
	src.walks.Add(1)
	return src.s.allTombstones()
}

func (src *stateSource) Edges() iter.Seq[*Edge] {
	src.walks.Add(1)
	return func(yield func(*Edge) bool) {
		for _, e := range src.s.allEdges() {
			if !yield(e) {
				return
			}
		}
	}
}

func (src *stateSource) Err() error {
	if p := src.firstFailure.Load(); p != nil {
		return *p
	}
	return nil
}

// definitionsOf returns the definition artifacts of s.
func definitionsOf(s *State) []*Artifact {
	var defs []*Artifact
	for _, a := range s.allArtifacts() {
		if IsDefinitionType(a.Type) {
			defs = append(defs, a)
		}
	}
	return defs
}

// overSource returns a state over a source holding what s shows, as the
// store makes a head over its newest commit's state map.
func overSource(t testing.TB, s *State) *State {
	t.Helper()
	snap := wholeCopy(s)
	lz, err := NewStateOver(s.ruleset, newStateSource(snap), Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	return lz
}

// wholeCopy returns a whole state showing what s shows.
func wholeCopy(s *State) *State {
	if s.IsLazy() {
		return s.flatten()
	}
	return s.Clone()
}

// lazyInvariants checks a state over a source: its counts match what it
// shows, and the types counted are those of its artifacts.
func lazyInvariants(s *State) error {
	if s.under != nil || s.src == nil {
		return errors.New("not a state over a source")
	}
	nArt, nTomb, nEdge := 0, 0, 0
	types := map[string]int{}
	for _, a := range s.allArtifacts() {
		nArt++
		types[a.Type]++
	}
	for range s.allTombstones() {
		nTomb++
	}
	for range s.allEdges() {
		nEdge++
	}
	if nArt != s.nArt || nTomb != s.nTomb || nEdge != s.nEdge {
		return fmt.Errorf("counts %d/%d/%d, entries %d/%d/%d", s.nArt, s.nTomb, s.nEdge, nArt, nTomb, nEdge)
	}
	for typ, n := range types {
		if s.countOf(typ) != n {
			return fmt.Errorf("type %s: count %d, %d artifacts", typ, s.countOf(typ), n)
		}
	}
	if s.Err() != nil {
		return s.Err()
	}
	return nil
}

// TestLazyMatchesWhole is the fork oracle (TestForkMatchesWhole) with the
// head a state over a source: every commit decided on it, every read of
// it and its trust index must equal the whole state's.
func TestLazyMatchesWhole(t *testing.T) {
	seeds := 80
	if testing.Short() {
		seeds = 16
	}
	accepted := 0
	for seed := range seeds {
		_, n := forkRun(t, uint64(1000+seed), true)
		accepted += n
	}
	if accepted < 15*seeds {
		t.Fatalf("only %d commits accepted over %d seeds; the generator is too weak", accepted, seeds)
	}
}

// chainState returns a whole state of a derivation chain of n claims
// (c1 derived_from c0, …) with a question at its root.
func chainState(t testing.TB, n int) *State {
	s := NewState(nil)
	ops := []Op{tqPut("c0", "question")}
	for i := 1; i < n; i++ {
		id := "c" + strconv.Itoa(i)
		ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "c"+strconv.Itoa(i-1)))
	}
	tqApply(t, s, ops...)
	return s
}

// TestLazyCommitReadsWhatItTouches: deciding a commit at the tip of a
// 5,000-deep chain over a source, with its trust index over a source too,
// reads a few entries of each and walks neither.
func TestLazyCommitReadsWhatItTouches(t *testing.T) {
	const n = 5000
	whole := chainState(t, n)
	src := newStateSource(wholeCopy(whole))
	lz, err := NewStateOver(nil, src, Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil, whole.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	baseOf := func(*State) BaseFunc { return tqBase }
	tsrc := &indexSource{t: NewTrustIndex(whole, tqBase)}
	idx := NewTrustIndexOver(tsrc, tsrc.t.Counts(), baseOf)
	before := src.points.Load()
	f, tf := lz.Fork(), idx.Fork()
	tip := "c" + strconv.Itoa(n-1)
	ops := []Op{tqPut("next", "claim"), tqLink("next", "derived_from", tip), tqPut(tip, "claim")}
	ch, err := f.ApplyOps(ops)
	if err != nil {
		t.Fatal(err)
	}
	if errs := TaintedLinks(f, tf, ch); len(errs) != 0 {
		t.Fatalf("tainted links %v", errs)
	}
	tf.Apply(f, ch)
	if err := lz.Absorb(f); err != nil {
		t.Fatal(err)
	}
	tqApply(t, whole, ops...)
	idx2 := NewTrustIndex(whole, tqBase)
	if lz.Hash() != whole.Hash() || lz.NumArtifacts() != n+1 || lz.NumEdges() != n {
		t.Fatalf("hash %s artifacts %d edges %d; the whole state %s", lz.Hash(), lz.NumArtifacts(), lz.NumEdges(), whole.Hash())
	}
	if tf.Summary() != idx2.Summary() {
		t.Fatalf("trust %+v, whole %+v", tf.Summary(), idx2.Summary())
	}
	reads := src.points.Load() - before
	t.Logf("%d reads of the source", reads)
	if reads > 40 {
		t.Fatalf("the commit read the source %d times; it touches 3 artifacts", reads)
	}
	if w := src.walks.Load() + tsrc.walks.Load(); w != 0 {
		t.Fatalf("the commit walked the sources %d times", w)
	}
	t.Logf("%d reads of the trust source", tsrc.reads.Load())
	if tr := tsrc.reads.Load(); tr > 20 {
		t.Fatalf("the commit read the trust source %d times", tr)
	}
	if err := idx.Absorb(tf); err != nil {
		t.Fatal(err)
	}
	if err := idx.Verify(lz); err != nil {
		t.Fatal(err)
	}
}

// TestLazyFailedRead: a read of the source that fails shows as absence
// and in State.Err of the state and of every fork of it, so a caller
// discards what it decided.
func TestLazyFailedRead(t *testing.T) {
	whole := chainState(t, 10)
	boom := errors.New("disk on fire")
	src := newStateSource(wholeCopy(whole))
	lz, err := NewStateOver(nil, src, Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil, whole.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if lz.Err() != nil || !lz.IsLazy() || whole.IsLazy() {
		t.Fatalf("err %v lazy %v/%v", lz.Err(), lz.IsLazy(), whole.IsLazy())
	}
	if lz.Artifact("c3") == nil {
		t.Fatal("c3 not read")
	}
	src.fail, src.failAfter = boom, src.points.Load()
	f := lz.Fork()
	if f.Artifact("c4") != nil {
		t.Fatal("a failed read returned an artifact")
	}
	for _, s := range []*State{lz, f, f.Fork()} {
		if !errors.Is(s.Err(), boom) {
			t.Fatalf("Err %v, want %v", s.Err(), boom)
		}
	}
	if whole.Err() != nil {
		t.Fatal("a whole state reports a read error")
	}
}

// indexSource serves a whole trust index as a TrustSource.
type indexSource struct {
	t     *TrustIndex
	reads atomic.Int64
	walks atomic.Int64
}

func (src *indexSource) Trust(id string) (TrustEntry, bool) {
	src.reads.Add(1)
	return src.t.Entry(id)
}

func (src *indexSource) Root(id string) (string, bool) {
	src.reads.Add(1)
	return src.t.RootReason(id)
}

func (src *indexSource) TrustEntries() iter.Seq2[string, TrustEntry] {
	src.walks.Add(1)
	return src.t.Entries()
}

func (src *indexSource) Roots() iter.Seq2[string, string] {
	src.walks.Add(1)
	return src.t.Roots()
}

func (src *indexSource) Unconfirmed() iter.Seq2[string, TrustEntry] {
	src.walks.Add(1)
	return func(yield func(string, TrustEntry) bool) {
		for id, e := range src.t.Entries() {
			if !e.Conf && !yield(id, e) {
				return
			}
		}
	}
}

func (src *indexSource) Err() error { return nil }

// overTrust returns an index over a source holding what t holds, as the
// store opens a head's index over its newest commit's entries.
func overTrust(t *TrustIndex, baseOf func(*State) BaseFunc) *TrustIndex {
	return NewTrustIndexOver(&indexSource{t: t.Clone()}, t.Counts(), baseOf)
}

// TestLazyHubCommitReadsNoDependents: linking one more claim to a hub
// with 5,000 dependents, on a state over a source, reads none of the
// hub's edges — its set is a delta over the stored one — and the state
// then shows all 5,001.
func TestLazyHubCommitReadsNoDependents(t *testing.T) {
	const deps = 5000
	whole := NewState(nil)
	ops := []Op{tqPut("hub", "question")}
	for i := range deps {
		id := "c" + strconv.Itoa(i)
		ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "hub"))
	}
	tqApply(t, whole, ops...)
	src := newStateSource(wholeCopy(whole))
	lz, err := NewStateOver(nil, src, Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil, whole.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	tsrc := &indexSource{t: NewTrustIndex(whole, tqBase)}
	idx := NewTrustIndexOver(tsrc, tsrc.t.Counts(), func(*State) BaseFunc { return tqBase })
	for i := range 3 {
		f, tf := lz.Fork(), idx.Fork()
		id := "new" + strconv.Itoa(i)
		ch, err := f.ApplyOps([]Op{tqPut(id, "claim"), tqLink(id, "derived_from", "hub")})
		if err != nil {
			t.Fatal(err)
		}
		if errs := TaintedLinks(f, tf, ch); len(errs) != 0 {
			t.Fatal(errs)
		}
		tf.Apply(f, ch)
		if err := lz.Absorb(f); err != nil {
			t.Fatal(err)
		}
		if err := idx.Absorb(tf); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.edgesRead.Load(); n != 0 {
		t.Fatalf("three commits onto the hub read %d of its edges", n)
	}
	if got := len(lz.In("hub")); got != deps+3 {
		t.Fatalf("the hub has %d dependents, want %d", got, deps+3)
	}
	if lz.inOf("hub").len() != deps+3 || src.walks.Load() != 0 {
		t.Fatalf("len %d, walks %d", lz.inOf("hub").len(), src.walks.Load())
	}
}

// TestStoredEdgesReadOnce: the edges at an end no layer changed are read
// from the source once per In or Out, not once to size the answer and
// again to fill it.
func TestStoredEdgesReadOnce(t *testing.T) {
	whole := NewState(nil)
	ops := []Op{tqPut("hub", "question")}
	for i := range 40 {
		id := "c" + strconv.Itoa(i)
		ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "hub"), tqLink(id, "mentions", "hub"))
	}
	tqApply(t, whole, ops...)
	src := newStateSource(wholeCopy(whole))
	lz, err := NewStateOver(nil, src, Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil, whole.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	for _, read := range []struct {
		name string
		fn   func() []*Edge
		want int
	}{
		{"in", func() []*Edge { return lz.In("hub") }, 80},
		{"out", func() []*Edge { return lz.Out("c7") }, 2},
		{"none", func() []*Edge { return lz.In("c7") }, 0},
	} {
		before := src.points.Load()
		got := read.fn()
		if len(got) != read.want || got == nil {
			t.Errorf("%s: %d edges (nil %v), want %d", read.name, len(got), got == nil, read.want)
		}
		if n := src.points.Load() - before; n != 1 {
			t.Errorf("%s read the source %d times", read.name, n)
		}
	}
}

// TestHashLater: a state opened with its accumulator deferred answers
// reads without building it, builds it once when the hash, the leaves, a
// fork or a clone needs it — also when several goroutines clone it at once —
// and then hashes, forks and clones as the whole state does.
func TestHashLater(t *testing.T) {
	whole := chainState(t, 300)
	open := func() (*State, *atomic.Int64) {
		var builds atomic.Int64
		lz, err := NewStateOverHashLater(nil, newStateSource(wholeCopy(whole)), Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil,
			func() *hashing.Accumulator { builds.Add(1); return whole.acc.Clone() })
		if err != nil {
			t.Fatal(err)
		}
		return lz, &builds
	}
	lz, builds := open()
	if a := lz.Artifact("c7"); a == nil || len(lz.In("c7")) != 1 || len(lz.Out("c7")) != 1 || lz.NumArtifacts() != 300 {
		t.Fatal("reads of the deferred state differ from the whole one")
	}
	if builds.Load() != 0 {
		t.Fatalf("reads built the accumulator %d times", builds.Load())
	}
	// Clones of a shared state may be made at once (Share); the first
	// builds the accumulator.
	lz.Share()
	var wg sync.WaitGroup
	clones := make([]*State, 8)
	for i := range clones {
		wg.Go(func() { clones[i] = lz.Clone() })
	}
	wg.Wait()
	for _, c := range clones {
		if h := c.Hash(); h != whole.Hash() {
			t.Fatalf("a clone hashes to %s, the whole state to %s", h.Short(), whole.Hash().Short())
		}
	}
	if h := lz.Hash(); h != whole.Hash() {
		t.Fatalf("hash %s, the whole state's %s", h.Short(), whole.Hash().Short())
	}
	if builds.Load() != 1 {
		t.Fatalf("built %d times", builds.Load())
	}
	if len(lz.Leaves()) != 599 {
		t.Fatalf("%d leaves", len(lz.Leaves()))
	}

	// A fork of a fresh one builds it, and commits as the whole state.
	lz, builds = open()
	f, wf := lz.Fork(), whole.Clone().Fork()
	ops := []Op{tqPut("next", "claim"), tqLink("next", "derived_from", "c299")}
	for _, s := range []*State{f, wf} {
		if _, err := s.ApplyOps(ops); err != nil {
			t.Fatal(err)
		}
	}
	if err := lz.Absorb(f); err != nil {
		t.Fatal(err)
	}
	if lz.Hash() != wf.Hash() || builds.Load() != 1 {
		t.Fatalf("after a commit: %s vs %s, %d builds", lz.Hash().Short(), wf.Hash().Short(), builds.Load())
	}
	if _, ok := lz.Rebase(newStateSource(wholeCopy(whole)), Counts{lz.nArt, lz.nTomb, lz.nEdge}); ok {
		t.Fatal("a deferred state was rebased")
	}
}

// TestReopen: a state over a source with forks stacked on it (states
// readers hold) is reopened over a source holding what the top fork
// shows: the new state shows the same entries and hash, reads nothing
// through the old source or the new one to be made, leaves the stacked
// states as they were, and takes commits as a whole state does. A whole
// state, a deferred one, or sizes that differ are refused.
func TestReopen(t *testing.T) {
	whole := chainState(t, 300)
	src := newStateSource(wholeCopy(whole))
	lz, err := NewStateOver(nil, src, Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil, whole.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	// Two forks stacked, as a head's layers are.
	f1 := lz.Fork()
	tqApply(t, f1, tqPut("x", "claim"), tqLink("x", "derived_from", "c7"), tqDel("c299"), tqUnlink("c299", "derived_from", "c298"))
	f2 := f1.Fork()
	tqApply(t, f2, tqPut("y", "claim"), tqLink("y", "derived_from", "x"), tqPut("c5", "claim"))
	want := wholeCopy(whole)
	tqApply(t, want, tqPut("x", "claim"), tqLink("x", "derived_from", "c7"), tqDel("c299"), tqUnlink("c299", "derived_from", "c298"),
		tqPut("y", "claim"), tqLink("y", "derived_from", "x"), tqPut("c5", "claim"))
	f1Hash, lzHash := f1.Hash(), lz.Hash()

	stored := newStateSource(wholeCopy(want))
	before := src.points.Load() + stored.points.Load()
	r, ok := f2.Reopen(stored, Counts{want.nArt, want.nTomb, want.nEdge})
	if !ok {
		t.Fatal("a fork over a source was not reopened")
	}
	if n := src.points.Load() + stored.points.Load() - before; n != 0 {
		t.Fatalf("reopening read %d entries", n)
	}
	if !r.IsLazy() || r.IsFork() || r.Source() != Source(stored) {
		t.Fatal("the reopened state does not read through the new source alone")
	}
	if r.Hash() != want.Hash() || stateString(r) != stateString(want) {
		t.Fatalf("reopened:\n%.600s\nwant:\n%.600s", stateString(r), stateString(want))
	}
	if f1.Hash() != f1Hash || lz.Hash() != lzHash || f2.Hash() != want.Hash() || f1.Artifact("y") != nil || lz.Artifact("x") != nil {
		t.Fatal("reopening changed the states it was made from")
	}
	// It takes commits, and the stacked states still do not change.
	f, wf := r.Fork(), wholeCopy(want).Fork()
	for _, s := range []*State{f, wf} {
		tqApply(t, s, tqPut("z", "claim"), tqLink("z", "derived_from", "y"))
	}
	if err := r.Absorb(f); err != nil {
		t.Fatal(err)
	}
	if r.Hash() != wf.Hash() || f2.Hash() != want.Hash() || f2.Artifact("z") != nil {
		t.Fatal("a commit on the reopened state went wrong")
	}

	if _, ok := whole.Fork().Reopen(stored, Counts{whole.nArt, whole.nTomb, whole.nEdge}); ok {
		t.Fatal("a fork of a whole state was reopened")
	}
	if _, ok := f2.Reopen(stored, Counts{want.nArt + 1, want.nTomb, want.nEdge}); ok {
		t.Fatal("reopened with sizes that differ")
	}
	later, err := NewStateOverHashLater(nil, newStateSource(wholeCopy(whole)), Counts{whole.nArt, whole.nTomb, whole.nEdge}, nil,
		func() *hashing.Accumulator { return whole.acc.Clone() })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := later.Reopen(stored, Counts{whole.nArt, whole.nTomb, whole.nEdge}); ok {
		t.Fatal("a deferred state was reopened")
	}
}

// stateString renders every artifact of s with its edges both ways, and
// its sizes, for comparing states.
func stateString(s *State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d\n", s.NumArtifacts(), s.NumEdges(), s.NumTombstones())
	for _, a := range s.Artifacts() {
		fmt.Fprintf(&b, "%s %s v%d %s out=%v in=%v\n", a.ID, a.Type, a.Version, a.ContentHash.Short(), edgeKeys(s.Out(a.ID)), edgeKeys(s.In(a.ID)))
	}
	return b.String()
}

func edgeKeys(es []*Edge) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key().String()
	}
	return out
}

// TypeNames implements TypeLister: the types of the state it serves.
func (src *stateSource) TypeNames() []string {
	var names []string
	for typ := range src.s.TypeCounts() {
		names = append(names, typ)
	}
	return names
}

// TestTypeCountsFromLister: a state over a source that names its types
// counts them without a walk — the source's counts and its layers' own —
// and gets the whole state's counts, after forks that put, retype and
// delete artifacts on top of it, and with none.
func TestTypeCountsFromLister(t *testing.T) {
	for seed := range uint64(20) {
		s, lz, src := forkGenState(t, seed)
		walks := src.walks.Load()
		if got, want := lz.TypeCounts(), s.TypeCounts(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: over a source %v, whole %v", seed, got, want)
		}
		r := rand.New(rand.NewPCG(seed, 99))
		whole := wholeCopy(s)
		for range 5 {
			ops := forkOps(r, whole, forkGenIDs, false)
			f := lz.Fork()
			if _, err := f.ApplyOps(ops); err != nil {
				continue
			}
			if err := lz.Absorb(f); err != nil {
				t.Fatal(err)
			}
			if _, err := whole.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d: the whole state refused what the fork took: %v", seed, err)
			}
			if got, want := lz.TypeCounts(), whole.TypeCounts(); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, after a fork: over a source %v, whole %v", seed, got, want)
			}
		}
		if n := src.walks.Load() - walks; n != 0 {
			t.Fatalf("seed %d: TypeCounts walked the source %d times", seed, n)
		}
	}
}

// rangingSource is a stateSource that also yields its artifacts and
// edges in key order from a given key (Ranger), counting the artifacts it
// yields that way.
type rangingSource struct {
	*stateSource
	ranged atomic.Int64
}

func (src *rangingSource) EdgesFrom(from EdgeKey) iter.Seq[*Edge] {
	return func(yield func(*Edge) bool) {
		for _, e := range src.s.Edges() {
			if e.Key().Compare(from) >= 0 && !yield(e) {
				return
			}
		}
	}
}

func (src *rangingSource) ArtifactsFrom(from string) iter.Seq[*Artifact] {
	return func(yield func(*Artifact) bool) {
		for _, id := range src.s.ArtifactIDs() {
			if id < from {
				continue
			}
			src.ranged.Add(1)
			if !yield(src.s.Artifact(id)) {
				return
			}
		}
	}
}

// TestArtifactsAfter: a state's artifacts after an id, in id order, are
// its ids sorted and cut there (the oracle), and its edges after an edge
// key its edges sorted and cut there — a whole state, one over a
// source that cannot range (sorted whole), and one over a source that
// can, with layers above it: forks absorbed (which put, retype and
// delete) and one fork not — from no id, every id, ids between and past
// them; stopped early, the same prefix. Over a ranging source it never
// walks the source whole, and reads no further than it yields.
func TestArtifactsAfter(t *testing.T) {
	for seed := range uint64(12) {
		s, plain, _ := forkGenState(t, seed)
		snap := wholeCopy(s)
		rsrc := &rangingSource{stateSource: newStateSource(snap)}
		ranged, err := NewStateOver(s.ruleset, rsrc, Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 5))
		whole := wholeCopy(s)
		for step := range 6 {
			ops := forkOps(r, whole, forkGenIDs, false)
			f := ranged.Fork()
			if _, err := f.ApplyOps(ops); err != nil {
				continue
			}
			if _, err := whole.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d: the whole state refused what the fork took: %v", seed, err)
			}
			top := f // the last fork stays a layer above the others
			if step < 5 {
				if err := ranged.Absorb(f); err != nil {
					t.Fatal(err)
				}
				top = ranged
			}
			ids := whole.ArtifactIDs()
			afters := []string{"", "~", " "}
			for _, id := range ids {
				afters = append(afters, id, id+"!", id[:len(id)-1])
			}
			walks := rsrc.walks.Load()
			for _, after := range afters {
				var want []string
				for _, id := range ids {
					if id > after {
						want = append(want, id)
					}
				}
				checkAfter(t, fmt.Sprintf("seed %d step %d, whole, after %q", seed, step, after), whole, after, want)
				checkAfter(t, fmt.Sprintf("seed %d step %d, over a ranging source, after %q", seed, step, after), top, after, want)
				if step == 0 {
					// The state over a source that cannot range is the
					// one before the steps.
					var before []string
					for _, id := range s.ArtifactIDs() {
						if id > after {
							before = append(before, id)
						}
					}
					checkAfter(t, fmt.Sprintf("seed %d, over a plain source, after %q", seed, after), plain, after, before)
				}
			}
			edges := whole.Edges()
			edgeAfters := []EdgeKey{{}, {From: "~"}}
			for _, e := range edges {
				k := e.Key()
				edgeAfters = append(edgeAfters, k, EdgeKey{From: k.From}, EdgeKey{From: k.From + "!"}, EdgeKey{From: k.From, Rel: k.Rel, To: k.To + "!"})
			}
			for _, after := range edgeAfters {
				var want []EdgeKey
				for _, e := range edges {
					if e.Key().Compare(after) > 0 {
						want = append(want, e.Key())
					}
				}
				checkEdgesAfter(t, fmt.Sprintf("seed %d step %d, whole, after %v", seed, step, after), whole, after, want)
				checkEdgesAfter(t, fmt.Sprintf("seed %d step %d, over a ranging source, after %v", seed, step, after), top, after, want)
				if step == 0 {
					var before []EdgeKey
					for _, e := range s.Edges() {
						if e.Key().Compare(after) > 0 {
							before = append(before, e.Key())
						}
					}
					checkEdgesAfter(t, fmt.Sprintf("seed %d, over a plain source, after %v", seed, after), plain, after, before)
				}
			}
			// One artifact's edges after a key: before its first, at
			// each of its own, between them, and past its last.
			outOf := map[string][]EdgeKey{"~": nil}
			for _, e := range edges {
				outOf[e.From] = append(outOf[e.From], e.Key())
			}
			if step == 0 {
				// Over a source that cannot range: the state before the
				// steps.
				out, in := map[string][]EdgeKey{}, map[string][]EdgeKey{}
				for _, e := range s.Edges() {
					out[e.From] = append(out[e.From], e.Key())
					in[e.To] = append(in[e.To], e.Key())
				}
				for _, c := range []struct {
					dir  string
					of   map[string][]EdgeKey
					list func(id string, after EdgeKey) iter.Seq[*Edge]
				}{{"out of", out, plain.OutAfter}, {"into", in, plain.InAfter}} {
					for id, keys := range c.of {
						checkEdgesOf(t, fmt.Sprintf("seed %d, over a plain source, %s %q", seed, c.dir, id), plain, keys,
							append([]EdgeKey{{}, {From: id}}, keys...), func(after EdgeKey) iter.Seq[*Edge] { return c.list(id, after) })
					}
				}
			}
			states := []struct {
				name string
				st   *State
			}{{"whole", whole}, {"over a ranging source", top}}
			inTo := map[string][]EdgeKey{"~": nil}
			for _, e := range edges {
				inTo[e.To] = append(inTo[e.To], e.Key())
			}
			for id, keys := range inTo {
				afters := []EdgeKey{{}, {From: "~"}}
				for _, k := range keys {
					afters = append(afters, k, EdgeKey{From: k.From}, EdgeKey{From: k.From, Rel: k.Rel, To: k.To + "!"})
				}
				for _, c := range states {
					checkEdgesOf(t, fmt.Sprintf("seed %d step %d, %s, into %q", seed, step, c.name, id), c.st, keys, afters,
						func(after EdgeKey) iter.Seq[*Edge] { return c.st.InAfter(id, after) })
				}
			}
			for id, keys := range outOf {
				afters := []EdgeKey{{}, {From: id}, {From: id + "!"}, {From: "~"}}
				for _, k := range keys {
					afters = append(afters, k, EdgeKey{From: k.From, Rel: k.Rel, To: k.To + "!"})
				}
				for _, c := range states {
					checkEdgesOf(t, fmt.Sprintf("seed %d step %d, %s, out of %q", seed, step, c.name, id), c.st, keys, afters,
						func(after EdgeKey) iter.Seq[*Edge] { return c.st.OutAfter(id, after) })
				}
			}
			if n := rsrc.walks.Load() - walks; n != 0 {
				t.Fatalf("seed %d: ArtifactsAfter, EdgesAfter or OutAfter walked the ranging source %d times", seed, n)
			}
			// Stopped after one artifact, the source yields at most that
			// one and those the layers changed or deleted.
			changed := 0
			for _, id := range snap.ArtifactIDs() {
				if top.Artifact(id) != snap.Artifact(id) {
					changed++
				}
			}
			before := rsrc.ranged.Load()
			for range top.ArtifactsAfter("") {
				break
			}
			if n := rsrc.ranged.Load() - before; n > int64(1+changed) {
				t.Fatalf("seed %d: one artifact read %d from the source, where the layers changed %d", seed, n, changed)
			}
		}
	}
}

// checkEdgesOf checks, for each of afters, the edges list yields after
// it — of one artifact of st, whose edges' keys are keys, sorted —
// against those of keys past it.
func checkEdgesOf(t *testing.T, what string, st *State, keys, afters []EdgeKey, list func(after EdgeKey) iter.Seq[*Edge]) {
	t.Helper()
	for _, after := range afters {
		var want []EdgeKey
		for _, k := range keys {
			if k.Compare(after) > 0 {
				want = append(want, k)
			}
		}
		checkSeqAfter(t, fmt.Sprintf("%s after %v", what, after), func() iter.Seq[*Edge] { return list(after) }, (*Edge).Key, st.Edge, want)
	}
}

// checkEdgesAfter checks st's edges after after, in full and stopped
// after two, against want.
func checkEdgesAfter(t *testing.T, what string, st *State, after EdgeKey, want []EdgeKey) {
	t.Helper()
	checkSeqAfter(t, what, func() iter.Seq[*Edge] { return st.EdgesAfter(after) }, (*Edge).Key, st.Edge, want)
}

// checkAfter checks st's artifacts after after, in full and stopped
// after two, against want.
func checkAfter(t *testing.T, what string, st *State, after string, want []string) {
	t.Helper()
	checkSeqAfter(t, what, func() iter.Seq[*Artifact] { return st.ArtifactsAfter(after) }, func(a *Artifact) string { return a.ID }, st.Artifact, want)
}

// checkSeqAfter checks the keys seq yields, in full and stopped after
// two, against want, and each entry against what lookup gives for its
// key.
func checkSeqAfter[V any, K comparable](t *testing.T, what string, seq func() iter.Seq[*V], key func(*V) K, lookup func(K) *V, want []K) {
	t.Helper()
	for _, stop := range []int{-1, 2} {
		var got []K
		for v := range seq() {
			if v == nil || !reflect.DeepEqual(lookup(key(v)), v) {
				t.Fatalf("%s: yielded %v, the state has %v", what, v, lookup(key(v)))
			}
			got = append(got, key(v))
			if len(got) == stop {
				break
			}
		}
		w := want
		if stop > 0 && len(w) > stop {
			w = w[:stop]
		}
		if !slices.Equal(got, w) {
			t.Fatalf("%s (stopping after %d): %v, want %v", what, stop, got, w)
		}
	}
}

// TestArtifactsFromIncludesItsKey: ArtifactsFrom yields the artifact
// whose id is from itself, then those after it — over a whole state, a
// ranging source and a fork above it — as the outbox's walk from the
// prefix of effect ids needs.
func TestArtifactsFromIncludesItsKey(t *testing.T) {
	s, _, _ := forkGenState(t, 3)
	snap := wholeCopy(s)
	ranged, err := NewStateOver(s.ruleset, &rangingSource{stateSource: newStateSource(snap)}, Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	ids := snap.ArtifactIDs()
	if len(ids) < 3 {
		t.Fatalf("the fixture has %d artifacts", len(ids))
	}
	for _, st := range []*State{snap, ranged, ranged.Fork()} {
		for i, from := range ids {
			var got []string
			for a := range st.ArtifactsFrom(from) {
				got = append(got, a.ID)
			}
			if !slices.Equal(got, ids[i:]) {
				t.Fatalf("from %q: %q, want %q", from, got, ids[i:])
			}
		}
	}
}

// splittingSource is a rangingSource that names a given id as the middle
// of its artifacts (Splitter).
type splittingSource struct {
	*rangingSource
	mid string
}

func (src *splittingSource) MiddleArtifact() (string, bool) { return src.mid, src.mid != "" }

// TestArtifactHalves: over a source that splits its artifacts, with
// layers above it (forks absorbed, which put, retype and delete, and one
// fork not), the two halves end to end are the state's ids in order, each
// half's ids on its side of the middle, whatever id the source names —
// one of its own, one between, before or past them all, one only a layer
// holds — and ArtifactIDs is the oracle's. Without a middle, the first
// half is every artifact.
func TestArtifactHalves(t *testing.T) {
	for seed := range uint64(8) {
		s, _, _ := forkGenState(t, seed)
		snap := wholeCopy(s)
		ssrc := &splittingSource{rangingSource: &rangingSource{stateSource: newStateSource(snap)}}
		split, err := NewStateOver(s.ruleset, ssrc, Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 9))
		whole := wholeCopy(s)
		for step := range 6 {
			ops := forkOps(r, whole, forkGenIDs, false)
			f := split.Fork()
			if _, err := f.ApplyOps(ops); err != nil {
				continue
			}
			if _, err := whole.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d: the whole state refused what the fork took: %v", seed, err)
			}
			top := f
			if step < 5 {
				if err := split.Absorb(f); err != nil {
					t.Fatal(err)
				}
				top = split
			}
			want := whole.ArtifactIDs()
			mids := []string{"", " ", "~~~~"}
			for _, id := range snap.ArtifactIDs() {
				mids = append(mids, id, id+"!")
			}
			if len(want) > 0 {
				mids = append(mids, want[len(want)/2], want[0], want[len(want)-1])
			}
			for _, mid := range mids {
				ssrc.mid = mid
				where := fmt.Sprintf("seed %d step %d, middle %q", seed, step, mid)
				halves, at := top.ArtifactHalves()
				if at != mid {
					t.Fatalf("%s: the halves meet at %q", where, at)
				}
				var got []string
				for h, half := range halves {
					for a := range half {
						if mid != "" && (h == 0) != (a.ID < mid) {
							t.Fatalf("%s: %q in half %d", where, a.ID, h)
						}
						if mid == "" && h == 1 {
							t.Fatalf("%s: no middle, yet the second half yields %q", where, a.ID)
						}
						got = append(got, a.ID)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: the halves yield %q, want %q", where, got, want)
				}
				if ids := top.ArtifactIDs(); !slices.Equal(ids, want) {
					t.Fatalf("%s: ArtifactIDs %q, want %q", where, ids, want)
				}
			}
		}
	}
}
