package badgerkv_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
	"github.com/artifactd/artifactd/store/kv/kvtest"
)

// testMemTable keeps each open small and quick, and the transaction limit
// low enough (about 2.4 MB) that the suite's large batches cross it.
const testMemTable = 16 << 20

func open(t testing.TB, dir string) *badgerkv.Driver {
	d, err := badgerkv.Open(context.Background(), badgerkv.Options{Dir: dir, MemTableSize: testMemTable})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Driver { return open(t, t.TempDir()) })
}

func TestCrash(t *testing.T) {
	kvtest.RunCrash(t, kvtest.CrashTarget{
		Fresh: func(t *testing.T) string { return t.TempDir() },
		Open: func(ctx context.Context, dir string) (kv.Driver, error) {
			return badgerkv.Open(ctx, badgerkv.Options{Dir: dir, MemTableSize: testMemTable})
		},
	})
}

// TestOpenAfterCrashLeftEmptyLogs: a crash between creating a write-ahead
// or value log file and sizing it leaves an empty file, which Badger alone
// refuses to open.
func TestOpenAfterCrashLeftEmptyLogs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := open(t, dir)
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k"), Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00099.mem", "000099.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d = open(t, dir)
	defer d.Close()
	if v, err := d.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after reopening: %q, %v", v, err)
	}
}

// BenchmarkSeam runs with Badger's default memtable, as the store does,
// and a sync per Commit.
func BenchmarkSeam(b *testing.B) {
	kvtest.Bench(b, func(b *testing.B) kv.Driver {
		d, err := badgerkv.Open(context.Background(), badgerkv.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		return d
	})
}
