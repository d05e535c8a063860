package hashing

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// coldCopy returns a cold accumulator of a's set whose loader reads a's
// buckets (copies) and records each read in reads, when not nil.
func coldCopy(a *Accumulator, reads *readLog) *Accumulator {
	digests, lens := tableOf(a)
	var stored [256][]byte
	for b := range 256 {
		stored[b] = bytes.Clone(a.BucketLeaves(byte(b)))
	}
	return NewColdAccumulator(digests, lens, func(b byte, d Digest, n int, _ bool) ([]byte, error) {
		if d != digests[b] || n != lens[b] {
			return nil, errors.New("asked for another bucket than stored")
		}
		if reads != nil {
			reads.add(b)
		}
		return bytes.Clone(stored[b]), nil
	})
}

// tableOf returns the digests and lengths of a's buckets (its Root up to
// date), as a store's checkpoint table holds them.
func tableOf(a *Accumulator) (*[256]Digest, *[256]int) {
	a.Root()
	var digests [256]Digest
	var lens [256]int
	a.Buckets(func(b byte, d Digest, n int) { digests[b], lens[b] = d, n })
	return &digests, &lens
}

// readLog records the buckets a loader read.
type readLog struct {
	mu sync.Mutex
	b  []byte
}

func (r *readLog) add(b byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b = append(r.b, b)
}

func (r *readLog) list() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.b)
	slices.Sort(out)
	return out
}

// spreadLeaves returns n distinct leaves, per leaf's first byte
// (bucket) in turn.
func spreadLeaves(n int, seed byte) []Digest {
	out := make([]Digest, n)
	for i := range out {
		out[i] = Sum([]byte{seed, byte(i), byte(i >> 8), byte(i >> 16)})
		out[i][0] = byte(i)
	}
	return out
}

// TestColdReadsOnlyTouched: a cold accumulator's Root reads nothing; a
// fork's change reads the changed bucket alone, and a Has another; the
// results are those of the warm accumulator of the same set.
func TestColdReadsOnlyTouched(t *testing.T) {
	warm := NewAccumulator()
	warm.AddBatch(spreadLeaves(256*40, 1))
	reads := &readLog{}
	cold := coldCopy(warm, reads)
	if cold.Root() != warm.Root() || cold.Len() != warm.Len() {
		t.Fatal("a cold accumulator's root or length differs from the warm one's")
	}
	if got := reads.list(); len(got) != 0 {
		t.Fatalf("Root read buckets %v", got)
	}
	if cold.Held() != 0 {
		t.Fatalf("a cold accumulator holds %d bytes before any read", cold.Held())
	}
	extra := Sum([]byte("extra"))
	extra[0] = 7
	gone := warm.Leaves()[9*40+3] // in bucket 9
	for _, a := range []*Accumulator{warm, cold} {
		f := a.Fork()
		if !f.Add(extra) || !f.Remove(gone) {
			t.Fatal("the fork's change was refused")
		}
		f.Root()
		if !a.Absorb(f) {
			t.Fatal("Absorb refused")
		}
	}
	if got := reads.list(); !slices.Equal(got, []byte{7, 9}) {
		t.Fatalf("a change of buckets 7 and 9 read buckets %v", got)
	}
	if cold.Root() != warm.Root() || cold.Err() != nil {
		t.Fatalf("roots differ after the change (err %v)", cold.Err())
	}
	probe := warm.Leaves()[200*40]
	if !cold.Has(probe) || cold.Has(Sum([]byte("absent"))) {
		t.Fatal("Has differs from the warm accumulator")
	}
	if got := reads.list(); len(got) != 4 || !slices.Contains(got, probe[0]) {
		t.Fatalf("reads %v, want 7, 9 and then %d and the absent leaf's bucket", got, probe[0])
	}
	if h := cold.Held(); h < 3*40*leafSize || h > 5*41*leafSize+4096 {
		t.Fatalf("holds %d bytes after four buckets were read", h)
	}
	if !slices.Equal(cold.Leaves(), warm.Leaves()) {
		t.Fatal("Leaves differ")
	}
	if cold.Err() != nil {
		t.Fatal(cold.Err())
	}
}

// TestColdAddBatchAndClone: AddBatch into a cold accumulator, and a clone
// taken before changing while the original is read.
func TestColdAddBatchAndClone(t *testing.T) {
	leaves := spreadLeaves(3000, 2)
	warm := NewAccumulator()
	warm.AddBatch(leaves[:2000])
	cold := coldCopy(warm, nil)
	snap := cold.Clone()
	if n := cold.AddBatch(leaves[1500:]); n != 1000 {
		t.Fatalf("AddBatch added %d, want 1000", n)
	}
	warm.AddBatch(leaves[1500:])
	if cold.Root() != warm.Root() {
		t.Fatal("roots differ after AddBatch")
	}
	ref := NewAccumulator()
	ref.AddBatch(leaves[:2000])
	if snap.Root() != ref.Root() || !slices.Equal(snap.Leaves(), ref.Leaves()) {
		t.Fatal("a clone taken before changed with the original")
	}
	for _, l := range leaves[:40] {
		snap.Remove(l)
		ref.Remove(l)
	}
	if snap.Root() != ref.Root() || !slices.Equal(cold.Leaves(), warm.Leaves()) {
		t.Fatal("a change of the clone is wrong or reached the original")
	}
}

// TestColdBadBucket: a loader's error, or leaves that are not the
// bucket's, make Err report the bucket; nothing panics.
func TestColdBadBucket(t *testing.T) {
	warm := NewAccumulator()
	warm.AddBatch(spreadLeaves(512, 3))
	warm.Root()
	digests, lens := tableOf(warm)
	boom := errors.New("disk on fire")
	for _, tc := range []struct {
		name string
		load BucketLoader
		want string
	}{
		{"error", func(byte, Digest, int, bool) ([]byte, error) { return nil, boom }, "disk on fire"},
		{"short", func(b byte, _ Digest, _ int, _ bool) ([]byte, error) { return warm.BucketLeaves(b)[leafSize:], nil }, "want 2 leaves"},
		{"other leaves", func(b byte, _ Digest, _ int, _ bool) ([]byte, error) {
			x := bytes.Clone(warm.BucketLeaves(b))
			x[40] ^= 1
			return x, nil
		}, "hash to"},
	} {
		cold := NewColdAccumulator(digests, lens, tc.load)

		if cold.Root() != warm.Root() || cold.Err() != nil {
			t.Fatalf("%s: the root needs no read", tc.name)
		}
		f := cold.Fork()
		f.Add(Sum([]byte("x")))
		f.Root()
		err := f.Err()
		if !errors.Is(err, ErrBucket) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Err = %v", tc.name, err)
		}
		if tc.name == "error" && !errors.Is(err, boom) {
			t.Fatalf("the loader's error is not wrapped: %v", err)
		}
		if cold.Err() == nil {
			t.Fatalf("%s: the accumulator under the fork does not report it", tc.name)
		}
		if cold.Add(Sum([]byte("y"))) && cold.Err() == nil {
			t.Fatal("no error")
		}
	}
}

// TestColdConcurrentReads: forks, Has and Leaves over one cold
// accumulator from several goroutines at once (as a branch head's
// readers and its committer), each clone changed on its own goroutine;
// run with -race.
func TestColdConcurrentReads(t *testing.T) {
	leaves := spreadLeaves(256*30, 4)
	warm := NewAccumulator()
	warm.AddBatch(leaves)
	want := warm.Root()
	cold := coldCopy(warm, nil)
	cold.Root()
	cold.MarkShared() // as a state shared with readers is (graph.State.Share)
	warm.MarkShared() // the goroutines clone it too
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for range 30 {
				l := leaves[rng.IntN(len(leaves))]
				if !cold.Has(l) {
					errs <- "Has missed a leaf"
					return
				}
				f := cold.Fork()
				f.Remove(l)
				x := Sum([]byte{byte(g), byte(rng.IntN(256))})
				f.Add(x)
				ref := warm.Clone()
				ref.Remove(l)
				ref.Add(x)
				if f.Root() != ref.Root() {
					errs <- "a fork's root differs"
					return
				}
				if g%2 == 0 {
					c := cold.Clone()
					c.Remove(l)
					if c.Root() == want {
						errs <- "a clone's change did not change its root"
						return
					}
				}
			}
			if len(cold.Leaves()) != len(leaves) {
				errs <- "Leaves lost some"
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if cold.Root() != want || cold.Err() != nil {
		t.Fatal("the shared accumulator changed")
	}
}

// TestColdAskedAgain: leaves that are not the bucket's are asked for once
// more, with again set, and the second answer is used when it checks; a
// loader's own error is not asked again.
func TestColdAskedAgain(t *testing.T) {
	warm := NewAccumulator()
	warm.AddBatch(spreadLeaves(512, 6))
	warm.Root()
	digests, lens := tableOf(warm)
	var asked []bool
	cold := NewColdAccumulator(digests, lens, func(b byte, _ Digest, _ int, again bool) ([]byte, error) {
		asked = append(asked, again)
		x := bytes.Clone(warm.BucketLeaves(b))
		if !again {
			x[33] ^= 1
		}
		return x, nil
	})
	if !cold.Has(warm.Leaves()[0]) || cold.Err() != nil {
		t.Fatalf("the second answer was not used: %v", cold.Err())
	}
	if !slices.Equal(asked, []bool{false, true}) {
		t.Fatalf("asked %v, want [false true]", asked)
	}
	asked = nil
	failing := NewColdAccumulator(digests, lens, func(byte, Digest, int, bool) ([]byte, error) {
		asked = append(asked, true)
		return nil, errors.New("gone")
	})
	failing.Has(warm.Leaves()[0])
	if len(asked) != 1 || failing.Err() == nil {
		t.Fatalf("a loader's error: asked %d times, Err %v", len(asked), failing.Err())
	}
}

// TestColdCloneOfFork: a clone of a fork over a cold accumulator copies
// the buckets the forks changed and keeps the others cold, reading
// nothing more; it reports a bucket that could not be read.
func TestColdCloneOfFork(t *testing.T) {
	warm := NewAccumulator()
	warm.AddBatch(spreadLeaves(256*40, 7))
	reads := &readLog{}
	cold := coldCopy(warm, reads)
	x := Sum([]byte("x"))
	x[0] = 9
	for _, a := range []*Accumulator{warm, cold} {
		g := a.Fork()
		f := g.Fork()
		f.Add(x)
		g.Absorb(f)
		c := g.Clone()
		if c.under != nil || c.Root() != g.Root() || c.Len() != g.Len() {
			t.Fatal("the clone of a fork differs from it")
		}
		if a == cold {
			if c.Held() > 2*41*leafSize {
				t.Fatalf("the clone of a fork over a cold accumulator holds %d bytes", c.Held())
			}
			if got := reads.list(); !slices.Equal(got, []byte{9}) {
				t.Fatalf("the clone read buckets %v, want only the changed one", got)
			}
		}
		if !slices.Equal(c.Leaves(), g.Leaves()) {
			t.Fatal("leaves differ")
		}
	}
	digests, lens := tableOf(warm)
	failing := NewColdAccumulator(digests, lens, func(b byte, _ Digest, _ int, _ bool) ([]byte, error) {
		if b == 9 {
			return nil, errors.New("gone")
		}
		return bytes.Clone(warm.BucketLeaves(b)), nil
	})
	f := failing.Fork()
	f.Add(x)
	if c := f.Clone(); c.Err() == nil {
		t.Fatal("the clone does not report the bucket its fork could not read")
	}
}

// TestColdForkAfterFailedReread: a fork whose base bucket was read, then
// taken into a clone's table (which clears the shared copy), then cannot
// be read again, reports the failure and does not panic.
func TestColdForkAfterFailedReread(t *testing.T) {
	warm := NewAccumulator()
	warm.AddBatch(spreadLeaves(256*20, 8))
	warm.Root()
	digests, lens := tableOf(warm)
	broken := false
	cold := NewColdAccumulator(digests, lens, func(b byte, _ Digest, _ int, _ bool) ([]byte, error) {
		if broken {
			return nil, errors.New("gone")
		}
		return bytes.Clone(warm.BucketLeaves(b)), nil
	})
	in7 := warm.BucketLeaves(7)
	clone := cold.Clone()
	f := cold.Fork()
	f.Remove(Digest(in7[0:leafSize]))
	f.Remove(Digest(in7[5*leafSize : 6*leafSize]))
	x := Sum([]byte("x"))
	x[0] = 7
	clone.Add(x) // takes bucket 7 into the clone's table
	broken = true
	f.Root()
	f.Clone()
	f.Leaves()
	if f.Err() == nil {
		t.Fatal("no error after a bucket could not be read again")
	}
}
