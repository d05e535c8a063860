package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// Blobs: raw bytes named by their SHA-256, stored once whoever sends them.
//
// A blob of at most BlobChunkSize bytes is one record (blob NUL sha). A
// larger one is a manifest (blobm NUL sha: its size, its chunk size and
// each chunk's SHA-256) and its chunks (blobc NUL sha <u32 BE index>),
// so that neither writing nor reading it holds it whole in memory. Stores
// written before chunking hold only single records, which read as before.
//
// Blobs are shared, their reading is not: a context reads a blob only
// when it holds it (cblob NUL ctx NUL sha), which it does once it uploads
// the bytes, once one of its gate outputs records them (fetched bodies and
// texts, full tool outputs and errors) or once an imported bundle carries
// them.

// BlobChunkSize is the size of a chunk of a large blob, and the largest
// blob stored as a single record.
const BlobChunkSize = 1 << 20

const (
	pBlobManifest = "blobm\x00"
	pBlobChunk    = "blobc\x00"
	pBlobMember   = "cblob\x00"
	// manifestVersion is the first byte of a manifest.
	manifestVersion = 1
)

func keyBlobManifest(d hashing.Digest) []byte { return append([]byte(pBlobManifest), d[:]...) }

func keyBlobChunk(d hashing.Digest, i uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(pBlobChunk), d[:]...), i)
}

func keyBlobMember(ctxID string, d hashing.Digest) []byte {
	return append([]byte(pBlobMember+ctxID+"\x00"), d[:]...)
}

// parseBlobMember reads a key keyBlobMember wrote; false when it is not
// one (no context id, or no NUL before a 32-byte digest).
func parseBlobMember(key []byte) (blobMember, bool) { return parseCtxDigest(key, pBlobMember) }

// parseCtxDigest reads a key of prefix followed by a context id, NUL and
// a digest (keyBlobMember, keyImportedPruned); false when it is not one.
func parseCtxDigest(key []byte, prefix string) (blobMember, bool) {
	rest, ok := bytes.CutPrefix(key, []byte(prefix))
	if !ok || len(rest) < 34 || rest[len(rest)-33] != 0 {
		return blobMember{}, false
	}
	m := blobMember{ctxID: string(rest[:len(rest)-33])}
	copy(m.d[:], rest[len(rest)-32:])
	return m, true
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	Digest hashing.Digest
	Size   int64
	// Existed reports whether the bytes were stored before the call.
	Existed bool
}

// manifest is the record of a chunked blob.
type manifest struct {
	size      int64
	chunkSize int64
	chunks    []hashing.Digest
}

// add records chunk as the next chunk of blob d and returns the chunk's
// record.
func (m *manifest) add(d hashing.Digest, chunk []byte) kv.Record {
	i := uint32(len(m.chunks))
	m.chunks = append(m.chunks, hashing.Sum(chunk))
	return kv.Record{Key: keyBlobChunk(d, i), Value: chunk}
}

func (m *manifest) encode() []byte {
	b := []byte{manifestVersion}
	b = binary.AppendUvarint(b, uint64(m.size))
	b = binary.AppendUvarint(b, uint64(m.chunkSize))
	for _, c := range m.chunks {
		b = append(b, c[:]...)
	}
	return b
}

func decodeManifest(b []byte) (*manifest, error) {
	bad := func(what string) (*manifest, error) {
		return nil, fmt.Errorf("%w: blob manifest: %s", ErrCorrupt, what)
	}
	if len(b) < 1 || b[0] != manifestVersion {
		return bad("unknown version")
	}
	b = b[1:]
	size, n := binary.Uvarint(b)
	if n <= 0 {
		return bad("size")
	}
	b = b[n:]
	cs, n := binary.Uvarint(b)
	if n <= 0 || cs == 0 || cs > 64<<20 {
		return bad("chunk size")
	}
	b = b[n:]
	want := (size + cs - 1) / cs
	if len(b)%32 != 0 || uint64(len(b)/32) != want {
		return bad("chunk count")
	}
	m := &manifest{size: int64(size), chunkSize: int64(cs), chunks: make([]hashing.Digest, want)}
	for i := range m.chunks {
		copy(m.chunks[i][:], b[32*i:])
	}
	return m, nil
}

// chunkLen returns the length of chunk i.
func (m *manifest) chunkLen(i int) int64 {
	if i == len(m.chunks)-1 {
		return m.size - int64(i)*m.chunkSize
	}
	return m.chunkSize
}

// ---- writing ----

// PutBlob stores raw bytes durably and returns their digest. Storing the
// same bytes again is free. The blob is held by no context (see
// PutContextBlob).
func (s *Store) PutBlob(ctx context.Context, data []byte) (hashing.Digest, error) {
	info, err := s.putBlobBytes(ctx, data)
	return info.Digest, err
}

// putBlobBytes stores data held in memory: a single record, or chunks cut
// from data (layBlob, as a commit's BlobData).
func (s *Store) putBlobBytes(ctx context.Context, data []byte) (BlobInfo, error) {
	info := BlobInfo{Digest: hashing.Sum(data), Size: int64(len(data))}
	if err := s.checkSpace(); err != nil {
		return info, err
	}
	had, err := s.HasBlob(ctx, info.Digest)
	if err != nil || had {
		info.Existed = had
		return info, err
	}
	return info, s.putLayout(ctx, layBlob(info.Digest, data))
}

// putLayout writes blob b: its records one at a time, then, in a synced
// commit, its manifest (a manifest is never visible before its chunks).
func (s *Store) putLayout(ctx context.Context, b blobLayout) error {
	for i, r := range b.imm {
		if err := s.kv.PutImmutable(ctx, []kv.Record{r}); err != nil {
			return fmt.Errorf("put blob %s record %d: %w", b.d.Short(), i, err)
		}
	}
	var sets []kv.Record
	if b.manifest != nil {
		sets = []kv.Record{{Key: keyBlobManifest(b.d), Value: b.manifest}}
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: sets}); err != nil {
		return fmt.Errorf("put blob %s: %w", b.d.Short(), err)
	}
	return nil
}

// putChunked writes a blob of size bytes as chunks and, last, its
// manifest: a manifest is never visible before its chunks. next fills a
// buffer of BlobChunkSize bytes with the next chunk (the last may be
// shorter) and returns its length; buf, when at least BlobChunkSize long,
// is the buffer to fill.
func (s *Store) putChunked(ctx context.Context, d hashing.Digest, size int64, buf []byte, next func([]byte) (int, error)) error {
	m := &manifest{size: size, chunkSize: BlobChunkSize}
	if len(buf) < BlobChunkSize {
		buf = make([]byte, BlobChunkSize)
	}
	for done, i := int64(0), uint32(0); done < size; i++ {
		n, err := next(buf[:min(int64(BlobChunkSize), size-done)])
		if err != nil {
			return fmt.Errorf("put blob %s chunk %d: %w", d.Short(), i, err)
		}
		if n == 0 {
			return fmt.Errorf("put blob %s: %w: chunk %d is empty", d.Short(), ErrCorrupt, i)
		}
		if err := s.kv.PutImmutable(ctx, []kv.Record{m.add(d, buf[:n])}); err != nil {
			return fmt.Errorf("put blob %s chunk %d: %w", d.Short(), i, err)
		}
		done += int64(n)
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyBlobManifest(d), Value: m.encode()}}}); err != nil {
		return fmt.Errorf("put blob %s manifest: %w", d.Short(), err)
	}
	return nil
}

// blobLayout is a blob held in memory laid out as the store keeps it: its
// digest, its immutable records (the bytes whole, or their chunks in
// order) and, for a chunked blob, its manifest, visible once written.
// Store.Commit lays a request's BlobData out before it is queued, so that
// the committer neither hashes nor cuts them.
type blobLayout struct {
	d        hashing.Digest
	imm      []kv.Record
	manifest []byte // nil for a blob of one record
}

// layBlob lays data, whose SHA-256 is d, out as PutBlob stores it.
func layBlob(d hashing.Digest, data []byte) blobLayout {
	b := blobLayout{d: d}
	if len(data) <= BlobChunkSize {
		b.imm = []kv.Record{{Key: keyBlob(b.d), Value: data}}
		return b
	}
	m := &manifest{size: int64(len(data)), chunkSize: BlobChunkSize}
	for off := 0; off < len(data); off += BlobChunkSize {
		b.imm = append(b.imm, m.add(b.d, data[off:min(off+BlobChunkSize, len(data))]))
	}
	b.manifest = m.encode()
	return b
}

// addBlobs queues the records of blobs with the group's write, as PutBlob
// stores them, but for those the group writes already or the store holds
// (HasBlob's records, asked for all of them in one read that fetches no
// values; when that read fails, all are written).
func (g *group) addBlobs(ls []blobLayout) error {
	var fresh []blobLayout
	var keys [][]byte
	for _, b := range ls {
		if g.blobs[b.d] {
			continue
		}
		if g.blobs == nil {
			g.blobs = make(map[hashing.Digest]bool)
		}
		g.blobs[b.d] = true
		fresh = append(fresh, b)
		keys = append(keys, keyBlob(b.d), keyBlobManifest(b.d))
	}
	if len(fresh) == 0 {
		return nil
	}
	found, err := kv.Has(context.Background(), g.s.kv, keys)
	if err != nil {
		g.s.log.Debug("could not tell which blobs are stored; writing them all", "err", err)
		found = make([]bool, len(keys))
	}
	for i, b := range fresh {
		if found[2*i] || found[2*i+1] {
			continue
		}
		for _, r := range b.imm {
			if err := g.addImm(r.Key, r.Value); err != nil {
				return err
			}
		}
		if b.manifest != nil {
			g.set(keyBlobManifest(b.d), b.manifest)
		}
	}
	return nil
}

// WriteBlob stores the bytes r yields, never holding more than about two
// chunks of them in memory: a body of at most BlobChunkSize bytes is
// stored as one record; a longer one goes to a temporary file in the data
// directory (the system's temporary directory for a store without one)
// while its SHA-256 is computed, and from there into chunks (a file a
// crash leaves there is removed at the next Open). Storing bytes already
// stored is free (Existed). An error of r is returned wrapped, and
// then nothing is stored.
func (s *Store) WriteBlob(ctx context.Context, r io.Reader) (BlobInfo, error) {
	if err := s.checkSpace(); err != nil {
		return BlobInfo{}, err
	}
	buf := make([]byte, BlobChunkSize+1)
	n, ended, err := fill(r, buf)
	switch {
	case err != nil:
		return BlobInfo{}, fmt.Errorf("read blob: %w", err)
	case ended:
		return s.putBlobBytes(ctx, buf[:n])
	}
	f, err := os.CreateTemp(s.dir, uploadPrefix+"*")
	if err != nil {
		return BlobInfo{}, fmt.Errorf("blob upload: %w", err)
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	h := sha256.New()
	w := io.MultiWriter(f, h)
	if _, err := w.Write(buf[:n]); err != nil {
		return BlobInfo{}, fmt.Errorf("blob upload: %w", err)
	}
	size := int64(n)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return BlobInfo{}, fmt.Errorf("blob upload: %w", err)
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return BlobInfo{}, fmt.Errorf("read blob: %w", rerr)
		}
	}
	info := BlobInfo{Size: size}
	copy(info.Digest[:], h.Sum(nil))
	had, err := s.HasBlob(ctx, info.Digest)
	if err != nil || had {
		info.Existed = had
		return info, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return info, fmt.Errorf("blob upload: %w", err)
	}
	return info, s.putChunked(ctx, info.Digest, size, buf, func(b []byte) (int, error) { return io.ReadFull(f, b) })
}

// uploadPrefix begins the name of the temporary file of a blob upload
// (WriteBlob).
const uploadPrefix = ".blob-upload-"

// removeLeftUploads removes the temporary files of blob uploads that a
// crash left in the data directory dir (a removal on a normal return
// never ran), and logs their count and bytes at info. The caller holds
// the directory's lock, so no other process is writing one; the store's
// own uploads have not begun. A file it cannot remove is logged and left:
// the store opens all the same.
func removeLeftUploads(dir string, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Warn("could not look for the temporary files of blob uploads a crash left", "dir", dir, "err", err)
		return
	}
	files, size := 0, int64(0)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), uploadPrefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err == nil {
			err = os.Remove(p)
		}
		if err != nil {
			log.Warn("could not remove the temporary file of a blob upload a crash left", "file", p, "err", err)
			continue
		}
		files++
		size += info.Size()
	}
	if files > 0 {
		log.Info("removed the temporary files of blob uploads a crash left", "dir", dir, "files", files, "bytes", size)
	}
}

// fill reads r into buf until buf is full or r ends, and returns how many
// bytes it read and whether r ended (io.EOF). Any other error of r is
// returned as it is — io.ErrUnexpectedEOF too, which io.ReadFull would
// also answer for a body merely shorter than buf.
func fill(r io.Reader, buf []byte) (int, bool, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, err
		}
	}
	return n, false, nil
}

// ---- reading ----

// HasBlob reports whether a blob's bytes are stored.
func (s *Store) HasBlob(ctx context.Context, d hashing.Digest) (bool, error) {
	for _, k := range [][]byte{keyBlob(d), keyBlobManifest(d)} {
		_, err := s.kv.Get(ctx, k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return false, fmt.Errorf("blob %s: %w", d.Short(), err)
		}
	}
	return false, nil
}

// GetBlob returns the bytes of a blob, checked against the digest. Large
// blobs are better read with OpenBlob.
func (s *Store) GetBlob(ctx context.Context, d hashing.Digest) ([]byte, error) {
	return readBlob(s.OpenBlob(ctx, d))
}

// readBlob reads the whole of a blob OpenBlob or OpenContextBlob opened.
func readBlob(br *BlobReader, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer br.Close()
	out := make([]byte, 0, br.Size())
	buf := bytes.NewBuffer(out)
	if _, err := io.Copy(buf, br); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BlobReader reads one blob, a chunk at a time, checking every chunk
// against the manifest and the whole against the digest before the last
// byte is returned. A read that fails a check returns an error wrapping
// ErrCorrupt.
type BlobReader struct {
	ctx  context.Context
	s    *Store
	d    hashing.Digest
	m    *manifest // nil for a single record
	next int       // next chunk to load
	cur  []byte    // unread bytes of the loaded chunk
	sum  hash.Hash // of the chunks loaded so far
}

// OpenBlob opens a blob for reading. Errors: ErrNotFound (never stored),
// a *PrunedError (ErrPruned: its retention window passed), ErrCorrupt (a
// single record or manifest that does not verify).
func (s *Store) OpenBlob(ctx context.Context, d hashing.Digest) (*BlobReader, error) {
	v, err := s.kv.Get(ctx, keyBlob(d))
	if err == nil {
		if hashing.Sum(v) != d {
			return nil, fmt.Errorf("%w: blob %s does not match its hash", ErrCorrupt, d)
		}
		return &BlobReader{ctx: ctx, s: s, d: d, cur: v}, nil
	}
	if !errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	v, err = s.kv.Get(ctx, keyBlobManifest(d))
	if errors.Is(err, kv.ErrNotFound) {
		if pe := s.pruned(d); pe != nil {
			return nil, pe
		}
		return nil, fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	m, err := decodeManifest(v)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	if len(m.chunks) == 0 && hashing.Sum(nil) != d {
		// The blob's hash is checked as its last chunk is read: a
		// manifest listing none would give empty bytes unchecked.
		return nil, fmt.Errorf("%w: blob %s: its manifest lists no chunk, and it is not the empty blob", ErrCorrupt, d)
	}
	return &BlobReader{ctx: ctx, s: s, d: d, m: m, sum: sha256.New()}, nil
}

// OpenContextBlob is OpenBlob as context ctxID reads blob d: bytes not
// stored that the bundle ctxID was imported from lists as pruned are a
// *PrunedError (ErrPruned) with the bundle's time, where another context
// finds ErrNotFound. It does not check that ctxID holds d (BlobMember);
// an empty ctxID reads as OpenBlob.
func (s *Store) OpenContextBlob(ctx context.Context, ctxID string, d hashing.Digest) (*BlobReader, error) {
	br, err := s.OpenBlob(ctx, d) // nil on any error
	return br, s.orImportedPruned(ctx, ctxID, d, err)
}

// StatContextBlob is StatBlob as context ctxID reads blob d
// (OpenContextBlob): a *PrunedError also for bytes its import listed as
// pruned. An empty ctxID reads as StatBlob.
func (s *Store) StatContextBlob(ctx context.Context, ctxID string, d hashing.Digest) error {
	return s.orImportedPruned(ctx, ctxID, d, s.StatBlob(ctx, d))
}

// orImportedPruned is err, what OpenBlob or StatBlob found for d, as
// context ctxID finds it: ErrNotFound is the *PrunedError of d's
// importedPruned record, when ctxID has one.
func (s *Store) orImportedPruned(ctx context.Context, ctxID string, d hashing.Digest, err error) error {
	if errors.Is(err, ErrNotFound) {
		if pe := s.importedPruned(ctx, ctxID, d); pe != nil {
			return pe
		}
	}
	return err
}

// StatBlob reports what OpenBlob would find for d without reading the
// bytes: nil when they are stored (a single record or a manifest), else,
// as OpenBlob, a *PrunedError (ErrPruned) when they were pruned, or
// ErrNotFound. It reads no blob record's value (kv.Has, one round trip;
// the pruned marker is read only when neither record is there), so it
// fits the answer to a conditional read whose ETag is the digest: a
// stored blob is 304, a pruned one still 410 and an unknown one 404.
// It does not verify the bytes: a record that no longer matches its
// digest is found here and fails OpenBlob or its reads with ErrCorrupt
// (fsck reports it).
func (s *Store) StatBlob(ctx context.Context, d hashing.Digest) error {
	have, err := kv.Has(ctx, s.kv, [][]byte{keyBlob(d), keyBlobManifest(d)})
	if err != nil {
		return fmt.Errorf("blob %s: %w", d, err)
	}
	if have[0] || have[1] {
		return nil
	}
	if pe := s.pruned(d); pe != nil {
		return pe
	}
	return fmt.Errorf("blob %s: %w", d, ErrNotFound)
}

// Size returns the blob's length in bytes.
func (b *BlobReader) Size() int64 {
	if b.m == nil {
		return int64(len(b.cur)) // a single record is read whole at open
	}
	return b.m.size
}

// Read reads the next bytes of the blob.
func (b *BlobReader) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.m == nil || b.next >= len(b.m.chunks) {
			return 0, io.EOF
		}
		if err := b.load(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}

// load reads and checks the next chunk.
func (b *BlobReader) load() error {
	i := b.next
	v, err := b.s.kv.Get(b.ctx, keyBlobChunk(b.d, uint32(i)))
	if errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("%w: blob %s: chunk %d is missing", ErrCorrupt, b.d, i)
	}
	if err != nil {
		return fmt.Errorf("blob %s chunk %d: %w", b.d, i, err)
	}
	if int64(len(v)) != b.m.chunkLen(i) || hashing.Sum(v) != b.m.chunks[i] {
		return fmt.Errorf("%w: blob %s: chunk %d does not match its manifest", ErrCorrupt, b.d, i)
	}
	_, _ = b.sum.Write(v)
	if i == len(b.m.chunks)-1 && !bytes.Equal(b.sum.Sum(nil), b.d[:]) {
		return fmt.Errorf("%w: blob %s does not match its hash", ErrCorrupt, b.d)
	}
	b.cur, b.next = v, i+1
	return nil
}

// Close releases the reader.
func (b *BlobReader) Close() error {
	b.cur, b.m = nil, nil
	return nil
}

// blobRecordKeys returns the keys of a blob's bytes: its single record,
// or its manifest and chunks.
func (s *Store) blobRecordKeys(ctx context.Context, d hashing.Digest) ([][]byte, error) {
	keys := [][]byte{keyBlob(d)}
	v, err := s.kv.Get(ctx, keyBlobManifest(d))
	if errors.Is(err, kv.ErrNotFound) {
		return keys, nil
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d, err)
	}
	keys = append(keys, keyBlobManifest(d))
	if m, err := decodeManifest(v); err == nil {
		for i := range m.chunks {
			keys = append(keys, keyBlobChunk(d, uint32(i)))
		}
	}
	return keys, nil
}

// ---- what a context holds ----

// AddBlobMember records, durably, that context ctxID holds blob d, and
// reports whether it did not before. The bytes need not be stored (an
// imported bundle may name a pruned blob). Below the free-space reserve
// it records nothing and returns an error wrapping ErrNoSpace.
func (s *Store) AddBlobMember(ctx context.Context, ctxID string, d hashing.Digest) (bool, error) {
	return s.addBlobMember(ctx, ctxID, d, true)
}

// addBlobMember is AddBlobMember; checked says to refuse the write below
// the free-space reserve (BackfillBlobMembers, a once-only upgrade of a
// store being opened, records regardless).
func (s *Store) addBlobMember(ctx context.Context, ctxID string, d hashing.Digest, checked bool) (bool, error) {
	if err := ValidateContextID(ctxID); err != nil {
		return false, err
	}
	held, err := s.BlobMember(ctx, ctxID, d)
	if err != nil || held {
		return false, err
	}
	if checked {
		if err := s.checkSpace(); err != nil {
			return false, fmt.Errorf("context %q holds blob %s: %w", ctxID, d.Short(), err)
		}
	}
	err = s.kv.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: keyBlobMember(ctxID, d), Absent: true, New: []byte{}}}})
	if errors.Is(err, kv.ErrConflict) {
		return false, nil // a concurrent call recorded it
	}
	if err != nil {
		return false, fmt.Errorf("context %q holds blob %s: %w", ctxID, d.Short(), err)
	}
	return true, nil
}

// blobsHeldByOthers returns the blobs of want that a context other than
// ctxID holds, in one pass over the membership records (none when want is
// empty).
func (s *Store) blobsHeldByOthers(ctx context.Context, ctxID string, want map[hashing.Digest]string) (map[hashing.Digest]bool, error) {
	held := map[hashing.Digest]bool{}
	if len(want) == 0 {
		return held, nil
	}
	err := kv.ScanKeys(ctx, s.kv, []byte(pBlobMember), nil, 0, func(key []byte) error {
		m, ok := parseBlobMember(key)
		if !ok || m.ctxID == ctxID {
			return nil
		}
		if _, ok := want[m.d]; ok {
			held[m.d] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read blob memberships: %w", err)
	}
	return held, nil
}

// BlobMember reports whether context ctxID holds blob d.
func (s *Store) BlobMember(ctx context.Context, ctxID string, d hashing.Digest) (bool, error) {
	if ValidateContextID(ctxID) != nil {
		return false, nil
	}
	_, err := s.kv.Get(ctx, keyBlobMember(ctxID, d))
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("blob %s of context %q: %w", d.Short(), ctxID, err)
	}
	return true, nil
}

// PutContextBlob stores bytes (PutBlob) and records that context ctxID
// holds them (AddBlobMember); bytes of at most BlobChunkSize take one
// durable write for both.
func (s *Store) PutContextBlob(ctx context.Context, ctxID string, data []byte) (hashing.Digest, error) {
	d := hashing.Sum(data)
	if err := ValidateContextID(ctxID); err != nil {
		return d, err
	}
	if len(data) > BlobChunkSize {
		if _, err := s.PutBlob(ctx, data); err != nil {
			return d, err
		}
		_, err := s.AddBlobMember(ctx, ctxID, d)
		return d, err
	}
	if err := s.checkSpace(); err != nil {
		return d, err
	}
	had, err := s.HasBlob(ctx, d)
	if err != nil {
		return d, err
	}
	held, err := s.BlobMember(ctx, ctxID, d)
	if err != nil || (had && held) {
		return d, err
	}
	var b kv.Batch
	if !had {
		b.Sets = []kv.Record{{Key: keyBlob(d), Value: data}}
	}
	if !held {
		b.Swaps = []kv.Swap{{Key: keyBlobMember(ctxID, d), Absent: true, New: []byte{}}}
	}
	err = s.kv.Commit(ctx, b)
	if errors.Is(err, kv.ErrConflict) && !had {
		// Another call recorded the membership first and nothing of
		// this batch was written: store the bytes alone.
		_, err = s.PutBlob(ctx, data)
	} else if errors.Is(err, kv.ErrConflict) {
		err = nil
	}
	if err != nil {
		return d, fmt.Errorf("put blob %s of context %q: %w", d.Short(), ctxID, err)
	}
	return d, nil
}

// GetContextBlob returns the bytes of a blob that context ctxID holds
// (GetBlob, but read as OpenContextBlob: a blob its import listed as
// pruned is a *PrunedError); a blob it does not hold is ErrNotFound,
// whether or not it is stored.
func (s *Store) GetContextBlob(ctx context.Context, ctxID string, d hashing.Digest) ([]byte, error) {
	held, err := s.BlobMember(ctx, ctxID, d)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("blob %s in context %q: %w", d, ctxID, ErrNotFound)
	}
	return readBlob(s.OpenContextBlob(ctx, ctxID, d))
}

// contextBlobs is the BlobStore an export of one context reads: the
// blobs the context holds and those the gate outputs of the exported
// commits name (they were recorded by the context's gate path, also in a
// store written before contexts held blobs), never another context's.
type contextBlobs struct {
	s     *Store
	ctxID string
	named map[hashing.Digest]bool
}

func (c contextBlobs) holds(ctx context.Context, d hashing.Digest) (bool, error) {
	if c.named[d] {
		return true, nil
	}
	return c.s.BlobMember(ctx, c.ctxID, d)
}

func (c contextBlobs) HasBlob(ctx context.Context, d hashing.Digest) (bool, error) {
	held, err := c.holds(ctx, d)
	if err != nil || !held {
		return false, err
	}
	return c.s.HasBlob(ctx, d)
}

func (c contextBlobs) GetBlob(ctx context.Context, d hashing.Digest) ([]byte, error) {
	held, err := c.holds(ctx, d)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("blob %s in context %q: %w", d, c.ctxID, ErrNotFound)
	}
	return c.s.GetBlob(ctx, d)
}

func (c contextBlobs) BlobPruned(ctx context.Context, d hashing.Digest) (string, bool) {
	if held, err := c.holds(ctx, d); err != nil || !held {
		return "", false
	}
	return c.s.blobPrunedIn(ctx, c.ctxID, d)
}

// gateBlobRefs calls fn for each blob a gate output put by one of commits
// names (a blob may come more than once).
func (s *Store) gateBlobRefs(ctx context.Context, ctxID string, commits []*replay.Commit, fn func(hashing.Digest) error) error {
	src := s.Source(ctxID)
	seen := map[hashing.Digest]bool{}
	for _, c := range commits {
		ops, err := src.Ops(ctx, c)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Op != graph.OpPut || !gateOutput(op.Type) || seen[op.ContentHash] {
				continue
			}
			seen[op.ContentHash] = true
			data, err := s.object(op.ContentHash)
			if err != nil {
				return err
			}
			for _, ref := range gate.BlobRefs(op.Type, data) {
				if d, err := hashing.ParseDigest(ref); err == nil {
					if err := fn(d); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// keyMetaBlobMembers marks a store whose gate outputs' blobs have been
// recorded as held by their contexts (BackfillBlobMembers).
func keyMetaBlobMembers() []byte { return []byte(pMeta + "blob-members") }

// blobMembersRecorded reports whether the store is marked as having every
// context's blob memberships recorded: a store created since they exist,
// or one BackfillBlobMembers ran on.
func (s *Store) blobMembersRecorded(ctx context.Context) (bool, error) {
	_, err := s.kv.Get(ctx, keyMetaBlobMembers())
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the blob-members mark: %w", err)
	}
	return true, nil
}

// BackfillBlobMembers records, once per store, that each context holds
// the blobs its gate outputs name (in every commit, not only at the
// heads): what a store written before blobs were read through contexts
// needs for those reads. It returns how many records it wrote; a store
// already backfilled costs one read.
func (s *Store) BackfillBlobMembers(ctx context.Context) (int, error) {
	recorded, err := s.blobMembersRecorded(ctx)
	if err != nil {
		return 0, fmt.Errorf("backfill blob members: %w", err)
	}
	if recorded {
		return 0, nil
	}
	ctxs, err := s.ListContexts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, info := range ctxs {
		var commits []*replay.Commit
		if err := s.Commits(ctx, info.ID, 0, func(c *replay.Commit) error {
			commits = append(commits, c)
			return nil
		}); err != nil {
			return n, fmt.Errorf("backfill blob members of context %q: %w", info.ID, err)
		}
		err := s.gateBlobRefs(ctx, info.ID, commits, func(d hashing.Digest) error {
			added, err := s.addBlobMember(ctx, info.ID, d, false)
			if added {
				n++
			}
			return err
		})
		if err != nil {
			return n, fmt.Errorf("backfill blob members of context %q: %w", info.ID, err)
		}
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyMetaBlobMembers(), Value: []byte("1")}}}); err != nil {
		return n, fmt.Errorf("backfill blob members: %w", err)
	}
	return n, nil
}

// ---- fsck ----

// blobMember is a membership record: context ctxID holds blob d.
type blobMember struct {
	ctxID string
	d     hashing.Digest
}

// verdictBlobs reports each blob that a fetch_verdict of the context
// names (its body, and a rendered page's shell: gate.BlobRefs) and that
// the context holds no membership record for, once the store is marked
// as having its memberships recorded: the context can no longer read the
// bytes its verdict was judged from. verdicts are the context's
// fetch_verdict puts in every commit its check read the ops of (the
// replay's pass), one per payload; the cost is a read of each payload
// and a lookup of each blob it names.
//
// Only a verdict's blobs are expected held: only the gate writes a
// fetch_verdict, and every way it does makes the context hold them — the
// fetch path with the verdict's commit (CommitRequest.Blobs), a posted
// verdict only after reading them through the context, an import with
// the bytes the bundle must carry, the backfill for older stores. A tool
// output's or error's full_blob is not: a client may record one itself
// naming bytes its context does not hold, and an import leaves a blob
// the bundle lists as pruned to the context that holds its bytes; so its
// missing membership is no proof of a lost record. A spilled output's
// is, until the spill is pruned: the spill index names the context whose
// commit came to hold it, and spills checks it there.
func (k *checker) verdictBlobs(ctx context.Context, ctxID string, verdicts []verdictPut) error {
	if !k.membersMarked {
		return nil
	}
	s := k.s
	reported := map[hashing.Digest]bool{}
	for _, v := range verdicts {
		data, err := s.object(v.data)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // reported with the objects and the commit's ops
		}
		for _, ref := range gate.BlobRefs("fetch_verdict", data) {
			d, err := hashing.ParseDigest(ref)
			if err != nil || reported[d] {
				continue
			}
			held, err := s.BlobMember(ctx, ctxID, d)
			if fault.IsCorrupt(err) {
				continue // an unreadable record, reported with the memberships
			}
			if err != nil {
				return fmt.Errorf("look up the blobs of the verdicts of %q: %w", ctxID, err)
			}
			if held {
				continue
			}
			reported[d] = true
			k.add(Defect{Kind: "blob", Context: ctxID, ID: d.String(),
				Detail: fmt.Sprintf("fetch_verdict %q (commit %s) names blob %s, which the context does not hold: its membership record is lost, and the context can no longer read the bytes the verdict was judged from", v.id, v.commit.Short(), d)})
		}
	}
	return nil
}

// checkBlobs checks what the single-record scan of Check does not see:
// every manifest with its chunks (read in full and re-hashed), every
// membership record, which must name a stored blob or one pruned here or
// by the context's import (a held blob it finds lost goes to
// k.lostHeld), and the records of those imports (importedPrunes).
func (k *checker) checkBlobs(ctx context.Context) error {
	s := k.s
	var manifests []hashing.Digest
	lostManifest := func(key []byte, why string) {
		k.rep.Blobs++
		k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%x", key[len(pBlobManifest):]), Detail: "manifest unreadable: " + why})
	}
	if err := k.scanAll(ctx, []byte(pBlobManifest), func(key, _ []byte) error {
		if len(key) != len(pBlobManifest)+32 {
			k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%x", key), Detail: "malformed manifest key"})
			return nil
		}
		var d hashing.Digest
		copy(d[:], key[len(pBlobManifest):])
		manifests = append(manifests, d)
		return nil
	}, lostManifest); err != nil {
		return err
	}
	for _, d := range manifests {
		k.rep.Blobs++
		br, err := s.OpenBlob(ctx, d)
		if err == nil {
			_, err = io.Copy(io.Discard, br)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			k.add(Defect{Kind: "blob", ID: d.String(), Detail: err.Error()})
		}
	}
	var members []blobMember
	lostMember := func(key []byte, why string) {
		k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%x", key), Detail: "membership record unreadable: " + why})
	}
	if err := k.scanAll(ctx, []byte(pBlobMember), func(key, _ []byte) error {
		m, ok := parseBlobMember(key)
		if !ok {
			k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%x", key), Detail: "malformed membership key"})
			return nil
		}
		members = append(members, m)
		return nil
	}, lostMember); err != nil {
		return err
	}
	for _, m := range members {
		ok, err := k.hasBlob(ctx, m.d)
		if fault.IsCorrupt(err) {
			k.lostHeld[m] = true
			k.add(Defect{Kind: "blob", Context: m.ctxID, ID: m.d.String(), Detail: err.Error()})
			continue
		}
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if _, pruned := s.blobPrunedIn(ctx, m.ctxID, m.d); pruned {
			continue
		}
		k.lostHeld[m] = true
		k.add(Defect{Kind: "blob", Context: m.ctxID, ID: m.d.String(),
			Detail: fmt.Sprintf("context %q holds blob %s, which is not stored", m.ctxID, m.d)})
	}
	return k.importedPrunes(ctx)
}
