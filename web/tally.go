package web

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Tally limits.
const (
	// tallySamples is how many of its smallest ids a tallied key keeps:
	// more than the clusterSamples an overview shows, so that a derived
	// tally can lose a few of them before it must be counted again.
	tallySamples = 8
	// maxTallyBytes bounds what the kept tallies cost in all
	// (tallyCost); one that costs more than a quarter of it (a grouping
	// by producer with thousands of producers) is not kept.
	maxTallyBytes = 8 << 20
	// deriveShare is the share of a state's artifacts (1/deriveShare)
	// that may differ, counting artifacts, trust changes and edges, for a
	// tally to be derived rather than counted again: each difference
	// costs a few point reads of the two maps, where counting walks them
	// in order.
	deriveShare = 16
	// denseKeys is the most keys whose edges buildTally counts in a
	// table of every pair of keys.
	denseKeys = 256
)

// noProducer is the overview's group of the artifacts without a
// producer; the context page's producer filter of that name keeps them
// (producerMatches).
const noProducer = "(none)"

// tally is an overview before its clusters are ranked and merged: every
// key (group value and trust status) with its count and smallest ids,
// and the edges between artifacts of two keys counted by relation. An
// edge counts only when both its ends are artifacts of the state. A tally
// is what can be derived from another commit's through the diff of the
// two; its clusterSet is what a page draws.
type tally struct {
	keys  map[clusterKey]*tallied
	edges map[tallyEdge]int
}

// tallied is one key of a tally.
type tallied struct {
	n int
	// samples are the key's smallest ids in natural order: all n of
	// them while there are at most tallySamples, else the tallySamples
	// first — or, in a derived tally, at least the first
	// min(clusterSamples, n) of them.
	samples []string
}

// tallyEdge is one count of a tally's edges.
type tallyEdge struct {
	from, to clusterKey
	rel      string
}

// keptTally is the tally of a context's state at one commit, kept so
// that the next commit's can be derived from it.
type keptTally struct {
	commit *replay.Commit
	t      *tally
}

// tallyCost is what a kept tally costs, roughly: its entries, their keys'
// strings and its samples.
func tallyCost(k *keptTally) int64 {
	var n int64
	for key, c := range k.t.keys {
		n += 96 + int64(len(key.value)+len(key.status))
		for _, id := range c.samples {
			n += 16 + int64(len(id))
		}
	}
	for e := range k.t.edges {
		n += 96 + int64(len(e.from.value)+len(e.to.value)+len(e.rel))
	}
	return n
}

// clusterKeyOf returns the key of artifact a, whose trust status is
// status, when the overview is grouped by group.
func clusterKeyOf(a *graph.Artifact, status graph.Status, group string) clusterKey {
	k := clusterKey{status: status}
	switch group {
	case "type":
		k.value = a.Type
	case "producer":
		k.value = a.ProducedBy
		if k.value == "" {
			k.value = noProducer
		}
	}
	return k
}

// add counts id, an artifact of the key, keeping the smallest ids.
func (c *tallied) add(id string) {
	m := len(c.samples)
	all := m == c.n
	c.n++
	if !all && (m == 0 || !naturalLess(id, c.samples[m-1])) {
		return
	}
	i, _ := slices.BinarySearchFunc(c.samples, id, compareIDs)
	c.samples = slices.Insert(c.samples, i, id)
	if len(c.samples) > tallySamples {
		c.samples = c.samples[:tallySamples]
	}
}

// merge adds o, the same key counted over other artifacts, to c: the
// counts add, and the smallest ids of both are the smallest of the
// union (each holds its own smallest).
func (c *tallied) merge(o *tallied) {
	c.n += o.n
	if len(o.samples) == 0 {
		return
	}
	samples := append(slices.Clone(c.samples), o.samples...)
	slices.SortFunc(samples, compareIDs)
	c.samples = samples[:min(len(samples), tallySamples)]
}

// remove uncounts id, an artifact of the key. It reports whether the
// samples left still hold the first min(clusterSamples, n) ids: false
// when too many of them left for the next ones to be known.
func (c *tallied) remove(id string) bool {
	c.n--
	if i := slices.Index(c.samples, id); i >= 0 {
		c.samples = slices.Delete(c.samples, i, i+1)
	}
	return c.n >= 0 && len(c.samples) >= min(clusterSamples, c.n)
}

// buildTally counts the tally of st grouped by group, status giving each
// artifact's trust status: one pass over the artifacts — shared by two
// workers, each a half of the id order, over a state map that splits
// them (graph.State.ArtifactHalves) — and one over the edges, shared by
// two workers. Each key gets a number, kept per id, so that the edge
// pass costs one lookup per end (measured: cheaper than looking up each
// end's artifact and trust, and far cheaper than walking 100k small
// out-edge maps).
func buildTally(st *graph.State, status func(id string) graph.Status, group string) *tally {
	arts, mid := st.ArtifactHalves()
	n := st.NumArtifacts()
	sizes, sampleEvery := [2]int{n / 2, n / 2}, 0
	if mid == "" {
		// One pass (the second half is empty), in whatever order the
		// state holds its artifacts, keeping every sampleEvery-th id to
		// split the edges' key order in two (edgeHalves).
		arts[0] = func(yield func(*graph.Artifact) bool) { st.RangeArtifacts(yield) }
		sizes, sampleEvery = [2]int{n, 0}, max(1, n/splitSamples)
	}
	var parts [2]*tallyPart
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() { parts[w] = countTallyArtifacts(arts[w], status, group, sizes[w], sampleEvery) })
	}
	wg.Wait()
	// One numbering of the keys of both halves: each half's own numbers
	// map to it through remap.
	t := &tally{keys: map[clusterKey]*tallied{}}
	byKey := map[clusterKey]int32{}
	var keys []clusterKey
	var remap [2][]int32
	for w, p := range parts {
		for i, k := range p.keys {
			g, ok := byKey[k]
			if !ok {
				g = int32(len(keys))
				byKey[k] = g
				keys = append(keys, k)
				t.keys[k] = &tallied{}
			}
			t.keys[k].merge(p.all[i])
			remap[w] = append(remap[w], g)
		}
	}
	// An edge's end lies in the half its id sorts into.
	of := func(id string) (int32, bool) {
		w := 0
		if mid != "" && id >= mid {
			w = 1
		}
		i, ok := parts[w].of[id]
		if !ok {
			return 0, false
		}
		return remap[w][i], true
	}
	var edges [2]iter.Seq[*graph.Edge]
	if mid != "" {
		edges = st.EdgesAround(mid)
	} else {
		edges = edgeHalves(st, parts[0].sample)
	}
	var counted [2]map[tallyEdge]int
	for w := range edges {
		wg.Go(func() { counted[w] = countTallyEdges(edges[w], of, keys) })
	}
	wg.Wait()
	t.edges = counted[0]
	for e, n := range counted[1] {
		t.edges[e] += n
	}
	return t
}

// tallyPart is what one pass over artifacts counted: each key numbered
// (byKey, keys), its count and smallest ids (all), each artifact's key by
// its number (of), and every sampleEvery-th id (sample).
type tallyPart struct {
	byKey  map[clusterKey]int32
	keys   []clusterKey
	all    []*tallied
	of     map[string]int32
	sample []string
}

// countTallyArtifacts counts the artifacts arts yields, grouped by group,
// for a state of about size of them; with sampleEvery > 0 it also keeps
// every sampleEvery-th id.
func countTallyArtifacts(arts iter.Seq[*graph.Artifact], status func(id string) graph.Status, group string, size, sampleEvery int) *tallyPart {
	p := &tallyPart{byKey: map[clusterKey]int32{}, of: make(map[string]int32, size)}
	for a := range arts {
		if sampleEvery > 0 && len(p.of)%sampleEvery == 0 {
			p.sample = append(p.sample, a.ID)
		}
		k := clusterKeyOf(a, status(a.ID), group)
		i, ok := p.byKey[k]
		if !ok {
			i = int32(len(p.all))
			p.byKey[k] = i
			p.keys = append(p.keys, k)
			p.all = append(p.all, &tallied{})
		}
		p.all[i].add(a.ID)
		p.of[a.ID] = i
	}
	return p
}

// splitSamples is about how many ids buildTally samples to split the
// edges' key order in two.
const splitSamples = 1024

// edgeHalves returns two sequences that together yield every edge of st
// once, for two workers to share the edge pass (the state is only read).
// Over a state map that reads in key order (graph.Ranger) each is one
// half of that order, split at the median of sample (ids of st): each
// edge is read from the map once, where two passes each skipping half
// the edges read every edge twice — at a million edges, a second of
// lookups and decoding. Otherwise (a state in memory, or no sample) each
// takes the edges whose source id ends in a byte of its parity.
func edgeHalves(st *graph.State, sample []string) [2]iter.Seq[*graph.Edge] {
	if _, ok := st.Source().(graph.Ranger); ok && len(sample) > 0 {
		slices.Sort(sample)
		return st.EdgesAround(sample[len(sample)/2])
	}
	var out [2]iter.Seq[*graph.Edge]
	for w := range out {
		out[w] = func(yield func(*graph.Edge) bool) {
			st.RangeEdges(func(e *graph.Edge) bool {
				if len(e.From) == 0 || int(e.From[len(e.From)-1]&1) != w {
					return true
				}
				return yield(e)
			})
		}
	}
	return out
}

// countTallyEdges counts the edges edges yields whose ends are both
// artifacts of the state, by the keys of their ends and their relation:
// of gives each artifact's key by its number in keys. The counts live in a dense
// table while there are few keys (and relations in a short list), so
// that the pass allocates next to nothing; past that, in a map.
func countTallyEdges(edges iter.Seq[*graph.Edge], of func(id string) (int32, bool), keys []clusterKey) map[tallyEdge]int {
	type slot struct{ from, to, rel int32 }
	var rels []string
	var sparse map[slot]int
	var dense [][]int // by from*len(keys)+to, then by relation
	nk := len(keys)
	if nk <= denseKeys {
		dense = make([][]int, nk*nk)
	} else {
		sparse = map[slot]int{}
	}
	for e := range edges {
		from, ok := of(e.From)
		if !ok {
			continue
		}
		to, ok := of(e.To)
		if !ok {
			continue
		}
		ri := slices.Index(rels, e.Rel)
		if ri < 0 {
			ri = len(rels)
			rels = append(rels, e.Rel)
		}
		if dense == nil {
			sparse[slot{from, to, int32(ri)}]++
			continue
		}
		c := dense[int(from)*nk+int(to)]
		for len(c) <= ri {
			c = append(c, 0)
		}
		c[ri]++
		dense[int(from)*nk+int(to)] = c
	}
	out := map[tallyEdge]int{}
	for s, n := range sparse {
		out[tallyEdge{keys[s.from], keys[s.to], rels[s.rel]}] = n
	}
	for i, c := range dense {
		for ri, n := range c {
			if n > 0 {
				out[tallyEdge{keys[i/nk], keys[i%nk], rels[ri]}] = n
			}
		}
	}
	return out
}

// clone returns a copy of t that can be changed without changing t.
func (t *tally) clone() *tally {
	c := &tally{keys: make(map[clusterKey]*tallied, len(t.keys)), edges: make(map[tallyEdge]int, len(t.edges))}
	for k, v := range t.keys {
		c.keys[k] = &tallied{n: v.n, samples: slices.Clone(v.samples)}
	}
	for e, n := range t.edges {
		c.edges[e] = n
	}
	return c
}

// apply changes t, the tally of the state old shows, into that of the
// state cur shows, given d, what differs between the two with trust
// (store.Diff): each artifact d names moves from its key in old to its
// key in cur, and with it the edges touching it; d's edges are added or
// removed. An artifact d does not name has the same key in both. It
// reports false (t is then half changed) when the move of the artifacts
// and edges would take more than budget edges, or a key lost the ids it
// shows: the caller then counts the tally again.
func (t *tally) apply(d *replay.DiffResult, old, cur *store.View, group string, budget int) bool {
	keyIn := func(v *store.View, id string) (clusterKey, bool) {
		a := v.State.Artifact(id)
		if a == nil {
			return clusterKey{}, false
		}
		return clusterKeyOf(a, statusIn(v.Trust, id), group), true
	}
	type ends struct {
		old, cur     clusterKey
		inOld, inCur bool
	}
	named := map[string]*ends{}
	for _, l := range [][]replay.ArtifactChange{d.Added, d.Removed, d.Changed} {
		for _, c := range l {
			named[c.ID] = &ends{}
		}
	}
	for _, c := range d.Trust {
		named[c.ID] = &ends{}
	}
	ids := make([]string, 0, len(named))
	for id := range named {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the same order each time, for the samples' sake
	var moved []string
	for _, id := range ids {
		e := named[id]
		e.old, e.inOld = keyIn(old, id)
		e.cur, e.inCur = keyIn(cur, id)
		if e.inOld == e.inCur && (!e.inOld || e.old == e.cur) {
			continue
		}
		moved = append(moved, id)
		if e.inOld {
			c := t.keys[e.old]
			if c == nil || !c.remove(id) {
				return false
			}
			if c.n == 0 {
				delete(t.keys, e.old)
			}
		}
	}
	for _, id := range moved {
		if e := named[id]; e.inCur {
			c := t.keys[e.cur]
			if c == nil {
				c = &tallied{}
				t.keys[e.cur] = c
			}
			c.add(id)
		}
	}
	// The keys of the ends of edges: named artifacts' as found, any
	// other's (the same in both states) looked up once.
	same := map[string]*ends{}
	endsOf := func(id string) *ends {
		if e := named[id]; e != nil {
			return e
		}
		e := same[id]
		if e == nil {
			e = &ends{}
			e.cur, e.inCur = keyIn(cur, id)
			e.old, e.inOld = e.cur, e.inCur
			same[id] = e
		}
		return e
	}
	ok := true
	bump := func(k graph.EdgeKey, inCur bool, by int) {
		f, to := endsOf(k.From), endsOf(k.To)
		var te tallyEdge
		switch {
		case inCur && f.inCur && to.inCur:
			te = tallyEdge{f.cur, to.cur, k.Rel}
		case !inCur && f.inOld && to.inOld:
			te = tallyEdge{f.old, to.old, k.Rel}
		default:
			return
		}
		n := t.edges[te] + by
		switch {
		case n > 0:
			t.edges[te] = n
		case n == 0:
			delete(t.edges, te)
		default:
			ok = false // only when t was not the tally of old: count again
		}
	}
	seen := map[graph.EdgeKey]bool{}
	for _, e := range d.EdgesRemoved {
		seen[e.Key()] = true
		bump(e.Key(), false, -1)
	}
	for _, e := range d.EdgesAdded {
		seen[e.Key()] = true
		bump(e.Key(), true, 1)
	}
	// The other edges touching a moved artifact are in both states:
	// each moves from its ends' keys in old to their keys in cur.
	for _, id := range moved {
		for _, edges := range [2][]*graph.Edge{cur.State.Out(id), cur.State.In(id)} {
			for _, e := range edges {
				k := e.Key()
				if seen[k] {
					continue
				}
				seen[k] = true
				if budget--; budget < 0 {
					return false
				}
				bump(k, false, -1)
				bump(k, true, 1)
			}
		}
	}
	return ok
}

// statusIn returns the trust status of id, an artifact of tr's state, as
// the overview counts it: an artifact the index does not list is
// confirmed (unconfirmedSet.status).
func statusIn(tr *graph.TrustIndex, id string) graph.Status {
	if st := tr.Status(id); st != "" {
		return st
	}
	return graph.StatusConfirmed
}

// clusterSet ranks t's keys by count into the overview's clusters —
// past maxClusters the smallest merged into one per status — and counts
// the edges between clusters, each depending or not under rels.
func (t *tally) clusterSet(rels graph.Relations) *clusterSet {
	keys := make([]clusterKey, 0, len(t.keys))
	for k := range t.keys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b clusterKey) int {
		if na, nb := t.keys[a].n, t.keys[b].n; na != nb {
			return nb - na
		}
		if c := strings.Compare(a.value, b.value); c != 0 {
			return c
		}
		return strings.Compare(string(a.status), string(b.status))
	})
	final := make(map[clusterKey]int, len(keys))
	cs := &clusterSet{}
	others := map[graph.Status]int{}
	for rank, k := range keys {
		c := t.keys[k]
		shown := c.samples[:min(len(c.samples), clusterSamples)]
		if rank < maxClusters-3 || len(keys) <= maxClusters {
			final[k] = len(cs.clusters)
			cs.clusters = append(cs.clusters, cluster{key: k, n: c.n, samples: slices.Clone(shown)})
			continue
		}
		o, ok := others[k.status]
		if !ok {
			o = len(cs.clusters)
			others[k.status] = o
			cs.clusters = append(cs.clusters, cluster{key: clusterKey{value: otherGroup, status: k.status}, merged: true})
		}
		oc := &cs.clusters[o]
		oc.n += c.n
		oc.parts++
		oc.samples = append(oc.samples, shown...)
		final[k] = o
	}
	// A merged cluster offers the first of its clusters' samples.
	for _, o := range others {
		oc := &cs.clusters[o]
		naturalSort(oc.samples)
		oc.samples = oc.samples[:min(len(oc.samples), clusterSamples)]
	}
	n := len(cs.clusters)
	table := make([]*clusterEdge, n*n*2)
	for e, count := range t.edges {
		from, to, dep := final[e.from], final[e.to], rels.Depends(e.rel)
		slot := (from*n+to)*2 + b2i(dep)
		ce := table[slot]
		if ce == nil {
			ce = &clusterEdge{from: from, to: to, dep: dep, rels: map[string]int{}}
			table[slot] = ce
		}
		ce.n += count
		ce.rels[e.rel] += count
	}
	for _, ce := range table {
		if ce != nil {
			cs.edges = append(cs.edges, ce)
		}
	}
	slices.SortFunc(cs.edges, func(a, b *clusterEdge) int {
		if a.from != b.from {
			return a.from - b.from
		}
		if a.to != b.to {
			return a.to - b.to
		}
		if a.dep == b.dep {
			return 0
		}
		if a.dep {
			return -1
		}
		return 1
	})
	return cs
}

// derivedTally returns the tally of v's state grouped by group from the
// one kept for another commit of v's context and what differs between
// the two commits, trust included (Store.DiffWithin, which reads only
// what differs, and stops once it is too much); false when there is
// none, the two differ by more than 1/deriveShare of the state (their
// artifacts, edges, trust changes and the edges of the artifacts that
// move), or a read fails (the caller then counts the tally over the whole
// state, and fails where it must).
func (s *server) derivedTally(ctx context.Context, v *store.View, group string) (*tally, bool) {
	ctxID := v.ContextID()
	kept, ok := s.tallies.Get(ctxID + "\x00" + group)
	if !ok {
		return nil, false
	}
	if kept.commit.ID == v.Commit.ID {
		return kept.t, true
	}
	most := max(v.Commit.Artifacts, kept.commit.Artifacts) / deriveShare
	d, ok, err := s.store.DiffWithin(ctx, ctxID, kept.commit, v.Commit, most)
	if err != nil {
		s.store.NoteCorruption(err)
		return nil, false
	}
	if !ok {
		return nil, false
	}
	// An edge whose attributes changed (d.EdgesChanged) costs the tally
	// nothing: it counts edges by relation between clusters, not their
	// attributes.
	budget := most - len(d.Added) - len(d.Removed) - len(d.Changed) - len(d.Trust) - len(d.EdgesAdded) - len(d.EdgesRemoved)
	if budget < 0 {
		return nil, false
	}
	t := kept.t.clone()
	err = s.store.ReadSparse(ctx, ctxID, kept.commit, func(old *store.View) error {
		ok = t.apply(d, old, v, group, budget) && old.Err() == nil
		return nil
	})
	if err != nil {
		s.store.NoteCorruption(err)
		return nil, false
	}
	if !ok || v.Err() != nil {
		return nil, false
	}
	s.derivations.Add(1)
	return t, true
}
