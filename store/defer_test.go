package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// TestLongReadDoesNotStallOtherContexts: while a read holds one context's
// branch head, commits to that context wait, but commits to other contexts
// go through; the waiting commit lands, in order, once the read ends.
func TestLongReadDoesNotStallOtherContexts(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"slow", "fast"} {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: id, Ops: []graph.Op{hcPut("a0", "claim")}}); err != nil {
			t.Fatal(err)
		}
	}
	inRead, release := make(chan struct{}), make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		readDone <- s.Read(ctx, "slow", "", func(v *View) error {
			close(inRead)
			<-release
			return nil
		})
	}()
	<-inRead
	slowDone := make(chan error, 2)
	for i := 1; i <= 2; i++ {
		go func() {
			_, err := s.Commit(ctx, CommitRequest{Context: "slow", Ops: []graph.Op{hcPut(fmt.Sprintf("a%d", i), "claim")}})
			slowDone <- err
		}()
		time.Sleep(5 * time.Millisecond)
	}
	// The other context commits while the read is held.
	for i := 1; i <= 20; i++ {
		done := make(chan error, 1)
		go func() {
			_, err := s.Commit(ctx, CommitRequest{Context: "fast", Ops: []graph.Op{hcPut(fmt.Sprintf("a%d", i), "claim")}})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(maxDefer / 2):
			t.Fatalf("a commit to another context waited for the read (commit %d)", i)
		}
	}
	select {
	case err := <-slowDone:
		t.Fatalf("a commit to the read context landed while the read held its head: %v", err)
	default:
	}
	close(release)
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-slowDone; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Read(ctx, "slow", "", func(v *View) error {
		if v.State.NumArtifacts() != 3 {
			return fmt.Errorf("slow has %d artifacts", v.State.NumArtifacts())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
