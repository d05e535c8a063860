package badgerkv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/dgraph-io/badger/v4/fb"
)

func TestMappingsUnder(t *testing.T) {
	maps := "" +
		"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/artifactd\n" +
		"7f0000000000-7f0000400000 rw-s 00000000 fd:01 101   /data/db/000001.sst\n" +
		"7f0000400000-7f0004400000 rw-s 00000000 fd:01 102   /data/db/00005.mem\n" +
		"7f0004400000-7f0004401000 r--s 00000000 fd:01 103   /data/db/with space/000002.sst\n" +
		"7f0004401000-7f0004402000 rw-s 00000000 fd:01 104   /data/db2/000003.sst\n" +
		"7f0004402000-7f0004403000 rw-s 00000000 fd:01 105   /data/db/000004.sst (deleted)\n" +
		"7f0004403000-7f0004404000 rw-p 00000000 00:00 0 \n" +
		"7f0004404000-7f0004405000 rw-p 00000000 00:00 0     [heap]\n" +
		"garbage line\n" +
		"zz-7f0004406000 rw-s 00000000 fd:01 106   /data/db/000005.sst\n" +
		"7f0004407000-7f0004406000 rw-s 00000000 fd:01 107   /data/db/000006.sst\n" +
		"7f0004408000-7f0004409000 rw-s 00000000 fd:01 108   /data/db/000007.sst\n" +
		"7f000440a000-7f000440b000 rw-s 0000zz00 fd:01 109   /data/db/000008.sst\n" +
		"7f000440c000-7f000440e000 r--s 00003000 fd:01 110   /data/db/000009.vlog"
	got := mappingsUnder([]byte(maps), "/data/db")
	want := []mapping{
		{span{0x7f0000000000, 0x7f0000400000}, "/data/db/000001.sst", 0},
		{span{0x7f0000400000, 0x7f0004400000}, "/data/db/00005.mem", 0},
		{span{0x7f0004400000, 0x7f0004401000}, "/data/db/with space/000002.sst", 0},
		{span{0x7f0004408000, 0x7f0004409000}, "/data/db/000007.sst", 0},
		{span{0x7f000440c000, 0x7f000440e000}, "/data/db/000009.vlog", 0x3000},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mappingsUnder:\n got %+v\nwant %+v", got, want)
	}
	if got := mappingsUnder(nil, "/data/db"); len(got) != 0 {
		t.Fatalf("no maps: %x", got)
	}
}

func TestStartTrimmerOff(t *testing.T) {
	if tr := startTrimmer(t.TempDir(), -1, nil); tr != nil {
		t.Fatal("a negative budget started a trimmer")
	}
	var tr *trimmer
	tr.close() // a driver without a trimmer closes it all the same
}

// TestTrimStages: write-ahead logs first, value logs next, then the
// tables' data blocks, and last their indexes (from the page holding the
// index's first byte) with files of any other kind. A table whose index
// is unknown is paged out whole with the data; one mapped from past its
// index start (never so in Badger) goes whole with the indexes.
func TestTrimStages(t *testing.T) {
	const base = 0x7f0000000000
	m := func(lo, hi uintptr, path string, off uint64) mapping {
		return mapping{span{base + lo, base + hi}, path, off}
	}
	mapped := []mapping{
		m(0x0000, 0x9000, "/d/000001.sst", 0),        // index at 0x6100: data to 0x6000
		m(0x10000, 0x20000, "/d/000002.vlog", 0),     //
		m(0x20000, 0x22000, "/d/00003.mem", 0),       //
		m(0x30000, 0x34000, "/d/000004.sst", 0),      // index unknown
		m(0x40000, 0x41000, "/d/000005.sst", 0),      // index at 0x800: its page is the first
		m(0x50000, 0x52000, "/d/000006.sst", 0x3000), // index at 0x2000, before the mapping
		m(0x60000, 0x61000, "/d/MANIFEST", 0),        //
		m(0x70000, 0x73000, "/d/000007.sst", 0x1000), // index at 0x3000: data 0x70000-0x72000
		m(0x80000, 0x81000, "/d/000008.sst", 0),      // index at 0x5000, past the mapping
	}
	index := map[string]int64{"/d/000001.sst": 0x6100, "/d/000005.sst": 0x800, "/d/000006.sst": 0x2000, "/d/000007.sst": 0x3000, "/d/000008.sst": 0x5000}
	got := trimStages(mapped, func(p string) (int64, bool) { at, ok := index[p]; return at, ok })
	s := func(lo, hi uintptr) span { return span{base + lo, base + hi} }
	want := [][]span{
		{s(0x20000, 0x22000)},
		{s(0x10000, 0x20000)},
		{s(0x0000, 0x6000), s(0x30000, 0x34000), s(0x70000, 0x72000), s(0x80000, 0x81000)},
		{s(0x6000, 0x9000), s(0x40000, 0x41000), s(0x50000, 0x52000), s(0x60000, 0x61000), s(0x72000, 0x73000)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d stages, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("stage %d:\n got %x\nwant %x", i, got[i], want[i])
		}
	}
}

// TestTableIndexStart reads the footer of every table Badger wrote and
// checks the index found there against the table itself: it decodes as
// Badger's index, counts keys, and its data blocks lie back to back from
// the start of the file up to the index's first byte.
func TestTableIndexStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Open(ctx, Options{Dir: dir, MemTableSize: 1 << 20, MappedBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < 40_000; lo += 1000 {
		recs := make([]kv.Record, 0, 1000)
		for i := lo; i < lo+1000; i++ {
			recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "key%08d", i), Value: bytes.Repeat([]byte{byte(i)}, 100)})
		}
		if err := d.PutSame(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no tables: %v", err)
	}
	for _, path := range tables {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		at, err := tableIndexStart(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		chk := int64(binary.BigEndian.Uint32(raw[len(raw)-4:]))
		end := int64(len(raw)) - 8 - chk // the index ends where its length is
		if at <= 0 || at >= end {
			t.Fatalf("%s: index at %d of %d bytes", path, at, len(raw))
		}
		idx := fb.GetRootAsTableIndex(raw[at:end], 0)
		if idx.KeyCount() == 0 || idx.OffsetsLength() == 0 {
			t.Fatalf("%s: index at %d: %d keys, %d blocks", path, at, idx.KeyCount(), idx.OffsetsLength())
		}
		next := uint32(0)
		var bo fb.BlockOffset
		for i := range idx.OffsetsLength() {
			if !idx.Offsets(&bo, i) || bo.Offset() != next || bo.Len() == 0 {
				t.Fatalf("%s: block %d at %d (%d bytes), want it at %d", path, i, bo.Offset(), bo.Len(), next)
			}
			next += bo.Len()
		}
		if int64(next) != at {
			t.Fatalf("%s: blocks end at %d, the index starts at %d", path, next, at)
		}
	}
	// A table whose index is not all written yet (or was damaged) does
	// not match its checksum.
	raw, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	at, err := tableIndexStart(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[at+10] ^= 0xff
	torn := filepath.Join(dir, "torn.sst")
	if err := os.WriteFile(torn, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tableIndexStart(torn); !errors.Is(err, errIndexUnwritten) {
		t.Fatalf("an index with a flipped byte: %v", err)
	}
	// The trimmer asks again about a table whose index did not match (it
	// may be half written), and not about one it could not read.
	tr := &trimmer{}
	if _, ok := tr.indexStart(torn); ok || len(tr.indexes) != 0 {
		t.Fatalf("a torn table: cached %v", tr.indexes)
	}
	raw[at+10] ^= 0xff
	if err := os.WriteFile(torn, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := tr.indexStart(torn); !ok || got != at {
		t.Fatalf("the table written in full: %d, %v; want %d", got, ok, at)
	}
	if _, ok := tr.indexStart(filepath.Join(dir, "missing.sst")); ok || tr.indexes[filepath.Join(dir, "missing.sst")] != -1 {
		t.Fatalf("a missing table: %v", tr.indexes)
	}
	tr.forgetIndexes([]mapping{{path: torn}})
	if len(tr.indexes) != 1 || tr.indexes[torn] != at {
		t.Fatalf("after forgetting what is not mapped: %v", tr.indexes)
	}
	if _, err := tableIndexStart(filepath.Join(dir, "missing.sst")); err == nil {
		t.Fatal("a missing table has an index")
	}
	short := filepath.Join(dir, "short.sst")
	if err := os.WriteFile(short, []byte{0, 0, 0, 9}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tableIndexStart(short); err == nil {
		t.Fatal("a 4-byte file has an index")
	}
	t.Logf("%d tables", len(tables))
}

func TestDecodeChecksum(t *testing.T) {
	for _, c := range []struct {
		in        []byte
		algo, sum uint64
		ok        bool
	}{
		{[]byte{0x10, 0x96, 0x01}, 0, 150, true},     // sum only: CRC-32C, as Badger writes it
		{[]byte{0x08, 0x01, 0x10, 0x05}, 1, 5, true}, // xxHash64
		{nil, 0, 0, true},                            // both zero
		{[]byte{0x10}, 0, 0, false},                  // no value
		{[]byte{0x12, 0x01, 0x00}, 0, 0, false},      // a length-delimited field
		{[]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, 0, false}, // varint overflow
	} {
		algo, sum, err := decodeChecksum(c.in)
		if (err == nil) != c.ok || (c.ok && (algo != c.algo || sum != c.sum)) {
			t.Errorf("decodeChecksum(%x) = %d, %d, %v; want %d, %d (ok %v)", c.in, algo, sum, err, c.algo, c.sum, c.ok)
		}
	}
}
