package hashing

import (
	"crypto/sha256"
	"encoding"
	"hash"
	"runtime"
	"sync"
	"sync/atomic"
)

// A bucket's digest is SHA-256 of all its leaves back to back (HASHING.md
// §4), so a change anywhere in a bucket makes it be hashed again — and a
// bucket of a big context is large (a 1M-artifact context has about 8,000
// leaves, 250 KiB, in each). The stream before the first changed leaf is
// the same as before, though: a whole accumulator keeps, per bucket, the
// SHA-256 state after every span leaves (its marks), and hashing a changed
// bucket resumes from the last mark before its first change. One changed
// leaf re-hashes half its bucket on average instead of all of it; a
// commit of thousands of leaves, whose first change in a bucket is near
// its start, saves little. The digests are the same bytes either way: a
// mark is the state SHA-256 would be in at that point of the stream.
//
// Marks are never changed in place — a re-hash makes a new slice of them
// — so a clone may share them; a change at leaf i truncates a bucket's
// marks to those before i.

// defaultMarkSpan is the leaves between two marks (4 KiB of stream).
// A mark costs 108 bytes, about 1 byte per leaf of memory.
const defaultMarkSpan = 128

// markSize is the length of a SHA-256 state as crypto/sha256 marshals it.
// A state of another length (another Go release) is not kept: marks are
// then off and every bucket is hashed from its start, as without them.
const markSize = 108

// truncMarks returns the marks of a bucket whose leaf i (and maybe later
// ones) changed: the marks before i.
func truncMarks(marks []byte, i, span int) []byte {
	if keep := (i / span) * markSize; keep < len(marks) {
		return marks[:keep:keep]
	}
	return marks
}

// bucketHash hashes one bucket's stream, keeping a mark every span leaves.
type bucketHash struct {
	h     hash.Hash
	n     int // bytes of the bucket written so far, from its start
	span  int // bytes between marks; 0: no marks
	marks []byte
	size  int // bytes still to write, for the scheduler
}

// resumeBucket starts hashing a bucket whose first keep leaves are those
// that marks (valid for them) were taken over, span leaves apart. It
// returns the hash and the leaf to write from: the last mark at or before
// keep, or 0. size is the length of the new bucket in bytes. span 0 takes
// no marks.
func resumeBucket(marks []byte, keep, span, size int) (*bucketHash, int) {
	bh := &bucketHash{h: sha256.New()}
	if span <= 0 {
		bh.size = size
		return bh, 0
	}
	bh.span = span * leafSize
	j := min(len(marks)/markSize, keep/span)
	if u, ok := bh.h.(encoding.BinaryUnmarshaler); j > 0 && (!ok || u.UnmarshalBinary(marks[(j-1)*markSize:j*markSize]) != nil) {
		bh.h.Reset() // cannot happen: the marks were marshalled by the same hash
		j = 0
	}
	bh.marks = make([]byte, 0, (size/bh.span+1)*markSize)
	bh.marks = append(bh.marks, marks[:j*markSize]...)
	bh.n = j * bh.span
	bh.size = size - bh.n
	return bh, j * span
}

// write adds p to the stream, taking a mark at every span boundary.
func (bh *bucketHash) write(p []byte) {
	for len(p) > 0 && bh.span > 0 {
		next := (bh.n/bh.span + 1) * bh.span
		take := min(len(p), next-bh.n)
		bh.h.Write(p[:take])
		bh.n += take
		p = p[take:]
		if bh.n == next {
			bh.mark()
		}
	}
	bh.h.Write(p) // without marks (span 0), or none left to write
	bh.n += len(p)
}

// mark keeps the state at a span boundary, or stops taking marks when the
// state is not markSize bytes.
func (bh *bucketHash) mark() {
	a, ok := bh.h.(encoding.BinaryAppender)
	if !ok {
		bh.span, bh.marks = 0, nil
		return
	}
	before := len(bh.marks)
	out, err := a.AppendBinary(bh.marks)
	if err != nil || len(out)-before != markSize {
		bh.span, bh.marks = 0, nil
		return
	}
	bh.marks = out
}

// sum returns the bucket's digest and its marks.
func (bh *bucketHash) sum() (Digest, []byte) {
	var d Digest
	bh.h.Sum(d[:0])
	return d, bh.marks
}

// hashJob is one bucket to hash: run writes its stream to bh, and done
// receives the bucket's digest and marks.
type hashJob struct {
	bh   *bucketHash
	run  func(write func([]byte))
	done func(digest Digest, marks []byte)
}

// parallelBytes is the stream a worker should have at least before the
// buckets are hashed on more than one goroutine: below it, handing work
// over costs more than it saves.
const parallelBytes = 64 << 10

// runHashJobs hashes the buckets of jobs, on up to one goroutine a core
// (GOMAXPROCS, or the CPUs when a server runs with more Ps than them:
// internal/cores, which this package, standard library only, repeats)
// when there is enough to hash, then hands each job its result (done), in
// order, on the calling goroutine: the jobs only read what they hash, and
// only done stores.
func runHashJobs(jobs []hashJob) {
	total := 0
	for i := range jobs {
		total += jobs[i].bh.size
	}
	workers := min(runtime.GOMAXPROCS(0), runtime.NumCPU(), len(jobs), total/parallelBytes)
	do := func(i int) { jobs[i].run(jobs[i].bh.write) }
	if workers < 2 {
		for i := range jobs {
			do(i)
		}
	} else {
		hashParallel(len(jobs), workers, do)
	}
	for i := range jobs {
		jobs[i].done(jobs[i].bh.sum())
	}
}

// hashParallel calls do(i) for every i below n on workers goroutines and
// returns when all are done.
func hashParallel(n, workers int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				do(i)
			}
		})
	}
	wg.Wait()
}
