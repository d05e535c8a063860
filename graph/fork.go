package graph

import (
	"errors"
	"iter"

	"github.com/artifactd/artifactd/hashing"
)

// A fork is a State that holds only what changed since it was made, over
// an underlying state it never changes: deciding a commit on a fork of a
// branch head leaves the head as it was, so a refused commit costs no
// undo, and the head takes the fork's changes (Absorb) only once the
// commit is durable. Forks nest (a fork of a fork); a lookup falls
// through the layers until one holds the key.
//
// In a fork's maps a key marks a change: a nil artifact or edge, a zero
// tombstone, an empty edge set and a zero type count all mean "absent
// here, whatever the state below holds". A whole state (one that is not a
// fork) never holds such markers.

// ErrForkStale marks an Absorb of a fork whose underlying state changed
// after the fork was made (or that is not a fork of the receiver).
var ErrForkStale = errors.New("graph: fork is not of this state as it is now")

// Fork returns an empty overlay over s: reads see s, writes stay in the
// fork. s must not change while the fork is in use, except by Absorb of
// this fork; like every method of State, Fork must not run concurrently
// with a change of s. Making a fork costs O(1), and it changes nothing of
// s (the context hash's accumulator is forked too: hashing.Accumulator.Fork).
func (s *State) Fork() *State {
	f := s.emptyOver(s.accum().Fork(), 0)
	f.under, f.forkGen = s, s.gen
	return f
}

// emptyOver returns a state with empty maps (sized for n artifacts and
// edges) and s's definitions, counts and accumulator acc: the start of a
// fork of s, or of a whole copy that its caller fills.
func (s *State) emptyOver(acc *hashing.Accumulator, n int) *State {
	return &State{
		artifacts:  make(map[string]*Artifact, n),
		tombstones: make(map[string]int64),
		edges:      make(map[EdgeKey]*Edge, n),
		out:        make(map[string]*edgeSet),
		in:         make(map[string]*edgeSet),
		acc:        acc,
		rels:       s.rels,
		ruleset:    s.ruleset,
		types:      s.types,
		relDefs:    s.relDefs,
		typeCount:  make(map[string]int),
		nArt:       s.nArt,
		nTomb:      s.nTomb,
		nEdge:      s.nEdge,
	}
}

// IsFork reports whether s is a fork (see Fork).
func (s *State) IsFork() bool { return s.under != nil }

// Absorb applies the changes held by f, a fork of s made since s last
// changed, to s, in O(what f changed): afterwards s is the state f showed,
// and f must not be used again. It returns ErrForkStale, changing
// nothing, when f is not such a fork.
func (s *State) Absorb(f *State) error {
	if f.under != s || f.forkGen != s.gen || !f.acc.IsForkOf(s.accum()) {
		return ErrForkStale
	}
	whole := s.whole()
	for id, a := range f.artifacts {
		if a == nil && whole {
			delete(s.artifacts, id)
		} else {
			s.artifacts[id] = a
		}
	}
	for id, v := range f.tombstones {
		if v == 0 && whole {
			delete(s.tombstones, id)
		} else {
			s.tombstones[id] = v
		}
	}
	for k, e := range f.edges {
		if e == nil && whole {
			delete(s.edges, k)
		} else {
			s.edges[k] = e
		}
	}
	absorbSets(s.out, f.out, whole)
	absorbSets(s.in, f.in, whole)
	for typ, n := range f.typeCount {
		if n <= 0 && whole {
			delete(s.typeCount, typ)
		} else {
			s.typeCount[typ] = n
		}
	}
	s.accum().Absorb(f.acc) // cannot refuse: checked above
	s.rels, s.ruleset, s.types, s.relDefs = f.rels, f.ruleset, f.types, f.relDefs
	s.nArt, s.nTomb, s.nEdge = f.nArt, f.nTomb, f.nEdge
	s.gen++
	f.under = nil
	f.forkGen = ^uint64(0)
	return nil
}

// absorbSets moves a fork's edge sets into dst, the layer below: a delta
// over dst's own set of the id is applied to that set in place; any other
// set (a copy, or a delta over a lower layer's set) takes the id's place.
// An empty set removes the id from a whole state, which never keeps a
// delta.
func absorbSets(dst, src map[string]*edgeSet, whole bool) {
	for id, es := range src {
		switch below := dst[id]; {
		case es.under != nil && es.under == below:
			es.applyTo(below)
			es = below
		case es.under != nil && whole:
			es = es.clone() // not reached: a whole state's fork deltas over its own sets
		}
		if whole && es.len() == 0 {
			delete(dst, id)
		} else {
			dst[id] = es
		}
	}
}

// art returns the artifact id, or nil.
func (s *State) art(id string) *Artifact {
	for x := s; ; x = x.under {
		if a, ok := x.artifacts[id]; ok || x.under == nil && x.src == nil {
			return a
		}
		if x.under == nil {
			return x.src.Artifact(id)
		}
	}
}

// tomb returns the tombstone version of id, 0 when there is none.
func (s *State) tomb(id string) int64 {
	for x := s; ; x = x.under {
		if v, ok := x.tombstones[id]; ok || x.under == nil && x.src == nil {
			return v
		}
		if x.under == nil {
			return x.src.Tombstone(id)
		}
	}
}

// edge returns the edge of key k, or nil.
func (s *State) edge(k EdgeKey) *Edge {
	for x := s; ; x = x.under {
		if e, ok := x.edges[k]; ok || x.under == nil && x.src == nil {
			return e
		}
		if x.under == nil {
			return x.src.Edge(k)
		}
	}
}

// outOf returns the edges leaving id (nil: none). Read only.
func (s *State) outOf(id string) *edgeSet {
	return setOf(s, id, func(x *State) map[string]*edgeSet { return x.out }, (*State).srcOut)
}

// inOf returns the edges arriving at id (nil: none). Read only.
func (s *State) inOf(id string) *edgeSet {
	return setOf(s, id, func(x *State) map[string]*edgeSet { return x.in }, (*State).srcIn)
}

// setOf finds id's edge set in the adjacency map adj picks, layer by
// layer, and at last in the source (fromSrc) of a state over one.
func setOf(s *State, id string, adj func(*State) map[string]*edgeSet, fromSrc func(*State, string) *edgeSet) *edgeSet {
	for x := s; ; x = x.under {
		if es, ok := adj(x)[id]; ok || x.under == nil && x.src == nil {
			return es
		}
		if x.under == nil {
			return fromSrc(x, id)
		}
	}
}

// setFor returns id's edge set in adj (s.out or s.in) to change: in a
// fork, made on first use, its own copy of the set below, or for a hub
// (more than edgeSetMax edges) a delta over it.
func (s *State) setFor(adj map[string]*edgeSet, id string, below func() *edgeSet) *edgeSet {
	if es := adj[id]; es != nil {
		return es
	}
	var es *edgeSet
	if s.whole() {
		es = &edgeSet{}
	} else if b := below(); b.deep() || b.len() > edgeSetMax {
		// A hub, or a set read from a source: a delta, not a copy (which
		// would read every edge of the set).
		es = &edgeSet{under: b}
	} else {
		es = b.clone()
	}
	adj[id] = es
	return es
}

// countOf returns the number of live artifacts of type typ.
func (s *State) countOf(typ string) int {
	for x := s; ; x = x.under {
		if n, ok := x.typeCount[typ]; ok || x.under == nil && x.src == nil {
			return n
		}
		if x.under == nil {
			return x.src.TypeCount(typ)
		}
	}
}

// setTomb records (v > 0) or removes (v == 0) the tombstone of id.
func (s *State) setTomb(id string, v int64) {
	old := s.tomb(id)
	switch {
	case old == 0 && v != 0:
		s.nTomb++
	case old != 0 && v == 0:
		s.nTomb--
	}
	if v == 0 && s.whole() {
		delete(s.tombstones, id)
	} else {
		s.tombstones[id] = v
	}
	s.gen++
}

// allArtifacts yields every artifact, in no particular order.
func (s *State) allArtifacts() iter.Seq2[string, *Artifact] {
	return func(yield func(string, *Artifact) bool) {
		eachLayer(s, func(x *State) map[string]*Artifact { return x.artifacts }, srcArtifacts, yield)
	}
}

// allEdges yields every edge, in no particular order.
func (s *State) allEdges() iter.Seq2[EdgeKey, *Edge] {
	return func(yield func(EdgeKey, *Edge) bool) {
		eachLayer(s, func(x *State) map[EdgeKey]*Edge { return x.edges }, srcEdges, yield)
	}
}

// allTombstones yields every tombstone, in no particular order.
func (s *State) allTombstones() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		eachLayer(s, func(x *State) map[string]int64 { return x.tombstones }, srcTombstones, yield)
	}
}

// eachLayer yields the live entries of the map m picks in every layer of
// s, the top layer's first, and then those of the source under the bottom
// layer (walked by fromSrc), if any; an entry a higher layer holds (live
// or a marker) hides the lower layers' entry of the same key.
func eachLayer[K comparable, V comparable](s *State, m func(*State) map[K]V, fromSrc func(Source) iter.Seq2[K, V], yield func(K, V) bool) {
	var zero V
	var above []map[K]V
	bottom := s
	for x := s; x != nil; x = x.under {
		bottom = x
		cur := m(x)
	entries:
		for k, v := range cur {
			if v == zero {
				continue
			}
			for _, a := range above {
				if _, hidden := a[k]; hidden {
					continue entries
				}
			}
			if !yield(k, v) {
				return
			}
		}
		above = append(above, cur)
	}
	if bottom.src == nil {
		return
	}
stored:
	for k, v := range fromSrc(bottom.src) {
		for _, a := range above {
			if _, hidden := a[k]; hidden {
				continue stored
			}
		}
		if !yield(k, v) {
			return
		}
	}
}
