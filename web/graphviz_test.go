package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// TestPictureCacheKeepsAndDrops: a drawing laid out once is answered from
// the cache the second time (the same SVG, no layout); a drawing laid out
// with another class or label is another picture; past the cache's bytes
// the least recently used picture is dropped and laid out again.
func TestPictureCacheKeepsAndDrops(t *testing.T) {
	ctx := context.Background()
	one := &drawing{dot: `digraph { a -> b }`}
	two := &drawing{dot: `digraph { c -> d -> e }`}
	big := newPictureCache(1 << 20)
	first, err := big.svg(ctx, one, "provenance", "one")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, "<svg") {
		t.Fatalf("not an SVG: %.200s", first)
	}
	if _, ok := big.lru.Get("provenance\x00one\x00" + one.key()); !ok {
		t.Fatal("a picture laid out is not kept")
	}
	again, err := big.svg(ctx, one, "provenance", "one")
	if err != nil || again != first {
		t.Fatalf("the same drawing again: %v, the same SVG %v", err, again == first)
	}
	other, err := big.svg(ctx, one, "provenance", "another label")
	if err != nil || other == first {
		t.Fatalf("another label: %v, the same SVG %v", err, other == first)
	}

	// Room for either picture, not both: the second drops the first.
	second, err := big.svg(ctx, two, "provenance", "two")
	if err != nil {
		t.Fatal(err)
	}
	costOne := len(first) + len("provenance\x00one\x00"+one.key())
	costTwo := len(second) + len("provenance\x00two\x00"+two.key())
	small := newPictureCache(max(costOne, costTwo))
	if _, err := small.svg(ctx, one, "provenance", "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := small.svg(ctx, two, "provenance", "two"); err != nil {
		t.Fatal(err)
	}
	if _, ok := small.lru.Get("provenance\x00one\x00" + one.key()); ok {
		t.Error("past the cache's bytes, the least recently used picture is still kept")
	}
	if _, ok := small.lru.Get("provenance\x00two\x00" + two.key()); !ok {
		t.Error("the picture laid out last is not kept")
	}
}

// TestDrawnEdgesBoundTheDensity: a picture draws at most maxDrawnDegree
// edges at any artifact, and maxPictureEdges in all, keeping the edges at
// the root and on the poison path first and the rest in order; a sparse
// picture is drawn whole. 60 artifacts with 1,500 edges among them took
// Graphviz minutes, holding every other picture of the process.
func TestDrawnEdgesBoundTheDensity(t *testing.T) {
	var dense []*graph.Edge
	for i := 0; i < 60 && len(dense) < 1500; i++ {
		for j := 0; j < 60 && len(dense) < 1500; j++ {
			if i != j {
				dense = append(dense, &graph.Edge{From: fmt.Sprintf("n%02d", i), Rel: "mentions", To: fmt.Sprintf("n%02d", j)})
			}
		}
	}
	onPath := map[string]bool{"n40": true, "n41": true}
	kept := drawnEdges(dense, "n59", onPath)
	degree := map[string]int{}
	at := map[*graph.Edge]bool{}
	for _, e := range kept {
		at[e] = true
		if e.From != "n59" && e.To != "n59" && !(onPath[e.From] && onPath[e.To]) {
			degree[e.From]++
			degree[e.To]++
		}
	}
	for id, d := range degree {
		if d > maxDrawnDegree {
			t.Errorf("%s: %d edges drawn beside the root's and the path's, want at most %d", id, d, maxDrawnDegree)
		}
	}
	for _, e := range dense {
		if (e.From == "n59" || e.To == "n59" || e.From == "n40" && e.To == "n41") && !at[e] {
			t.Errorf("edge %s→%s at the root or on the path left out", e.From, e.To)
		}
	}
	if len(kept) >= len(dense) || len(kept) > maxPictureEdges {
		t.Errorf("kept %d of %d edges", len(kept), len(dense))
	}
	// In order.
	for i, j := 0, 0; i < len(kept); i++ {
		for j < len(dense) && dense[j] != kept[i] {
			j++
		}
		if j == len(dense) {
			t.Fatalf("kept edges out of their order at %d", i)
		}
	}
	// A chain is drawn whole.
	var chain []*graph.Edge
	for i := range 400 {
		chain = append(chain, &graph.Edge{From: fmt.Sprintf("c%d", i+1), Rel: "derived_from", To: fmt.Sprintf("c%d", i)})
	}
	if got := drawnEdges(chain, "c0", nil); len(got) != len(chain) {
		t.Errorf("a chain of %d edges: %d drawn", len(chain), len(got))
	}
}

// TestLayoutWaitEndsWithItsRequest: while another picture holds Graphviz,
// a layout gives up when its request ends instead of waiting for it, and
// a failed layout is remembered rather than tried on every visit.
func TestLayoutWaitEndsWithItsRequest(t *testing.T) {
	gv.turn <- struct{}{} // another layout runs
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := layoutSVG(ctx, "digraph { a -> b }")
	cancel()
	if !errors.Is(err, errLayoutBusy) {
		t.Errorf("a layout whose request ended while Graphviz was busy: %v, want errLayoutBusy", err)
	}
	<-gv.turn

	c := newPictureCache(1 << 20)
	bad := &drawing{dot: "digraph { a -> "}
	if _, err := c.svg(context.Background(), bad, "provenance", "x"); err == nil || errors.Is(err, errLayoutBusy) {
		t.Fatalf("a drawing Graphviz cannot parse: %v", err)
	}
	gv.turn <- struct{}{} // a second try would now wait and fail busy
	defer func() { <-gv.turn }()
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.svg(ctx, bad, "provenance", "x"); err == nil || errors.Is(err, errLayoutBusy) {
		t.Errorf("the failed drawing again: %v, want its remembered failure", err)
	}
}
