package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestEdgeSetMatchesMap puts and deletes random edges — few distinct keys
// and many, so that sets stay lists and spill to maps — against a map
// model, checking len, every edge yielded once with its key, the latest
// edge of a key kept, and clones independent of their source.
func TestEdgeSetMatchesMap(t *testing.T) {
	for _, keys := range []int{3, edgeSetMax, edgeSetMax + 1, 100} {
		t.Run(fmt.Sprint(keys, " keys"), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(keys), 7))
			var es *edgeSet
			if es.len() != 0 {
				t.Fatal("nil set: len != 0")
			}
			for range es.all() {
				t.Fatal("nil set yields an edge")
			}
			es.del(EdgeKey{From: "x"}) // no-op on nil
			es = &edgeSet{}
			model := map[EdgeKey]*Edge{}
			var snap *edgeSet
			var snapModel map[EdgeKey]*Edge
			for step := range 3000 {
				k := EdgeKey{From: "a", Rel: "derived_from", To: fmt.Sprint(r.IntN(keys))}
				if r.IntN(3) == 0 {
					es.del(k)
					delete(model, k)
				} else {
					e := &Edge{From: k.From, Rel: k.Rel, To: k.To, Attrs: []byte(fmt.Sprint(step))}
					es.put(e)
					model[k] = e
				}
				if step == 1500 {
					snap, snapModel = es.clone(), map[EdgeKey]*Edge{}
					for k, e := range model {
						snapModel[k] = e
					}
				}
				checkEdgeSet(t, es, model, step)
			}
			checkEdgeSet(t, snap, snapModel, -1)
		})
	}
}

func checkEdgeSet(t *testing.T, es *edgeSet, model map[EdgeKey]*Edge, step int) {
	t.Helper()
	if es.len() != len(model) {
		t.Fatalf("step %d: len %d, model %d", step, es.len(), len(model))
	}
	seen := map[EdgeKey]bool{}
	for k, e := range es.all() {
		if seen[k] {
			t.Fatalf("step %d: %v yielded twice", step, k)
		}
		seen[k] = true
		if e.Key() != k || model[k] != e {
			t.Fatalf("step %d: %v yields %+v, model has %+v", step, k, e, model[k])
		}
	}
	if len(seen) != len(model) {
		t.Fatalf("step %d: %d edges yielded, model %d", step, len(seen), len(model))
	}
}
