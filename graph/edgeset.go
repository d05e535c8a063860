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
//
// In a fork a hub's set is a delta over the set below (under): its own
// entries are the edges added or replaced, gone the keys removed, n the
// size of the whole set. So a commit that links one more claim to a
// source with 100k dependents costs one entry, not a copy of the 100k;
// Absorb applies the delta to the set below in place (applyTo).
//
// Under a state over a Source, the set of an artifact no layer changed
// is a stored set (src set): it holds nothing and reads the source each
// time — has is a point lookup, all and len read the edges at that end —
// so that a change of a hub's set, always a delta over it, reads none of
// its edges. A stored set is never changed.
type edgeSet struct {
	list  []*Edge           // the edges while m is nil
	m     map[EdgeKey]*Edge // the edges once the set outgrew edgeSetMax
	under *edgeSet
	gone  map[EdgeKey]struct{}
	// dn is a delta's size less its under's.
	dn int
	// src makes a stored set (apart, so that the sets of a whole state,
	// two an artifact, stay small).
	src *storedEnd
}

// storedEnd names the edges arriving at id (in) or leaving it in src.
type storedEnd struct {
	src Source
	id  string
	in  bool
}

// storedSet returns the stored set of the edges leaving id, or with in
// set arriving at it, in src.
func storedSet(src Source, id string, in bool) *edgeSet {
	return &edgeSet{src: &storedEnd{src: src, id: id, in: in}}
}

// stored returns a stored set's edges, read from its source.
func (es *edgeSet) stored() []*Edge {
	if es.src.in {
		return es.src.src.In(es.src.id)
	}
	return es.src.src.Out(es.src.id)
}

// deep reports whether es is a stored set or a delta over one at some
// depth: its size is not known without reading the source.
func (es *edgeSet) deep() bool {
	for x := es; x != nil; x = x.under {
		if x.src != nil {
			return true
		}
	}
	return false
}

// len returns the number of edges (for a stored set, or a delta over
// one, by reading the source).
func (es *edgeSet) len() int {
	switch {
	case es == nil:
		return 0
	case es.src != nil:
		return len(es.stored())
	case es.under != nil:
		return es.under.len() + es.dn
	case es.m != nil:
		return len(es.m)
	}
	return len(es.list)
}

// own reports whether es's own entries hold key k.
func (es *edgeSet) own(k EdgeKey) bool {
	if es.m != nil {
		_, ok := es.m[k]
		return ok
	}
	for _, x := range es.list {
		if x.Key() == k {
			return true
		}
	}
	return false
}

// has reports whether the set holds an edge of key k.
func (es *edgeSet) has(k EdgeKey) bool {
	switch {
	case es == nil:
		return false
	case es.src != nil:
		end := k.From
		if es.src.in {
			end = k.To
		}
		return end == es.src.id && es.src.src.Edge(k) != nil
	case es.own(k):
		return true
	case es.under == nil:
		return false
	}
	if _, ok := es.gone[k]; ok {
		return false
	}
	return es.under.has(k)
}

// put adds e, replacing the edge of the same key.
func (es *edgeSet) put(e *Edge) {
	if es.under != nil {
		k := e.Key()
		if !es.has(k) {
			es.dn++
		}
		delete(es.gone, k)
		es.ownPut(e)
		return
	}
	es.ownPut(e)
}

func (es *edgeSet) ownPut(e *Edge) {
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
	if es.under != nil {
		if !es.has(k) {
			return
		}
		es.dn--
		es.ownDel(k)
		if es.under.has(k) {
			if es.gone == nil {
				es.gone = make(map[EdgeKey]struct{})
			}
			es.gone[k] = struct{}{}
		}
		return
	}
	es.ownDel(k)
}

func (es *edgeSet) ownDel(k EdgeKey) {
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
		if es.src != nil {
			for _, e := range es.stored() {
				if !yield(e.Key(), e) {
					return
				}
			}
			return
		}
		if es.m != nil {
			for k, e := range es.m {
				if !yield(k, e) {
					return
				}
			}
		} else {
			for _, e := range es.list {
				if !yield(e.Key(), e) {
					return
				}
			}
		}
		if es.under == nil {
			return
		}
		for k, e := range es.under.all() {
			if _, ok := es.gone[k]; ok || es.own(k) {
				continue
			}
			if !yield(k, e) {
				return
			}
		}
	}
}

// clone returns a whole copy (no delta) that shares the (immutable)
// edges; a nil set's copy is empty.
func (es *edgeSet) clone() *edgeSet {
	c := &edgeSet{}
	switch {
	case es == nil:
		return c
	case es.under != nil || es.src != nil:
		for _, e := range es.all() {
			c.ownPut(e)
		}
		return c
	case es.m != nil:
		c.m = make(map[EdgeKey]*Edge, len(es.m))
		for k, e := range es.m {
			c.m[k] = e
		}
		return c
	}
	c.list = append(make([]*Edge, 0, len(es.list)), es.list...)
	return c
}

// applyTo applies the delta es, whose under is dst, to dst in place.
func (es *edgeSet) applyTo(dst *edgeSet) {
	for k := range es.gone {
		dst.del(k)
	}
	for _, e := range es.ownEdges() {
		dst.put(e)
	}
}

// ownEdges returns es's own entries.
func (es *edgeSet) ownEdges() []*Edge {
	if es.m == nil {
		return es.list
	}
	out := make([]*Edge, 0, len(es.m))
	for _, e := range es.m {
		out = append(out, e)
	}
	return out
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
