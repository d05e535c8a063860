package pgkv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/internal/testenv"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/kvtest"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
	"github.com/artifactd/artifactd/store/storetest"
)

// freshSchema returns the name of a schema no test used, dropped at the
// end of the test.
func freshSchema(t testing.TB) string {
	t.Helper()
	dsn := pgtest.DSN(t)
	name := fmt.Sprintf("kvtest_%d_%d", time.Now().UnixNano(), rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
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

func open(ctx context.Context, t testing.TB, schema string, bulk pgkv.BulkMethod) (*pgkv.Driver, error) {
	return pgkv.Open(ctx, pgkv.Options{DSN: pgtest.DSN(t), Schema: schema, Bulk: bulk})
}

func TestConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, bulk := range []struct {
		name string
		m    pgkv.BulkMethod
	}{{"unnest", pgkv.BulkUnnest}, {"copy", pgkv.BulkCopy}} {
		t.Run(bulk.name, func(t *testing.T) {
			kvtest.Run(t, func(t *testing.T) kv.Driver {
				schema := freshSchema(t)
				d, err := pgkv.Open(context.Background(), pgkv.Options{DSN: withApp(dsn, schema), Schema: schema, Bulk: bulk.m})
				if err != nil {
					t.Fatal(err)
				}
				return queuedDriver{Driver: d, dsn: dsn, app: schema}
			})
		})
	}
}

// queuedDriver is a driver whose sessions are named app, which tells the
// conformance suite how many of them wait on a lock (kvtest.LockQueue):
// a hold's waiter is queued once its session waits, however long the
// machine took to send its query.
type queuedDriver struct {
	*pgkv.Driver
	dsn, app string
}

func (d queuedDriver) LockWaiters(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", d.app).Scan(&n)
	return n, err
}

// withApp returns dsn with its sessions named app (application_name).
func withApp(dsn, app string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " application_name=" + app
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "application_name=" + app
}

// TestCrash kills the client mid-commit; the server then finishes or
// aborts what the dead client had in flight. The writer's sessions are
// named after its schema so that the test can wait for them to end.
func TestCrash(t *testing.T) {
	dsn := pgtest.DSN(t)
	kvtest.RunCrash(t, kvtest.CrashTarget{
		Fresh: func(t *testing.T) string { return freshSchema(t) },
		Open: func(ctx context.Context, schema string) (kv.Driver, error) {
			return pgkv.Open(ctx, pgkv.Options{DSN: withApp(dsn, schema), Schema: schema})
		},
		Settle: func(ctx context.Context, schema string) error {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			deadline := time.Now().Add(30 * time.Second)
			for {
				var n int
				err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", schema).Scan(&n)
				if err != nil || n == 0 {
					return err
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d sessions of the killed writer still open after 30s", n)
				}
				time.Sleep(5 * time.Millisecond)
			}
		},
	})
}

func BenchmarkSeam(b *testing.B) {
	for _, bulk := range []struct {
		name string
		m    pgkv.BulkMethod
	}{{"unnest", pgkv.BulkUnnest}, {"copy", pgkv.BulkCopy}} {
		b.Run(bulk.name, func(b *testing.B) {
			kvtest.Bench(b, func(b *testing.B) kv.Driver {
				d, err := open(context.Background(), b, freshSchema(b), bulk.m)
				if err != nil {
					b.Fatal(err)
				}
				return d
			})
		})
	}
}

// TestSharedStores runs three stores, each with its own connection pool,
// on one PostgreSQL schema — three artifactd processes, as far as the
// store can tell — with twelve writers racing on one branch.
func TestSharedStores(t *testing.T) {
	schema := freshSchema(t)
	storetest.RunShared(t, func(t *testing.T) kv.Driver {
		d, err := open(context.Background(), t, schema, pgkv.BulkUnnest)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, 3, 12, 20)
}

// TestStoreBigCommit commits 100,000 artifacts and their edges in one
// commit through a store on PostgreSQL: the immutable records go first,
// in parts, then the small visible transaction; a second store sees the
// whole commit and replays it.
func TestStoreBigCommit(t *testing.T) {
	schema := freshSchema(t)
	took := storetest.RunBigCommit(t, func(t *testing.T) kv.Driver {
		d, err := open(context.Background(), t, schema, pgkv.BulkUnnest)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, 100_000)
	t.Logf("one commit of 100,000 artifacts and 99,999 edges on PostgreSQL: %s; a second store's first read of the head (its whole state map): %s", took.Commit.Round(time.Millisecond), took.ColdRead.Round(time.Millisecond))
}

// BenchmarkStoreWalk reads, through a store on PostgreSQL opened afresh
// (its node cache empty), an old commit of a context of 50,000 artifacts
// over its state map: every artifact from the first ("whole"), and a
// page of 100 from a cursor in the middle ("page") — what a listing of
// a big context, and a filtered page that walks far, cost in round
// trips.
func BenchmarkStoreWalk(b *testing.B) {
	ctx := context.Background()
	schema := freshSchema(b)
	opts := func() store.Options {
		d, err := open(ctx, b, schema, pgkv.BulkUnnest)
		if err != nil {
			b.Fatal(err)
		}
		return store.Options{Driver: d, ReserveBytes: -1}
	}
	s, err := store.Open(ctx, opts())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		b.Fatal(err)
	}
	const n = 50_000
	var old *replay.Commit
	for part := range 5 {
		var ops []graph.Op
		for i := part * n / 5; i < (part+1)*n/5; i++ {
			ops = append(ops, graph.Op{Op: graph.OpPut, ID: fmt.Sprintf("a%06d", i), Type: "note", Data: []byte(`{"text":"a note"}`)})
		}
		res, err := s.Commit(ctx, store.CommitRequest{Context: "c", Author: "b", Message: "part", Ops: ops})
		if err != nil {
			b.Fatal(err)
		}
		old = res.Commit
	}
	if _, err := s.Commit(ctx, store.CommitRequest{Context: "c", Author: "b", Message: "later", Ops: []graph.Op{{Op: graph.OpPut, ID: "later", Type: "note", Data: []byte(`{}`)}}}); err != nil {
		b.Fatal(err)
	}
	_ = s.Close()
	for _, bc := range []struct {
		name   string
		cursor string
		max    int
	}{{"whole", "", n}, {"page", fmt.Sprintf("a%06d", n/2), 100}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s, err := store.Open(ctx, opts())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				got := 0
				err = s.ReadSparse(ctx, "c", old, func(v *store.View) error {
					if !v.State.IsLazy() {
						return fmt.Errorf("the old commit is not read through its map")
					}
					for range v.State.ArtifactsAfter(bc.cursor) {
						if got++; got == bc.max {
							break
						}
					}
					return nil
				})
				b.StopTimer()
				if err != nil || got != bc.max {
					b.Fatalf("%d artifacts, err %v; want %d", got, err, bc.max)
				}
				_ = s.Close()
				b.StartTimer()
			}
		})
	}
}

// TestOpenWithoutCreatePrivilege opens a database that is at the
// driver's schema version as a role that may read and write the tables
// but create nothing (no CREATE on the database or the schema, as
// PostgreSQL 15 gives a role that does not own the database): with the
// tables in Options.Schema, and in the schema its search_path names. An
// up-to-date database needs no DDL.
func TestOpenWithoutCreatePrivilege(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	schema := freshSchema(t)
	d, err := open(ctx, t, schema, pgkv.BulkUnnest)
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := "dml_" + schema
	r, s := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+r+" LOGIN"); err != nil {
		testenv.Missing(t, "the test database's user may not create a role: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop role %s: %v", role, err)
			return
		}
		defer conn.Close(ctx)
		for _, q := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range []string{
		"REVOKE CREATE ON SCHEMA " + s + " FROM PUBLIC",
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + r,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	as, err := asUser(dsn, role)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(ctx, as); err != nil {
		testenv.Missing(t, "the test database does not let a role without a password in: %v", err)
	} else {
		_ = c.Close(ctx)
	}
	for _, c := range []struct {
		name string
		opts pgkv.Options
	}{
		{"schema", pgkv.Options{DSN: as, Schema: schema}},
		{"search_path", pgkv.Options{DSN: withParam(as, "search_path", schema)}},
	} {
		d, err := pgkv.Open(ctx, c.opts)
		if err != nil {
			t.Fatalf("%s: Open as a role that may not create: %v", c.name, err)
		}
		k := []byte("written by " + c.name)
		err = d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: k, Absent: true, New: []byte("v")}}})
		_ = d.Close()
		if err != nil {
			t.Fatalf("%s: Commit as that role: %v", c.name, err)
		}
	}
}

// asUser returns dsn with its user replaced by user (and no password).
func asUser(dsn, user string) (string, error) {
	if !strings.Contains(dsn, "://") {
		return dsn + " user=" + user + " password=''", nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.User = url.User(user)
	return u.String(), nil
}

// withParam returns dsn with the parameter key set to value.
func withParam(dsn, key, value string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " " + key + "=" + value
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + url.QueryEscape(value)
}
