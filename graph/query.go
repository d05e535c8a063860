package graph

import (
	"fmt"
	"slices"
)

// Direction selects edges by their orientation relative to an artifact.
type Direction int

// The directions of Related.
const (
	// Out selects edges leaving the artifact (what it rests on, mentions…).
	Out Direction = iota + 1
	// In selects edges arriving at the artifact.
	In
	// Both selects both.
	Both
)

// String returns "out", "in" or "both".
func (d Direction) String() string {
	switch d {
	case Out:
		return "out"
	case In:
		return "in"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// ParseDirection parses "out", "in" or "both"; "" means Both. Anything
// else is an *OpError wrapping ErrInvalid.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "out":
		return Out, nil
	case "in":
		return In, nil
	case "both", "":
		return Both, nil
	}
	return 0, &OpError{Index: -1, Field: "dir", Rule: "enum", Detail: fmt.Sprintf("dir %q: want out, in or both", s)}
}

// Related returns the edges of id with relation rel ("" for any) in the
// given direction, sorted by (from, rel, to) without duplicates (a
// self-edge is listed once). It returns nil for an unknown id.
func Related(s *State, id, rel string, dir Direction) []*Edge {
	var out []*Edge
	add := func(es *edgeSet) {
		for k, e := range es.all() {
			if rel == "" || k.Rel == rel {
				out = append(out, e)
			}
		}
	}
	if dir == Out || dir == Both {
		add(s.outOf(id))
	}
	if dir == In || dir == Both {
		add(s.inOf(id))
	}
	SortEdges(out)
	return slices.CompactFunc(out, func(a, b *Edge) bool { return a.Key() == b.Key() })
}

// Ancestors returns what id rests on: the artifacts reachable from id over
// dependency edges, at most maxDepth edges away (no limit when maxDepth <=
// 0), sorted, without id itself. It returns nil for an unknown id.
func Ancestors(s *State, id string, maxDepth int) []string {
	return walkDeps(s, id, maxDepth, s.outOf, func(k EdgeKey) string { return k.To })
}

// Descendants returns what rests on id: the artifacts from which id is
// reachable over dependency edges, at most maxDepth edges away (no limit
// when maxDepth <= 0), sorted, without id itself. It returns nil for an
// unknown id.
func Descendants(s *State, id string, maxDepth int) []string {
	return walkDeps(s, id, maxDepth, s.inOf, func(k EdgeKey) string { return k.From })
}

func walkDeps(s *State, id string, maxDepth int, adj func(string) *edgeSet, end func(EdgeKey) string) []string {
	if s.art(id) == nil {
		return nil
	}
	seen := map[string]bool{id: true}
	var out []string
	level := []string{id}
	for depth := 0; len(level) > 0 && (maxDepth <= 0 || depth < maxDepth); depth++ {
		var next []string
		for _, cur := range level {
			for k := range adj(cur).all() {
				if !s.rels.Depends(k.Rel) {
					continue
				}
				if n := end(k); !seen[n] {
					seen[n] = true
					next = append(next, n)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	slices.Sort(out)
	return out
}

// Subgraph is a part of a state for display: its artifacts, every edge
// between two of them (sorted), and whether something was left out.
type Subgraph struct {
	Nodes     []*Artifact `json:"nodes"`
	Edges     []*Edge     `json:"edges"`
	Truncated bool        `json:"truncated"`
	// rels classifies edges for rendering (DefaultRelations when nil).
	rels Relations
}

// depends reports whether rel is a dependency relation of the state the
// subgraph was taken from.
func (sg *Subgraph) depends(rel string) bool {
	if sg.rels == nil {
		return DefaultRelations().Depends(rel)
	}
	return sg.rels.Depends(rel)
}

// DefaultMaxNodes is the node limit of Provenance.
const DefaultMaxNodes = 500

// MaxProvenanceDepth and MaxProvenanceNodes bound what a client may ask of
// one provenance walk (its depth and node limit), at every door, so a walk
// costs the same whichever door asks.
const (
	MaxProvenanceDepth = 1000
	MaxProvenanceNodes = 10000
)

// Provenance returns the provenance subgraph of id: the artifacts reached
// from id by following edges of every relation outward (from an artifact
// to what it rests on, mentions, cites…), so it holds id's dependency
// ancestors, at most depth edges away (no limit when depth < 0), and at
// most DefaultMaxNodes artifacts. See ProvenanceLimit.
func Provenance(s *State, id string, depth int) *Subgraph {
	return ProvenanceLimit(s, id, depth, DefaultMaxNodes)
}

// ProvenanceLimit is Provenance with a node limit (none when maxNodes <=
// 0). Nodes are in breadth-first order, id first, each level in edge
// order; Truncated is set when the depth or node limit left out an
// artifact that an included one points to. It returns nil for an unknown
// id.
func ProvenanceLimit(s *State, id string, depth, maxNodes int) *Subgraph {
	root := s.art(id)
	if root == nil {
		return nil
	}
	sg := &Subgraph{Nodes: []*Artifact{root}, rels: s.rels}
	seen := map[string]bool{id: true}
	level := []string{id}
	for d := 0; len(level) > 0; d++ {
		var next []string
		for _, cur := range level {
			for _, e := range s.Out(cur) {
				if seen[e.To] {
					continue
				}
				if (depth >= 0 && d >= depth) || (maxNodes > 0 && len(sg.Nodes) >= maxNodes) {
					sg.Truncated = true
					continue
				}
				seen[e.To] = true
				sg.Nodes = append(sg.Nodes, s.art(e.To))
				next = append(next, e.To)
			}
		}
		level = next
	}
	sg.Edges = inducedEdges(s, seen)
	return sg
}

// ContextSubgraph returns the whole state as a subgraph for display, with
// at most maxNodes artifacts (none when maxNodes <= 0): the first ones by
// id, with Truncated set when some were left out.
func ContextSubgraph(s *State, maxNodes int) *Subgraph {
	ids := s.ArtifactIDs()
	sg := &Subgraph{rels: s.rels}
	if maxNodes > 0 && len(ids) > maxNodes {
		ids, sg.Truncated = ids[:maxNodes], true
	}
	in := make(map[string]bool, len(ids))
	sg.Nodes = make([]*Artifact, len(ids))
	for i, id := range ids {
		in[id] = true
		sg.Nodes[i] = s.art(id)
	}
	sg.Edges = inducedEdges(s, in)
	return sg
}

// inducedEdges returns the edges between members of in, sorted.
func inducedEdges(s *State, in map[string]bool) []*Edge {
	edges := []*Edge{}
	for id := range in {
		for k, e := range s.outOf(id).all() {
			if in[k.To] {
				edges = append(edges, e)
			}
		}
	}
	SortEdges(edges)
	return edges
}
