//go:build linux

package badgerkv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/artifactd/artifactd/store/kv"
	"golang.org/x/sys/unix"
)

func TestParseRssFile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Name:\tx\nVmRSS:\t  9000 kB\nRssAnon:\t  100 kB\nRssFile:\t    2048 kB\nRssShmem:\t0 kB\n", 2048 << 10, true},
		{"Name:\tx\nRssFile:\t0 kB", 0, true},
		{"Name:\tx\nRssAnon:\t1 kB\n", 0, false},
		{"Name:\tx\nRssFile:\tlots kB\n", 0, false},
		{"Name:\tx\nRssFile:\t12 MB\n", 0, false},
	} {
		got, err := parseRssFile([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseRssFile(%q) = %d, %v; want %d (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestTrimPagesOut writes 48 MB through a driver (small memtables, so most
// of it lands in tables written through memory maps), reads it all back so
// every page is resident, and has the trimmer page the data directory's
// mappings out: the resident file-backed size must fall by most of what
// the data added, and every value must read back unchanged.
func TestTrimPagesOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Open(ctx, Options{Dir: dir, MemTableSize: 8 << 20, MappedBytes: -1, BlockCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.trim != nil {
		t.Fatal("MappedBytes -1 started a trimmer")
	}
	before, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n, size = 12_000, 4 << 10
	val := func(i int) []byte {
		b := make([]byte, size)
		r := rand.New(rand.NewPCG(uint64(i), 9))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		return b
	}
	for lo := 0; lo < n; lo += 500 {
		recs := make([]kv.Record, 0, 500)
		for i := lo; i < lo+500; i++ {
			recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "k%06d", i), Value: val(i)})
		}
		// PutImmutable: Badger's own (mapped) files, never a pack.
		if err := d.PutImmutable(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func() {
		t.Helper()
		for _, i := range rng.Perm(n) {
			v, err := d.Get(ctx, fmt.Appendf(nil, "k%06d", i))
			if err != nil || !bytes.Equal(v, val(i)) {
				t.Fatalf("key %d: %d bytes, %v", i, len(v), err)
			}
		}
	}
	readAll()
	loaded, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	grown := loaded - before
	if grown < 24<<20 {
		t.Fatalf("resident file-backed size grew by %d MB only: the data is not read through maps", grown>>20)
	}
	// Started through a symbolic link, the trimmer names the directory
	// as the kernel names its mappings.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	started := startTrimmer(link, 1<<40, slog.New(slog.DiscardHandler)) // a budget never reached
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if started == nil || started.dir != real || started.base <= 0 {
		t.Fatalf("trimmer started through %s: %+v; want dir %s", link, started, real)
	}
	started.close()
	tr := &trimmer{dir: started.dir, base: before, budget: 1}
	advised, err := tr.trim()
	if err != nil {
		t.Fatal(err)
	}
	after, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("resident file-backed: %d MB before, %d MB with the data read, %d MB after paging out %d MB of mappings",
		before>>20, loaded>>20, after>>20, advised>>20)
	if advised < grown {
		t.Fatalf("advised %d MB of mappings, less than the %d MB the data added", advised>>20, grown>>20)
	}
	if freed := loaded - after; freed < grown*3/4 {
		t.Fatalf("paging out freed %d MB of the %d MB the data added", freed>>20, grown>>20)
	}
	readAll()
}

// TestPageOutKeepsDirtyPages writes through a shared writable mapping, as
// Badger writes its memtable logs and new tables, pages the range out
// before anything synced it, and reads the file: every byte written must
// be there, both through the file and through the mapping touched again,
// and the pages must have left the process's resident size.
func TestPageOutKeepsDirtyPages(t *testing.T) {
	const size = 16 << 20
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "mapped"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	want := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	before, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	copy(m, want)
	dirty, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	if dirty-before < size/2 {
		t.Fatalf("writing %d MB through the mapping added %d MB of resident file-backed memory", size>>20, (dirty-before)>>20)
	}
	if err := pageOut(span{uintptr(unsafe.Pointer(&m[0])), uintptr(unsafe.Pointer(&m[0])) + size}); err != nil {
		t.Fatal(err)
	}
	after, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	if dirty-after < size/2 {
		t.Fatalf("paging out freed %d MB of the %d MB mapped", (dirty-after)>>20, size>>20)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the file lost bytes written through the mapping before it was paged out")
	}
	if !bytes.Equal(m, want) {
		t.Fatal("the mapping reads back other bytes after it was paged out")
	}
}

// TestPageOutKeepsAnonymousMemory pages out a private anonymous mapping
// filled with random bytes, as the trimmer would if the Go runtime mapped
// memory where a file of Badger's was when the trimmer read the maps:
// every byte must still be there. Dropping the pages (MADV_DONTNEED)
// would read back zeros.
func TestPageOutKeepsAnonymousMemory(t *testing.T) {
	const size = 4 << 20
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range m {
		m[i] = byte(r.Uint32())
	}
	want := bytes.Clone(m)
	if err := pageOut(span{uintptr(unsafe.Pointer(&m[0])), uintptr(unsafe.Pointer(&m[0])) + size}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m, want) {
		n := 0
		for i := range m {
			if m[i] != want[i] {
				n++
			}
		}
		t.Fatalf("paging out changed %d of %d bytes of anonymous memory", n, size)
	}
}

// residentIn returns how many bytes of the spans are in memory (mincore).
func residentIn(t *testing.T, spans []span) int64 {
	t.Helper()
	var n int64
	for _, s := range spans {
		vec := make([]byte, (s.end-s.start+pageSize-1)/pageSize)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, s.start, s.end-s.start, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore: %v", errno)
		}
		for _, v := range vec {
			if v&1 != 0 {
				n += pageSize
			}
		}
	}
	return n
}

// TestTrimStopsWithinBudget fills a driver with values kept in its tables
// and values kept in its value log, reads them all, and trims with a
// budget that paging out the write-ahead and value logs meets: the
// trimmer must stop there, leaving the tables' pages as they were, and
// with a budget of one byte go on until the tables are paged out too.
func TestTrimStopsWithinBudget(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Open(ctx, Options{Dir: dir, MemTableSize: 4 << 20, MappedBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	val := func(i, size int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2) }
	const n = 20_000
	for lo := 0; lo < n; lo += 500 {
		var recs []kv.Record
		for i := lo; i < lo+500; i++ {
			recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "small%06d", i), Value: val(i, 200)})
			if i%4 == 0 {
				recs = append(recs, kv.Record{Key: fmt.Appendf(nil, "large%06d", i), Value: val(i, 8<<10)})
			}
		}
		// PutImmutable: Badger's own (mapped) files, never a pack.
		if err := d.PutImmutable(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func() {
		t.Helper()
		for i := range n {
			if v, err := d.Get(ctx, fmt.Appendf(nil, "small%06d", i)); err != nil || !bytes.Equal(v, val(i, 200)) {
				t.Fatalf("small %d: %v", i, err)
			}
			if i%4 == 0 {
				if v, err := d.Get(ctx, fmt.Appendf(nil, "large%06d", i)); err != nil || !bytes.Equal(v, val(i, 8<<10)) {
					t.Fatalf("large %d: %v", i, err)
				}
			}
		}
	}
	readAll()
	maps, err := readSelfMaps()
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tables, logs []span
	for _, m := range mappingsUnder(maps, real) {
		if filepath.Ext(m.path) == ".sst" {
			tables = append(tables, m.span)
		} else {
			logs = append(logs, m.span)
		}
	}
	if len(tables) == 0 {
		t.Fatal("no table is mapped")
	}
	resident, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	inTables, inLogs := residentIn(t, tables), residentIn(t, logs)
	if inTables < 1<<20 || inLogs < 8<<20 {
		t.Fatalf("read back: %d KB of tables and %d KB of logs in memory", inTables>>10, inLogs>>10)
	}
	// Within the budget once the logs are paged out, not before.
	tr := &trimmer{dir: real, base: before, budget: resident - before - inLogs/2}
	if _, err := tr.trim(); err != nil {
		t.Fatal(err)
	}
	tablesAfter, logsAfter := residentIn(t, tables), residentIn(t, logs)
	now, err := residentFileBytes()
	if err != nil {
		t.Fatal(err)
	}
	// Dirty log pages stay in the page cache until written back, so the
	// logs are checked through the process's resident size.
	t.Logf("budget %d KB: resident %d → %d KB; tables %d → %d KB, logs %d → %d KB in the page cache",
		tr.budget>>10, (resident-before)>>10, (now-before)>>10, inTables>>10, tablesAfter>>10, inLogs>>10, logsAfter>>10)
	if now-before > tr.budget || tablesAfter < inTables*9/10 {
		t.Fatalf("trimmed to a budget of %d KB: resident %d KB, tables %d → %d KB", tr.budget>>10, (now-before)>>10, inTables>>10, tablesAfter>>10)
	}
	tr.budget = 1
	if _, err := tr.trim(); err != nil {
		t.Fatal(err)
	}
	if left := residentIn(t, tables); left > inTables/4 {
		t.Fatalf("trimmed to one byte: %d of %d KB of tables still in memory", left>>10, inTables>>10)
	}
	readAll()
}
