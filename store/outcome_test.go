package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// What an unknownDriver does with its armed Commit.
const (
	landThenLose = iota + 1 // write the batch, then say the outcome is unknown
	loseUnsent              // write nothing, and say the same
	failUnsent              // write nothing, and say so (kv.ErrNotWritten)
)

// unknownDriver answers its armed Commit (or its hold's) with
// kv.ErrOutcomeUnknown, having written the batch or not: what a database
// driver whose connection broke after COMMIT was sent reports, whether
// the server had committed or not. shared makes it report itself shared
// (kv.Sharer), as the PostgreSQL driver does.
type unknownDriver struct {
	*memkv.Driver
	shared bool
	armed  atomic.Int32
}

func (d *unknownDriver) Shared() bool { return d.shared }

func (d *unknownDriver) Commit(ctx context.Context, b kv.Batch) error {
	return d.lose(b, func() error { return d.Driver.Commit(ctx, b) })
}

func (d *unknownDriver) Lock(ctx context.Context, keys [][]byte) (kv.Hold, error) {
	h, err := d.Driver.Lock(ctx, keys)
	if err != nil {
		return nil, err
	}
	return &unknownHold{Hold: h, d: d}, nil
}

// lose runs commit, the Commit of b, unless the driver is armed.
func (d *unknownDriver) lose(b kv.Batch, commit func() error) error {
	switch d.armed.Swap(0) {
	case landThenLose:
		if err := commit(); err != nil {
			return err
		}
	case loseUnsent:
	case failUnsent:
		return fmt.Errorf("%w: injected: the connection broke before COMMIT was sent, and the server refuses connections", kv.ErrNotWritten)
	default:
		return commit()
	}
	return fmt.Errorf("%w: injected: the connection was reset after COMMIT (%d swaps) was sent", kv.ErrOutcomeUnknown, len(b.Swaps))
}

type unknownHold struct {
	kv.Hold
	d *unknownDriver
}

func (h *unknownHold) Commit(ctx context.Context, b kv.Batch) error {
	return h.d.lose(b, func() error { return h.Hold.Commit(ctx, b) })
}

// TestCommitOutcomeUnknown: a commit group whose Commit says its outcome
// is unknown answers its requests with kv.ErrOutcomeUnknown — not a
// write failure: the store goes on taking writes — and drops the heads it
// wrote to, so that the next read and the next commit see what storage
// holds: the commit when it landed, the head before it when it did not.
// On a driver that is not shared, whose cached heads the store trusts
// without reading the ref, a head kept cached would hide a commit that
// landed; on a shared one the same holds through holds.
func TestCommitOutcomeUnknown(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, how := range []int32{landThenLose, loseUnsent} {
			landed := how == landThenLose
			t.Run(fmt.Sprintf("shared=%v/landed=%v", shared, landed), func(t *testing.T) {
				ctx := context.Background()
				d := &unknownDriver{Driver: memkv.New(), shared: shared}
				s := openQuiet(t, d)
				before := mustCommit(t, s, "c", put("a", "note", map[string]any{"text": "one"}))
				// headOf reads the branch head: its commit, and whether the
				// state holds artifact b.
				headOf := func() (c *replay.Commit, hasB bool) {
					t.Helper()
					err := s.Read(ctx, "c", "", func(v *View) error {
						c, hasB = v.Commit, v.State.Artifact("b") != nil
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					return c, hasB
				}
				if c, _ := headOf(); c.ID != before.ID { // the head is cached now
					t.Fatalf("head %s, want %s", c.ID.Short(), before.ID.Short())
				}

				d.armed.Store(how)
				_, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Parent: &before.ID,
					Ops: []graph.Op{put("b", "note", map[string]any{"text": "two"})}})
				if !errors.Is(err, kv.ErrOutcomeUnknown) || errors.Is(err, ErrWriteFailed) {
					t.Fatalf("commit whose outcome the driver does not know: %v, want kv.ErrOutcomeUnknown and no write failure", err)
				}

				// The next read sees what storage holds.
				hc, hasB := headOf()
				head, wantSeq := hc.ID, before.Seq+1
				switch {
				case landed && (head == before.ID || !hasB || len(hc.Parents) != 1 || hc.Parents[0] != before.ID):
					t.Fatalf("after a commit that landed with an unknown outcome the head is %s over %v (b there: %v); want the landed commit over %s", head.Short(), hc.Parents, hasB, before.ID.Short())
				case !landed && (head != before.ID || hasB):
					t.Fatalf("after a commit that did not land the head is %s (b there: %v); want %s", head.Short(), hasB, before.ID.Short())
				case landed:
					wantSeq++
				}

				// The store still takes writes, and the next commit builds
				// on the head read.
				res, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Parent: &head,
					Ops: []graph.Op{put("c", "note", map[string]any{"text": "three"})}})
				if err != nil {
					t.Fatalf("the next commit, on the head read: %v", err)
				}
				if len(res.Commit.Parents) != 1 || res.Commit.Parents[0] != head || res.Commit.Seq != wantSeq {
					t.Fatalf("the next commit has parents %v and seq %d; want [%s] and seq %d", res.Commit.Parents, res.Commit.Seq, head.Short(), wantSeq)
				}
				if c, _ := headOf(); c.ID != res.Commit.ID {
					t.Fatalf("head %s after the next commit, want %s", c.ID.Short(), res.Commit.ID.Short())
				}
				mustCheck(t, s)
			})
		}
	}
}

// TestCommitNotWritten: a commit group whose Commit says nothing was
// written (kv.ErrNotWritten: the database unreachable) answers its
// requests with that error — not a write failure: the store goes on
// taking writes — and leaves the head as it was, so that the commit sent
// again on the same parent lands; the store then checks clean.
func TestCommitNotWritten(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ctx := context.Background()
			d := &unknownDriver{Driver: memkv.New(), shared: shared}
			s := openQuiet(t, d)
			before := mustCommit(t, s, "c", put("a", "note", map[string]any{"text": "one"}))
			req := CommitRequest{Context: "c", Author: "t", Message: "m", Parent: &before.ID,
				Ops: []graph.Op{put("b", "note", map[string]any{"text": "two"})}}

			d.armed.Store(failUnsent)
			_, err := s.Commit(ctx, req)
			if !errors.Is(err, kv.ErrNotWritten) || errors.Is(err, ErrWriteFailed) || errors.Is(err, kv.ErrOutcomeUnknown) {
				t.Fatalf("commit the driver could not write: %v, want kv.ErrNotWritten and no write failure", err)
			}
			err = s.Read(ctx, "c", "", func(v *View) error {
				if v.Commit.ID != before.ID || v.State.Artifact("b") != nil {
					t.Errorf("after a commit that was not written the head is %s (b there: %v), want %s", v.Commit.ID.Short(), v.State.Artifact("b") != nil, before.ID.Short())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			// The store still takes writes: the same commit, sent again.
			res, err := s.Commit(ctx, req)
			if err != nil {
				t.Fatalf("the commit sent again: %v", err)
			}
			if len(res.Commit.Parents) != 1 || res.Commit.Parents[0] != before.ID || res.Commit.Seq != before.Seq+1 {
				t.Fatalf("the commit sent again has parents %v and seq %d; want [%s] and seq %d", res.Commit.Parents, res.Commit.Seq, before.ID.Short(), before.Seq+1)
			}
			mustCheck(t, s)
		})
	}
}

// putFailDriver fails its armed PutImmutable with err, having written
// the records first when land is set.
type putFailDriver struct {
	*memkv.Driver
	armed atomic.Bool
	land  bool
	err   error
}

func (d *putFailDriver) PutImmutable(ctx context.Context, recs []kv.Record) error {
	if !d.armed.Swap(false) {
		return d.Driver.PutImmutable(ctx, recs)
	}
	if d.land {
		if err := d.Driver.PutImmutable(ctx, recs); err != nil {
			return err
		}
	}
	return d.err
}

// TestCommitPutsFailed: a commit group big enough to put its immutable
// records before the Commit that makes it visible, whose put the driver
// says wrote nothing (kv.ErrNotWritten) or may have landed
// (kv.ErrOutcomeUnknown: its answer lost), made none of its commits: the
// request's error wraps kv.ErrNotWritten alone (503 unavailable, not
// commit-outcome-unknown), the head is as it was, the store goes on and
// the commit sent again lands; the store checks clean. A put that fails
// otherwise (an engine's I/O error) still stops the store's writes.
func TestCommitPutsFailed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		land    bool
		err     error
		stopped bool
	}{
		{"not-written", false, fmt.Errorf("%w: injected: the server refuses connections", kv.ErrNotWritten), false},
		{"outcome-unknown-landed", true, fmt.Errorf("%w: injected: the answer to the put's COMMIT was lost", kv.ErrOutcomeUnknown), false},
		{"outcome-unknown-not-landed", false, fmt.Errorf("%w: injected: the answer to the put's COMMIT was lost", kv.ErrOutcomeUnknown), false},
		{"io-error", false, errors.New("injected: input/output error"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d := &putFailDriver{Driver: memkv.New(), land: tc.land, err: tc.err}
			s := openQuiet(t, d)
			before := mustCommit(t, s, "c", put("a", "note", map[string]any{"text": "one"}))
			// About 2 MiB of payloads: the group puts them first.
			var ops []graph.Op
			for i := range 2000 {
				ops = append(ops, put(fmt.Sprintf("b%04d", i), "note", map[string]any{"text": fmt.Sprintf("%d %01000d", i, i)}))
			}
			req := CommitRequest{Context: "c", Author: "t", Message: "big", Parent: &before.ID, Ops: ops}
			d.armed.Store(true)
			_, err := s.Commit(ctx, req)
			t.Logf("the big commit whose put failed: %v", err)
			if tc.stopped {
				if !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("big commit whose put failed with an I/O error: %v, want ErrWriteFailed", err)
				}
				if _, err := s.Commit(ctx, req); !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("the next commit after a put's I/O error: %v, want ErrWriteFailed", err)
				}
				return
			}
			if !errors.Is(err, kv.ErrNotWritten) || errors.Is(err, kv.ErrOutcomeUnknown) || errors.Is(err, ErrWriteFailed) {
				t.Fatalf("big commit whose put failed: %v, want an error wrapping kv.ErrNotWritten alone", err)
			}
			if d.armed.Load() {
				t.Fatal("the commit did not put its records ahead of its Commit: the test does not test the put")
			}
			err = s.Read(ctx, "c", "", func(v *View) error {
				if v.Commit.ID != before.ID || v.State.Artifact("b0000") != nil {
					t.Errorf("after a commit whose put failed the head is %s, want %s", v.Commit.ID.Short(), before.ID.Short())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Commit(ctx, req)
			if err != nil {
				t.Fatalf("the commit sent again: %v", err)
			}
			if res.Commit.Artifacts != 2001 || res.Commit.Seq != before.Seq+1 {
				t.Fatalf("the commit sent again: %d artifacts, seq %d; want 2001 and %d", res.Commit.Artifacts, res.Commit.Seq, before.Seq+1)
			}
			mustCheck(t, s)
		})
	}
}

// lockFailDriver is a shared driver whose armed Lock fails with err.
type lockFailDriver struct {
	*memkv.Driver
	armed atomic.Bool
	err   error
}

func (d *lockFailDriver) Shared() bool { return true }

func (d *lockFailDriver) Lock(ctx context.Context, keys [][]byte) (kv.Hold, error) {
	if d.armed.Swap(false) {
		return nil, d.err
	}
	return d.Driver.Lock(ctx, keys)
}

// TestHoldNotWrittenIsNotStale: a hold the driver could not take because
// its engine did not answer (kv.ErrNotWritten, with the driver's own
// connect timeout, a deadline, in its chain) refuses the group's writes
// with that error — 503 unavailable — not as stale (409: other
// processes' holds), and the store goes on. Before, any deadline in the
// chain read as other processes' holds.
func TestHoldNotWrittenIsNotStale(t *testing.T) {
	ctx := context.Background()
	d := &lockFailDriver{Driver: memkv.New(), err: fmt.Errorf("%w: injected: failed to connect: timeout: %w", kv.ErrNotWritten, context.DeadlineExceeded)}
	s := openQuiet(t, d)
	d.armed.Store(true)
	_, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: []graph.Op{put("a", "note", map[string]any{"text": "one"})}})
	if !errors.Is(err, kv.ErrNotWritten) || errors.Is(err, ErrStale) {
		t.Fatalf("commit whose hold the driver could not take: %v, want kv.ErrNotWritten and not ErrStale", err)
	}
	if d.armed.Load() {
		t.Fatal("the store took no hold: the test does not test the hold")
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: []graph.Op{put("a", "note", map[string]any{"text": "one"})}}); err != nil {
		t.Fatalf("the next commit: %v", err)
	}
}

// openQuiet opens a store over d that logs nothing, with context "c"
// created, closed when t ends.
func openQuiet(t *testing.T, d kv.Driver) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s
}
