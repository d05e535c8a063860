package pgkv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// TestConnectTimeout: a DSN without connect_timeout gets
// DefaultConnectTimeout; the DSN's own, or Options.ConnectTimeout, wins.
func TestConnectTimeout(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := freshSchema(t)
	for _, tc := range []struct {
		name string
		dsn  string
		opt  time.Duration
		want time.Duration
	}{
		{"default", dsn, 0, pgkv.DefaultConnectTimeout},
		{"dsn", withParam(dsn, "connect_timeout", "3"), 0, 3 * time.Second},
		{"option", withParam(dsn, "connect_timeout", "3"), 250 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := pgkv.Open(context.Background(), pgkv.Options{DSN: tc.dsn, Schema: schema, ConnectTimeout: tc.opt})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if got := pgkv.ConnectTimeout(d); got != tc.want {
				t.Fatalf("connect timeout %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCommitToSilentServer: a server that takes new connections and
// never answers (frozen, or behind a path that drops its packets), its
// open connections gone, refuses a Commit with an error wrapping
// kv.ErrNotWritten once a connection attempt has waited its connect
// timeout — the default one, with a DSN that sets none — and the retry
// window is spent; once the server answers again, the next Commit lands.
// Before, without a connect timeout, the Commit waited for ever.
func TestCommitToSilentServer(t *testing.T) {
	ctx := context.Background()
	_, d, proxy := proxiedDrivers(t, pgkv.Options{})
	ref := []byte("ref\x00main")
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: ref, Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	pgkv.SetRetryWindow(d, time.Second)
	proxy.hush(true)
	proxy.cutAll()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: ref, Old: []byte("1"), New: []byte("2")}}})
	}()
	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(pgkv.DefaultConnectTimeout + 20*time.Second):
		t.Fatalf("Commit to a silent server did not return in %s", pgkv.DefaultConnectTimeout+20*time.Second)
	}
	took := time.Since(start)
	t.Logf("Commit to a silent server: %v after %s", err2, took.Round(time.Millisecond))
	if !errors.Is(err2, kv.ErrNotWritten) {
		t.Fatalf("Commit to a silent server: %v, want an error wrapping kv.ErrNotWritten", err2)
	}
	if took < pgkv.DefaultConnectTimeout-time.Second {
		t.Fatalf("Commit to a silent server gave up after %s, before its connect timeout (%s)", took, pgkv.DefaultConnectTimeout)
	}
	proxy.hush(false)
	proxy.cutAll() // the silent links
	if err := d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: ref, Old: []byte("1"), New: []byte("2")}}}); err != nil {
		t.Fatalf("Commit once the server answers again: %v", err)
	}
}

// TestCommitAfterIdleLinksCut: the pool's idle connections lose their
// server end (a database or proxy restart) while no write runs; the next
// Commit, a PutImmutable, a Get and a GetMany run again on fresh
// connections and succeed.
// Before, a BEGIN on such a connection failed with pgconn.ErrConnClosed,
// which was not taken for a failed link: the Commit returned a plain
// error, and a store over the driver stopped taking writes.
func TestCommitAfterIdleLinksCut(t *testing.T) {
	ctx := context.Background()
	_, d, proxy := proxiedDrivers(t, pgkv.Options{})
	ref := []byte("ref\x00main")
	for i, v := range []string{"1", "2", "3"} {
		b := kv.Batch{Sets: []kv.Record{{Key: ref, Value: []byte(v)}}}
		if i > 0 {
			b = kv.Batch{Swaps: []kv.Swap{{Key: ref, Old: []byte{v[0] - 1}, New: []byte(v)}}}
		}
		if err := d.Commit(ctx, b); err != nil {
			t.Fatalf("Commit %d, after the idle links were cut: %v", i, err)
		}
		if err := d.PutImmutable(ctx, []kv.Record{{Key: []byte("node\x00" + v), Value: []byte(v)}}); err != nil {
			t.Fatalf("PutImmutable %d, after the idle links were cut: %v", i, err)
		}
		proxy.cutAll()
	}
	if v, err := d.Get(ctx, ref); err != nil || string(v) != "3" {
		t.Fatalf("Get after the idle links were cut: ref %q (%v), want 3", v, err)
	}
	proxy.cutAll()
	if vs, err := d.GetMany(ctx, [][]byte{ref, []byte("node\x002")}); err != nil || string(vs[0]) != "3" || string(vs[1]) != "2" {
		t.Fatalf("GetMany after the idle links were cut: %q (%v), want 3 and 2", vs, err)
	}
}

// openStoreThrough opens a store over a driver that reaches the test
// server through a proxy, on a fresh schema, with a context "c".
func openStoreThrough(t *testing.T) (*store.Store, *pgkv.Driver, *pgProxy) {
	t.Helper()
	ctx := context.Background()
	_, d, proxy := proxiedDrivers(t, pgkv.Options{})
	s, err := store.Open(ctx, store.Options{Driver: d, ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s, d, proxy
}

// noteCommit commits one artifact id into context c of s.
func noteCommit(ctx context.Context, s *store.Store, id string) (store.CommitResult, error) {
	return s.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: id,
		Ops: []graph.Op{{Op: graph.OpPut, ID: id, Type: "note", Data: []byte(`{"text":"` + id + `"}`)}}})
}

// TestStoreAfterIdleLinksCut: a store on PostgreSQL takes a hold of a
// context for each commit group (Lock) on a pooled connection; when the
// pool's idle connections lose their server end between commits (a
// database or proxy restart), each commit still lands: the hold runs
// again on a fresh connection. Before, most of them failed with
// "hold contexts: pgkv: lock: unexpected EOF" (500 internal).
func TestStoreAfterIdleLinksCut(t *testing.T) {
	ctx := context.Background()
	s, _, proxy := openStoreThrough(t)
	for i := range 10 {
		proxy.cutAll()
		if _, err := noteCommit(ctx, s, fmt.Sprintf("n%d", i)); err != nil {
			t.Fatalf("commit %d after the idle links were cut: %v", i, err)
		}
	}
}

// TestStoreWriteServerDown: with the database refusing connections, a
// commit is refused with an error wrapping kv.ErrNotWritten (503
// unavailable at the API) once the driver's retries are spent, and the
// store takes the next commit once the database is back. Before, the
// hold's first failed connect was a plain error (500 internal).
func TestStoreWriteServerDown(t *testing.T) {
	ctx := context.Background()
	s, d, proxy := openStoreThrough(t)
	if _, err := noteCommit(ctx, s, "before"); err != nil {
		t.Fatal(err)
	}
	pgkv.SetRetryWindow(d, 2*time.Second)
	proxy.refuse(true)
	proxy.cutAll()
	start := time.Now()
	_, err := noteCommit(ctx, s, "down")
	t.Logf("commit with the database refusing connections: %v, after %s", err, time.Since(start).Round(time.Millisecond))
	if !errors.Is(err, kv.ErrNotWritten) || errors.Is(err, kv.ErrOutcomeUnknown) {
		t.Fatalf("commit with the database refusing connections: %v, want an error wrapping kv.ErrNotWritten", err)
	}
	proxy.refuse(false)
	res, err := noteCommit(ctx, s, "after")
	if err != nil {
		t.Fatalf("commit once the database takes connections again: %v", err)
	}
	if got := res.Commit.Artifacts; got != 2 {
		t.Fatalf("artifacts after the refused commit and the next: %d, want 2 (before, after)", got)
	}
}

// TestLockToSilentServer: a hold asked of a server that takes connections
// and never answers, its open connections gone, fails each connect after
// the connect timeout and runs again until the caller's time runs out;
// the error then wraps kv.ErrNotWritten (the server's trouble: 503
// unavailable through a store), not the caller's deadline alone, which a
// store takes for other processes' holds (409 stale). Once the server
// answers again a hold is taken.
func TestLockToSilentServer(t *testing.T) {
	_, d, proxy := proxiedDrivers(t, pgkv.Options{ConnectTimeout: 500 * time.Millisecond})
	keys := [][]byte{[]byte("ctx\x00c")}
	proxy.hush(true)
	proxy.cutAll()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	h, err := d.Lock(ctx, keys)
	t.Logf("Lock of a silent server: %v, after %s", err, time.Since(start).Round(time.Millisecond))
	if err == nil {
		h.Release()
		t.Fatal("Lock of a silent server succeeded")
	}
	if !errors.Is(err, kv.ErrNotWritten) {
		t.Fatalf("Lock of a silent server until the caller's deadline: %v, want an error wrapping kv.ErrNotWritten", err)
	}
	proxy.hush(false)
	proxy.cutAll()
	h, err = d.Lock(context.Background(), keys)
	if err != nil {
		t.Fatalf("Lock once the server answers again: %v", err)
	}
	h.Release()
}
