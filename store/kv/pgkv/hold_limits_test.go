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

// TestHoldEndedWhileFrozenIsAConflict: a process frozen past the hold's
// idle timeout whose keep-alive runs before its commit (the keep-alive
// meets the server's end of the transaction) gets a *kv.ConflictError
// from Commit, which sends nothing: the store decides again. It got a
// plain error before, which the store must take as a write of unknown
// outcome.
func TestHoldEndedWhileFrozenIsAConflict(t *testing.T) {
	ctx := context.Background()
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: freshSchema(t), HoldIdleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The keep-alive's first tick comes after the server's timeout, as
	// for a process frozen past it.
	pgkv.SetKeepAlive(d, time.Second)
	h, err := d.Lock(ctx, [][]byte{[]byte("ref")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	time.Sleep(1500 * time.Millisecond) // the server ends the hold at 300 ms; the keep-alive runs at 1 s
	err = h.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("late"), Value: []byte("x")}}})
	var ce *kv.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Commit of a hold the server ended for silence: %v, want a *kv.ConflictError", err)
	}
	if _, err := d.Get(ctx, []byte("late")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("late: %v, want not found", err)
	}
}

// TestPoolTooSmallForHolds: a pool of one connection is refused at Open
// (a hold would keep it while its holder waits to read); two serve a
// hold and its holder's read.
func TestPoolTooSmallForHolds(t *testing.T) {
	ctx := context.Background()
	if _, err := pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: freshSchema(t), MaxConns: 1}); !errors.Is(err, kv.ErrInvalid) {
		t.Fatalf("Open with MaxConns 1: %v, want ErrInvalid", err)
	}
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: freshSchema(t), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("ref"), Value: []byte("c1")}}}); err != nil {
		t.Fatal(err)
	}
	h, err := d.Lock(ctx, [][]byte{[]byte("ref")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.Get(rctx, []byte("ref")); err != nil {
		t.Fatalf("the holder's read of the ref it holds: %v", err)
	}
}

// TestLongHoldIdleTimeout: a timeout past PostgreSQL's 32-bit
// milliseconds is taken as the longest it allows; every Lock failed
// before.
func TestLongHoldIdleTimeout(t *testing.T) {
	ctx := context.Background()
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: freshSchema(t), HoldIdleTimeout: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h, err := d.Lock(ctx, [][]byte{[]byte("ref")})
	if err != nil {
		t.Fatalf("Lock with HoldIdleTimeout 30 days: %v", err)
	}
	if err := h.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("ref"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
}
