package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// checkpointRecords returns how many records hold context ctxID's leaf
// checkpoint of context hash h: the bucket records its table names that
// are stored, or the records of one kept whole by an earlier release.
func checkpointRecords(t *testing.T, s *Store, ctxID string, h hashing.Digest) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	if err := s.kv.Scan(ctx, prefixLeaves(h), nil, 0, func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	v, err := s.kv.Get(ctx, keyLeafTable(ctxID, h))
	if errors.Is(err, kv.ErrNotFound) {
		return n
	}
	if err != nil {
		t.Fatal(err)
	}
	tb, err := decodeLeafTable(v)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for b := range 256 {
		if tb.lens[b] > 0 {
			keys = append(keys, keyLeafBucket(ctxID, tb.digests[b]))
		}
	}
	have, err := kv.Has(ctx, s.kv, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range have {
		if ok {
			n++
		}
	}
	return n
}

// checkpointedBig makes, in a store at dir, context "big" of
// claimChain(5000) in one commit, closes the store (which writes the
// head's leaf checkpoint) and opens it again.
func checkpointedBig(t *testing.T, dir string) (*Store, *replay.Commit) {
	t.Helper()
	s := openTest(t, dir)
	if _, err := s.CreateContext(context.Background(), "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, s, "big", claimChain(5000)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openTest(t, dir), c
}

// allBuckets is how many buckets hold the leaves of a state of thousands
// of artifacts and edges: every one (a state of 5,000 leaves leaves one
// of 256 buckets empty with a chance of about 10^-6).
const allBuckets = 256

// claimChain returns the ops of n claims a00000 … each derived_from the
// one before: n artifacts and n-1 edges.
func claimChain(n int) []graph.Op {
	var ops []graph.Op
	for i := range n {
		ops = append(ops, put(fmt.Sprintf("a%05d", i), "claim", map[string]any{"i": i}))
		if i > 0 {
			ops = append(ops, link(fmt.Sprintf("a%05d", i), "derived_from", fmt.Sprintf("a%05d", i-1)))
		}
	}
	return ops
}

// TestLeafCheckpoints: Close writes the leaf checkpoint of a big cached
// head; a reopened store opens the head from it (not by a walk) and reads
// and commits as before; the next checkpoint replaces it; a corrupt one
// is not used — the head is opened by a walk, reads the same — and fsck
// reports it, and the walk writes it afresh; a small head has none.
func TestLeafCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	for _, id := range []string{"big", "small"} {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	ops := claimChain(5000)
	c1 := mustCommit(t, s, "big", ops...)
	mustCommit(t, s, "small", put("x", "claim", map[string]any{"i": 1}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := allBuckets
	s = openTest(t, dir)
	if got := checkpointRecords(t, s, "big", c1.ContextHash); got != want {
		t.Fatalf("checkpoint of the big head: %d records, want %d", got, want)
	}
	if acc := s.readCheckpoint(ctx, "big", c1); acc == nil || acc.Root() != c1.ContextHash {
		t.Fatal("the checkpoint does not read back")
	}
	var hashAt hashing.Digest
	if err := s.Read(ctx, "big", "", func(v *View) error {
		hashAt = v.State.Hash()
		if got := len(v.State.In("a00100")); got != 1 {
			return fmt.Errorf("a00100 has %d dependents", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h, err := s.head("big", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	if hashAt != c1.ContextHash || h.ckpt != c1.ContextHash {
		t.Fatalf("reopened head: hash %s, opened from checkpoint %s", hashAt.Short(), h.ckpt.Short())
	}
	c2 := mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}), link("a05000", "derived_from", "a04999"))
	mustCheck(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	if checkpointRecords(t, s, "big", c2.ContextHash) != want || checkpointRecords(t, s, "big", c1.ContextHash) != 0 {
		t.Fatalf("after a commit and Close: %d records of the new checkpoint, %d of the old (want %d, 0)",
			checkpointRecords(t, s, "big", c2.ContextHash), checkpointRecords(t, s, "big", c1.ContextHash), want)
	}
	if err := s.Read(ctx, "small", "", func(v *View) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Corrupt a bucket of the checkpoint: one leaf changed. Its table
	// still checks, so the head opens from it; fsck reports the bucket;
	// the bucket, once needed, is read from the state map instead, and
	// its record and the table naming it are deleted.
	acc := s.readCheckpoint(ctx, "big", c2)
	if acc == nil {
		t.Fatal("the checkpoint does not read back")
	}
	var bad hashing.Digest
	acc.Buckets(func(b byte, d hashing.Digest, _ int) {
		if b == 0x42 {
			bad = d
		}
	})
	key := keyLeafBucket("big", bad)
	v, err := s.kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	v[40] ^= 1
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: key, Value: v}}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range rep.Defects {
		found = found || d.Kind == "checkpoint" && d.Context == "big" && d.ID == c2.ContextHash.String() && strings.Contains(d.Detail, "bucket 42")
	}
	if !found {
		t.Fatalf("fsck did not report the corrupt checkpoint: %+v", rep.Defects)
	}
	acc = s.readCheckpoint(ctx, "big", c2)
	var wantLeaves []hashing.Digest
	if err := s.Read(ctx, "big", "", func(v *View) error {
		wantLeaves = v.State.Leaves()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := acc.Leaves(); acc.Err() != nil || !slices.Equal(got, wantLeaves) {
		t.Fatalf("the corrupt bucket was not read from the state map (err %v)", acc.Err())
	}
	if _, err := s.kv.Get(ctx, key); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the corrupt bucket record is still there (%v)", err)
	}
	if _, err := s.kv.Get(ctx, keyLeafTable("big", c2.ContextHash)); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the table naming the corrupt bucket is still there (%v)", err)
	}
	mustCheck(t, s)
	if err := s.Read(ctx, "big", "", func(v *View) error {
		if v.State.Hash() != c2.ContextHash || v.State.NumArtifacts() != 5001 {
			return fmt.Errorf("hash %s, %d artifacts", v.State.Hash().Short(), v.State.NumArtifacts())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close() // waits for the checkpoint the walk rewrites
	s = openTest(t, dir)
	mustCheck(t, s)
	s.Close()
	s = openTest(t, dir)
	defer s.Close()
	for _, id := range []string{"small"} {
		c, err := s.Resolve(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if checkpointRecords(t, s, id, c.ContextHash) != 0 {
			t.Fatal("a small head has a checkpoint")
		}
	}
}

// TestCheckpointOnEviction: a big head made by commits has no leaf
// checkpoint; once small contexts push it out of a small cache, its
// checkpoint is written in the background, and the head is opened from it
// when the context is used again.
func TestCheckpointOnEviction(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), NoSync: true, CacheBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	ops := claimChain(5000)
	c := mustCommit(t, s, "big", ops...)
	if got := checkpointRecords(t, s, "big", c.ContextHash); got != 0 {
		t.Fatalf("a head made by a commit has %d checkpoint records before it is evicted", got)
	}
	cached := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.heads[headKey("big", DefaultBranch)] != nil
	}
	for i := 0; cached(); i++ {
		if i == 500 {
			t.Fatal("500 small contexts did not evict the big head")
		}
		id := fmt.Sprintf("small-%d", i)
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
		var small []graph.Op
		for j := range 40 {
			small = append(small, put(fmt.Sprintf("s%d", j), "claim", map[string]any{"j": j}))
		}
		mustCommit(t, s, id, small...)
	}
	s.background.Wait()
	want := allBuckets
	if got := checkpointRecords(t, s, "big", c.ContextHash); got != want {
		t.Fatalf("the evicted head's checkpoint has %d records, want %d", got, want)
	}
	if h := reopenedHead(t, s, "big", c); h.ckpt != c.ContextHash {
		t.Fatalf("the reopened head was not opened from the checkpoint (its checkpoint: %s)", h.ckpt.Short())
	}
	mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}), link("a05000", "derived_from", "a04999"))
	mustCheck(t, s)
}

// BenchmarkDeleteCheckpoint deletes the leaf checkpoint of a state of
// two million leaves (64 MB in 256 bucket records: the 1M scenario's
// context),
// as a head that writes a newer one does with the one it was opened
// from; the checkpoint is written again, untimed, before each delete.
func BenchmarkDeleteCheckpoint(b *testing.B) {
	s := benchOpen(b, b.TempDir(), false)
	defer s.Close()
	ctx := context.Background()
	leaves := make([]hashing.Digest, 2_000_000)
	for i := range leaves {
		leaves[i] = hashing.Sum(fmt.Appendf(nil, "leaf %d", i))
	}
	acc := hashing.NewAccumulator()
	acc.AddBatch(leaves)
	h := acc.Root()
	for b.Loop() {
		b.StopTimer()
		if err := s.writeCheckpoint(ctx, "bench", acc, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.deleteCheckpoints(ctx, "bench", h); err != nil {
			b.Fatal(err)
		}
	}
}

// reopenedHead reads context ctxID's main branch, checks that its state
// hashes to want's context hash, and returns its head (opened by the read
// when it was not cached).
func reopenedHead(t *testing.T, s *Store, ctxID string, want *replay.Commit) *head {
	t.Helper()
	if err := s.Read(context.Background(), ctxID, "", func(v *View) error {
		if v.State.Hash() != want.ContextHash {
			return fmt.Errorf("reopened at %s, want %s", v.State.Hash().Short(), want.ContextHash.Short())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h, err := s.head(ctxID, DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReopenFromCheckpointHint: a head dropped from the cache without its
// checkpoint (as a kill -9 drops it) is opened again from the checkpoint
// its context's hint names and the diff of the two commits' maps — puts,
// new versions, deletes, links, unlinks and changed edge attributes
// between them — without walking its map; a hint whose checkpoint is gone
// falls back to the walk; fsck accepts a sound hint and reports a
// malformed one.
func TestReopenFromCheckpointHint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "big", append(claimChain(5000),
		graph.Op{Op: graph.OpLink, From: "a00009", Rel: "cites", To: "a00008", Attrs: json.RawMessage(`{"w":1}`)})...)
	if err := s.Close(); err != nil { // writes the head's checkpoint and the hint
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	if v, err := s.kv.Get(ctx, keyLeafAt("big")); err != nil || hashing.Digest(v) != c1.ID {
		t.Fatalf("hint after Close: %x, %v; want %s", v, err, c1.ID.Short())
	}
	attrs := json.RawMessage(`{"w":1}`)
	mustCommit(t, s, "big", put("n1", "claim", map[string]any{"n": 1}), link("n1", "derived_from", "a00007"),
		graph.Op{Op: graph.OpLink, From: "n1", Rel: "cites", To: "a00008", Attrs: attrs})
	mustCommit(t, s, "big", put("a00010", "claim", map[string]any{"i": "changed"}), graph.Op{Op: graph.OpUnlink, From: "a04999", Rel: "derived_from", To: "a04998"}, graph.Op{Op: graph.OpDelete, ID: "a04999"},
		graph.Op{Op: graph.OpUnlink, From: "a00003", Rel: "derived_from", To: "a00002"},
		graph.Op{Op: graph.OpLink, From: "n1", Rel: "cites", To: "a00008", Attrs: json.RawMessage(`{"w":2}`)},
		graph.Op{Op: graph.OpLink, From: "a00009", Rel: "cites", To: "a00008", Attrs: json.RawMessage(`{"w":3}`)})
	c3 := mustCommit(t, s, "big", put("n2", "claim", map[string]any{"n": 2}), link("n2", "derived_from", "n1"))
	reopened := func(want *replay.Commit) *head {
		t.Helper()
		h := reopenedHead(t, s, "big", want)
		s.background.Wait()
		return h
	}
	forgetHeads(s)
	if h := reopened(c3); h.ckpt != c1.ContextHash {
		t.Fatalf("the head was not opened from the hint's checkpoint (its checkpoint: %s, want %s)", h.ckpt.Short(), c1.ContextHash.Short())
	}
	if n := checkpointRecords(t, s, "big", c3.ContextHash); n != 0 {
		t.Fatalf("%d checkpoint records of the reopened commit: it was walked", n)
	}
	c4 := mustCommit(t, s, "big", put("n3", "claim", map[string]any{"n": 3}), link("n3", "derived_from", "n2"))
	mustCheck(t, s)

	// Evicted with few changes since the hint's checkpoint, the head
	// writes none and opens from that checkpoint again; with an eighth of
	// its state changed, it writes its own and moves the hint.
	evict := func() {
		h, err := s.head("big", DefaultBranch)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		delete(s.heads, headKey("big", DefaultBranch))
		s.checkpointEvicted([]*head{h})
		s.mu.Unlock()
		s.background.Wait()
	}
	evict()
	if n := checkpointRecords(t, s, "big", c4.ContextHash); n != 0 {
		t.Fatalf("an evicted head a few entries from the hint's checkpoint wrote %d records of its own", n)
	}
	if h := reopened(c4); h.ckpt != c1.ContextHash {
		t.Fatalf("the head evicted without a checkpoint was not opened from the hint's (its checkpoint: %s)", h.ckpt.Short())
	}
	var many []graph.Op
	for i := range (c4.Artifacts + c4.Edges) / (changedSince / 2) {
		many = append(many, put(fmt.Sprintf("m%d", i), "claim", map[string]any{"m": i}))
	}
	c5 := mustCommit(t, s, "big", many...)
	evict()
	if v, err := s.kv.Get(ctx, keyLeafAt("big")); err != nil || hashing.Digest(v) != c5.ID || checkpointRecords(t, s, "big", c5.ContextHash) == 0 {
		t.Fatalf("an evicted head an eighth of its state from its checkpoint wrote none, or did not move the hint (%x, %v)", v, err)
	}
	if checkpointRecords(t, s, "big", c1.ContextHash) != 0 {
		t.Fatal("the checkpoint the head was opened from was kept beside its new one")
	}

	// A hint whose checkpoint is gone: the walk, which writes one.
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyLeafAt("big"), Value: c3.ID[:]}}}); err != nil {
		t.Fatal(err)
	}
	c6 := mustCommit(t, s, "big", put("n5", "claim", map[string]any{"n": 5}))
	forgetHeads(s)
	if h := reopened(c6); h.ckpt != c6.ContextHash || checkpointRecords(t, s, "big", c6.ContextHash) == 0 {
		t.Fatalf("after a hint without a checkpoint: head's checkpoint %s, want %s written by the walk", h.ckpt.Short(), c6.ContextHash.Short())
	}
	mustCommit(t, s, "big", put("n4", "claim", map[string]any{"n": 4}))

	// fsck: a hint that is not a commit id.
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyLeafAt("big"), Value: []byte("short")}}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range rep.Defects {
		found = found || d.Kind == "checkpoint" && d.Context == "big" && strings.Contains(d.Detail, "checkpoint hint of 5 bytes")
	}
	if !found {
		t.Fatalf("fsck did not report the malformed hint: %+v", rep.Defects)
	}
}

// TestColdHeadReadsTouchedBuckets: a big head reopened from its
// checkpoint holds none of its leaves; a one-artifact commit reads the
// buckets it changes (its artifact's and its link's), not the other 254,
// and lands on the context hash a head loaded whole computes (fsck); the
// next checkpoint writes only the buckets that changed.
func TestColdHeadReadsTouchedBuckets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, c1 := checkpointedBig(t, dir)
	h := reopenedHead(t, s, "big", c1)
	if h.ckpt != c1.ContextHash {
		t.Fatal("the head was not opened from its checkpoint")
	}
	all := (c1.Artifacts + c1.Edges) * len(hashing.Digest{})
	if got := h.state.LeafBytes(); got != 0 {
		t.Fatalf("a head opened from its checkpoint holds %d bytes of leaves before a commit", got)
	}
	c2 := mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}), link("a05000", "derived_from", "a04999"))
	h, err := s.head("big", DefaultBranch)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.state.LeafBytes(); got == 0 || got > all/50 {
		t.Fatalf("after a one-artifact commit the head holds %d bytes of leaves (all of them: %d)", got, all)
	}
	mustCheck(t, s)
	// Close writes the new checkpoint: two bucket records more, the old
	// table gone, its two replaced buckets swept.
	buckets := func() int {
		n := 0
		if err := kv.ScanKeys(ctx, s.kv, prefixLeafBuckets("big"), nil, 0, func([]byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := buckets(); got != allBuckets {
		t.Fatalf("%d bucket records before the second checkpoint", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	if got := buckets(); got != allBuckets || checkpointRecords(t, s, "big", c2.ContextHash) != allBuckets || checkpointRecords(t, s, "big", c1.ContextHash) != 0 {
		t.Fatalf("after the second checkpoint: %d bucket records, %d of its table, %d of the first", got,
			checkpointRecords(t, s, "big", c2.ContextHash), checkpointRecords(t, s, "big", c1.ContextHash))
	}
	reopenedHead(t, s, "big", c2)
	mustCommit(t, s, "big", put("a05001", "claim", map[string]any{"i": 5001}))
	mustCheck(t, s)
}

// TestLegacyCheckpointRead: a leaf checkpoint kept whole, as releases
// before bucket records wrote it, is still read; the next checkpoint of
// its context replaces it with bucket records and deletes it.
func TestLegacyCheckpointRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "big", claimChain(5000)...)
	var leaves []hashing.Digest
	if err := s.Read(ctx, "big", "", func(v *View) error {
		leaves = v.State.Leaves()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	// Replace the checkpoint by one kept whole: parts of leafChunk leaves.
	s.ckptMu.Lock()
	if err := s.deleteCheckpoints(ctx, "big", c1.ContextHash); err != nil {
		t.Fatal(err)
	}
	s.ckptMu.Unlock()
	var recs []kv.Record
	for i := 0; i < len(leaves); i += leafChunk / 4 { // several parts
		var v []byte
		for _, l := range leaves[i:min(i+leafChunk/4, len(leaves))] {
			v = append(v, l[:]...)
		}
		recs = append(recs, kv.Record{Key: keyLeaves(c1.ContextHash, uint32(i/(leafChunk/4))), Value: v})
	}
	if err := s.kv.PutImmutable(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if got := checkpointRecords(t, s, "big", c1.ContextHash); got != len(recs) {
		t.Fatalf("%d records of the whole checkpoint, want %d", got, len(recs))
	}
	if h := reopenedHead(t, s, "big", c1); h.ckpt != c1.ContextHash {
		t.Fatal("the head was not opened from the checkpoint kept whole")
	}
	s.background.Wait()
	if _, err := s.kv.Get(ctx, keyLeafTable("big", c1.ContextHash)); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the head was opened by a walk, which wrote a table (%v)", err)
	}
	mustCheck(t, s)
	c2 := mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	if checkpointRecords(t, s, "big", c1.ContextHash) != 0 || checkpointRecords(t, s, "big", c2.ContextHash) != allBuckets {
		t.Fatalf("after the next checkpoint: %d records of the one kept whole, %d of the new one",
			checkpointRecords(t, s, "big", c1.ContextHash), checkpointRecords(t, s, "big", c2.ContextHash))
	}
	mustCheck(t, s)
}

// TestColdHeadBucketsGoneOrBad: a head opened cold whose bucket records
// are then all corrupt — with a reader pinned across a commit, so the
// head is a fork over the pinned state and its checkpoint at Close reads
// cold buckets while it holds the checkpoint lock — commits, reads and
// closes (no deadlock), landing on the right context hashes; the bad
// records go, with the tables naming them, and fsck is clean after. Then
// every bucket record deleted: the next commit reads the buckets from the
// state map.
func TestColdHeadBucketsGoneOrBad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, c1 := checkpointedBig(t, dir)
	reopenedHead(t, s, "big", c1)
	// Corrupt every bucket record.
	var recs []kv.Record
	if err := s.kv.Scan(ctx, prefixLeafBuckets("big"), nil, 0, func(k, v []byte) error {
		v = bytes.Clone(v)
		v[len(v)-1] ^= 1
		recs = append(recs, kv.Record{Key: bytes.Clone(k), Value: v})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != allBuckets {
		t.Fatalf("%d bucket records", len(recs))
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: recs}); err != nil {
		t.Fatal(err)
	}
	// A reader pinned across a commit: the head becomes a fork over it.
	in, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.Read(ctx, "big", "", func(v *View) error {
			close(in)
			<-hold
			return nil
		})
	}()
	<-in
	c2 := mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}), link("a05000", "derived_from", "a04999"))
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return: the checkpoint waits on itself")
	}
	s = openTest(t, dir)
	reopenedHead(t, s, "big", c2)
	c3 := mustCommit(t, s, "big", put("a05001", "claim", map[string]any{"i": 5001}))
	mustCheck(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	reopenedHead(t, s, "big", c3)
	// Every bucket record gone.
	var dels [][]byte
	if err := kv.ScanKeys(ctx, s.kv, prefixLeafBuckets("big"), nil, 0, func(k []byte) error {
		dels = append(dels, bytes.Clone(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.kv.Commit(ctx, kv.Batch{Deletes: dels}); err != nil {
		t.Fatal(err)
	}
	var bulk []graph.Op
	for i := range 600 {
		bulk = append(bulk, put(fmt.Sprintf("g%d", i), "claim", map[string]any{"g": i}))
	}
	mustCommit(t, s, "big", bulk...)
	// fsck reports the table whose records were deleted under it, and
	// nothing else: the commits' hashes check.
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Defects {
		if d.Kind != "checkpoint" || d.ID != c3.ContextHash.String() {
			t.Fatalf("fsck: %+v", d)
		}
	}
	if len(rep.Defects) == 0 {
		t.Fatal("fsck did not report the table whose buckets are gone")
	}
}

// sweepBeforeTable is a driver that runs a sweep of context ctxID's
// bucket records once, after the first bucket records a checkpoint puts
// and before its table: the sweep deletes them (no table names them yet).
type sweepBeforeTable struct {
	kv.Driver
	s     *Store
	ctxID string
	swept bool
}

func (d *sweepBeforeTable) PutImmutable(ctx context.Context, recs []kv.Record) error {
	if err := d.Driver.PutImmutable(ctx, recs); err != nil {
		return err
	}
	if !d.swept && len(recs) > 0 && bytes.HasPrefix(recs[0].Key, prefixLeafBuckets(d.ctxID)) {
		d.swept = true
		return d.s.sweepLeafBuckets(ctx, d.ctxID)
	}
	return nil
}

// TestCheckpointGenerationSwap: a sweep between a checkpoint's bucket
// records and its table (another process's, in a shared database) moves
// the context's checkpoint generation; the table's swap of it fails, and
// the writer puts its buckets again before it commits the table — no
// table names a bucket that is not stored.
func TestCheckpointGenerationSwap(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "big", claimChain(5000)...)
	var acc *hashing.Accumulator
	if err := s.Read(ctx, "big", "", func(v *View) error {
		acc = v.State.LeafSet()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.background.Wait()
	orig := s.kv
	d := &sweepBeforeTable{Driver: orig, s: s, ctxID: "big"}
	s.kv = d
	// A checkpoint of the same leaves under another context: none of its
	// buckets is stored yet.
	if _, err := s.CreateContext(ctx, "twin", ModeObserve); err != nil {
		t.Fatal(err)
	}
	d.ctxID = "twin"
	err := s.writeCheckpoint(ctx, "twin", acc, nil)
	s.kv = orig
	if err != nil {
		t.Fatal(err)
	}
	if !d.swept {
		t.Fatal("the sweep did not run between the buckets and the table")
	}
	if got := checkpointRecords(t, s, "twin", c1.ContextHash); got != allBuckets {
		t.Fatalf("the table names %d stored buckets, want %d", got, allBuckets)
	}
	mustCheck(t, s)
}

// TestCheckpointsEvictedTogether: two branch heads of a context opened
// from one checkpoint, both changed and evicted in one batch: the first
// to write keeps the checkpoint both were opened from (the other, no
// longer cached, still reads its buckets), the second deletes it — and
// neither reads a bucket from the state map.
func TestCheckpointsEvictedTogether(t *testing.T) {
	ctx := context.Background()
	s, c1, logged := bigWithDev(t, nil)
	defer s.Close()
	var heads []*head
	for _, br := range []string{DefaultBranch, "dev"} {
		var many []graph.Op
		for i := range 1000 {
			many = append(many, put(fmt.Sprintf("%s-%d", br, i), "claim", map[string]any{"i": i}))
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: "big", Branch: br, Author: "t", Message: "m", Ops: many}); err != nil {
			t.Fatal(err)
		}
		h, err := s.head("big", br)
		if err != nil {
			t.Fatal(err)
		}
		if h.ckpt != c1.ContextHash {
			t.Fatalf("branch %s: head opened from %s, not the checkpoint", br, h.ckpt.Short())
		}
		heads = append(heads, h)
	}
	s.mu.Lock()
	for _, h := range heads {
		delete(s.heads, headKey("big", h.branch))
	}
	s.checkpointEvicted(heads)
	s.mu.Unlock()
	s.background.Wait()
	if out := logged(); strings.Contains(out, "from the state map") {
		t.Fatalf("a bucket was read from the state map:\n%s", out)
	}
	if checkpointRecords(t, s, "big", c1.ContextHash) != 0 {
		t.Fatal("the checkpoint both heads were opened from was kept")
	}
	for _, h := range heads {
		if checkpointRecords(t, s, "big", h.commit.ContextHash) != allBuckets {
			t.Fatalf("branch %s: its checkpoint was not written whole", h.branch)
		}
	}
	mustCheck(t, s)
}

// bigWithDev makes, in a store of its own, context "big" (claimChain of
// 5,000) with branch "dev" at its head, calls more (nil: nothing) on the
// store, then closes it — which writes the heads' checkpoints — and
// returns it reopened, with the chain's commit and a function that
// returns what the reopened store logged since its last call.
func bigWithDev(t *testing.T, more func(s *Store)) (*Store, *replay.Commit, func() string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var logs bytes.Buffer
	var mu sync.Mutex
	open := func() *Store {
		s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), Logger: slog.New(slog.NewTextHandler(&lockedWriter{&mu, &logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "big", claimChain(5000)...)
	if err := s.CreateBranch(ctx, "big", "dev", c1.ID); err != nil {
		t.Fatal(err)
	}
	if more != nil {
		more(s)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		out := logs.String()
		logs.Reset()
		return out
	}
	return s, c1, logged
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// leavesOfCommit returns an accumulator of the leaves of the state at the
// head of ctxID's default branch, which must be at commit want.
func leavesOfCommit(t *testing.T, s *Store, ctxID string, want *replay.Commit) *hashing.Accumulator {
	t.Helper()
	var buf []byte
	if err := s.Read(context.Background(), ctxID, "", func(v *View) error {
		if v.Commit.ID != want.ID {
			return fmt.Errorf("read at %s, want %s", v.Commit.ID.Short(), want.ID.Short())
		}
		for _, l := range v.State.Leaves() {
			buf = append(buf, l[:]...)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	acc, err := hashing.AccumulatorOfSorted(buf)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Root() != want.ContextHash {
		t.Fatalf("leaves of %s hash to %s", want.ID.Short(), acc.Root().Short())
	}
	return acc
}

// unnamedBuckets returns how many of context ctxID's bucket records no
// checkpoint table of the context names.
func unnamedBuckets(t *testing.T, s *Store, ctxID string) int {
	t.Helper()
	ctx := context.Background()
	named := map[hashing.Digest]bool{}
	if err := s.kv.Scan(ctx, prefixLeafTables(ctxID), nil, 0, func(_, v []byte) error {
		tb, err := decodeLeafTable(v)
		if err != nil {
			return err
		}
		for b := range 256 {
			if tb.lens[b] > 0 {
				named[tb.digests[b]] = true
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := 0
	prefix := prefixLeafBuckets(ctxID)
	if err := kv.ScanKeys(ctx, s.kv, prefix, nil, 0, func(k []byte) error {
		if !named[hashing.Digest(k[len(prefix):])] {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOrphanCheckpointsSwept: a checkpoint table no head needs — one of a
// state no branch and no hint is at, no cached head was opened from, as a
// kill -9 between a new table and the old one's delete leaves — goes, with
// the bucket records only it named, at the next checkpoint of its
// context; the table of another branch's head stays, and so do the
// records of a checkpoint cut short until then.
func TestOrphanCheckpointsSwept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c1 := mustCommit(t, s, "big", claimChain(5000)...)
	acc1 := leavesOfCommit(t, s, "big", c1)
	c2 := mustCommit(t, s, "big", put("a05000", "claim", map[string]any{"i": 5000}), link("a05000", "derived_from", "a00000"))
	acc2 := leavesOfCommit(t, s, "big", c2)
	if err := s.CreateBranch(ctx, "big", "kept", c2.ID); err != nil {
		t.Fatal(err)
	}
	c3 := mustCommit(t, s, "big", put("a05001", "claim", map[string]any{"i": 5001}))
	// The table of the kept branch's head, then one of c1's state, which
	// nothing is at: the second write keeps the first.
	for _, acc := range []*hashing.Accumulator{acc2, acc1} {
		if err := s.writeCheckpoint(ctx, "big", acc, nil); err != nil {
			t.Fatal(err)
		}
	}
	if checkpointRecords(t, s, "big", c1.ContextHash) != allBuckets || checkpointRecords(t, s, "big", c2.ContextHash) != allBuckets {
		t.Fatalf("before: %d records of c1's checkpoint, %d of c2's, want %d each",
			checkpointRecords(t, s, "big", c1.ContextHash), checkpointRecords(t, s, "big", c2.ContextHash), allBuckets)
	}
	// A bucket record no table names (a checkpoint cut short).
	stray := hashing.Digest{0xAB}
	if err := s.kv.PutImmutable(ctx, []kv.Record{{Key: keyLeafBucket("big", stray), Value: stray[:]}}); err != nil {
		t.Fatal(err)
	}
	if n := unnamedBuckets(t, s, "big"); n != 1 {
		t.Fatalf("%d bucket records no table names, want the stray one", n)
	}
	// Close writes the head's checkpoint (c3's) and sweeps.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	if _, err := s.kv.Get(ctx, keyLeafTable("big", c1.ContextHash)); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the table of c1's state, which nothing needs, is still there (%v)", err)
	}
	if got := checkpointRecords(t, s, "big", c2.ContextHash); got != allBuckets {
		t.Fatalf("the kept branch's checkpoint has %d records, want %d", got, allBuckets)
	}
	if got := checkpointRecords(t, s, "big", c3.ContextHash); got != allBuckets {
		t.Fatalf("the head's checkpoint has %d records, want %d", got, allBuckets)
	}
	if n := unnamedBuckets(t, s, "big"); n != 0 {
		t.Fatalf("%d bucket records no table names are left", n)
	}
	if h := reopenedHead(t, s, "big", c3); h.ckpt != c3.ContextHash {
		t.Fatal("the head was not opened from its checkpoint")
	}
	mustCheck(t, s)
}

// TestCheckpointSweepPastUnreadableRef: a branch ref whose commit record
// does not read (corruption fsck reports) neither fails a checkpoint
// whose table and hint are written — the head takes it as its own — nor
// stops the sweep: the table the head was opened from goes.
func TestCheckpointSweepPastUnreadableRef(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, c1 := checkpointedBig(t, dir)
	defer s.Close()
	bogus := hashing.Digest{0xde, 0xad}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyRef("big", "broken"), Value: bogus[:]}}}); err != nil {
		t.Fatal(err)
	}
	h := reopenedHead(t, s, "big", c1)
	if h.ckpt != c1.ContextHash {
		t.Fatal("head not opened from c1's checkpoint")
	}
	tables := func() int {
		n := 0
		if err := kv.ScanKeys(ctx, s.kv, prefixLeafTables("big"), nil, 0, func([]byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, id := range []string{"x1", "x2", "x3"} {
		c := mustCommit(t, s, "big", put(id, "claim", map[string]any{"i": i}))
		h.mu.Lock()
		err := s.checkpointHead(ctx, h, false, nil)
		ckpt := h.ckpt
		h.mu.Unlock()
		_, terr := s.kv.Get(ctx, keyLeafTable("big", c.ContextHash))
		hint := s.hintedCommit(ctx, "big")
		t.Logf("write %d: err=%v; table written=%v; hint moved=%v; head.ckpt is new=%v; tables now=%d",
			i, err, terr == nil, hint != nil && hint.ID == c.ID, ckpt == c.ContextHash, tables())
	}
	if _, err := s.kv.Get(ctx, keyLeafTable("big", c1.ContextHash)); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("c1's table, which the head was opened from and no ref names, was never deleted (old rule deleted it); %d tables for one head", tables())
	}
	if h.ckpt == c1.ContextHash {
		t.Errorf("head.ckpt still names c1's checkpoint although three newer ones were written")
	}
}

// TestEvictedInEarlierBatchKeepsItsCheckpoint: two heads evicted in two
// batches (two checkpointEvicted goroutines), the second batch's running
// first: its sweep keeps the checkpoint the first batch's head was opened
// from, which that head reads its cold buckets from when it writes its
// own — not a walk of its state map.
func TestEvictedInEarlierBatchKeepsItsCheckpoint(t *testing.T) {
	ctx := context.Background()
	s, c1, logged := bigWithDev(t, func(s *Store) {
		var many []graph.Op
		for i := range 1000 {
			many = append(many, put(fmt.Sprintf("dev-%d", i), "claim", map[string]any{"i": i}))
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: "big", Branch: "dev", Author: "t", Message: "m", Ops: many}); err != nil {
			t.Fatal(err)
		}
	})
	defer s.Close()
	// The hint at main's commit (as when main's checkpoint was written last).
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyLeafAt("big"), Value: c1.ID[:]}}}); err != nil {
		t.Fatal(err)
	}
	var heads []*head
	for _, br := range []string{DefaultBranch, "dev"} {
		if _, err := s.Commit(ctx, CommitRequest{Context: "big", Branch: br, Author: "t", Message: "m", Ops: []graph.Op{put(br+"-one", "claim", map[string]any{"i": 1})}}); err != nil {
			t.Fatal(err)
		}
		h, err := s.head("big", br)
		if err != nil {
			t.Fatal(err)
		}
		if h.ckpt == ([32]byte{}) {
			t.Fatalf("%s: head not opened from a checkpoint", br)
		}
		heads = append(heads, h)
	}
	main, dev := heads[0], heads[1]
	s.background.Wait()
	logged() // what the opens logged
	// Two eviction batches, as evictHeadsLocked makes them: {main}, then
	// {dev}. main's goroutine is held up (here: on main's lock), so dev's
	// runs first.
	main.mu.Lock()
	s.mu.Lock()
	delete(s.heads, headKey("big", main.branch))
	s.checkpointEvicted([]*head{main})
	delete(s.heads, headKey("big", dev.branch))
	s.checkpointEvicted([]*head{dev})
	s.mu.Unlock()
	devHash := dev.commit.ContextHash
	for {
		if _, err := s.kv.Get(ctx, keyLeafTable("big", devHash)); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // its sweep
	main.mu.Unlock()
	s.background.Wait()
	if out := logged(); strings.Contains(out, "from the state map") {
		t.Fatalf("main's checkpoint write walked its state map:\n%s", out)
	}
}

// getHook runs fn once, right after a Get of key returned.
type getHook struct {
	kv.Driver
	key  []byte
	once sync.Once
	fn   func()
}

func (d *getHook) Get(ctx context.Context, k []byte) ([]byte, error) {
	v, err := d.Driver.Get(ctx, k)
	if bytes.Equal(k, d.key) {
		d.once.Do(d.fn)
	}
	return v, err
}

// TestOpeningHeadKeepsItsCheckpoint: a checkpoint of another branch
// written while a head is being opened from the hint's checkpoint
// (leavesSince) — between the open's read of the table and its bucket
// reads — deletes no table of the context (Store.opening), so the head
// reads its buckets from the checkpoint, not a walk of its map.
func TestOpeningHeadKeepsItsCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, c1 := checkpointedBig(t, dir)
	s.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), Logger: slog.New(slog.NewTextHandler(&lockedWriter{&mu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateBranch(ctx, "big", "dev", c1.ID); err != nil {
		t.Fatal(err)
	}
	var many []graph.Op
	for i := range 1000 {
		many = append(many, put(fmt.Sprintf("dev-%d", i), "claim", map[string]any{"i": i}))
	}
	d1, err := s.Commit(ctx, CommitRequest{Context: "big", Branch: "dev", Author: "t", Message: "m", Ops: many})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "big", put("main-one", "claim", map[string]any{"i": 1}))
	hdev, err := s.head("big", "dev")
	if err != nil {
		t.Fatal(err)
	}
	devAcc := hdev.state.LeafSet().Clone()
	devAcc.Root()
	// Both heads dropped without a checkpoint (as a kill -9 would): the
	// hint still names c1.
	forgetHeads(s)
	if hc := s.hintedCommit(ctx, "big"); hc == nil || hc.ID != c1.ID {
		t.Fatal("hint not at c1")
	}
	orig := s.kv
	s.kv = &getHook{Driver: orig, key: keyLeafTable("big", c1.ContextHash), fn: func() {
		if err := s.writeCheckpoint(ctx, "big", devAcc, &d1.Commit.ID); err != nil {
			t.Error(err)
		}
	}}
	mu.Lock()
	logs.Reset()
	mu.Unlock()
	h, err := s.head("big", DefaultBranch)
	s.kv = orig
	if err != nil {
		t.Fatal(err)
	}
	if h.ckpt != c1.ContextHash {
		t.Fatalf("main not opened from c1's checkpoint and the diff")
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if strings.Contains(out, "from the state map") {
		t.Fatalf("the head being opened from c1's checkpoint walked its map:\n%s", out)
	}
}
