package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// blobBytes returns n deterministic bytes.
func blobBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i>>9) ^ seed
	}
	return b
}

// TestBlobSizesRoundTrip: blobs around the chunk size, written from memory
// (PutBlob) and streamed (WriteBlob), read back whole and streamed, with
// their sizes; a second write of the same bytes is free.
func TestBlobSizesRoundTrip(t *testing.T) {
	t.Run("badger", func(t *testing.T) { blobSizesRoundTrip(t, openTest(t, t.TempDir())) })
	t.Run("memory", func(t *testing.T) {
		s, err := Open(context.Background(), Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		blobSizesRoundTrip(t, s)
	})
}

func blobSizesRoundTrip(t *testing.T, s *Store) {
	ctx := context.Background()
	defer s.Close()
	for i, n := range []int{0, 1, BlobChunkSize - 1, BlobChunkSize, BlobChunkSize + 1, 3*BlobChunkSize + BlobChunkSize/2} {
		data := blobBytes(n, byte(i))
		var info BlobInfo
		var err error
		if i%2 == 0 {
			info, err = s.WriteBlob(ctx, bytes.NewReader(data))
		} else {
			info.Digest, err = s.PutBlob(ctx, data)
			info.Size = int64(n)
		}
		if err != nil || info.Digest != hashing.Sum(data) || info.Size != int64(n) {
			t.Fatalf("%d bytes: %v %+v", n, err, info)
		}
		again, err := s.WriteBlob(ctx, bytes.NewReader(data))
		if err != nil || !again.Existed || again.Digest != info.Digest {
			t.Fatalf("%d bytes again: %v %+v", n, err, again)
		}
		got, err := s.GetBlob(ctx, info.Digest)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read back %d bytes, %v", n, len(got), err)
		}
		br, err := s.OpenBlob(ctx, info.Digest)
		if err != nil || br.Size() != int64(n) {
			t.Fatalf("%d bytes: open %v", n, err)
		}
		var out bytes.Buffer
		if _, err := io.CopyBuffer(&out, br, make([]byte, 4096)); err != nil || !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("%d bytes: streamed %d bytes, %v", n, out.Len(), err)
		}
		_, chunked := s.kv.Get(ctx, keyBlobManifest(info.Digest))
		if (chunked == nil) != (n > BlobChunkSize) {
			t.Fatalf("%d bytes: chunked %v", n, chunked == nil)
		}
	}
	mustCheck(t, s)
}

// TestLegacySingleRecordBlob: a blob larger than a chunk stored as one
// record (as every store before chunking did) reads as before.
func TestLegacySingleRecordBlob(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	data := blobBytes(3*BlobChunkSize, 7)
	d := hashing.Sum(data)
	if err := putSingleRecord(ctx, s, d, data); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetBlob(ctx, d)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	if ok, err := s.HasBlob(ctx, d); !ok || err != nil {
		t.Fatalf("HasBlob %v %v", ok, err)
	}
	mustCheck(t, s)
}

// TestBlobChunkCorruption: a changed or missing chunk fails the read with
// ErrCorrupt (never wrong bytes) and fsck reports it.
func TestBlobChunkCorruption(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(s *Store, d hashing.Digest) error
	}{
		{"changed", func(s *Store, d hashing.Digest) error {
			return s.kv.Commit(context.Background(), kvBatchSet(keyBlobChunk(d, 1), blobBytes(BlobChunkSize, 99)))
		}},
		{"missing", func(s *Store, d hashing.Digest) error {
			return s.kv.Commit(context.Background(), kvBatchDelete(keyBlobChunk(d, 2)))
		}},
		{"short", func(s *Store, d hashing.Digest) error {
			return s.kv.Commit(context.Background(), kvBatchSet(keyBlobChunk(d, 0), []byte("x")))
		}},
		{"manifest emptied", func(s *Store, d hashing.Digest) error {
			// A manifest that lists no chunk: nothing is read, so no
			// chunk's hash, nor the blob's, is ever checked.
			m := manifest{chunkSize: BlobChunkSize}
			return s.kv.Commit(context.Background(), kvBatchSet(keyBlobManifest(d), m.encode()))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTest(t, t.TempDir())
			defer s.Close()
			d, err := s.PutBlob(ctx, blobBytes(3*BlobChunkSize+5, 1))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.damage(s, d); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetBlob(ctx, d); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read: %v", err)
			}
			rep, err := s.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Defects) != 1 || rep.Defects[0].Kind != "blob" || rep.Defects[0].ID != d.String() {
				t.Fatalf("defects %v", rep.Defects)
			}
		})
	}
}

// TestBlobMembers: a context holds what it was given, and fsck reports a
// membership naming bytes that are neither stored nor pruned.
func TestBlobMembers(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if _, err := s.CreateContext(ctx, id, ModeEnforce); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.PutContextBlob(ctx, "a", []byte("a's bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if held, _ := s.BlobMember(ctx, "a", d); !held {
		t.Fatal("a does not hold its blob")
	}
	if held, _ := s.BlobMember(ctx, "b", d); held {
		t.Fatal("b holds a's blob")
	}
	if _, err := s.GetContextBlob(ctx, "b", d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b reads a's blob: %v", err)
	}
	if added, err := s.AddBlobMember(ctx, "a", d); added || err != nil {
		t.Fatalf("second add: %v %v", added, err)
	}
	if added, err := s.AddBlobMember(ctx, "b", d); !added || err != nil {
		t.Fatalf("b's add: %v %v", added, err)
	}
	if got, err := s.GetContextBlob(ctx, "b", d); err != nil || string(got) != "a's bytes" {
		t.Fatalf("b reads: %q %v", got, err)
	}
	mustCheck(t, s)
	// A membership whose bytes are gone (and were not pruned) is a defect;
	// one whose bytes were pruned is not.
	ghost := hashing.Sum([]byte("never stored"))
	if _, err := s.AddBlobMember(ctx, "b", ghost); err != nil {
		t.Fatal(err)
	}
	pruned := hashing.Sum([]byte("pruned bytes"))
	markPrunedHere(t, s, pruned, "2026-01-01T00:00:00Z")
	if _, err := s.AddBlobMember(ctx, "a", pruned); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Defects) != 1 || rep.Defects[0].Kind != "blob" || rep.Defects[0].Context != "b" || rep.Defects[0].ID != ghost.String() ||
		!strings.Contains(rep.Defects[0].Detail, "not stored") {
		t.Fatalf("defects %v", rep.Defects)
	}
}

// TestPutContextBlobConcurrent: concurrent puts of the same bytes into
// two contexts all succeed, and both contexts hold them.
func TestPutContextBlobConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	data := []byte("raced bytes")
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			_, err := s.PutContextBlob(ctx, []string{"x", "y"}[i%2], data)
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	d := hashing.Sum(data)
	for _, id := range []string{"x", "y"} {
		if got, err := s.GetContextBlob(ctx, id, d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %q %v", id, got, err)
		}
	}
	mustCheck(t, s)
}

// TestPruneChunkedSpill: pruning a spilled output that was chunked
// removes its manifest and every chunk, and reads say it was pruned.
func TestPruneChunkedSpill(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	d, err := s.PutBlob(ctx, blobBytes(2*BlobChunkSize+3, 4))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keySpill(at, d), Value: []byte{}}}}); err != nil { // as a commit's Spills note it
		t.Fatal(err)
	}
	if n, err := s.PruneSpills(ctx, at.Add(time.Hour), at.Add(2*time.Hour), 0); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	if _, err := s.GetBlob(ctx, d); !errors.Is(err, ErrPruned) {
		t.Fatalf("read after prune: %v", err)
	}
	left := 0
	for _, p := range []string{pBlobChunk, pBlobManifest, pBlob} {
		if err := s.kv.Scan(ctx, []byte(p), nil, 0, func(_, _ []byte) error { left++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if left != 0 {
		t.Fatalf("%d blob records left after the prune", left)
	}
	mustCheck(t, s)
}

// TestBlobMembersFromBundlesAndBackfill: an export carries the blobs the
// context's gate outputs name and no other context's blob that its plain
// data happens to name; the import holds what it carries; a store whose
// gate outputs predate membership gets it from BackfillBlobMembers, once.
func TestBlobMembersFromBundlesAndBackfill(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	asBeforeMemberships(t, s)
	for _, id := range []string{"run", "other"} {
		if _, err := s.CreateContext(ctx, id, ModeEnforce); err != nil {
			t.Fatal(err)
		}
	}
	page := []byte(`{"price":3,"currency":"EUR"}`)
	pd, err := s.PutBlob(ctx, page) // as a store before membership did
	if err != nil {
		t.Fatal(err)
	}
	res := gate.Classify(gate.Evidence{URL: "https://example.org/p", Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: page})
	raw, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	var verdict map[string]any
	if err := json.Unmarshal(raw, &verdict); err != nil {
		t.Fatal(err)
	}
	secret, err := s.PutContextBlob(ctx, "other", []byte("other's private bytes"))
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "run", put("f", "fetch_verdict", verdict), put("n", "note", map[string]any{"names": secret.String()}))

	var buf bytes.Buffer
	h, err := s.Export(ctx, "run", "", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Blobs != 1 {
		t.Fatalf("the bundle carries %d blobs, want the verdict's only", h.Blobs)
	}
	b, err := replay.ReadBundle(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, b, "copy"); err != nil {
		t.Fatal(err)
	}
	if held, _ := s.BlobMember(ctx, "copy", pd); !held {
		t.Fatal("the import does not hold the blob it carried")
	}
	if held, _ := s.BlobMember(ctx, "copy", secret); held {
		t.Fatal("the import holds another context's blob")
	}
	if held, _ := s.BlobMember(ctx, "run", pd); held {
		t.Fatal("run holds its verdict's blob before the backfill")
	}
	n, err := s.BackfillBlobMembers(ctx)
	if err != nil || n != 1 {
		t.Fatalf("backfill: %d %v", n, err)
	}
	if held, _ := s.BlobMember(ctx, "run", pd); !held {
		t.Fatal("the backfill did not record the verdict's blob")
	}
	if held, _ := s.BlobMember(ctx, "run", secret); held {
		t.Fatal("the backfill recorded a blob that plain data names")
	}
	if n, err := s.BackfillBlobMembers(ctx); n != 0 || err != nil {
		t.Fatalf("second backfill: %d %v", n, err)
	}
	mustCheck(t, s)
}

func kvBatchSet(k, v []byte) kv.Batch {
	return kv.Batch{Sets: []kv.Record{{Key: k, Value: v}}}
}

func kvBatchDelete(k []byte) kv.Batch { return kv.Batch{Deletes: [][]byte{k}} }

// TestCommitHoldsItsBlobs: the blobs and spills a commit names are
// written with it, and a commit refused (by its check) writes neither; a
// commit that changes nothing records neither either.
func TestCommitHoldsItsBlobs(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeEnforce); err != nil {
		t.Fatal(err)
	}
	put := func(text string) hashing.Digest {
		d, err := s.PutBlob(ctx, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	kept, refused, again := put("kept bytes"), put("refused bytes"), put("bytes of a no-op")
	refuse := errors.New("refused by its check")
	_, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("r", 0, "r")}, Blobs: []hashing.Digest{refused}, Spills: []hashing.Digest{refused},
		Check: func(*graph.State, []graph.Change) error { return refuse }})
	if !errors.Is(err, refuse) {
		t.Fatalf("refused commit: %v", err)
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("k", 0, "k")}, Blobs: []hashing.Digest{kept, kept}, Spills: []hashing.Digest{kept}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("k", 0, "k")}, Blobs: []hashing.Digest{again}, Spills: []hashing.Digest{again}})
	if err != nil || !res.Noop {
		t.Fatalf("no-op commit: %v %+v", err, res)
	}
	for d, want := range map[hashing.Digest]bool{kept: true, refused: false, again: false} {
		if held, err := s.BlobMember(ctx, "c", d); err != nil || held != want {
			t.Errorf("blob %s held %v (%v), want %v", d.Short(), held, err, want)
		}
	}
	// Only the accepted commit's spill was noted: pruning everything noted
	// prunes it alone.
	n, err := s.PruneSpills(ctx, time.Now().Add(time.Hour), time.Now(), 0)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if _, err := s.GetBlob(ctx, refused); err != nil {
		t.Fatalf("the refused commit's bytes were pruned: %v", err)
	}
	mustCheck(t, s)
}

// asBeforeMemberships makes s look like a store written before contexts
// held blobs: without the mark a new store gets (blobMembersRecorded),
// until BackfillBlobMembers runs.
func asBeforeMemberships(t *testing.T, s *Store) {
	t.Helper()
	if err := s.kv.Commit(context.Background(), kv.Batch{Deletes: [][]byte{keyMetaBlobMembers()}}); err != nil {
		t.Fatal(err)
	}
}

// blobValueReads counts the reads of a blob record's value (a single
// record, a manifest or a chunk); Has reads none.
type blobValueReads struct {
	kv.Driver
	n int
}

func (d *blobValueReads) count(k []byte) {
	for _, p := range []string{pBlob, pBlobManifest, pBlobChunk} {
		if bytes.HasPrefix(k, []byte(p)) {
			d.n++
		}
	}
}

func (d *blobValueReads) Get(ctx context.Context, k []byte) ([]byte, error) {
	d.count(k)
	return d.Driver.Get(ctx, k)
}

func (d *blobValueReads) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		d.count(k)
	}
	return d.Driver.GetMany(ctx, keys)
}

func (d *blobValueReads) Has(ctx context.Context, keys [][]byte) ([]bool, error) {
	return kv.Has(ctx, d.Driver, keys)
}

// TestStatBlob: StatBlob answers what OpenBlob would — found for bytes
// stored as one record (also a legacy large one) or chunked, including
// bytes an imported bundle said were pruned elsewhere; a *PrunedError with
// pruned_at for pruned bytes; ErrNotFound for bytes never stored — and
// reads no blob record's value to say so (a record whose bytes no longer
// match is found: only reading it tells).
func TestStatBlob(t *testing.T) {
	t.Run("badger", func(t *testing.T) { statBlob(t, openTest(t, t.TempDir())) })
	t.Run("memory", func(t *testing.T) {
		s, err := Open(context.Background(), Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		statBlob(t, s)
	})
}

func statBlob(t *testing.T, s *Store) {
	ctx := context.Background()
	defer s.Close()
	var stored []hashing.Digest
	for i, n := range []int{0, 1, BlobChunkSize, BlobChunkSize + 1, 3*BlobChunkSize + 5} {
		d, err := s.PutBlob(ctx, blobBytes(n, byte(i)))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, d)
	}
	legacy := blobBytes(2*BlobChunkSize, 9) // one record larger than a chunk
	if err := putSingleRecord(ctx, s, hashing.Sum(legacy), legacy); err != nil {
		t.Fatal(err)
	}
	stored = append(stored, hashing.Sum(legacy))
	// Bytes an earlier version's import said were pruned, stored here all
	// the same: read.
	markPrunedHere(t, s, stored[1], "2026-01-01T00:00:00Z")
	// A spill pruned here.
	spill, err := s.PutBlob(ctx, blobBytes(BlobChunkSize+7, 42))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keySpill(at, spill), Value: []byte{}}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneSpills(ctx, at.Add(time.Hour), at.Add(2*time.Hour), 0); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	// A single record whose bytes no longer match its digest.
	damaged := hashing.Sum([]byte("the bytes that were stored"))
	if err := s.kv.Commit(ctx, kvBatchSet(keyBlob(damaged), []byte("other bytes"))); err != nil {
		t.Fatal(err)
	}
	nowhere := hashing.Sum([]byte("bytes stored nowhere"))

	reads := &blobValueReads{Driver: s.kv}
	s.kv = reads
	for _, d := range stored {
		if err := s.StatBlob(ctx, d); err != nil {
			t.Errorf("stored %s: %v", d.Short(), err)
		}
	}
	if err := s.StatBlob(ctx, damaged); err != nil {
		t.Errorf("damaged record: %v, want found", err)
	}
	var pe *PrunedError
	if err := s.StatBlob(ctx, spill); !errors.As(err, &pe) || !errors.Is(err, ErrPruned) || pe.PrunedAt != hashing.FormatTime(at.Add(2*time.Hour)) || pe.Digest != spill {
		t.Errorf("pruned: %v", err)
	}
	if err := s.StatBlob(ctx, nowhere); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrPruned) {
		t.Errorf("never stored: %v", err)
	}
	if reads.n != 0 {
		t.Errorf("StatBlob read %d blob record values", reads.n)
	}
	s.kv = reads.Driver

	// OpenBlob agrees, and only it finds the damage.
	for _, d := range stored {
		br, err := s.OpenBlob(ctx, d)
		if err != nil {
			t.Errorf("open stored %s: %v", d.Short(), err)
			continue
		}
		br.Close()
	}
	if _, err := s.OpenBlob(ctx, spill); !errors.Is(err, ErrPruned) {
		t.Errorf("open pruned: %v", err)
	}
	if _, err := s.OpenBlob(ctx, nowhere); !errors.Is(err, ErrNotFound) {
		t.Errorf("open never stored: %v", err)
	}
	if _, err := s.OpenBlob(ctx, damaged); !errors.Is(err, ErrCorrupt) {
		t.Errorf("open damaged: %v", err)
	}
}

// markPrunedHere writes the store-wide marker that blob d was pruned at
// at, as a prune here or an earlier version's import of a bundle listing
// it as pruned did; bytes stored under d stay.
func markPrunedHere(t *testing.T, s *Store, d hashing.Digest, at string) {
	t.Helper()
	if err := s.kv.Commit(context.Background(), kv.Batch{Sets: []kv.Record{{Key: keyPruned(d), Value: []byte(`{"pruned_at":"` + at + `"}`)}}}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitStoresItsBlobData: the bytes of CommitRequest.BlobData —
// small, and chunked — are stored in the commit's write and held by the
// context, and only when the commit is accepted: a refused commit (its
// check, a stale parent) and a no-op store none of them.
func TestCommitStoresItsBlobData(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeEnforce); err != nil {
		t.Fatal(err)
	}
	small, big := []byte("bytes of the commit"), blobBytes(2*BlobChunkSize+5, 7)
	stored := func(data []byte) bool {
		t.Helper()
		had, err := s.HasBlob(ctx, hashing.Sum(data))
		if err != nil {
			t.Fatal(err)
		}
		return had
	}
	refuse := errors.New("refused by its check")
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("r", 0, "r")}, BlobData: [][]byte{small, big},
		Check: func(*graph.State, []graph.Change) error { return refuse }}); !errors.Is(err, refuse) {
		t.Fatalf("refused commit: %v", err)
	}
	stale := hashing.Sum([]byte("not the head"))
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Parent: &stale, Ops: []graph.Op{notePut("r", 0, "r")}, BlobData: [][]byte{small, big}}); !errors.Is(err, ErrStale) {
		t.Fatalf("stale commit: %v", err)
	}
	if stored(small) || stored(big) {
		t.Fatalf("a refused commit stored its blob data (small %v, big %v)", stored(small), stored(big))
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("k", 0, "k")}, BlobData: [][]byte{small, big, small}}); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{small, big} {
		got, err := s.GetContextBlob(ctx, "c", hashing.Sum(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("blob of %d bytes after the commit: %d bytes (%v)", len(data), len(got), err)
		}
	}
	noop := []byte("bytes of a no-op")
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut("k", 0, "k")}, BlobData: [][]byte{noop}})
	if err != nil || !res.Noop {
		t.Fatalf("no-op commit: %v %+v", err, res)
	}
	if stored(noop) {
		t.Fatal("a no-op commit stored its blob data")
	}
	mustCheck(t, s)
}

// cutReader yields its bytes, then err in place of io.EOF: a request
// body, gzip or tar stream that stopped early answers io.ErrUnexpectedEOF.
type cutReader struct {
	r   io.Reader
	err error
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		err = c.err
	}
	return n, err
}

// TestWriteBlobReaderErrorStoresNothing: an error of the reader —
// io.ErrUnexpectedEOF included, which a short read of io.ReadFull also
// answers — is returned, and nothing is stored, whether the bytes before
// it fit in one record or not.
func TestWriteBlobReaderErrorStoresNothing(t *testing.T) {
	ctx := context.Background()
	other := errors.New("connection reset")
	for _, readErr := range []error{io.ErrUnexpectedEOF, other} {
		s := openTest(t, t.TempDir()) // a store of its own: the empty blob is one digest
		defer s.Close()
		for _, n := range []int{0, 10, BlobChunkSize, BlobChunkSize + 10} {
			data := blobBytes(n, byte(n))
			_, err := s.WriteBlob(ctx, &cutReader{bytes.NewReader(data), readErr})
			if !errors.Is(err, readErr) {
				t.Errorf("%d bytes then %v: WriteBlob answered %v", n, readErr, err)
			}
			if had, herr := s.HasBlob(ctx, hashing.Sum(data)); herr != nil || had {
				t.Errorf("%d bytes then %v: stored %v (%v), want nothing stored", n, readErr, had, herr)
			}
		}
	}
	// A reader that ends with io.EOF is stored whole.
	s := openTest(t, t.TempDir())
	defer s.Close()
	data := blobBytes(10, 1)
	info, err := s.WriteBlob(ctx, bytes.NewReader(data))
	if err != nil || info.Digest != hashing.Sum(data) || info.Size != 10 {
		t.Fatalf("WriteBlob of 10 bytes: %+v, %v", info, err)
	}
}

// putSingleRecord stores data, whose SHA-256 is d, as one record whatever
// its size, as every store before chunking did.
func putSingleRecord(ctx context.Context, s *Store, d hashing.Digest, data []byte) error {
	return s.putLayout(ctx, blobLayout{d: d, imm: []kv.Record{{Key: keyBlob(d), Value: data}}})
}
