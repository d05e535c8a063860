package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Benchmarks of diff (issue 3). The fixture is one context of 100,000
// artifacts and 137,000 edges followed by 1,000 small commits; results
// are in docs/BENCHMARKS.md ("Diff, merge, bundles (issue 3)").
//
//	go test -run '^$' -bench 'BenchmarkDiff' -benchtime 30x -benchmem -count 3 ./store/

const (
	diffVerdicts  = 2_000
	diffDocuments = 20_000
	diffArtifacts = 100_000
	diffHistory   = 1_000
)

// buildDiffFixture writes the fixture: 2,000 fetch verdicts (RETRIEVED),
// 20,000 documents each extracted_from one verdict, 78,000 claims each
// derived_from one or two documents (one commit of 100k puts and 137k
// links), then 1,000 commits that each edit two claims, add a claim with
// its edge, and — every 50th — flip a verdict between RETRIEVED and FAILED
// (which quarantines or frees the ~50 artifacts below it).
// It returns the store (closed and removed when b ends) and the heads of
// main before the history and after each commit.
func buildDiffFixture(b *testing.B) (*store.Store, []*replay.Commit) {
	ctx := context.Background()
	s := mOpen(b, b.TempDir())
	if _, err := s.CreateContext(ctx, "big", store.ModeObserve); err != nil {
		b.Fatal(err)
	}
	var commits []*replay.Commit
	{
		r := rand.New(rand.NewPCG(1, 2))
		ops := make([]graph.Op, 0, 2*diffArtifacts)
		for i := 0; i < diffVerdicts; i++ {
			ops = append(ops, mPut(fmt.Sprintf("v%05d", i), "fetch_verdict", map[string]any{"verdict": "RETRIEVED", "url": fmt.Sprintf("https://example.org/%d", i)}))
		}
		for i := 0; i < diffDocuments; i++ {
			id := fmt.Sprintf("d%05d", i)
			ops = append(ops, mPut(id, "document", map[string]any{"n": i}), mLink(id, "extracted_from", fmt.Sprintf("v%05d", i%diffVerdicts)))
		}
		for i := 0; i < diffArtifacts-diffVerdicts-diffDocuments; i++ {
			id := fmt.Sprintf("c%05d", i)
			ops = append(ops, mPut(id, "claim", map[string]any{"n": i, "text": "a claim of modest length"}),
				mLink(id, "derived_from", fmt.Sprintf("d%05d", i%diffDocuments)))
			if i%2 == 0 {
				ops = append(ops, mLink(id, "derived_from", fmt.Sprintf("d%05d", r.IntN(diffDocuments))))
			}
		}
		res, err := s.Commit(ctx, store.CommitRequest{Context: "big", Ops: ops})
		if err != nil {
			b.Fatal(err)
		}
		commits = append(commits, res.Commit)
		failed := map[int]bool{}
		for i := 0; i < diffHistory; i++ {
			ops := []graph.Op{
				mPut(fmt.Sprintf("c%05d", r.IntN(diffArtifacts-diffVerdicts-diffDocuments)), "claim", map[string]any{"edit": i, "a": 1}),
				mPut(fmt.Sprintf("c%05d", r.IntN(diffArtifacts-diffVerdicts-diffDocuments)), "claim", map[string]any{"edit": i, "b": 2}),
				mPut(fmt.Sprintf("new%04d", i), "claim", map[string]any{"new": i}),
				mLink(fmt.Sprintf("new%04d", i), "derived_from", fmt.Sprintf("d%05d", r.IntN(diffDocuments))),
			}
			if i%50 == 0 {
				v := r.IntN(diffVerdicts)
				failed[v] = !failed[v]
				verdict := "RETRIEVED"
				if failed[v] {
					verdict = "FAILED"
				}
				ops = append(ops, mPut(fmt.Sprintf("v%05d", v), "fetch_verdict", map[string]any{"verdict": verdict, "step": i}))
			}
			res, err := s.Commit(ctx, store.CommitRequest{Context: "big", Ops: ops})
			if err != nil {
				b.Fatal(err)
			}
			commits = append(commits, res.Commit)
		}
	}
	return s, commits
}

// BenchmarkDiff diffs two commits 1,000 commits apart in the 100k-artifact
// context, trust changes included:
//   - head: from the commit before the history to main's head (the head
//     state is in memory);
//   - old: between two commits that are not heads (trust through main's
//     head, with two more state-map diffs);
//   - statemap-only: DiffStates alone, without trust;
//   - statemap-within-1000: DiffStatesWithin with a limit of 1,000, which
//     the commits' counts of artifacts and edges already pass: answered
//     without a read.
//
// cpu-ms/op is the process CPU time per diff: on a busy machine ns/op
// includes time spent waiting for a CPU.
func BenchmarkDiff(b *testing.B) {
	ctx := context.Background()
	start := time.Now()
	s, commits := buildDiffFixture(b)
	b.Logf("fixture: %d commits, %d artifacts, %d edges at the head, built in %s",
		len(commits), commits[len(commits)-1].Artifacts, commits[len(commits)-1].Edges, time.Since(start).Round(time.Millisecond))
	settle(b)
	from, head := commits[0], commits[len(commits)-1]
	b.Run("head", func(b *testing.B) {
		var d *replay.DiffResult
		warm(b, func() error { _, err := s.Diff(ctx, "big", from, head); return err })
		cpu0, _ := processCPU()
		for b.Loop() {
			var err error
			if d, err = s.Diff(ctx, "big", from, head); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
		reportDiff(b, d)
	})
	b.Run("old", func(b *testing.B) {
		// 999 commits apart, neither is a head.
		old, to := commits[0], commits[len(commits)-2]
		var d *replay.DiffResult
		warm(b, func() error { _, err := s.Diff(ctx, "big", old, to); return err })
		cpu0, _ := processCPU()
		for b.Loop() {
			var err error
			if d, err = s.Diff(ctx, "big", old, to); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu0)
		reportDiff(b, d)
	})
	b.Run("statemap-only", func(b *testing.B) {
		var n int
		warm(b, func() error { _, err := s.DiffStates(ctx, from, head); return err })
		cpu0, _ := processCPU()
		for b.Loop() {
			d, err := s.DiffStates(ctx, from, head)
			if err != nil {
				b.Fatal(err)
			}
			n = len(d.Added) + len(d.Removed) + len(d.Changed) + len(d.EdgesAdded) + len(d.EdgesRemoved) + len(d.EdgesChanged)
		}
		reportCPU(b, cpu0)
		b.ReportMetric(float64(n), "changes")
	})
	b.Run("statemap-within-1000", func(b *testing.B) {
		cpu0, _ := processCPU()
		for b.Loop() {
			if _, ok, err := s.DiffStatesWithin(ctx, from, head, 1000); err != nil || ok {
				b.Fatalf("within 1,000: %v, %v; the fixture's diff is bigger", ok, err)
			}
		}
		reportCPU(b, cpu0)
	})
}

// settle waits (up to a minute) until the process is nearly idle, so that
// Badger's compaction of the bulk load does not run inside the timed loop
// and show up in cpu-ms/op.
func settle(b *testing.B) {
	runtime.GC()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		c0, ok := processCPU()
		if !ok {
			return
		}
		time.Sleep(500 * time.Millisecond)
		c1, _ := processCPU()
		if c1-c0 < 25*time.Millisecond {
			return
		}
	}
	b.Log("the process did not settle within a minute; cpu-ms/op includes background work")
}

// warm runs f once before a timed loop, so that the loop measures a diff
// whose state-map nodes are cached, as they are for repeated diffs.
func warm(b *testing.B, f func() error) {
	if err := f(); err != nil {
		b.Fatal(err)
	}
}

// reportCPU reports the process CPU time per iteration since cpu0 (Badger's
// background work and the GC included), in milliseconds.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu1, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

func reportDiff(b *testing.B, d *replay.DiffResult) {
	b.ReportMetric(float64(len(d.Added)+len(d.Removed)+len(d.Changed)), "artifacts")
	b.ReportMetric(float64(len(d.EdgesAdded)+len(d.EdgesRemoved)+len(d.EdgesChanged)), "edges")
	b.ReportMetric(float64(len(d.Trust)), "trust")
}
