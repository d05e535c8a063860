package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

func TestScratchLarge(t *testing.T) {
	dbgTiming = true
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	s.CreateContext(ctx, "big", ModeObserve)
	const n = 100_000
	ops := make([]graph.Op, 0, n)
	for i := 0; i < n; i++ {
		ops = append(ops, put(fmt.Sprintf("doc:%06d", i), "note", map[string]any{"i": i, "text": "some text of a note"}))
	}
	t0 := time.Now()
	mustCommit(t, s, "big", ops...)
	t.Logf("commit 100k: %v", time.Since(t0))
	for _, k := range []int{1, 10, 100} {
		t0 = time.Now()
		for i := 0; i < k; i++ {
			mustCommit(t, s, "big", put(fmt.Sprintf("doc:%06d", i), "note", map[string]any{"i": i, "v": k}))
		}
		t.Logf("%d single commits: %v each", k, time.Since(t0)/time.Duration(k))
	}
	t0 = time.Now()
	if err := s.db.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("sync %v", time.Since(t0))
}
