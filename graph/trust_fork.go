package graph

import "iter"

// Fork returns an empty overlay over t, as State.Fork does for a state:
// Apply on the fork (with a fork of the state t follows) leaves t as it
// was, and t takes the fork's entries with Absorb. t must not change while
// the fork is in use, except by Absorb of this fork.
func (t *TrustIndex) Fork() *TrustIndex {
	// The maps are made on first write: most forks (a commit's) change
	// a few entries or none.
	return &TrustIndex{
		base:    t.base,
		rebase:  t.rebase,
		nq:      t.nq,
		n:       t.n,
		nr:      t.nr,
		under:   t,
		forkGen: t.gen,
	}
}

// Absorb applies the entries of f, a fork of t made since t last changed,
// to t in O(what f changed); f must not be used again. It returns
// ErrForkStale, changing nothing, when f is not such a fork.
func (t *TrustIndex) Absorb(f *TrustIndex) error {
	if f.under != t || f.forkGen != t.gen {
		return ErrForkStale
	}
	for id := range f.gone {
		t.dropNode(id)
	}
	for id, st := range f.nodes {
		t.setNodeEntry(id, st)
	}
	for id := range f.rootGone {
		t.dropRoot(id)
	}
	for id, why := range f.roots {
		t.setRootEntry(id, why)
	}
	t.nq, t.n, t.nr = f.nq, f.n, f.nr
	t.memo = nil
	t.gen++
	f.under = nil
	f.forkGen = ^uint64(0)
	return nil
}

// node returns id's entry and whether there is one.
func (t *TrustIndex) node(id string) (tstate, bool) {
	for x := t; ; x = x.under {
		if st, ok := x.nodes[id]; ok {
			return st, true
		}
		if !x.overlay() {
			return tstate{}, false
		}
		if _, ok := x.gone[id]; ok {
			return tstate{}, false
		}
		if x.under == nil {
			e, ok := x.src.Trust(id)
			return e.tstate(), ok
		}
	}
}

// root returns the reason of poison root id and whether id is one.
func (t *TrustIndex) root(id string) (string, bool) {
	for x := t; ; x = x.under {
		if why, ok := x.roots[id]; ok {
			return why, true
		}
		if !x.overlay() {
			return "", false
		}
		if _, ok := x.rootGone[id]; ok {
			return "", false
		}
		if x.under == nil {
			return x.src.Root(id)
		}
	}
}

// putNode writes id's entry, counting a new one.
func (t *TrustIndex) putNode(id string, st tstate) {
	if _, ok := t.node(id); !ok {
		t.n++
	}
	t.setNodeEntry(id, st)
	t.gen++
}

// delNode removes id's entry, if any.
func (t *TrustIndex) delNode(id string) {
	if _, ok := t.node(id); !ok {
		return
	}
	t.n--
	t.dropNode(id)
	t.gen++
}

// putRoot marks id a poison root with its reason, counting a new one.
func (t *TrustIndex) putRoot(id, why string) {
	if _, ok := t.root(id); !ok {
		t.nr++
	}
	t.setRootEntry(id, why)
	t.gen++
}

// delRoot unmarks poison root id, if it is one.
func (t *TrustIndex) delRoot(id string) {
	if _, ok := t.root(id); !ok {
		return
	}
	t.nr--
	t.dropRoot(id)
	t.gen++
}

// setNodeEntry, dropNode, setRootEntry and dropRoot change this layer's
// maps only, without counting.
func (t *TrustIndex) setNodeEntry(id string, st tstate) {
	if t.nodes == nil {
		t.nodes = make(map[string]tstate)
	}
	t.nodes[id] = st
	if t.overlay() {
		delete(t.gone, id)
	}
}

func (t *TrustIndex) dropNode(id string) {
	delete(t.nodes, id)
	if t.overlay() {
		if t.gone == nil {
			t.gone = make(map[string]struct{})
		}
		t.gone[id] = struct{}{}
	}
}

func (t *TrustIndex) setRootEntry(id, why string) {
	if t.roots == nil {
		t.roots = make(map[string]string)
	}
	t.roots[id] = why
	if t.overlay() {
		delete(t.rootGone, id)
	}
}

func (t *TrustIndex) dropRoot(id string) {
	delete(t.roots, id)
	if t.overlay() {
		if t.rootGone == nil {
			t.rootGone = make(map[string]struct{})
		}
		t.rootGone[id] = struct{}{}
	}
}

// allNodes yields every entry, in no particular order.
func (t *TrustIndex) allNodes() iter.Seq2[string, tstate] {
	return func(yield func(string, tstate) bool) {
		eachIndexLayer(t, func(x *TrustIndex) (map[string]tstate, map[string]struct{}) { return x.nodes, x.gone }, srcTrustEntries, yield)
	}
}

// allRoots yields every poison root with its reason, in no particular
// order.
func (t *TrustIndex) allRoots() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		eachIndexLayer(t, func(x *TrustIndex) (map[string]string, map[string]struct{}) { return x.roots, x.rootGone }, TrustSource.Roots, yield)
	}
}

// eachIndexLayer yields the entries of every layer of t, the top one's
// first, then those of the source under the bottom layer (walked by
// fromSrc), if any; an id a higher layer holds or removed hides the lower
// layers'.
func eachIndexLayer[V any](t *TrustIndex, m func(*TrustIndex) (map[string]V, map[string]struct{}), fromSrc func(TrustSource) iter.Seq2[string, V], yield func(string, V) bool) {
	var above []*TrustIndex
	hidden := func(id string) bool {
		for _, a := range above {
			vals, gone := m(a)
			if _, ok := vals[id]; ok {
				return true
			}
			if _, ok := gone[id]; ok {
				return true
			}
		}
		return false
	}
	for x := t; x != nil; x = x.under {
		vals, _ := m(x)
		for id, v := range vals {
			if hidden(id) {
				continue
			}
			if !yield(id, v) {
				return
			}
		}
		above = append(above, x)
	}
	bottom := above[len(above)-1]
	if bottom.src == nil {
		return
	}
	for id, v := range fromSrc(bottom.src) {
		if hidden(id) {
			continue
		}
		if !yield(id, v) {
			return
		}
	}
}

// srcTrustEntries walks a trust source's entries as the index's own.
func srcTrustEntries(src TrustSource) iter.Seq2[string, tstate] {
	return func(yield func(string, tstate) bool) {
		for id, e := range src.TrustEntries() {
			if !yield(id, e.tstate()) {
				return
			}
		}
	}
}
