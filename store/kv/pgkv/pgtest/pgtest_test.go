package pgtest

import (
	"context"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
)

// TestNewSchemaIsEmptiedWhenTheTestEnds: records a test writes under its
// schema are gone once it ends, after the driver it opened is closed, and
// two tests get two schemas.
func TestNewSchemaIsEmptiedWhenTheTestEnds(t *testing.T) {
	dsn := DSN(t)
	ctx := context.Background()
	var schemas []string
	for range 2 {
		t.Run("user", func(t *testing.T) {
			schema := NewSchema(t, dsn, "pgtest")
			schemas = append(schemas, schema)
			d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			var b kv.Batch
			for _, k := range []string{"a", "b", "c"} {
				b.Sets = append(b.Sets, kv.Record{Key: []byte(k), Value: []byte("1")})
			}
			if err := d.Commit(ctx, b); err != nil {
				t.Fatal(err)
			}
		})
	}
	if len(schemas) != 2 || schemas[0] == schemas[1] {
		t.Fatalf("schemas %v, want two different ones", schemas)
	}
	for _, schema := range schemas {
		d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = d.Scan(ctx, nil, nil, 0, func(_, _ []byte) error { n++; return nil })
		_ = d.Close()
		if err != nil || n != 0 {
			t.Fatalf("schema %s after its test: %d records, %v", schema, n, err)
		}
	}
}
