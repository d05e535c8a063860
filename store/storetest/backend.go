package storetest

import (
	"context"
	"os"
	"testing"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// EnvStore selects the store a package's tests run on: "postgres" (a
// schema of its own per test in the database ARTIFACTD_TEST_POSTGRES
// names; .ci/run runs the HTTP and UI packages a second time so), or
// Badger in a temporary directory when unset or "badger".
const EnvStore = "ARTIFACTD_TEST_STORE"

// Backend points so at the backend EnvStore selects. On PostgreSQL the
// test's schema is named after prefix, and its records are deleted when
// the test ends, after the store's own cleanup closes the store. It returns again, which points so at the same
// store anew for a test that closes its store and opens it again (a
// store's Close closes its driver): on PostgreSQL a new driver over the
// same schema, closed when the test ends; on Badger nothing (so.Dir
// names the store).
func Backend(t testing.TB, so *store.Options, prefix string) (again func(so *store.Options)) {
	t.Helper()
	switch b := os.Getenv(EnvStore); b {
	case "", "badger":
		return func(*store.Options) {}
	case "postgres":
	default:
		t.Fatalf("%s=%q: want badger or postgres", EnvStore, b)
	}
	dsn := os.Getenv(pgtest.EnvDSN)
	if dsn == "" {
		t.Fatalf("%s=postgres needs %s (.ci/run starts a database)", EnvStore, pgtest.EnvDSN)
	}
	ctx := context.Background()
	schema := pgtest.NewSchema(t, dsn, prefix)
	open := func(so *store.Options) {
		drv, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatalf("open PostgreSQL: %v", err)
		}
		so.Driver = drv
		so.ReserveBytes = -1 // no data directory whose free space to watch
		t.Cleanup(func() { _ = drv.Close() })
	}
	open(so)
	return open
}
