package main

import (
	"testing"

	"github.com/artifactd/artifactd/store"
)

func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		budget, cached, want int64
	}{
		{0, 0, store.DefaultCacheBytes + memoryReserve},
		{-1, 0, store.DefaultCacheBytes + memoryReserve},
		{64 << 20, 10 << 20, 64<<20 + memoryReserve},
		{64 << 20, 64 << 20, 64<<20 + memoryReserve},
		// One head bigger than the budget is cached alone: the limit
		// follows it rather than make the collector run without end.
		{64 << 20, 700 << 20, 700<<20 + memoryReserve},
	} {
		if got := memoryLimit(c.budget, c.cached); got != c.want {
			t.Errorf("memoryLimit(%d, %d) = %d, want %d", c.budget, c.cached, got, c.want)
		}
	}
}
