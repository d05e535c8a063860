package pgkv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/artifactd/artifactd/store/kv"
)

// openHoldTest opens a driver on a fresh schema of the test database
// (dropped at the end) with a short hold idle timeout.
func openHoldTest(t *testing.T, schema string, idle time.Duration) *Driver {
	t.Helper()
	d, err := Open(context.Background(), Options{DSN: holdDSN(t), Schema: schema, HoldIdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// holdDSN returns the test database's DSN, skipping the test without
// one (failing it under CI).
func holdDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("ARTIFACTD_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ARTIFACTD_TEST_POSTGRES is not set: CI must provide a PostgreSQL database (.ci/run starts one)")
		}
		t.Skip("ARTIFACTD_TEST_POSTGRES is not set: skipping the PostgreSQL tests")
	}
	return dsn
}

// holdSchema returns a fresh schema name, dropped at the end of the test.
func holdSchema(t *testing.T) string {
	dsn := holdDSN(t)
	name := fmt.Sprintf("hold_%d_%d", time.Now().UnixNano(), rand.Uint32())
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// TestHoldIdleTimeout: a hold whose holder stopped running (a frozen
// process: here its keep-alive is switched off, as it stops with the
// process) is ended by the server after HoldIdleTimeout, so that another
// process takes the key; the frozen holder's Commit then reports a
// conflict — nothing was written — rather than an error of unknown
// outcome. A holder that is alive but slow keeps its hold.
func TestHoldIdleTimeout(t *testing.T) {
	ctx := context.Background()
	schema := holdSchema(t)
	frozen := openHoldTest(t, schema, 500*time.Millisecond)
	frozen.keepEvery = 0
	other := openHoldTest(t, schema, 500*time.Millisecond)
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
