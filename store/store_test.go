package store

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
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// testClock returns increasing, deterministic commit times.
func testClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Dir: dir, Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(id, typ string, data any) graph.Op {
	raw, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	canon, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		panic(err)
	}
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, ProducedBy: "test", Data: canon}
}

func link(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

func mustCommit(t testing.TB, s *Store, ctxID string, ops ...graph.Op) *replay.Commit {
	t.Helper()
	res, err := s.Commit(context.Background(), CommitRequest{Context: ctxID, Author: "t", Message: "m", Ops: ops})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return res.Commit
}

// forgetHeads drops every head s caches, once its background writes
// (checkpoints) are done, as a restart without them would: the next use
// of a branch opens its head afresh, over its map.
func forgetHeads(s *Store) {
	s.background.Wait()
	s.mu.Lock()
	clear(s.heads)
	s.mu.Unlock()
}

func mustCheck(t testing.TB, s *Store) {
	t.Helper()
	rep, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Defects) > 0 {
		t.Fatalf("fsck found defects: %v", rep.Defects)
	}
}

func TestCommitReadReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "run-1", ModeObserve); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "run-1", ModeObserve); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	c1 := mustCommit(t, s, "run-1", put("q", "question", map[string]any{"text": "Q2 spend?"}))
	c2 := mustCommit(t, s, "run-1", put("e", "evidence", map[string]any{"n": 1}), link("e", "derived_from", "q"))
	c3 := mustCommit(t, s, "run-1", put("e", "evidence", map[string]any{"n": 2}))
	if c3.Parents[0] != c2.ID || c2.Parents[0] != c1.ID {
		t.Fatal("parents do not chain")
	}
	// Identical content is a no-op: no new commit.
	res, err := s.Commit(ctx, CommitRequest{Context: "run-1", Ops: []graph.Op{put("e", "evidence", map[string]any{"n": 2})}})
	if err != nil || !res.Noop || res.Commit.ID != c3.ID {
		t.Fatalf("identical put: noop=%v commit=%v err=%v", res.Noop, res.Commit, err)
	}
	a, wrote, err := s.ArtifactAt(ctx, "run-1", c3, "e")
	if err != nil || a.Version != 2 || string(a.Data) != `{"n":2}` || wrote != c3.ID {
		t.Fatalf("ArtifactAt head = %+v %s %v", a, wrote.Short(), err)
	}
	a, _, err = s.ArtifactAt(ctx, "run-1", c2, "e")
	if err != nil || a.Version != 1 || string(a.Data) != `{"n":1}` {
		t.Fatalf("ArtifactAt old = %+v %v", a, err)
	}
	if _, _, err := s.ArtifactAt(ctx, "run-1", c1, "e"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("artifact before it existed: %v", err)
	}
	hist, err := s.History(ctx, "run-1", c3, "e")
	if err != nil || len(hist) != 2 || hist[0].Version != 2 || hist[1].Commit != c2.ID {
		t.Fatalf("history = %+v %v", hist, err)
	}
	headHash := c3.ContextHash
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir)
	defer s.Close()
	got, err := s.Resolve(ctx, "run-1", "main")
	if err != nil || got.ID != c3.ID {
		t.Fatalf("resolve main after reopen: %v %v", got, err)
	}
	for _, ref := range []string{c2.ID.String(), c2.ID.Hex(), c2.ID.Hex()[:8]} {
		got, err := s.Resolve(ctx, "run-1", ref)
		if err != nil || got.ID != c2.ID {
			t.Fatalf("resolve %q: %v %v", ref, got, err)
		}
	}
	if _, err := s.Resolve(ctx, "run-1", "0000000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown prefix: %v", err)
	}
	if _, err := s.Resolve(ctx, "run-1", "abc"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("short prefix: %v", err)
	}
	res2, err := replay.Fold(ctx, s.Source("run-1"), c3.ID, replay.Options{Objects: replay.ObjectsAll})
	if err != nil {
		t.Fatal(err)
	}
	if res2.State.Hash() != headHash || res2.Commits != 4 {
		t.Fatalf("fold: hash %s commits %d, want %s 4", res2.State.Hash(), res2.Commits, headHash)
	}
	err = s.Read(ctx, "run-1", "", func(v *View) error {
		if v.State.Hash() != headHash || v.Commit.ID != c3.ID {
			return fmt.Errorf("head view hash %s", v.State.Hash())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s)
}

func TestRefusedCommitChangesNothing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeEnforce); err != nil {
		t.Fatal(err)
	}
	head := mustCommit(t, s, "c", put("a", "note", map[string]any{}), put("b", "note", map[string]any{}), link("a", "uses", "b"))
	cases := []struct {
		name string
		ops  []graph.Op
		want error
	}{
		{"dangling edge", []graph.Op{link("a", "cites", "nope")}, graph.ErrDangling},
		{"cycle", []graph.Op{link("b", "derived_from", "a")}, graph.ErrCycle},
		{"delete with edges", []graph.Op{{Op: graph.OpDelete, ID: "b"}}, graph.ErrDangling},
		{"unknown relation", []graph.Op{link("a", "likes", "b")}, graph.ErrInvalid},
		{"unlink missing", []graph.Op{{Op: graph.OpUnlink, From: "b", Rel: "uses", To: "a"}}, graph.ErrNotFound},
		{"partial then bad", []graph.Op{put("c", "note", map[string]any{"x": 1}), link("c", "uses", "zzz")}, graph.ErrDangling},
	}
	for _, tc := range cases {
		_, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: tc.ops})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		got, _ := s.Resolve(ctx, "c", "main")
		if got.ID != head.ID {
			t.Fatalf("%s: head moved", tc.name)
		}
		_ = s.Read(ctx, "c", "", func(v *View) error {
			if v.State.Hash() != head.ContextHash {
				t.Fatalf("%s: in-memory state changed", tc.name)
			}
			return nil
		})
	}
	stale := hashing.Sum([]byte("x"))
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Parent: &stale, Ops: []graph.Op{put("z", "note", map[string]any{})}}); !errors.Is(err, ErrStale) {
		t.Fatalf("stale parent: %v", err)
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "nope", Ops: []graph.Op{put("z", "note", map[string]any{})}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown context: %v", err)
	}
	mustCheck(t, s)
}

func TestConcurrentCommitsAllApplied(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{put(fmt.Sprintf("w%d-%d", w, i), "note", map[string]any{"i": i})}})
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head, _ := s.Resolve(ctx, "c", "main")
	if head.Artifacts != workers*each || head.Seq != workers*each+1 {
		t.Fatalf("head has %d artifacts, seq %d", head.Artifacts, head.Seq)
	}
	log, err := s.Log(ctx, "c", head, 0)
	if err != nil || len(log) != workers*each+1 {
		t.Fatalf("log has %d commits: %v", len(log), err)
	}
	mustCheck(t, s)
}

func TestBranchesAndReset(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 1}))
	if err := s.CreateBranch(ctx, "c", "exp", c1.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBranch(ctx, "c", "exp", c1.ID); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate branch: %v", err)
	}
	mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 2}))
	r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "exp", Ops: []graph.Op{put("b", "note", map[string]any{})}})
	if err != nil || r.Commit.Parents[0] != c1.ID || r.Commit.Artifacts != 2 {
		t.Fatalf("commit on branch: %+v %v", r.Commit, err)
	}
	if err := s.ResetBranch(ctx, "c", "main", c1.ID); err != nil {
		t.Fatal(err)
	}
	a, _, err := s.ArtifactAt(ctx, "c", mustResolve(t, s, "c", "main"), "a")
	if err != nil || a.Version != 1 {
		t.Fatalf("after reset: %+v %v", a, err)
	}
	// The next commit after the reset builds on c1 and continues versions.
	c4 := mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 3}))
	a, _, _ = s.ArtifactAt(ctx, "c", c4, "a")
	if a.Version != 2 || c4.Parents[0] != c1.ID {
		t.Fatalf("commit after reset: version %d parent %s", a.Version, c4.Parents[0].Short())
	}
	bs, _ := s.Branches(ctx, "c")
	if len(bs) != 2 || bs[0].Name != "exp" || bs[1].Name != "main" {
		t.Fatalf("branches = %+v", bs)
	}
	mustCheck(t, s)
}

func mustResolve(t testing.TB, s *Store, ctxID, ref string) *replay.Commit {
	t.Helper()
	c, err := s.Resolve(context.Background(), ctxID, ref)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDeleteAndRecreateContinuesVersions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 1}))
	mustCommit(t, s, "c", graph.Op{Op: graph.OpDelete, ID: "a"})
	s.Close()
	s = openTest(t, dir) // the tombstone must survive a reload of the head
	defer s.Close()
	c := mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 9}))
	a, _, err := s.ArtifactAt(ctx, "c", c, "a")
	if err != nil || a.Version != 2 {
		t.Fatalf("re-created artifact: %+v %v", a, err)
	}
	mustCheck(t, s)
}

func TestLargeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("large commit skipped in -short mode")
	}
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	ops := make([]graph.Op, 0, n)
	for i := 0; i < n; i++ {
		ops = append(ops, put(fmt.Sprintf("doc:%06d", i), "note", map[string]any{"i": i, "text": "some text of a note"}))
	}
	c := mustCommit(t, s, "big", ops...)
	if c.Artifacts != n || c.NumOps != n {
		t.Fatalf("commit has %d artifacts %d ops", c.Artifacts, c.NumOps)
	}
	got, err := s.Ops(ctx, "big", c)
	if err != nil || len(got) != n {
		t.Fatalf("ops read back: %d %v", len(got), err)
	}
	res, err := replay.Fold(ctx, s.Source("big"), c.ID, replay.Options{})
	if err != nil || res.State.Hash() != c.ContextHash {
		t.Fatalf("fold: %v", err)
	}
}

// TestGroupSeesItsOwnWrites runs requests as one commit group (calling
// the committer's processBatch directly while it is idle): a commit after
// a reset of its branch builds on the reset target, and a commit to a
// context created in the same group builds on its root commit.
func TestGroupSeesItsOwnWrites(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	a := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}))
	mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 2}))
	req := func(r *writeReq) *writeReq {
		r.ctx, r.resp = ctx, make(chan writeResp, 1)
		return r
	}
	reset := req(&writeReq{kind: reqResetBranch, ctxID: "c", branch: "main", target: a.ID})
	after := req(&writeReq{kind: reqCommit, ctxID: "c", branch: "main",
		commit: CommitRequest{Context: "c", Branch: "main", Ops: []graph.Op{put("y", "note", map[string]any{})}}})
	create := req(&writeReq{kind: reqCreateContext, ctxID: "d", mode: ModeObserve})
	first := req(&writeReq{kind: reqCommit, ctxID: "d", branch: "main",
		commit: CommitRequest{Context: "d", Branch: "main", Ops: []graph.Op{put("z", "note", map[string]any{})}}})
	s.processBatch([]*writeReq{reset, after, create, first}, nil)
	for _, r := range []*writeReq{reset, after, create, first} {
		if resp := <-r.resp; resp.err != nil {
			t.Fatalf("request %d: %v", r.kind, resp.err)
		} else {
			r.resp <- resp
		}
	}
	c := (<-after.resp).res.Commit
	if c.Parents[0] != a.ID || c.Artifacts != 2 {
		t.Fatalf("commit after reset: parent %s (want %s), %d artifacts", c.Parents[0].Short(), a.ID.Short(), c.Artifacts)
	}
	if x, _, err := s.ArtifactAt(ctx, "c", c, "x"); err != nil || x.Version != 1 {
		t.Fatalf("x at the commit after reset: %+v %v", x, err)
	}
	d := (<-first.resp).res.Commit
	root := mustResolve(t, s, "d", d.Parents[0].Hex())
	if root.Seq != 1 || d.Seq != 2 || d.Artifacts != 1 {
		t.Fatalf("first commit of a new context: seq %d on root seq %d, %d artifacts", d.Seq, root.Seq, d.Artifacts)
	}
	if got := mustResolve(t, s, "c", "main"); got.ID != c.ID {
		t.Fatalf("main is %s, want %s", got.ID.Short(), c.ID.Short())
	}
	mustCheck(t, s)
}

func TestResetBranchIfIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 1}))
	c2 := mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 2}))
	if err := s.ResetBranchIf(ctx, "c", "main", c1.ID, &c1.ID); !errors.Is(err, ErrStale) {
		t.Fatalf("reset with a stale expectation: %v, want ErrStale", err)
	}
	if got := mustResolve(t, s, "c", "main"); got.ID != c2.ID {
		t.Fatalf("a refused reset moved the branch to %s", got.ID.Short())
	}
	if err := s.ResetBranchIf(ctx, "c", "main", c1.ID, &c2.ID); err != nil {
		t.Fatal(err)
	}
	if got := mustResolve(t, s, "c", "main"); got.ID != c1.ID {
		t.Fatalf("reset did not move the branch")
	}
	mustCheck(t, s)
}

// TestWriteFailureStopsWrites makes a group fail to write (the database
// underneath is closed) and checks that the store then refuses every
// write with ErrWriteFailed instead of building on records whose outcome
// is unknown.
func TestWriteFailureStopsWrites(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "c", put("a", "note", map[string]any{"v": 1}))
	if err := s.kv.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{put("b", "note", map[string]any{})}})
	if !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("commit on a failing database: %v, want ErrWriteFailed", err)
	}
	_, err = s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{put("c", "note", map[string]any{})}})
	if !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("commit after a write failure: %v, want ErrWriteFailed", err)
	}
	if _, err := s.CreateContext(ctx, "d", ModeObserve); !errors.Is(err, ErrWriteFailed) {
		t.Fatalf("create context after a write failure: %v, want ErrWriteFailed", err)
	}
	_ = s.Close() // the database is already closed
}

// gatedDriver holds every Commit until gate is closed.
type gatedDriver struct {
	*memkv.Driver
	gate chan struct{}
}

func (d gatedDriver) Commit(ctx context.Context, b kv.Batch) error {
	<-d.gate
	return d.Driver.Commit(ctx, b)
}

// TestRefusalWaitsForGroup runs a commit and a request refused because of
// it (its parent is the head the commit replaced) as one group: the
// refusal must not be answered before the group is durable — a client
// reading after it would not find what it was refused on — and a refusal
// before the group moved anything is answered at once.
func TestRefusalWaitsForGroup(t *testing.T) {
	ctx := context.Background()
	d := gatedDriver{memkv.New(), make(chan struct{})}
	close(d.gate)
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	head := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}))
	d.gate = make(chan struct{})
	s.kv = d
	req := func(r *writeReq) *writeReq {
		r.ctx, r.resp = ctx, make(chan writeResp, 1)
		return r
	}
	commitOn := func(parent *hashing.Digest) *writeReq {
		return req(&writeReq{kind: reqCommit, ctxID: "c", branch: "main",
			commit: CommitRequest{Context: "c", Branch: "main", Parent: parent, Ops: []graph.Op{put("y", "note", map[string]any{})}}})
	}
	bogus := hashing.Sum([]byte("no such commit"))
	early := commitOn(&bogus)     // refused before the group moved anything
	first := commitOn(&head.ID)   // moves main
	refused := commitOn(&head.ID) // stale once first is decided
	done := make(chan struct{})
	go func() {
		s.processBatch([]*writeReq{early, first, refused}, nil)
		close(done)
	}()
	select {
	case r := <-early.resp:
		if !errors.Is(r.err, ErrStale) {
			t.Fatalf("early request: %v, want ErrStale", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a refusal before the group moved anything waited for the group")
	}
	select {
	case r := <-refused.resp:
		t.Fatalf("refusal answered before the group was durable: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	close(d.gate)
	<-done
	if r := <-refused.resp; !errors.Is(r.err, ErrStale) {
		t.Fatalf("refused request: %v, want ErrStale", r.err)
	}
	if r := <-first.resp; r.err != nil {
		t.Fatalf("first request: %v", r.err)
	}
}
