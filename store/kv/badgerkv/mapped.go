package badgerkv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultMappedBytes is the default of Options.MappedBytes.
const DefaultMappedBytes = 64 << 20

// trimEvery is how often the driver compares the process's resident
// file-backed pages with Options.MappedBytes. The comparison reads
// /proc/self/status (microseconds); what costs is paging out, which only
// happens past the budget. A second was too long: a bulk commit into a
// context of a million artifacts maps 60 MB or more of new tables and
// logs within one, and the process's peak resident size went past the
// budget by that much between two looks (docs/BENCHMARKS.md, "The mapped
// pages' bound between two looks").
const trimEvery = 100 * time.Millisecond

// Badger v4 reads its tables, write-ahead logs and value logs through
// memory maps and writes new tables into them. Every page it touched
// stays mapped, so the process's resident size grows with the data (about
// 200 MB per 1,000 agent runs) although the kernel could drop those pages
// at any time: they are page cache, not memory the process owns. Monitors
// and memory limits count them all the same. The trimmer bounds them:
// ten times a second it reads the process's resident file-backed size, less
// what it was when the driver opened (the binary's own pages, shared
// libraries), and when that passes the budget it asks the kernel to page
// out the mappings of files in the data directory (madvise MADV_PAGEOUT,
// Linux 5.4 and later; see pageOut), least useful first (trimStages):
// the memtables' write-ahead logs, which Badger writes and reads back
// only when it opens; then the value logs; then the tables' data blocks;
// and only then the tables' indexes and bloom filters, which every point
// read consults, table after table, while it reads one data block. It
// reads the resident size again after each stage and stops as soon as it
// is within the budget. Paging out is advice, never a change of contents:
// a page Badger reads again is read back from the file, and a range that
// Badger unmapped meanwhile (or that the runtime mapped anew) loses
// nothing. Badger's block cache and the store's caches above it keep
// what is read often.

// trimmer pages out the data directory's mapped files (see above).
type trimmer struct {
	dir    string // cleaned, absolute, symbolic links resolved (as the kernel names mappings)
	budget int64
	// base is the resident file-backed size when the trimmer started:
	// pages that are not the data directory's.
	base int64
	// indexes holds where each mapped table's index begins (tableIndexStart),
	// by path; only the trimmer's goroutine uses it.
	indexes map[string]int64
	log     *slog.Logger
	stop    chan struct{}
	done    sync.WaitGroup
}

// startTrimmer starts the trimmer of dir's mappings, or returns nil when
// the budget is negative or the platform cannot page mappings out.
func startTrimmer(dir string, budget int64, log *slog.Logger) *trimmer {
	if budget < 0 || !canPageOut {
		return nil
	}
	if budget == 0 {
		budget = DefaultMappedBytes
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	base, err := residentFileBytes()
	if err != nil {
		log.Warn("badgerkv: cannot read the resident size; mapped files will not be paged out", "err", err)
		return nil
	}
	t := &trimmer{dir: abs, budget: budget, base: base, log: log, stop: make(chan struct{})}
	t.done.Add(1)
	go t.loop()
	return t
}

func (t *trimmer) loop() {
	defer t.done.Done()
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		advised, err := t.trim()
		switch {
		case errors.Is(err, errPageOutUnsupported):
			// An old kernel or a sandbox refuses every time; the store
			// works without it, and reading the maps every tick would
			// only cost.
			t.log.Warn("badgerkv: the kernel cannot page out mapped files; resident size will include them", "err", err)
			return
		case err != nil && !warned:
			warned = true
			t.log.Warn("badgerkv: paging out mapped files failed", "err", err)
		case err == nil && advised < 0 && !warned:
			warned = true
			t.log.Warn("badgerkv: resident file-backed memory is over Options.MappedBytes, but no mapping of the data directory was found", "dir", t.dir)
		}
	}
}

// trim pages out the data directory's mappings when the resident
// file-backed size (less t.base) is over the budget, a stage at a time
// (trimStages) until it is within it, and says how many bytes of
// mappings it advised: -1 when it was over but found none.
func (t *trimmer) trim() (int64, error) {
	resident, err := residentFileBytes()
	if err != nil || resident-t.base <= t.budget {
		return 0, err
	}
	maps, err := readSelfMaps()
	if err != nil {
		return 0, err
	}
	mapped := mappingsUnder(maps, t.dir)
	if len(mapped) == 0 {
		return -1, nil
	}
	var advised int64
	for _, stage := range trimStages(mapped, t.indexStart) {
		for _, s := range stage {
			if err := pageOut(s); err != nil {
				return advised, err
			}
			advised += int64(s.end - s.start)
		}
		if resident, err = residentFileBytes(); err != nil || resident-t.base <= t.budget {
			break
		}
	}
	t.forgetIndexes(mapped)
	return advised, err
}

// indexStart returns where the table at path begins its index, read once
// per table (tables never change), or false when it cannot be read. A
// table whose index does not match its checksum yet (Badger writes a new
// table through its mapping) is read again next time.
func (t *trimmer) indexStart(path string) (int64, bool) {
	if at, ok := t.indexes[path]; ok {
		return at, at > 0
	}
	at, err := tableIndexStart(path)
	if errors.Is(err, errIndexUnwritten) {
		return 0, false
	}
	if err != nil {
		at = -1 // paged out whole; a table compacted away is not asked again
	}
	if t.indexes == nil {
		t.indexes = make(map[string]int64)
	}
	t.indexes[path] = at
	return at, at > 0
}

// forgetIndexes drops the index offsets of tables no longer mapped.
func (t *trimmer) forgetIndexes(mapped []mapping) {
	if len(t.indexes) <= len(mapped) {
		return
	}
	live := make(map[string]bool, len(mapped))
	for _, m := range mapped {
		live[m.path] = true
	}
	for p := range t.indexes {
		if !live[p] {
			delete(t.indexes, p)
		}
	}
}

// pageSize is the granularity of a mapping; a table's data range is
// paged out up to the page holding the start of its index, exclusive.
const pageSize = 4096

// trimStages orders the ranges of mapped for paging out, least useful
// first: the memtables' write-ahead logs (.mem), the value logs (.vlog),
// the tables' data blocks (.sst below the index that indexStart finds),
// then the tables' indexes and bloom filters with any other file. A
// table whose index cannot be found goes whole into the data stage.
func trimStages(mapped []mapping, indexStart func(path string) (int64, bool)) [][]span {
	var wal, vlog, data, rest []span
	for _, m := range mapped {
		switch filepath.Ext(m.path) {
		case ".mem":
			wal = append(wal, m.span)
		case ".vlog":
			vlog = append(vlog, m.span)
		case ".sst":
			at, ok := indexStart(m.path)
			if !ok {
				data = append(data, m.span)
				continue
			}
			// The file's bytes [m.offset, at) are its data blocks.
			if at <= int64(m.offset) {
				rest = append(rest, m.span)
				continue
			}
			cut := m.start + uintptr(at-int64(m.offset))
			cut -= cut % pageSize
			if cut >= m.end {
				data = append(data, m.span)
				continue
			}
			if cut > m.start {
				data = append(data, span{m.start, cut})
			}
			rest = append(rest, span{cut, m.end})
		default:
			rest = append(rest, m.span)
		}
	}
	return [][]span{wal, vlog, data, rest}
}

// errIndexUnwritten marks a table whose index does not match the
// checksum in its footer: not written in full yet, or not a table.
var errIndexUnwritten = errors.New("table index does not match its checksum")

// tableIndexStart returns the offset at which the Badger table at path
// begins its index (the block offsets and the bloom filter), from the
// table's footer: the index, its length (4 bytes), the index's checksum
// (a protocol buffer: the algorithm, field 1, and the sum, field 2), and
// the checksum's length (4 bytes), both lengths big-endian. The index
// must match the checksum (CRC-32C, as Badger writes every table).
func tableIndexStart(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	read := func(at, n int64) ([]byte, error) {
		if at < 0 || n < 0 || n > size-at {
			return nil, fmt.Errorf("%s: footer out of the file's %d bytes", path, size)
		}
		b := make([]byte, n)
		_, err := f.ReadAt(b, at)
		return b, err
	}
	b, err := read(size-4, 4)
	if err != nil {
		return 0, err
	}
	chkLen := int64(binary.BigEndian.Uint32(b))
	chk, err := read(size-4-chkLen, chkLen)
	if err != nil {
		return 0, err
	}
	if b, err = read(size-8-chkLen, 4); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint32(b))
	at := size - 8 - chkLen - n
	if at <= 0 {
		return 0, fmt.Errorf("%s: index of %d bytes in a file of %d", path, n, size)
	}
	algo, sum, err := decodeChecksum(chk)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if algo != 0 {
		return 0, fmt.Errorf("%s: index checksum of algorithm %d, not CRC-32C", path, algo)
	}
	index, err := read(at, n)
	if err != nil {
		return 0, err
	}
	if uint64(crc32.Checksum(index, crc32.MakeTable(crc32.Castagnoli))) != sum {
		return 0, fmt.Errorf("%s: %w", path, errIndexUnwritten)
	}
	return at, nil
}

// decodeChecksum decodes Badger's checksum message: the algorithm (field
// 1, 0 for CRC-32C, absent when 0) and the sum (field 2), both varints.
func decodeChecksum(b []byte) (algo, sum uint64, err error) {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, 0, errors.New("unreadable index checksum")
		}
		b = b[n:]
		v, n := binary.Uvarint(b)
		if n <= 0 || tag&7 != 0 {
			return 0, 0, errors.New("unreadable index checksum")
		}
		b = b[n:]
		switch tag >> 3 {
		case 1:
			algo = v
		case 2:
			sum = v
		}
	}
	return algo, sum, nil
}

// close stops the trimmer and waits for it.
func (t *trimmer) close() {
	if t == nil {
		return
	}
	close(t.stop)
	t.done.Wait()
}

// errPageOutUnsupported marks a platform or kernel that cannot page
// mappings out.
var errPageOutUnsupported = errors.New("paging out mappings is not supported")

// span is an address range [start, end) of a mapping.
type span struct{ start, end uintptr }

// mapping is a span that maps a file from offset on.
type mapping struct {
	span
	path   string
	offset uint64
}

// mappingsUnder returns the mappings in maps (the format of
// /proc/PID/maps) whose file lies in dir or below it. Lines it cannot
// read are skipped: a mapping it misses is only not paged out.
func mappingsUnder(maps []byte, dir string) []mapping {
	prefix := []byte(dir + string(filepath.Separator))
	var out []mapping
	for len(maps) > 0 {
		line := maps
		if i := bytes.IndexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		// address perms offset dev inode pathname: the path is what
		// follows the fifth field's blanks (and may itself hold blanks).
		fields, rest := 0, line
		for fields < 5 && len(rest) > 0 {
			rest = bytes.TrimLeft(rest, " ")
			i := bytes.IndexByte(rest, ' ')
			if i < 0 {
				rest = nil
				break
			}
			rest = rest[i:]
			fields++
		}
		path := bytes.TrimLeft(rest, " ")
		if fields < 5 || !bytes.HasPrefix(path, prefix) || bytes.HasSuffix(path, []byte(" (deleted)")) {
			continue
		}
		head := bytes.Fields(line[:len(line)-len(rest)])
		lo, hi, ok := bytes.Cut(head[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		off, err3 := strconv.ParseUint(string(head[2]), 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || end <= start {
			continue
		}
		out = append(out, mapping{span: span{uintptr(start), uintptr(end)}, path: string(path), offset: off})
	}
	return out
}
