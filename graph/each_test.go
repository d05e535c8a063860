package graph

import (
	"slices"
	"testing"
)

// TestRange: RangeArtifacts and RangeEdges visit exactly what Artifacts
// and Edges list, and stop when fn returns false.
func TestRange(t *testing.T) {
	s := NewState(nil)
	ops := []Op{
		{Op: OpPut, ID: "a", Type: "note", Data: []byte(`{"text":"a"}`)},
		{Op: OpPut, ID: "b", Type: "note", Data: []byte(`{"text":"b"}`)},
		{Op: OpPut, ID: "c", Type: "note", Data: []byte(`{"text":"c"}`)},
		{Op: OpLink, From: "b", Rel: "derived_from", To: "a"},
		{Op: OpLink, From: "c", Rel: "mentions", To: "a"},
	}
	if _, err := s.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	var ids []string
	s.RangeArtifacts(func(a *Artifact) bool { ids = append(ids, a.ID); return true })
	slices.Sort(ids)
	if !slices.Equal(ids, s.ArtifactIDs()) {
		t.Errorf("RangeArtifacts visited %v", ids)
	}
	var edges []*Edge
	s.RangeEdges(func(e *Edge) bool { edges = append(edges, e); return true })
	SortEdges(edges)
	if !slices.Equal(edges, s.Edges()) {
		t.Errorf("RangeEdges visited %v", edges)
	}
	var out []*Edge
	for _, id := range s.ArtifactIDs() {
		s.RangeOut(id, func(e *Edge) bool { out = append(out, e); return true })
	}
	SortEdges(out)
	if !slices.Equal(out, s.Edges()) {
		t.Errorf("RangeOut over every artifact visited %v", out)
	}
	n := 0
	s.RangeArtifacts(func(*Artifact) bool { n++; return false })
	m := 0
	s.RangeEdges(func(*Edge) bool { m++; return false })
	if n != 1 || m != 1 {
		t.Errorf("stopping: %d artifacts, %d edges visited", n, m)
	}
}
