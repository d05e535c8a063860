package main

import (
	"os"
	"runtime/debug"

	"github.com/artifactd/artifactd/store"
)

// applyMemoryLimit gives the Go runtime a soft memory limit derived from
// the store's cache budget — the budget plus memLimitHeadroom, room for
// Badger's two memtables and block cache, requests in flight and garbage
// — unless the operator set GOMEMLIMIT. Without it the runtime
// keeps heap it no longer needs, and a long-running server's resident
// size climbs although its live data stays within the budget.
func applyMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(store.DefaultCacheBytes + memLimitHeadroom)
}

// memLimitHeadroom is what the memory limit allows above the cache budget.
// Measured (docs/BENCHMARKS.md): with 160 MiB the anonymous memory of
// 1,000 agent runs stays flat at about 340 MB for 10 % more CPU than
// with three times the budget (630 → 740 MB, still growing).
const memLimitHeadroom = 160 << 20

// Three times the budget, not less: with the budget plus 160 MiB the
// anonymous memory of 1,000 agent runs stayed flat at about 340 MB, but a
// 100k-deep chain, whose one head is bigger than the head budget, spent
// twice the CPU in the collector (26.7 against 12.9 CPU-s;
// docs/BENCHMARKS.md).

