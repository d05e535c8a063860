package store

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// BenchmarkDiffTwoRuns compares, with Store.DiffStates, two contexts of
// 100,000 artifacts and edges each whose ids share nothing (every entry
// differs: the API's comparison of two unrelated runs), and one of them
// with a run of 1,000, the node cache emptied before each. peak-MB is the
// most the live heap grew above its level before the diff (sampled every
// millisecond, after a collection), the result included. apart-within-1000
// is the first with DiffStatesWithin and a limit of 1,000: the walk stops
// once it has met more.
func BenchmarkDiffTwoRuns(b *testing.B) {
	ctx := context.Background()
	s := benchOpen(b, b.TempDir(), true)
	defer s.Close()
	run := func(ctxID, prefix string, n int) *replay.Commit {
		if _, err := s.CreateContext(ctx, ctxID, ModeObserve); err != nil {
			b.Fatal(err)
		}
		var last *replay.Commit
		for from := 0; from < n; from += 10_000 {
			var ops []graph.Op
			for i := from; i < min(n, from+10_000); i++ {
				id := fmt.Sprintf("%s%d", prefix, i)
				ops = append(ops, notePut(id, i, "run"))
				if i > 0 {
					ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("%s%d", prefix, (i*7919)%i)})
				}
			}
			res, err := s.Commit(ctx, CommitRequest{Context: ctxID, Author: "b", Message: "part", Ops: ops})
			if err != nil {
				b.Fatal(err)
			}
			last = res.Commit
		}
		return last
	}
	x, y, small := run("x", "a", 100_000), run("y", "s", 100_000), run("z", "q", 1_000)
	for _, bc := range []struct {
		name     string
		from, to *replay.Commit
		within   int
	}{{"apart", x, y, 0}, {"big-small", x, small, 0}, {"apart-within-1000", x, y, 1000}} {
		b.Run(bc.name, func(b *testing.B) {
			var peak int64
			var n int
			for b.Loop() {
				b.StopTimer()
				s.nodes.clear()
				runtime.GC()
				stop := sampleHeap(&peak)
				b.StartTimer()
				var d *replay.DiffResult
				var err error
				if bc.within > 0 {
					var ok bool
					_, ok, err = s.DiffStatesWithin(ctx, bc.from, bc.to, bc.within)
					if ok {
						b.Fatalf("within %d: the diff fitted", bc.within)
					}
					d = &replay.DiffResult{} // refused: no diff
				} else {
					d, err = s.DiffStates(ctx, bc.from, bc.to)
				}
				b.StopTimer()
				stop()
				if err != nil {
					b.Fatal(err)
				}
				n = d.Len()
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
			b.ReportMetric(float64(n), "changes")
		})
	}
}

// sampleHeap samples the live heap's objects every millisecond until stop
// is called, and raises *peak to the most it grew above its first sample.
func sampleHeap(peak *int64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if grew := read() - base; grew > *peak {
				*peak = grew
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
