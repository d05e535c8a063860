package hashing

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAccumulatorForkOracle drives a whole accumulator the way the store
// drives a branch head's: groups of changes on a fork of the head, each
// change set on a fork of the group's fork, absorbed or dropped. A plain
// set of leaves is the oracle: after every step the forks' Root, Len, Has
// and Leaves must equal ContextHash and the set, the head must not change
// until it absorbs, and Clone of a fork must be a whole accumulator that
// agrees. Leaves come from a small pool with few first bytes, so buckets
// fill up and changes often hit the same bucket, and big change sets take
// Absorb's one-pass merge.
func TestAccumulatorForkOracle(t *testing.T) { forkOracle(t, false) }

// TestColdAccumulatorForkOracle is the fork oracle over a head opened
// cold (NewColdAccumulator over the first head's buckets): every bucket
// is read the first time an operation needs its leaves.
func TestColdAccumulatorForkOracle(t *testing.T) { forkOracle(t, true) }

func forkOracle(t *testing.T, cold bool) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 0xf0))
		pool := make([]Digest, 600)
		for i := range pool {
			pool[i] = Sum([]byte{byte(seed), byte(i), byte(i >> 8)})
			pool[i][0] = byte(rng.IntN(6)) // few buckets, so they are full
		}
		head := NewAccumulator()
		want := map[Digest]bool{}
		for range 200 {
			l := pool[rng.IntN(len(pool))]
			head.Add(l)
			want[l] = true
		}
		if cold {
			head = coldCopy(head, nil)
		}
		check := func(what string, a *Accumulator, set map[Digest]bool) {
			t.Helper()
			var leaves []Digest
			for l := range set {
				leaves = append(leaves, l)
			}
			slices.SortFunc(leaves, cmpDigest)
			if a.Len() != len(leaves) {
				t.Fatalf("seed %d %s: len %d, want %d", seed, what, a.Len(), len(leaves))
			}
			if got := a.Leaves(); !slices.Equal(got, leaves) {
				t.Fatalf("seed %d %s: leaves differ", seed, what)
			}
			if got, exp := a.Root(), ContextHash(leaves); got != exp {
				t.Fatalf("seed %d %s: root %s, want %s", seed, what, got, exp)
			}
			for i := 0; i < len(pool); i += 7 {
				if a.Has(pool[i]) != set[pool[i]] {
					t.Fatalf("seed %d %s: Has(%s) = %v", seed, what, pool[i], !set[pool[i]])
				}
			}
		}
		for g := range 12 {
			headRoot := head.Root()
			gf := head.Fork()
			gset := cloneSet(want)
			for c := range 1 + rng.IntN(4) {
				cf := gf.Fork()
				cset := cloneSet(gset)
				n := 1 + rng.IntN(4)
				if rng.IntN(4) == 0 {
					n = 20 + rng.IntN(60)
				}
				for range n {
					l := pool[rng.IntN(len(pool))]
					if rng.IntN(2) == 0 {
						if cf.Add(l) == cset[l] {
							t.Fatalf("seed %d: Add(%s) reported %v with the leaf present=%v", seed, l, !cset[l], cset[l])
						}
						cset[l] = true
					} else {
						if cf.Remove(l) != cset[l] {
							t.Fatalf("seed %d: Remove(%s) reported %v with the leaf present=%v", seed, l, !cset[l], cset[l])
						}
						delete(cset, l)
					}
					if rng.IntN(8) == 0 {
						cf.Root() // digests computed part way
					}
				}
				check("commit fork", cf, cset)
				if cl := cf.Clone(); cl.under != nil {
					t.Fatal("Clone of a fork is a fork")
				} else {
					check("clone of a commit fork", cl, cset)
				}
				if rng.IntN(5) == 0 {
					continue // dropped
				}
				if !gf.Absorb(cf) {
					t.Fatal("group fork refused its commit's fork")
				}
				gset = cset
				check("group fork", gf, gset)
				_ = c
			}
			if head.Root() != headRoot {
				t.Fatalf("seed %d group %d: the head changed before it absorbed", seed, g)
			}
			if rng.IntN(5) == 0 {
				continue // the group failed
			}
			if rng.IntN(2) == 0 {
				gf.Root() // absorb with the digests computed, or not
			}
			if !head.Absorb(gf) {
				t.Fatal("head refused its group's fork")
			}
			want = gset
			check("head", head, want)
			// The head's buckets changed in place must not have changed
			// a clone taken before.
			snap := head.Clone()
			f := head.Fork()
			l := pool[rng.IntN(len(pool))]
			f.Add(l)
			f.Remove(pool[rng.IntN(len(pool))])
			if !head.Absorb(f) {
				t.Fatal("refused")
			}
			check("snapshot after a later change", snap, want)
			want = map[Digest]bool{}
			for _, x := range head.Leaves() {
				want[x] = true
			}
		}
	}
}

// TestAccumulatorAbsorbOther: a fork of another accumulator is refused.
func TestAccumulatorAbsorbOther(t *testing.T) {
	a, b := NewAccumulator(), NewAccumulator()
	f := b.Fork()
	f.Add(Sum([]byte("x")))
	if a.Absorb(f) || a.Len() != 0 {
		t.Fatal("absorbed another accumulator's fork")
	}
}

func cloneSet(m map[Digest]bool) map[Digest]bool {
	c := make(map[Digest]bool, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// BenchmarkAccumulatorFork: one leaf added to a bucket of 800 leaves (a
// state of about 200k leaves) in place, and on a fork absorbed after its
// root is computed (as the store does).
func BenchmarkAccumulatorFork(b *testing.B) {
	build := func() *Accumulator {
		a := NewAccumulator()
		leaves := make([]Digest, 200_000)
		for i := range leaves {
			leaves[i] = Sum([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
		}
		a.AddBatch(leaves)
		a.Root()
		return a
	}
	b.Run("in-place", func(b *testing.B) {
		a := build()
		for i := 0; b.Loop(); i++ {
			a.Add(Sum([]byte{1, byte(i), byte(i >> 8), byte(i >> 16)}))
			a.Root()
		}
	})
	b.Run("fork-absorb", func(b *testing.B) {
		a := build()
		for i := 0; b.Loop(); i++ {
			f := a.Fork()
			f.Add(Sum([]byte{1, byte(i), byte(i >> 8), byte(i >> 16)}))
			f.Root()
			a.Absorb(f)
		}
	})
}

// TestMergeInto: merging a delta into a bucket in place gives the leaves
// mergeBucket streams, for random buckets and deltas — additions before,
// between and after the leaves, removals anywhere, either alone — and
// whatever spare capacity the bucket has.
func TestMergeInto(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 0x3e))
		var have []Digest
		for range rng.IntN(40) {
			l := Sum([]byte{byte(seed), byte(rng.IntN(256)), byte(rng.IntN(256))})
			l[0] = 7 // one bucket
			have = append(have, l)
		}
		slices.SortFunc(have, cmpDigest)
		have = slices.Compact(have)
		d := &bucketDelta{}
		for _, l := range have {
			if rng.IntN(4) == 0 {
				d.del = append(d.del, l)
			}
		}
		for range rng.IntN(30) {
			l := Sum([]byte{byte(seed), 0xad, byte(rng.IntN(256)), byte(rng.IntN(256))})
			l[0] = 7
			if _, ok := slices.BinarySearchFunc(have, l, cmpDigest); !ok {
				d.add = append(d.add, l)
			}
		}
		slices.SortFunc(d.add, cmpDigest)
		d.add = slices.Compact(d.add)
		var bucket []byte
		for _, l := range have {
			bucket = append(bucket, l[:]...)
		}
		bucket = slices.Grow(bucket, rng.IntN(3)*leafSize)
		var want []byte
		mergeBucket(bucket, d, func(p []byte) { want = append(want, p...) })
		if got := mergeInto(bucket, d); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: %d leaves, %d added, %d removed: the bucket merged in place differs", seed, len(have), len(d.add), len(d.del))
		}
	}
}
