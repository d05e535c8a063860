package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/artifactd/artifactd/internal/testenv"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
)

// EnvDSN is the environment variable that names the test database.
const EnvDSN = "ARTIFACTD_TEST_POSTGRES"

// clearTimeout bounds the deletion of a test schema's records.
const clearTimeout = time.Minute

// NewSchema returns the name of a schema no other test uses (prefix, the
// time and a random number) in the database dsn names, and registers the
// deletion of its records for when t ends. Registered first, it runs
// after the cleanups the test registers later (the stores and drivers
// over the schema are closed by then).
func NewSchema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	schema := fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), clearTimeout)
		defer cancel()
		if err := Clear(ctx, dsn, schema); err != nil {
			t.Errorf("clear schema %s: %v", schema, err)
		}
	})
	return schema
}

// Clear deletes every record of schema in the database dsn names.
func Clear(ctx context.Context, dsn, schema string) error {
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
	if err != nil {
		return err
	}
	defer d.Close()
	var keys [][]byte
	if err := d.Scan(ctx, nil, nil, 0, func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := d.Commit(ctx, kv.Batch{Deletes: keys[:n]}); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// DSN returns the test database's DSN (EnvDSN). Without one the test
// fails when CI is set — .ci/run starts a database, so a missing one is
// a broken run — and is skipped otherwise.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		testenv.Missing(t, "%s is not set: no PostgreSQL to test against (e.g. %s=postgres://user@127.0.0.1:5432/db?sslmode=disable; .ci/run starts one)", EnvDSN, EnvDSN)
	}
	return dsn
}
