package kvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
)

// locker returns d's kv.Locker (Run gives the holds' cases only drivers
// that have one).
func locker(t *testing.T, d kv.Driver) kv.Locker {
	t.Helper()
	l, ok := d.(kv.Locker)
	if !ok {
		t.Fatalf("%T has no holds (kv.Locker)", d)
	}
	return l
}

func lock(t *testing.T, l kv.Locker, keys ...string) kv.Hold {
	t.Helper()
	bs := make([][]byte, len(keys))
	for i, k := range keys {
		bs[i] = []byte(k)
	}
	h, err := l.Lock(context.Background(), bs)
	must(t, "Lock", err)
	t.Cleanup(h.Release) // a test that fails holding it must not stall Close
	return h
}

// lockWithin tries to take keys for at most wait; it reports whether it
// did (and then releases at once).
func lockWithin(l kv.Locker, wait time.Duration, keys ...string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	bs := make([][]byte, len(keys))
	for i, k := range keys {
		bs[i] = []byte(k)
	}
	h, err := l.Lock(ctx, bs)
	if errors.Is(err, context.DeadlineExceeded) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.Release()
	return true, nil
}

// testHoldExcludes: a hold of {a, b} keeps a Lock of {b, c} waiting until
// it commits; the waiter then sees the committed value and swaps on it.
// Disjoint keys do not wait, and keys need not exist (a and c do not).
func testHoldExcludes(t *testing.T, d kv.Driver) {
	l := locker(t, d)
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("b", "0")}})
	h := lock(t, l, "a", "b")
	if ok, err := lockWithin(l, 2*time.Second, "x", "y"); err != nil || !ok {
		t.Fatalf("Lock of disjoint keys while {a, b} is held: taken %v, err %v", ok, err)
	}
	got := make(chan kv.Hold, 1)
	errc := make(chan error, 1)
	go func() {
		h2, err := l.Lock(context.Background(), [][]byte{[]byte("c"), []byte("b")})
		if err != nil {
			errc <- err
			return
		}
		t.Cleanup(h2.Release)
		got <- h2
	}()
	select {
	case <-got:
		t.Fatal("Lock of {b, c} returned while b was held")
	case err := <-errc:
		t.Fatalf("Lock of {b, c}: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	must(t, "Hold.Commit", h.Commit(context.Background(), kv.Batch{Swaps: []kv.Swap{{Key: []byte("b"), Old: []byte("0"), New: []byte("1")}}}))
	h.Release() // after Commit: nothing
	var h2 kv.Hold
	select {
	case h2 = <-got:
	case err := <-errc:
		t.Fatalf("Lock of {b, c}: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Lock of {b, c} still waits 10 s after the hold of b committed")
	}
	wantValue(t, d, "b", []byte("1"))
	must(t, "second Hold.Commit", h2.Commit(context.Background(), kv.Batch{Swaps: []kv.Swap{
		{Key: []byte("b"), Old: []byte("1"), New: []byte("2")},
		{Key: []byte("c"), Absent: true, New: []byte("new")},
	}}))
	wantValue(t, d, "b", []byte("2"))
	wantValue(t, d, "c", []byte("new"))
}

// LockQueue is what a driver's tests may add to it for the conformance
// suite: how many holds wait on a key held. With it, a waiter counts as
// queued once it waits, however slow the machine; without it, a waiter
// is given queueGrace.
type LockQueue interface {
	LockWaiters(ctx context.Context) (int, error)
}

// queueGrace is how long a waiter is given to queue on a driver that
// cannot tell (LockQueue).
const queueGrace = 150 * time.Millisecond

// waitQueued returns once n holds wait on d's keys (LockQueue), or after
// queueGrace on a driver that cannot tell.
func waitQueued(t *testing.T, d kv.Driver, n int) {
	t.Helper()
	q, ok := d.(LockQueue)
	if !ok {
		time.Sleep(queueGrace)
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := q.LockWaiters(context.Background())
		if err != nil {
			t.Fatalf("LockWaiters: %v", err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d holds wait after 30s, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testHoldOrder: holders of one key take their turns in the order they
// asked for it.
func testHoldOrder(t *testing.T, d kv.Driver) {
	l := locker(t, d)
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("k", "v")}})
	first := lock(t, l, "k")
	const waiters = 4
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := l.Lock(context.Background(), [][]byte{[]byte("k")})
			if err != nil {
				t.Errorf("waiter %d: Lock: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			h.Release()
		}()
		// Let waiter i queue before waiter i+1 asks.
		waitQueued(t, d, i+1)
	}
	first.Release()
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters took the key in the order %v, want the order they asked in (0..%d)", order, waiters-1)
		}
	}
}

// testHoldSwapsChecked: a hold's Commit checks its swaps as Commit does
// (nothing written on a failed one) and ends the hold either way; a batch
// refused as invalid leaves the hold for another Commit.
func testHoldSwapsChecked(t *testing.T, d kv.Driver) {
	l := locker(t, d)
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("r", "1")}})
	h := lock(t, l, "r")
	err := h.Commit(context.Background(), kv.Batch{
		Sets:  []kv.Record{rec("side", "x")},
		Swaps: []kv.Swap{{Key: []byte("r"), Old: []byte("0"), New: []byte("2")}},
	})
	wantConflict(t, err, map[string][]byte{"r": []byte("1")})
	wantValue(t, d, "side", nil)
	wantValue(t, d, "r", []byte("1"))
	if ok, err := lockWithin(l, 5*time.Second, "r"); err != nil || !ok {
		t.Fatalf("Lock after a hold's Commit lost its swap: taken %v, err %v (the hold must have ended)", ok, err)
	}

	h = lock(t, l, "r")
	dup := kv.Batch{Sets: []kv.Record{rec("r", "a"), rec("r", "b")}}
	if err := h.Commit(context.Background(), dup); !errors.Is(err, kv.ErrInvalid) {
		t.Fatalf("Hold.Commit of a batch with a key twice: %v, want ErrInvalid", err)
	}
	if ok, err := lockWithin(l, 200*time.Millisecond, "r"); err != nil || ok {
		t.Fatalf("Lock after an invalid Hold.Commit: taken %v, err %v; the hold must stay", ok, err)
	}
	must(t, "Hold.Commit after an invalid one", h.Commit(context.Background(), kv.Batch{Swaps: []kv.Swap{{Key: []byte("r"), Old: []byte("1"), New: []byte("2")}}}))
	wantValue(t, d, "r", []byte("2"))
}

// testHoldRelease: Release lets the keys go without writing; a Lock whose
// context ends while it waits returns the context's error and leaves the
// key free for the next holder; an invalid key is refused.
func testHoldRelease(t *testing.T, d kv.Driver) {
	l := locker(t, d)
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("q", "v")}})
	h := lock(t, l, "q")
	if ok, err := lockWithin(l, 200*time.Millisecond, "q"); err != nil || ok {
		t.Fatalf("Lock of a held key: taken %v, err %v; want a wait cut by the deadline", ok, err)
	}
	h.Release()
	h.Release()
	for i := range 3 {
		if ok, err := lockWithin(l, 5*time.Second, "q"); err != nil || !ok {
			t.Fatalf("Lock %d after Release: taken %v, err %v", i, ok, err)
		}
	}
	wantValue(t, d, "q", []byte("v"))
	if _, err := l.Lock(context.Background(), [][]byte{[]byte("ok"), nil}); !errors.Is(err, kv.ErrInvalid) {
		t.Fatalf("Lock of an empty key: %v, want ErrInvalid", err)
	}
	if ok, err := lockWithin(l, 5*time.Second, "q", "ok"); err != nil || !ok {
		t.Fatalf("Lock after a refused Lock: taken %v, err %v", ok, err)
	}
}

// testHoldMany: many goroutines increment one counter, each under a hold
// with a swap on the value it read: none loses its swap, and every
// increment lands.
func testHoldMany(t *testing.T, d kv.Driver) {
	l := locker(t, d)
	ctx := context.Background()
	commit(t, d, kv.Batch{Sets: []kv.Record{rec("n", "0")}})
	const workers, each = 6, 15
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				h, err := l.Lock(ctx, [][]byte{[]byte("n")})
				if err != nil {
					t.Errorf("worker %d: Lock: %v", w, err)
					return
				}
				cur, err := d.Get(ctx, []byte("n"))
				if err != nil {
					h.Release()
					t.Errorf("worker %d: Get: %v", w, err)
					return
				}
				var n int
				fmt.Sscan(string(cur), &n)
				err = h.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: []byte("n"), Old: cur, New: fmt.Appendf(nil, "%d", n+1)}}})
				if err != nil {
					t.Errorf("worker %d: Hold.Commit of %d → %d under the hold: %v", w, n, n+1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wantValue(t, d, "n", fmt.Appendf(nil, "%d", workers*each))
}
