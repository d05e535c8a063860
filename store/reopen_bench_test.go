package store

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// BenchmarkReopenAtMillion opens a store whose one context holds
// 1,000,000 artifacts and 999,999 edges (built before the timer starts,
// its head's leaf checkpoint written when the build's store closed), and
// makes one synced one-artifact commit into it, linked to an earlier
// artifact: what the first write to a big context costs after a restart.
// Each iteration reopens the store (the Close of the one before, untimed,
// writes the checkpoint of the commit it made). It reports the median of
// the open and of the first commit, and the heap in use after that
// commit (after a collection).
func BenchmarkReopenAtMillion(b *testing.B) {
	const n = 1_000_000
	dir, _ := bigTree(b, n)
	var open, first []time.Duration
	var heap []uint64
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		t0 := time.Now()
		s := benchOpen(b, dir, false)
		t1 := time.Now()
		id := fmt.Sprintf("reopen-%d", k)
		benchCommit(b, s, "big", notePut(id, k, "after a restart"),
			graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: treeID((k * 104729) % n)})
		t2 := time.Now()
		open, first = append(open, t1.Sub(t0)), append(first, t2.Sub(t1))
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapAlloc)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(open)
	slices.Sort(first)
	slices.Sort(heap)
	b.ReportMetric(float64(open[len(open)/2].Microseconds())/1000, "open-ms")
	b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "first-commit-ms")
	b.ReportMetric(float64(heap[len(heap)/2])/(1<<20), "heap-MiB")
}
