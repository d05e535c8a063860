package graph

import (
	"errors"
	"slices"
	"testing"
)

// tqQueryState:
//
//	ans -supported_by-> c1 -derived_from-> f1
//	ans -supported_by-> c2 -derived_from-> f1, c2 -quotes-> f2
//	ans -mentions-> note, note -cites-> f3, c1 -contradicts-> c2
//	c1 -responds_to-> c1 (a non-dependency self edge)
func tqQueryState(t *testing.T) *State {
	s := NewState(nil)
	tqApply(t, s,
		tqFetch("f1", "RETRIEVED", "ok"), tqFetch("f2", "RETRIEVED", "ok"), tqFetch("f3", "RETRIEVED", "ok"),
		tqPut("c1", "claim"), tqPut("c2", "claim"), tqPut("ans", "answer"), tqPut("note", "note"),
		tqLink("ans", "supported_by", "c1"), tqLink("ans", "supported_by", "c2"),
		tqLink("c1", "derived_from", "f1"), tqLink("c2", "derived_from", "f1"), tqLink("c2", "quotes", "f2"),
		tqLink("ans", "mentions", "note"), tqLink("note", "cites", "f3"), tqLink("c1", "contradicts", "c2"),
		tqLink("c1", "responds_to", "c1"))
	return s
}

func tqEdgeStrings(es []*Edge) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Key().String())
	}
	return out
}

func TestRelated(t *testing.T) {
	s := tqQueryState(t)
	tests := []struct {
		id, rel string
		dir     Direction
		want    []string
	}{
		{"c1", "", Out, []string{"c1 -contradicts-> c2", "c1 -derived_from-> f1", "c1 -responds_to-> c1"}},
		{"c1", "", In, []string{"ans -supported_by-> c1", "c1 -responds_to-> c1"}},
		{"c1", "", Both, []string{"ans -supported_by-> c1", "c1 -contradicts-> c2", "c1 -derived_from-> f1", "c1 -responds_to-> c1"}},
		{"c1", "derived_from", Both, []string{"c1 -derived_from-> f1"}},
		{"f1", "derived_from", In, []string{"c1 -derived_from-> f1", "c2 -derived_from-> f1"}},
		{"f1", "derived_from", Out, []string{}},
		{"nope", "", Both, []string{}},
	}
	for _, tc := range tests {
		if got := tqEdgeStrings(Related(s, tc.id, tc.rel, tc.dir)); !slices.Equal(got, tc.want) {
			t.Errorf("Related(%s, %q, %s) = %v, want %v", tc.id, tc.rel, tc.dir, got, tc.want)
		}
	}
}

func TestParseDirection(t *testing.T) {
	for in, want := range map[string]Direction{"out": Out, "in": In, "both": Both, "": Both} {
		if got, err := ParseDirection(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
		if want.String() != in && in != "" {
			t.Errorf("String(%d) = %q", want, want.String())
		}
	}
	if _, err := ParseDirection("up"); !errors.Is(err, ErrInvalid) {
		t.Errorf("up: %v", err)
	}
}

func TestAncestorsDescendants(t *testing.T) {
	s := tqQueryState(t)
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"ancestors of ans", Ancestors(s, "ans", 0), []string{"c1", "c2", "f1", "f2"}},
		{"ancestors of ans depth 1", Ancestors(s, "ans", 1), []string{"c1", "c2"}},
		{"ancestors of note (non-dependency only)", Ancestors(s, "note", 0), nil},
		{"descendants of f1", Descendants(s, "f1", 0), []string{"ans", "c1", "c2"}},
		{"descendants of f1 depth 1", Descendants(s, "f1", 1), []string{"c1", "c2"}},
		{"descendants of f3 (cited only)", Descendants(s, "f3", 0), nil},
		{"unknown", Ancestors(s, "nope", 0), nil},
	}
	for _, tc := range tests {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestProvenance(t *testing.T) {
	s := tqQueryState(t)
	ids := func(sg *Subgraph) []string {
		var out []string
		for _, a := range sg.Nodes {
			out = append(out, a.ID)
		}
		return out
	}
	tests := []struct {
		name      string
		sg        *Subgraph
		nodes     []string
		edges     int
		truncated bool
	}{
		{"depth 0", Provenance(s, "ans", 0), []string{"ans"}, 0, true},
		{"depth 1", Provenance(s, "ans", 1), []string{"ans", "note", "c1", "c2"}, 5, true},
		{"unlimited", Provenance(s, "ans", -1), []string{"ans", "note", "c1", "c2", "f3", "f1", "f2"}, 9, false},
		{"deep enough", Provenance(s, "ans", 2), []string{"ans", "note", "c1", "c2", "f3", "f1", "f2"}, 9, false},
		{"node limit", ProvenanceLimit(s, "ans", -1, 3), []string{"ans", "note", "c1"}, 3, true},
		{"leaf", Provenance(s, "f1", 5), []string{"f1"}, 0, false},
	}
	for _, tc := range tests {
		if got := ids(tc.sg); !slices.Equal(got, tc.nodes) || len(tc.sg.Edges) != tc.edges || tc.sg.Truncated != tc.truncated {
			t.Errorf("%s: nodes %v edges %v truncated %v; want %v, %d edges, %v", tc.name, got, tqEdgeStrings(tc.sg.Edges), tc.sg.Truncated, tc.nodes, tc.edges, tc.truncated)
		}
		for _, e := range tc.sg.Edges {
			if !slices.Contains(tc.nodes, e.From) || !slices.Contains(tc.nodes, e.To) {
				t.Errorf("%s: edge %s leaves the subgraph", tc.name, e.Key())
			}
		}
	}
	if Provenance(s, "nope", 3) != nil {
		t.Error("unknown id gave a subgraph")
	}
}

func TestContextSubgraph(t *testing.T) {
	s := tqQueryState(t)
	sg := ContextSubgraph(s, 0)
	if len(sg.Nodes) != 7 || len(sg.Edges) != s.NumEdges() || sg.Truncated {
		t.Errorf("whole: %d nodes %d edges %v", len(sg.Nodes), len(sg.Edges), sg.Truncated)
	}
	sg = ContextSubgraph(s, 3)
	if len(sg.Nodes) != 3 || sg.Nodes[0].ID != "ans" || sg.Nodes[2].ID != "c2" || !sg.Truncated || len(sg.Edges) != 4 {
		t.Errorf("limited: %d nodes %v %v", len(sg.Nodes), tqEdgeStrings(sg.Edges), sg.Truncated)
	}
}
