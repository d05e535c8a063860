package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// TestSourceReadAhead folds a chain whose payloads the Source reads ahead
// in key order (many per commit; dense among the stored objects for the
// final state, sparse for each commit's puts), and checks that a damaged
// or missing payload is still reported for the artifact that has it.
func TestSourceReadAhead(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "other", ModeObserve); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "other", bulkOps("o:", 6000)...)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var head *replay.Commit
	for c := 0; c < 3; c++ {
		var ops []graph.Op
		for i := 0; i < 300; i++ {
			ops = append(ops, notePut(fmt.Sprintf("a%03d", i), c*1000+i, "payload"))
		}
		head = mustCommit(t, s, "c", ops...)
	}
	for _, objects := range []replay.ObjectCheck{replay.ObjectsFinal, replay.ObjectsAll} {
		res, err := replay.Fold(ctx, s.Source("c"), head.ID, replay.Options{Objects: objects})
		if err != nil || res.State.Hash() != head.ContextHash {
			t.Fatalf("fold (objects %d): %v", objects, err)
		}
		if want := map[replay.ObjectCheck]int{replay.ObjectsFinal: 300, replay.ObjectsAll: 900}[objects]; res.Objects != want {
			t.Fatalf("fold (objects %d) checked %d payloads, want %d", objects, res.Objects, want)
		}
	}

	damaged := hashing.ContentHash(notePut("a017", 2017, "payload").Data)
	missing := hashing.ContentHash(notePut("a250", 2250, "payload").Data)
	err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyObj(damaged), Value: []byte(`{"n":0}`)}}, Deletes: [][]byte{keyObj(missing)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, want string }{{"a017", "does not match"}, {"a250", "cannot be read"}} {
		_, err := replay.Fold(ctx, s.Source("c"), head.ID, replay.Options{Objects: replay.ObjectsFinal})
		var ce *replay.ChainError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"`+tc.id+`"`) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("fold over a damaged store: %v, want a chain error about %s", err, tc.id)
		}
		// Repair the first so that the second is the first problem.
		if tc.id == "a017" {
			if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyObj(damaged), Value: notePut("a017", 2017, "payload").Data}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
