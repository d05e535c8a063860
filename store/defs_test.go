package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// TestDefinitionsThroughCommitMergeAndReopen: a commit records the
// definitions its request names, a merge carries a definition recorded on
// the other branch (its data read back from the object store), and a
// reopened store judges with the definitions of the chain alone.
func TestDefinitionsThroughCommitMergeAndReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mOpen(t, dir)
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "c", "main", mPut("q", "question", map[string]any{"text": "?"}))
	base := mHead(t, s, "c", "main")
	if err := s.CreateBranch(ctx, "c", "exp", base.ID); err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(ctx, store.CommitRequest{Context: "c", Branch: "exp", Author: "t", Message: "m",
		Types:     []graph.TypeDef{{Name: "ledger", Role: graph.RoleSource}},
		Relations: []graph.RelationDef{{Name: "feeds", Depends: true}},
		Ops:       []graph.Op{mPut("l", "ledger", map[string]any{"usd": 1}), mPut("a", "answer", map[string]any{}), mLink("a", "feeds", "l")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Definitions != 2 || res.Commit.NumOps != 5 || len(res.Changes) != 3 {
		t.Fatalf("definitions %d, ops %d, changes %d", res.Definitions, res.Commit.NumOps, len(res.Changes))
	}
	if _, err := s.Merge(ctx, "c", "main", "exp", nil, "", ""); err != nil {
		t.Fatal(err)
	}
	judge := func(s *store.Store) {
		t.Helper()
		if err := s.Read(ctx, "c", "main", func(v *store.View) error {
			if r, ok := v.State.RoleOf("ledger"); !ok || r != graph.RoleSource {
				t.Errorf("ledger role %q %v", r, ok)
			}
			if !v.State.Relations().Depends("feeds") {
				t.Error("feeds is not a dependency relation after the merge")
			}
			if st := v.Trust.Status("a"); st != graph.StatusConfirmed {
				t.Errorf("a = %s", st)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	judge(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	judge(mOpen(t, dir))
}

// TestThreeWayMergeCarriesDefinitions: a merge that is not a fast
// forward takes the branch's type and relation definitions with their
// data (its state read through its map holds none), and the merged
// head judges by them. It failed ("a definition must carry its data")
// until the merge read the definitions' data.
func TestThreeWayMergeCarriesDefinitions(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "d", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	base := mCommit(t, s, "d", "main", mPut("a", "claim", map[string]any{"a": 1}), mPut("b", "claim", map[string]any{"b": 1}))
	if err := s.CreateBranch(ctx, "d", "br", base.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, store.CommitRequest{Context: "d", Branch: "br", Author: "t", Message: "defs",
		Types:     []graph.TypeDef{{Name: "ledger", Role: graph.RoleSource}},
		Relations: []graph.RelationDef{{Name: "rdep", Depends: true}},
		Ops:       []graph.Op{mPut("l", "ledger", map[string]any{"usd": 1}), mLink("a", "rdep", "b"), mLink("a", "rdep", "l")}}); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "d", "main", mPut("c", "claim", map[string]any{"c": 1}))
	res, err := s.Merge(ctx, "d", "main", "br", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commit.Parents) != 2 {
		t.Fatalf("the merge has %d parents, want 2 (not a fast forward)", len(res.Commit.Parents))
	}
	if err := s.Read(ctx, "d", "main", func(v *store.View) error {
		if r, ok := v.State.RoleOf("ledger"); !ok || r != graph.RoleSource {
			return fmt.Errorf("ledger's role after the merge: %q %v", r, ok)
		}
		if !v.State.Relations().Depends("rdep") {
			return fmt.Errorf("rdep is not a dependency relation after the merge")
		}
		for _, id := range []string{"l", "c"} {
			if v.State.Artifact(id) == nil {
				return fmt.Errorf("%s is missing after the merge", id)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTaintIndexCountsRequestOps: a commit that records a definition
// before its ops reports a tainted link by the link's place among the
// request's ops, as it does every other refusal — not shifted by the
// definition puts the store added in front (the API's pointer named
// /edges/1 for the first edge, or an op the request did not have).
func TestTaintIndexCountsRequestOps(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	for _, mode := range []string{store.ModeEnforce, store.ModeObserve} {
		if _, err := s.CreateContext(ctx, mode, mode); err != nil {
			t.Fatal(err)
		}
		mCommit(t, s, mode, "main", mPut("bad", "tool_error", map[string]any{"text": "boom"}))
		res, err := s.Commit(ctx, store.CommitRequest{Context: mode, Branch: "main", Author: "t", Message: "m",
			Types:     []graph.TypeDef{{Name: "ledger", Role: graph.RoleDerived}},
			Relations: []graph.RelationDef{{Name: "feeds", Depends: true}},
			Ops:       []graph.Op{mPut("l", "ledger", map[string]any{"usd": 1}), mLink("l", "mentions", "bad"), mLink("l", "feeds", "bad")}})
		var te *graph.TaintError
		switch {
		case mode == store.ModeEnforce && !errors.As(err, &te):
			t.Fatalf("enforce: err %v, want a TaintError", err)
		case mode == store.ModeObserve && err != nil:
			t.Fatal(err)
		case mode == store.ModeObserve:
			if len(res.Tainted) != 1 || res.Definitions != 2 {
				t.Fatalf("observe: tainted %v, definitions %d", res.Tainted, res.Definitions)
			}
			te = res.Tainted[0]
		}
		if te.Index != 2 || te.Edge != (graph.EdgeKey{From: "l", Rel: "feeds", To: "bad"}) {
			t.Errorf("%s: tainted op %d (%s), want op 2 of the request (l -feeds-> bad)", mode, te.Index, te.Edge)
		}
	}
}
