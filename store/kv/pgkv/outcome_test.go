package pgkv_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// brokenConn tells the error of a connection that closed under a read.
func brokenConn(err error) bool {
	var ne net.Error
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// arrived waits until gate's COMMIT, or the server's answer to it,
// reached the proxy.
func arrived(t *testing.T, gate *answerGate) {
	t.Helper()
	select {
	case <-gate.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the COMMIT or its answer did not reach the proxy in 20s")
	}
}

// lossCase is one way to lose the answer to a Commit's COMMIT: lose arms
// the proxy (and the driver) before the Commit and returns what breaks
// the way to the answer once the Commit runs (it may cancel the
// Commit's context), and what lets the link go once the Commit returned.
type lossCase struct {
	name string
	lose func(t *testing.T, p *pgProxy, d *pgkv.Driver, cancel context.CancelFunc) (then, after func())
}

// outcomeRun is the state of one run of a lossCase.
type outcomeRun struct {
	direct, d *pgkv.Driver
	proxy     *pgProxy
	// commits is the number of COMMITs the proxy had seen before the
	// Commit under test.
	commits int64
	// err is what the Commit under test returned.
	err error
}

var outcomeRef = []byte("ref\x00main")

// runLoss opens a driver straight to the server and one through a proxy
// on a fresh schema, sets the ref to "1", and commits through way, with
// tc's loss, a batch that swaps the ref from 1 to 2 and sets a record.
func runLoss(t *testing.T, dsn string, way func(ctx context.Context, d *pgkv.Driver, b kv.Batch) error, tc lossCase) *outcomeRun {
	t.Helper()
	ctx := context.Background()
	schema := freshSchema(t)
	direct, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	proxy, proxied := newPGProxy(t, dsn)
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: proxied, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: outcomeRef, Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	r := &outcomeRun{direct: direct, d: d, proxy: proxy, commits: proxy.commits.Load()}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	then, after := tc.lose(t, proxy, d, cancel)
	done := make(chan error, 1)
	go func() {
		done <- way(cctx, d, kv.Batch{
			Swaps: []kv.Swap{{Key: outcomeRef, Old: []byte("1"), New: []byte("2")}},
			Sets:  []kv.Record{{Key: []byte("cmt\x00c2"), Value: []byte("commit 2")}},
		})
	}()
	then()
	select {
	case r.err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Commit did not return in 30s after the way to its answer broke")
	}
	after()
	t.Logf("Commit: %v", r.err)
	return r
}

// truth checks, through the direct connection, that the batch landed (the
// ref is 2 and the record set) or not (the ref is 1, no record), and
// that the driver goes on, on a fresh connection, with a Commit from it.
func (r *outcomeRun) truth(t *testing.T, way func(ctx context.Context, d *pgkv.Driver, b kv.Batch) error, landed bool) {
	t.Helper()
	ctx := context.Background()
	want := "1"
	if landed {
		want = "2"
	}
	v, err := r.direct.Get(ctx, outcomeRef)
	if err != nil {
		t.Fatal(err)
	}
	_, serr := r.direct.Get(ctx, []byte("cmt\x00c2"))
	if string(v) != want || (serr == nil) != landed {
		t.Fatalf("after the lost answer: ref %q, the batch's set found: %v; want %s (landed: %v)", v, serr == nil, want, landed)
	}
	pgkv.SetCommitWait(r.d, 30*time.Second)
	pgkv.SetResolveFloor(r.d, 5*time.Second)
	if err := way(ctx, r.d, kv.Batch{Swaps: []kv.Swap{{Key: outcomeRef, Old: []byte(want), New: []byte("3")}}}); err != nil {
		t.Fatalf("the next Commit, from %s: %v", want, err)
	}
	if v, err := r.direct.Get(ctx, outcomeRef); err != nil || string(v) != "3" {
		t.Fatalf("ref after the next Commit: %q (%v), want 3", v, err)
	}
}

// TestCommitOutcomeResolved: a Commit whose connection breaks after its
// COMMIT went out, or that gets no answer in time, asks the server on
// another connection what became of its transaction. The server
// committed (the proxy cuts the link once the server's answer reached
// it, with the Commit's context canceled or not, or holds the answer
// past the driver's wait): Commit returns nil and the batch is there.
// The server never read the COMMIT and aborted the transaction when its
// connection closed (the proxy swallows the COMMIT and cuts the link):
// the driver's Commit runs the transaction again — its swap, from the
// ref's old value, holds, so the first run wrote nothing — and returns
// nil, the batch written once; a hold's Commit, whose locks went with
// its transaction, returns a conflict and writes nothing.
func TestCommitOutcomeResolved(t *testing.T) {
	dsn := pgtest.DSN(t)
	answerCut := func(cancelFirst bool) func(t *testing.T, p *pgProxy, _ *pgkv.Driver, cancel context.CancelFunc) (func(), func()) {
		return func(t *testing.T, p *pgProxy, _ *pgkv.Driver, cancel context.CancelFunc) (func(), func()) {
			gate := p.holdNextCommit()
			t.Cleanup(gate.open)
			return func() {
				arrived(t, gate)
				if cancelFirst {
					cancel()
				}
				gate.cutLink()
			}, func() {}
		}
	}
	for _, way := range commitWays {
		for _, tc := range []struct {
			lossCase
			// swallowed: the server never read the COMMIT.
			swallowed bool
		}{
			{lossCase{"answer-cut", answerCut(false)}, false},
			{lossCase{"answer-cut-canceled", answerCut(true)}, false},
			{lossCase{"no-answer-in-time", func(t *testing.T, p *pgProxy, d *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				pgkv.SetCommitWait(d, 300*time.Millisecond)
				gate := p.holdNextCommit()
				t.Cleanup(gate.open)
				// The answer stays held until the Commit has returned;
				// then the link goes, or pgx, closing the connection,
				// would wait 15 s for the server's end of it.
				return func() { arrived(t, gate) }, gate.cutLink
			}}, false},
			{lossCase{"commit-swallowed", func(t *testing.T, p *pgProxy, _ *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				p.swallowNextCommit()
				return func() {}, func() {}
			}}, true},
		} {
			t.Run(way.name+"/"+tc.name, func(t *testing.T) {
				r := runLoss(t, dsn, way.commit, tc.lossCase)
				if errors.Is(r.err, kv.ErrOutcomeUnknown) {
					t.Fatalf("Commit whose outcome the server could tell: %v, want it resolved", r.err)
				}
				landed := true
				switch {
				case !tc.swallowed:
					if r.err != nil {
						t.Fatalf("Commit whose transaction the server committed: %v, want nil", r.err)
					}
				case way.name == "driver":
					if r.err != nil {
						t.Fatalf("Commit whose transaction the server aborted: %v, want nil after running it again", r.err)
					}
					// The swallowed COMMIT and the one of the second run.
					if n := r.proxy.commits.Load() - r.commits; n != 2 {
						t.Fatalf("the proxy saw %d COMMITs of the Commit, want 2 (the lost one and the second run's)", n)
					}
				default:
					var ce *kv.ConflictError
					if !errors.As(r.err, &ce) || len(ce.Conflicts) != 0 || !brokenConn(ce.Cause) {
						t.Fatalf("hold's Commit whose transaction the server aborted: %v, want a *kv.ConflictError whose cause wraps the broken connection", r.err)
					}
					landed = false
				}
				r.truth(t, way.commit, landed)
			})
		}
	}
}

// TestCommitOutcomeUnknown: a Commit whose answer to COMMIT was lost and
// whose transaction's outcome the server cannot tell returns an error
// that wraps kv.ErrOutcomeUnknown and its cause and says what it asked:
// when no other connection answers (the proxy cuts the link once the
// server committed, and every other, and refuses new ones), and when the
// transaction is still in progress after the wait (the proxy keeps the
// COMMIT from the server and its connection open). A read through
// another connection then shows which it was, and the driver goes on
// writing on a fresh connection. The same holds for a hold's Commit.
func TestCommitOutcomeUnknown(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, way := range commitWays {
		for _, tc := range []struct {
			lossCase
			// landed: the server committed before the way to the answer
			// broke.
			landed bool
			// cause tells the error's cause, which it must wrap, and
			// asked is what its text says was asked.
			cause func(error) bool
			asked string
		}{
			{lossCase{"status-unanswerable", func(t *testing.T, p *pgProxy, d *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				pgkv.SetCommitWait(d, 2*time.Second)
				pgkv.SetResolveFloor(d, 500*time.Millisecond)
				gate := p.holdNextCommit()
				t.Cleanup(gate.open)
				return func() {
					arrived(t, gate)
					p.refuse(true)
					p.cutAll()
				}, func() { p.refuse(false) }
			}}, true, brokenConn, "asking another connection for txid_status"},
			{lossCase{"still-in-progress", func(t *testing.T, p *pgProxy, d *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				pgkv.SetCommitWait(d, 300*time.Millisecond)
				// The transaction is to stay in progress: its idle
				// timeout (at least 1 s otherwise) must not end it
				// within the questions.
				pgkv.SetCommitIdle(d, time.Minute)
				pgkv.SetResolveFloor(d, time.Second)
				gate := p.stallNextCommit()
				t.Cleanup(gate.open)
				// Once the Commit has given up, the link goes: the
				// server aborts the transaction.
				return func() { arrived(t, gate) }, gate.cutLink
			}}, false, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, `was still "in progress"`},
		} {
			t.Run(way.name+"/"+tc.name, func(t *testing.T) {
				r := runLoss(t, dsn, way.commit, tc.lossCase)
				if !errors.Is(r.err, kv.ErrOutcomeUnknown) {
					t.Fatalf("Commit whose outcome the server could not tell: %v, want kv.ErrOutcomeUnknown", r.err)
				}
				if errors.Is(r.err, kv.ErrConflict) || !tc.cause(r.err) || !strings.Contains(r.err.Error(), tc.asked) {
					t.Fatalf("error %q: want ErrOutcomeUnknown wrapping its cause, no conflict, and saying %q", r.err, tc.asked)
				}
				r.truth(t, way.commit, tc.landed)
			})
		}
	}
}

// TestCommitAbortedEveryTime: when the server aborts the transaction
// every time its answer to COMMIT is lost (the proxy swallows every
// COMMIT and cuts its link), the driver's Commit runs it again as many
// times as after serialization failures (21 runs) and then returns an
// error that says the server aborted it — not kv.ErrOutcomeUnknown, since
// nothing was written, and not a conflict — and the ref is as before.
func TestCommitAbortedEveryTime(t *testing.T) {
	dsn := pgtest.DSN(t)
	r := runLoss(t, dsn, commitWays[0].commit, lossCase{"every-commit-swallowed", func(t *testing.T, p *pgProxy, _ *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
		p.swallowCommits(1000)
		return func() {}, func() { p.swallowCommits(0) }
	}})
	if r.err == nil || errors.Is(r.err, kv.ErrOutcomeUnknown) || errors.Is(r.err, kv.ErrConflict) || !strings.Contains(r.err.Error(), "aborted") {
		t.Fatalf("Commit whose every run the server aborted: %v, want an error saying so, neither outcome unknown nor a conflict", r.err)
	}
	if n := r.proxy.commits.Load() - r.commits; n != 21 {
		t.Fatalf("the proxy saw %d COMMITs of the Commit, want 21", n)
	}
	r.truth(t, commitWays[0].commit, false)
}

// TestCommitLinkCutBeforeCommit: a Commit whose connection breaks in the
// middle of its batch, before its COMMIT was sent, wrote nothing (the
// server aborts a transaction whose connection is gone). The driver runs
// it again on a fresh connection and returns nil, the batch written once
// (the swap from 1 held on the second run, one COMMIT seen); when the
// server stays unreachable (the proxy refuses every link from the cut
// on), Commit returns an error wrapping kv.ErrNotWritten — not
// kv.ErrOutcomeUnknown — no COMMIT was sent and nothing was written. A
// hold's Commit, whose locks end with its transaction, returns
// kv.ErrNotWritten at once, either way.
func TestCommitLinkCutBeforeCommit(t *testing.T) {
	dsn := pgtest.DSN(t)
	// The batch's set carries this key: the link breaks after the swap
	// went to the server and before the rest of the batch did.
	marker := []byte("cmt\x00c2")
	for _, tc := range []struct {
		name string
		// refuse: the proxy refuses every link after the cut.
		refuse bool
	}{{"batch-cut", false}, {"batch-cut-unreachable", true}} {
		t.Run("hold/"+tc.name, func(t *testing.T) {
			// A hold cannot run its transaction again (its locks ended
			// with it): it says nothing was written, and nothing was.
			r := runLoss(t, dsn, commitWays[1].commit, lossCase{tc.name, func(t *testing.T, p *pgProxy, _ *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				p.cutAtNext(marker, tc.refuse)
				return func() {}, func() { p.refuse(false) }
			}})
			if !errors.Is(r.err, kv.ErrNotWritten) || errors.Is(r.err, kv.ErrOutcomeUnknown) || errors.Is(r.err, kv.ErrConflict) {
				t.Fatalf("hold's Commit whose link broke before COMMIT: %v, want kv.ErrNotWritten", r.err)
			}
			if commits := r.proxy.commits.Load() - r.commits; commits != 0 {
				t.Fatalf("the proxy saw %d COMMITs of the hold's Commit, want none", commits)
			}
			r.truth(t, commitWays[1].commit, false)
		})
		t.Run(tc.name, func(t *testing.T) {
			r := runLoss(t, dsn, commitWays[0].commit, lossCase{tc.name, func(t *testing.T, p *pgProxy, _ *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
				p.cutAtNext(marker, tc.refuse)
				return func() {}, func() { p.refuse(false) }
			}})
			commits := r.proxy.commits.Load() - r.commits
			if !tc.refuse {
				if r.err != nil {
					t.Fatalf("Commit whose link broke before COMMIT: %v, want nil after running it again", r.err)
				}
				if commits != 1 {
					t.Fatalf("the proxy saw %d COMMITs of the Commit, want 1 (the second run's)", commits)
				}
				r.truth(t, commitWays[0].commit, true)
				return
			}
			if !errors.Is(r.err, kv.ErrNotWritten) || errors.Is(r.err, kv.ErrOutcomeUnknown) || errors.Is(r.err, kv.ErrConflict) {
				t.Fatalf("Commit whose link broke before COMMIT, the server unreachable since: %v, want kv.ErrNotWritten", r.err)
			}
			if commits != 0 {
				t.Fatalf("the proxy saw %d COMMITs of the Commit, want none", commits)
			}
			r.truth(t, commitWays[0].commit, false)
		})
	}
}

// TestCommitOrphanAborted: a Commit whose COMMIT never reaches the server
// while the server's end of the connection stays open (the proxy keeps
// the COMMIT, drops what the server sends and hides the close of its
// end: a half-open link) leaves an orphaned transaction holding its row
// locks. The idle timeout the transaction armed in its batch makes the
// server abort it within the commit wait; the status the driver then asks
// for is 'aborted', the transaction runs again, and Commit returns nil,
// the batch written once (the swap from 1 held on the second run).
func TestCommitOrphanAborted(t *testing.T) {
	dsn := pgtest.DSN(t)
	const wait = 3 * time.Second // the orphan is aborted after 1.5 s
	var start time.Time
	r := runLoss(t, dsn, commitWays[0].commit, lossCase{"half-open", func(t *testing.T, p *pgProxy, d *pgkv.Driver, _ context.CancelFunc) (func(), func()) {
		pgkv.SetCommitWait(d, wait)
		pgkv.SetResolveFloor(d, 500*time.Millisecond)
		gate := p.stallNextCommitMuted()
		t.Cleanup(gate.open)
		start = time.Now()
		return func() { arrived(t, gate) }, gate.cutLink
	}})
	took := time.Since(start)
	if r.err != nil {
		t.Fatalf("Commit whose orphaned transaction the server aborted: %v, want nil after running it again", r.err)
	}
	if n := r.proxy.commits.Load() - r.commits; n != 2 {
		t.Fatalf("the proxy saw %d COMMITs of the Commit, want 2 (the stalled one and the second run's)", n)
	}
	if took > wait+5*time.Second {
		t.Fatalf("Commit took %s, want about the wait (%s)", took, wait)
	}
	r.truth(t, commitWays[0].commit, true)
}
