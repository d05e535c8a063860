package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// A leaf checkpoint is kept bucket by bucket (HASHING.md §4: a state's
// leaves fall in 256 buckets by their first byte, and the context hash is
// SHA-256 over each non-empty bucket's number and digest):
//
//	ltab NUL <ctx> NUL <context hash>    -> the table: for each non-empty bucket, its number, uvarint length and digest
//	lbkt NUL <ctx> NUL <bucket digest>   -> that bucket's leaves, sorted, 32 bytes each
//
// A table checks itself against its name without a read of a bucket (the
// root over its digests must be the context hash), and a bucket record
// against its own (its leaves must hash to it). A head opened from a
// table holds no leaves (hashing.NewColdAccumulator): a commit reads the
// buckets it touches — two for a one-artifact commit, each about 250 KiB
// at a million artifacts and a million edges — instead of the whole
// checkpoint (64 MB). A checkpoint written later stores only the buckets
// whose digests the context does not hold yet, and the records of a
// context's buckets that none of its tables names any more are deleted
// with the tables that go when another is written (sweepLeafTables).
//
// Bucket records are kept per context, not shared by every context with
// the same bucket, so that which are still needed is a question about
// one context's few tables. A context's checkpoint generation
//
//	lgen NUL <ctx>                       -> uint64 BE, moved by every table written and every sweep
//
// orders writers across processes: a table is committed with a swap of
// the generation it read before it checked its buckets were stored, and a
// sweep deletes with a swap of the one it read before it listed the
// tables, so a sweep between a writer's buckets and its table makes the
// writer check its buckets again (and a table is never committed naming
// a bucket a sweep deleted). Within a store, writes take turns
// (Store.ckptMu) as well.
//
// A head over a checkpoint whose buckets were swept meanwhile — another
// process's checkpoint replaced the one both were opened from, or a view
// outside the head cache was — reads what it lacks from its commit's
// state map, in one walk for all the buckets it lacks, as a head opened
// without a checkpoint does.
const (
	pLeafTable  = "ltab\x00"
	pLeafBucket = "lbkt\x00"
	pLeafGen    = "lgen\x00"
)

// keyLeafGen is the key of context ctxID's checkpoint generation.
func keyLeafGen(ctxID string) []byte { return []byte(pLeafGen + ctxID) }

// leafGen returns context ctxID's checkpoint generation and the swap that
// moves it on: from absent, or from its value.
func (s *Store) leafGen(ctx context.Context, ctxID string) (kv.Swap, error) {
	key := keyLeafGen(ctxID)
	v, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return kv.Swap{Key: key, Absent: true, New: binary.BigEndian.AppendUint64(nil, 1)}, nil
	}
	if err != nil {
		return kv.Swap{}, err
	}
	var g uint64
	if len(v) == 8 {
		g = binary.BigEndian.Uint64(v)
	}
	return kv.Swap{Key: key, Old: v, New: binary.BigEndian.AppendUint64(nil, g+1)}, nil
}

// genRetries is how many times a checkpoint write or sweep that lost its
// generation's swap to another process starts again.
const genRetries = 8

// withLeafGen commits the batch that build makes after it read context
// ctxID's checkpoint generation, with the swap that moves it on, and
// starts again (reading the generation, then building) when another
// writer moved it first; nil from build commits nothing.
func (s *Store) withLeafGen(ctx context.Context, ctxID string, build func() (*kv.Batch, error)) error {
	for try := 0; ; try++ {
		gen, err := s.leafGen(ctx, ctxID)
		if err != nil {
			return err
		}
		b, err := build()
		if err != nil || b == nil {
			return err
		}
		b.Swaps = append(b.Swaps, gen)
		err = s.kv.Commit(ctx, *b)
		if !errors.Is(err, kv.ErrConflict) || try == genRetries {
			return err
		}
	}
}

// prefixLeafTables is the prefix of context ctxID's checkpoint tables.
func prefixLeafTables(ctxID string) []byte { return []byte(pLeafTable + ctxID + "\x00") }

// keyLeafTable is the key of the table of context ctxID's checkpoint of
// context hash h.
func keyLeafTable(ctxID string, h hashing.Digest) []byte {
	return append(prefixLeafTables(ctxID), h[:]...)
}

// prefixLeafBuckets is the prefix of context ctxID's bucket records.
func prefixLeafBuckets(ctxID string) []byte { return []byte(pLeafBucket + ctxID + "\x00") }

// keyLeafBucket is the key of context ctxID's record of the bucket whose
// digest is d.
func keyLeafBucket(ctxID string, d hashing.Digest) []byte {
	return append(prefixLeafBuckets(ctxID), d[:]...)
}

// leafTable is a checkpoint's table: each bucket's digest and length.
type leafTable struct {
	digests [256]hashing.Digest
	lens    [256]int
}

// tableOf returns the table of acc, whose Root must be up to date.
func tableOf(acc *hashing.Accumulator) *leafTable {
	t := &leafTable{}
	acc.Buckets(func(b byte, d hashing.Digest, n int) { t.digests[b], t.lens[b] = d, n })
	return t
}

// encode returns the table's record: for each non-empty bucket in order,
// its number, its length as a uvarint and its digest.
func (t *leafTable) encode() []byte {
	out := make([]byte, 0, 256*(1+3+32))
	for b := range 256 {
		if t.lens[b] == 0 {
			continue
		}
		out = append(out, byte(b))
		out = binary.AppendUvarint(out, uint64(t.lens[b]))
		out = append(out, t.digests[b][:]...)
	}
	return out
}

// errLeafTable marks a table record that does not decode.
var errLeafTable = errors.New("malformed leaf checkpoint table")

// decodeLeafTable decodes a table record; buckets must come in
// increasing order, each with at least one leaf.
func decodeLeafTable(v []byte) (*leafTable, error) {
	t := &leafTable{}
	last := -1
	for len(v) > 0 {
		b := int(v[0])
		n, k := binary.Uvarint(v[1:])
		if b <= last || k <= 0 || n == 0 || n > 1<<40 || len(v) < 1+k+32 {
			return nil, errLeafTable
		}
		t.lens[b] = int(n)
		t.digests[b] = hashing.Digest(v[1+k : 1+k+32])
		v = v[1+k+32:]
		last = b
	}
	return t, nil
}

// leaves returns the number of leaves the table counts.
func (t *leafTable) leaves() int {
	n := 0
	for _, l := range t.lens {
		n += l
	}
	return n
}

// bucketLoader reads context ctxID's bucket records under ctx, for the
// checkpoint of commit c whose table is t. A record that is missing, or
// that the accumulator finds is not the bucket, is read from c's state
// map instead: the first such read walks the map once for every bucket,
// keeps the buckets whose records are missing (the others read as
// usual) and hands each out once, so the walk's copy is not held beside
// the accumulator's. A record that was not its bucket is deleted (in the
// background), with the tables naming it, so the next checkpoint of the
// context writes it again. With c nil (fsck) there is no second way.
func (s *Store) bucketLoader(ctx context.Context, ctxID string, c *replay.Commit, t *leafTable) hashing.BucketLoader {
	var mu sync.Mutex
	var walked *[256][]byte // buckets from a walk, not handed out yet
	fromMap := func(b byte, why string, err error) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if walked == nil || walked[b] == nil {
			if err := ctx.Err(); err != nil {
				return nil, err // the read ended: nothing to warn of
			}
			s.log.Warn("leaf checkpoint bucket "+why+"; reading the checkpoint's buckets from the state map", "context", ctxID, "bucket", b, "err", err)
			acc, err := s.leavesOf(newMapSource(ctx, s, ctxID, c), c)
			if err != nil {
				return nil, err
			}
			all := new([256][]byte)
			for b := range all {
				all[b] = acc.BucketLeaves(byte(b))
			}
			walked = s.missingBuckets(ctx, ctxID, t, all, b)
		}
		v := walked[b]
		walked[b] = nil
		return v, nil
	}
	return func(b byte, d hashing.Digest, _ int, again bool) ([]byte, error) {
		key := keyLeafBucket(ctxID, d)
		if !again {
			v, err := s.kv.Get(ctx, key)
			if err == nil || c == nil {
				return v, err
			}
			return fromMap(b, "unreadable", err)
		}
		if c == nil {
			return nil, errors.New("the record is not the bucket")
		}
		// Not here: the loader may run under s.ckptMu (a checkpoint that
		// reads a cold bucket) or a head's lock.
		s.inBackground(func() {
			if err := s.dropLeafBucket(context.Background(), ctxID, b, d); err != nil {
				s.log.Warn("leaf checkpoint bucket not deleted", "context", ctxID, "bucket", b, "err", err)
			}
		})
		return fromMap(b, "does not hash to its name", nil)
	}
}

// missingBuckets keeps of all, the buckets of a walk of the state whose
// checkpoint table is t, those whose records context ctxID lacks, and
// bucket asked (its record is there but not the bucket); the others are
// read from their records when asked.
func (s *Store) missingBuckets(ctx context.Context, ctxID string, t *leafTable, all *[256][]byte, asked byte) *[256][]byte {
	var keys [][]byte
	var which []byte
	for b := range 256 {
		if t.lens[b] > 0 && byte(b) != asked {
			keys = append(keys, keyLeafBucket(ctxID, t.digests[b]))
			which = append(which, byte(b))
		}
	}
	have, err := kv.Has(ctx, s.kv, keys)
	if err != nil {
		return all // keep them all: a later miss costs no walk
	}
	for i, b := range which {
		if have[i] {
			all[b] = nil
		}
	}
	return all
}

// dropLeafBucket deletes context ctxID's record of bucket b of digest d,
// which is not that bucket, and the tables that name it: the checkpoints
// they are lose one bucket, and the next checkpoint of the context writes
// it again.
func (s *Store) dropLeafBucket(ctx context.Context, ctxID string, b byte, d hashing.Digest) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.withLeafGen(ctx, ctxID, func() (*kv.Batch, error) {
		dels := [][]byte{keyLeafBucket(ctxID, d)}
		err := s.kv.Scan(ctx, prefixLeafTables(ctxID), nil, 0, func(k, v []byte) error {
			t, err := decodeLeafTable(v)
			if err != nil || t.lens[b] > 0 && t.digests[b] == d {
				dels = append(dels, bytes.Clone(k))
			}
			return nil
		})
		return &kv.Batch{Deletes: dels}, err
	})
}

// readLeafTable returns a cold accumulator over context ctxID's checkpoint
// of commit c's state, read under ctx; nil when there is none, or its
// table does not check (then logged).
func (s *Store) readLeafTable(ctx context.Context, ctxID string, c *replay.Commit) *hashing.Accumulator {
	h, n := c.ContextHash, c.Artifacts+c.Edges
	v, err := s.kv.Get(ctx, keyLeafTable(ctxID, h))
	if err != nil {
		if !errors.Is(err, kv.ErrNotFound) && ctx.Err() == nil {
			s.log.Warn("leaf checkpoint table unreadable; trying another way", "context", ctxID, "context_hash", h.Short(), "err", err)
		}
		return nil
	}
	t, err := decodeLeafTable(v)
	if err == nil && t.leaves() != n {
		err = fmt.Errorf("it counts %d leaves, the commit %d", t.leaves(), n)
	}
	var acc *hashing.Accumulator
	if err == nil {
		acc = hashing.NewColdAccumulator(&t.digests, &t.lens, s.bucketLoader(ctx, ctxID, c, t))
		if got := acc.Root(); got != h {
			err = fmt.Errorf("its buckets hash to %s", got)
		}
	}
	if err != nil {
		s.log.Warn("leaf checkpoint table does not check; trying another way", "context", ctxID, "context_hash", h.Short(), "err", err)
		return nil
	}
	return acc
}

// checkpointBatch is about the most bytes of bucket records one
// PutImmutable of a checkpoint carries.
const checkpointBatch = 16 << 20

// writeLeafBuckets stores the records of acc's buckets that context ctxID
// does not hold yet, and returns acc's table. acc's Root must be up to
// date; a cold bucket of acc is read if its record is missing.
func (s *Store) writeLeafBuckets(ctx context.Context, ctxID string, acc *hashing.Accumulator) (*leafTable, error) {
	t := tableOf(acc)
	var keys [][]byte
	var which []byte
	for b := range 256 {
		if t.lens[b] > 0 {
			keys = append(keys, keyLeafBucket(ctxID, t.digests[b]))
			which = append(which, byte(b))
		}
	}
	have, err := kv.Has(ctx, s.kv, keys)
	if err != nil {
		return nil, err
	}
	var recs []kv.Record
	size := 0
	for i, b := range which {
		if have[i] {
			continue
		}
		leaves := acc.BucketLeaves(b)
		if err := acc.Err(); err != nil {
			return nil, err
		}
		recs = append(recs, kv.Record{Key: keys[i], Value: leaves})
		if size += len(leaves); size >= checkpointBatch {
			if err := s.kv.PutImmutable(ctx, recs); err != nil {
				return nil, err
			}
			recs, size = recs[:0], 0
		}
	}
	if len(recs) > 0 {
		if err := s.kv.PutImmutable(ctx, recs); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// sweepLeafBuckets deletes context ctxID's bucket records that none of
// its checkpoint tables names, and its tables that do not decode (no head
// opens from one).
func (s *Store) sweepLeafBuckets(ctx context.Context, ctxID string) error {
	return s.withLeafGen(ctx, ctxID, func() (*kv.Batch, error) {
		named := map[hashing.Digest]bool{}
		var dels [][]byte
		if err := s.kv.Scan(ctx, prefixLeafTables(ctxID), nil, 0, func(k, v []byte) error {
			t, err := decodeLeafTable(v)
			if err != nil {
				dels = append(dels, bytes.Clone(k))
				return nil
			}
			for b := range 256 {
				if t.lens[b] > 0 {
					named[t.digests[b]] = true
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		prefix := prefixLeafBuckets(ctxID)
		if err := kv.ScanKeys(ctx, s.kv, prefix, nil, 0, func(k []byte) error {
			if len(k) != len(prefix)+32 || !named[hashing.Digest(k[len(prefix):])] {
				dels = append(dels, bytes.Clone(k))
			}
			return nil
		}); err != nil || len(dels) == 0 {
			return nil, err
		}
		return &kv.Batch{Deletes: dels}, nil
	})
}

// leafTables checks every checkpoint table: it decodes, its buckets hash
// to its name, and each bucket it names is stored, holds as many leaves
// as it says, and hashes to its digest. A bucket record no table names
// is left over from a checkpoint cut short (the next checkpoint of its
// context deletes it), not a defect.
func (k *checker) leafTables(ctx context.Context) error {
	type table struct {
		ctxID string
		h     hashing.Digest
		v     []byte
	}
	var tables []table
	defect := func(ctxID, id, detail string) {
		k.add(Defect{Kind: "checkpoint", Context: ctxID, ID: id, Detail: "leaf checkpoint: " + detail + "; a head opened from it reads what does not check from its state map instead (delete its table, or leave it)"})
	}
	if err := k.scanAll(ctx, []byte(pLeafTable), func(key, v []byte) error {
		rest := key[len(pLeafTable):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 || len(rest) != i+1+32 {
			defect("", fmt.Sprintf("%q", key), "malformed table key")
			return nil
		}
		tables = append(tables, table{string(rest[:i]), hashing.Digest(rest[i+1:]), bytes.Clone(v)})
		return nil
	}, func(key []byte, why string) { defect("", fmt.Sprintf("%q", key), "table unreadable: "+why) }); err != nil {
		return err
	}
	for _, tb := range tables {
		t, err := decodeLeafTable(tb.v)
		if err != nil {
			defect(tb.ctxID, tb.h.String(), err.Error())
			continue
		}
		acc := hashing.NewColdAccumulator(&t.digests, &t.lens, k.s.bucketLoader(ctx, tb.ctxID, nil, t))
		if got := acc.Root(); got != tb.h {
			defect(tb.ctxID, tb.h.String(), fmt.Sprintf("its buckets hash to %s", got))
			continue
		}
		for b := range 256 {
			if t.lens[b] > 0 {
				acc.BucketLeaves(byte(b)) // read and checked against its digest
			}
		}
		if err := acc.Err(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A store in use may have replaced the checkpoint and swept
			// its buckets since the tables were listed.
			if _, gerr := k.s.kv.Get(ctx, keyLeafTable(tb.ctxID, tb.h)); errors.Is(gerr, kv.ErrNotFound) {
				continue
			}
			defect(tb.ctxID, tb.h.String(), err.Error())
		}
	}
	return nil
}
