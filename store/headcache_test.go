package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestHeadOverBudgetStaysCached checks that a big head — one bigger than
// half the head budget, or than all of it (a context bigger than the
// cache) — stays cached while it is in use, instead of being loaded and
// dropped on every read or whenever another context is used between two
// of its own uses; that it does not take the budget from the other heads
// meanwhile; that it gives way once it has been idle for bigHeadKeep; and
// that of two such heads only the one used last is kept so.
func TestHeadOverBudgetStaysCached(t *testing.T) {
	ctx := context.Background()
	logs := &lockedBuffer{}
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true, CacheBytes: 160 << 10, // three small heads fit in the head budget, a big one does not
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var now atomic.Int64 // the cache's clock, in Unix nanoseconds
	now.Store(time.Unix(1_000_000, 0).UnixNano())
	s.cacheClock = func() time.Time { return time.Unix(0, now.Load()) }
	later := func(d time.Duration) { now.Add(int64(d)) }
	for _, id := range []string{"mid", "big", "big2", "small", "small2", "small3"} {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	var ops []graph.Op
	for i := range 4000 {
		ops = append(ops, hcPut(fmt.Sprintf("s%d", i), "claim"))
	}
	for _, id := range []string{"big", "big2"} {
		if _, err := s.Commit(ctx, CommitRequest{Context: id, Author: "t", Message: "m", Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "mid", Author: "t", Message: "m", Ops: ops[:1600]}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"small", "small2", "small3"} {
		if _, err := s.Commit(ctx, CommitRequest{Context: id, Author: "t", Message: "m", Ops: ops[:1]}); err != nil {
			t.Fatal(err)
		}
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
	// A head between half the budget and all of it, with a small one
	// beside it passing the budget: the small ones give way, not it. (The
	// heads the commits left are whole; opened afresh, a head reads
	// through its map.)
	forgetHeads(s)
	read("mid")
	m := cached("mid")
	if m == nil || m.cost.Load() <= s.headBudget/2 || m.cost.Load() > s.headBudget {
		t.Fatalf("mid head cached %v, cost %d B (budget %d B): want it cached, between half the budget and all of it", m != nil, m.cost.Load(), s.headBudget)
	}
	for _, id := range []string{"small", "small2", "mid", "small3", "mid"} {
		later(time.Second)
		read(id)
		if cached("mid") != m {
			t.Fatalf("the mid head was dropped or loaded again after %s was read", id)
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
	// Small contexts used between two uses of the big one: all stay, as
	// they fit in the budget beside it.
	for _, id := range []string{"small", "small2", "small3"} {
		later(time.Second)
		read(id)
	}
	if cached("big") != h {
		t.Fatal("the over-budget head was dropped when other contexts were used a few seconds after it")
	}
	for _, id := range []string{"small", "small2", "small3"} {
		if cached(id) == nil {
			t.Fatalf("%s was dropped: the over-budget head took the budget from the others", id)
		}
	}
	read("big")
	if cached("big") != h {
		t.Fatal("the over-budget head was loaded again")
	}
	// The other big head, used last, is the one kept: the first gives way.
	later(time.Second)
	read("big2")
	if cached("big2") == nil || cached("big") != nil {
		t.Fatalf("after big2 was used: big2 cached %v, big cached %v; want only big2", cached("big2") != nil, cached("big") != nil)
	}
	// A big head dropped in use is warned of, once a minute at most.
	const warning = "head cache too small for the big contexts in use"
	if n := strings.Count(logs.String(), warning); n != 1 || !strings.Contains(logs.String(), "context=big ") {
		t.Fatalf("%d warnings that a big head in use was dropped, want 1 naming big:\n%s", n, logs)
	}
	later(time.Second)
	read("big")
	later(time.Second)
	read("big2")
	if n := strings.Count(logs.String(), warning); n != 1 {
		t.Fatalf("%d warnings within a minute, want 1", n)
	}
	// Idle for longer than bigHeadKeep, it gives way to the next head opened.
	later(bigHeadKeep + time.Second)
	if _, err := s.Commit(ctx, CommitRequest{Context: "small", Author: "t", Message: "m", Ops: ops[1:2]}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	delete(s.heads, headKey("small2", DefaultBranch))
	s.mu.Unlock()
	read("small2")
	if cached("big2") != nil || cached("small2") == nil {
		t.Fatalf("after %v idle: big2 cached %v, small2 cached %v; want big2 dropped", bigHeadKeep, cached("big2") != nil, cached("small2") != nil)
	}
}
