package graph

import "iter"

// TrustEntry is one artifact's entry in a trust index as a TrustSource
// stores it: whether its base holds, whether it is confirmed, and how
// many of its dependency edges point at unconfirmed artifacts. For the
// state the index follows, Conf == Base && Bad == 0.
type TrustEntry struct {
	Bad  int32
	Base bool
	Conf bool
}

func (e TrustEntry) tstate() tstate { return tstate{bad: e.Bad, base: e.Base, conf: e.Conf} }

func (st tstate) entry() TrustEntry { return TrustEntry{Bad: st.bad, Base: st.base, Conf: st.conf} }

// TrustSource is the stored trust index under a lazy TrustIndex (see
// NewTrustIndexOver), as Source is the stored state under a lazy State:
// every artifact's entry and every poison root with its reason, read on
// demand. Like a Source it never changes, is safe for concurrent use, and
// reports a failed read as absence and in Err.
type TrustSource interface {
	Trust(id string) (TrustEntry, bool)
	Root(id string) (reason string, ok bool)
	// TrustEntries and Roots yield every entry and every poison root, in
	// any order.
	TrustEntries() iter.Seq2[string, TrustEntry]
	Roots() iter.Seq2[string, string]
	// Unconfirmed yields the entries that are not confirmed (most
	// artifacts are), in any order.
	Unconfirmed() iter.Seq2[string, TrustEntry]
	Err() error
}

// TrustCounts are the sizes of a trust index: entries (one per live
// artifact), poison roots and quarantined artifacts.
type TrustCounts struct {
	Entries, Roots, Quarantined int
}

// Counts returns the index's sizes, which a store keeps with the entries
// to open the index over them again (NewTrustIndexOver).
func (t *TrustIndex) Counts() TrustCounts {
	return TrustCounts{Entries: t.n, Roots: t.nr, Quarantined: t.nq}
}

// NewTrustIndexOver returns the trust index that src holds, with sizes
// n, judging with baseOf as NewTrustIndexFor's does. Its own maps start
// empty and hold only what changes afterwards; every other lookup reads
// src. Opening it costs nothing: no base is called, no entry read.
func NewTrustIndexOver(src TrustSource, n TrustCounts, baseOf func(*State) BaseFunc) *TrustIndex {
	return &TrustIndex{
		rebase:   baseOf,
		src:      src,
		nodes:    make(map[string]tstate),
		roots:    make(map[string]string),
		gone:     make(map[string]struct{}),
		rootGone: make(map[string]struct{}),
		n:        n.Entries,
		nr:       n.Roots,
		nq:       n.Quarantined,
	}
}

// Err returns the first failed read of the source under t, as State.Err.
func (t *TrustIndex) Err() error {
	x := t
	for x.under != nil {
		x = x.under
	}
	if x.src == nil {
		return nil
	}
	return x.src.Err()
}

// overlay reports whether t keeps removals as markers (gone, rootGone):
// a fork, or an index over a source.
func (t *TrustIndex) overlay() bool { return t.under != nil || t.src != nil }

// Entries yields every artifact's entry, in no particular order, for a
// store to write the index down.
func (t *TrustIndex) Entries() iter.Seq2[string, TrustEntry] {
	return func(yield func(string, TrustEntry) bool) {
		for id, st := range t.allNodes() {
			if !yield(id, st.entry()) {
				return
			}
		}
	}
}

// Roots yields every poison root with its reason, in no particular order.
func (t *TrustIndex) Roots() iter.Seq2[string, string] { return t.allRoots() }

// Entry returns id's entry and whether the index holds one.
func (t *TrustIndex) Entry(id string) (TrustEntry, bool) {
	st, ok := t.node(id)
	return st.entry(), ok
}

// RootReason returns why id is a poison root, and whether it is one.
func (t *TrustIndex) RootReason(id string) (string, bool) { return t.root(id) }

// Changed yields the ids whose entry or poison-root mark t's own layer
// changed — for a fork, what its commits changed — each once, in no
// particular order. Entry and RootReason give what they are now.
func (t *TrustIndex) Changed() iter.Seq[string] {
	return func(yield func(string) bool) {
		in := func(m map[string]struct{}, id string) bool { _, ok := m[id]; return ok }
		for id := range t.nodes {
			if !yield(id) {
				return
			}
		}
		for id := range t.gone {
			if _, ok := t.nodes[id]; !ok && !yield(id) {
				return
			}
		}
		for id := range t.roots {
			if _, ok := t.nodes[id]; !ok && !in(t.gone, id) && !yield(id) {
				return
			}
		}
		for id := range t.rootGone {
			if _, ok := t.nodes[id]; ok || in(t.gone, id) {
				continue
			}
			if _, ok := t.roots[id]; !ok && !yield(id) {
				return
			}
		}
	}
}

// Unconfirmed yields every artifact that is not confirmed, with its
// status, in no particular order: for a reader that judges every
// artifact (the UI's overview), which then takes the others as confirmed
// rather than look each one up. An index over a source reads only the
// source's unconfirmed entries (TrustSource.Unconfirmed).
func (t *TrustIndex) Unconfirmed() iter.Seq2[string, Status] {
	return func(yield func(string, Status) bool) {
		nodes := func(x *TrustIndex) (map[string]tstate, map[string]struct{}) { return x.nodes, x.gone }
		fromSrc := func(src TrustSource) iter.Seq2[string, tstate] {
			return func(yield func(string, tstate) bool) {
				for id, e := range src.Unconfirmed() {
					if !yield(id, e.tstate()) {
						return
					}
				}
			}
		}
		eachIndexLayer(t, nodes, fromSrc, func(id string, st tstate) bool {
			if st.conf {
				return true
			}
			return yield(id, st.status())
		})
	}
}

// status returns the status of an artifact whose entry is st.
func (st tstate) status() Status {
	switch {
	case st.conf:
		return StatusConfirmed
	case !st.base:
		return StatusPoisonRoot
	}
	return StatusQuarantined
}
