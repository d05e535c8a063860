package badgerkv

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Bulk records live in pack files. A commit of thousands of artifacts
// puts its immutable records — state-map nodes, op chunks, payloads —
// with PutSame before the small Commit that makes them reachable. In
// Badger's tree those records have random keys, so every compaction
// copies them again, level after level: at a million artifacts in one
// context a bulk commit wrote about nine times its own bytes, and the
// compactions took the CPU its next commits needed. Badger's value log
// would keep them out of the compactions, but Badger chooses by size
// alone, for every write: a threshold that moved the nodes there would
// make every small commit sync the value log as well as the write-ahead
// log.
//
// So a PutSame whose values of packMinValue bytes or more add up to
// packMinBytes writes those values, back to back, to a pack file in the
// data directory's packs/ directory, syncs it, and then puts in the tree,
// under each key, only where its value lies (a packPtr, marked by
// metaPacked in Badger's user meta byte): 20 bytes instead of hundreds,
// and no second sync for the commits that do not use it. Small commits,
// and small values, stay in the tree as before.
//
// Reads resolve a pointer with one read of the pack file (pread, through
// the page cache: no mapping, so nothing the process's resident size
// counts or the trimmer must page out; a batched read joins neighbouring
// values into one, readMany) and check the value against the CRC-32C the
// pointer holds; a missing file, a short read or a wrong checksum is a
// *kv.UnreadableError, corruption. A pack is synced before
// the write that points into it, and a new pack file's name before its
// first pointer (the directory is synced), so a crash leaves at most
// bytes nothing points to. After an open, writes go to a new file: a pack
// is never appended to by two processes' lifetimes.
//
// Records put with PutSame are named by their values and never deleted by
// the store (kv.SamePutter): a Delete or a later Set of a packed key
// replaces its pointer in the tree, and the bytes in the pack stay until
// a future collection rewrites packs. The store puts what it deletes
// (leaf checkpoints, blobs) with PutImmutable, which never packs.

// packDir is the directory of the pack files, under the data directory.
const packDir = "packs"

// packMinValue is the smallest value a bulk PutSame writes to a pack;
// smaller ones stay in the tree, where a pointer would save little.
const packMinValue = 128

// packMinBytes is what a PutSame's values of packMinValue bytes or more
// must add up to for it to use a pack: below it, the pack's sync costs
// more than the compactions it saves.
const packMinBytes = 64 << 10

// packMaxValue is the largest value a pack takes (a pointer's length is
// 32 bits); Badger's own limit on a value is lower still.
const packMaxValue = 1 << 30

// packable reports whether a bulk PutSame writes v to a pack.
func packable(v []byte) bool { return len(v) >= packMinValue && len(v) <= packMaxValue }

// packFileBytes is the size past which writes go to a new pack file.
const packFileBytes = 256 << 20

// metaPacked marks, in Badger's user meta byte, a tree value that is a
// packPtr rather than the record's value.
const metaPacked byte = 1

// packPtrSize is the length of an encoded packPtr.
const packPtrSize = 4 + 8 + 4 + 4

// packSuffix ends a pack file's name; the name before it is its number.
const packSuffix = ".pack"

// castagnoli is the CRC-32C table of the pack checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packPtr is where a packed value lies: the pack file's number, its
// offset and length, and its CRC-32C.
type packPtr struct {
	fid uint32
	off uint64
	n   uint32
	crc uint32
}

// encode returns p as stored in the tree: big-endian fid, off, n, crc.
func (p packPtr) encode() []byte {
	b := make([]byte, 0, packPtrSize)
	b = binary.BigEndian.AppendUint32(b, p.fid)
	b = binary.BigEndian.AppendUint64(b, p.off)
	b = binary.BigEndian.AppendUint32(b, p.n)
	return binary.BigEndian.AppendUint32(b, p.crc)
}

// decodePackPtr decodes a pointer; ok is false when b is not one.
func decodePackPtr(b []byte) (p packPtr, ok bool) {
	if len(b) != packPtrSize {
		return packPtr{}, false
	}
	return packPtr{
		fid: binary.BigEndian.Uint32(b),
		off: binary.BigEndian.Uint64(b[4:]),
		n:   binary.BigEndian.Uint32(b[12:]),
		crc: binary.BigEndian.Uint32(b[16:]),
	}, true
}

// errPackRecord marks a packed value that cannot be read back as written:
// the driver reports it as a *kv.UnreadableError.
var errPackRecord = errors.New("packed value unreadable")

// packs writes and reads the pack files of one data directory.
type packs struct {
	dir    string // the packs directory
	noSync bool

	mu   sync.Mutex // guards the writer: w, wfid, woff, next
	w    *os.File   // nil until the first write, and after a failed one
	wfid uint32
	woff int64
	next uint32 // the number of the next pack file
	// failed is a failed sync: every later write fails. It is read
	// without mu, so that a commit checking it (Driver.checkSync) does
	// not wait for a bulk put's write and sync of a pack, which hold mu
	// for milliseconds (15–21 ms seen beside the hub scenario's bulk
	// commit).
	failed atomic.Pointer[error]
	// syncFile syncs a pack file (its Sync; tests make it fail).
	syncFile func(*os.File) error

	rmu   sync.RWMutex // guards files and closed
	files map[uint32]*os.File
	// closed refuses to open files after close (the driver's guard
	// already keeps reads from starting then).
	closed bool
}

// openPacks opens the pack files of data directory dir, creating its
// packs directory (synced into dir unless noSync) if missing.
func openPacks(dir string, noSync bool) (*packs, error) {
	pd := filepath.Join(dir, packDir)
	p := &packs{dir: pd, noSync: noSync, files: make(map[uint32]*os.File), syncFile: (*os.File).Sync}
	entries, err := os.ReadDir(pd)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(pd, 0o755); err != nil {
			return nil, fmt.Errorf("badgerkv: create %s: %w", pd, err)
		}
		if !noSync {
			if err := syncDir(dir); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("badgerkv: read %s: %w", pd, err)
	}
	for _, e := range entries {
		if fid, ok := packFid(e.Name()); ok && fid >= p.next {
			p.next = fid + 1
		}
	}
	return p, nil
}

// packFid returns the number a pack file's name holds.
func packFid(name string) (uint32, bool) {
	num, ok := strings.CutSuffix(name, packSuffix)
	if !ok {
		return 0, false
	}
	fid, err := strconv.ParseUint(num, 10, 32)
	if err != nil || packName(uint32(fid)) != name {
		return 0, false
	}
	return uint32(fid), true
}

// packName is the file name of pack fid.
func packName(fid uint32) string { return fmt.Sprintf("%08d%s", fid, packSuffix) }

// syncDir syncs directory dir, making the names in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("badgerkv: open %s: %w", dir, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("badgerkv: sync %s: %w", dir, err)
	}
	return nil
}

// failure returns the sync failure that stopped the writer, or nil.
func (p *packs) failure() error {
	if e := p.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// write appends vals to the current pack file, syncs it, and returns
// where each lies. After a failed write the next one starts a new file;
// after a failed sync (whose data may be lost although a later sync
// succeeds) every write fails.
func (p *packs) write(vals [][]byte) ([]packPtr, error) {
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failure(); err != nil {
		return nil, err
	}
	if p.w == nil || p.woff > 0 && p.woff+int64(total) > packFileBytes {
		if err := p.rotate(); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, total)
	ptrs := make([]packPtr, len(vals))
	for i, v := range vals {
		ptrs[i] = packPtr{fid: p.wfid, off: uint64(p.woff) + uint64(len(buf)), n: uint32(len(v)), crc: crc32.Checksum(v, castagnoli)}
		buf = append(buf, v...)
	}
	if _, err := p.w.WriteAt(buf, p.woff); err != nil {
		p.closeWriter()
		return nil, fmt.Errorf("badgerkv: write pack: %w", err)
	}
	if !p.noSync {
		if err := p.syncFile(p.w); err != nil {
			err = fmt.Errorf("badgerkv: sync pack %s: %w (no write is accepted after a failed sync)", p.w.Name(), err)
			p.failed.Store(&err)
			p.closeWriter()
			return nil, err
		}
	}
	p.woff += int64(len(buf))
	return ptrs, nil
}

// rotate closes the current pack file and creates the next one, its
// name synced into the packs directory. The caller holds p.mu.
func (p *packs) rotate() error {
	p.closeWriter()
	fid := p.next
	name := filepath.Join(p.dir, packName(fid))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("badgerkv: create pack: %w", err)
	}
	p.next++
	if !p.noSync {
		if err := syncDir(p.dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	p.w, p.wfid, p.woff = f, fid, 0
	return nil
}

// closeWriter closes the current pack file, if any. The caller holds
// p.mu.
func (p *packs) closeWriter() {
	if p.w != nil {
		_ = p.w.Close()
		p.w = nil
	}
}

// read returns the value ptr points to, checked against its CRC-32C. A
// value that is not there as written is errPackRecord.
func (p *packs) read(ptr packPtr) ([]byte, error) {
	f, err := p.file(ptr.fid)
	if err != nil {
		return nil, err
	}
	if err := p.fits(f, ptr); err != nil {
		return nil, err
	}
	v := make([]byte, ptr.n)
	if _, err := f.ReadAt(v, int64(ptr.off)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ptr.missing()
		}
		return nil, fmt.Errorf("badgerkv: read pack %s: %w", packName(ptr.fid), err)
	}
	return v, ptr.check(v)
}

// missing is the errPackRecord of a value its pack does not hold.
func (ptr packPtr) missing() error {
	return fmt.Errorf("%w: %s holds no %d bytes at %d", errPackRecord, packName(ptr.fid), ptr.n, ptr.off)
}

// check returns the errPackRecord of v, the bytes ptr points to, when
// they fail the CRC-32C ptr holds.
func (ptr packPtr) check(v []byte) error {
	if crc32.Checksum(v, castagnoli) != ptr.crc {
		return fmt.Errorf("%w: the %d bytes at %d of %s fail their checksum", errPackRecord, ptr.n, ptr.off, packName(ptr.fid))
	}
	return nil
}

// Bounds of the reads readMany joins.
const (
	// joinGap is the most bytes between two values that one read
	// covers: what a read of both costs less than two reads.
	joinGap = 4 << 10
	// joinMax is the most bytes one read covers.
	joinMax = 1 << 20
)

// packedRead is one value readMany reads: the i-th of a batch, at ptr.
type packedRead struct {
	i   int
	ptr packPtr
}

// readMany reads the values rs point to, each checked as read checks it,
// calling got with each one's index and value. Values that lie near one
// another in a pack (a bulk commit's nodes, written one after another,
// which a walk of a subtree reads together) are read with one pread: rs
// is sorted by pack and offset, and a run of values at most joinGap apart,
// up to joinMax bytes in all, is read at once. A run that cannot be read
// whole is read a value at a time, so that an error names its value.
func (p *packs) readMany(rs []packedRead, got func(i int, v []byte, err error) error) error {
	slices.SortFunc(rs, func(a, b packedRead) int {
		if c := cmp.Compare(a.ptr.fid, b.ptr.fid); c != 0 {
			return c
		}
		return cmp.Compare(a.ptr.off, b.ptr.off)
	})
	var buf []byte
	for len(rs) > 0 {
		start, end := rs[0].ptr.off, rs[0].ptr.off+uint64(rs[0].ptr.n)
		k := 1
		for ; k < len(rs); k++ {
			q := rs[k].ptr
			if q.fid != rs[0].ptr.fid || q.off > end+joinGap || max(end, q.off+uint64(q.n))-start > joinMax {
				break
			}
			end = max(end, q.off+uint64(q.n))
		}
		run := rs[:k]
		rs = rs[k:]
		if len(run) == 1 {
			v, err := p.read(run[0].ptr)
			if err := got(run[0].i, v, err); err != nil {
				return err
			}
			continue
		}
		f, err := p.file(run[0].ptr.fid)
		if err == nil {
			buf = slices.Grow(buf[:0], int(end-start))[:end-start]
			_, err = f.ReadAt(buf, int64(start))
		}
		for _, r := range run {
			if err != nil { // the run as a whole: each value alone names its fault
				v, err := p.read(r.ptr)
				if err := got(r.i, v, err); err != nil {
					return err
				}
				continue
			}
			v := slices.Clone(buf[r.ptr.off-start : r.ptr.off-start+uint64(r.ptr.n)])
			bad := r.ptr.check(v)
			if bad != nil {
				v = nil
			}
			if err := got(r.i, v, bad); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkedBytes is the length past which a value's pointer is checked
// against its pack's size before the value is read: a damaged pointer
// must not make the reader allocate gigabytes.
const checkedBytes = 1 << 20

// fits returns errPackRecord when ptr, a pointer into f, asks for a value
// of more than checkedBytes that lies past the end of f, or at an offset
// no file has.
func (p *packs) fits(f *os.File, ptr packPtr) error {
	if ptr.off > math.MaxInt64-uint64(ptr.n) {
		return ptr.missing()
	}
	if ptr.n <= checkedBytes {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("badgerkv: read pack %s: %w", packName(ptr.fid), err)
	}
	if int64(ptr.off)+int64(ptr.n) > fi.Size() {
		return ptr.missing()
	}
	return nil
}

// file returns pack fid open for reading.
func (p *packs) file(fid uint32) (*os.File, error) {
	p.rmu.RLock()
	f := p.files[fid]
	p.rmu.RUnlock()
	if f != nil {
		return f, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if p.closed {
		return nil, errors.New("badgerkv: packs closed")
	}
	if f := p.files[fid]; f != nil {
		return f, nil
	}
	f, err := os.Open(filepath.Join(p.dir, packName(fid)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: pack file %s is missing", errPackRecord, packName(fid))
	}
	if err != nil {
		return nil, fmt.Errorf("badgerkv: open pack: %w", err)
	}
	p.files[fid] = f
	return f, nil
}

// close closes every pack file.
func (p *packs) close() error {
	p.mu.Lock()
	p.closeWriter()
	p.mu.Unlock()
	p.rmu.Lock()
	defer p.rmu.Unlock()
	var first error
	for fid, f := range p.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
		delete(p.files, fid)
	}
	p.closed = true
	return first
}
