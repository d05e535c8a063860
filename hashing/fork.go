package hashing

import (
	"bytes"
	"crypto/sha256"
	"slices"
)

// A fork of an Accumulator (Accumulator.Fork) holds, per touched bucket,
// only the leaves added and removed over the accumulator below it, which
// it never changes. Its Root hashes a touched bucket by streaming the
// bucket below with the changes merged in, so a fork costs what it
// changed, with no copy of the 256 buckets nor of a touched one; Absorb
// applies the changes to the accumulator below and hands it the digests
// the fork computed.

// bucketDelta is a fork's change of one bucket. add and del are sorted
// and disjoint; add holds leaves the bucket below lacks, del leaves it
// has.
type bucketDelta struct {
	add, del []Digest
	size     int    // leaves in the bucket as the fork sees it
	digest   Digest // SHA-256 of the bucket as the fork sees it, when !dirty
	// marks are the bucket's marks (marks.go) as the fork sees it, when
	// !dirty and the fork is over a whole accumulator; else nil.
	marks []byte
	dirty bool
}

// Fork returns an empty overlay over a: changes to the fork leave a as it
// is. a must not change while the fork is in use, except by Absorb of
// this fork. Making a fork costs O(1) and does not change a.
func (a *Accumulator) Fork() *Accumulator {
	return &Accumulator{under: a, n: a.n}
}

// IsForkOf reports whether a is a fork of b that Absorb would take.
func (a *Accumulator) IsForkOf(b *Accumulator) bool { return a.under == b && b != nil }

// Absorb applies the changes of f, a fork of a, to a, and f must not be
// used again. It reports false, changing nothing, when f is not a fork of
// a. It costs what f changed (a bucket with many changes is merged in one
// pass) and re-uses the digests f computed.
func (a *Accumulator) Absorb(f *Accumulator) bool {
	if f.under != a {
		return false
	}
	f.eachDelta(func(b byte, d *bucketDelta) { a.applyDelta(b, d) })
	a.n = f.n
	if f.rootOK {
		a.root, a.rootOK = f.root, true
	}
	f.under, f.delta, f.nfew = nil, nil, 0
	return true
}

// applyDelta makes bucket b of a what d over it shows.
func (a *Accumulator) applyDelta(b byte, d *bucketDelta) {
	if a.under != nil {
		for i := range d.del {
			a.Remove(d.del[i])
		}
		for i := range d.add {
			a.Add(d.add[i])
		}
		if !d.dirty {
			own := a.deltaOf(b)
			own.digest, own.marks, own.dirty = d.digest, d.marks, false
		}
		return
	}
	if !a.warm(b) {
		return // unreadable: Err says so
	}
	keep := 0 // where the marks of a bucket left dirty stop being valid
	if d.dirty {
		keep = firstChange(a.t.buckets[b], d)
	}
	switch {
	case len(d.add)+len(d.del) > 8 && a.t.shared.has(b):
		merged := make([]byte, 0, d.size*leafSize)
		mergeBucket(a.t.buckets[b], d, func(p []byte) { merged = append(merged, p...) })
		a.t.buckets[b] = merged
		a.t.shared.clear(b)
	case len(d.add)+len(d.del) > 8:
		a.t.buckets[b] = mergeInto(a.t.buckets[b], d)
	default:
		for i := range d.del {
			a.removeIn(d.del[i])
		}
		for i := range d.add {
			a.addIn(d.add[i])
		}
	}
	if d.dirty {
		a.t.setMarks(b, truncMarks(a.t.marksOf(b), keep, a.t.span))
		a.touch(b)
	} else {
		a.t.digests[b] = d.digest
		a.t.setMarks(b, d.marks)
		a.t.dirty.clear(b)
		a.rootOK = false
	}
}

// firstChange returns the index of the first leaf of base, a sorted
// bucket, that d changes: where its first addition goes or its first
// removal is. The leaves before it are the same over d.
func firstChange(base []byte, d *bucketDelta) int {
	n := len(base) / leafSize
	if len(d.add) > 0 {
		i, _ := search(base, &d.add[0])
		n = min(n, i)
	}
	if len(d.del) > 0 {
		i, _ := search(base, &d.del[0])
		n = min(n, i)
	}
	return n
}

// deltaOf returns the fork's change of bucket b, made on first use.
func (a *Accumulator) deltaOf(b byte) *bucketDelta {
	d := a.deltaAt(b)
	if d == nil {
		d = &bucketDelta{size: a.under.bucketLen(b), dirty: true}
		a.setDelta(b, d)
	}
	return d
}

// fewDelta is a fork's change of bucket b, kept inline.
type fewDelta struct {
	b byte
	d *bucketDelta
}

// deltaAt returns the fork's change of bucket b, or nil.
func (a *Accumulator) deltaAt(b byte) *bucketDelta {
	if a.delta != nil {
		return a.delta[b]
	}
	for i := range a.nfew {
		if a.few[i].b == b {
			return a.few[i].d
		}
	}
	return nil
}

// setDelta records the fork's change of bucket b: inline while the fork
// has changed few buckets (a small commit), in a table of 256 after.
func (a *Accumulator) setDelta(b byte, d *bucketDelta) {
	if a.delta == nil && a.nfew < len(a.few) {
		a.few[a.nfew] = fewDelta{b, d}
		a.nfew++
		return
	}
	if a.delta == nil {
		a.delta = new([256]*bucketDelta)
		for i := range a.nfew {
			a.delta[a.few[i].b] = a.few[i].d
		}
	}
	a.delta[b] = d
}

// eachDelta calls fn for every bucket the fork changed.
func (a *Accumulator) eachDelta(fn func(b byte, d *bucketDelta)) {
	if a.delta == nil {
		for i := range a.nfew {
			fn(a.few[i].b, a.few[i].d)
		}
		return
	}
	for b, d := range a.delta {
		if d != nil {
			fn(byte(b), d)
		}
	}
}

// forkAdd is Add on a fork.
func (a *Accumulator) forkAdd(leaf Digest) bool {
	d := a.deltaOf(leaf[0])
	if i, ok := slices.BinarySearchFunc(d.del, leaf, cmpDigest); ok {
		d.del = slices.Delete(d.del, i, i+1)
	} else {
		i, ok := slices.BinarySearchFunc(d.add, leaf, cmpDigest)
		if ok || a.under.Has(leaf) {
			return false
		}
		d.add = slices.Insert(d.add, i, leaf)
	}
	d.size++
	d.dirty, d.marks = true, nil
	a.n++
	a.rootOK = false
	return true
}

// forkRemove is Remove on a fork.
func (a *Accumulator) forkRemove(leaf Digest) bool {
	d := a.deltaOf(leaf[0])
	if i, ok := slices.BinarySearchFunc(d.add, leaf, cmpDigest); ok {
		d.add = slices.Delete(d.add, i, i+1)
	} else {
		i, ok := slices.BinarySearchFunc(d.del, leaf, cmpDigest)
		if ok || !a.under.Has(leaf) {
			return false
		}
		d.del = slices.Insert(d.del, i, leaf)
	}
	d.size--
	d.dirty, d.marks = true, nil
	a.n--
	a.rootOK = false
	return true
}

// forkHas is Has on a fork.
func (a *Accumulator) forkHas(leaf Digest) bool {
	if d := a.deltaAt(leaf[0]); d != nil {
		if _, ok := slices.BinarySearchFunc(d.add, leaf, cmpDigest); ok {
			return true
		}
		if _, ok := slices.BinarySearchFunc(d.del, leaf, cmpDigest); ok {
			return false
		}
	}
	return a.under.Has(leaf)
}

// forkRoot is Root on a fork: the buckets below keep their digests, the
// touched ones are hashed as the fork sees them — over a whole
// accumulator, from the last of its marks before the first change.
func (a *Accumulator) forkRoot() Digest {
	a.under.Root() // the digests below are up to date
	var jobs []hashJob
	a.eachDelta(func(b byte, d *bucketDelta) {
		if !d.dirty {
			return
		}
		var base, marks []byte
		span := 0
		if a.under.under == nil {
			base, marks = a.under.t.leavesAt(b)
			span = a.under.t.span
		} else {
			base = a.under.bucketBytes(b)
		}
		keep := firstChange(base, d)
		bh, from := resumeBucket(marks, keep, span, d.size*leafSize)
		jobs = append(jobs, hashJob{bh: bh,
			run: func(write func([]byte)) {
				write(base[from*leafSize : keep*leafSize])
				mergeBucket(base[keep*leafSize:], d, write)
			},
			done: func(digest Digest, marks []byte) { d.digest, d.marks, d.dirty = digest, marks, false }})
	})
	runHashJobs(jobs)
	var buf [len(contextDomain) + 256*(1+leafSize)]byte
	line := append(buf[:0], contextDomain...)
	for b := range 256 {
		if a.bucketLen(byte(b)) == 0 {
			continue
		}
		dg := a.digestOf(byte(b))
		line = append(line, byte(b))
		line = append(line, dg[:]...)
	}
	a.root = sha256.Sum256(line)
	a.rootOK = true
	return a.root
}

// changes reports whether a fork, or a fork under it, changed bucket b.
func (a *Accumulator) changes(b byte) bool {
	for x := a; x.under != nil; x = x.under {
		if x.deltaAt(b) != nil {
			return true
		}
	}
	return false
}

// bucketLen returns the number of leaves in bucket b.
func (a *Accumulator) bucketLen(b byte) int {
	for x := a; ; x = x.under {
		if x.under == nil {
			if x.t.isCold(b) {
				return x.t.c.lens[b]
			}
			return len(x.t.buckets[b]) / leafSize
		}
		if d := x.deltaAt(b); d != nil {
			return d.size
		}
	}
}

// digestOf returns the digest of bucket b; Root must have run since the
// last change.
func (a *Accumulator) digestOf(b byte) Digest {
	for x := a; ; x = x.under {
		if x.under == nil {
			return x.t.digests[b]
		}
		if d := x.deltaAt(b); d != nil {
			return d.digest
		}
	}
}

// bucketBytes returns the leaves of bucket b, back to back: a whole
// accumulator's own slice (not to be changed), or a new one for a bucket
// a fork changed.
func (a *Accumulator) bucketBytes(b byte) []byte {
	if a.under == nil {
		leaves, _ := a.t.leavesAt(b)
		return leaves
	}
	d := a.deltaAt(b)
	if d == nil {
		return a.under.bucketBytes(b)
	}
	out := make([]byte, 0, d.size*leafSize)
	mergeBucket(a.under.bucketBytes(b), d, func(p []byte) { out = append(out, p...) })
	return out
}

// mergeBucket hands write, in order and in as few pieces as it can, the
// leaves of base (a sorted bucket) with d's removals left out and its
// additions merged in.
func mergeBucket(base []byte, d *bucketDelta, write func([]byte)) {
	pos, i, j := 0, 0, 0
	for i < len(d.add) || j < len(d.del) {
		var leaf *Digest
		add := j == len(d.del) || (i < len(d.add) && bytes.Compare(d.add[i][:], d.del[j][:]) < 0)
		if add {
			leaf = &d.add[i]
			i++
		} else {
			leaf = &d.del[j]
			j++
		}
		at, _ := search(base[pos:], leaf)
		at = pos + at*leafSize
		if at > pos {
			write(base[pos:at])
		}
		if add {
			write(leaf[:])
			pos = at
		} else {
			// A removal past the end: base is not the bucket the change
			// was made over (a cold bucket that could not be read, which
			// Err reports) — go on without reading past it.
			pos = min(at+leafSize, len(base))
		}
	}
	if pos < len(base) {
		write(base[pos:])
	}
}

// mergeInto makes bucket, a sorted bucket no clone shares, what d over
// it shows, in place: removals close up in one forward pass, then the
// additions are merged in from the back, so each leaf moves at most twice
// and nothing is allocated but the bucket's growth (amortized, as append
// grows). A commit of thousands of changes touches every bucket; merging
// into new slices made garbage the size of the whole set each time.
func mergeInto(bucket []byte, d *bucketDelta) []byte {
	if len(d.del) > 0 {
		w, pos := 0, 0
		for i := range d.del {
			at, found := search(bucket[pos:], &d.del[i])
			at = pos + at*leafSize
			w += copy(bucket[w:], bucket[pos:at])
			pos = at
			if found {
				pos += leafSize
			}
		}
		w += copy(bucket[w:], bucket[pos:])
		bucket = bucket[:w]
	}
	if len(d.add) == 0 {
		return bucket
	}
	end := len(bucket) // old leaves not yet placed: bucket[:end]
	w := end + len(d.add)*leafSize
	bucket = slices.Grow(bucket, len(d.add)*leafSize)[:w]
	for j := len(d.add) - 1; j >= 0; j-- {
		at, _ := search(bucket[:end], &d.add[j])
		at *= leafSize
		w -= end - at
		copy(bucket[w:], bucket[at:end])
		w -= leafSize
		copy(bucket[w:], d.add[j][:])
		end = at
	}
	return bucket
}

func cmpDigest(x, y Digest) int { return bytes.Compare(x[:], y[:]) }
