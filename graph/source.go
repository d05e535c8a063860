package graph

import (
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/artifactd/artifactd/hashing"
)

// Source is the stored state under a lazy State (see NewStateOver): the
// entries of one immutable commit, read on demand, so that a state of a
// million artifacts need not be held in memory to decide a commit that
// touches ten. Methods report an absent entry as nil or zero; Out and In
// return the edges at one end of an artifact in any order (nil: none).
//
// A Source never changes and must be safe for concurrent use. A read that
// fails (an I/O error, a corrupt record) reports absence and keeps the
// error, which Err returns from then on: whoever decided something on a
// state over the source checks Err before acting on it (State.Err).
type Source interface {
	Artifact(id string) *Artifact
	Tombstone(id string) int64
	Edge(k EdgeKey) *Edge
	Out(id string) []*Edge
	In(id string) []*Edge
	// TypeCount returns the number of live artifacts of type typ.
	TypeCount(typ string) int
	// Artifacts, Tombstones and Edges yield every entry, in any order.
	Artifacts() iter.Seq[*Artifact]
	Tombstones() iter.Seq2[string, int64]
	Edges() iter.Seq[*Edge]
	Err() error
}

// Counts are the sizes of a state: live artifacts, tombstones and edges.
type Counts struct {
	Artifacts, Tombstones, Edges int
}

// NewStateOver returns a state of ruleset rs (builtin/v1 when nil) that
// reads through src: its own maps start empty and hold only what changes
// afterwards (as a fork's do, with removal markers), and every other
// lookup goes to src. n must be src's sizes, defs its definition
// artifacts with their Data (the types and relations in force are parsed
// from them once, here), and acc an accumulator holding exactly src's
// leaves; the state takes acc. It is the caller's part to keep these
// consistent with src — fsck and the oracle tests check the store's.
//
// A lazy state is used like a whole one: forks, Absorb, every read.
// Reads of the whole state (Artifacts, Edges, ArtifactIDs, Range…) walk
// src, so they cost what src's walk costs.
func NewStateOver(rs *Ruleset, src Source, n Counts, defs []*Artifact, acc *hashing.Accumulator) (*State, error) {
	s := NewStateFor(rs)
	s.src, s.acc = src, acc
	s.nArt, s.nTomb, s.nEdge = n.Artifacts, n.Tombstones, n.Edges
	defs = append([]*Artifact(nil), defs...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].ID < defs[j].ID })
	for _, a := range defs {
		if err := s.loadDefinition(a); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewStateOverHashLater is NewStateOver for a state that is mostly read
// (a view of an older commit): instead of an accumulator it takes build,
// which returns one holding exactly src's leaves, and calls it the first
// time the state needs it — Hash, Leaves, Fork, Clone — once, under a
// lock, so that concurrent Clones of a shared state (Share) may trigger
// it. A read of a few entries then never reads the whole source's leaves.
// build cannot fail: a source that cannot be read keeps the failure
// (src.Err), and the state's Err reports it, as for any other read; until
// the caller checks Err, what the state shows (its hash included) may
// rest on what could not be read.
func NewStateOverHashLater(rs *Ruleset, src Source, n Counts, defs []*Artifact, build func() *hashing.Accumulator) (*State, error) {
	s, err := NewStateOver(rs, src, n, defs, nil)
	if err != nil {
		return nil, err
	}
	s.later = &laterAcc{build: build}
	return s, nil
}

// laterAcc builds the accumulator of a state opened by
// NewStateOverHashLater.
type laterAcc struct {
	mu    sync.Mutex
	build func() *hashing.Accumulator
	// shared is set by Share: the accumulator is marked shared once built.
	shared bool
}

// accum returns s's accumulator, building it first on a state opened by
// NewStateOverHashLater.
func (s *State) accum() *hashing.Accumulator {
	l := s.later
	if l == nil {
		return s.acc
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.acc == nil {
		s.acc = l.build()
		if l.shared {
			s.acc.MarkShared()
		}
	}
	return s.acc
}

// Err returns the first failed read of the source under s (nil when s
// reads no source, or every read succeeded). A decision made on a state
// whose Err is not nil may rest on entries that were there but could not
// be read: its caller discards it.
//
// The context hash's leaves may be read on demand too (a head opened over
// its buckets' records: hashing.NewColdAccumulator); a bucket that could
// not be read is reported the same way.
func (s *State) Err() error {
	if acc := s.builtAcc(); acc != nil {
		if err := acc.Err(); err != nil {
			return err
		}
	}
	x := s
	for x.under != nil {
		x = x.under
	}
	if x.src == nil {
		return nil
	}
	return x.src.Err()
}

// builtAcc returns s's accumulator, nil on a state opened by
// NewStateOverHashLater that has not built it.
func (s *State) builtAcc() *hashing.Accumulator {
	l := s.later
	if l == nil {
		return s.acc
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return s.acc
}

// LeafBytes returns the bytes of context-hash leaves held in memory for s
// and the states under it (hashing.Accumulator.Held of the accumulator at
// the bottom of its forks; zero before a state opened by
// NewStateOverHashLater builds it).
func (s *State) LeafBytes() int {
	x := s
	for x.under != nil {
		x = x.under
	}
	if acc := x.builtAcc(); acc != nil {
		return acc.Held()
	}
	return 0
}

// LeafSet returns a copy of the accumulator of s's context-hash leaves
// (hashing.Accumulator.Clone: buckets shared until either side changes
// them), for a caller that stores them bucket by bucket.
func (s *State) LeafSet() *hashing.Accumulator { return s.accum().Clone() }

// IsLazy reports whether s, or the state at the bottom of its forks, reads
// through a Source.
func (s *State) IsLazy() bool {
	x := s
	for x.under != nil {
		x = x.under
	}
	return x.src != nil
}

// whole reports whether s is a whole state, one that holds every entry
// itself and so never keeps a removal marker: neither a fork nor a state
// over a source.
func (s *State) whole() bool { return s.under == nil && s.src == nil }

// srcOut and srcIn return the stored sets of a state over a source for
// id: they read the source only when asked for edges.
func (s *State) srcOut(id string) *edgeSet { return storedSet(s.src, id, false) }
func (s *State) srcIn(id string) *edgeSet  { return storedSet(s.src, id, true) }

// belowOut and belowIn return id's edge set in what s overlays: the state
// under a fork, or the source under a state over one. s is not whole.
func (s *State) belowOut(id string) *edgeSet {
	if s.under != nil {
		return s.under.outOf(id)
	}
	return s.srcOut(id)
}

func (s *State) belowIn(id string) *edgeSet {
	if s.under != nil {
		return s.under.inOf(id)
	}
	return s.srcIn(id)
}

// srcArtifacts, srcTombstones and srcEdges adapt a source's walks to
// eachLayer's keyed form.
func srcArtifacts(src Source) iter.Seq2[string, *Artifact] {
	return func(yield func(string, *Artifact) bool) {
		for a := range src.Artifacts() {
			if !yield(a.ID, a) {
				return
			}
		}
	}
}

func srcTombstones(src Source) iter.Seq2[string, int64] { return src.Tombstones() }

func srcEdges(src Source) iter.Seq2[EdgeKey, *Edge] {
	return func(yield func(EdgeKey, *Edge) bool) {
		for e := range src.Edges() {
			if !yield(e.Key(), e) {
				return
			}
		}
	}
}

// TypeCount returns the number of live artifacts of type typ.
func (s *State) TypeCount(typ string) int { return s.countOf(typ) }

// OwnEntries returns how many entries s's own maps hold: for a fork or a
// state over a source, about how many changes it holds (a store rebases a
// lazy head once they pile up); for a whole state, its size.
func (s *State) OwnEntries() int {
	return len(s.artifacts) + len(s.tombstones) + len(s.edges) + len(s.out) + len(s.in)
}

// TouchedTypes returns the types whose count s's own maps changed, in no
// particular order: a fork's, the types its commit put or deleted.
func (s *State) TouchedTypes() []string {
	out := make([]string, 0, len(s.typeCount))
	for typ := range s.typeCount {
		out = append(out, typ)
	}
	return out
}

// TypeCounts returns the number of live artifacts of each type in use.
// It walks the artifacts of a state that is not whole, unless its source
// names its types (TypeLister): the counts are then the source's (a
// store's index of them) and its layers', so a check of that index must
// count a whole state.
func (s *State) TypeCounts() map[string]int {
	counts := make(map[string]int)
	if s.whole() {
		for typ, n := range s.typeCount {
			counts[typ] = n
		}
		return counts
	}
	if tl, ok := s.Source().(TypeLister); ok {
		// The source's types and the layers' own counts, each counted
		// where countOf finds it: no walk.
		names := tl.TypeNames()
		for x := s; x != nil; x = x.under {
			for typ := range x.typeCount {
				names = append(names, typ)
			}
		}
		for _, typ := range names {
			if _, done := counts[typ]; done {
				continue // named by the source and a layer, or by two layers
			}
			counts[typ] = s.countOf(typ)
		}
		maps.DeleteFunc(counts, func(_ string, n int) bool { return n <= 0 })
		return counts
	}
	for _, a := range s.allArtifacts() {
		counts[a.Type]++
	}
	return counts
}

// Ranger is a Source that yields, in key order, its artifacts whose ids
// and its edges whose keys sort at or after a given one, reading about
// what it yields (an ordered state map read from that key's place):
// State.ArtifactsFrom, State.ArtifactsAfter and State.EdgesAfter then
// page through a big state without walking it whole.
type Ranger interface {
	ArtifactsFrom(from string) iter.Seq[*Artifact]
	EdgesFrom(from EdgeKey) iter.Seq[*Edge]
}

// Splitter is a Ranger that can name, cheaply, an id near the middle of
// its artifacts' ids (a state map reads one path down its trie): a pass
// over a big state's artifacts can then be shared by two workers
// (State.ArtifactHalves).
type Splitter interface {
	Ranger
	// MiddleArtifact returns an id that about half of the source's
	// artifacts sort before, or false when it has too few to be worth
	// splitting or cannot tell.
	MiddleArtifact() (string, bool)
}

// ArtifactHalves returns two sequences that together yield every
// artifact of s once, each in id order, every id of the first before
// every id of the second, and the id they meet at: over a source that
// can split its artifacts (Splitter), its middle id, so that two
// workers share a pass over a big state; otherwise the first yields
// every artifact (ArtifactsFrom) and the second none, and the id is "".
func (s *State) ArtifactHalves() ([2]iter.Seq[*Artifact], string) {
	sp, ok := s.Source().(Splitter)
	var mid string
	if ok {
		mid, ok = sp.MiddleArtifact()
	}
	if !ok || mid == "" {
		return [2]iter.Seq[*Artifact]{s.ArtifactsFrom(""), func(func(*Artifact) bool) {}}, ""
	}
	first := func(yield func(*Artifact) bool) {
		for a := range s.ArtifactsFrom("") {
			if a.ID >= mid || !yield(a) {
				return
			}
		}
	}
	return [2]iter.Seq[*Artifact]{first, s.ArtifactsFrom(mid)}, mid
}

// EdgesAround returns the edges of s in two halves of their key order,
// read as EdgesAfter reads them: those whose source id sorts before mid,
// and the others — the edges of the two halves of ArtifactHalves, for
// the workers that walk them.
func (s *State) EdgesAround(mid string) [2]iter.Seq[*Edge] {
	return [2]iter.Seq[*Edge]{
		func(yield func(*Edge) bool) {
			for e := range s.EdgesAfter(EdgeKey{}) {
				if e.From >= mid || !yield(e) {
					return
				}
			}
		},
		// Every edge from mid on: no key sorts between {mid} and mid's
		// first edge (a relation is never empty).
		s.EdgesAfter(EdgeKey{From: mid}),
	}
}

// ArtifactsFrom yields the artifacts of s whose ids sort bytewise at or
// after from (every artifact for ""), in id order, until the caller
// stops: the artifacts under a prefix, or a page from a cursor. Over a
// source that ranges (Ranger) it reads what it yields and what the layers
// above the source hold; otherwise it sorts every artifact first
// (State.Artifacts).
func (s *State) ArtifactsFrom(from string) iter.Seq[*Artifact] {
	return func(yield func(*Artifact) bool) {
		id := func(a *Artifact) string { return a.ID }
		if rg, ok := s.ranger(); ok {
			layers := func(x *State) map[string]*Artifact { return x.artifacts }
			mergeFrom(s, layers, from, strings.Compare, id, rg.ArtifactsFrom(from), yield)
			return
		}
		sortedFrom(s.Artifacts(), from, strings.Compare, id, yield)
	}
}

// ArtifactsAfter yields the artifacts of s whose ids sort bytewise after
// after, in id order, as ArtifactsFrom does: the least id past after is
// after and a zero byte.
func (s *State) ArtifactsAfter(after string) iter.Seq[*Artifact] {
	return s.ArtifactsFrom(after + "\x00")
}

// EdgesAfter yields the edges of s whose keys sort after after's (every
// edge for the zero key), in key order — From, then Rel, then To, each
// bytewise, as Edges sorts them — until the caller stops. It reads as
// ArtifactsFrom does.
func (s *State) EdgesAfter(after EdgeKey) iter.Seq[*Edge] {
	return s.edgesFrom(keyPast(after))
}

// edgesFrom yields the edges of s whose keys sort at or after from, in
// key order.
func (s *State) edgesFrom(from EdgeKey) iter.Seq[*Edge] {
	return func(yield func(*Edge) bool) {
		if rg, ok := s.ranger(); ok {
			layers := func(x *State) map[EdgeKey]*Edge { return x.edges }
			mergeFrom(s, layers, from, EdgeKey.Compare, (*Edge).Key, rg.EdgesFrom(from), yield)
			return
		}
		sortedFrom(s.Edges(), from, EdgeKey.Compare, (*Edge).Key, yield)
	}
}

// keyPast returns the least edge key that sorts after k: k with a zero
// byte after its To.
func keyPast(k EdgeKey) EdgeKey {
	k.To += "\x00"
	return k
}

// OutAfter yields the edges leaving id whose keys sort after after's, in
// key order, until the caller stops: a page of one artifact's edges from
// a cursor. Over a source that ranges (Ranger) it reads about what it
// yields, however many edges leave id — they are one run of the edges'
// key order; otherwise it sorts id's edges first (State.Out).
func (s *State) OutAfter(id string, after EdgeKey) iter.Seq[*Edge] {
	from := keyPast(after)
	return func(yield func(*Edge) bool) {
		if _, ok := s.ranger(); !ok {
			sortedFrom(s.Out(id), from, EdgeKey.Compare, (*Edge).Key, yield)
			return
		}
		// Every edge leaving id sorts at or after {From: id}.
		start := EdgeKey{From: id}
		if from.Compare(start) > 0 {
			start = from
		}
		for e := range s.edgesFrom(start) {
			if e.From != id || !yield(e) {
				return
			}
		}
	}
}

// InAfter yields the edges arriving at id whose keys sort after after's,
// in key order, until the caller stops: a page of the edges into one
// artifact from a cursor. They are spread over the edges' key order, so
// it reads them all first (State.In, the reverse index): a page costs the
// artifact's in-degree, not the state.
func (s *State) InAfter(id string, after EdgeKey) iter.Seq[*Edge] {
	return func(yield func(*Edge) bool) {
		sortedFrom(s.In(id), keyPast(after), EdgeKey.Compare, (*Edge).Key, yield)
	}
}

// sortedFrom yields the entries of sorted (in key order) whose keys sort
// at or after from: a state without a source that ranges.
func sortedFrom[K, V any](sorted []V, from K, cmp func(a, b K) int, key func(V) K, yield func(V) bool) {
	i := sort.Search(len(sorted), func(i int) bool { return cmp(key(sorted[i]), from) >= 0 })
	for _, v := range sorted[i:] {
		if !yield(v) {
			return
		}
	}
}

// ranger returns the source under s's bottom layer if it ranges.
func (s *State) ranger() (Ranger, bool) {
	rg, ok := s.Source().(Ranger)
	return rg, ok
}

// mergeFrom yields, in key order, the entries of s at or after from:
// those the source yields in order (fromSrc), but for the keys a layer
// above it holds (live, or a removal marker), merged with the layers' own
// live entries at or after from (each key's from the highest layer
// holding it). An entry of the source that sorts before from is passed
// over: a map orders edge keys by their bytes, which is their order only
// for keys without a zero byte in From or Rel, as stored edges are but a
// cursor need not be.
func mergeFrom[K comparable, V comparable](s *State, layer func(*State) map[K]V, from K, cmp func(a, b K) int, key func(V) K, fromSrc iter.Seq[V], yield func(V) bool) {
	var zero V
	hidden := map[K]bool{}
	var own []V
	for x := s; x != nil; x = x.under {
		for k, v := range layer(x) {
			if hidden[k] {
				continue
			}
			hidden[k] = true
			if v != zero && cmp(k, from) >= 0 {
				own = append(own, v)
			}
		}
	}
	slices.SortFunc(own, func(a, b V) int { return cmp(key(a), key(b)) })
	i := 0
	for v := range fromSrc {
		k := key(v)
		if cmp(k, from) < 0 {
			continue
		}
		for ; i < len(own) && cmp(key(own[i]), k) < 0; i++ {
			if !yield(own[i]) {
				return
			}
		}
		if hidden[k] {
			continue
		}
		if !yield(v) {
			return
		}
	}
	for ; i < len(own); i++ {
		if !yield(own[i]) {
			return
		}
	}
}

// TypeLister is a Source that names every type its artifacts have (whose
// counts TypeCount gives), so that State.TypeCounts of a state over it
// reads no artifact.
type TypeLister interface {
	TypeNames() []string
}

// LeavesOf returns the context-hash leaves of artifacts and then of
// edges, hashed on every processor for a big state, for a store that
// builds a state's accumulator from its stored entries.
func LeavesOf(artifacts []*Artifact, edges []*Edge) []hashing.Digest {
	return leavesOf(artifacts, edges)
}

// Rebase returns a state over src that shows what s shows, taking s's
// accumulator and definitions: for a store whose state over an older
// commit's entries holds many changes, once those changes are stored
// (src) under a newer commit. n must be src's sizes and equal s's. s must
// not be used afterwards. It reports false, doing nothing, when s is not
// a state over a source, was opened by NewStateOverHashLater, or its sizes
// are not n.
func (s *State) Rebase(src Source, n Counts) (*State, bool) {
	if s.under != nil || s.src == nil || s.later != nil || n != (Counts{s.nArt, s.nTomb, s.nEdge}) {
		return nil, false
	}
	c := s.emptyOver(s.acc, 0)
	c.src = src
	s.acc = nil
	return c, true
}

// Reopen returns a state over src that shows what s shows, with a whole
// copy of s's accumulator and s's definitions: for a store whose state
// over a source, or a fork of one, is stacked over states that readers
// still hold, once what s shows is stored (src) under its newest commit.
// Unlike Rebase it leaves s and the states under it as they are, and
// unlike Clone it reads nothing from the source: it costs the
// accumulator's copy (the buckets the forks changed; buckets of a cold
// accumulator they did not change stay unread: hashing.Accumulator.Clone). n must be src's sizes and equal s's. It reports
// false, doing nothing, when s does not read through a source, was
// opened by NewStateOverHashLater, or its sizes are not n.
func (s *State) Reopen(src Source, n Counts) (*State, bool) {
	bottom := s
	for bottom.under != nil {
		bottom = bottom.under
	}
	if bottom.src == nil || bottom.later != nil || n != (Counts{s.nArt, s.nTomb, s.nEdge}) {
		return nil, false
	}
	c := s.emptyOver(s.accum().Clone(), 0)
	c.src = src
	return c, true
}

// Source returns the source the state at the bottom of s's forks reads
// through, or nil when it holds every entry itself.
func (s *State) Source() Source {
	x := s
	for x.under != nil {
		x = x.under
	}
	return x.src
}
