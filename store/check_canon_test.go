package store

import (
	"context"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// TestCheckReportsNonCanonicalObjects: fsck reports a stored payload that
// matches its content hash but is not in canonical form (HASHING.md §2
// hashes the canonical JSON), as well as one that does not canonicalize
// at all; a canonical payload is no defect.
func TestCheckReportsNonCanonicalObjects(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	bad := map[string]string{`{"b": 1, "a": 2.50}`: "canonical form", `{"a":1,"a":2}`: "not canonical JSON"}
	var recs []kv.Record
	for raw := range bad {
		recs = append(recs, kv.Record{Key: keyObj(hashing.ContentHash([]byte(raw))), Value: []byte(raw)})
	}
	good := []byte(`{"a":2.5,"b":1}`)
	recs = append(recs, kv.Record{Key: keyObj(hashing.ContentHash(good)), Value: good})
	if err := s.kv.Commit(ctx, kv.Batch{Sets: recs}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Defects) != len(bad) {
		t.Fatalf("defects %v, want one for each of %d payloads", rep.Defects, len(bad))
	}
	for raw, why := range bad {
		id := hashing.ContentHash([]byte(raw)).String()
		found := false
		for _, d := range rep.Defects {
			found = found || (strings.Contains(d.ID+d.Detail, id) || strings.Contains(d.ID+d.Detail, id[len("sha256:"):])) && strings.Contains(d.Detail, why)
		}
		if !found {
			t.Errorf("no defect naming %s (%s): %v", raw, why, rep.Defects)
		}
	}
}

// TestCheckReportsAMissingMergeParent: a merge whose second parent is gone
// from the store (its record, its seq entry, its ops) is a defect fsck
// reports, naming the merge: replaying the merge would fail on it.
func TestCheckReportsAMissingMergeParent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	commit := func(branch, id string) *replay.Commit {
		t.Helper()
		r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: branch, Author: "a", Message: "m",
			Ops: []graph.Op{{Op: graph.OpPut, ID: id, Type: "note", Data: []byte(`{"id":"` + id + `"}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Commit
	}
	first := commit("main", "q")
	if err := s.CreateBranch(ctx, "c", "exp", first.ID); err != nil {
		t.Fatal(err)
	}
	gone := commit("exp", "n")
	commit("main", "q2")
	mr, err := s.Merge(ctx, "c", "main", "exp", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(mr.Commit.Parents) != 2 || mr.Commit.Parents[1] != gone.ID {
		t.Fatalf("merge parents %v", mr.Commit.Parents)
	}
	mustCheck(t, s)
	if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{keyCommit("c", gone.ID), keySeq("c", gone.Seq), keyOps("c", gone.ID, 0), keyRef("c", "exp")}}); err != nil {
		t.Fatal(err)
	}
	forgetHeads(s)
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range rep.Defects {
		found = found || (d.ID == mr.Commit.ID.String() && strings.Contains(d.Detail, gone.ID.Short()))
	}
	if !found {
		t.Fatalf("defects %v: none names the merge %s and its missing parent %s", rep.Defects, mr.Commit.ID.Short(), gone.ID.Short())
	}
}
