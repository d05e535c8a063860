package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/dgraph-io/badger/v4"
)

func openPackTest(t *testing.T, dir string) *Driver {
	t.Helper()
	d, err := Open(context.Background(), Options{Dir: dir, MemTableSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bulkRecords returns n records of random values, most of them large
// enough to be packed and every tenth below packMinValue, keyed by
// prefix and index.
func bulkRecords(rng *rand.Rand, prefix string, n int) []kv.Record {
	recs := make([]kv.Record, n)
	for i := range recs {
		size := packMinValue + rng.IntN(2000)
		if i%10 == 0 {
			size = rng.IntN(packMinValue)
		}
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs[i] = kv.Record{Key: fmt.Appendf(nil, "%s%06d", prefix, i), Value: v}
	}
	return recs
}

// packFiles returns the names of dir's pack files and their sizes.
func packFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, packDir))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = info.Size()
	}
	return out
}

// keysOf returns the keys of recs, in order.
func keysOf(recs []kv.Record) [][]byte {
	keys := make([][]byte, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys
}

// readsBack checks that every read of the driver gives recs' values: Get,
// GetMany, Scan and ScanReverse over prefix.
func readsBack(t *testing.T, d *Driver, prefix string, recs []kv.Record) {
	t.Helper()
	ctx := context.Background()
	keys := keysOf(recs)
	vals, err := d.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if !bytes.Equal(vals[i], r.Value) {
			t.Fatalf("GetMany %s: %d bytes, want %d", r.Key, len(vals[i]), len(r.Value))
		}
	}
	for _, i := range []int{0, 1, len(recs) / 2, len(recs) - 1} {
		v, err := d.Get(ctx, recs[i].Key)
		if err != nil || !bytes.Equal(v, recs[i].Value) {
			t.Fatalf("Get %s: %d bytes, %v; want %d bytes", recs[i].Key, len(v), err, len(recs[i].Value))
		}
	}
	var scanned []kv.Record
	if err := d.Scan(ctx, []byte(prefix), nil, 0, func(k, v []byte) error {
		scanned = append(scanned, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var reversed []kv.Record
	if err := d.ScanReverse(ctx, []byte(prefix), nil, 0, func(k, v []byte) error {
		reversed = append(reversed, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(reversed)
	for name, got := range map[string][]kv.Record{"Scan": scanned, "ScanReverse": reversed} {
		if len(got) != len(recs) {
			t.Fatalf("%s: %d records, want %d", name, len(got), len(recs))
		}
		for i := range got {
			if !bytes.Equal(got[i].Key, recs[i].Key) || !bytes.Equal(got[i].Value, recs[i].Value) {
				t.Fatalf("%s: record %d is %s (%d bytes), want %s (%d bytes)", name, i, got[i].Key, len(got[i].Value), recs[i].Key, len(recs[i].Value))
			}
		}
	}
}

// TestBulkPutSameIsPacked: a bulk PutSame writes its large values to a
// pack and every read gives them back, before and after a reopen; the
// small values and a small PutSame stay in the tree; writes after a
// reopen go to a new pack file.
func TestBulkPutSameIsPacked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	d := openPackTest(t, dir)
	if got := packFiles(t, dir); len(got) != 0 {
		t.Fatalf("a new store has pack files: %v", got)
	}

	small := bulkRecords(rng, "s/", 20) // about 20 KiB: under packMinBytes
	if err := d.PutSame(ctx, small); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(t, dir); len(got) != 0 {
		t.Fatalf("a small PutSame wrote a pack: %v", got)
	}

	bulk := bulkRecords(rng, "b/", 600)
	if err := d.PutSame(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, r := range bulk {
		if len(r.Value) >= packMinValue {
			want += int64(len(r.Value))
		}
	}
	if got := packFiles(t, dir); len(got) != 1 || got[packName(0)] != want {
		t.Fatalf("pack files after a bulk PutSame: %v, want %s of %d bytes", got, packName(0), want)
	}
	readsBack(t, d, "s/", small)
	readsBack(t, d, "b/", bulk)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = openPackTest(t, dir)
	defer d.Close()
	readsBack(t, d, "s/", small)
	readsBack(t, d, "b/", bulk)
	more := bulkRecords(rng, "m/", 300)
	if err := d.PutSame(ctx, more); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(t, dir); len(got) != 2 || got[packName(0)] != want || got[packName(1)] == 0 {
		t.Fatalf("pack files after a reopen and a bulk PutSame: %v, want %s unchanged and %s new", got, packName(0), packName(1))
	}
	readsBack(t, d, "m/", more)
	readsBack(t, d, "b/", bulk)

	// One GetMany over both packs and the tree, in a shuffled order: the
	// reads coalesced per pack land at their keys.
	all := slices.Concat(small, bulk, more)
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	keys := keysOf(all)
	vals, err := d.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range all {
		if !bytes.Equal(vals[i], r.Value) {
			t.Fatalf("GetMany over both packs: %s has %d bytes, want %d", r.Key, len(vals[i]), len(r.Value))
		}
	}
}

// TestPackedKeysChangeLikeAny: a packed key is replaced by a later Set,
// removed by a Delete, compared by a Swap with its value (not its
// pointer), and kept by PutImmutable, which never packs.
func TestPackedKeysChangeLikeAny(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openPackTest(t, dir)
	defer d.Close()
	bulk := bulkRecords(rand.New(rand.NewPCG(3, 4)), "p/", 200)
	if err := d.PutSame(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	a, b, c, e := bulk[1], bulk[2], bulk[3], bulk[4]
	if err := d.Commit(ctx, kv.Batch{
		Sets:    []kv.Record{{Key: a.Key, Value: []byte("replaced")}},
		Deletes: [][]byte{b.Key},
		Swaps:   []kv.Swap{{Key: c.Key, Old: c.Value, New: []byte("swapped")}},
	}); err != nil {
		t.Fatalf("a swap expecting a packed key's value: %v", err)
	}
	if v, err := d.Get(ctx, a.Key); err != nil || string(v) != "replaced" {
		t.Fatalf("Get after Set: %q, %v", v, err)
	}
	if _, err := d.Get(ctx, b.Key); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if v, err := d.Get(ctx, c.Key); err != nil || string(v) != "swapped" {
		t.Fatalf("Get after Swap: %q, %v", v, err)
	}
	err := d.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: e.Key, Old: []byte("not its value"), New: []byte("x")}}})
	var conflict *kv.ConflictError
	if !errors.As(err, &conflict) || len(conflict.Conflicts) != 1 || !bytes.Equal(conflict.Conflicts[0].Current, e.Value) {
		t.Fatalf("a swap expecting another value of a packed key: %v, want a conflict reporting its value", err)
	}
	if err := d.PutImmutable(ctx, []kv.Record{{Key: e.Key, Value: []byte("other")}}); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Get(ctx, e.Key); err != nil || !bytes.Equal(v, e.Value) {
		t.Fatalf("PutImmutable over a packed key changed it: %d bytes, %v", len(v), err)
	}
}

// TestPackDamageIsCorruption: a packed value whose bytes changed, whose
// pack was cut short or whose pack is gone is a *kv.UnreadableError
// (kv.ErrCorrupt) naming its key, for Get and for Scan; the other values
// still read.
func TestPackDamageIsCorruption(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, off int64)
		why    string
	}{
		{"flipped byte", func(t *testing.T, path string, off int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x40
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}, "fail their checksum"},
		{"cut short", func(t *testing.T, path string, off int64) {
			if err := os.Truncate(path, off); err != nil {
				t.Fatal(err)
			}
		}, "holds no"},
		{"missing", func(t *testing.T, path string, _ int64) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openPackTest(t, dir)
			bulk := bulkRecords(rand.New(rand.NewPCG(5, 6)), "p/", 300)
			if err := d.PutSame(ctx, bulk); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			// The last packed record: at the end of the pack.
			last := len(bulk) - 1
			for len(bulk[last].Value) < packMinValue {
				last--
			}
			var off int64
			for _, r := range bulk[:last] {
				if len(r.Value) >= packMinValue {
					off += int64(len(r.Value))
				}
			}
			tc.damage(t, filepath.Join(dir, packDir, packName(0)), off)

			d = openPackTest(t, dir)
			defer d.Close()
			_, err := d.Get(ctx, bulk[last].Key)
			var lost *kv.UnreadableError
			if !errors.Is(err, kv.ErrCorrupt) || !errors.As(err, &lost) || !bytes.Equal(lost.Key, bulk[last].Key) || !bytes.Contains([]byte(lost.Why), []byte(tc.why)) {
				t.Fatalf("Get of the damaged value: %v, want a *kv.UnreadableError naming %s and saying %q", err, bulk[last].Key, tc.why)
			}
			err = d.Scan(ctx, []byte("p/"), nil, 0, func(k, v []byte) error { return nil })
			if !errors.As(err, &lost) || !bytes.Equal(lost.Key, bulk[last].Key) && tc.name != "missing" {
				t.Fatalf("Scan over the damaged value: %v, want a *kv.UnreadableError naming %s", err, bulk[last].Key)
			}
			keys := keysOf(bulk)
			_, err = d.GetMany(ctx, keys)
			if !errors.As(err, &lost) || !bytes.Equal(lost.Key, bulk[last].Key) && tc.name != "missing" {
				t.Fatalf("GetMany over the damaged value: %v, want a *kv.UnreadableError naming %s", err, bulk[last].Key)
			}
			if tc.name == "missing" {
				return
			}
			if v, err := d.Get(ctx, bulk[last-1].Key); err != nil || !bytes.Equal(v, bulk[last-1].Value) {
				t.Fatalf("Get of an undamaged packed value: %d bytes, %v", len(v), err)
			}
		})
	}
}

// TestPackLeftOverBytes: a crash between writing a pack and the tree
// write that points into it leaves bytes nothing points to, and maybe a
// pack file with nothing in it; the store opens, reads what it had and
// writes its next pack to a new file.
func TestPackLeftOverBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openPackTest(t, dir)
	bulk := bulkRecords(rand.New(rand.NewPCG(7, 8)), "p/", 200)
	if err := d.PutSame(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, packDir, packName(0)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{0xAB}, 5000)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, packDir, packName(1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d = openPackTest(t, dir)
	defer d.Close()
	readsBack(t, d, "p/", bulk)
	more := bulkRecords(rand.New(rand.NewPCG(9, 10)), "q/", 200)
	if err := d.PutSame(ctx, more); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(t, dir); len(got) != 3 || got[packName(2)] == 0 {
		t.Fatalf("pack files: %v, want the next write in %s", got, packName(2))
	}
	readsBack(t, d, "q/", more)
}

func TestPackPtrRoundTrip(t *testing.T) {
	for _, p := range []packPtr{{}, {fid: 1, off: 2, n: 3, crc: 4}, {fid: ^uint32(0), off: ^uint64(0), n: ^uint32(0), crc: ^uint32(0)}} {
		got, ok := decodePackPtr(p.encode())
		if !ok || got != p {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", p, got, ok)
		}
	}
	for _, n := range []int{0, packPtrSize - 1, packPtrSize + 1} {
		if _, ok := decodePackPtr(make([]byte, n)); ok {
			t.Fatalf("a %d-byte pointer decoded", n)
		}
	}
	if packable(make([]byte, packMinValue-1)) || !packable(make([]byte, packMinValue)) {
		t.Fatalf("packable: the smallest packed value is not %d bytes", packMinValue)
	}
	for _, name := range []string{"00000001.pack", "1.pack", "00000001.pack.tmp", "x.pack", "-0000001.pack"} {
		fid, ok := packFid(name)
		if want := name == "00000001.pack"; ok != want || ok && fid != 1 {
			t.Fatalf("packFid(%q) = %d, %v", name, fid, ok)
		}
	}
}

// TestPackSyncFailureStopsWrites: after a pack's sync fails (its data may
// be lost although a later sync succeeds), every later bulk put and
// commit fails, naming the failed sync.
func TestPackSyncFailureStopsWrites(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	d.packs.syncFile = func(*os.File) error { return errors.New("injected sync failure") }
	if err := d.PutSame(ctx, bulkRecords(rng, "a/", 600)); err == nil || !strings.Contains(err.Error(), "injected sync failure") {
		t.Fatalf("bulk put with a failing sync: %v", err)
	}
	d.packs.syncFile = (*os.File).Sync // syncs work again; the failure stays
	if err := d.PutSame(ctx, bulkRecords(rng, "b/", 600)); err == nil || !strings.Contains(err.Error(), "no write is accepted after a failed sync") {
		t.Fatalf("bulk put after a failed sync: %v", err)
	}
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k"), Value: []byte("v")}}}); err == nil || !strings.Contains(err.Error(), "injected sync failure") {
		t.Fatalf("commit after a failed pack sync: %v", err)
	}
}

// TestCommitDoesNotWaitForPackWriter: a commit checks the packs' sticky
// failure without waiting for the pack writer, which holds its lock while
// it writes and syncs a bulk put's pack (milliseconds: the hub scenario's
// unrelated writes waited 15–21 ms there).
func TestCommitDoesNotWaitForPackWriter(t *testing.T) {
	ctx := context.Background()
	d := openPackTest(t, t.TempDir())
	defer d.Close()
	d.packs.mu.Lock() // a pack being written and synced
	done := make(chan error, 1)
	go func() {
		done <- d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k"), Value: []byte("v")}}})
	}()
	select {
	case err := <-done:
		d.packs.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		d.packs.mu.Unlock()
		<-done
		t.Fatal("a commit waited for the pack writer")
	}
}

// TestPackJoinedReadsNameTheDamagedValue: GetMany reads neighbouring
// packed values with one read; a value in the middle of such a run
// whose bytes changed is still a *kv.UnreadableError naming its key,
// and the others, asked in any order and some twice, read back.
func TestPackJoinedReadsNameTheDamagedValue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openPackTest(t, dir)
	rng := rand.New(rand.NewPCG(7, 8))
	bulk := bulkRecords(rng, "p/", 400)
	if err := d.PutSame(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	var packed []int
	for i, r := range bulk {
		if len(r.Value) >= packMinValue {
			packed = append(packed, i)
		}
	}
	mid := packed[len(packed)/2]
	var off int64
	for _, r := range bulk[:mid] {
		if len(r.Value) >= packMinValue {
			off += int64(len(r.Value))
		}
	}
	path := filepath.Join(dir, packDir, packName(0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off+3); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off+3); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	d = openPackTest(t, dir)
	defer d.Close()
	all := slices.Clone(bulk)
	all = append(all, bulk[:50]...) // some keys twice
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	_, err = d.GetMany(ctx, keysOf(all))
	var lost *kv.UnreadableError
	if !errors.As(err, &lost) || !bytes.Equal(lost.Key, bulk[mid].Key) || !bytes.Contains([]byte(lost.Why), []byte("fail their checksum")) {
		t.Fatalf("GetMany over a damaged value amid its neighbours: %v, want a *kv.UnreadableError naming %s", err, bulk[mid].Key)
	}
	rest := slices.DeleteFunc(all, func(r kv.Record) bool { return bytes.Equal(r.Key, bulk[mid].Key) })
	vals, err := d.GetMany(ctx, keysOf(rest))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rest {
		if !bytes.Equal(vals[i], r.Value) {
			t.Fatalf("%s read back %d bytes, want %d", r.Key, len(vals[i]), len(r.Value))
		}
	}
}

// TestPackWildPointerIsCorruption: a packed pointer damaged into asking
// for gigabytes, or for bytes at an offset no file has, is a
// *kv.UnreadableError naming its key, read without allocating what it
// asks for.
func TestPackWildPointerIsCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := openPackTest(t, dir)
	defer d.Close()
	bulk := bulkRecords(rand.New(rand.NewPCG(9, 10)), "p/", 200)
	if err := d.PutSame(ctx, bulk); err != nil {
		t.Fatal(err)
	}
	for _, ptr := range []packPtr{{fid: 0, off: 0, n: 1<<32 - 1}, {fid: 0, off: 1<<64 - 10, n: 200}} {
		key := []byte("wild")
		if err := d.db.Update(func(txn *badger.Txn) error {
			return txn.SetEntry(badger.NewEntry(key, ptr.encode()).WithMeta(metaPacked))
		}); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := d.GetMany(ctx, [][]byte{key})
		runtime.ReadMemStats(&after)
		var lost *kv.UnreadableError
		if !errors.As(err, &lost) || !bytes.Equal(lost.Key, key) || !bytes.Contains([]byte(lost.Why), []byte("holds no")) {
			t.Fatalf("pointer %+v: %v, want a *kv.UnreadableError naming %q", ptr, err, key)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Fatalf("pointer %+v: the read allocated %d bytes", ptr, grew)
		}
	}
}
