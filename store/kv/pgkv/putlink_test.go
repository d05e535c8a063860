package pgkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// putLinkCase is one way for a PutImmutable's connection to fail: arm
// sets the proxy up before the put, and then, run beside the put, breaks
// the link at the right moment (nil: arm alone does it).
type putLinkCase struct {
	name string
	arm  func(p *pgProxy, marker []byte) (then func(t *testing.T))
	// spent, when set, is what the put's error wraps: the proxy refuses
	// every link after the failure until the test lets them through
	// again, so the retries are spent.
	spent error
}

var putLinkCases = []putLinkCase{
	{name: "cut-mid-put", arm: func(p *pgProxy, marker []byte) func(*testing.T) {
		p.cutAtNext(marker, false)
		return nil
	}},
	{name: "cut-mid-put-unreachable", spent: kv.ErrNotWritten, arm: func(p *pgProxy, marker []byte) func(*testing.T) {
		p.cutAtNext(marker, true)
		return nil
	}},
	{name: "commit-never-read", arm: func(p *pgProxy, _ []byte) func(*testing.T) {
		p.swallowNextCommit()
		return nil
	}},
	{name: "commit-answer-lost", arm: func(p *pgProxy, _ []byte) func(*testing.T) {
		gate := p.holdNextCommit()
		return func(t *testing.T) {
			arrived(t, gate)
			gate.cutLink() // the server committed; the driver never hears it
		}
	}},
	{name: "commit-answer-lost-unreachable", spent: kv.ErrNotWritten, arm: func(p *pgProxy, _ []byte) func(*testing.T) {
		gate := p.holdNextCommit()
		return func(t *testing.T) {
			arrived(t, gate)
			p.refuse(true)
			p.cutAll() // the other links, and the one whose answer is held
			gate.cutLink()
		}
	}},
}

// TestPutImmutableLinkFailure: the records of PutImmutable are
// immutable and its insert skips keys already stored, so a put whose
// connection fails — in the middle of its records, with its COMMIT
// unread by the server, or with the server's answer to it lost after it
// committed — runs again on another connection and returns nil, every
// record stored once. When the server stays unreachable the retries are
// spent and the error wraps kv.ErrNotWritten — also when a run's COMMIT
// went out and its answer was lost (the records may then be stored,
// whole: a put is safe to repeat) — and a later put succeeds. Before, each of these failures was a plain error, which
// stopped a store's writes until a restart (the put of a bulk commit
// group's records: TestStoreGoesOnAfterPutLinkFailure).
func TestPutImmutableLinkFailure(t *testing.T) {
	for _, bulk := range []struct {
		name string
		m    pgkv.BulkMethod
	}{{"unnest", pgkv.BulkUnnest}, {"copy", pgkv.BulkCopy}} {
		for _, tc := range putLinkCases {
			t.Run(bulk.name+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				direct, d, proxy := proxiedDrivers(t, pgkv.Options{Bulk: bulk.m})

				marker := []byte("put-link-marker-" + tc.name)
				var recs []kv.Record
				for i := range 50 {
					recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "node\x00%03d", i), Value: append(fmt.Appendf(nil, "value %d ", i), marker...)})
				}
				commits := proxy.commits.Load()
				then := tc.arm(proxy, marker)
				done := make(chan error, 1)
				go func() { done <- d.PutImmutable(ctx, recs) }()
				if then != nil {
					then(t)
				}
				var perr error
				select {
				case perr = <-done:
				case <-time.After(60 * time.Second):
					t.Fatal("PutImmutable did not return in 60s after its link failed")
				}
				t.Logf("PutImmutable: %v (COMMITs the proxy saw: %d)", perr, proxy.commits.Load()-commits)
				if tc.spent != nil {
					if !errors.Is(perr, tc.spent) || errors.Is(perr, kv.ErrOutcomeUnknown) {
						t.Fatalf("PutImmutable whose server stayed unreachable: %v, want an error wrapping %v", perr, tc.spent)
					}
					proxy.refuse(false)
					if err := d.PutImmutable(ctx, recs); err != nil {
						t.Fatalf("PutImmutable once the server is reachable again: %v", err)
					}
				} else if perr != nil {
					t.Fatalf("PutImmutable whose link failed once: %v, want nil after running it again", perr)
				}
				stored(t, direct, recs)
			})
		}
	}
}

// stored checks, through d, that every record of recs is stored with its
// value.
func stored(t *testing.T, d *pgkv.Driver, recs []kv.Record) {
	t.Helper()
	keys := make([][]byte, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	got, err := d.GetMany(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if !bytes.Equal(got[i], r.Value) {
			t.Fatalf("record %q after the put: %q, want %q", r.Key, got[i], r.Value)
		}
	}
}

// TestStoreGoesOnAfterPutLinkFailure: a commit big enough that its
// group puts its immutable records before the Commit that makes it
// visible, whose put loses its connection with the server unreachable
// from then on, is refused with an error wrapping kv.ErrNotWritten (503
// unavailable at the API) and changes nothing a reader sees; once the
// server is reachable the store takes writes again — the same commit
// included — without a restart. Before, the put's plain error stopped
// the store's writes (store.ErrWriteFailed) until a restart.
func TestStoreGoesOnAfterPutLinkFailure(t *testing.T) {
	ctx := context.Background()
	s, _, proxy := openStoreThrough(t)
	first, err := noteCommit(ctx, s, "q")
	if err != nil {
		t.Fatal(err)
	}
	// About 3 MiB of payloads: the group puts them ahead of its Commit.
	const marker = "put-cut-marker"
	var ops []graph.Op
	for i := range 3000 {
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: fmt.Sprintf("a%04d", i), Type: "note",
			Data: fmt.Appendf(nil, `{"text":"%s %d %s"}`, marker, i, strings.Repeat("x", 1000))})
	}
	big := store.CommitRequest{Context: "c", Author: "t", Message: "big", Ops: ops}
	proxy.cutAtNext([]byte(marker), true)
	_, err = s.Commit(ctx, big)
	t.Logf("the big commit, its put's link cut and the server unreachable: %v", err)
	if !errors.Is(err, kv.ErrNotWritten) {
		t.Fatalf("big commit whose put lost its link: %v, want an error wrapping kv.ErrNotWritten", err)
	}
	proxy.refuse(false)
	next, err := noteCommit(ctx, s, "n")
	if err != nil {
		t.Fatalf("a commit once the server is reachable again: %v, want the store to take writes", err)
	}
	if len(next.Commit.Parents) != 1 || next.Commit.Parents[0] != first.Commit.ID {
		t.Fatalf("the next commit's parents %v, want the first commit %s: the refused one must not be on the branch", next.Commit.Parents, first.Commit.ID)
	}
	res, err := s.Commit(ctx, big)
	if err != nil {
		t.Fatalf("the big commit sent again: %v", err)
	}
	if got := res.Commit.Artifacts; got != 3002 {
		t.Fatalf("artifacts after the big commit sent again: %d, want 3002", got)
	}
}

// TestPutImmutableOrphanEnded: a put whose COMMIT never reaches the
// server, on a link gone half-open (the proxy keeps the COMMIT, and
// hides all the server sends from then on), gets no answer within the
// commit wait and runs again; the
// first run's transaction, idle with its rows' locks, is ended by the
// idle timeout the put armed first, so the second run's inserts of the
// same keys do not wait on it for ever, and the put returns nil with
// every record stored. Before, the put waited for the COMMIT's answer
// for ever (and, run again, would have waited on the orphan's locks
// until the server noticed the dead connection).
func TestPutImmutableOrphanEnded(t *testing.T) {
	ctx := context.Background()
	direct, d, proxy := proxiedDrivers(t, pgkv.Options{})
	pgkv.SetCommitWait(d, 2*time.Second)
	pgkv.SetCommitIdle(d, time.Second)
	if got := pgkv.PutCommitWait(d); got != time.Second {
		t.Fatalf("a put's wait for its COMMIT's answer with a commit wait of 2s: %s, want half of it", got)
	}
	var recs []kv.Record
	for i := range 50 {
		recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "node\x00%03d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	// Half-open: nothing the server sends from then on reaches the
	// driver, nor the close of the server's end.
	gate := proxy.stallNextCommitMuted()
	t.Cleanup(gate.open)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.PutImmutable(ctx, recs) }()
	arrived(t, gate)
	select {
	case err := <-done:
		t.Logf("PutImmutable after its COMMIT was kept from the server: %v, after %s", err, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("PutImmutable whose first COMMIT never reached the server: %v, want nil after running it again", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("PutImmutable whose COMMIT never reached the server did not return in 20s")
	}
	stored(t, direct, recs)
}

// proxiedDrivers opens, on a fresh schema, a driver straight to the test
// server and one with opts' other settings through a new proxy, both
// closed when t ends.
func proxiedDrivers(t *testing.T, opts pgkv.Options) (direct, d *pgkv.Driver, proxy *pgProxy) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	opts.Schema = freshSchema(t)
	var err error
	if direct, err = pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: opts.Schema}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	proxy, opts.DSN = newPGProxy(t, dsn)
	if d, err = pgkv.Open(ctx, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return direct, d, proxy
}

// TestPutImmutableCommitRefused: a put whose COMMIT the server refuses
// (here a deferred constraint trigger; on CockroachDB a serialization
// failure at COMMIT) gets the server's answer back, not a failed link —
// and the driver tells which from the error alone: once Commit returns,
// the pool has the connection back and another caller may be using it
// (under -race, reading its state then was a data race with the Gets
// running beside).
func TestPutImmutableCommitRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := freshSchema(t)
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fn := pgx.Identifier{schema, "refuse_marked"}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF position('refuse' in encode(NEW.k, 'escape')) > 0 THEN RAISE EXCEPTION 'refused at commit'; END IF; RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER refuse_marked AFTER INSERT ON ` + pgx.Identifier{schema, "artifactd_kv"}.Sanitize() + ` DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.PutImmutable(ctx, []kv.Record{{Key: []byte("node\x00kept"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.Get(ctx, []byte("node\x00kept")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 100 {
		err := d.PutImmutable(ctx, []kv.Record{{Key: fmt.Appendf(nil, "node\x00refuse%d", i), Value: []byte("v")}})
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "P0001" || errors.Is(err, kv.ErrNotWritten) {
			close(stop)
			readers.Wait()
			t.Fatalf("put %d whose COMMIT the server refused: %v, want the server's P0001 and no kv.ErrNotWritten", i, err)
		}
	}
	close(stop)
	readers.Wait()
}
