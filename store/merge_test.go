package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Helpers of the merge, diff and bundle tests (package store_test, so
// they use the exported API only). Names carry an "m" prefix to stay clear
// of other test files.

func mClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(1234567 * time.Nanosecond)
		return t
	}
}

func mOpen(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Options{Dir: dir, Clock: mClock(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mPut(id, typ string, data any) graph.Op {
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

func mLink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

func mUnlink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpUnlink, From: from, Rel: rel, To: to}
}

func mDel(id string) graph.Op { return graph.Op{Op: graph.OpDelete, ID: id} }

func mCommit(t testing.TB, s *store.Store, ctxID, branch string, ops ...graph.Op) *replay.Commit {
	t.Helper()
	res, err := s.Commit(context.Background(), store.CommitRequest{Context: ctxID, Branch: branch, Author: "t", Message: "m", Ops: ops})
	if err != nil {
		t.Fatalf("commit on %s: %v", branch, err)
	}
	return res.Commit
}

func mHead(t testing.TB, s *store.Store, ctxID, ref string) *replay.Commit {
	t.Helper()
	c, err := s.Resolve(context.Background(), ctxID, ref)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mFsck(t testing.TB, s *store.Store) {
	t.Helper()
	rep, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Defects) > 0 {
		t.Fatalf("fsck: %v", rep.Defects)
	}
}

// mMergeFixture creates context c with a small graph on main and a
// branch exp at the same commit.
func mMergeFixture(t *testing.T, s *store.Store) {
	ctx := context.Background()
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	base := mCommit(t, s, "c", "main",
		mPut("q", "question", map[string]any{"text": "why?"}),
		mPut("f", "fetch_verdict", map[string]any{"verdict": "RETRIEVED"}),
		mPut("cl", "claim", map[string]any{"text": "base"}),
		mPut("n", "note", map[string]any{"n": 0}),
		mPut("x", "note", map[string]any{"x": 0}),
		mPut("p1", "note", map[string]any{}),
		mPut("p2", "note", map[string]any{"p": 2}),
		mLink("cl", "derived_from", "f"),
		mLink("x", "mentions", "q"))
	if err := s.CreateBranch(ctx, "c", "exp", base.ID); err != nil {
		t.Fatal(err)
	}
}

func TestStoreMergeConflictsChangeNothing(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	mMergeFixture(t, s)
	mCommit(t, s, "c", "main",
		mPut("cl", "claim", map[string]any{"text": "ours"}), // edit/edit
		mDel("n"),                   // delete/edit
		mLink("q", "mentions", "x"), // edge to an artifact theirs deletes
		mLink("p1", "uses", "p2"),   // half of a cycle
		mPut("o", "note", map[string]any{"clean": 1}))
	mCommit(t, s, "c", "exp",
		mPut("cl", "claim", map[string]any{"text": "theirs"}),
		mPut("n", "note", map[string]any{"n": 1}),
		mUnlink("x", "mentions", "q"), mDel("x"),
		mLink("p2", "derived_from", "p1"),
		mPut("t", "note", map[string]any{"clean": 2}))
	before := mHead(t, s, "c", "main")
	branchesBefore, _ := s.Branches(ctx, "c")

	_, err := s.Merge(ctx, "c", "main", "exp", nil, "", "")
	var ce *replay.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, replay.ErrConflict) {
		t.Fatalf("merge: %v", err)
	}
	var got []string
	for _, c := range ce.Conflicts {
		got = append(got, fmt.Sprintf("%s=%s", c.Key, c.Kind))
	}
	want := "[cl=edit_edit cycle:p2 -derived_from-> p1=cycle n=delete_edit x=dangling_edge]"
	if fmt.Sprint(got) != want {
		t.Fatalf("conflicts %v, want %s", got, want)
	}
	// Nothing applied: heads, branches and the head state are unchanged.
	if after := mHead(t, s, "c", "main"); after.ID != before.ID {
		t.Fatal("main moved")
	}
	branchesAfter, _ := s.Branches(ctx, "c")
	if fmt.Sprint(branchesAfter) != fmt.Sprint(branchesBefore) {
		t.Fatal("branches changed")
	}
	err = s.Read(ctx, "c", "main", func(v *store.View) error {
		if v.State.Hash() != before.ContextHash || v.State.Artifact("t") != nil {
			t.Error("the head state changed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A partial resolution reports the rest, still writing nothing.
	_, err = s.Merge(ctx, "c", "main", "exp", map[string]replay.Resolution{"cl": {Take: replay.TakeTheirs}}, "", "")
	if !errors.As(err, &ce) || len(ce.Conflicts) != 3 || mHead(t, s, "c", "main").ID != before.ID {
		t.Fatalf("partial: %v", err)
	}
	mFsck(t, s)

	// Everything resolved: one merge commit with two parents.
	res, err := s.Merge(ctx, "c", "main", "exp", map[string]replay.Resolution{
		"cl":                          {Value: json.RawMessage(`{"text":"both"}`)},
		"n":                           {Take: replay.TakeTheirs},
		"x":                           {Take: replay.TakeTheirs},
		"cycle:p2 -derived_from-> p1": {Take: replay.TakeTheirs},
	}, "merger", "")
	if err != nil {
		t.Fatal(err)
	}
	exp := mHead(t, s, "c", "exp")
	if res.Kind != replay.MergeThreeWay || len(res.Commit.Parents) != 2 || res.Commit.Parents[0] != before.ID || res.Commit.Parents[1] != exp.ID {
		t.Fatalf("merge commit: %+v", res)
	}
	if res.Commit.Message != "merge exp into main" || res.Commit.Author != "merger" {
		t.Fatalf("message %q author %q", res.Commit.Message, res.Commit.Author)
	}
	a, _, err := s.ArtifactAt(ctx, "c", res.Commit, "cl")
	if err != nil || a.Version != 3 || string(a.Data) != `{"text":"both"}` {
		t.Fatalf("resolved value: %+v %v", a, err)
	}
	a, _, err = s.ArtifactAt(ctx, "c", res.Commit, "n")
	if err != nil || a.Version != 2 || string(a.Data) != `{"n":1}` {
		t.Fatalf("theirs' edit: %+v %v", a, err)
	}
	if _, _, err := s.ArtifactAt(ctx, "c", res.Commit, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("x should be deleted (theirs): %v", err)
	}
	if _, err := replay.Fold(ctx, s.Source("c"), res.Commit.ID, replay.Options{Objects: replay.ObjectsAll}); err != nil {
		t.Fatal(err)
	}
	// Merging again changes nothing.
	again, err := s.Merge(ctx, "c", "main", "exp", nil, "", "")
	if err != nil || again.Kind != replay.MergeUpToDate || again.Commit.ID != res.Commit.ID {
		t.Fatalf("second merge: %+v %v", again, err)
	}
	// exp has nothing main lacks: merging main into exp fast-forwards it.
	ff, err := s.Merge(ctx, "c", "exp", "main", nil, "", "")
	if err != nil || ff.Kind != replay.MergeFastForward || mHead(t, s, "c", "exp").ID != res.Commit.ID {
		t.Fatalf("fast-forward: %+v %v", ff, err)
	}
	mFsck(t, s)
}

func TestStoreMergeNoChangesIsNoop(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	mMergeFixture(t, s)
	head := mCommit(t, s, "c", "main", mPut("o", "note", map[string]any{}))
	var seqBefore uint64 = head.Seq
	for _, pair := range [][2]string{{"main", "exp"}, {"main", "main"}} {
		res, err := s.Merge(ctx, "c", pair[0], pair[1], nil, "", "")
		if err != nil || res.Kind != replay.MergeUpToDate || res.Commit.ID != head.ID {
			t.Fatalf("merge %v: %+v %v", pair, res, err)
		}
	}
	if mHead(t, s, "c", "main").Seq != seqBefore {
		t.Fatal("a no-op merge wrote a commit")
	}
	if _, err := s.Merge(ctx, "c", "nope", "exp", nil, "", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown branch: %v", err)
	}
}

// TestStoreMergeDeterministic merges the same random branches in two
// stores (and twice, reset in between, in one): same ops, same hash.
func TestStoreMergeDeterministic(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 5; seed++ {
		var hashes []hashing.Digest
		var opsJSON []string
		for run := 0; run < 2; run++ {
			s := mOpen(t, t.TempDir())
			mMergeFixture(t, s)
			r := rand.New(rand.NewPCG(seed, 3))
			for i := 0; i < 6; i++ {
				for _, br := range []string{"main", "exp"} {
					id := fmt.Sprintf("%s%d", br, r.IntN(4))
					mCommit(t, s, "c", br, mPut(id, "note", map[string]any{"v": r.IntN(1000)}), mPut("shared", "note", map[string]any{"by": br, "i": i}))
				}
			}
			res, err := s.Merge(ctx, "c", "main", "exp", map[string]replay.Resolution{"shared": {Take: replay.TakeTheirs}}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res.Ops)
			hashes = append(hashes, res.Commit.ContextHash)
			opsJSON = append(opsJSON, string(b))
		}
		if hashes[0] != hashes[1] || opsJSON[0] != opsJSON[1] {
			t.Fatalf("seed %d: merges differ:\n%s\n%s", seed, opsJSON[0], opsJSON[1])
		}
	}
}
