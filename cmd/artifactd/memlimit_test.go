package main

import (
	"testing"

	"github.com/artifactd/artifactd/store"
)

func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		budget, cached, live, want int64
	}{
		{0, 0, 0, store.DefaultCacheBytes + memoryReserve},
		{-1, 0, 0, store.DefaultCacheBytes + memoryReserve},
		{64 << 20, 10 << 20, 100 << 20, 64<<20 + memoryReserve},
		{64 << 20, 64 << 20, 150 << 20, 64<<20 + memoryReserve},
		// One head bigger than the budget is cached alone: the limit
		// follows it rather than make the collector run without end.
		{64 << 20, 700 << 20, 0, 700<<20 + memoryReserve},
		// Nor does it stay below one and a half times the live heap.
		{64 << 20, 64 << 20, 400 << 20, 600 << 20},
	} {
		if got := memoryLimit(c.budget, c.cached, c.live); got != c.want {
			t.Errorf("memoryLimit(%d, %d, %d) = %d, want %d", c.budget, c.cached, c.live, got, c.want)
		}
	}
}
