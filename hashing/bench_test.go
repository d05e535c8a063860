package hashing

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// benchObject returns a realistic artifact data object of about size bytes,
// with its keys out of order so sorting is exercised.
func benchObject(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"text":"Q2 cloud spend was $45,000, a 12.5% variance vs budget.","tags":["finance","q2","cloud"],"source":{"locator":"row 3","blob":"sha256:abababababababababababababababababababababababababababababababab"},`)
	for i := 0; b.Len() < size-40; i++ {
		fmt.Fprintf(&b, `"z%03d":{"amount":%d.25,"ok":true,"note":"line \u00e9 %d"},`, 999-i, i*1000, i)
	}
	b.WriteString(`"currency":"USD"}`)
	return []byte(b.String())
}

func BenchmarkCanonicalize(b *testing.B) {
	in := benchObject(1024)
	if _, err := Canonicalize(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAccumulatorUpdate measures one commit touching one leaf: a
// Remove, an Add and a Root, at several context sizes.
func BenchmarkAccumulatorUpdate(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			a := NewAccumulator()
			for i := range n {
				a.Add(leafN(i, 0))
			}
			a.Root()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				old, next := leafN(i, 0), leafN(n+i, 0)
				if !a.Remove(old) || !a.Add(next) {
					b.Fatal("set out of sync")
				}
				a.Root()
				i++
			}
		})
	}
}

func BenchmarkContextHashFromScratch(b *testing.B) {
	leaves := make([]Digest, 100_000)
	for i := range leaves {
		leaves[i] = leafN(i, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		ContextHash(leaves)
	}
}

func BenchmarkAccumulatorClone(b *testing.B) {
	a := NewAccumulator()
	for i := range 100_000 {
		a.Add(leafN(i, 0))
	}
	b.ReportAllocs()
	for b.Loop() {
		c := a.Clone()
		c.Add(leafN(-1, 0)) // first write copies one bucket
	}
}

func BenchmarkArtifactLeaf(b *testing.B) {
	ch := Sum([]byte("x"))
	b.ReportAllocs()
	for b.Loop() {
		ArtifactLeaf("answer:q2", "answer", 3, ch, "writer")
	}
}

// BenchmarkSortLeaves sorts the 200,000 leaves of a 100k-artifact head
// (as AddBatch does when a head is loaded): one plain sort, and
// sortLeaves.
func BenchmarkSortLeaves(b *testing.B) {
	leaves := make([]Digest, 200000)
	for i := range leaves {
		leaves[i] = sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			s := slices.Clone(leaves)
			slices.SortFunc(s, func(x, y Digest) int { return bytes.Compare(x[:], y[:]) })
		}
	})
	b.Run("bucket-first", func(b *testing.B) {
		for b.Loop() {
			sortLeaves(leaves)
		}
	})
}

// BenchmarkForkCommit is a commit's context hash over a big head: a fork
// of an accumulator of n leaves takes k new leaves, computes its root and
// is absorbed — a one-artifact commit (k = 2) and a bulk commit that
// touches every bucket (k = 10,000) into a 1M-artifact context's 2M
// leaves, and a 2,000-op commit at the tip of a 100k chain (200k
// leaves, k = 4,000).
func BenchmarkForkCommit(b *testing.B) {
	for _, c := range []struct{ n, k int }{{2_000_000, 2}, {2_000_000, 10_000}, {200_000, 4_000}} {
		n, k := c.n, c.k
		leaves := make([]Digest, n)
		for i := range leaves {
			leaves[i] = sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		}
		b.Run(fmt.Sprintf("n=%d/k=%d", n, k), func(b *testing.B) {
			a := NewAccumulator()
			a.AddBatch(leaves)
			a.Root()
			next := uint64(n)
			b.ReportAllocs()
			for b.Loop() {
				f := a.Fork()
				for range k {
					f.Add(sha256.Sum256(binary.BigEndian.AppendUint64(nil, next)))
					next++
				}
				f.Root()
				if !a.Absorb(f) {
					b.Fatal("absorb refused its fork")
				}
			}
		})
	}
}

// BenchmarkCanonicalizeSmall canonicalizes the body of a one-artifact
// write, the most frequent body a server reads.
func BenchmarkCanonicalizeSmall(b *testing.B) {
	in := []byte(`{"type":"claim","id":"run-17/claim-3","produced_by":"agent","data":{"text":"revenue grew 4% in 2025","value":4},"edges":[{"rel":"derived_from","to":"run-17/evidence-2"}]}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}
