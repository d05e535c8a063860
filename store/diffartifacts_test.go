package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestDiffArtifactsReadsNoEdges: between two commits that differ by one
// artifact and 20,000 edges, DiffArtifactsWithin reads a few nodes of
// the artifacts' part of the maps, where a diff of the whole maps reads
// the edges' hundreds of leaves; and it finds the one artifact.
func TestDiffArtifactsReadsNoEdges(t *testing.T) {
	ctx := context.Background()
	d := &nodeCalls{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	var ops []graph.Op
	for i := range 20_000 {
		ops = append(ops, notePut(fmt.Sprintf("n%05d", i), i, "x"))
	}
	from := mustCommit(t, s, "c", ops...)
	ops = ops[:0]
	for i := range 20_000 {
		ops = append(ops, link(fmt.Sprintf("n%05d", i), "mentions", fmt.Sprintf("n%05d", (i+1)%20_000)))
	}
	ops = append(ops, notePut("n00007", 7, "changed"))
	to := mustCommit(t, s, "c", ops...)

	s.nodes.clear()
	before := d.keys.Load()
	got, ok, err := s.DiffArtifactsWithin(ctx, from, to, 10)
	if err != nil || !ok {
		t.Fatalf("DiffArtifactsWithin: %v, %v", ok, err)
	}
	artifactReads := d.keys.Load() - before
	if len(got.Changed) != 1 || got.Changed[0].ID != "n00007" || len(got.Added)+len(got.Removed) != 0 {
		t.Fatalf("the diff of the artifacts: %+v, want n00007 changed", got)
	}

	s.nodes.clear()
	before = d.keys.Load()
	whole, err := s.DiffStates(ctx, from, to)
	if err != nil {
		t.Fatal(err)
	}
	wholeReads := d.keys.Load() - before
	if len(whole.EdgesAdded) != 20_000 {
		t.Fatalf("the whole diff has %d edges added, want 20,000", len(whole.EdgesAdded))
	}
	if artifactReads > 50 || wholeReads < 10*artifactReads {
		t.Errorf("the artifacts' diff read %d nodes, the whole diff %d: want a few against hundreds", artifactReads, wholeReads)
	}
	t.Logf("nodes read: %d for the artifacts, %d for the whole maps", artifactReads, wholeReads)
}
