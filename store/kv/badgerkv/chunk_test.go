package badgerkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/kvtest"
)

// openChunked opens a driver in dir whose bulk puts give way in chunks
// of at most records records and bytes bytes: every one when always is
// set (a window longer than any time since the zero Unix time of a
// driver that never committed), and otherwise after a commit within a
// minute.
func openChunked(t *testing.T, dir string, records, bytes int, always bool) *Driver {
	t.Helper()
	d, err := Open(context.Background(), Options{Dir: dir, MemTableSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d.chunkRecords, d.chunkBytes, d.giveWay = records, bytes, time.Minute
	if always {
		d.giveWay = time.Duration(math.MaxInt64)
	}
	return d
}

// TestConformanceSmallChunks runs the suite with every bulk put giving
// way in chunks of a few records, so that each put of more than three
// records is written in several Badger writes.
func TestConformanceSmallChunks(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Driver { return openChunked(t, t.TempDir(), 3, 256, true) })
}

// TestChunkEnd checks where a chunk of a bulk put ends: by count, by
// bytes (a packed value counted as its pointer), never empty.
func TestChunkEnd(t *testing.T) {
	rec := func(key string, value int) kv.Record {
		return kv.Record{Key: []byte(key), Value: make([]byte, value)}
	}
	recs := []kv.Record{rec("a", 9), rec("b", 9), rec("c", 99), rec("d", 9), rec("e", 9)} // 10, 10, 100, 10, 10 bytes
	packed := make([]packPtr, len(recs))
	packed[2] = packPtr{n: 99} // c's value is in a pack: 1 + packPtrSize bytes as written
	for _, c := range []struct {
		name        string
		ptrs        []packPtr
		lo          int
		recs, bytes int
		want        int
		why         string
	}{
		{"by count", nil, 0, 2, 1 << 20, 2, "two records"},
		{"count past the end", nil, 3, 5, 1 << 20, 5, "the rest"},
		{"by bytes", nil, 0, 10, 25, 2, "a and b fit, c does not"},
		{"bytes exactly", nil, 0, 10, 20, 2, "a and b make 20"},
		{"first over budget", nil, 2, 10, 25, 3, "c alone passes the budget, but a chunk has a record"},
		{"packed counts its pointer", packed, 0, 10, 45, 3, "a, b and c's pointer make 41, d passes 45"},
		{"unpacked counts its value", nil, 0, 10, 45, 2, "c's 100 bytes pass 45"},
		{"packed from lo", packed, 1, 10, 35, 3, "b and c's pointer make 31, d passes 35"},
		{"no count", nil, 1, 0, 1 << 20, 2, "a chunk has a record"},
		{"one a chunk", nil, 1, 1, 1 << 20, 2, "one record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := chunkEnd(recs, c.ptrs, c.lo, c.recs, c.bytes); got != c.want {
				t.Errorf("chunkEnd(lo %d, %d records, %d bytes) = %d, want %d (%s)", c.lo, c.recs, c.bytes, got, c.want, c.why)
			}
		})
	}
}

// TestCommitsAbout checks when a bulk put gives way: a commit in
// progress, or one begun within the window.
func TestCommitsAbout(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		inProgress int64
		ago        time.Duration
		want       bool
	}{
		{1, time.Hour, true},
		{0, 0, true},
		{0, giveWayWindow - time.Nanosecond, true},
		{0, giveWayWindow, false},
		{0, time.Hour, false},
		{0, 56 * 365 * 24 * time.Hour, false}, // never: the zero Unix time
		{0, -time.Millisecond, true},          // a clock that stepped back: give way
	} {
		if got := commitsAbout(c.inProgress, now.Add(-c.ago), now, giveWayWindow); got != c.want {
			t.Errorf("commitsAbout(%d in progress, last begun %v ago) = %v, want %v", c.inProgress, c.ago, got, c.want)
		}
	}
}

// errAfter is a context whose Err reports context.Canceled from its
// n-th call on.
type errAfter struct {
	context.Context
	n int
}

func (c *errAfter) Err() error {
	if c.n--; c.n <= 0 {
		return context.Canceled
	}
	return nil
}

// TestPutGivesWayInChunks cancels bulk puts part way. A put that gives
// way — while a commit is in progress, after a commit (a non-empty one:
// an empty Commit writes nothing and does not count), or with an endless
// window — stops at a chunk's end, with the chunks before it stored whole
// and nothing after them; one with no commit about is one batch, stored
// whole or not at all. For PutSame (its values packed, but for
// every tenth, which stays in the tree) and for PutImmutable, which keeps
// stored values.
func TestPutGivesWayInChunks(t *testing.T) {
	const chunk, total = 16, 90 // 90 values of about 1 KiB: past packMinBytes
	rng := rand.New(rand.NewPCG(4, 22))
	for _, c := range []struct {
		name string
		put  func(d *Driver, ctx context.Context, recs []kv.Record) error
	}{
		{"PutSame", func(d *Driver, ctx context.Context, recs []kv.Record) error { return d.PutSame(ctx, recs) }},
		{"PutImmutable", func(d *Driver, ctx context.Context, recs []kv.Record) error { return d.PutImmutable(ctx, recs) }},
	} {
		for _, mode := range []string{"always", "committing", "committed", "alone", "empty commit"} {
			for calls := 3; calls <= 5; calls++ {
				t.Run(fmt.Sprintf("%s/%s/%d", c.name, mode, calls), func(t *testing.T) {
					dir := t.TempDir()
					d := openChunked(t, dir, chunk, 1<<20, mode == "always")
					defer d.Close()
					switch mode {
					case "committing":
						d.committing.Add(1) // as during another goroutine's Commit
					case "committed", "empty commit":
						b := kv.Batch{}
						if mode == "committed" {
							b.Sets = []kv.Record{{Key: []byte("ref"), Value: []byte("c")}}
						}
						if err := d.Commit(context.Background(), b); err != nil {
							t.Fatal(err)
						}
					}
					recs := bulkRecords(rng, "k", total)
					err := c.put(d, &errAfter{Context: context.Background(), n: calls}, recs)
					stored := storedPrefix(t, d, recs)
					if c.name == "PutSame" && stored > 0 && len(packFiles(t, dir)) == 0 {
						t.Fatal("nothing packed: the test no longer puts packed values")
					}
					switch {
					case mode == "alone" || mode == "empty commit":
						if err != nil || stored != total {
							t.Fatalf("a put alone, cancelled after %d checks: %v, %d of %d stored; want one batch, stored whole", calls, err, stored, total)
						}
					case !errors.Is(err, context.Canceled):
						t.Fatalf("put with a context cancelled after %d checks: %v, want context.Canceled", calls, err)
					case stored == 0 || stored == total || stored%chunk != 0:
						t.Fatalf("%d of %d records stored; want a whole number of chunks of %d, some but not all", stored, total, chunk)
					}
					// The rest goes in on a second put.
					if err := c.put(d, context.Background(), recs); err != nil {
						t.Fatal(err)
					}
					readsBack(t, d, "k", recs)
				})
			}
		}
	}
}

// storedPrefix returns how many of recs, from the first, read back with
// their values, and fails t unless none after them is stored.
func storedPrefix(t *testing.T, d *Driver, recs []kv.Record) int {
	t.Helper()
	vals, err := d.GetMany(context.Background(), keysOf(recs))
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for stored < len(vals) && vals[stored] != nil {
		if string(vals[stored]) != string(recs[stored].Value) {
			t.Fatalf("record %d reads back other bytes", stored)
		}
		stored++
	}
	for i := stored; i < len(vals); i++ {
		if vals[i] != nil {
			t.Fatalf("records 0..%d stored, then %d too: not a prefix", stored-1, i)
		}
	}
	return stored
}
