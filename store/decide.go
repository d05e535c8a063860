package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// decision is a commit request decided on a branch head as its commit
// group sees it (a headFork): the ops it records, what they change, and
// the state after them — a fork of the group's fork, which takes it only
// once the commit is staged. Nothing is undone when a request is refused
// or its staging fails: the fork is dropped.
type decision struct {
	// next is the state after the commit: a fork of the head fork's state.
	next *graph.State
	// changes are the definitions' changes, then the request's
	// (reqChanges), in the order they were applied.
	changes, reqChanges []graph.Change
	// defs is how many definition puts are recorded before the request's
	// ops; recorded are the ops the commit records (no no-ops).
	defs     int
	recorded []graph.Op
	// mode is the quarantine mode the commit was judged in, and tainted
	// the new dependency edges resting on unconfirmed artifacts (refused
	// in enforce mode, so set only in observe mode).
	mode    string
	tainted []*graph.TaintError
	// trust is a fork of the group's trust index holding the commit's
	// trust changes, taken with next.
	trust *graph.TrustIndex
}

// headFork is a branch head as one commit group sees it: the group
// decides its commits on forks of the head's state and trust index
// (graph.State.Fork), and the head takes them (advance) only once the
// group is durable, so a reader never sees a commit that is not, and a
// refused commit or a failed group leaves the head as it was.
type headFork struct {
	h *head
	// state is a fork of the head's state holding the group's commits on
	// it, nil before the first: that commit's own fork becomes it, so a
	// branch with one commit in the group absorbs its changes once.
	state  *graph.State
	trust  *graph.TrustIndex
	commit *replay.Commit // the group's newest commit on the branch
}

// fork returns the group's view of head h, locked by the group.
func (g *group) fork(h *head) *headFork {
	hf := g.forks[h]
	if hf == nil {
		hf = &headFork{h: h, trust: h.trust.Fork(), commit: h.commit}
		g.forks[h] = hf
	}
	return hf
}

// view returns the state the group's next commit on the branch builds on.
func (hf *headFork) view() *graph.State {
	if hf.state != nil {
		return hf.state
	}
	return hf.h.state
}

// take makes a staged decision part of the group's view of its branch:
// the view's state absorbs d's, its trust index follows, and commit c is
// its newest.
func (hf *headFork) take(d *decision, c *replay.Commit) {
	if hf.state == nil {
		hf.state = d.next
	} else if err := hf.state.Absorb(d.next); err != nil {
		// Only the committer changes a group's forks, one request at a
		// time: a stale fork here is a bug, not a condition to handle.
		panic("store: a commit's fork is not of its group's view: " + err.Error())
	}
	dropPayloads(d.changes)
	if err := hf.trust.Absorb(d.trust); err != nil {
		panic("store: a commit's trust fork is not of its group's view: " + err.Error())
	}
	hf.commit = c
}

// dropPayloads drops the data of the artifacts changes put: it lives in
// the object store, and a head keeps metadata only.
func dropPayloads(changes []graph.Change) {
	for _, ch := range changes {
		if ch.Next != nil {
			ch.Next.Data = nil
		}
	}
}

// advance makes the head, locked by the group, what the group's view of
// it shows; called once the group is durable.
func (hf *headFork) advance() {
	if hf.state == nil {
		return // no commit on the branch in this group
	}
	hf.h.install(hf.state, hf.trust, hf.commit)
}

// install makes h, locked by the caller, the state, trust index and
// commit of a fork of its state and of its trust index. A state no reader
// has pinned absorbs the fork in place; a pinned one stays as it is for
// its readers, and the fork becomes the head's state, layered over it.
// Then the layers whose readers are gone collapse into each other.
func (h *head) install(state *graph.State, trust *graph.TrustIndex, c *replay.Commit) {
	switch {
	case h.pins.Load() == 0:
		absorbInto(h.state, h.trust, state, trust)
	case len(h.layers) >= maxLayers:
		// Reads keep overlapping commits: rather than stack more layers
		// (each lookup walks them all), the head starts afresh — over c's
		// state map when it reads through one (reopen), else as a whole
		// copy of the fork, made by reading the layers only; the readers
		// keep theirs.
		if !h.reopen(state, c) {
			h.state, h.trust = state.Clone(), trust.Clone()
		}
		h.pins, h.layers = new(atomic.Int32), nil
	default:
		h.layers = append(h.layers, pinnedLayer{state: h.state, trust: h.trust, pins: h.pins})
		h.state, h.trust, h.pins = state, trust, new(atomic.Int32)
	}
	h.commit = c
	h.changed += c.NumOps
	h.collapse()
	h.rebase()
	// Readers hash the head's state: its root must be computed now, while
	// the caller holds the head, never lazily under a reader.
	h.state.Hash()
}

// maxLayers bounds how many pinned states a head's state may be layered
// over; a commit that would add one more opens the head again over its
// map instead (O(the context hash's leaves)), or, for a head loaded
// whole, makes it a whole copy (O(state)), only while reads keep
// overlapping commits.

const maxLayers = 4

// collapse absorbs the head's state into the layer below while neither
// has readers, so a head is layered only while long reads last. The
// caller holds the head's write lock.
func (h *head) collapse() {
	for len(h.layers) > 0 && h.pins.Load() == 0 {
		below := h.layers[len(h.layers)-1]
		if below.pins.Load() != 0 {
			return
		}
		absorbInto(below.state, below.trust, h.state, h.trust)
		h.state, h.trust, h.pins = below.state, below.trust, below.pins
		h.layers = h.layers[:len(h.layers)-1]
	}
}

// absorbInto makes state and trust what their forks f and ft show.
func absorbInto(state *graph.State, trust *graph.TrustIndex, f *graph.State, ft *graph.TrustIndex) {
	if err := state.Absorb(f); err != nil {
		panic("store: a group's fork is not of its head: " + err.Error())
	}
	if err := trust.Absorb(ft); err != nil {
		panic("store: a group's trust fork is not of its head: " + err.Error())
	}
}

// decide applies request r to the group's view hf of a branch head and
// judges the result: the parent the request expects, the definitions its
// ops use (recorded first where the head lacks them), the ops themselves
// (validation and cycles), the request's own check and, in enforce mode,
// quarantine. It works on a fork of hf's state and changes neither hf nor
// anything stored: a refused request gets the refusal and leaves nothing
// behind.
func (g *group) decide(hf *headFork, cs *ctxState, r *writeReq) (*decision, error) {
	req := r.commit
	if req.Parent != nil && *req.Parent != hf.commit.ID {
		return nil, fmt.Errorf("%w: parent %s is not the head of %q (head is %s)", ErrStale, req.Parent.Short(), req.Branch, hf.commit.ID.Short())
	}
	next := hf.view().Fork()
	ops := req.Ops
	if req.OpsFrom != nil {
		head := hf.commit
		p := Planning{Head: head,
			Commit: func(id hashing.Digest) (*replay.Commit, error) { return g.commitRecord(req.Context, id) },
			// The group's trie writer sees the nodes of its commits not
			// yet written, and reads the rest from the store.
			DiffFrom: func(c *replay.Commit) (*replay.DiffResult, error) { return rawDiffOver(r.ctx, g.tw, c, head) },
		}
		var err error
		if ops, err = req.OpsFrom(next, p); err != nil {
			return nil, err
		}
	}
	// Definitions the request's ops use, recorded first where the head
	// does not hold them as they are (graph.DefinitionOps).
	defOps, err := graph.DefinitionOps(next, req.Types, req.Relations)
	if err != nil {
		return nil, err
	}
	ops, err = replay.WithDefinitionData(context.Background(), g.s.Source(req.Context), ops)
	if err != nil {
		return nil, err
	}
	d := &decision{next: next, defs: len(defOps)}
	if d.changes, err = next.ApplyOps(defOps); err != nil {
		return nil, fmt.Errorf("record definitions: %w", definitionUser(err, defOps, ops))
	}
	if d.reqChanges, err = next.ApplyOps(ops); err != nil {
		return nil, err
	}
	d.changes = append(d.changes, d.reqChanges...)
	if req.Check != nil {
		if err := req.Check(next, d.reqChanges); err != nil {
			return nil, err
		}
	}
	d.mode = req.Mode
	if d.mode == "" {
		d.mode = cs.info.Quarantine
	}
	// The commit's trust, on a fork of the head's index: a refusal drops
	// it with the rest of the decision.
	d.trust = hf.trust.Fork()
	d.tainted = d.trust.ApplyTainted(next, d.changes)
	for _, te := range d.tainted {
		// Its index counts the request's ops, as every other refusal's
		// does: the definition puts in front are not the writer's.
		te.Index -= d.defs
	}
	if d.mode == ModeEnforce && len(d.tainted) > 0 {
		return nil, d.tainted[0]
	}
	if req.CheckTrust != nil {
		if err := req.CheckTrust(d.trust.Status); err != nil {
			return nil, err
		}
	}
	d.recorded = graph.RecordedOps(d.changes)
	return d, nil
}

// definitionUser locates err, the refusal of one of defOps (a definition
// the chain holds otherwise, such as a role that cannot change), at the
// first of ops that uses the definition: the put of an artifact of the
// type (field /type) or the link of the relation (/rel). The writer never
// sent the definition put, so its own op and field are what a pointer
// can name. Any other error is returned as it is.
func definitionUser(err error, defOps, ops []graph.Op) error {
	var oe *graph.OpError
	if !errors.As(err, &oe) || oe.Index < 0 || oe.Index >= len(defOps) {
		return err
	}
	def := defOps[oe.Index]
	for i, op := range ops {
		switch {
		case def.Type == graph.TypeTypeDef && op.Op == graph.OpPut && def.ID == graph.TypeDefID(op.Type),
			def.Type == graph.TypeRelationDef && op.Op == graph.OpLink && def.ID == graph.RelationDefID(op.Rel):
			field := "/type"
			if op.Op == graph.OpLink {
				field = "/rel"
			}
			return &graph.OpError{Index: i, Field: field, Rule: oe.Rule, Detail: oe.Detail, Err: oe.Err}
		}
	}
	return err
}

// trieMutations are the state-map mutations of changes made by commit,
// whose state is next (a fork holding the commit's changes) and whose
// trust index is trust (a fork holding its trust changes): the final value
// of every key they touched (nil: removed), the index's included — its
// reverse edges only when revInMap (a map of format 3; reverseRecords
// index the others').
func trieMutations(changes []graph.Change, commit hashing.Digest, next *graph.State, trust *graph.TrustIndex, revInMap bool) []trieMut {
	muts := make([]trieMut, 0, 2*len(changes)+1)
	for id := range trust.Changed() {
		muts = append(muts, trustMut(trust, id))
	}
	for _, ch := range changes {
		if ch.Noop {
			continue
		}
		switch ch.Op.Op {
		case graph.OpPut:
			muts = append(muts, mutFor(tkArtifact(ch.Next.ID), encodeArtifactVal(ch.Next, commit)))
			if ch.PrevTombstone != 0 {
				muts = append(muts, mutFor(tkTomb(ch.Next.ID), nil))
			}
		case graph.OpDelete:
			muts = append(muts, mutFor(tkArtifact(ch.Prev.ID), nil), mutFor(tkTomb(ch.Prev.ID), encodeTombVal(ch.Prev.Version)))
		case graph.OpLink:
			k, v := ch.NextEdge.Key(), encodeEdgeVal(ch.NextEdge.Attrs)
			muts = append(muts, mutFor(tkEdge(k), v))
			if revInMap {
				muts = append(muts, mutFor(tkRev(k), v))
			}
		case graph.OpUnlink:
			k := ch.PrevEdge.Key()
			muts = append(muts, mutFor(tkEdge(k), nil))
			if revInMap {
				muts = append(muts, mutFor(tkRev(k), nil))
			}
		}
	}
	return muts
}

// reverseInMap reports whether the state map of a commit onto parent
// keeps its reverse edges in the map: only when parent's does (a map of
// format 3 and the commits after it, so that one map never mixes the
// two). A parent whose map has no index (an empty one, or one written
// before format 3) starts the layout of format 4, with the reverse edges
// apart — unless the store writes as format 3 did (its tests of such
// stores).
func (s *Store) reverseInMap(parent *replay.Commit) bool {
	if parent.Index != nil {
		return !parent.Index.ReverseApart
	}
	return s.writeReverseInMap
}

// newEdges are the keys of the edges that changes link anew (the edge
// was not in the state before): an edge whose attributes change, or one
// unlinked, keeps the reverse-index record it has. The index is a
// superset, read through the map of the state it is read for (a record
// names an edge of that state only when the map holds the edge), so an
// edge is indexed once, not again with every commit that moves it, and
// never rewritten in a versioned structure.
func newEdges(changes []graph.Change) []graph.EdgeKey {
	var keys []graph.EdgeKey
	for _, ch := range changes {
		if !ch.Noop && ch.Op.Op == graph.OpLink && ch.PrevEdge == nil {
			keys = append(keys, ch.NextEdge.Key())
		}
	}
	return keys
}

// reverseRecords are the reverse-index records (keyRev) by which commit
// indexes edges in context ctx: one per artifact they arrive at, its
// edges sorted — a commit linking many artifacts to one hub writes one
// record. They are sorted by key.
func reverseRecords(ctx string, commit hashing.Digest, edges []graph.EdgeKey) []kv.Record {
	if len(edges) == 0 {
		return nil
	}
	byTarget := map[string][]graph.EdgeKey{}
	for _, e := range edges {
		byTarget[e.To] = append(byTarget[e.To], e)
	}
	recs := make([]kv.Record, 0, len(byTarget))
	for _, to := range slices.Sorted(maps.Keys(byTarget)) {
		es := byTarget[to]
		slices.SortFunc(es, compareRev)
		recs = append(recs, kv.Record{Key: keyRev(ctx, to, commit), Value: encodeRevVal(slices.Compact(es))})
	}
	return recs
}

// compareRev orders the edges arriving at one artifact by relation, then
// source.
func compareRev(a, b graph.EdgeKey) int {
	if c := strings.Compare(a.Rel, b.Rel); c != 0 {
		return c
	}
	return strings.Compare(a.From, b.From)
}

// trustMut is the mutation of id's trust entry as trust holds it now: a
// value for an unconfirmed artifact, none for a confirmed or absent one.
func trustMut(trust *graph.TrustIndex, id string) trieMut {
	e, ok := trust.Entry(id)
	if !ok || e.Conf {
		return mutFor(tkTrust(id), nil)
	}
	reason, _ := trust.RootReason(id)
	return mutFor(tkTrust(id), encodeTrustVal(e, reason))
}

// indexMutations are the mutations that add the index of a whole state
// and its trust index to a state map that holds the state only (one
// written before format 3): every trust entry, and every reverse edge
// when revInMap.
func indexMutations(st *graph.State, trust *graph.TrustIndex, revInMap bool) []trieMut {
	var muts []trieMut
	st.RangeArtifacts(func(a *graph.Artifact) bool {
		if e, ok := trust.Entry(a.ID); ok && !e.Conf {
			muts = append(muts, trustMut(trust, a.ID))
		}
		return true
	})
	if revInMap {
		st.RangeEdges(func(e *graph.Edge) bool {
			muts = append(muts, mutFor(tkRev(e.Key()), encodeEdgeVal(e.Attrs)))
			return true
		})
	}
	return muts
}

// typeCounts returns the live artifacts of each type in next, a fork of
// the state at parent holding one commit's changes: parent's counts (its
// record's, or counted afresh in the whole state at parent, under, when
// its map has no index) with the types next changed counted again.
func typeCounts(parent *replay.Commit, under, next *graph.State) map[string]int {
	var counts map[string]int
	if parent.Index != nil {
		counts = maps.Clone(parent.Index.Types)
	}
	if counts == nil {
		counts = map[string]int{}
		if parent.Index == nil {
			under.RangeArtifacts(func(a *graph.Artifact) bool { counts[a.Type]++; return true })
		}
	}
	for _, typ := range next.TouchedTypes() {
		if n := next.TypeCount(typ); n > 0 {
			counts[typ] = n
		} else {
			delete(counts, typ)
		}
	}
	return counts
}
