package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestWalkOverTheMapMatchesWhole: the one walk of a key range
// (mapSource.walk) over a map of many windows yields, from any cursor
// and up to any stop, exactly the entries the state loaded whole does:
// the artifacts from an id, the edges from a key, the edges out of a hub
// and those out of it from a cursor, every artifact. With the node cache
// empty, a page of ten from a cursor reads about the trie's depth and no
// window, nor do the first ten of every artifact; a whole walk reads each
// node once, in batches: far fewer driver calls than nodes.
func TestWalkOverTheMapMatchesWhole(t *testing.T) {
	ctx := context.Background()
	d := &nodeCalls{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	rng := rand.New(rand.NewPCG(33, 5))
	const n = 20_000
	var ops []graph.Op
	for i := range n {
		id := fmt.Sprintf("a%05d", i)
		if i%3 == 0 {
			id = fmt.Sprintf("b%d", rng.Uint32()) // scattered among the others' keys too
		}
		ops = append(ops, notePut(id, i, "walk"))
	}
	hubEdges := 3_000
	for i := 1; i < n; i++ {
		ops = append(ops, graph.Op{Op: graph.OpLink, From: ops[i].ID, Rel: "derived_from", To: ops[rng.IntN(i)].ID})
		if i <= hubEdges { // a hub: its edges out span several windows
			ops = append(ops, graph.Op{Op: graph.OpLink, From: ops[0].ID, Rel: "cites", To: ops[i].ID})
		}
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("later", "claim", map[string]any{}))
	hub := ops[0].ID

	var ids []string
	var keys []graph.EdgeKey
	err := s.ReadCommit(ctx, "c", old, func(v *View) error {
		if v.State.IsLazy() {
			return fmt.Errorf("ReadCommit: the state is not loaded whole")
		}
		for _, a := range v.State.Artifacts() {
			ids = append(ids, a.ID)
		}
		for _, e := range v.State.Edges() {
			keys = append(keys, e.Key())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.states.Clear() // so that ReadSparse reads through the map
	slices.Sort(ids)
	slices.SortFunc(keys, graph.EdgeKey.Compare)
	var hubOut []graph.EdgeKey
	for _, k := range keys {
		if k.From == hub {
			hubOut = append(hubOut, k)
		}
	}
	if len(ids) != n || len(hubOut) != hubEdges {
		t.Fatalf("the whole state: %d ids, %d edges out of the hub", len(ids), len(hubOut))
	}

	cursor := func() string {
		switch k := rng.IntN(6); k {
		case 0:
			return ""
		case 1:
			return ids[rng.IntN(len(ids))] + "\x00" // just past an id
		case 2:
			return "a" + fmt.Sprint(rng.IntN(n)) // between ids, or one
		case 3:
			return "\xff"
		}
		return ids[rng.IntN(len(ids))]
	}
	var m *mapSource
	err = s.ReadSparse(ctx, "c", old, func(v *View) error {
		var ok bool
		if m, ok = v.State.Source().(*mapSource); !ok {
			return fmt.Errorf("the view of an old commit is not read through its map: %T", v.State.Source())
		}
		for range 60 {
			from, stop := cursor(), rng.IntN(3*scanWindow)
			var got []string
			for a := range m.ArtifactsFrom(from) {
				if got = append(got, a.ID); len(got) == stop {
					break
				}
			}
			i, _ := slices.BinarySearch(ids, from)
			want := ids[i:]
			if len(want) > stop {
				want = want[:stop]
			}
			if !slices.Equal(got, want) {
				t.Fatalf("artifacts from %q, up to %d: %d ids, want %d (first %v, want %v)", from, stop, len(got), len(want), firstFew(got), firstFew(want))
			}

			ek := graph.EdgeKey{From: cursor(), Rel: "derived_from", To: cursor()}
			var gotE []graph.EdgeKey
			for e := range m.EdgesFrom(ek) {
				if gotE = append(gotE, e.Key()); len(gotE) == stop {
					break
				}
			}
			// The map orders keys by their bytes: a cursor holding a zero
			// byte sorts so, not as EdgeKey.Compare says.
			j, _ := slices.BinarySearchFunc(keys, ek, func(a, b graph.EdgeKey) int { return bytes.Compare(tkEdge(a), tkEdge(b)) })
			wantE := keys[j:]
			if len(wantE) > stop {
				wantE = wantE[:stop]
			}
			if !slices.Equal(gotE, wantE) {
				t.Fatalf("edges from %+v, up to %d: %d keys, want %d", ek, stop, len(gotE), len(wantE))
			}

			hk := graph.EdgeKey{From: hub, Rel: "cites", To: cursor()}
			var gotH []graph.EdgeKey
			for e := range v.State.OutAfter(hub, hk) {
				gotH = append(gotH, e.Key())
			}
			h, found := slices.BinarySearchFunc(hubOut, hk, graph.EdgeKey.Compare)
			if found {
				h++ // after the cursor
			}
			if !slices.Equal(gotH, hubOut[h:]) {
				t.Fatalf("the hub's edges after %+v: %d, want %d", hk, len(gotH), len(hubOut)-h)
			}
		}
		var out []graph.EdgeKey
		for _, e := range m.Out(hub) {
			out = append(out, e.Key())
		}
		if !slices.Equal(out, hubOut) {
			t.Fatalf("the hub's edges: %d, want %d", len(out), len(hubOut))
		}

		// Reads, with the node cache empty.
		s.nodes.clear()
		before, beforeKeys := d.calls.Load(), d.keys.Load()
		got := 0
		for range m.ArtifactsFrom(ids[n/2]) {
			if got++; got == 10 {
				break
			}
		}
		calls, read := d.calls.Load()-before, d.keys.Load()-beforeKeys
		if got != 10 || read > 12 {
			t.Errorf("a page of 10 from a cursor: %d artifacts, %d nodes read in %d calls; want about the trie's depth", got, read, calls)
		}

		s.nodes.clear()
		before, beforeKeys = d.calls.Load(), d.keys.Load()
		got = 0
		for range m.Artifacts() {
			if got++; got == 10 {
				break
			}
		}
		calls, read = d.calls.Load()-before, d.keys.Load()-beforeKeys
		if got != 10 || read > 12 {
			t.Errorf("the first 10 of every artifact: %d artifacts, %d nodes read in %d calls; want about the trie's depth", got, read, calls)
		}

		nodes, err := countNodes(s, trieChild{id: old.Root, count: old.RootCount})
		if err != nil {
			return err
		}
		s.nodes.clear()
		before, beforeKeys = d.calls.Load(), d.keys.Load()
		got = 0
		for range m.ArtifactsFrom("") {
			got++
		}
		calls, read = d.calls.Load()-before, d.keys.Load()-beforeKeys
		if got != n || read > int64(nodes) || calls > int64(nodes)/8 {
			t.Errorf("every artifact from the first: %d, %d nodes read in %d calls; the map has %d nodes: want each read at most once, in batches", got, read, calls, nodes)
		}
		t.Logf("every artifact: %d nodes read in %d calls, of the map's %d", read, calls, nodes)
		return m.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// firstFew returns the first few of xs, for a message.
func firstFew(xs []string) []string { return xs[:min(len(xs), 3)] }

// countNodes counts the nodes of the trie at root.
func countNodes(src nodeSource, root trieChild) (int, error) {
	if root.count == 0 {
		return 0, nil
	}
	n, err := src.node(root.id)
	if err != nil || n.leaf {
		return 1, err
	}
	total := 1
	for _, c := range n.children {
		k, err := countNodes(src, c)
		if err != nil {
			return 0, err
		}
		total += k
	}
	return total, nil
}
