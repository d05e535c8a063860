package hashing

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// searchByHalving is the plain lower-bound binary search over a bucket
// (what search was before it interpolated): the oracle search must agree
// with, and what BenchmarkBucketSearch compares it to.
func searchByHalving(bucket []byte, leaf *Digest) (int, bool) {
	lo, hi := 0, len(bucket)/leafSize
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch bytes.Compare(bucket[mid*leafSize:(mid+1)*leafSize], leaf[:]) {
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

// bucketOf returns leaves, all given first byte b, sorted and without
// repeats, back to back.
func bucketOf(b byte, leaves []Digest) ([]byte, []Digest) {
	for i := range leaves {
		leaves[i][0] = b
	}
	slices.SortFunc(leaves, func(x, y Digest) int { return bytes.Compare(x[:], y[:]) })
	leaves = slices.Compact(leaves)
	out := make([]byte, 0, len(leaves)*leafSize)
	for _, l := range leaves {
		out = append(out, l[:]...)
	}
	return out, leaves
}

// checkSearch compares search with searchByHalving for every leaf of the
// bucket, for each leaf's neighbours just below and above it, and for
// probes.
func checkSearch(t *testing.T, name string, bucket []byte, leaves []Digest, probes []Digest) {
	t.Helper()
	targets := slices.Clone(probes)
	for _, l := range leaves {
		below, above := l, l
		below[leafSize-1]--
		above[leafSize-1]++
		targets = append(targets, l, below, above)
	}
	for _, x := range targets {
		x[0] = bucket[0]
		gi, gok := search(bucket, &x)
		wi, wok := searchByHalving(bucket, &x)
		if gi != wi || gok != wok {
			t.Fatalf("%s (%d leaves): search(%x) = %d, %v; halving finds %d, %v", name, len(leaves), x[:12], gi, gok, wi, wok)
		}
	}
}

// TestSearchAgreesWithHalving: the interpolating search finds what a plain
// binary search finds — present leaves, absent ones and where they would
// go — in buckets spread as SHA-256 outputs are and in buckets that are
// not: crowded into a narrow range, sharing their first nine bytes,
// clustered at both ends, stepping by powers of two.
func TestSearchAgreesWithHalving(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	random := func() Digest {
		var d Digest
		for i := 0; i < leafSize; i += 8 {
			binary.BigEndian.PutUint64(d[i:], rng.Uint64())
		}
		return d
	}
	probes := []Digest{{}, {0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 31: 0xff}}
	for range 64 {
		probes = append(probes, random())
	}
	shapes := map[string]func(i int) Digest{
		"sha256": func(i int) Digest { return sha256.Sum256(fmt.Appendf(nil, "leaf %d", i)) },
		"narrow": func(int) Digest { // every value within 2^20 of one point
			d := random()
			binary.BigEndian.PutUint64(d[1:], 1<<62+rng.Uint64N(1<<20))
			return d
		},
		"same nine bytes": func(int) Digest {
			d := random()
			copy(d[1:9], "artifact")
			return d
		},
		"both ends": func(i int) Digest {
			d := random()
			v := rng.Uint64N(1 << 16)
			if i%2 == 1 {
				v = ^v
			}
			binary.BigEndian.PutUint64(d[1:], v)
			return d
		},
		"powers of two": func(i int) Digest {
			d := random()
			binary.BigEndian.PutUint64(d[1:], 1<<(i%64))
			return d
		},
	}
	for name, leaf := range shapes {
		for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 16, 17, 18, 33, 100, 1000, 8000} {
			leaves := make([]Digest, n)
			for i := range leaves {
				leaves[i] = leaf(i)
			}
			bucket, sorted := bucketOf(0x5a, leaves)
			if n == 0 {
				bucket = nil
				// An empty bucket: every probe goes at 0, none is found.
				for _, p := range probes {
					if i, ok := search(bucket, &p); i != 0 || ok {
						t.Fatalf("empty bucket: search = %d, %v", i, ok)
					}
				}
				continue
			}
			checkSearch(t, name, bucket, sorted, probes)
		}
	}
}

// TestGuessLandsNearTheLeaf: guess always names an index of the range,
// at its ends for values at or past its bounds, and for leaves spread as
// SHA-256 outputs lands within a few dozen of the true index in a bucket
// of 8,000 (the standard deviation is about 45); a guess that ignored the
// value would be off by thousands.
func TestGuessLandsNearTheLeaf(t *testing.T) {
	const top = ^uint64(0)
	for _, tc := range []struct {
		want, floor, ceil uint64
		size, at          int
	}{
		{0, 0, top, 10, 0},
		{top, 0, top, 10, 9},
		{top / 2, 0, top, 10, 4},
		{5, 5, 5, 7, 0},
		{4, 5, 9, 7, 0},
		{10, 5, 9, 7, 6},
		{7, 5, 9, 5, 2},
		{1 << 63, 0, top, 1, 0},
	} {
		if got := guess(tc.want, tc.floor, tc.ceil, tc.size); got != tc.at {
			t.Errorf("guess(%d, %d, %d, %d) = %d, want %d", tc.want, tc.floor, tc.ceil, tc.size, got, tc.at)
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for range 100_000 {
		floor, ceil := rng.Uint64(), rng.Uint64()
		if floor > ceil {
			floor, ceil = ceil, floor
		}
		size := 1 + rng.IntN(1<<20)
		if got := guess(rng.Uint64(), floor, ceil, size); got < 0 || got >= size {
			t.Fatalf("guess in a range of %d gave %d", size, got)
		}
	}
	leaves := make([]Digest, 8000)
	for i := range leaves {
		leaves[i] = sha256.Sum256(fmt.Appendf(nil, "spread %d", i))
	}
	bucket, sorted := bucketOf(1, leaves)
	n := len(sorted)
	first, last := binary.BigEndian.Uint64(bucket[1:]), binary.BigEndian.Uint64(bucket[(n-1)*leafSize+1:])
	worst := 0
	for i, l := range sorted {
		g := guess(binary.BigEndian.Uint64(l[1:9]), first, last, n)
		worst = max(worst, g-i, i-g)
	}
	if worst > 400 {
		t.Fatalf("a guess was %d leaves from its leaf in a bucket of %d spread ones", worst, n)
	}
}

// FuzzSearch: the fuzzer picks the bucket and the leaf; search agrees with
// a plain binary search. Each 9 bytes of the input are a leaf's bytes 1–8
// and its last byte; the bucket is those leaves sorted, the first is the
// leaf looked up.
func FuzzSearch(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0}, 9*5))
	f.Add(bytes.Repeat([]byte{0xff, 1, 2, 3, 4, 5, 6, 7, 8}, 20))
	seed := make([]byte, 0, 9*300)
	for i := range 300 {
		seed = binary.BigEndian.AppendUint64(seed, uint64(i)*uint64(i)*uint64(i)<<20)
		seed = append(seed, byte(i))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		var leaves []Digest
		for i := 0; i+9 <= len(data); i += 9 {
			var d Digest
			copy(d[1:9], data[i:i+8])
			d[leafSize-1] = data[i+8]
			leaves = append(leaves, d)
		}
		if len(leaves) == 0 {
			return
		}
		want := leaves[0]
		want[0] = 3
		bucket, sorted := bucketOf(3, leaves[1:])
		if len(sorted) == 0 {
			bucket = nil
		}
		gi, gok := search(bucket, &want)
		wi, wok := searchByHalving(bucket, &want)
		if gi != wi || gok != wok {
			t.Fatalf("search = %d, %v; halving finds %d, %v (%d leaves)", gi, gok, wi, wok, len(sorted))
		}
	})
}

// BenchmarkBucketSearch: looking up random leaves, half of them present,
// in the buckets of a context of two million leaves (64 MB, about 7,800
// leaves in each of the 256 buckets: the 1M scenario's end), by
// interpolation and by halving.
func BenchmarkBucketSearch(b *testing.B) {
	const n = 2_000_000
	buckets := make([][]byte, 256)
	var probes []Digest // 64k leaves, half of them present
	for i := range n {
		d := sha256.Sum256(fmt.Appendf(nil, "leaf %d", i))
		buckets[d[0]] = append(buckets[d[0]], d[:]...)
		if i%61 == 0 {
			probes = append(probes, d, sha256.Sum256(fmt.Appendf(nil, "absent %d", i)))
		}
	}
	for i := range buckets {
		bucket := buckets[i]
		leaves := make([]Digest, len(bucket)/leafSize)
		for j := range leaves {
			copy(leaves[j][:], bucket[j*leafSize:])
		}
		buckets[i], _ = bucketOf(byte(i), leaves)
	}
	for _, bc := range []struct {
		name string
		fn   func([]byte, *Digest) (int, bool)
	}{{"interpolation", search}, {"halving", searchByHalving}} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				p := &probes[i]
				bc.fn(buckets[p[0]], p)
				if i++; i == len(probes) {
					i = 0
				}
			}
		})
	}
}
