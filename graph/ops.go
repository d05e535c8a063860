package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/hashing"
)

// Op kinds.
const (
	OpPut    = "put"
	OpDelete = "delete"
	OpLink   = "link"
	OpUnlink = "unlink"
)

// Op is one change to a state. As recorded in a commit (and hashed into its
// ops_hash) an op has a fixed canonical shape per kind:
//
//	put:    {"op":"put","id","type","version","content_hash","produced_by"}
//	delete: {"op":"delete","id"}
//	link:   {"op":"link","from","rel","to"[,"attrs"]}
//	unlink: {"op":"unlink","from","rel","to"}
//
// A put as submitted by a client carries Data (canonical bytes) and may
// leave Version and ContentHash zero; Apply resolves them. Data is never
// part of the recorded op: the content hash covers it.
type Op struct {
	Op          string
	ID          string
	Type        string
	Version     int64
	ContentHash hashing.Digest
	ProducedBy  string
	Data        json.RawMessage
	From        string
	Rel         string
	To          string
	Attrs       json.RawMessage
}

// EdgeKey returns the key of a link or unlink op.
func (o *Op) EdgeKey() EdgeKey { return EdgeKey{From: o.From, Rel: o.Rel, To: o.To} }

// MarshalJSON writes the recorded (canonical-shaped) form of the op.
func (o Op) MarshalJSON() ([]byte, error) {
	switch o.Op {
	case OpPut:
		return json.Marshal(struct {
			Op          string         `json:"op"`
			ID          string         `json:"id"`
			Type        string         `json:"type"`
			Version     int64          `json:"version"`
			ContentHash hashing.Digest `json:"content_hash"`
			ProducedBy  string         `json:"produced_by"`
		}{o.Op, o.ID, o.Type, o.Version, o.ContentHash, o.ProducedBy})
	case OpDelete:
		return json.Marshal(struct {
			Op string `json:"op"`
			ID string `json:"id"`
		}{o.Op, o.ID})
	case OpLink, OpUnlink:
		var attrs json.RawMessage
		if o.Op == OpLink && !emptyAttrs(o.Attrs) {
			attrs = o.Attrs
		}
		return json.Marshal(struct {
			Op    string          `json:"op"`
			From  string          `json:"from"`
			Rel   string          `json:"rel"`
			To    string          `json:"to"`
			Attrs json.RawMessage `json:"attrs,omitempty"`
		}{o.Op, o.From, o.Rel, o.To, attrs})
	}
	return nil, fmt.Errorf("graph: cannot marshal op %q", o.Op)
}

// UnmarshalJSON reads the recorded form of an op.
func (o *Op) UnmarshalJSON(b []byte) error {
	var w struct {
		Op          string          `json:"op"`
		ID          string          `json:"id"`
		Type        string          `json:"type"`
		Version     int64           `json:"version"`
		ContentHash *hashing.Digest `json:"content_hash"`
		ProducedBy  string          `json:"produced_by"`
		From        string          `json:"from"`
		Rel         string          `json:"rel"`
		To          string          `json:"to"`
		Attrs       json.RawMessage `json:"attrs"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*o = Op{Op: w.Op, ID: w.ID, Type: w.Type, Version: w.Version, ProducedBy: w.ProducedBy,
		From: w.From, Rel: w.Rel, To: w.To, Attrs: w.Attrs}
	if w.ContentHash != nil {
		o.ContentHash = *w.ContentHash
	}
	return nil
}

// OpsHash returns the ops_hash of a commit's recorded ops (HASHING.md §5)
// and their canonical JSON.
func OpsHash(ops []Op) (hashing.Digest, []byte, error) {
	size := 2
	for i := range ops {
		o := &ops[i]
		size += 120 + len(o.ID) + len(o.Type) + len(o.ProducedBy) + len(o.From) + len(o.Rel) + len(o.To) + len(o.Attrs)
	}
	canon := make([]byte, 0, size)
	canon = append(canon, '[')
	for i := range ops {
		if i > 0 {
			canon = append(canon, ',')
		}
		var err error
		if canon, err = AppendCanonicalOp(canon, &ops[i]); err != nil {
			return hashing.Digest{}, nil, fmt.Errorf("graph: op %d: %w", i, err)
		}
	}
	canon = append(canon, ']')
	return hashing.OpsHash(canon), canon, nil
}

// RecordedAs reports whether op, as a commit's record writes it, is in the
// form a store records for the change c it made: a put with its version
// written out, a link whose attrs are absent exactly when c's are. The
// ops hash covers ops as written, so an op in another form (a put of
// version 0, attrs that are an empty object written otherwise) replays to
// the same state under an ops hash no store writes.
func RecordedAs(op Op, c Change) bool {
	switch op.Op {
	case OpPut:
		return op.Version == c.Op.Version
	case OpLink:
		return emptyAttrs(op.Attrs) == (len(c.Op.Attrs) == 0)
	}
	return true
}

func emptyAttrs(a json.RawMessage) bool {
	t := bytes.TrimSpace(a)
	return len(t) == 0 || bytes.Equal(t, []byte("{}")) || bytes.Equal(t, []byte("null"))
}

// Sentinel errors of state mutation; OpError and CycleError wrap them.
var (
	// ErrInvalid marks an op that is malformed (bad id, unknown relation…).
	ErrInvalid = errors.New("invalid op")
	// ErrNotFound marks an op that names an artifact or edge that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDangling marks a commit that would leave an edge without an end.
	ErrDangling = errors.New("dangling edge")
	// ErrCycle marks a commit whose dependency edges would form a cycle.
	ErrCycle = errors.New("dependency cycle")
	// ErrCorrupt marks a recorded op that could never have been written,
	// found while replaying.
	ErrCorrupt = fault.Corruption("corrupt op")
)

// OpError describes why an op was refused. Index is the op's position in
// its commit (-1 when unknown), Field a JSON pointer relative to the op, Rule
// a short machine-readable rule name.
type OpError struct {
	Index  int
	Field  string
	Rule   string
	Detail string
	Err    error
}

func (e *OpError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "op %d: ", e.Index)
	}
	b.WriteString(e.Detail)
	return b.String()
}

// Unwrap returns the sentinel the error wraps (ErrInvalid when unset).
func (e *OpError) Unwrap() error {
	if e.Err == nil {
		return ErrInvalid
	}
	return e.Err
}

// CycleError reports a dependency cycle that an edge would close. Cycle
// lists the ids along it, starting and ending with the same id.
type CycleError struct {
	Index int
	Edge  EdgeKey
	Cycle []string
}

func (e *CycleError) Error() string {
	return fmt.Sprintf("op %d: edge %s would close a dependency cycle: %s", e.Index, e.Edge, strings.Join(e.Cycle, " -> "))
}

// Unwrap returns ErrCycle.
func (e *CycleError) Unwrap() error { return ErrCycle }

// Change records what one op did, so it can be undone and so derived
// indexes can follow. Noop is set for a put of identical content and for
// a link of an identical edge: such ops are dropped from the commit.
type Change struct {
	Op   Op
	Noop bool
	// Prev is the artifact replaced or deleted by a put or delete.
	Prev *Artifact
	// Next is the artifact written by a put.
	Next *Artifact
	// PrevTombstone is the tombstone version before a put (0 if none).
	PrevTombstone int64
	// PrevEdge is the edge replaced or removed by a link or unlink.
	PrevEdge *Edge
	// NextEdge is the edge written by a link.
	NextEdge *Edge
	// def is what a put of a definition changed.
	def *defChange
}

// ApplyOps applies the ops of one commit atomically: either every op
// applies and the resulting state has no dangling edge and no dependency
// cycle, or the state is left exactly as it was and the first problem is
// returned. Puts are resolved (content hash computed from Data when unset;
// version = last version + 1 when unset, otherwise it must exceed the last
// version). The returned changes include no-ops; RecordedOps extracts the
// ops a commit records.
func (s *State) ApplyOps(ops []Op) ([]Change, error) {
	changes := make([]Change, 0, len(ops))
	fail := func(err error) ([]Change, error) {
		s.Undo(changes)
		return nil, err
	}
	for i := range ops {
		ch, err := s.apply(ops[i])
		if err != nil {
			var oe *OpError
			if errors.As(err, &oe) && oe.Index < 0 {
				oe.Index = i
			}
			return fail(err)
		}
		changes = append(changes, ch)
	}
	if err := s.checkCommit(changes); err != nil {
		return fail(err)
	}
	return changes, nil
}

// RecordedOps returns the resolved ops of the changes that were not
// no-ops, in order: what a commit records and hashes.
func RecordedOps(changes []Change) []Op {
	out := make([]Op, 0, len(changes))
	for _, c := range changes {
		if !c.Noop {
			op := c.Op
			op.Data = nil
			out = append(out, op)
		}
	}
	return out
}

// Undo reverts changes, newest first.
func (s *State) Undo(changes []Change) {
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Noop {
			continue
		}
		switch c.Op.Op {
		case OpPut:
			s.removeArtifact(c.Next.ID)
			s.undoDefinition(c.def)
			if c.Prev != nil {
				s.insertArtifact(c.Prev)
			}
			if c.PrevTombstone != 0 {
				s.setTomb(c.Op.ID, c.PrevTombstone)
			}
		case OpDelete:
			s.setTomb(c.Prev.ID, 0)
			s.insertArtifact(c.Prev)
		case OpLink:
			s.removeEdge(c.NextEdge.Key())
			if c.PrevEdge != nil {
				s.insertEdge(c.PrevEdge)
			}
		case OpUnlink:
			s.insertEdge(c.PrevEdge)
		}
	}
}

func (s *State) apply(op Op) (Change, error) {
	switch op.Op {
	case OpPut:
		return s.applyPut(op)
	case OpDelete:
		if err := ValidateID(op.ID); err != nil {
			return Change{}, err
		}
		prev := s.art(op.ID)
		if prev == nil {
			return Change{}, &OpError{Index: -1, Field: "/id", Rule: "exists", Err: ErrNotFound,
				Detail: fmt.Sprintf("cannot delete %q: no such artifact", op.ID)}
		}
		if IsDefinitionType(prev.Type) {
			return Change{}, defError("/id", "permanent", "cannot delete %q: definitions stay for the life of the context (artifacts of earlier commits are judged by them)", op.ID)
		}
		s.removeArtifact(op.ID)
		s.setTomb(op.ID, prev.Version)
		return Change{Op: Op{Op: OpDelete, ID: op.ID}, Prev: prev}, nil
	case OpLink:
		if err := s.checkEdgeOp(op); err != nil {
			return Change{}, err
		}
		attrs, err := canonicalAttrs(op.Attrs)
		if err != nil {
			return Change{}, err
		}
		e := &Edge{From: op.From, Rel: op.Rel, To: op.To, Attrs: attrs}
		prev := s.edge(e.Key())
		resolved := Op{Op: OpLink, From: op.From, Rel: op.Rel, To: op.To, Attrs: attrs}
		if prev != nil && bytes.Equal(prev.Attrs, attrs) {
			return Change{Op: resolved, Noop: true}, nil
		}
		if prev != nil {
			s.removeEdge(prev.Key())
		}
		s.insertEdge(e)
		return Change{Op: resolved, PrevEdge: prev, NextEdge: e}, nil
	case OpUnlink:
		if err := s.checkEdgeOp(op); err != nil {
			return Change{}, err
		}
		prev := s.edge(op.EdgeKey())
		if prev == nil {
			return Change{}, &OpError{Index: -1, Field: "", Rule: "exists", Err: ErrNotFound,
				Detail: fmt.Sprintf("cannot unlink %s: no such edge", op.EdgeKey())}
		}
		s.removeEdge(prev.Key())
		return Change{Op: Op{Op: OpUnlink, From: op.From, Rel: op.Rel, To: op.To}, PrevEdge: prev}, nil
	}
	return Change{}, &OpError{Index: -1, Field: "/op", Rule: "enum",
		Detail: fmt.Sprintf("unknown op %q: want put, delete, link or unlink", op.Op)}
}

func (s *State) applyPut(op Op) (Change, error) {
	if err := ValidateID(op.ID); err != nil {
		return Change{}, err
	}
	if err := ValidateName("type", op.Type); err != nil {
		return Change{}, prefixField(err, "/type")
	}
	if err := checkReservedID(op.ID, op.Type); err != nil {
		return Change{}, err
	}
	ch := op.ContentHash
	if ch.IsZero() {
		if op.Data == nil {
			return Change{}, &OpError{Index: -1, Field: "/data", Rule: "required", Detail: "put needs data (a JSON object)"}
		}
		ch = hashing.ContentHash(op.Data)
	} else if op.Data != nil && hashing.ContentHash(op.Data) != ch {
		return Change{}, &OpError{Index: -1, Field: "/content_hash", Rule: "matches_data", Err: ErrCorrupt,
			Detail: fmt.Sprintf("content_hash %s does not match the data", ch)}
	}
	prev := s.art(op.ID)
	if prev != nil && prev.Type == op.Type && prev.ContentHash == ch && prev.ProducedBy == op.ProducedBy {
		return Change{Op: Op{Op: OpPut, ID: op.ID, Type: op.Type, Version: prev.Version, ContentHash: ch, ProducedBy: op.ProducedBy}, Noop: true}, nil
	}
	var def any
	if IsDefinitionType(op.Type) {
		if op.Data == nil {
			return Change{}, &OpError{Index: -1, Field: "/data", Rule: "definition_data", Err: ErrCorrupt,
				Detail: fmt.Sprintf("put %q: a definition must carry its data", op.ID)}
		}
		d, err := s.parseDefinition(op.ID, op.Type, op.Data)
		if err != nil {
			return Change{}, err
		}
		def = d
	}
	last := s.LastVersion(op.ID)
	version := op.Version
	switch {
	case version == 0:
		version = last + 1
	case version <= last:
		return Change{}, &OpError{Index: -1, Field: "/version", Rule: "increasing", Err: ErrCorrupt,
			Detail: fmt.Sprintf("put %q: version %d is not above the last version %d", op.ID, version, last)}
	}
	a := &Artifact{ID: op.ID, Type: op.Type, Version: version, ContentHash: ch, ProducedBy: op.ProducedBy, Data: op.Data}
	tomb := s.tomb(op.ID)
	if tomb != 0 {
		s.setTomb(op.ID, 0)
	}
	if prev != nil {
		s.removeArtifact(op.ID)
	}
	var dc *defChange
	if def != nil {
		dc = s.applyDefinition(a, def)
	}
	s.insertArtifact(a)
	resolved := Op{Op: OpPut, ID: a.ID, Type: a.Type, Version: version, ContentHash: ch, ProducedBy: a.ProducedBy, Data: op.Data}
	return Change{Op: resolved, Prev: prev, Next: a, PrevTombstone: tomb, def: dc}, nil
}

func prefixField(err error, field string) error {
	var oe *OpError
	if errors.As(err, &oe) {
		oe.Field = field
		oe.Index = -1
	}
	return err
}

func (s *State) checkEdgeOp(op Op) error {
	if err := ValidateID(op.From); err != nil {
		return prefixField(err, "/from")
	}
	if err := ValidateID(op.To); err != nil {
		return prefixField(err, "/to")
	}
	for _, end := range []struct{ field, id string }{{"/from", op.From}, {"/to", op.To}} {
		if strings.HasPrefix(end.id, ReservedIDPrefix) {
			return defError(end.field, "reserved", "edge %s: definitions take no edges (%q is reserved)", op.EdgeKey(), end.id)
		}
	}
	if !s.rels.Known(op.Rel) {
		return &OpError{Index: -1, Field: "/rel", Rule: "enum",
			Detail: fmt.Sprintf("unknown relation %q; known: %s", op.Rel, strings.Join(s.rels.Names(), ", "))}
	}
	return nil
}

func canonicalAttrs(a json.RawMessage) (json.RawMessage, error) {
	if emptyAttrs(a) {
		return nil, nil
	}
	c, err := hashing.CanonicalizeObject(a)
	if err != nil {
		return nil, &OpError{Index: -1, Field: "/attrs", Rule: "canonical_json", Detail: "attrs: " + err.Error(), Err: ErrInvalid}
	}
	if bytes.Equal(c, []byte("{}")) {
		return nil, nil
	}
	return c, nil
}

// checkCommit validates the state after all ops of a commit: every edge
// touched has both ends, no deleted artifact keeps an edge, and no new
// dependency edge closes a cycle.
func (s *State) checkCommit(changes []Change) error {
	for i, c := range changes {
		if c.Noop {
			continue
		}
		switch c.Op.Op {
		case OpLink:
			k := c.NextEdge.Key()
			if s.edge(k) != c.NextEdge {
				continue // replaced or removed later in the same commit
			}
			for _, end := range []struct{ field, id string }{{"/from", k.From}, {"/to", k.To}} {
				if s.art(end.id) == nil {
					return &OpError{Index: i, Field: end.field, Rule: "exists", Err: ErrDangling,
						Detail: fmt.Sprintf("edge %s: artifact %q does not exist", k, end.id)}
				}
			}
		case OpDelete:
			id := c.Prev.ID
			if s.art(id) != nil {
				continue
			}
			if n := s.outOf(id).len() + s.inOf(id).len(); n > 0 {
				return &OpError{Index: i, Field: "/id", Rule: "no_edges", Err: ErrDangling,
					Detail: fmt.Sprintf("cannot delete %q: %d edge(s) still point to or from it; unlink them in the same commit", id, n)}
			}
		}
	}
	return s.checkCycles(changes)
}

// checkCycles refuses a commit whose new dependency edges close a cycle.
// Any such cycle runs through the source of a new edge, and every artifact
// on it can reach that source, so the search is confined to R: the
// artifacts from which some new edge's source is reachable (found walking
// dependents backwards from the sources). For the common writes — new
// leaves, a chain extended by a commit of its next steps, many artifacts
// resting on one hub — R is the commit's own new artifacts, so the cost is
// bounded by what the commit touches, never by the depth of the chain below
// or the degree of a hub. One colouring pass over R says whether any cycle
// exists; only then is the first offending op located and its cycle named.
func (s *State) checkCycles(changes []Change) error {
	var sources []string
	for _, c := range changes {
		if c.Noop || c.Op.Op != OpLink || !s.rels.Depends(c.Op.Rel) {
			continue
		}
		if k := c.NextEdge.Key(); s.edge(k) == c.NextEdge {
			sources = append(sources, k.From)
		}
	}
	if len(sources) == 0 {
		return nil
	}
	inR := map[string]bool{}
	queue := make([]string, 0, len(sources))
	for _, id := range sources {
		if !inR[id] {
			inR[id] = true
			queue = append(queue, id)
		}
	}
	for i := 0; i < len(queue); i++ {
		for k := range s.inOf(queue[i]).all() {
			if s.rels.Depends(k.Rel) && !inR[k.From] {
				inR[k.From] = true
				queue = append(queue, k.From)
			}
		}
	}
	if !s.hasCycleWithin(queue, inR) {
		return nil
	}
	within := func(id string) []string {
		var out []string
		for _, d := range s.DependsOn(id) {
			if inR[d] {
				out = append(out, d)
			}
		}
		return out
	}
	for i, c := range changes {
		if c.Noop || c.Op.Op != OpLink || !s.rels.Depends(c.Op.Rel) {
			continue
		}
		k := c.NextEdge.Key()
		if s.edge(k) != c.NextEdge || !inR[k.To] {
			continue // replaced later in the commit, or its target cannot reach back
		}
		if path := ShortestPath(k.To, k.From, within); path != nil {
			return &CycleError{Index: i, Edge: k, Cycle: append([]string{k.From}, path...)}
		}
	}
	return nil
}

// hasCycleWithin reports whether the dependency edges among the artifacts
// of nodes (inR marks them) form a cycle: an iterative three-colour
// depth-first search, linear in the nodes and their edges.
func (s *State) hasCycleWithin(nodes []string, inR map[string]bool) bool {
	const (
		white = iota
		grey
		black
	)
	colour := make(map[string]uint8, len(nodes))
	type frame struct {
		id    string
		edges []string
	}
	for _, root := range nodes {
		if colour[root] != white {
			continue
		}
		colour[root] = grey
		stack := []frame{{id: root, edges: s.depsWithin(root, inR)}}
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if len(f.edges) == 0 {
				colour[f.id] = black
				stack = stack[:len(stack)-1]
				continue
			}
			next := f.edges[len(f.edges)-1]
			f.edges = f.edges[:len(f.edges)-1]
			switch colour[next] {
			case grey:
				return true
			case white:
				colour[next] = grey
				stack = append(stack, frame{id: next, edges: s.depsWithin(next, inR)})
			}
		}
	}
	return false
}

// depsWithin returns the dependencies of id that inR marks (any order).
func (s *State) depsWithin(id string, inR map[string]bool) []string {
	var out []string
	for k := range s.outOf(id).all() {
		if inR[k.To] && s.rels.Depends(k.Rel) {
			out = append(out, k.To)
		}
	}
	return out
}

// ShortestPath returns the ids of a shortest path from src to dst (both
// included) following next, breadth first and in the order next lists
// neighbours (so the result is deterministic when next is), or nil when
// dst is not reachable. It visits only what src reaches.
func ShortestPath(src, dst string, next func(id string) []string) []string {
	if src == dst {
		return []string{src}
	}
	parent := map[string]string{src: ""}
	queue := []string{src}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, n := range next(cur) {
			if _, seen := parent[n]; seen {
				continue
			}
			parent[n] = cur
			if n == dst {
				var path []string
				for x := dst; x != ""; x = parent[x] {
					path = append(path, x)
				}
				slices.Reverse(path)
				return path
			}
			queue = append(queue, n)
		}
	}
	return nil
}

// insertArtifact adds a, whose id must be absent.
func (s *State) insertArtifact(a *Artifact) {
	s.artifacts[a.ID] = a
	s.typeCount[a.Type] = s.countOf(a.Type) + 1
	s.accum().Add(a.Leaf())
	s.nArt++
	s.gen++
}

func (s *State) removeArtifact(id string) {
	a := s.art(id)
	if a == nil {
		return
	}
	s.accum().Remove(a.Leaf())
	n := s.countOf(a.Type) - 1
	if s.whole() {
		delete(s.artifacts, id)
		if n <= 0 {
			delete(s.typeCount, a.Type)
		} else {
			s.typeCount[a.Type] = n
		}
	} else {
		s.artifacts[id] = nil
		s.typeCount[a.Type] = max(n, 0)
	}
	s.nArt--
	s.gen++
}

// insertEdge adds e, whose key must be absent.
func (s *State) insertEdge(e *Edge) {
	k := e.Key()
	s.edges[k] = e
	s.setFor(s.out, k.From, func() *edgeSet { return s.belowOut(k.From) }).put(e)
	s.setFor(s.in, k.To, func() *edgeSet { return s.belowIn(k.To) }).put(e)
	s.accum().Add(e.Leaf())
	s.nEdge++
	s.gen++
}

func (s *State) removeEdge(k EdgeKey) {
	e := s.edge(k)
	if e == nil {
		return
	}
	s.accum().Remove(e.Leaf())
	if s.whole() {
		delete(s.edges, k)
	} else {
		s.edges[k] = nil
	}
	out := s.setFor(s.out, k.From, func() *edgeSet { return s.belowOut(k.From) })
	out.del(k)
	if s.whole() && out.len() == 0 {
		delete(s.out, k.From)
	}
	in := s.setFor(s.in, k.To, func() *edgeSet { return s.belowIn(k.To) })
	in.del(k)
	if s.whole() && in.len() == 0 {
		delete(s.in, k.To)
	}
	s.nEdge--
	s.gen++
}

// Relations maps a relation name to whether it is a dependency relation
// (one that carries trust and must stay acyclic).
type Relations map[string]bool

// DefaultRelations returns the built-in relations of DESIGN.md.
func DefaultRelations() Relations {
	return Relations{
		"derived_from": true, "supported_by": true, "calculated_from": true,
		"extracted_from": true, "quotes": true, "uses": true,
		"mentions": false, "cites": false, "contradicts": false, "supersedes": false, "responds_to": false,
	}
}

// Depends reports whether rel is a dependency relation.
func (r Relations) Depends(rel string) bool { return r[rel] }

// Known reports whether rel is registered.
func (r Relations) Known(rel string) bool { _, ok := r[rel]; return ok }

// Names returns the registered relation names, sorted.
func (r Relations) Names() []string {
	out := make([]string, 0, len(r))
	for k := range r {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Tombstone is a deleted artifact's id and last version.
type Tombstone struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
}
