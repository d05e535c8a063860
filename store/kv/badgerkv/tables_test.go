package badgerkv

import (
	"context"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
)

// TestTableBytes: the tables Badger writes below level 0 are of
// Options.TableBytes (DefaultTableBytes when unset) at every level, not
// Badger's 2 MiB doubling per level: after 8 MiB of records are flushed
// and compacted down, every table below level 0 is at most a little over
// the size asked for, and there are several.
func TestTableBytes(t *testing.T) {
	ctx := context.Background()
	for _, want := range []int64{0, 1 << 20} {
		d, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true, MemTableSize: 1 << 20, TableBytes: want})
		if err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			want = DefaultTableBytes
		}
		if o := d.db.Opts(); o.BaseTableSize != want || o.TableSizeMultiplier != 1 {
			t.Fatalf("Badger opened with tables of %d, ×%d; want %d, ×1", o.BaseTableSize, o.TableSizeMultiplier, want)
		}
		val := make([]byte, 200) // below the value-log threshold: in the tree
		for i := range 40_000 {
			key := fmt.Appendf(nil, "k%08d", (i*7919)%40_000)
			if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: key, Value: val}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.db.Flatten(1); err != nil {
			t.Fatal(err)
		}
		below := 0
		for _, ti := range d.db.Tables() {
			if ti.Level == 0 {
				continue
			}
			below++
			if ti.OnDiskSize > uint32(want+want/4) {
				t.Fatalf("a level-%d table of %d bytes; want at most about %d", ti.Level, ti.OnDiskSize, want)
			}
		}
		if below < 2 {
			t.Fatalf("%d tables below level 0 after 8 MiB", below)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
