package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// stallLimit is how long a commit may take while a read is held before
// the snapshot tests call it stalled (the committer used to defer a
// commit behind a read for two seconds).
const stallLimit = time.Second

// TestLongReadDoesNotStallOtherContexts: while a read holds a snapshot of
// one context's branch head, commits to that context and to others go
// through, and the read still sees the state it started on.
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
			hash, n := v.State.Hash(), v.State.NumArtifacts()
			close(inRead)
			<-release
			// Commits landed meanwhile; the snapshot is as it was.
			if v.State.Hash() != hash || v.State.NumArtifacts() != n || v.State.Artifact("a1") != nil || hash != v.Commit.ContextHash {
				return fmt.Errorf("the read's snapshot changed under it: %d artifacts, a1 %v", v.State.NumArtifacts(), v.State.Artifact("a1") != nil)
			}
			return v.Trust.Verify(v.State)
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
		case <-time.After(stallLimit):
			t.Fatalf("a commit to another context waited for the read (commit %d)", i)
		}
	}
	// The commits to the read context land too, without waiting for it.
	for range 2 {
		select {
		case err := <-slowDone:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(stallLimit):
			t.Fatal("a commit to the read context waited for the read")
		}
	}
	close(release)
	if err := <-readDone; err != nil {
		t.Fatal(err)
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

// TestSnapshotsUnderCommits: readers hold snapshots of a branch head,
// some for a long time, while commits (links, re-puts, deletes) land on
// it. Every snapshot must stay the state of its commit for as long as it
// is read (its context hash, counts and trust), the head layers its state
// only while pinned, and once the readers are gone and the next commit
// lands, the head is one whole state again, equal to the stored one.
func TestSnapshotsUnderCommits(t *testing.T) {
	ctx := context.Background()
	s, commit := snapshotStore(t)
	errs := make(chan error, 64)
	var readers []chan struct{}
	read := func(hold, pinned chan struct{}) {
		errs <- s.Read(ctx, "c", "", func(v *View) error {
			hash, n, m := v.State.Hash(), v.State.NumArtifacts(), v.State.NumEdges()
			if hold != nil {
				close(pinned)
				<-hold
			}
			if got := v.State.Hash(); got != hash || got != v.Commit.ContextHash {
				return fmt.Errorf("snapshot of %s: hash %s, its commit's %s", v.Commit.ID.Short(), got, v.Commit.ContextHash)
			}
			if v.State.NumArtifacts() != n || v.State.NumEdges() != m || len(v.State.Artifacts()) != n || len(v.State.Edges()) != m {
				return fmt.Errorf("snapshot of %s changed its counts", v.Commit.ID.Short())
			}
			return v.Trust.Verify(v.State)
		})
	}
	layered := 0 // the most layers the head had after a commit
	for i := range 40 {
		if i%5 == 0 {
			// A held reader pins the head before the next commit lands.
			hold, pinned := make(chan struct{}), make(chan struct{})
			readers = append(readers, hold)
			go read(hold, pinned)
			<-pinned
		}
		go read(nil, nil)
		id := fmt.Sprintf("a%d", i)
		ops := []graph.Op{hcPut(id, "claim"), {Op: graph.OpLink, From: id, Rel: "derived_from", To: "root"}}
		if i > 0 && i%3 == 0 {
			prev := fmt.Sprintf("a%d", i-1)
			ops = append(ops, graph.Op{Op: graph.OpUnlink, From: prev, Rel: "derived_from", To: "root"}, graph.Op{Op: graph.OpDelete, ID: prev})
		}
		if i%7 == 0 {
			// A failed fetch under root quarantines everything below it.
			ops = append(ops, graph.Op{Op: graph.OpPut, ID: "root", Type: "tool_error", Data: []byte(fmt.Sprintf(`{"error":"e%d"}`, i))})
		}
		commit(ops...)
		s.mu.Lock()
		h := s.heads[headKey("c", DefaultBranch)]
		s.mu.Unlock()
		h.mu.RLock()
		layered = max(layered, len(h.layers))
		h.mu.RUnlock()
		if i%11 == 10 && len(readers) > 0 {
			close(readers[0]) // some readers let go while others still hold
			readers = readers[1:]
		}
	}
	if layered == 0 {
		t.Fatal("commits landed under held snapshots but the head was never layered")
	}
	s.mu.Lock()
	h := s.heads[headKey("c", DefaultBranch)]
	s.mu.Unlock()
	for _, hold := range readers {
		close(hold)
	}
	for range 40 + 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	commit(hcPut("last", "claim"))
	s.mu.Lock()
	if s.heads[headKey("c", DefaultBranch)] != h {
		t.Fatal("head not cached")
	}
	s.mu.Unlock()
	h.mu.RLock()
	layers, fork := len(h.layers), h.state.IsFork()
	h.mu.RUnlock()
	if layers != 0 || fork {
		t.Fatalf("after the readers left and a commit landed the head has %d layers (fork %v)", layers, fork)
	}
	headIsStored(t, s)
}

// TestLayersStayBounded: readers that overlap every commit (each holds its
// snapshot across the next two commits) never let a head's layers grow
// past maxLayers, each snapshot stays its commit's state, and the head
// ends equal to the stored state.
func TestLayersStayBounded(t *testing.T) {
	s, commit := snapshotStore(t)
	maxSeen := commitsUnderReaders(t, s, 30, "root", func(*head) error { return nil })
	if maxSeen > maxLayers || maxSeen == 0 {
		t.Fatalf("the head had up to %d layers; want 1 to %d", maxSeen, maxLayers)
	}
	commit(hcPut("last", "claim"))
	headIsStored(t, s)
}

// TestLayersStayBoundedOverTheMap: the same readers overlapping every
// commit, on a head opened over its state map (a store reopened): when a
// commit would stack one layer too many, the head is opened again over
// its new commit's map rather than loaded whole, so it stays a state over
// the map after every commit, each snapshot stays its commit's state, and
// the head ends equal to the stored state.
func TestLayersStayBoundedOverTheMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	ops := []graph.Op{hcPut("root", "question")}
	for i := range 300 {
		ops = append(ops, hcPut(fmt.Sprintf("b%03d", i), "claim"), graph.Op{Op: graph.OpLink, From: fmt.Sprintf("b%03d", i), Rel: "derived_from", To: "root"})
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(ctx, Options{Dir: dir, NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	maxSeen := commitsUnderReaders(t, s, 30, "b150", func(h *head) error {
		if !h.state.IsLazy() {
			return errors.New("the head is a whole state")
		}
		return nil
	})
	if maxSeen != maxLayers {
		t.Fatalf("the head had up to %d layers; want %d", maxSeen, maxLayers)
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{hcPut("last", "claim")}}); err != nil {
		t.Fatal(err)
	}
	headIsStored(t, s)
}

// commitsUnderReaders makes n commits to main of context "c" in s, each a
// claim derived_from to, while readers overlap every commit: each holds
// its snapshot across the next two commits and checks at the end that it
// is still its commit's state (hash, to present, trust). After each
// commit it checks the head, read-locked, with check, and it returns the
// most layers the head had.
func commitsUnderReaders(t *testing.T, s *Store, n int, to string, check func(h *head) error) int {
	t.Helper()
	ctx := context.Background()
	errs := make(chan error, n)
	var holds []chan struct{}
	maxSeen := 0
	for i := range n {
		hold, in := make(chan struct{}), make(chan struct{})
		holds = append(holds, hold)
		go func() {
			errs <- s.Read(ctx, "c", "", func(v *View) error {
				hash := v.State.Hash()
				close(in)
				<-hold
				if v.State.Hash() != hash || hash != v.Commit.ContextHash || v.State.Artifact(to) == nil {
					return fmt.Errorf("snapshot of %s changed", v.Commit.ID.Short())
				}
				return v.Trust.Verify(v.State)
			})
		}()
		<-in
		id := fmt.Sprintf("a%d", i)
		if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{hcPut(id, "claim"), {Op: graph.OpLink, From: id, Rel: "derived_from", To: to}}}); err != nil {
			t.Fatal(err)
		}
		if i >= 2 {
			close(holds[i-2]) // each reader spans two commits
		}
		s.mu.Lock()
		h := s.heads[headKey("c", DefaultBranch)]
		s.mu.Unlock()
		h.mu.RLock()
		maxSeen = max(maxSeen, len(h.layers))
		err := check(h)
		h.mu.RUnlock()
		if err != nil {
			t.Fatalf("after commit %d: %v", i, err)
		}
	}
	close(holds[n-2])
	close(holds[n-1])
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return maxSeen
}

// snapshotStore opens a store with an observe context "c" holding a
// question "root", and returns it with a helper that commits ops to c.
func snapshotStore(t *testing.T) (*Store, func(ops ...graph.Op)) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	commit := func(ops ...graph.Op) {
		t.Helper()
		if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: ops}); err != nil {
			t.Fatal(err)
		}
	}
	commit(hcPut("root", "question"))
	return s, commit
}

// headIsStored checks that c's main head is the state loaded from the
// store at its commit: hash, counts, and a trust index equal to a full
// pass.
func headIsStored(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	c, err := s.Resolve(ctx, "c", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.loadState(context.Background(), s, ContextInfo{ID: "c", Quarantine: ModeObserve}, c, prefetchWorkers)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Read(ctx, "c", "", func(v *View) error {
		if v.State.Hash() != st.Hash() || v.State.NumArtifacts() != st.NumArtifacts() || v.State.NumEdges() != st.NumEdges() {
			return fmt.Errorf("the head differs from the stored state")
		}
		return v.Trust.Verify(v.State)
	}); err != nil {
		t.Fatal(err)
	}
}
