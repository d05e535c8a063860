package main

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/artifactd/artifactd/store"
)

// memoryReserve is what the Go heap of a server holds besides the store's
// caches: Badger's two memtable arenas (about 1.3 times 32 MiB each), its
// block cache (32 MiB) and the buffers of the tables it is building, the
// requests in flight, and the garbage between two collections. With the
// pages of Badger's mapped files (Options.MappedBytes, 64 MiB) and the
// binary's own, a server's resident size stays within its cache budget
// plus 300 MB: a 1M-artifact ingest at the default budget measured at
// most 391–412 MB with it, 423–483 MB with 256 MiB, at the same rate
// (docs/BENCHMARKS.md, "Branches before leaves, and a smaller reserve").
const memoryReserve = 192 << 20

// limitEvery is how often the memory limit follows the caches and the
// live heap.
const limitEvery = time.Second

// memoryLimit is the runtime's soft memory limit for a store whose caches
// may hold budget bytes and hold cached bytes now, in a heap of which live
// bytes were live after the last collection: the larger of budget and
// cached plus memoryReserve, and at least one and a half times the live
// heap. The caches pass their budget only while a big head in use is kept
// beside it (a context bigger than half the heads' share: store.Store's
// head cache), and Badger's table builds can hold 200 MB for a while; the
// limit then follows, since a limit near the live heap makes the collector
// run almost without pause.
func memoryLimit(budget, cached, live int64) int64 {
	if budget <= 0 {
		budget = store.DefaultCacheBytes
	}
	return max(max(budget, cached)+memoryReserve, live/2*3)
}

// limitMemory gives the Go runtime a soft memory limit for st, whose
// cache budget is cacheBytes (zero: store.DefaultCacheBytes), and keeps it
// at memoryLimit of the budget, st.CachedBytes() and the live heap once a
// second, until stop is called; stop waits for that to end. It does
// nothing when the operator set GOMEMLIMIT. Without a limit the runtime
// lets the heap grow to twice what is live before it collects, and a
// long-running server's resident size is about twice its caches.
func limitMemory(st *store.Store, cacheBytes int64) (stop func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	debug.SetMemoryLimit(memoryLimit(cacheBytes, 0, 0))
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(limitEvery)
		defer tick.Stop()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		last := int64(-1)
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if l := memoryLimit(cacheBytes, st.CachedBytes(), metricBytes(sample[0])); l != last {
				debug.SetMemoryLimit(l)
				last = l
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// metricBytes returns a runtime/metrics sample of bytes as read, or 0 when
// the runtime does not have it.
func metricBytes(s metrics.Sample) int64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(min(s.Value.Uint64(), math.MaxInt64))
}
