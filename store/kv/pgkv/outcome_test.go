package pgkv_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// TestCommitOutcomeUnknown: a Commit whose connection breaks after its
// COMMIT went out and before the answer came back returns an error that
// wraps kv.ErrOutcomeUnknown and its cause — whether the server committed
// (the proxy cuts the link once the server's answer reached it) or never
// read the COMMIT (the proxy swallows it and cuts the link) — and so does
// one that gets no answer in time (the proxy holds the answer back past
// the driver's wait). A read through another connection then shows which
// it was, and the driver goes on writing on a fresh connection. The same
// holds for a hold's Commit.
func TestCommitOutcomeUnknown(t *testing.T) {
	dsn := pgtest.DSN(t)
	// broken tells the error of a connection that closed under a read.
	broken := func(err error) bool {
		var ne net.Error
		return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
	}
	// arrived waits until the server's answer to the held COMMIT reached
	// the proxy: the server has committed.
	arrived := func(t *testing.T, gate *answerGate) {
		select {
		case <-gate.arrived:
		case <-time.After(20 * time.Second):
			t.Fatal("no answer to COMMIT reached the proxy in 20s")
		}
	}
	for _, way := range commitWays {
		for _, tc := range []struct {
			name string
			// landed: the server committed before the way to the answer
			// broke.
			landed bool
			// lose arms the proxy (and the driver) before the Commit and
			// returns what breaks the way to the answer once it runs, and
			// what lets the link go once the Commit returned.
			lose func(t *testing.T, p *pgProxy, d *pgkv.Driver) (then, after func())
			// cause tells the error's cause, which it must wrap.
			cause func(error) bool
		}{
			{"answer-cut", true, func(t *testing.T, p *pgProxy, _ *pgkv.Driver) (func(), func()) {
				gate := p.holdNextCommit()
				t.Cleanup(gate.open)
				return func() { arrived(t, gate); gate.cutLink() }, func() {}
			}, broken},
			{"commit-swallowed", false, func(t *testing.T, p *pgProxy, _ *pgkv.Driver) (func(), func()) {
				p.swallowNextCommit()
				return func() {}, func() {}
			}, broken},
			{"no-answer-in-time", true, func(t *testing.T, p *pgProxy, d *pgkv.Driver) (func(), func()) {
				pgkv.SetCommitWait(d, 300*time.Millisecond)
				gate := p.holdNextCommit()
				t.Cleanup(gate.open)
				// The answer stays held until the Commit has given up;
				// then the link goes, or pgx, closing the connection,
				// would wait 15 s for the server's end of it.
				return func() { arrived(t, gate) }, gate.cutLink
			}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		} {
			t.Run(way.name+"/"+tc.name, func(t *testing.T) {
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

				then, after := tc.lose(t, proxy, d)
				done := make(chan error, 1)
				go func() {
					done <- way.commit(ctx, d, kv.Batch{
						Swaps: []kv.Swap{{Key: ref, Old: []byte("1"), New: []byte("2")}},
						Sets:  []kv.Record{{Key: []byte("cmt\x00c2"), Value: []byte("commit 2")}},
					})
				}()
				then()
				var got error
				select {
				case got = <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("Commit did not return in 20s after the way to its answer broke")
				}
				after()
				t.Logf("Commit: %v", got)
				if !errors.Is(got, kv.ErrOutcomeUnknown) {
					t.Fatalf("Commit whose COMMIT was sent and whose answer was lost: %v, want kv.ErrOutcomeUnknown", got)
				}
				if errors.Is(got, kv.ErrConflict) || !tc.cause(got) {
					t.Fatalf("error %q: want ErrOutcomeUnknown wrapping its cause, and no conflict", got)
				}

				// The truth, through a connection of its own.
				want, wantSet := "1", false
				if tc.landed {
					want, wantSet = "2", true
				}
				v, err := direct.Get(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				_, serr := direct.Get(ctx, []byte("cmt\x00c2"))
				if string(v) != want || (serr == nil) != wantSet {
					t.Fatalf("after the lost answer: ref %q, the batch's set found: %v; want %s (landed: %v)", v, serr == nil, want, tc.landed)
				}

				// The driver goes on, on a fresh connection, from the truth.
				pgkv.SetCommitWait(d, 30*time.Second)
				err = way.commit(ctx, d, kv.Batch{Swaps: []kv.Swap{{Key: ref, Old: []byte(want), New: []byte("3")}}})
				if err != nil {
					t.Fatalf("the next Commit, from %s: %v", want, err)
				}
				if v, err := direct.Get(ctx, ref); err != nil || string(v) != "3" {
					t.Fatalf("ref after the next Commit: %q (%v), want 3", v, err)
				}
			})
		}
	}
}
