package badgerkv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/store/kv"
)

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSnapshots: a snapshot is taken when asked for, reads what was
// written before it and not what came after, is replaced when asked
// again while a read still holds the old one (which stays readable until
// released, then is discarded), is dropped when it serves no read for
// its age, and is released when run stops.
func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	commit := func(k, v string) {
		t.Helper()
		if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte(k), Value: []byte(v)}}}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(sn *snapshot, k string) bool {
		t.Helper()
		_, err := sn.txn.Get([]byte(k))
		if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			t.Fatalf("Get %q in a snapshot: %v", k, err)
		}
		return err == nil
	}
	s := newSnapshots(d.db)
	s.maxAge = 50 * time.Millisecond
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); s.run(stop) }()

	commit("a", "1")
	if sn := s.acquire(); sn != nil {
		t.Fatal("a snapshot before any was asked for")
	}
	var first *snapshot
	waitFor(t, "the first snapshot", func() bool {
		first = s.acquire()
		return first != nil
	})
	commit("b", "2")
	if !has(first, "a") || has(first, "b") {
		t.Fatal("the snapshot does not read what was written before it, or reads what came after")
	}

	s.ask()
	var second *snapshot
	waitFor(t, "a newer snapshot", func() bool {
		if second != nil {
			s.release(second)
		}
		second = s.acquire()
		return second != first
	})
	if !has(second, "b") {
		t.Fatal("the newer snapshot does not read b")
	}
	if !has(first, "a") {
		t.Fatal("a replaced snapshot still held by a read became unreadable")
	}
	s.release(first)
	if _, err := first.txn.Get([]byte("a")); !errors.Is(err, badger.ErrDiscardedTxn) {
		t.Fatalf("a snapshot released by its last read: %v, want ErrDiscardedTxn", err)
	}
	s.release(second)

	waitFor(t, "the idle snapshot to be dropped", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cur == nil
	})

	s.ask()
	waitFor(t, "a snapshot after the drop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cur != nil
	})
	close(stop)
	<-done
	if s.cur != nil {
		t.Fatal("a snapshot left after run stopped")
	}
}

// TestGetSameReadsTheSnapshot: once the driver has a snapshot, GetSame
// reads in it, and a key written after it is still found.
func TestGetSameReadsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("a"), Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the driver's snapshot", func() bool {
		if _, err := d.GetSame(ctx, [][]byte{[]byte("a")}); err != nil {
			t.Fatal(err)
		}
		d.snaps.mu.Lock()
		defer d.snaps.mu.Unlock()
		return d.snaps.cur != nil
	})
	d.snaps.mu.Lock()
	d.snaps.used = false
	d.snaps.mu.Unlock()
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("b"), Value: []byte("2")}}}); err != nil {
		t.Fatal(err)
	}
	vals, err := d.GetSame(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	if string(vals[0]) != "1" || string(vals[1]) != "2" || vals[2] != nil {
		t.Fatalf("GetSame %q", vals)
	}
	d.snaps.mu.Lock()
	used := d.snaps.used
	d.snaps.mu.Unlock()
	if !used {
		t.Fatal("GetSame did not read in the snapshot")
	}
}
