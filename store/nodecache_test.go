package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// testNode returns a leaf or a branch whose cost is about size bytes.
func testNode(leaf bool, size int) *trieNode {
	if leaf {
		return &trieNode{leaf: true, entries: []trieEntry{{key: []byte("k"), val: make([]byte, max(0, size-145))}}}
	}
	n := newBranch()
	n.prefix = make([]byte, max(0, size-736))
	return n
}

// cacheModel is the node cache's policy written plainly: two lists in
// order of use, oldest first.
type cacheModel struct {
	max, branchMax int64
	lists          [nodeKinds][]hashing.Digest
	cost           map[hashing.Digest]int64
	kind           map[hashing.Digest]int
}

func (m *cacheModel) used(k int) int64 {
	var n int64
	for _, id := range m.lists[k] {
		n += m.cost[id]
	}
	return n
}

func (m *cacheModel) touch(id hashing.Digest) {
	k := m.kind[id]
	i := slices.Index(m.lists[k], id)
	m.lists[k] = append(slices.Delete(m.lists[k], i, i+1), id)
}

func (m *cacheModel) has(id hashing.Digest) bool {
	_, ok := m.kind[id]
	return ok
}

func (m *cacheModel) drop(k int) {
	id := m.lists[k][0]
	m.lists[k] = m.lists[k][1:]
	delete(m.kind, id)
}

func (m *cacheModel) put(id hashing.Digest, n *trieNode) {
	if m.has(id) {
		m.touch(id)
		return
	}
	k := kindOfNode(n)
	m.kind[id], m.cost[id] = k, n.cost()
	m.lists[k] = append(m.lists[k], id)
	for m.used(kindBranch) > m.branchMax {
		m.drop(kindBranch)
	}
	for m.used(kindLeaf)+m.used(kindBranch) > m.max {
		if len(m.lists[kindLeaf]) > 0 {
			m.drop(kindLeaf)
		} else {
			m.drop(kindBranch)
		}
	}
}

// TestNodeCacheMatchesModel: over random puts and gets of leaves and
// branches of random sizes, the node cache holds exactly what its policy
// says (branches kept before leaves, each kind least recently used first)
// and never more than its budget, nor branches past their share.
func TestNodeCacheMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		max := int64(20_000 + rng.IntN(40_000))
		c := newNodeCache(max)
		m := &cacheModel{max: max, branchMax: c.branchMax, cost: map[hashing.Digest]int64{}, kind: map[hashing.Digest]int{}}
		if c.branchMax <= 0 || c.branchMax >= max {
			t.Fatalf("branch share %d of %d", c.branchMax, max)
		}
		nodes := map[hashing.Digest]*trieNode{}
		var ids []hashing.Digest
		for i := range 300 {
			n := testNode(rng.IntN(3) > 0, 500+rng.IntN(3000))
			id := hashing.Sum(fmt.Appendf(nil, "%d/%d", seed, i))
			nodes[id] = n
			ids = append(ids, id)
		}
		for step := range 5000 {
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(2) == 0 {
				c.put(id, nodes[id])
				m.put(id, nodes[id])
			} else {
				n, ok := c.get(id)
				if ok != m.has(id) {
					t.Fatalf("seed %d step %d: get %v, the model has it: %v", seed, step, ok, m.has(id))
				}
				if ok {
					if n != nodes[id] {
						t.Fatalf("seed %d step %d: get returned another node", seed, step)
					}
					m.touch(id)
				}
			}
			for k := range nodeKinds {
				if c.used[k] != m.used(k) || c.lists[k].Len() != len(m.lists[k]) {
					t.Fatalf("seed %d step %d: kind %d holds %d bytes in %d nodes, the model %d in %d",
						seed, step, k, c.used[k], c.lists[k].Len(), m.used(k), len(m.lists[k]))
				}
			}
			if c.size() > max || c.used[kindBranch] > c.branchMax {
				t.Fatalf("seed %d step %d: %d bytes (%d of branches) in a cache of %d", seed, step, c.size(), c.used[kindBranch], max)
			}
		}
		// The oldest node the model keeps of each kind is the cache's
		// least recently used one.
		for k := range nodeKinds {
			if len(m.lists[k]) > 0 && c.lists[k].Back().Value.(*nodeEntry).id != m.lists[k][0] {
				t.Fatalf("seed %d: kind %d's oldest node differs from the model's", seed, k)
			}
		}
		c.clear()
		if c.size() != 0 || len(c.items) != 0 {
			t.Fatalf("seed %d: clear left %d bytes, %d nodes", seed, c.size(), len(c.items))
		}
	}
}

// TestNodeCacheKeepsBranchesBeforeLeaves: leaves past the budget push out
// leaves, never the branches; branches past their share push out the
// oldest branches; a node bigger than the budget is not kept.
func TestNodeCacheKeepsBranchesBeforeLeaves(t *testing.T) {
	c := newNodeCache(100_000)
	var branches []hashing.Digest
	for i := range 50 { // 50 × 1,000 bytes: half the budget
		id := hashing.Sum(fmt.Appendf(nil, "b%d", i))
		c.put(id, testNode(false, 1000))
		branches = append(branches, id)
	}
	var leaves []hashing.Digest
	for i := range 500 { // 500 × 1,000 bytes: five budgets
		id := hashing.Sum(fmt.Appendf(nil, "l%d", i))
		c.put(id, testNode(true, 1000))
		leaves = append(leaves, id)
	}
	for _, id := range branches {
		if _, ok := c.get(id); !ok {
			t.Fatal("a leaf pushed out a branch")
		}
	}
	if _, ok := c.get(leaves[len(leaves)-1]); !ok {
		t.Fatal("the newest leaf is not cached")
	}
	if _, ok := c.get(leaves[0]); ok {
		t.Fatal("the oldest leaf is still cached past the budget")
	}
	if c.size() > 100_000 {
		t.Fatalf("%d bytes cached in a budget of 100,000", c.size())
	}
	for i := range 200 { // branches past their share
		c.put(hashing.Sum(fmt.Appendf(nil, "B%d", i)), testNode(false, 1000))
	}
	if c.used[kindBranch] > c.branchMax || c.used[kindLeaf] < c.max-c.branchMax-1000 {
		t.Fatalf("branches hold %d bytes (share %d), leaves %d", c.used[kindBranch], c.branchMax, c.used[kindLeaf])
	}
	if _, ok := c.get(branches[0]); ok {
		t.Fatal("the oldest branch outlived branches past their share")
	}
	big := hashing.Sum([]byte("big"))
	c.put(big, testNode(true, 200_000))
	if _, ok := c.get(big); ok || c.size() > 100_000 {
		t.Fatalf("a node bigger than the budget was kept (%d bytes cached)", c.size())
	}
}

// nodeReads is a driver that counts the state-map nodes read from it.
type nodeReads struct {
	*memkv.Driver
	n atomic.Int64
}

func (d *nodeReads) count(key []byte) {
	if bytes.HasPrefix(key, []byte(pNode)) {
		d.n.Add(1)
	}
}

func (d *nodeReads) Get(ctx context.Context, key []byte) ([]byte, error) {
	d.count(key)
	return d.Driver.Get(ctx, key)
}

func (d *nodeReads) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		d.count(k)
	}
	return d.Driver.GetMany(ctx, keys)
}

// TestRandomPointReadCostsOneLeaf: on a head read through a state map
// whose leaves are several times the node cache, once its branches have
// been read, a point read of a random artifact reads at most one node
// from the database — its leaf — and never the branches above it.
func TestRandomPointReadCostsOneLeaf(t *testing.T) {
	ctx := context.Background()
	d := &nodeReads{Driver: memkv.New()}
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 6000
	var ops []graph.Op
	for i := range n {
		ops = append(ops, put(fmt.Sprintf("a%05d", i), "claim", map[string]any{"i": i, "text": "a claim of some length, as agents write them"}))
	}
	mustCommit(t, s, "c", ops...)
	s.nodes.clear()
	rng := rand.New(rand.NewPCG(3, 4))
	if err := s.Read(ctx, "c", "", func(v *View) error {
		if v.State.Source() == nil {
			return fmt.Errorf("the head was loaded whole")
		}
		for range n { // every branch is read once
			v.State.Artifact(fmt.Sprintf("a%05d", rng.IntN(n)))
		}
		read := 0
		for range 2000 {
			before := d.n.Load()
			id := fmt.Sprintf("a%05d", rng.IntN(n))
			if v.State.Artifact(id) == nil {
				return fmt.Errorf("artifact %s not found", id)
			}
			got := d.n.Load() - before
			if got > 1 {
				return fmt.Errorf("a point read of %s read %d nodes", id, got)
			}
			read += int(got)
		}
		if read < 1000 {
			return fmt.Errorf("2,000 random reads read %d leaves: the leaves were cached after all", read)
		}
		return v.Err()
	}); err != nil {
		t.Fatal(err)
	}
}
