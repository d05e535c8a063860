package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
)

// LockingDriver is a driver with holds (kv.Locker), which a store over a
// shared driver needs.
type LockingDriver interface {
	kv.Driver
	kv.Locker
}

// Shared wraps a driver to report that other processes write through it
// (kv.Sharer), so that stores over one in-memory driver behave as
// processes on one database do. Its Close leaves the driver open for the
// other stores sharing it.
type Shared struct{ LockingDriver }

// Shared implements kv.Sharer.
func (Shared) Shared() bool { return true }

// Close implements kv.Driver; the wrapped driver stays open.
func (Shared) Close() error { return nil }

// RunShared opens `stores` stores, each over its own driver from open
// (all on one database), and has `writers` goroutines spread over them
// write `each` one-artifact commits to one branch, half of them naming
// their parent (retrying on ErrStale with the head they read again).
// Then, through a fresh store, it checks that the branch's history is one
// linear chain holding every acknowledged commit exactly once, that the
// head's state holds every artifact, and that a replay of the head
// re-derives its context hash.
func RunShared(t *testing.T, open func(t *testing.T) kv.Driver, stores, writers, each int) {
	ctx := context.Background()
	var ss []*store.Store
	for range stores {
		s, err := store.Open(ctx, store.Options{Driver: open(t), ReserveBytes: -1})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		ss = append(ss, s)
	}
	if _, err := ss[0].CreateContext(ctx, "shared", store.ModeObserve); err != nil {
		t.Fatalf("create context: %v", err)
	}
	// The others learn of it through the driver; a second creation loses.
	if _, err := ss[len(ss)-1].CreateContext(ctx, "shared", store.ModeObserve); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create of one context from another store: %v, want ErrExists", err)
	}

	var mu sync.Mutex
	acked := map[hashing.Digest]string{}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w%len(ss)]
			for i := range each {
				id := fmt.Sprintf("w%02d-%03d", w, i)
				c, err := commitOne(ctx, s, id, w%2 == 0)
				if err != nil {
					errs <- fmt.Errorf("writer %d commit %d: %w", w, i, err)
					return
				}
				mu.Lock()
				if prev, dup := acked[c.ID]; dup {
					mu.Unlock()
					errs <- fmt.Errorf("commit %s acknowledged twice (%s and %s)", c.ID.Short(), prev, id)
					return
				}
				acked[c.ID] = id
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	check, err := store.Open(ctx, store.Options{Driver: open(t), ReserveBytes: -1})
	if err != nil {
		t.Fatalf("open checking store: %v", err)
	}
	defer check.Close()
	head, err := check.Resolve(ctx, "shared", "main")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[hashing.Digest]bool{}
	for c := head; len(c.Parents) > 0; {
		if len(c.Parents) != 1 {
			t.Fatalf("commit %s has %d parents in a history of plain commits", c.ID.Short(), len(c.Parents))
		}
		if seen[c.ID] {
			t.Fatalf("commit %s twice in the history", c.ID.Short())
		}
		seen[c.ID] = true
		if _, ok := acked[c.ID]; !ok {
			t.Errorf("commit %s in the history was never acknowledged", c.ID.Short())
		}
		if c, err = check.GetCommit(ctx, "shared", c.Parents[0]); err != nil {
			t.Fatal(err)
		}
	}
	for id, what := range acked {
		if !seen[id] {
			t.Errorf("acknowledged commit %s (%s) is not in the branch's history", id.Short(), what)
		}
	}
	if want := writers * each; len(seen) != want || head.Artifacts != want {
		t.Errorf("history has %d commits and the head %d artifacts, want %d of each", len(seen), head.Artifacts, want)
	}
	res, err := replay.Fold(ctx, check.Source("shared"), head.ID, replay.Options{})
	if err != nil {
		t.Fatalf("replay of the head: %v", err)
	}
	if got := res.State.Hash(); got != head.ContextHash || res.Commits != len(seen)+1 {
		t.Fatalf("replay of %d commits gives %s; the head records %s over %d", res.Commits, got.Short(), head.ContextHash.Short(), len(seen)+1)
	}
}

// commitOne commits one artifact, naming the head as parent when
// withParent (and retrying with the new head when another writer got
// there first).
func commitOne(ctx context.Context, s *store.Store, id string, withParent bool) (*replay.Commit, error) {
	raw, _ := json.Marshal(map[string]string{"text": "from " + id})
	data, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		return nil, err
	}
	req := store.CommitRequest{Context: "shared", Author: id, Message: "m",
		Ops: []graph.Op{{Op: graph.OpPut, ID: id, Type: "note", Data: data}}}
	for attempt := 0; attempt < 1000; attempt++ {
		if withParent {
			h, err := s.Resolve(ctx, "shared", "main")
			if err != nil {
				return nil, err
			}
			req.Parent = &h.ID
		}
		res, err := s.Commit(ctx, req)
		if errors.Is(err, store.ErrStale) && withParent {
			time.Sleep(time.Duration(attempt%5) * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		if res.Noop {
			return nil, fmt.Errorf("commit of %s was a no-op", id)
		}
		return res.Commit, nil
	}
	return nil, fmt.Errorf("commit of %s: stale after 1000 attempts", id)
}

// RunBigCommit commits n artifacts (each derived from the one before, so
// the edges count too) in one commit through a store over open's driver,
// and checks through a second store that the commit is there whole: the
// head holds every artifact and edge, and a replay re-derives its hash.
// It returns how long the commit and the second store's first (cold)
// read of the head took.
func RunBigCommit(t *testing.T, open func(t *testing.T) kv.Driver, n int) BigCommitTimes {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Options{Driver: open(t), ReserveBytes: -1})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "big", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	ops := make([]graph.Op, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("a%07d", i)
		raw, _ := json.Marshal(map[string]any{"text": "artifact " + id, "i": i})
		data, err := hashing.CanonicalizeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: id, Type: "note", Data: data})
		if i > 0 {
			ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("a%07d", i-1)})
		}
	}
	start := time.Now()
	res, err := s.Commit(ctx, store.CommitRequest{Context: "big", Author: "t", Message: "bulk", Ops: ops})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("commit of %d artifacts: %v", n, err)
	}
	check, err := store.Open(ctx, store.Options{Driver: open(t), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	head, err := check.Resolve(ctx, "big", "main")
	if err != nil {
		t.Fatal(err)
	}
	if head.ID != res.Commit.ID || head.Artifacts != n || head.Edges != n-1 {
		t.Fatalf("head %s with %d artifacts and %d edges; want %s with %d and %d", head.ID.Short(), head.Artifacts, head.Edges, res.Commit.ID.Short(), n, n-1)
	}
	// The second store loads the head cold: its whole state map.
	start = time.Now()
	err = check.Read(ctx, "big", "main", func(v *store.View) error {
		if v.Commit.ID != head.ID || v.State.NumArtifacts() != n || v.State.NumEdges() != n-1 {
			return fmt.Errorf("cold view at %s with %d artifacts and %d edges", v.Commit.ID.Short(), v.State.NumArtifacts(), v.State.NumEdges())
		}
		return nil
	})
	cold := time.Since(start)
	if err != nil {
		t.Fatalf("cold read of the big head: %v", err)
	}
	fold, err := replay.Fold(ctx, check.Source("big"), head.ID, replay.Options{Objects: replay.ObjectsFinal})
	if err != nil {
		t.Fatalf("replay of the big commit: %v", err)
	}
	if got := fold.State.Hash(); got != head.ContextHash {
		t.Fatalf("replay gives %s, the head records %s", got.Short(), head.ContextHash.Short())
	}
	return BigCommitTimes{Commit: took, ColdRead: cold}
}

// BigCommitTimes are the durations RunBigCommit measured.
type BigCommitTimes struct {
	// Commit is the one commit's; ColdRead a second store's first read
	// of the head, which loads its whole state map.
	Commit, ColdRead time.Duration
}
