package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// TestMergeWhileOursMoves merges feature branches into main while other
// writers keep committing to main: each merge is planned against the head
// it lands on, so none fails as stale, and main ends with every artifact
// of both sides.
func TestMergeWhileOursMoves(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	root := mustCommit(t, s, "c", put("seed", "note", map[string]any{"text": "seed"}))
	const features = 5
	for f := range features {
		name := fmt.Sprintf("feat-%d", f)
		if err := s.CreateBranch(ctx, "c", name, root.ID); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: name, Author: "t", Message: "m",
				Ops: []graph.Op{put(fmt.Sprintf("%s-%d", name, i), "note", map[string]any{"text": name})}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "w", Message: "m",
					Ops: []graph.Op{put(fmt.Sprintf("main-%d-%d", w, i), "note", map[string]any{"text": "main"})}}); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
			}
		}()
	}
	for f := range features {
		res, err := s.Merge(ctx, "c", DefaultBranch, fmt.Sprintf("feat-%d", f), nil, "t", "")
		if err != nil {
			t.Errorf("merge of feat-%d while main moves: %v", f, err)
			continue
		}
		if res.Kind != replay.MergeThreeWay || len(res.Commit.Parents) != 2 {
			t.Errorf("merge of feat-%d: kind %s with %d parents", f, res.Kind, len(res.Commit.Parents))
		}
	}
	close(stop)
	wg.Wait()
	head, err := s.Resolve(ctx, "c", "main")
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + features*20 + int(written.Load()); head.Artifacts != want {
		t.Fatalf("main holds %d artifacts, want %d (seed, %d feature artifacts, %d written to main)", head.Artifacts, want, features*20, written.Load())
	}
	if written.Load() == 0 {
		t.Fatal("no commit landed on main during the merges: the test did not race")
	}
}
