package hashing

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
)

// contextDomain starts every context-hash root line (16 ASCII bytes).
const contextDomain = "artifactd/ctx/v1"

// leafSize is the size of one leaf in a bucket's byte slice.
const leafSize = len(Digest{})

// EmptyContextHash returns the context hash of the empty state,
// SHA-256("artifactd/ctx/v1").
func EmptyContextHash() Digest { return sha256.Sum256([]byte(contextDomain)) }

// ContextHash computes the context hash of a set of leaves from scratch
// (HASHING.md §4): sort the leaves bytewise, group them into buckets by first
// byte, hash each non-empty bucket's concatenated leaves, then hash
// "artifactd/ctx/v1" followed by (bucket byte, bucket digest) for each
// non-empty bucket in ascending order.
//
// The hash is of a set: order does not matter and a leaf given twice counts
// once (a valid state never has duplicate leaves). leaves is not modified.
// This is the simple reference; [Accumulator] computes the same value
// incrementally.
func ContextHash(leaves []Digest) Digest {
	sorted := slices.Clone(leaves)
	slices.SortFunc(sorted, func(a, b Digest) int { return bytes.Compare(a[:], b[:]) })
	sorted = slices.Compact(sorted)

	line := []byte(contextDomain)
	for i := 0; i < len(sorted); {
		b := sorted[i][0]
		bucket := make([]byte, 0, leafSize)
		for ; i < len(sorted) && sorted[i][0] == b; i++ {
			bucket = append(bucket, sorted[i][:]...)
		}
		d := sha256.Sum256(bucket)
		line = append(line, b)
		line = append(line, d[:]...)
	}
	return sha256.Sum256(line)
}

// Accumulator maintains the context hash of a changing set of leaves
// (HASHING.md §4). It keeps each bucket's leaves sorted and caches each
// bucket's digest, so after k changes [Accumulator.Root] re-hashes only the
// touched buckets and the root line, whatever the size of the set.
//
// The zero value is not usable; call [NewAccumulator]. An Accumulator is not
// safe for concurrent use, but a [Accumulator.Clone] may be used on another
// goroutine than its original.
type Accumulator struct {
	// t holds the buckets of a whole accumulator (nil in a fork).
	t      *table
	n      int
	root   Digest
	rootOK bool // root is up to date
	// under is the accumulator a fork overlays (nil: a whole one); a
	// fork keeps only its changes per touched bucket (fork.go): the
	// first few inline in few, then all in delta.
	under *Accumulator
	few   [4]fewDelta
	nfew  int
	delta *[256]*bucketDelta
}

// table is a whole accumulator's buckets, apart so that a fork, which
// has none, is small.
type table struct {
	// buckets[b] holds the leaves whose first byte is b, sorted, 32 bytes
	// each, back to back: the bucket digest is SHA-256(buckets[b]).
	buckets [256][]byte
	// digests[b] is SHA-256(buckets[b]) unless b is dirty or empty.
	digests [256]Digest
	// dirty marks buckets changed since their digest was computed.
	dirty bitset
	// shared marks buckets whose backing array may also belong to a clone;
	// such a bucket is copied before it is changed (copy on write).
	shared bitset
	// marks[b] holds the SHA-256 states after every span leaves of
	// buckets[b], as far as they are still valid (marks.go); never
	// changed in place, so clones share them. nil until a bucket has a
	// mark (a small state has none).
	marks *[256][]byte
	span  int
	// cold marks the buckets whose leaves are not held, read through c
	// when first needed (cold.go); nil c: none.
	cold bitset
	c    *coldSet
}

// marksOf returns bucket b's marks.
func (t *table) marksOf(b byte) []byte {
	if t.marks == nil {
		return nil
	}
	return t.marks[b]
}

// setMarks sets bucket b's marks.
func (t *table) setMarks(b byte, m []byte) {
	if t.marks == nil {
		if len(m) == 0 {
			return
		}
		t.marks = new([256][]byte)
	}
	t.marks[b] = m
}

// newTable returns an empty table taking marks every defaultMarkSpan
// leaves.
func newTable() *table { return &table{span: defaultMarkSpan} }

// bitset is a 256-bit set of bucket numbers.
type bitset [4]uint64

func (s *bitset) set(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *bitset) clear(b byte)    { s[b>>6] &^= 1 << (b & 63) }
func (s *bitset) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *bitset) fill()           { *s = bitset{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)} }
func (s *bitset) reset()          { *s = bitset{} }
func (s *bitset) each(f func(byte)) {
	for w, word := range s {
		for word != 0 {
			i := bits.TrailingZeros64(word)
			word &^= 1 << i
			f(byte(w<<6 | i))
		}
	}
}

// NewAccumulator returns an Accumulator holding no leaves; its Root is
// [EmptyContextHash].
func NewAccumulator() *Accumulator { return &Accumulator{t: newTable()} }

// search finds leaf in the sorted bucket: its index (where it would go
// when absent) and whether it is there.
//
// Leaves are SHA-256 outputs, spread evenly over a bucket, so the search
// guesses a leaf's place from its value (interpolation over the eight
// bytes after the first, which a bucket's leaves share, between the
// bucket's first and last leaf), then widens a window around the guess
// (1, 2, 4, … leaves) until it holds the place, and halves that window.
// In a bucket of thousands of leaves the guess is off by a few dozen, so
// every probe falls within a few KiB of it instead of a dozen spread over
// the whole bucket; a bucket whose leaves do not spread (a crafted set)
// costs at most about twice the probes of a binary search.
func search(bucket []byte, leaf *Digest) (int, bool) {
	n := len(bucket) / leafSize
	lo, hi := 0, n
	// at compares the leaf at index i with the one searched for; leaves
	// in one bucket share their first byte.
	at := func(i int) int { return bytes.Compare(bucket[i*leafSize+1:(i+1)*leafSize], leaf[1:]) }
	if n > interpolationMin {
		g := guess(binary.BigEndian.Uint64(leaf[1:9]), binary.BigEndian.Uint64(bucket[1:9]),
			binary.BigEndian.Uint64(bucket[(n-1)*leafSize+1:]), n)
		switch c := at(g); {
		case c == 0:
			return g, true
		case c < 0: // the place is after g
			lo, hi = g+1, n
			for step := 1; g+step < n; step *= 2 {
				c := at(g + step)
				if c == 0 {
					return g + step, true
				}
				if c > 0 {
					hi = g + step
					break
				}
				lo = g + step + 1
			}
		default: // at or before g
			lo, hi = 0, g
			for step := 1; g-step >= 0; step *= 2 {
				c := at(g - step)
				if c == 0 {
					return g - step, true
				}
				if c < 0 {
					lo = g - step + 1
					break
				}
				hi = g - step
			}
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch at(mid) {
		case 0:
			return mid, true
		case -1:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return lo, false
}

// interpolationMin is the bucket size up to which search only halves.
const interpolationMin = 16

// guess returns where in a range of size leaves, from floor to ceil, a
// leaf of value want would lie if they were spread evenly: an index in
// [0, size).
func guess(want, floor, ceil uint64, size int) int {
	if want <= floor {
		return 0
	}
	if want >= ceil {
		return size - 1
	}
	// (want-floor) / (ceil-floor+1) of the range, in 128-bit arithmetic;
	// the quotient's high word is zero since want-floor < ceil-floor+1.
	hi, lo := bits.Mul64(want-floor, uint64(size))
	var at uint64
	if span := ceil - floor; span == ^uint64(0) {
		at = hi // divided by 2^64
	} else {
		at, _ = bits.Div64(hi, lo, span+1)
	}
	return min(int(at), size-1)
}

// Add inserts leaf and reports whether it was new (false: already present,
// nothing changed).
func (a *Accumulator) Add(leaf Digest) bool {
	if a.under != nil {
		return a.forkAdd(leaf)
	}
	return a.addIn(leaf)
}

// addIn is Add on a whole accumulator.
func (a *Accumulator) addIn(leaf Digest) bool {
	b := leaf[0]
	if !a.warm(b) {
		return false
	}
	bucket := a.t.buckets[b]
	i, found := search(bucket, &leaf)
	if found {
		return false
	}
	off := i * leafSize
	if a.t.shared.has(b) {
		nb := make([]byte, len(bucket)+leafSize, len(bucket)+len(bucket)/4+leafSize)
		copy(nb, bucket[:off])
		copy(nb[off:], leaf[:])
		copy(nb[off+leafSize:], bucket[off:])
		bucket = nb
		a.t.shared.clear(b)
	} else {
		bucket = slices.Insert(bucket, off, leaf[:]...)
	}
	a.t.buckets[b] = bucket
	a.t.setMarks(b, truncMarks(a.t.marksOf(b), i, a.t.span))
	a.touch(b)
	a.n++
	return true
}

// Remove deletes leaf and reports whether it was present (false: absent,
// nothing changed).
func (a *Accumulator) Remove(leaf Digest) bool {
	if a.under != nil {
		return a.forkRemove(leaf)
	}
	return a.removeIn(leaf)
}

// removeIn is Remove on a whole accumulator.
func (a *Accumulator) removeIn(leaf Digest) bool {
	b := leaf[0]
	if !a.warm(b) {
		return false
	}
	bucket := a.t.buckets[b]
	i, found := search(bucket, &leaf)
	if !found {
		return false
	}
	off := i * leafSize
	if a.t.shared.has(b) {
		nb := make([]byte, len(bucket)-leafSize)
		copy(nb, bucket[:off])
		copy(nb[off:], bucket[off+leafSize:])
		bucket = nb
		a.t.shared.clear(b)
	} else {
		bucket = slices.Delete(bucket, off, off+leafSize)
	}
	a.t.buckets[b] = bucket
	a.t.setMarks(b, truncMarks(a.t.marksOf(b), i, a.t.span))
	a.touch(b)
	a.n--
	return true
}

func (a *Accumulator) touch(b byte) {
	a.t.dirty.set(b)
	a.rootOK = false
}

// Has reports whether leaf is in the set.
func (a *Accumulator) Has(leaf Digest) bool {
	if a.under != nil {
		return a.forkHas(leaf)
	}
	bucket, _ := a.t.leavesAt(leaf[0])
	_, found := search(bucket, &leaf)
	return found
}

// Len returns the number of leaves.
func (a *Accumulator) Len() int { return a.n }

// Root returns the context hash of the current set of leaves, equal to
// [ContextHash] of [Accumulator.Leaves]. It re-hashes only the buckets
// changed since the last call, then the root line (at most 8,464 bytes).
func (a *Accumulator) Root() Digest {
	if a.rootOK {
		return a.root
	}
	if a.under != nil {
		return a.forkRoot()
	}
	var jobs []hashJob
	a.t.dirty.each(func(b byte) {
		bucket := a.t.buckets[b]
		if len(bucket) == 0 {
			a.t.digests[b] = Digest{}
			a.t.setMarks(b, nil)
			return
		}
		// The marks left are valid: a change truncated them.
		bh, from := resumeBucket(a.t.marksOf(b), len(bucket)/leafSize, a.t.span, len(bucket))
		jobs = append(jobs, hashJob{bh: bh,
			run: func(write func([]byte)) { write(bucket[from*leafSize:]) },
			done: func(d Digest, marks []byte) {
				a.t.digests[b] = d
				a.t.setMarks(b, marks)
			}})
	})
	runHashJobs(jobs)
	a.t.dirty.reset()

	var buf [len(contextDomain) + 256*(1+leafSize)]byte
	line := append(buf[:0], contextDomain...)
	for b := range a.t.buckets {
		if len(a.t.buckets[b]) == 0 && !a.t.isCold(byte(b)) {
			continue
		}
		line = append(line, byte(b))
		line = append(line, a.t.digests[b][:]...)
	}
	a.root = sha256.Sum256(line)
	a.rootOK = true
	return a.root
}

// bottom returns the whole accumulator under a's forks (a itself when a
// is whole).
func (a *Accumulator) bottom() *Accumulator {
	for a.under != nil {
		a = a.under
	}
	return a
}

// Clone returns an independent copy of a: changing either afterwards never
// affects the other. It costs O(256), not O(leaves): buckets are shared
// until one side changes them (copy on write). A clone of a fork copies
// the buckets the forks changed (and those held under them): cold buckets
// they did not change stay cold in the copy. Clone updates a's
// bookkeeping, so like every other method it must not run concurrently with
// a use of a.
func (a *Accumulator) Clone() *Accumulator {
	if a.under != nil {
		// A whole copy of what the fork shows; a bucket cold at the
		// bottom that no fork of the chain changed stays cold in the
		// copy, over the same cold set (whose failures it reports too).
		bottom := a.bottom()
		c := &Accumulator{t: newTable(), n: a.n}
		c.t.c = bottom.t.c
		for b := range 256 {
			if bottom.t.isCold(byte(b)) && !a.changes(byte(b)) {
				c.t.cold.set(byte(b))
				c.t.digests[b] = bottom.t.digests[b]
				continue
			}
			c.t.buckets[b] = bytes.Clone(a.bucketBytes(byte(b)))
			if len(c.t.buckets[b]) > 0 {
				c.t.dirty.set(byte(b))
			}
		}
		return c
	}
	var all bitset
	all.fill()
	if a.t.shared != all {
		a.t.shared.fill()
	}
	t := *a.t
	if t.marks != nil {
		// The marks' slices are never changed in place; the table of
		// them is.
		m := *t.marks
		t.marks = &m
	}
	c := *a
	c.t = &t
	return &c
}

// MarkShared marks every bucket as shared with a clone, as Clone does.
// Call it before a goroutine publishes a for others to Clone concurrently
// (a cache of read-only states): Clone then only reads a's bookkeeping.
// Later changes to a copy a bucket once before writing it.
func (a *Accumulator) MarkShared() {
	if a.under == nil {
		a.t.shared.fill()
	}
}

// Leaves returns all leaves in bytewise order, as a new slice.
func (a *Accumulator) Leaves() []Digest {
	out := make([]Digest, 0, a.n)
	for b := range 256 {
		bucket := a.bucketBytes(byte(b))
		for off := 0; off < len(bucket); off += leafSize {
			out = append(out, Digest(bucket[off:off+leafSize]))
		}
	}
	return out
}

// sortLeaves returns leaves sorted, placed by their first byte first (one
// pass) and each bucket's run then sorted on its own: for the 200,000
// leaves of a head being loaded, about half the comparisons of one sort.
func sortLeaves(leaves []Digest) []Digest {
	var start [257]int
	for i := range leaves {
		start[int(leaves[i][0])+1]++
	}
	for b := 1; b <= 256; b++ {
		start[b] += start[b-1]
	}
	sorted := make([]Digest, len(leaves))
	next := start
	for i := range leaves {
		b := leaves[i][0]
		sorted[next[b]] = leaves[i]
		next[b]++
	}
	for b := range 256 {
		run := sorted[start[b]:start[b+1]]
		slices.SortFunc(run, func(x, y Digest) int {
			// The next eight bytes as one number settle nearly every
			// comparison of random digests.
			if p, q := binary.BigEndian.Uint64(x[1:9]), binary.BigEndian.Uint64(y[1:9]); p != q {
				return cmp.Compare(p, q)
			}
			return bytes.Compare(x[9:], y[9:])
		})
	}
	return sorted
}

// AddBatch inserts many leaves at once and returns how many were new. It
// sorts the batch and merges each touched bucket once, so loading n leaves
// costs O(n log n) instead of the O(n · bucket size) of n calls to Add.
func (a *Accumulator) AddBatch(leaves []Digest) int {
	if len(leaves) == 0 {
		return 0
	}
	if a.under != nil {
		added := 0
		for _, l := range leaves {
			if a.Add(l) {
				added++
			}
		}
		return added
	}
	sorted := sortLeaves(leaves)
	added := 0
	for i := 0; i < len(sorted); {
		b := sorted[i][0]
		j := i
		for j < len(sorted) && sorted[j][0] == b {
			j++
		}
		if !a.warm(b) {
			i = j
			continue // unreadable: Err says so
		}
		old := a.t.buckets[b]
		merged := make([]byte, 0, len(old)+(j-i)*leafSize)
		o := 0
		var last *Digest
		for k := i; k < j; k++ {
			leaf := &sorted[k]
			if last != nil && *last == *leaf {
				continue // duplicate inside the batch
			}
			last = leaf
			for o < len(old) && bytes.Compare(old[o:o+leafSize], leaf[:]) < 0 {
				merged = append(merged, old[o:o+leafSize]...)
				o += leafSize
			}
			if o < len(old) && bytes.Equal(old[o:o+leafSize], leaf[:]) {
				continue // already present
			}
			merged = append(merged, leaf[:]...)
			added++
		}
		merged = append(merged, old[o:]...)
		a.t.buckets[b] = merged
		a.t.setMarks(b, nil)
		a.t.shared.clear(b)
		a.touch(b)
		i = j
	}
	a.n += added
	return added
}

// AccumulatorOfSorted returns an accumulator holding leaves, given as
// their bytes back to back in strictly increasing order (as a store keeps
// a state's leaves): each bucket takes its run as it is, with no sort. It
// refuses leaves out of order or repeated, or bytes that are not whole
// leaves.
func AccumulatorOfSorted(leaves []byte) (*Accumulator, error) {
	if len(leaves)%leafSize != 0 {
		return nil, errors.New("hashing: leaves are not a whole number of 32-byte digests")
	}
	a := NewAccumulator()
	for start := 0; start < len(leaves); {
		b := leaves[start]
		end := start + leafSize
		for end < len(leaves) && leaves[end] == b {
			if bytes.Compare(leaves[end-leafSize:end], leaves[end:end+leafSize]) >= 0 {
				return nil, errors.New("hashing: leaves are not in strictly increasing order")
			}
			end += leafSize
		}
		if end < len(leaves) && leaves[end] < b {
			return nil, errors.New("hashing: leaves are not in strictly increasing order")
		}
		a.t.buckets[b] = bytes.Clone(leaves[start:end])
		a.t.dirty.set(b)
		a.n += (end - start) / leafSize
		start = end
	}
	a.rootOK = false
	return a, nil
}
