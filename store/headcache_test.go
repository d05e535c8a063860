package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

func hcPut(id, typ string) graph.Op {
	data, _ := json.Marshal(map[string]string{"text": id})
	c, _ := hashing.CanonicalizeObject(data)
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, Data: c}
}

// TestHeadCacheBounded: with a small cache budget, writing to and reading
// from many contexts keeps the cached heads within the budget, and an
// evicted head comes back exactly: every later commit builds on the right
// parent and every context replays to the hash its head reports.
func TestHeadCacheBounded(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const contexts, steps = 60, 12
	for c := range contexts {
		if _, err := s.CreateContext(ctx, fmt.Sprintf("run-%d", c), ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, contexts)
	for c := range contexts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("run-%d", c)
			var parent *hashing.Digest
			for i := range steps {
				ops := []graph.Op{hcPut(fmt.Sprintf("s%d", i), "claim")}
				if i > 0 {
					ops = append(ops, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("s%d", i), Rel: "derived_from", To: fmt.Sprintf("s%d", i-1)})
				}
				res, err := s.Commit(ctx, CommitRequest{Context: id, Author: "t", Message: "m", Ops: ops, Parent: parent})
				if err != nil {
					errs <- fmt.Errorf("%s step %d: %w", id, i, err)
					return
				}
				parent = &res.Commit.ID
				// A read of another context between writes churns the cache.
				other := fmt.Sprintf("run-%d", (c*7+i)%contexts)
				if err := s.Read(ctx, other, "", func(v *View) error { return nil }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.mu.Lock()
	var total int64
	for _, h := range s.heads {
		total += h.cost.Load()
	}
	n := len(s.heads)
	s.mu.Unlock()
	if total > s.headBudget || n >= contexts {
		t.Fatalf("%d heads cached, %d bytes estimated; budget %d", n, total, s.headBudget)
	}
	// What the server's memory limit follows: the heads plus the other
	// caches, within the whole budget, and no less than the heads alone.
	if got := s.CachedBytes(); got < total || got > 1<<20 {
		t.Fatalf("CachedBytes = %d: the heads hold %d, the budget is %d", got, total, 1<<20)
	}
	for c := range contexts {
		id := fmt.Sprintf("run-%d", c)
		var head *replay.Commit
		var conf int
		if err := s.Read(ctx, id, "", func(v *View) error {
			head, conf = v.Commit, v.Trust.Summary().Confirmed
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		res, err := replay.Fold(ctx, s.Source(id), head.ID, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.State.NumArtifacts() != steps || res.State.Hash() != head.ContextHash || conf != steps || res.Commits != steps+1 {
			t.Fatalf("%s: %d artifacts, %d confirmed, %d commits", id, res.State.NumArtifacts(), conf, res.Commits)
		}
	}
}

// TestHeadOverBudgetStaysCached checks that a head bigger than the whole
// head budget (a context bigger than the cache) stays cached while it is
// the most recently used one, instead of being loaded and dropped on
// every read, and gives way once another head is used.
func TestHeadOverBudgetStaysCached(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true, CacheBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"big", "small"} {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	var ops []graph.Op
	for i := range 1000 {
		ops = append(ops, hcPut(fmt.Sprintf("s%d", i), "claim"))
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "big", Author: "t", Message: "m", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "small", Author: "t", Message: "m", Ops: ops[:1]}); err != nil {
		t.Fatal(err)
	}
	cached := func(id string) *head {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.heads[headKey(id, DefaultBranch)]
	}
	read := func(id string) {
		t.Helper()
		if err := s.Read(ctx, id, "", func(*View) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	read("big")
	h := cached("big")
	if h == nil || h.cost.Load() <= s.headBudget {
		t.Fatalf("big head cached %v (budget %d B): want it cached, over the budget", h != nil, s.headBudget)
	}
	read("big")
	if cached("big") != h {
		t.Fatal("a second read of the over-budget head loaded it again")
	}
	read("small")
	if cached("big") != nil || cached("small") == nil {
		t.Fatal("after another context's read the over-budget head should give way to it")
	}
}
