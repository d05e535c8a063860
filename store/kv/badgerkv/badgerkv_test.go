package badgerkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestConformanceTreeOnly runs the suite with every value in Badger's
// tree, as stores written before the value log was used have them.
func TestConformanceTreeOnly(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Driver {
		d, err := badgerkv.Open(context.Background(), badgerkv.Options{Dir: t.TempDir(), MemTableSize: testMemTable, ValueThreshold: -1})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// TestValueLog checks where values land — past the threshold in the value
// log, below it (or with the threshold off) not — and that a value-log
// collection after deletes keeps every live value, across a reopen.
func TestValueLog(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		threshold int64
		size      int
		inLog     bool
	}{
		{"large", 0, 4 << 10, true},
		{"small", 0, 200, false},
		{"tree only", -1, 4 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := badgerkv.Open(ctx, badgerkv.Options{Dir: dir, MemTableSize: testMemTable, ValueThreshold: tc.threshold})
			if err != nil {
				t.Fatal(err)
			}
			value := func(i int) []byte {
				v := bytes.Repeat([]byte{'x'}, tc.size)
				copy(v, fmt.Sprintf("marker-%05d-", i))
				return v
			}
			const n = 600
			for start := 0; start < n; start += 100 {
				var b kv.Batch
				for i := start; i < start+100; i++ {
					b.Sets = append(b.Sets, kv.Record{Key: fmt.Appendf(nil, "k%05d", i), Value: value(i)})
				}
				if err := d.Commit(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			var del kv.Batch
			for i := 0; i < n; i += 2 {
				del.Deletes = append(del.Deletes, fmt.Appendf(nil, "k%05d", i))
			}
			if err := d.Commit(ctx, del); err != nil {
				t.Fatal(err)
			}
			if err := d.Flatten(1); err != nil {
				t.Fatal(err)
			}
			if err := d.CollectValueLog(); err != nil {
				t.Fatal(err)
			}
			if got := kvtest.FilesHold(t, filepath.Join(dir, "*.vlog"), []byte("marker-00001-")); got != tc.inLog {
				t.Fatalf("value log holds a %d-byte value: %v, want %v", tc.size, got, tc.inLog)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d, err = badgerkv.Open(ctx, badgerkv.Options{Dir: dir, MemTableSize: testMemTable, ValueThreshold: tc.threshold})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			for i := range n {
				v, err := d.Get(ctx, fmt.Appendf(nil, "k%05d", i))
				switch {
				case i%2 == 0 && !errors.Is(err, kv.ErrNotFound):
					t.Fatalf("deleted k%05d reads %d bytes, err %v", i, len(v), err)
				case i%2 == 0:
				case err != nil:
					t.Fatal(err)
				case !bytes.Equal(v, value(i)):
					t.Fatalf("k%05d reads %d bytes, not its value", i, len(v))
				}
			}
		})
	}
}
