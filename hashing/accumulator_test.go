package hashing

import (
	"bytes"
	"crypto/sha256"
	mathrand "math/rand"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/quick"
)

const emptyContextHex = "1f92a2b7e73c8fca046dea13443bc7de2829f7b3223e88fbcd2d7b5c7377c76d"

// leafN returns a distinct test leaf; with few buckets, leaves collide in
// buckets, which is what the incremental code must get right.
func leafN(i int, buckets int) Digest {
	d := sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
	if buckets > 0 {
		d[0] = byte(i % buckets)
	}
	return d
}

func TestEmptyContextHash(t *testing.T) {
	for name, d := range map[string]Digest{
		"EmptyContextHash":   EmptyContextHash(),
		"ContextHash(nil)":   ContextHash(nil),
		"NewAccumulator":     NewAccumulator().Root(),
		"SHA-256 of domain":  sha256.Sum256([]byte("artifactd/ctx/v1")),
		"ContextHash(empty)": ContextHash([]Digest{}),
	} {
		if d.Hex() != emptyContextHex {
			t.Errorf("%s = %s, want %s", name, d.Hex(), emptyContextHex)
		}
	}
}

// TestContextHashLayout spells out the root line for three leaves in two
// buckets, independently of the implementation's loop.
func TestContextHashLayout(t *testing.T) {
	var l1, l2, l3 Digest
	l1[0], l1[31] = 0x05, 2
	l2[0], l2[31] = 0x05, 1
	l3[0] = 0xff
	b5 := sha256.Sum256(append(append([]byte{}, l2[:]...), l1[:]...)) // sorted: l2 < l1
	bff := sha256.Sum256(l3[:])
	var line []byte
	line = append(line, "artifactd/ctx/v1"...)
	line = append(line, 0x05)
	line = append(line, b5[:]...)
	line = append(line, 0xff)
	line = append(line, bff[:]...)
	want := Digest(sha256.Sum256(line))

	in := []Digest{l3, l1, l2}
	if got := ContextHash(in); got != want {
		t.Errorf("ContextHash = %s, want %s", got, want)
	}
	if in[0] != l3 || in[1] != l1 || in[2] != l2 {
		t.Error("ContextHash modified its input")
	}
	if got := ContextHash([]Digest{l1, l2, l3, l1}); got != want {
		t.Errorf("ContextHash with a duplicate = %s, want %s", got, want)
	}
	a := NewAccumulator()
	for _, l := range in {
		a.Add(l)
	}
	if got := a.Root(); got != want {
		t.Errorf("Accumulator.Root = %s, want %s", got, want)
	}
}

func TestAccumulatorBasics(t *testing.T) {
	a := NewAccumulator()
	l := leafN(1, 0)
	if !a.Add(l) || a.Add(l) {
		t.Error("Add: want true then false")
	}
	if !a.Has(l) || a.Has(leafN(2, 0)) || a.Len() != 1 {
		t.Errorf("Has/Len wrong: len %d", a.Len())
	}
	if a.Remove(leafN(2, 0)) {
		t.Error("Remove of an absent leaf returned true")
	}
	var sameBucket Digest
	sameBucket[0] = l[0]
	if a.Remove(sameBucket) || a.Has(sameBucket) {
		t.Error("absent leaf of the same bucket found")
	}
	if !a.Remove(l) || a.Remove(l) || a.Len() != 0 || a.Has(l) {
		t.Error("Remove: want true then false, empty set")
	}
	if a.Root().Hex() != emptyContextHex {
		t.Error("Root after removing everything is not the empty hash")
	}
	if got := a.Leaves(); len(got) != 0 {
		t.Errorf("Leaves() = %v", got)
	}
}

// model is the oracle: a plain set.
type model map[Digest]bool

func (m model) leaves() []Digest {
	out := make([]Digest, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	return out
}

// checkAgainst fails t unless a holds exactly m and hashes like ContextHash.
func checkAgainst(t *testing.T, a *Accumulator, m model, where string) {
	t.Helper()
	if a.Len() != len(m) {
		t.Fatalf("%s: Len %d, model %d", where, a.Len(), len(m))
	}
	want := m.leaves()
	slices.SortFunc(want, func(x, y Digest) int { return bytes.Compare(x[:], y[:]) })
	if got := a.Leaves(); !slices.Equal(got, want) {
		t.Fatalf("%s: Leaves differ from the model", where)
	}
	if got, w := a.Root(), ContextHash(m.leaves()); got != w {
		t.Fatalf("%s: Root %s, ContextHash %s", where, got.Short(), w.Short())
	}
}

// TestAccumulatorMatchesOracle adds random leaf sets in random orders with
// interleaved removes and compares Root with the from-scratch hash.
func TestAccumulatorMatchesOracle(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 0xac))
		buckets := []int{0, 1, 3, 256}[seed%4] // 0: natural distribution
		pool := rng.IntN(400) + 1
		a := NewAccumulator()
		m := model{}
		for step := range 1500 {
			l := leafN(rng.IntN(pool), buckets)
			switch rng.IntN(10) {
			case 0, 1, 2:
				if got, want := a.Remove(l), m[l]; got != want {
					t.Fatalf("seed %d step %d: Remove = %v, want %v", seed, step, got, want)
				}
				delete(m, l)
			case 3:
				if got, want := a.Has(l), m[l]; got != want {
					t.Fatalf("seed %d step %d: Has = %v, want %v", seed, step, got, want)
				}
			default:
				if got, want := a.Add(l), !m[l]; got != want {
					t.Fatalf("seed %d step %d: Add = %v, want %v", seed, step, got, want)
				}
				m[l] = true
			}
			if rng.IntN(50) == 0 {
				checkAgainst(t, a, m, "mid-run")
			}
		}
		checkAgainst(t, a, m, "end")

		// The same set built in another order, with no history, hashes the same.
		b := NewAccumulator()
		ls := m.leaves()
		rng.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
		for _, l := range ls {
			b.Add(l)
		}
		if a.Root() != b.Root() {
			t.Fatalf("seed %d: history-dependent root", seed)
		}
	}
}

// TestAccumulatorQuick lets testing/quick pick the leaves and the order.
func TestAccumulatorQuick(t *testing.T) {
	f := func(adds []Digest, removeEvery uint8, bucket uint8) bool {
		a := NewAccumulator()
		m := model{}
		for i, l := range adds {
			if bucket%2 == 0 {
				l[0] = bucket // force collisions in one bucket
			}
			a.Add(l)
			m[l] = true
			if removeEvery > 0 && i%int(removeEvery) == 0 {
				victim := adds[i/2]
				if bucket%2 == 0 {
					victim[0] = bucket
				}
				a.Remove(victim)
				delete(m, victim)
			}
		}
		return a.Len() == len(m) && a.Root() == ContextHash(m.leaves())
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 300, Rand: mathrand.New(mathrand.NewSource(1))}); err != nil {
		t.Error(err)
	}
}

func TestAccumulatorClone(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	a := NewAccumulator()
	ma := model{}
	for i := range 2000 {
		l := leafN(i, 16)
		a.Add(l)
		ma[l] = true
	}
	rootBefore := a.Root()

	b := a.Clone()
	mb := model{}
	for l := range ma {
		mb[l] = true
	}
	// Change both sides in the same buckets: copy on write must separate them.
	for i := range 300 {
		l := leafN(rng.IntN(4000), 16)
		if i%2 == 0 {
			a.Add(l)
			ma[l] = true
		} else {
			a.Remove(l)
			delete(ma, l)
		}
		l2 := leafN(rng.IntN(4000), 16)
		if i%3 == 0 {
			b.Remove(l2)
			delete(mb, l2)
		} else {
			b.Add(l2)
			mb[l2] = true
		}
	}
	checkAgainst(t, a, ma, "original after clone")
	checkAgainst(t, b, mb, "clone")

	// A clone of an untouched accumulator keeps the old root, and clones of
	// clones stay independent.
	c := b.Clone()
	d := c.Clone()
	mc := model{}
	for l := range mb {
		mc[l] = true
	}
	for i := range 100 {
		l := leafN(i, 16)
		d.Remove(l)
	}
	checkAgainst(t, c, mc, "clone of clone")
	checkAgainst(t, b, mb, "clone after its clone changed")
	if rootBefore == a.Root() {
		t.Error("root did not change after edits")
	}

	// Clone before a Root call carries dirty state correctly.
	e := NewAccumulator()
	e.Add(leafN(1, 0))
	f := e.Clone()
	f.Add(leafN(2, 0))
	if e.Root() != ContextHash([]Digest{leafN(1, 0)}) || f.Root() != ContextHash([]Digest{leafN(1, 0), leafN(2, 0)}) {
		t.Error("clone of a dirty accumulator is wrong")
	}
}

// TestAccumulatorCloneConcurrent uses a clone on another goroutine while the
// original changes; run with -race.
func TestAccumulatorCloneConcurrent(t *testing.T) {
	a := NewAccumulator()
	for i := range 5000 {
		a.Add(leafN(i, 8))
	}
	b := a.Clone()
	want := ContextHash(b.Leaves())
	done := make(chan Digest)
	go func() {
		for i := range 1000 {
			b.Has(leafN(i, 8))
		}
		done <- b.Root()
	}()
	for i := range 1000 {
		a.Remove(leafN(i, 8))
		a.Add(leafN(10000+i, 8))
	}
	a.Root()
	if got := <-done; got != want {
		t.Error("clone changed while the original was edited")
	}
}

// TestAddBatchMatchesAdd checks the bulk loader against one-by-one Add,
// with duplicates inside the batch and against leaves already present.
func TestAddBatchMatchesAdd(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := mathrand.New(mathrand.NewSource(seed))
		one, bulk := NewAccumulator(), NewAccumulator()
		for round := 0; round < 4; round++ {
			var batch []Digest
			for i := 0; i < rng.Intn(3000); i++ {
				var d Digest
				rng.Read(d[:2])
				d[0] = byte(rng.Intn(8)) // crowd a few buckets
				batch = append(batch, d)
				if i%7 == 0 {
					batch = append(batch, d)
				}
			}
			want := 0
			for _, d := range batch {
				if one.Add(d) {
					want++
				}
			}
			if got := bulk.AddBatch(batch); got != want {
				t.Fatalf("seed %d: AddBatch added %d, Add added %d", seed, got, want)
			}
			if one.Root() != bulk.Root() || one.Len() != bulk.Len() {
				t.Fatalf("seed %d round %d: roots differ", seed, round)
			}
			if ContextHash(bulk.Leaves()) != bulk.Root() {
				t.Fatalf("seed %d: AddBatch root differs from scratch", seed)
			}
		}
	}
}

// TestSortLeaves: the bucket-first sort orders leaves as one plain sort
// does, for random digests, duplicates, and digests that agree on their
// first nine bytes or more (where the eight-byte shortcut cannot decide).
func TestSortLeaves(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var leaves []Digest
	for range 5000 {
		var d Digest
		for i := range d {
			d[i] = byte(rng.IntN(256))
		}
		leaves = append(leaves, d)
		if rng.IntN(10) == 0 {
			leaves = append(leaves, d) // a duplicate
		}
		if rng.IntN(5) == 0 {
			e := d
			e[9+rng.IntN(23)] ^= byte(1 + rng.IntN(255)) // same first nine bytes or more
			leaves = append(leaves, e)
		}
	}
	want := slices.Clone(leaves)
	slices.SortFunc(want, func(x, y Digest) int { return bytes.Compare(x[:], y[:]) })
	if got := sortLeaves(leaves); !slices.Equal(got, want) {
		t.Fatal("sortLeaves differs from a plain sort")
	}
	if got := sortLeaves(nil); len(got) != 0 {
		t.Fatalf("sortLeaves(nil) = %v", got)
	}
}

// TestAccumulatorOfSorted: an accumulator made of sorted leaves hashes as
// ContextHash does and takes changes as one built leaf by leaf; leaves
// out of order, repeated or cut short are refused.
func TestAccumulatorOfSorted(t *testing.T) {
	for _, n := range []int{0, 1, 2, 255, 3000} {
		leaves := make([]Digest, n)
		for i := range leaves {
			leaves[i] = Sum([]byte{byte(i), byte(i >> 8), byte(n)})
		}
		sorted := sortLeaves(leaves)
		var raw []byte
		for _, l := range sorted {
			raw = append(raw, l[:]...)
		}
		a, err := AccumulatorOfSorted(raw)
		if err != nil {
			t.Fatal(err)
		}
		if a.Root() != ContextHash(leaves) || a.Len() != n {
			t.Fatalf("%d leaves: root %s len %d, want %s", n, a.Root(), a.Len(), ContextHash(leaves))
		}
		extra := Sum([]byte("extra"))
		a.Add(extra)
		if a.Root() != ContextHash(append(leaves, extra)) {
			t.Fatalf("%d leaves: root after an add differs", n)
		}
		if n >= 2 {
			swapped := append([]byte(nil), raw...)
			copy(swapped[:32], raw[32:64])
			copy(swapped[32:64], raw[:32])
			if _, err := AccumulatorOfSorted(swapped); err == nil {
				t.Fatalf("%d leaves: out of order accepted", n)
			}
			if _, err := AccumulatorOfSorted(append(append([]byte(nil), raw[:32]...), raw[:32]...)); err == nil {
				t.Fatal("a repeated leaf accepted")
			}
			if _, err := AccumulatorOfSorted(raw[:len(raw)-1]); err == nil {
				t.Fatal("a cut leaf accepted")
			}
		}
	}
}
