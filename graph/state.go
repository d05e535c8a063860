package graph

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/internal/cores"
)

// Artifact is one typed JSON document of a state, with its derived version
// and content hash. Data holds the canonical (RFC 8785) bytes of the data
// object; it may be nil in a state that was loaded without payloads (the
// store keeps payloads in its object store and loads them on demand). An
// Artifact held by a State must not be modified by callers.
type Artifact struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Version     int64           `json:"version"`
	ContentHash hashing.Digest  `json:"content_hash"`
	ProducedBy  string          `json:"produced_by"`
	Data        json.RawMessage `json:"data,omitempty"`
}

// Leaf returns the artifact's leaf in the context hash (HASHING.md §3).
func (a *Artifact) Leaf() hashing.Digest {
	return hashing.ArtifactLeaf(a.ID, a.Type, a.Version, a.ContentHash, a.ProducedBy)
}

// EdgeKey identifies an edge: at most one edge exists per (from, rel, to).
type EdgeKey struct {
	From string `json:"from"`
	Rel  string `json:"rel"`
	To   string `json:"to"`
}

// String renders the key as "from -rel-> to" for messages.
func (k EdgeKey) String() string { return fmt.Sprintf("%s -%s-> %s", k.From, k.Rel, k.To) }

// Edge is a typed provenance edge. It points from an artifact to what it
// rests on (an answer is supported_by its evidence). Attrs holds the
// canonical bytes of a non-empty attrs object, or nil.
type Edge struct {
	From  string          `json:"from"`
	Rel   string          `json:"rel"`
	To    string          `json:"to"`
	Attrs json.RawMessage `json:"attrs,omitempty"`
}

// Key returns the edge's identity.
func (e *Edge) Key() EdgeKey { return EdgeKey{From: e.From, Rel: e.Rel, To: e.To} }

// Leaf returns the edge's leaf in the context hash (HASHING.md §3).
func (e *Edge) Leaf() hashing.Digest { return hashing.EdgeLeaf(e.From, e.Rel, e.To, e.Attrs) }

// State is the set of artifacts and edges at one commit, with adjacency
// indexes and the incremental context hash. The zero value is not usable;
// call NewState. A State is not safe for concurrent mutation; concurrent
// readers are safe while no one mutates it.
type State struct {
	artifacts map[string]*Artifact
	// tombstones holds the last version of deleted artifacts, so that a
	// re-created artifact continues its version numbering.
	tombstones map[string]int64
	edges      map[EdgeKey]*Edge
	out        map[string]*edgeSet
	in         map[string]*edgeSet
	acc        *hashing.Accumulator
	// later, on a state opened by NewStateOverHashLater, builds acc the
	// first time something needs it (accum); nil on every other state.
	later *laterAcc
	// rels are the relations in force: the ruleset's and the defined
	// ones. It and the definition maps below are copied on write, so
	// Clone shares them.
	rels    Relations
	ruleset *Ruleset
	// types and relDefs hold the user definitions recorded in the state.
	types   map[string]*TypeDef
	relDefs map[string]RelationDef
	// typeCount counts live artifacts per type.
	typeCount map[string]int
	// nArt, nTomb and nEdge count the live artifacts, tombstones and
	// edges (a fork's maps hold only its changes).
	nArt, nTomb, nEdge int
	// under is the state a fork overlays (nil: a whole state); forkGen is
	// under's gen when the fork was made, and gen counts changes of this
	// state, so that Absorb can refuse a fork that is out of date.
	under        *State
	forkGen, gen uint64
	// src, in a state at the bottom of its forks, is the stored state it
	// reads through (NewStateOver; nil: a whole state or a fork). Such a
	// state's maps hold changes as a fork's do.
	src Source
}

// NewState returns an empty state of ruleset builtin/v1 that classifies
// relations with rels (the ruleset's when nil).
func NewState(rels Relations) *State {
	s := NewStateFor(rulesetV1())
	if rels != nil {
		s.rels = rels
	}
	return s
}

// NewStateFor returns an empty state of a context of ruleset rs (builtin/v1
// when nil): its built-in types and relations are rs's.
func NewStateFor(rs *Ruleset) *State { return newStateSized(rs, 0, 0, 0) }

// newStateSized is NewStateFor with maps sized for nArt artifacts, nTomb
// tombstones and nEdge edges (a state loaded whole: growing its maps one
// doubling at a time would rehash every entry several times over).
func newStateSized(rs *Ruleset, nArt, nTomb, nEdge int) *State {
	if rs == nil {
		rs = rulesetV1()
	}
	return &State{
		artifacts:  make(map[string]*Artifact, nArt),
		tombstones: make(map[string]int64, nTomb),
		edges:      make(map[EdgeKey]*Edge, nEdge),
		out:        make(map[string]*edgeSet, min(nArt, nEdge)),
		in:         make(map[string]*edgeSet, min(nArt, nEdge)),
		acc:        hashing.NewAccumulator(),
		rels:       rs.Relations(),
		ruleset:    rs,
		types:      map[string]*TypeDef{},
		relDefs:    map[string]RelationDef{},
		typeCount:  map[string]int{},
	}
}

// Relations returns the relation registry the state uses.
func (s *State) Relations() Relations { return s.rels }

// Clone returns a deep copy of the state's indexes, a whole state even
// when s is a fork. Artifacts and edges are immutable values and are
// shared.
func (s *State) Clone() *State {
	if s.under != nil {
		return s.flatten()
	}
	// A state over a source copies its own maps (its changes) and shares
	// the source, as a whole state copies its maps.
	c := &State{
		artifacts:  make(map[string]*Artifact, len(s.artifacts)),
		tombstones: make(map[string]int64, len(s.tombstones)),
		edges:      make(map[EdgeKey]*Edge, len(s.edges)),
		out:        make(map[string]*edgeSet, len(s.out)),
		in:         make(map[string]*edgeSet, len(s.in)),
		acc:        s.accum().Clone(),
		rels:       s.rels,
		ruleset:    s.ruleset,
		types:      s.types,
		relDefs:    s.relDefs,
		typeCount:  make(map[string]int, len(s.typeCount)),
		nArt:       s.nArt,
		nTomb:      s.nTomb,
		nEdge:      s.nEdge,
		src:        s.src,
	}
	for k, v := range s.typeCount {
		c.typeCount[k] = v
	}
	for k, v := range s.artifacts {
		c.artifacts[k] = v
	}
	for k, v := range s.tombstones {
		c.tombstones[k] = v
	}
	for k, v := range s.edges {
		c.edges[k] = v
	}
	for k, es := range s.out {
		c.out[k] = es.clone()
	}
	for k, es := range s.in {
		c.in[k] = es.clone()
	}
	return c
}

// flatten returns the whole state a fork shows.
func (s *State) flatten() *State {
	c := s.emptyOver(s.accum().Clone(), max(s.nArt, s.nEdge))
	for id, a := range s.allArtifacts() {
		c.artifacts[id] = a
		c.typeCount[a.Type]++
	}
	for id, v := range s.allTombstones() {
		c.tombstones[id] = v
	}
	for k, e := range s.allEdges() {
		c.edges[k] = e
		edgesAt(c.out, k.From).put(e)
		edgesAt(c.in, k.To).put(e)
	}
	return c
}

// Share prepares the state to be cloned by several goroutines at once (a
// state in a cache of read-only states): afterwards Clone only reads s —
// except that the first Clone of a state opened by NewStateOverHashLater
// builds its accumulator, under that state's lock. Call it before s is
// shared; later changes to s stay correct.
func (s *State) Share() {
	if l := s.later; l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.shared = true
		if s.acc == nil {
			return // accum marks it when it builds it
		}
	}
	s.acc.MarkShared()
}

// Hash returns the context hash of the state. It re-hashes only the
// buckets touched since the last call.
func (s *State) Hash() hashing.Digest { return s.accum().Root() }

// Leaves returns the state's sorted leaves.
func (s *State) Leaves() []hashing.Digest { return s.accum().Leaves() }

// NumArtifacts returns the number of artifacts.
func (s *State) NumArtifacts() int { return s.nArt }

// NumTombstones returns the number of deleted ids the state remembers.
func (s *State) NumTombstones() int { return s.nTomb }

// NumEdges returns the number of edges.
func (s *State) NumEdges() int { return s.nEdge }

// Artifact returns the artifact with the given id, or nil.
func (s *State) Artifact(id string) *Artifact { return s.art(id) }

// Edge returns the edge with the given key, or nil.
func (s *State) Edge(k EdgeKey) *Edge { return s.edge(k) }

// LastVersion returns the highest version id ever had in this state's
// history as known to the state (live or deleted), 0 if never seen.
func (s *State) LastVersion(id string) int64 {
	if a := s.art(id); a != nil {
		return a.Version
	}
	return s.tomb(id)
}

// ArtifactIDs returns all artifact ids, sorted bytewise.
func (s *State) ArtifactIDs() []string {
	if halves, mid := s.ArtifactHalves(); mid != "" {
		// Two workers, each a half of the id order: their lists end to
		// end are in order.
		var second []string
		var wg sync.WaitGroup
		wg.Go(func() {
			for a := range halves[1] {
				second = append(second, a.ID)
			}
		})
		ids := make([]string, 0, s.nArt)
		for a := range halves[0] {
			ids = append(ids, a.ID)
		}
		wg.Wait()
		return append(ids, second...)
	}
	ids := make([]string, 0, s.nArt)
	for id := range s.allArtifacts() {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Artifacts returns all artifacts sorted by id, from one pass over them
// (a state read through its map does not look each one up again).
func (s *State) Artifacts() []*Artifact {
	out := make([]*Artifact, 0, s.nArt)
	for _, a := range s.allArtifacts() {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Artifact) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Edges returns all edges sorted by (from, rel, to).
func (s *State) Edges() []*Edge {
	out := make([]*Edge, 0, s.nEdge)
	for _, e := range s.allEdges() {
		out = append(out, e)
	}
	SortEdges(out)
	return out
}

// SortEdges sorts edges by (from, rel, to), bytewise.
func SortEdges(es []*Edge) {
	slices.SortFunc(es, func(a, b *Edge) int { return a.Key().Compare(b.Key()) })
}

// Compare orders edge keys by (from, rel, to), bytewise, as SortEdges
// sorts edges, and returns -1, 0 or +1 as k sorts before, with or after
// o. Ids and relations hold no zero byte, so it is also the order of the
// keys joined with zero bytes between their parts.
func (k EdgeKey) Compare(o EdgeKey) int {
	return cmp.Or(strings.Compare(k.From, o.From), strings.Compare(k.Rel, o.Rel), strings.Compare(k.To, o.To))
}

// Out returns the edges leaving id, sorted.
func (s *State) Out(id string) []*Edge { return sortedEdges(s.outOf(id)) }

// In returns the edges arriving at id, sorted.
func (s *State) In(id string) []*Edge { return sortedEdges(s.inOf(id)) }

// sortedEdges returns es's edges, sorted (never nil). The size of a set
// that reads its source is known only by reading it, so such a set is
// read once, not once to size the slice and again to fill it.
func sortedEdges(es *edgeSet) []*Edge {
	out := []*Edge{}
	if !es.deep() {
		out = make([]*Edge, 0, es.len())
	}
	for _, e := range es.all() {
		out = append(out, e)
	}
	SortEdges(out)
	return out
}

// DependsOn returns the ids that id directly depends on (targets of its
// outgoing dependency edges), sorted and deduplicated.
func (s *State) DependsOn(id string) []string {
	var ids []string
	for k := range s.outOf(id).all() {
		if s.rels.Depends(k.Rel) {
			ids = append(ids, k.To)
		}
	}
	return dedupSorted(ids)
}

// Dependents returns the ids that directly depend on id, sorted.
func (s *State) Dependents(id string) []string {
	var ids []string
	for k := range s.inOf(id).all() {
		if s.rels.Depends(k.Rel) {
			ids = append(ids, k.From)
		}
	}
	return dedupSorted(ids)
}

func dedupSorted(ids []string) []string {
	sort.Strings(ids)
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

// ValidateID checks an artifact id (or an edge end): 1–256 bytes of
// printable UTF-8 in Unicode NFC, with no control, format (bidi,
// zero-width: category Cf), separator, private-use, noncharacter,
// variation-selector, filler or non-ASCII space code points (see
// invisibleRune). A non-NFC id is refused, not normalised: the id a client
// sends is the id stored and hashed, byte for byte, and the refusal names
// the NFC form to send instead.
func ValidateID(id string) error {
	if id == "" {
		return &OpError{Index: -1, Field: "/id", Rule: "required", Detail: "artifact id must not be empty"}
	}
	if len(id) > MaxIDBytes {
		return &OpError{Index: -1, Field: "/id", Rule: "max_length", Detail: fmt.Sprintf("artifact id is %d bytes; the limit is %d", len(id), MaxIDBytes)}
	}
	if !utf8.ValidString(id) {
		return &OpError{Index: -1, Field: "/id", Rule: "utf8", Detail: "artifact id must be valid UTF-8"}
	}
	switch rule, r, i, kind := unreadableRune(id); rule {
	case "printable":
		return &OpError{Index: -1, Field: "/id", Rule: rule, Detail: fmt.Sprintf("artifact id %q contains a control character (%s at byte %d)", id, runeName(r), i)}
	case "visible":
		return &OpError{Index: -1, Field: "/id", Rule: rule, Detail: fmt.Sprintf("artifact id %q contains %s, a %s, at byte %d: ids must read the same as they render", id, runeName(r), kind, i)}
	}
	return checkNFC(id)
}

// ValidateName checks a type or relation name: 1–64 chars of [a-z0-9_.-],
// starting with a letter.
func ValidateName(field, name string) error {
	if name == "" {
		return &OpError{Index: -1, Field: "/" + field, Rule: "required", Detail: field + " must not be empty"}
	}
	if len(name) > 64 {
		return &OpError{Index: -1, Field: "/" + field, Rule: "max_length", Detail: fmt.Sprintf("%s is %d bytes; the limit is 64", field, len(name))}
	}
	for i, r := range name {
		ok := (r >= 'a' && r <= 'z') || (i > 0 && ((r >= '0' && r <= '9') || r == '_' || r == '.' || r == '-'))
		if !ok {
			return &OpError{Index: -1, Field: "/" + field, Rule: "pattern", Detail: fmt.Sprintf("%s %q must match ^[a-z][a-z0-9_.-]{0,63}$", field, name)}
		}
	}
	return nil
}

// MaxIDBytes is the longest artifact id accepted.
const MaxIDBytes = 256

// Load builds a state of ruleset rs (builtin/v1 when nil) from stored
// parts in one pass (used when loading a commit's state from storage). It
// computes the context hash with one sorted merge per bucket instead of one
// insertion per leaf. It does not check ends or cycles: the parts must come
// from a valid state. Definition artifacts must carry their Data; an error
// says which one does not parse.
func Load(rs *Ruleset, artifacts []*Artifact, tombstones []Tombstone, edges []*Edge) (*State, error) {
	s := newStateSized(rs, len(artifacts), len(tombstones), len(edges))
	leaves := leavesOf(artifacts, edges)
	for _, a := range artifacts {
		s.artifacts[a.ID] = a
		s.typeCount[a.Type]++
	}
	// Type definitions first, in id order, so that their checks see the
	// same state whatever order the parts came in.
	var defs []*Artifact
	for _, a := range artifacts {
		if IsDefinitionType(a.Type) {
			defs = append(defs, a)
		}
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].ID < defs[j].ID })
	for _, a := range defs {
		if err := s.loadDefinition(a); err != nil {
			return nil, err
		}
	}
	for _, t := range tombstones {
		s.tombstones[t.ID] = t.Version
	}
	s.nArt, s.nTomb = len(s.artifacts), len(s.tombstones)
	for _, e := range edges {
		k := e.Key()
		s.edges[k] = e
		edgesAt(s.out, k.From).put(e)
		edgesAt(s.in, k.To).put(e)
	}
	s.nEdge = len(s.edges)
	s.accum().AddBatch(leaves)
	return s, nil
}

// parallelLeaves is the number of entries from which leavesOf spreads
// the hashing over the processors.
const parallelLeaves = 8192

// leavesOf returns the leaves of artifacts, then of edges, in that order.
// Each is a SHA-256 of its own canonical JSON, independent of the others,
// so a big state (a head loaded from its state map) hashes them on every
// processor at once; the result does not depend on how.
func leavesOf(artifacts []*Artifact, edges []*Edge) []hashing.Digest {
	return leavesOn(artifacts, edges, min(cores.Count(), (len(artifacts)+len(edges))/parallelLeaves))
}

// leavesOn is leavesOf on workers goroutines (one when fewer than two).
func leavesOn(artifacts []*Artifact, edges []*Edge, workers int) []hashing.Digest {
	leaves := make([]hashing.Digest, len(artifacts)+len(edges))
	fill := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if i < len(artifacts) {
				leaves[i] = artifacts[i].Leaf()
			} else {
				leaves[i] = edges[i-len(artifacts)].Leaf()
			}
		}
	}
	if workers < 2 {
		fill(0, len(leaves))
		return leaves
	}
	var wg sync.WaitGroup
	part := (len(leaves) + workers - 1) / workers
	for lo := 0; lo < len(leaves); lo += part {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fill(lo, hi)
		}(lo, min(lo+part, len(leaves)))
	}
	wg.Wait()
	return leaves
}
