package store

import (
	"container/list"
	"sync"

	"github.com/artifactd/artifactd/hashing"
)

// A point read of a big state map descends from its root through
// branches to one leaf, and every key below a branch passes through it: a
// 1M-artifact map has about 22,000 branches over 200,000 leaves, at a
// fourteenth of their memory. A least-recently-used cache over both kinds
// serves such reads badly when they land on random keys (a commit's link
// targets): each read brings a leaf that is rarely read again, and the
// leaves push out the branches above them, so a read costs a lookup per
// level instead of one. The node cache therefore keeps branches before
// leaves: past its budget it drops the least recently used leaves first,
// and branches only when no leaf is left or when branches alone pass
// branchShare of the budget. A map whose leaves all fit is cached as by a
// plain LRU.

// branchShareNum / branchShareDen of the node cache's budget is the most
// its branches take; the leaves always keep the rest.
const (
	branchShareNum = 7
	branchShareDen = 8
)

// nodeKind indexes nodeCache's lists: leaves, then branches.
const (
	kindLeaf = iota
	kindBranch
	nodeKinds
)

// nodeCache is the store's cache of decoded state-map nodes, bounded by
// the sum of their estimated costs ((*trieNode).cost). It is safe for
// concurrent use.
type nodeCache struct {
	mu        sync.Mutex // guards the fields below
	max       int64      // bytes all nodes may take
	branchMax int64      // bytes branches may take
	used      [nodeKinds]int64
	lists     [nodeKinds]*list.List // of *nodeEntry, most recently used first
	items     map[hashing.Digest]*list.Element
}

type nodeEntry struct {
	id   hashing.Digest
	n    *trieNode
	kind int
	cost int64
}

// newNodeCache returns a node cache of max bytes.
func newNodeCache(max int64) *nodeCache {
	c := &nodeCache{max: max, branchMax: max / branchShareDen * branchShareNum, items: make(map[hashing.Digest]*list.Element)}
	for k := range c.lists {
		c.lists[k] = list.New()
	}
	return c
}

func kindOfNode(n *trieNode) int {
	if n.leaf {
		return kindLeaf
	}
	return kindBranch
}

// get returns node id if it is cached, and marks it used.
func (c *nodeCache) get(id hashing.Digest) (*trieNode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[id]
	if !ok {
		return nil, false
	}
	en := e.Value.(*nodeEntry)
	c.lists[en.kind].MoveToFront(e)
	return en.n, true
}

// put caches node n as id, then drops what passes the budget: leaves
// first. A node costing more than the whole budget is not kept.
func (c *nodeCache) put(id hashing.Digest, n *trieNode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		// Content-addressed: the same id is the same node.
		c.lists[e.Value.(*nodeEntry).kind].MoveToFront(e)
		return
	}
	en := &nodeEntry{id: id, n: n, kind: kindOfNode(n), cost: n.cost()}
	c.items[id] = c.lists[en.kind].PushFront(en)
	c.used[en.kind] += en.cost
	for c.used[kindBranch] > c.branchMax {
		c.dropOldest(kindBranch)
	}
	for c.used[kindLeaf]+c.used[kindBranch] > c.max {
		if c.lists[kindLeaf].Len() > 0 {
			c.dropOldest(kindLeaf)
		} else {
			c.dropOldest(kindBranch)
		}
	}
}

// dropOldest drops the least recently used node of kind k; the caller
// holds c.mu and knows there is one.
func (c *nodeCache) dropOldest(k int) {
	e := c.lists[k].Back()
	en := e.Value.(*nodeEntry)
	c.lists[k].Remove(e)
	delete(c.items, en.id)
	c.used[k] -= en.cost
}

// size is the summed cost of the cached nodes.
func (c *nodeCache) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used[kindLeaf] + c.used[kindBranch]
}

// clear empties the cache.
func (c *nodeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.lists {
		c.lists[k].Init()
		c.used[k] = 0
	}
	clear(c.items)
}
