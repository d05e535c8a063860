package graph

import (
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// TestLeavesOfParallel: a state big enough to be hashed on several
// processors gets the leaves, in order, that hashing one at a time gives,
// and Load of it hashes to what ApplyOps of the same content does.
func TestLeavesOfParallel(t *testing.T) {
	const n = 3*parallelLeaves + 17
	var ops []Op
	arts := make([]*Artifact, 0, n)
	edges := make([]*Edge, 0, n-1)
	for i := range n {
		id := fmt.Sprintf("a%05d", i)
		data := []byte(fmt.Sprintf(`{"n":%d}`, i))
		ch := hashing.ContentHash(data)
		arts = append(arts, &Artifact{ID: id, Type: "claim", Version: 1, ContentHash: ch})
		ops = append(ops, Op{Op: OpPut, ID: id, Type: "claim", Data: data})
		if i > 0 {
			prev := fmt.Sprintf("a%05d", i-1)
			edges = append(edges, &Edge{From: id, Rel: "derived_from", To: prev})
			ops = append(ops, Op{Op: OpLink, From: id, Rel: "derived_from", To: prev})
		}
	}
	// Worker counts that do not divide the entries evenly, whatever the
	// machine's processors.
	for _, workers := range []int{1, 2, 3, 7} {
		got := leavesOn(arts, edges, workers)
		if len(got) != len(arts)+len(edges) {
			t.Fatalf("%d workers: %d leaves for %d entries", workers, len(got), len(arts)+len(edges))
		}
		for i, a := range arts {
			if got[i] != a.Leaf() {
				t.Fatalf("%d workers: leaf %d (artifact %s) differs", workers, i, a.ID)
			}
		}
		for i, e := range edges {
			if got[len(arts)+i] != e.Leaf() {
				t.Fatalf("%d workers: leaf %d (edge %s) differs", workers, len(arts)+i, e.Key())
			}
		}
	}
	loaded, err := Load(nil, arts, nil, edges)
	if err != nil {
		t.Fatal(err)
	}
	applied := NewState(nil)
	if _, err := applied.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	if loaded.Hash() != applied.Hash() {
		t.Fatalf("Load hashes to %s, ApplyOps of the same content to %s", loaded.Hash(), applied.Hash())
	}
}

// BenchmarkLoad100k loads a state of 100,000 artifacts and as many edges
// from its parts, as a cold head load does (compare -cpu 1 with -cpu 2 to
// see the leaves hashed on two processors).
func BenchmarkLoad100k(b *testing.B) {
	const n = 100_000
	arts := make([]*Artifact, 0, n)
	edges := make([]*Edge, 0, n)
	for i := range n {
		id := fmt.Sprintf("a%06d", i)
		arts = append(arts, &Artifact{ID: id, Type: "claim", Version: 1, ContentHash: hashing.ContentHash([]byte(id))})
		if i > 0 {
			edges = append(edges, &Edge{From: id, Rel: "derived_from", To: fmt.Sprintf("a%06d", i/2)})
		}
	}
	for b.Loop() {
		if _, err := Load(nil, arts, nil, edges); err != nil {
			b.Fatal(err)
		}
	}
}
