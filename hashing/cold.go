package hashing

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A cold accumulator (NewColdAccumulator) knows each bucket's digest and
// length but holds none of its leaves: a store keeps each bucket of a big
// set as a record of its own, named by its digest, and a head opened from
// them reads only the buckets a commit touches — two of 256 for a
// one-artifact commit — instead of all of them (64 MB at a million
// artifacts and a million edges). Root needs only the digests, so a cold
// bucket's leaves are read the first time an operation needs them:
// Add, Remove or Has of a leaf in it, a fork's Root over it, Leaves,
// BucketLeaves. What is read is checked against the digest (SHA-256 of
// the leaves back to back, HASHING.md §4), and the same pass takes the
// bucket's marks, so a later re-hash starts near its change.
//
// Reads that only look (Has, a fork's Root, Leaves) keep what they read
// in a cache shared by the accumulator's clones and forks, each slot
// written atomically: a head's accumulator may be read by several
// goroutines at once, as a warm one may. An operation that changes a
// bucket (Add, Remove, AddBatch, Absorb) takes it from the cache into
// the accumulator's own table first, shared as a clone's bucket is
// (copied before it is changed).

// BucketLoader reads bucket b of a stored set of leaves: n leaves, sorted,
// 32 bytes each, back to back, whose SHA-256 is digest. The accumulator
// checks what it returns; when that is not the bucket, it asks once more
// with again set (the loader may then read it another way: a store, from
// the state the leaves are of). It must be safe for concurrent use.
type BucketLoader func(b byte, digest Digest, n int, again bool) ([]byte, error)

// ErrBucket marks a bucket that could not be read (the loader failed) or
// whose leaves do not hash to its digest; Accumulator.Err returns it
// wrapped.
var ErrBucket = errors.New("hashing: bucket unreadable")

// coldSet is what a cold accumulator and its clones and forks share: how
// to read the buckets not held, and what was read.
type coldSet struct {
	load BucketLoader
	span int // the marks' span of the tables over the set
	// lens[b] is cold bucket b's length (its digest is in each table
	// over the set, unchanged while the bucket is cold there).
	lens [256]int
	// got[b] is bucket b as read, until a table takes it in.
	got [256]atomic.Pointer[warmBucket]

	mu     sync.Mutex // guards err and failed
	err    error      // the first failed read
	failed bitset     // buckets whose read failed: not read again
}

// warmBucket is a cold bucket's leaves as read, and its marks.
type warmBucket struct {
	leaves, marks []byte
}

// NewColdAccumulator returns an accumulator of the set whose bucket b has
// lens[b] leaves with SHA-256 digests[b] (an empty bucket: length zero),
// none of them held: load reads a bucket the first time an operation
// needs its leaves. Its Root is the context hash of the set without a
// read; a caller that has the set's context hash compares the two to know
// the table is right.
func NewColdAccumulator(digests *[256]Digest, lens *[256]int, load BucketLoader) *Accumulator {
	a := NewAccumulator()
	c := &coldSet{load: load, span: a.t.span}
	for b := range 256 {
		if lens[b] <= 0 {
			continue
		}
		c.lens[b] = lens[b]
		a.t.digests[b] = digests[b]
		a.t.cold.set(byte(b))
		a.n += lens[b]
	}
	a.t.c = c
	return a
}

// Err returns the first failure to read a cold bucket, wrapping
// ErrBucket, or nil. After one, what the accumulator and its clones and
// forks report is not to be trusted: a bucket that could not be read
// counts as empty.
func (a *Accumulator) Err() error {
	x := a.bottom()
	if x.t.c == nil {
		return nil
	}
	x.t.c.mu.Lock()
	defer x.t.c.mu.Unlock()
	return x.t.c.err
}

// fail records that bucket b could not be read, and err as the set's
// failure unless it has one.
func (c *coldSet) fail(b byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed.set(b)
	if c.err == nil {
		c.err = err
	}
}

// hasFailed reports whether a read of bucket b failed before.
func (c *coldSet) hasFailed(b byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed.has(b)
}

// bucket returns cold bucket b, of digest d, as read (reading it now if
// no one has), or nil when it cannot be read.
func (c *coldSet) bucket(b byte, d Digest) *warmBucket {
	if w := c.got[b].Load(); w != nil {
		return w
	}
	if c.hasFailed(b) {
		return nil
	}
	w, err := c.read(b, d, false)
	if err != nil && !errors.Is(err, errLoad) {
		w, err = c.read(b, d, true)
	}
	if err != nil {
		c.fail(b, err)
		return nil
	}
	if c.got[b].CompareAndSwap(nil, w) {
		return w
	}
	if o := c.got[b].Load(); o != nil {
		return o // another reader got there first
	}
	return w // taken in meanwhile: this copy is as good
}

// errLoad marks a failure of the loader itself (not asked again).
var errLoad = errors.New("cannot read")

// read reads bucket b of digest digest with the loader and checks it: its length, and its
// digest, taking its marks on the way.
func (c *coldSet) read(b byte, digest Digest, again bool) (*warmBucket, error) {
	n := c.lens[b]
	leaves, err := c.load(b, digest, n, again)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %02x: %w: %w", ErrBucket, b, errLoad, err)
	}
	if len(leaves) != n*leafSize {
		return nil, fmt.Errorf("%w: bucket %02x: %d bytes, want %d leaves", ErrBucket, b, len(leaves), n)
	}
	bh, _ := resumeBucket(nil, 0, c.span, len(leaves))
	bh.write(leaves)
	d, marks := bh.sum()
	if d != digest {
		return nil, fmt.Errorf("%w: bucket %02x: its leaves hash to %s, not to %s", ErrBucket, b, d, digest)
	}
	return &warmBucket{leaves: leaves, marks: marks}, nil
}

// isCold reports whether bucket b of a whole accumulator is not held.
func (t *table) isCold(b byte) bool { return t.c != nil && t.cold.has(b) }

// leavesAt returns the leaves of bucket b of a whole accumulator and its
// marks, reading a cold bucket without taking it in (nil leaves: it could
// not be read); neither is to be changed.
func (t *table) leavesAt(b byte) (leaves, marks []byte) {
	if !t.isCold(b) {
		return t.buckets[b], t.marksOf(b)
	}
	w := t.c.bucket(b, t.digests[b])
	if w == nil {
		return nil, nil
	}
	return w.leaves, w.marks
}

// warm takes cold bucket b of a whole accumulator into its table before
// it changes, shared (copied before it is changed: a clone or a reader
// may hold the same bytes). It reports false when the bucket cannot be
// read.
func (a *Accumulator) warm(b byte) bool {
	t := a.t
	if !t.isCold(b) {
		return true
	}
	w := t.c.bucket(b, t.digests[b])
	if w == nil {
		return false
	}
	t.buckets[b] = w.leaves
	t.setMarks(b, w.marks)
	t.cold.clear(b)
	t.shared.set(b)
	// The table holds it now; a clone still cold there reads it again
	// rather than the cache keeping a second copy once this one changes.
	t.c.got[b].Store(nil)
	return true
}

// Held returns the bytes of leaves the accumulator holds, with their
// marks: its buckets (their capacity: what the heap holds), and the cold
// buckets read and not yet taken in. A fork holds only its changes (not
// counted).
func (a *Accumulator) Held() int {
	if a.under != nil {
		return 0
	}
	n := 0
	for b := range 256 {
		if a.t.isCold(byte(b)) {
			if w := a.t.c.got[b].Load(); w != nil {
				n += cap(w.leaves) + cap(w.marks)
			}
			continue
		}
		n += cap(a.t.buckets[b]) + cap(a.t.marksOf(byte(b)))
	}
	return n
}

// Buckets calls fn for every non-empty bucket, in order, with its digest
// and number of leaves. Root must have run since the last change.
func (a *Accumulator) Buckets(fn func(b byte, digest Digest, n int)) {
	for b := range 256 {
		if n := a.bucketLen(byte(b)); n > 0 {
			fn(byte(b), a.digestOf(byte(b)), n)
		}
	}
}

// BucketLeaves returns the leaves of bucket b back to back, in order, as
// Leaves would list them; not to be changed. A cold bucket is read (nil
// when it cannot be: see Err).
func (a *Accumulator) BucketLeaves(b byte) []byte { return a.bucketBytes(b) }
