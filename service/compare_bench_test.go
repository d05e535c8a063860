package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// BenchmarkCompareRuns compares two runs: two branches of a context of
// 100,000 artifacts that each changed ten artifacts and added ten since
// they forked, and two contexts of 20,000 artifacts written with the same
// ops (the same ids) but for ten artifacts. The store is reopened first,
// so the states are read as a restarted server reads them.
func BenchmarkCompareRuns(b *testing.B) {
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	note := func(id string, v int, by string) graph.Op {
		data, _ := hashing.CanonicalizeObject([]byte(fmt.Sprintf(`{"v":%d}`, v)))
		return graph.Op{Op: graph.OpPut, ID: id, Type: "note", ProducedBy: by, Data: data}
	}
	tree := func(st *store.Store, ctxID string, n int, by func(i int) string) {
		if _, err := st.CreateContext(ctx, ctxID, store.ModeObserve); err != nil {
			b.Fatal(err)
		}
		for lo := 0; lo < n; lo += 5000 {
			var ops []graph.Op
			for i := lo; i < lo+5000; i++ {
				ops = append(ops, note(fmt.Sprintf("t-%06d", i), i, by(i)))
				if i > 0 {
					ops = append(ops, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("t-%06d", i), Rel: "derived_from", To: fmt.Sprintf("t-%06d", i/2)})
				}
			}
			if _, err := st.Commit(ctx, store.CommitRequest{Context: ctxID, Author: "bench", Message: "m", Ops: ops}); err != nil {
				b.Fatal(err)
			}
		}
	}
	open := func(dir string) *store.Store {
		st, err := store.Open(ctx, store.Options{Dir: dir, Clock: clock, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	run := func(b *testing.B, dir string, ctxA, refA, ctxB, refB string, want int) {
		st := open(dir)
		defer st.Close()
		b.ResetTimer()
		for b.Loop() {
			cmp, err := CompareRuns(ctx, st, ctxA, refA, ctxB, refB)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for _, d := range cmp.Divergences {
				got += len(d.OnlyInA) + len(d.OnlyInB) + len(d.Changed)
			}
			if got != want {
				b.Fatalf("%d artifacts differ, want %d", got, want)
			}
		}
	}
	b.Run("branches=100000", func(b *testing.B) {
		dir := b.TempDir()
		st := open(dir)
		tree(st, "c", 100_000, func(int) string { return "agent" })
		head, err := st.Resolve(ctx, "c", "")
		if err != nil {
			b.Fatal(err)
		}
		if err := st.CreateBranch(ctx, "c", "alt", head.ID); err != nil {
			b.Fatal(err)
		}
		for _, br := range []string{"main", "alt"} {
			var ops []graph.Op
			for j := range 10 {
				ops = append(ops, note(fmt.Sprintf("t-%06d", (j*7919+len(br)*101)%100_000), -1, br), note(fmt.Sprintf("%s-%d", br, j), j, br))
			}
			if _, err := st.Commit(ctx, store.CommitRequest{Context: "c", Branch: br, Author: "bench", Message: "m", Ops: ops}); err != nil {
				b.Fatal(err)
			}
		}
		st.Close()
		run(b, dir, "c", "main", "c", "alt", 40)
	})
	b.Run("contexts=20000", func(b *testing.B) {
		dir := b.TempDir()
		st := open(dir)
		tree(st, "x", 20_000, func(int) string { return "agent" })
		tree(st, "y", 20_000, func(i int) string {
			if i%2000 == 7 {
				return "other"
			}
			return "agent"
		})
		st.Close()
		run(b, dir, "x", "", "y", "", 10)
	})
}
