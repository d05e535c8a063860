package lru

import (
	"container/list"
	"sync"
)

// Cache is a least-recently-used map from K to V holding entries whose
// costs sum to at most its bound. The zero value is not usable; call New.
type Cache[K comparable, V any] struct {
	max  int64
	cost func(V) int64

	mu    sync.Mutex // guards the fields below
	used  int64
	ll    *list.List // of *entry[K, V], most recently used first
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	k    K
	v    V
	cost int64
}

// New returns a cache of entries costing cost(v) each, max in all; a nil
// cost counts every entry as 1, so that max bounds their number.
func New[K comparable, V any](max int64, cost func(V) int64) *Cache[K, V] {
	return &Cache[K, V]{max: max, cost: cost, ll: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value kept under k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

// Has reports whether a value is kept under k, without marking it used.
func (c *Cache[K, V]) Has(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// Put keeps v under k, in place of any value kept there, as the most
// recently used entry, and drops the least recently used ones past the
// bound. A v that alone costs more than the bound is not kept (and the
// value it was to replace is gone).
func (c *Cache[K, V]) Put(k K, v V) {
	cost := int64(1)
	if c.cost != nil {
		cost = c.cost(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.remove(e)
	}
	if cost > c.max {
		return
	}
	c.items[k] = c.ll.PushFront(&entry[K, V]{k: k, v: v, cost: cost})
	c.used += cost
	for c.used > c.max {
		c.remove(c.ll.Back())
	}
}

// Drop forgets the value kept under k, if there is one.
func (c *Cache[K, V]) Drop(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.remove(e)
	}
}

// Max is the bound on the summed cost of the entries.
func (c *Cache[K, V]) Max() int64 { return c.max }

// Size is the summed cost of the entries kept.
func (c *Cache[K, V]) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len is the number of entries kept.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Clear forgets every entry.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.items)
	c.used = 0
}

// remove drops e; c.mu must be held.
func (c *Cache[K, V]) remove(e *list.Element) {
	en := e.Value.(*entry[K, V])
	c.ll.Remove(e)
	delete(c.items, en.k)
	c.used -= en.cost
}
