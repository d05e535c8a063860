package graph

import "iter"

// edgeSetMax is the size up to which an edgeSet keeps a list; beyond it
// (a hub) the set moves to a map, for constant-time removal.
const edgeSetMax = 16

// edgeSet holds the edges at one end of an artifact: those leaving it
// (State.out) or those arriving at it (State.in). Most artifacts have a
// few, kept in a list — a Go map of one edge costs about 500 bytes, a
// list entry 8, and a state holds two sets per artifact. A nil *edgeSet
// is empty.
type edgeSet struct {
	list []*Edge           // the edges while m is nil
	m    map[EdgeKey]*Edge // the edges once the set outgrew edgeSetMax
}

// len returns the number of edges.
func (es *edgeSet) len() int {
	switch {
	case es == nil:
		return 0
	case es.m != nil:
		return len(es.m)
	}
	return len(es.list)
}

// put adds e, replacing the edge of the same key.
func (es *edgeSet) put(e *Edge) {
	if es.m != nil {
		es.m[e.Key()] = e
		return
	}
	k := e.Key()
	for i, x := range es.list {
		if x.Key() == k {
			es.list[i] = e
			return
		}
	}
	if len(es.list) < edgeSetMax {
		es.list = append(es.list, e)
		return
	}
	es.m = make(map[EdgeKey]*Edge, 2*edgeSetMax)
	for _, x := range es.list {
		es.m[x.Key()] = x
	}
	es.m[k] = e
	es.list = nil
}

// del removes the edge of key k, if any.
func (es *edgeSet) del(k EdgeKey) {
	if es == nil {
		return
	}
	if es.m != nil {
		delete(es.m, k)
		return
	}
	for i, x := range es.list {
		if x.Key() == k {
			last := len(es.list) - 1
			es.list[i] = es.list[last]
			es.list[last] = nil
			es.list = es.list[:last]
			return
		}
	}
}

// all yields every edge with its key, in no particular order.
func (es *edgeSet) all() iter.Seq2[EdgeKey, *Edge] {
	return func(yield func(EdgeKey, *Edge) bool) {
		if es == nil {
			return
		}
		if es.m != nil {
			for k, e := range es.m {
				if !yield(k, e) {
					return
				}
			}
			return
		}
		for _, e := range es.list {
			if !yield(e.Key(), e) {
				return
			}
		}
	}
}

// clone returns a copy that shares the (immutable) edges; a nil set's
// copy is empty.
func (es *edgeSet) clone() *edgeSet {
	c := &edgeSet{}
	if es == nil {
		return c
	}
	if es.m != nil {
		c.m = make(map[EdgeKey]*Edge, len(es.m))
		for k, e := range es.m {
			c.m[k] = e
		}
		return c
	}
	c.list = append(make([]*Edge, 0, len(es.list)), es.list...)
	return c
}

// edgesAt returns adj's set for id, creating it.
func edgesAt(adj map[string]*edgeSet, id string) *edgeSet {
	es := adj[id]
	if es == nil {
		es = &edgeSet{}
		adj[id] = es
	}
	return es
}
