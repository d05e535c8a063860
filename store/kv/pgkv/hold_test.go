package pgkv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// TestHoldIdleTimeout: a hold whose holder stopped running (a frozen
// process: here its keep-alive is switched off, as it stops with the
// process) is ended by the server after HoldIdleTimeout, so that another
// process takes the key; the frozen holder's Commit then reports a
// conflict — nothing was written — rather than an error of unknown
// outcome. A holder that is alive but slow keeps its hold.
func TestHoldIdleTimeout(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	openIdle := func() *pgkv.Driver {
		d, err := pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: schema, HoldIdleTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	frozen, other := openIdle(), openIdle()
	pgkv.SetKeepAlive(frozen, 0)
	key := []byte("ctx\x00c")
	if err := other.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: key, Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}

	h, err := frozen.Lock(ctx, [][]byte{key})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	start := time.Now()
	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	h2, err := other.Lock(wait, [][]byte{key})
	if err != nil {
		t.Fatalf("Lock while a frozen holder holds the key: %v (the server must end the frozen hold)", err)
	}
	waited := time.Since(start)
	if waited < 400*time.Millisecond {
		t.Fatalf("the second Lock took the key after %s, before the first hold's idle timeout", waited)
	}
	// other's hold is alive: it outlasts several idle timeouts.
	time.Sleep(1500 * time.Millisecond)
	if err := h2.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: key, Old: []byte("1"), New: []byte("2")}}}); err != nil {
		t.Fatalf("Commit of a live hold after 3 idle timeouts: %v", err)
	}
	err = h.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("late"), Value: []byte("x")}}})
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("Commit of a hold the server ended: %v, want a conflict (nothing written)", err)
	}
	if _, err := other.Get(ctx, []byte("late")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the ended hold's record: %v, want not found", err)
	}
	if v, err := other.Get(ctx, key); err != nil || string(v) != "2" {
		t.Fatalf("key after the live hold's commit: %q, %v; want 2", v, err)
	}
	t.Logf("a frozen hold (idle timeout 500ms) let go after %s", waited.Round(time.Millisecond))
}
