package web

import (
	"context"
	"strings"
	"testing"
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
