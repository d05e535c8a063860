package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	s.maxAge = 300 * time.Millisecond
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
		if second == nil { // dropped as idle meanwhile: ask again
			s.ask()
			return false
		}
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

// TestSnapshotTakenAcrossADrop: a transaction taken before a delete
// whose drop ran while it was being installed is not installed; the one
// taken after it is, and does not find the deleted key.
func TestSnapshotTakenAcrossADrop(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	s := newSnapshots(d.db)
	takes := 0
	s.taken = func() {
		takes++
		if takes == 1 { // the delete lands, and drops, after the first take
			if err := d.Commit(ctx, kv.Batch{Deletes: [][]byte{[]byte("k")}}); err != nil {
				t.Error(err)
			}
			s.drop()
		}
	}
	s.take()
	sn := s.acquire()
	if sn == nil || takes != 2 {
		t.Fatalf("snapshot %v after %d takes, want one after 2", sn, takes)
	}
	defer s.release(sn)
	if _, err := sn.txn.Get([]byte("k")); !errors.Is(err, badger.ErrKeyNotFound) {
		t.Fatalf("the installed snapshot reads a key deleted before it was installed: %v", err)
	}
	s.drop()
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
	// The driver's goroutine may drop an idle snapshot between two steps
	// here (once a second): a few attempts, one of which must read in it.
	used := false
	for attempt := 0; attempt < 5 && !used; attempt++ {
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
		b := fmt.Appendf(nil, "b%d", attempt)
		if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: b, Value: []byte("2")}}}); err != nil {
			t.Fatal(err)
		}
		vals, err := d.GetSame(ctx, [][]byte{[]byte("a"), b, []byte("c")})
		if err != nil {
			t.Fatal(err)
		}
		if string(vals[0]) != "1" || string(vals[1]) != "2" || vals[2] != nil {
			t.Fatalf("GetSame %q", vals)
		}
		d.snaps.mu.Lock()
		used = d.snaps.used
		d.snaps.mu.Unlock()
	}
	if !used {
		t.Fatal("GetSame did not read in the snapshot")
	}
}

// TestGetSameUnderChurn: readers keep reading while snapshots are asked
// for, replaced and dropped, keys are written and deleted: every value
// read is the key's, a key is found once its write returned, and never
// once its delete returned.
func TestGetSameUnderChurn(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	const fixed = 200
	val := func(k []byte) []byte { return append([]byte("v:"), k...) }
	var recs []kv.Record
	for i := range fixed {
		k := fmt.Appendf(nil, "fixed%03d", i)
		recs = append(recs, kv.Record{Key: k, Value: val(k)})
	}
	if err := d.PutSame(ctx, recs); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, 8)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Ask for new snapshots all the time.
	wg.Go(func() {
		for !stop.Load() {
			d.snaps.ask()
			time.Sleep(100 * time.Microsecond)
		}
	})
	// Readers of the fixed keys.
	for r := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				k := recs[(i*13+r)%fixed].Key
				vals, err := d.GetSame(ctx, [][]byte{k})
				if err != nil {
					fail(err)
					return
				}
				if !bytes.Equal(vals[0], val(k)) {
					fail(fmt.Errorf("reader %d: %q read %q", r, k, vals[0]))
					return
				}
			}
		})
	}
	// A writer that writes a key, finds it, deletes it (by Deletes or by
	// a swap), and does not find it.
	for i := range 300 {
		k := fmt.Appendf(nil, "churn%03d", i)
		if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: k, Value: val(k)}}}); err != nil {
			t.Fatal(err)
		}
		vals, err := d.GetSame(ctx, [][]byte{k})
		if err != nil || !bytes.Equal(vals[0], val(k)) {
			t.Fatalf("%q after its write: %q, %v", k, vals, err)
		}
		b := kv.Batch{Deletes: [][]byte{k}}
		if i%2 == 1 {
			b = kv.Batch{Swaps: []kv.Swap{{Key: k, Old: val(k), Delete: true}}}
		}
		if err := d.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		if vals, err = d.GetSame(ctx, [][]byte{k}); err != nil || vals[0] != nil {
			t.Fatalf("%q after its delete: %q, %v", k, vals, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
