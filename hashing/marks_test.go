package hashing

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"fmt"
	"math/rand/v2"
	"testing"
)

// withSpan returns an empty accumulator taking a mark every span leaves,
// so that small test sets have many.
func withSpan(span int) *Accumulator { return &Accumulator{t: &table{span: span}} }

// checkMarks fails unless every mark a whole accumulator keeps is the
// SHA-256 state after its leaves of the bucket as it is now: a stale mark
// would make a later re-hash wrong, so this is checked apart from Root.
func checkMarks(t *testing.T, where string, a *Accumulator) {
	t.Helper()
	if a.under != nil {
		return
	}
	for b := range 256 {
		marks, bucket := a.t.marksOf(byte(b)), a.t.buckets[b]
		if len(marks)%markSize != 0 {
			t.Fatalf("%s: bucket %d: marks of %d bytes", where, b, len(marks))
		}
		for j := 0; j < len(marks)/markSize; j++ {
			end := (j + 1) * a.t.span * leafSize
			if end > len(bucket) {
				t.Fatalf("%s: bucket %d: mark %d past the bucket's %d leaves", where, b, j, len(bucket)/leafSize)
			}
			h := sha256.New()
			h.Write(bucket[:end])
			want, err := h.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(marks[j*markSize:(j+1)*markSize], want) {
				t.Fatalf("%s: bucket %d: mark %d is stale", where, b, j)
			}
		}
	}
}

// TestMarkSize: crypto/sha256 marshals its state in markSize bytes; were
// it not so, marks would silently be off (correct, but slow).
func TestMarkSize(t *testing.T) {
	h := sha256.New()
	h.Write(make([]byte, 4096))
	out, err := h.(encoding.BinaryAppender).AppendBinary(nil)
	if err != nil || len(out) != markSize {
		t.Fatalf("sha256 state is %d bytes (%v), markSize is %d", len(out), err, markSize)
	}
}

// TestMarksOracle changes accumulators with marks every few leaves in
// every way the store does — direct adds and removes, forks absorbed with
// and without their root, forks dropped, forks of forks, clones changed on
// both sides, the bulk loader — and after each step checks the root
// against ContextHash and every mark against the bucket it covers.
func TestMarksOracle(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 0x3a))
		span := 1 + rng.IntN(5)
		pool := make([]Digest, 400)
		for i := range pool {
			pool[i] = Sum([]byte{byte(seed), byte(i), byte(i >> 8), 'm'})
			pool[i][0] = byte(rng.IntN(3))
		}
		a := withSpan(span)
		m := model{}
		check := func(where string, acc *Accumulator, set model) {
			t.Helper()
			if got, want := acc.Root(), ContextHash(set.leaves()); got != want {
				t.Fatalf("seed %d span %d %s: root %s, want %s", seed, span, where, got, want)
			}
			checkMarks(t, where, acc)
		}
		change := func(acc *Accumulator, set model, n int) {
			for range n {
				l := pool[rng.IntN(len(pool))]
				if rng.IntN(3) == 0 {
					acc.Remove(l)
					delete(set, l)
				} else {
					acc.Add(l)
					set[l] = true
				}
				if rng.IntN(10) == 0 {
					acc.Root() // marks taken part way
				}
			}
		}
		change(a, m, 150)
		check("start", a, m)
		for step := range 60 {
			switch rng.IntN(6) {
			case 0: // direct changes
				change(a, m, 1+rng.IntN(5))
			case 1, 2: // a commit: fork, root, absorb (or not)
				f := a.Fork()
				fm := cloneSet(m)
				n := 1 + rng.IntN(3)
				if rng.IntN(3) == 0 {
					n = 10 + rng.IntN(40) // the in-place merge
				}
				change(f, fm, n)
				check("fork", f, fm)
				if rng.IntN(4) == 0 {
					check("after a dropped fork", a, m)
					continue
				}
				if rng.IntN(4) == 0 {
					f.Root()
					change(f, fm, 1) // dirty again before Absorb
				}
				a.Absorb(f)
				m = fm
			case 3: // a group: a fork of a fork
				g := a.Fork()
				gm := cloneSet(m)
				for range 1 + rng.IntN(3) {
					c := g.Fork()
					cm := cloneSet(gm)
					change(c, cm, 1+rng.IntN(6))
					check("commit of a group", c, cm)
					g.Absorb(c)
					gm = cm
				}
				if rng.IntN(2) == 0 {
					g.Root()
				}
				a.Absorb(g)
				m = gm
			case 4: // a clone changed on both sides
				c := a.Clone()
				cm := cloneSet(m)
				change(c, cm, 1+rng.IntN(8))
				change(a, m, 1+rng.IntN(8))
				check("clone", c, cm)
			case 5: // the bulk loader
				var batch []Digest
				for range 1 + rng.IntN(20) {
					l := pool[rng.IntN(len(pool))]
					batch = append(batch, l)
					m[l] = true
				}
				a.AddBatch(batch)
			}
			check(fmt.Sprintf("step %d", step), a, m)
		}
	}
}

// TestMarksResume: a re-hash starts at the last mark before the first
// change, and no later; a change before every mark starts at the
// bucket's start.
func TestMarksResume(t *testing.T) {
	a := withSpan(16)
	for i := range 1000 {
		a.Add(leafN(i, 1)) // one bucket of 1,000 leaves
	}
	a.Root()
	checkMarks(t, "whole", a)
	if got, want := len(a.t.marksOf(0))/markSize, 1000/16; got != want {
		t.Fatalf("%d marks over 1,000 leaves, want %d", got, want)
	}
	bucket := a.t.buckets[0]
	for _, keep := range []int{0, 15, 16, 17, 500, 999, 1000} {
		bh, from := resumeBucket(a.t.marksOf(0), keep, 16, len(bucket))
		if want := keep / 16 * 16; from != want {
			t.Errorf("keep %d: resumed at leaf %d, want %d", keep, from, want)
		}
		bh.write(bucket[from*leafSize:])
		if d, _ := bh.sum(); d != Digest(sha256.Sum256(bucket)) {
			t.Errorf("keep %d: digest differs from hashing the bucket whole", keep)
		}
	}
	// A leaf placed last: the fork re-hashes from the last mark only, and
	// keeps the marks before it.
	last := Digest{}
	for i := range last {
		last[i] = 0xff
	}
	last[0] = 0
	f := a.Fork()
	f.Add(last)
	f.Root()
	d := f.deltaAt(0)
	if !bytes.Equal(d.marks[:len(a.t.marksOf(0))], a.t.marksOf(0)) {
		t.Fatal("the fork's marks before its change differ from the head's")
	}
	a.Absorb(f)
	checkMarks(t, "after absorbing", a)
	// A change truncates the marks at it.
	before := len(a.t.marksOf(0)) / markSize
	i, _ := search(a.t.buckets[0], &[]Digest{leafN(0, 1)}[0])
	a.Remove(leafN(0, 1))
	if got, want := len(a.t.marksOf(0))/markSize, min(before, i/16); got != want {
		t.Errorf("a removal at leaf %d left %d marks, want %d", i, got, want)
	}
	checkMarks(t, "after a removal", a)
}
