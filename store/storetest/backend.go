package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
)

// EnvStore selects the store a package's tests run on: "postgres" (a
// schema of its own per test in the database ARTIFACTD_TEST_POSTGRES
// names; .ci/run runs the HTTP and UI packages a second time so), or
// Badger in a temporary directory when unset or "badger".
const EnvStore = "ARTIFACTD_TEST_STORE"

// Backend points so at the backend EnvStore selects. On PostgreSQL the
// test's schema is named after prefix, and its records are deleted when
// the test ends (after the store's own cleanup closes the store, if that
// is registered later). It returns again, which points so at the same
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
	dsn := os.Getenv("ARTIFACTD_TEST_POSTGRES")
	if dsn == "" {
		t.Fatalf("%s=postgres needs ARTIFACTD_TEST_POSTGRES (.ci/run starts a database)", EnvStore)
	}
	ctx := context.Background()
	schema := fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), rand.Uint32())
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
	t.Cleanup(func() {
		d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Errorf("clear schema %s: %v", schema, err)
			return
		}
		defer d.Close()
		var keys [][]byte
		err = d.Scan(ctx, nil, nil, 0, func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil })
		for err == nil && len(keys) > 0 {
			n := min(len(keys), 1000)
			err = d.Commit(ctx, kv.Batch{Deletes: keys[:n]})
			keys = keys[n:]
		}
		if err != nil {
			t.Errorf("clear schema %s: %v", schema, err)
		}
	})
	return open
}
