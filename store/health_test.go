package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// TestSpaceCheckedWhenNear: the file system is asked again before every
// write group once its last answer was within spaceMargin of the reserve,
// and at most every spaceRecheck while it was far above it; a refused
// write leaves the state as it was, and writes resume once space is back.
func TestSpaceCheckedWhenNear(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	var mu sync.Mutex
	free, asked := int64(100<<30), 0
	s.space.Lock()
	s.space.statfs = func(string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return free, nil
	}
	s.space.at = time.Time{}
	s.space.Unlock()
	setFree := func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		free = n
	}
	askedSince := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := asked
		asked = 0
		return n
	}
	s.SetReserveBytes(64 << 20)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	commit := func(id string) error {
		_, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: opsPut(id)})
		return err
	}

	// Far above the reserve: one answer serves the commits that follow it
	// within spaceRecheck.
	askedSince()
	start := time.Now()
	for i := range 5 {
		if err := commit("far" + string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := askedSince(); time.Since(start) < spaceRecheck && n > 1 {
		t.Fatalf("far above the reserve, 5 commits within %s asked the file system %d times, want at most 1", spaceRecheck, n)
	}
	// Until it is stale: then the file system is asked again and the
	// full disk is found.
	setFree(10 << 20)
	time.Sleep(spaceRecheck + 10*time.Millisecond)
	before, err := s.ref("c", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit("full"); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("commit on a full disk: %v, want ErrNoSpace", err)
	}
	if after, err := s.ref("c", DefaultBranch); err != nil || after != before {
		t.Fatal("a refused write moved the branch")
	}

	// Near the reserve, every write group asks.
	setFree(512 << 20)
	askedSince()
	for i := range 3 {
		if err := commit("near" + string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := askedSince(); n < 3 {
		t.Fatalf("near the reserve, 3 commits asked the file system %d times, want 3 or more", n)
	}
	setFree(10 << 20)
	if err := commit("full-again"); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("commit on a disk that filled since the last group: %v, want ErrNoSpace", err)
	}
	// A raised reserve counts at the next group, whatever was asked last.
	setFree(100 << 30)
	if err := commit("back"); err != nil {
		t.Fatalf("writes do not resume once space is back: %v", err)
	}
	s.SetReserveBytes(200 << 30)
	if err := commit("raised"); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("commit after the reserve was raised past the free space: %v, want ErrNoSpace", err)
	}
}

func opsPut(id string) []graph.Op { return []graph.Op{put(id, "note", map[string]any{"id": id})} }

// TestReserveRefusesEveryWrite: below the free-space reserve every write
// entry point answers ErrNoSpace and writes nothing — the registry's
// records and stamp, a context's blob memberships, and the graph alike.
func TestReserveRefusesEveryWrite(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	held, err := s.PutBlob(ctx, []byte("stored before the disk filled"))
	if err != nil {
		t.Fatal(err)
	}
	head, err := s.ref("c", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	s.SetReserveBytes(1 << 62) // no file system has this much free
	writes := []struct {
		name  string
		write func() error
	}{
		{"PutTypeIf", func() error { return s.PutTypeIf(ctx, "widget", nil, []byte(`{}`)) }},
		{"PutRelationIf", func() error { return s.PutRelationIf(ctx, "touches", nil, []byte(`{}`)) }},
		{"AddBlobMember", func() error { _, err := s.AddBlobMember(ctx, "c", held); return err }},
		{"CreateContext", func() error { _, err := s.CreateContext(ctx, "d", ModeObserve); return err }},
		{"Commit", func() error {
			_, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: opsPut("a")})
			return err
		}},
		{"CreateBranch", func() error { return s.CreateBranch(ctx, "c", "b", head) }},
		{"PutBlob", func() error { _, err := s.PutBlob(ctx, []byte("new")); return err }},
		{"WriteBlob", func() error { _, err := s.WriteBlob(ctx, strings.NewReader("new")); return err }},
		{"PutContextBlob", func() error { _, err := s.PutContextBlob(ctx, "c", []byte("new")); return err }},
	}
	for _, w := range writes {
		if err := w.write(); !errors.Is(err, ErrNoSpace) {
			t.Errorf("%s below the reserve: %v, want ErrNoSpace", w.name, err)
		}
	}
	if _, err := s.GetType(ctx, "widget"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused PutTypeIf stored the type: %v", err)
	}
	if _, err := s.GetRelation(ctx, "touches"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused PutRelationIf stored the relation: %v", err)
	}
	if stamp, err := s.RegistryStamp(ctx); err != nil || stamp != nil {
		t.Errorf("a refused registry write moved the stamp: %x (%v)", stamp, err)
	}
	if member, err := s.BlobMember(ctx, "c", held); err != nil || member {
		t.Errorf("a refused AddBlobMember recorded the membership: %v (%v)", member, err)
	}
	if after, err := s.ref("c", DefaultBranch); err != nil || after != head {
		t.Errorf("a refused write moved the branch: %v", err)
	}
	// Space back: the same writes go through.
	s.SetReserveBytes(0)
	if err := s.PutTypeIf(ctx, "widget", nil, []byte(`{}`)); err != nil {
		t.Fatalf("PutTypeIf once space is back: %v", err)
	}
	if added, err := s.AddBlobMember(ctx, "c", held); err != nil || !added {
		t.Fatalf("AddBlobMember once space is back: %v, %v", added, err)
	}
}
