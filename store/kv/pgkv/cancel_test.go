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

// TestCommitCanceledAfterCommitSent: a Commit whose context is canceled
// after its COMMIT went to the server, which committed, reports success —
// not an error for a batch that landed. A proxy between the driver and
// the server holds the server's answer to COMMIT back until the test has
// canceled, so the cancellation meets the commit in flight every time.
// The same holds for a hold's Commit.
func TestCommitCanceledAfterCommitSent(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, tc := range commitWays {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			schema := freshSchema(t)
			direct, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			proxy, proxied := newPGProxy(t, dsn)
			d, err := pgkv.Open(ctx, pgkv.Options{DSN: proxied, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			ref := []byte("ref\x00main")
			if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: ref, Value: []byte("1")}}}); err != nil {
				t.Fatal(err)
			}

			gate := proxy.holdNextCommit()
			defer gate.open()
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- tc.commit(cctx, d, kv.Batch{
					Swaps: []kv.Swap{{Key: ref, Old: []byte("1"), New: []byte("2")}},
					Sets:  []kv.Record{{Key: []byte("cmt\x00c2"), Value: []byte("commit 2")}},
				})
			}()
			select {
			case <-gate.arrived: // the server has settled the COMMIT
			case err := <-done:
				t.Fatalf("Commit returned %v before the server answered its COMMIT", err)
			case <-time.After(20 * time.Second):
				t.Fatal("no answer to COMMIT reached the proxy in 20s")
			}
			cancel()
			var got error
			early := false
			select {
			case got = <-done:
				early = true
			case <-time.After(500 * time.Millisecond):
			}
			gate.open()
			if !early {
				select {
				case got = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("Commit did not return in 20s after the COMMIT's answer went through")
				}
			}

			v, err := direct.Get(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if string(v) != "2" {
				t.Fatalf("ref after a COMMIT the server answered: %q, want 2 (the test did not hold a committed answer)", v)
			}
			if got != nil {
				t.Fatalf("Commit canceled while its COMMIT was in flight returned %v (before the answer arrived: %v), but its batch landed", got, early)
			}
			if _, err := direct.Get(ctx, []byte("cmt\x00c2")); err != nil {
				t.Fatalf("the batch's set: %v", err)
			}
		})
	}
}

// commitWays are the two ways a batch is committed: the driver's Commit,
// and a hold's (the hold of the batch's first swap's key).
var commitWays = []struct {
	name   string
	commit func(ctx context.Context, d *pgkv.Driver, b kv.Batch) error
}{
	{"driver", func(ctx context.Context, d *pgkv.Driver, b kv.Batch) error { return d.Commit(ctx, b) }},
	{"hold", func(ctx context.Context, d *pgkv.Driver, b kv.Batch) error {
		h, err := d.Lock(ctx, [][]byte{b.Swaps[0].Key})
		if err != nil {
			return err
		}
		defer h.Release()
		return h.Commit(ctx, b)
	}},
}

// TestCommitCanceledBeforeCommitSent: cancellation that comes before the
// COMMIT is sent still rolls the batch back and returns ctx's error.
func TestCommitCanceledBeforeCommitSent(t *testing.T) {
	ctx := context.Background()
	d, err := open(ctx, t, freshSchema(t), pgkv.BulkUnnest)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ref := []byte("ref\x00main")
	h, err := d.Lock(ctx, [][]byte{ref})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = h.Commit(cctx, kv.Batch{Swaps: []kv.Swap{{Key: ref, Absent: true, New: []byte("1")}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("hold's Commit with a canceled context: %v, want context.Canceled", err)
	}
	if _, err := d.Get(ctx, ref); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("ref after a canceled Commit: %v, want not found", err)
	}
}
