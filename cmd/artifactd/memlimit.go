package main

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/artifactd/artifactd/store"
)

// memoryReserve is what the Go heap of a server holds besides the store's
// caches: Badger's two memtable arenas (about 1.3 times 32 MiB each), its
// block cache (32 MiB) and the buffers of the tables it is building, the
// requests in flight, and the garbage between two collections.
const memoryReserve = 256 << 20

// limitEvery is how often limitMemory follows the caches.
const limitEvery = time.Second

// memoryLimit is the runtime's soft memory limit for a store whose caches
// may hold budget bytes and hold cached bytes now: the larger of the two
// plus memoryReserve. The caches pass their budget only while one head
// bigger than it is cached alone; the limit then follows, since a limit
// below the live heap makes the collector run without end.
func memoryLimit(budget, cached int64) int64 {
	if budget <= 0 {
		budget = store.DefaultCacheBytes
	}
	return max(budget, cached) + memoryReserve
}

// applyMemoryLimit gives the Go runtime a soft memory limit for a store
// with the cache budget cacheBytes (zero: store.DefaultCacheBytes),
// unless the operator set GOMEMLIMIT. Without one the runtime lets the
// heap grow to twice what is live before it collects, and a long-running
// server's resident size is about twice its caches; with one, the heap
// stays within the caches plus memoryReserve.
func applyMemoryLimit(cacheBytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(memoryLimit(cacheBytes, 0))
}

// followCaches keeps the soft memory limit at memoryLimit(cacheBytes,
// st.CachedBytes()) until ctx ends, when applyMemoryLimit set one.
func followCaches(ctx context.Context, st *store.Store, cacheBytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	tick := time.NewTicker(limitEvery)
	defer tick.Stop()
	last := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if l := memoryLimit(cacheBytes, st.CachedBytes()); l != last {
			debug.SetMemoryLimit(l)
			last = l
		}
	}
}
