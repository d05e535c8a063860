package store

import (
	"context"
	"errors"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// sharedMem is one in-memory driver that two stores share, reporting
// itself shared as a database server's driver does.
type sharedMem struct{ *memkv.Driver }

func (sharedMem) Shared() bool { return true }
func (sharedMem) Close() error { return nil }

// TestCatchUpFollowsAnotherProcess caches a head in one store, lets a
// second store on the same shared driver commit to the branch (including
// an unconfirmed fetch that a later claim derives from, and a delete),
// and checks that the first store's head catches up by applying those
// commits — same context hash and the same trust of every artifact as a
// head loaded afresh — and that the first store's next commit builds on
// the other store's head.
func TestCatchUpFollowsAnotherProcess(t *testing.T) {
	ctx := context.Background()
	d := sharedMem{memkv.New()}
	a, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, a, "c", put("src", "source", map[string]any{"url": "https://example.org"}), put("n1", "note", map[string]any{"text": "one"}))
	hb, err := b.head("c", DefaultBranch) // b caches the head
	if err != nil {
		t.Fatal(err)
	}
	// The other process commits three times.
	mustCommit(t, a, "c", put("v", "fetch_verdict", map[string]any{"url": "https://example.org", "verdict": "FAILED", "reason": "http_status:503"}), link("v", "derived_from", "src"))
	mustCommit(t, a, "c", put("claim", "claim", map[string]any{"text": "x"}), link("claim", "derived_from", "v"), put("n1", "note", map[string]any{"text": "one, again"}))
	last := mustCommit(t, a, "c", graph.Op{Op: graph.OpDelete, ID: "n1"})

	hb.mu.Lock()
	ok := b.catchUp(ctx, hb, last.ID)
	got, gotHash := hb.commit.ID, hb.state.Hash()
	trust := map[string]graph.Status{}
	for _, id := range []string{"src", "v", "claim"} {
		trust[id] = hb.trust.Status(id)
	}
	hb.mu.Unlock()
	if !ok || got != last.ID || gotHash != last.ContextHash {
		t.Fatalf("catch up: ok=%v at %s hashing to %s; want %s hashing to %s", ok, got.Short(), gotHash.Short(), last.ID.Short(), last.ContextHash.Short())
	}
	fresh, err := a.head("c", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	for id, st := range trust {
		if want := fresh.trust.Status(id); st != want {
			t.Errorf("trust of %s after catching up: %v, loaded afresh: %v", id, st, want)
		}
	}
	if trust["v"] != graph.StatusPoisonRoot || trust["claim"] != graph.StatusQuarantined {
		t.Errorf("after catching up the FAILED fetch is %q and the claim on it %q; want poison_root and quarantined", trust["v"], trust["claim"])
	}

	// b's next commit, deciding on its cached head, builds on a's.
	res, err := b.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: []graph.Op{put("n2", "note", map[string]any{"text": "two"})}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commit.Parents) != 1 || res.Commit.Parents[0] != last.ID {
		t.Fatalf("b's commit has parents %v, want the other store's head %s", res.Commit.Parents, last.ID.Short())
	}
	// A head that is not behind along first parents is not caught up.
	hb.mu.Lock()
	defer hb.mu.Unlock()
	var unrelated hashing.Digest
	unrelated[0] = 1
	if b.catchUp(ctx, hb, unrelated) {
		t.Fatal("caught up to a commit that does not exist")
	}
}

// TestCatchUpUnderASnapshot: a cached head whose state a reader holds
// still catches up with another process's commits — on forks, so the
// reader's snapshot stays its commit's state — and collapses back into
// one state once the reader is gone.
func TestCatchUpUnderASnapshot(t *testing.T) {
	ctx := context.Background()
	d := sharedMem{memkv.New()}
	a, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	first := mustCommit(t, a, "c", put("src", "source", map[string]any{"url": "https://example.org"}))
	hb, err := b.head("c", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	in, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- b.Read(ctx, "c", "", func(v *View) error {
			close(in)
			<-release
			if v.Commit.ID != first.ID || v.State.Hash() != first.ContextHash || v.State.Artifact("claim") != nil {
				return errors.New("the snapshot moved with the catch-up")
			}
			return v.Trust.Verify(v.State)
		})
	}()
	<-in
	mustCommit(t, a, "c", put("v", "fetch_verdict", map[string]any{"url": "https://example.org", "verdict": "FAILED", "reason": "http_status:503"}), link("v", "derived_from", "src"))
	last := mustCommit(t, a, "c", put("claim", "claim", map[string]any{"text": "x"}), link("claim", "derived_from", "v"))
	hb.mu.Lock()
	ok := b.catchUp(ctx, hb, last.ID)
	layers, hash, status := len(hb.layers), hb.state.Hash(), hb.trust.Status("claim")
	hb.mu.Unlock()
	if !ok || layers != 1 || hash != last.ContextHash || status != graph.StatusQuarantined {
		t.Fatalf("catch up under a snapshot: ok=%v, %d layers, hash %s (want %s), claim %q", ok, layers, hash.Short(), last.ContextHash.Short(), status)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := b.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{put("n2", "note", map[string]any{"text": "two"})}})
	if err != nil {
		t.Fatal(err)
	}
	hb.mu.RLock()
	layers, fork := len(hb.layers), hb.state.IsFork()
	hb.mu.RUnlock()
	if res.Commit.Parents[0] != last.ID || layers != 0 || fork {
		t.Fatalf("next commit's parent %s (want %s); the head has %d layers, fork %v", res.Commit.Parents[0].Short(), last.ID.Short(), layers, fork)
	}
}
