package lru

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// TestSteps walks one sequence of puts and gets through a cache of cost
// 10 and checks what it keeps after each.
func TestSteps(t *testing.T) {
	c := New[string](10, func(s []string) int64 { return int64(len(s)) })
	ids := func(n int) []string { return make([]string, n) }
	steps := []struct {
		put  string
		n    int
		get  string // read after the put, making it the most recent
		want []string
		size int64
	}{
		{put: "a", n: 4, want: []string{"a"}, size: 4},
		{put: "b", n: 4, get: "a", want: []string{"a", "b"}, size: 8},
		{put: "c", n: 4, want: []string{"a", "c"}, size: 8},  // b least recent
		{put: "d", n: 11, want: []string{"a", "c"}, size: 8}, // too big alone
		{put: "a", n: 6, want: []string{"a", "c"}, size: 10}, // replaced, counted once
		{put: "e", n: 1, want: []string{"a", "e"}, size: 7},  // c least recent
		{put: "f", n: 10, want: []string{"f"}, size: 10},     // everything else goes
		{put: "f", n: 11, want: []string{}, size: 0},         // its replacement too big
	}
	for i, st := range steps {
		c.Put(st.put, ids(st.n))
		if st.get != "" {
			if _, ok := c.Get(st.get); !ok {
				t.Fatalf("step %d: %s missing", i, st.get)
			}
		}
		kept := []string{}
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
			if c.Has(k) {
				kept = append(kept, k)
			}
		}
		if !slices.Equal(kept, st.want) || c.Size() != st.size || c.Len() != len(st.want) {
			t.Fatalf("step %d: kept %v (size %d, len %d), want %v (size %d)", i, kept, c.Size(), c.Len(), st.want, st.size)
		}
	}
	c.Clear()
	if c.Len() != 0 || c.Size() != 0 || c.Has("f") {
		t.Fatalf("after Clear: len %d, size %d", c.Len(), c.Size())
	}
}

// TestMatchesModel runs random puts, gets, drops and clears against a
// plain model (a slice in recency order, evicted from its end) and
// compares what each keeps, in order, after every step.
func TestMatchesModel(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		max := int64(1 + r.IntN(40))
		c := New[int](max, func(v int64) int64 { return v })
		var model []kv // most recent first
		find := func(k int) int {
			return slices.IndexFunc(model, func(e kv) bool { return e.k == k })
		}
		for step := range 400 {
			k := r.IntN(12)
			switch op := r.IntN(10); {
			case op < 5:
				cost := int64(r.IntN(int(max) + 3))
				c.Put(k, cost)
				if i := find(k); i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
				if cost <= max {
					model = append([]kv{{k, cost}}, model...)
					for used := sum(model); used > max; used = sum(model) {
						model = model[:len(model)-1]
					}
				}
			case op < 8:
				v, ok := c.Get(k)
				i := find(k)
				if ok != (i >= 0) || ok && v != model[i].cost {
					t.Fatalf("seed %d step %d: Get(%d) = %d, %v; model %v", seed, step, k, v, ok, model)
				}
				if ok {
					e := model[i]
					model = append([]kv{e}, slices.Delete(model, i, i+1)...)
				}
			case op < 9:
				c.Drop(k)
				if i := find(k); i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
			default:
				if r.IntN(10) == 0 {
					c.Clear()
					model = nil
				}
			}
			got := []kv{}
			for e := c.ll.Front(); e != nil; e = e.Next() {
				en := e.Value.(*entry[int, int64])
				got = append(got, kv{en.k, en.cost})
			}
			if !slices.Equal(got, append([]kv{}, model...)) || c.Size() != sum(model) {
				t.Fatalf("seed %d step %d: cache %v (size %d), model %v", seed, step, got, c.Size(), model)
			}
		}
	}
}

// kv is an entry of TestMatchesModel's model.
type kv struct {
	k    int
	cost int64
}

func sum(xs []kv) int64 {
	var n int64
	for _, x := range xs {
		n += x.cost
	}
	return n
}

// TestCountsEntries: without a cost function the bound is a number of
// entries.
func TestCountsEntries(t *testing.T) {
	c := New[int, string](3, nil)
	for i := range 5 {
		c.Put(i, "x")
	}
	if c.Len() != 3 || c.Has(0) || c.Has(1) || !c.Has(4) {
		t.Fatalf("len %d, has 0 %v, 1 %v, 4 %v", c.Len(), c.Has(0), c.Has(1), c.Has(4))
	}
}

// TestConcurrentUse: puts, gets and drops from several goroutines keep
// the bound (run with -race).
func TestConcurrentUse(t *testing.T) {
	c := New[int](100, func(v int64) int64 { return v })
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 2000 {
				k := r.IntN(50)
				switch r.IntN(3) {
				case 0:
					c.Put(k, int64(r.IntN(30)))
				case 1:
					c.Get(k)
				default:
					c.Drop(k)
				}
			}
		})
	}
	wg.Wait()
	if s := c.Size(); s > 100 || s < 0 {
		t.Fatalf("size %d", s)
	}
}
