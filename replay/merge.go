package replay

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// Errors of a merge.
var (
	// ErrConflict marks a merge refused because of unresolved conflicts;
	// the error is a *ConflictError listing every one of them.
	ErrConflict = errors.New("merge conflict")
	// ErrResolution marks a resolution that cannot settle its conflict
	// (an unknown choice, a value for a cycle, data that is not a JSON
	// object).
	ErrResolution = errors.New("invalid resolution")
	// ErrNoMergeBase marks two commits that share no ancestor.
	ErrNoMergeBase = errors.New("no merge base")
)

// ---- merge base ----

// MergeBase returns the best common ancestor of commits a and b: among
// their common ancestors, the one with the highest Seq (which no other
// common ancestor descends from), the smaller id on a tie. It walks back
// from both commits in descending Seq order and stops at the first commit
// reached from both, so it reads only the commits since the base. Two
// commits may have several best common ancestors (a criss-cross);
// MergeBases returns them all. Errors: ErrNoMergeBase, or a *ChainError
// for a missing or misordered commit.
func MergeBase(ctx context.Context, src Source, a, b hashing.Digest) (*Commit, error) {
	bases, err := mergeBases(ctx, src, []hashing.Digest{a, b}, false)
	if err != nil {
		return nil, err
	}
	return bases[0], nil
}

// MergeBases returns every best common ancestor of commits a and b — the
// common ancestors none of which another common ancestor descends from —
// highest Seq first, the smaller id on a tie; the first is MergeBase's.
// Two commits have more than one after a criss-cross: each side merged
// the other's commit, so two merge commits each have both commits as
// parents. It walks as MergeBase does and, once it has found the first,
// goes on only while a commit reached from a but from no base so far and
// one reached likewise from b are both still to visit: when the first
// base is the only one and the two sides meet only through it, it reads
// no more commits than MergeBase. Errors are MergeBase's.
func MergeBases(ctx context.Context, src Source, a, b hashing.Digest) ([]*Commit, error) {
	return mergeBases(ctx, src, []hashing.Digest{a, b}, true)
}

// MergeBasesOf returns the best common ancestors of every commit of ids
// (at least one, at most 62): the commits every one of them descends
// from (or is) that no other such commit descends from, highest Seq
// first, the smaller id on a tie. Of two commits it is MergeBases. Of
// the merge bases of a criss-cross, it finds their own merge base: when
// that is one commit, the ancestor MergeOver merges them against.
// Errors are MergeBase's.
func MergeBasesOf(ctx context.Context, src Source, ids ...hashing.Digest) ([]*Commit, error) {
	if len(ids) == 0 || len(ids) > maxSides {
		return nil, fmt.Errorf("replay: merge bases of %d commits (1 to %d)", len(ids), maxSides)
	}
	return mergeBases(ctx, src, ids, true)
}

// maxSides is how many commits mergeBases walks back from at most: one
// bit of a flag each, beside stale and visited.
const maxSides = 62

// mergeBases walks back from ids in descending Seq order, marking each
// commit with the sides it is reached from. A commit reached from all is
// a common ancestor; the first one visited is a best one, and so is every
// later one not reached through a common ancestor visited before
// (stale): Seq orders every commit after its descendants, so a commit's
// marks are final when it is visited. With all false it stops at the
// first.
func mergeBases(ctx context.Context, src Source, ids []hashing.Digest, all bool) ([]*Commit, error) {
	const stale, visited = 1 << 62, 1 << 63
	every := uint64(1)<<len(ids) - 1
	flags := map[hashing.Digest]uint64{}
	q := &commitQueue{}
	// live counts, per side, the commits still to visit that are not
	// stale and are reached from that side: a further best common
	// ancestor needs one of each.
	live := make([]int, len(ids))
	count := func(f uint64, d int) {
		if f&(stale|visited) != 0 {
			return
		}
		for i := range live {
			if f&(1<<i) != 0 {
				live[i] += d
			}
		}
	}
	drained := func() bool { return slices.Contains(live, 0) }
	push := func(id hashing.Digest, flag uint64, child *Commit) error {
		if old, seen := flags[id]; seen {
			count(old, -1)
			flags[id] = old | flag
			count(old|flag, 1)
			return nil
		}
		c, err := src.GetCommit(ctx, id)
		if err != nil {
			return &ChainError{Commit: id, Reason: "cannot read the commit: " + err.Error(), Err: err}
		}
		if child != nil && c.Seq >= child.Seq {
			return &ChainError{Commit: child.ID, Seq: child.Seq, Reason: fmt.Sprintf("parent %s has seq %d, not below %d", id.Short(), c.Seq, child.Seq)}
		}
		flags[id] = flag
		count(flag, 1)
		heap.Push(q, c)
		return nil
	}
	for i, id := range ids {
		if err := push(id, 1<<i, nil); err != nil {
			return nil, err
		}
	}
	var bases []*Commit
	for q.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(bases) > 0 && drained() {
			break // what is left to visit is stale, or not reached from every side
		}
		c := heap.Pop(q).(*Commit)
		f := flags[c.ID]
		count(f, -1)
		flags[c.ID] = f | visited
		if f&(every|stale) == every {
			bases = append(bases, c)
			if !all || drained() {
				return bases, nil
			}
			f |= stale
		}
		for _, p := range c.Parents {
			if err := push(p, f&(every|stale), c); err != nil {
				return nil, err
			}
		}
	}
	if len(bases) > 0 {
		return bases, nil
	}
	if len(ids) == 2 {
		return nil, fmt.Errorf("%w: %s and %s share no ancestor", ErrNoMergeBase, ids[0].Short(), ids[1].Short())
	}
	return nil, fmt.Errorf("%w: %d commits share no ancestor", ErrNoMergeBase, len(ids))
}

// commitQueue pops the highest Seq first, the smaller id on a tie.
type commitQueue []*Commit

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if q[i].Seq != q[j].Seq {
		return q[i].Seq > q[j].Seq
	}
	return bytes.Compare(q[i].ID[:], q[j].ID[:]) < 0
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(*Commit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// MergeKind says what merging theirs into ours amounts to.
type MergeKind string

// The kinds of merge.
const (
	// MergeUpToDate: theirs is ours or one of its ancestors (it has no
	// change since the base); nothing to do.
	MergeUpToDate MergeKind = "up_to_date"
	// MergeFastForward: ours is an ancestor of theirs; ours' branch moves
	// to theirs, no merge commit.
	MergeFastForward MergeKind = "fast_forward"
	// MergeThreeWay: both sides changed since the base; a merge commit with
	// parents ours and theirs records the merged ops.
	MergeThreeWay MergeKind = "merge"
)

// MergeSetup is the commit-level answer to "merge theirs into ours".
type MergeSetup struct {
	Kind MergeKind
	// Base is the merge base: the best common ancestor with the highest
	// Seq (MergeBase).
	Base *Commit
	// Bases are every best common ancestor (MergeBases), Base first: more
	// than one after a criss-cross, and then the merge is three-way and
	// merges against them all (MergeOver).
	Bases []*Commit
	// Ancestor is the merge base of Bases when there are several and
	// they have one (MergeBasesOf): the merge merges the bases against
	// it into a virtual base (MergeOver). Nil otherwise.
	Ancestor *Commit
	Ours     *Commit
	Theirs   *Commit
}

// PrepareMerge reads ours, theirs and their merge bases and classifies
// the merge. When there are several merge bases it also walks back from
// them to their own merge base (Ancestor, when it is one commit); with
// one it reads nothing more. Errors are MergeBase's.
func PrepareMerge(ctx context.Context, src Source, ours, theirs hashing.Digest) (*MergeSetup, error) {
	o, err := src.GetCommit(ctx, ours)
	if err != nil {
		return nil, &ChainError{Commit: ours, Reason: "cannot read the commit: " + err.Error(), Err: err}
	}
	t, err := src.GetCommit(ctx, theirs)
	if err != nil {
		return nil, &ChainError{Commit: theirs, Reason: "cannot read the commit: " + err.Error(), Err: err}
	}
	bases, err := MergeBases(ctx, src, ours, theirs)
	if err != nil {
		return nil, err
	}
	base := bases[0]
	ms := &MergeSetup{Kind: MergeThreeWay, Base: base, Bases: bases, Ours: o, Theirs: t}
	switch base.ID {
	case theirs:
		ms.Kind = MergeUpToDate
	case ours:
		ms.Kind = MergeFastForward
	}
	if len(bases) > 1 {
		ids := make([]hashing.Digest, len(bases))
		for i, b := range bases {
			ids[i] = b.ID
		}
		anc, err := MergeBasesOf(ctx, src, ids...)
		switch {
		case errors.Is(err, ErrNoMergeBase):
			// No virtual base: the bases disagree without one.
		case err != nil:
			return nil, err
		case len(anc) == 1:
			ms.Ancestor = anc[0]
		}
	}
	return ms, nil
}

// ---- conflicts and resolutions ----

// ConflictKind names what two sides of a merge disagree about.
type ConflictKind string

// The kinds of conflict.
const (
	// ConflictEditEdit: both sides changed (or both added) one artifact,
	// differently.
	ConflictEditEdit ConflictKind = "edit_edit"
	// ConflictDeleteEdit: one side deleted an artifact the other changed.
	ConflictDeleteEdit ConflictKind = "delete_edit"
	// ConflictEdgeAttrs: both sides have an edge, with different attrs.
	ConflictEdgeAttrs ConflictKind = "edge_attrs"
	// ConflictEdgeDeleteEdit: one side removed an edge whose attrs the
	// other changed.
	ConflictEdgeDeleteEdit ConflictKind = "edge_delete_edit"
	// ConflictDanglingEdge: one side deleted an artifact that edges of the
	// other side still point to or from.
	ConflictDanglingEdge ConflictKind = "dangling_edge"
	// ConflictCycle: the merged dependency edges close a cycle, though
	// each side alone is acyclic.
	ConflictCycle ConflictKind = "cycle"
)

// EdgeSide is an edge as one side of a merge has it.
type EdgeSide struct {
	Attrs json.RawMessage `json:"attrs,omitempty"`
}

// Conflict is one disagreement of a merge, with what the base and each
// side have. Key identifies it for a Resolution, and no two conflicts of
// a merge share one: the artifact id for edit_edit, delete_edit and
// dangling_edge; "edge:" + "from -rel-> to" for edge conflicts; "cycle:" +
// the edge that closes the cycle — escaped where an id would make that
// ambiguous (ArtifactKey, EdgeConflictKey, CycleKey; ParseKey reads one).
type Conflict struct {
	Key  string       `json:"key"`
	Kind ConflictKind `json:"kind"`
	// ID is the artifact of an artifact or dangling_edge conflict.
	ID string `json:"id,omitempty"`
	// Edge is the edge of an edge or cycle conflict.
	Edge *graph.EdgeKey `json:"edge,omitempty"`
	// BasesDisagree is set when the merge has several merge bases (a
	// criss-cross, MergeOver) and they disagree on the artifact or edge
	// with no virtual base for it (two bases changed it differently
	// since their own merge base, or they have no single one): it has no
	// base, and Base and BaseEdge are nil.
	BasesDisagree bool `json:"bases_disagree,omitempty"`
	// Base, Ours and Theirs are the artifact on each side (nil where
	// absent).
	Base   *ArtifactVersion `json:"base,omitempty"`
	Ours   *ArtifactVersion `json:"ours,omitempty"`
	Theirs *ArtifactVersion `json:"theirs,omitempty"`
	// BaseEdge, OursEdge and TheirsEdge are the edge on each side (nil
	// where absent).
	BaseEdge   *EdgeSide `json:"base_edge,omitempty"`
	OursEdge   *EdgeSide `json:"ours_edge,omitempty"`
	TheirsEdge *EdgeSide `json:"theirs_edge,omitempty"`
	// DeletedBy ("ours" or "theirs") is the side that deleted the artifact
	// of a dangling_edge conflict; Edges are the other side's edges that
	// would lose an end.
	DeletedBy string          `json:"deleted_by,omitempty"`
	Edges     []graph.EdgeKey `json:"edges,omitempty"`
	// Cycle lists the ids around a cycle, first and last the same.
	Cycle []string `json:"cycle,omitempty"`
	// Detail says it in a sentence.
	Detail string `json:"detail"`
}

// ConflictError lists every unresolved conflict of a merge, sorted by key.
type ConflictError struct {
	Conflicts []Conflict
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d merge conflict(s)", len(e.Conflicts))
	for i, c := range e.Conflicts {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Conflicts)-5)
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s (%s)", sep, c.Key, c.Kind)
	}
	return b.String()
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// The choices of a Resolution.
const (
	TakeOurs   = "ours"
	TakeTheirs = "theirs"
)

// Resolution settles one conflict: Take "ours" or "theirs" keeps that
// side's version of everything the conflict is about; a Value replaces it.
// For an artifact (edit_edit, delete_edit, dangling_edge) Value is the new
// data object, written as a new version above both sides' with Type and
// ProducedBy (ours' when empty, else theirs'); for an edge conflict it is
// the attrs object of the merged edge. A cycle takes no Value: "ours"
// drops the edge from theirs that closes it, "theirs" keeps that edge and
// drops ours' edges that theirs lacks along every cycle it closes.
type Resolution struct {
	Take       string          `json:"take,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Type       string          `json:"type,omitempty"`
	ProducedBy string          `json:"produced_by,omitempty"`
}

// ---- the merge ----

// MergePlan is the outcome of a conflict-free (or fully resolved) merge:
// the ops to commit on ours, with theirs' head as the extra parent.
type MergePlan struct {
	// Ops are the merged changes in a fixed order (unlinks, deletes, puts,
	// links; each sorted) with explicit versions; puts of resolved values
	// carry Data, puts taken from theirs carry theirs' Data when it was
	// loaded (its content hash always).
	Ops []graph.Op `json:"ops"`
	// Resolved lists the conflicts the resolutions settled, sorted by key.
	Resolved []Conflict `json:"resolved"`
	// Unused lists resolution keys that matched no conflict, sorted.
	Unused []string `json:"unused,omitempty"`
	// ContextHash is the hash of the merged state.
	ContextHash hashing.Digest `json:"context_hash"`
	// State is the merged state: a fork of ours with Ops applied
	// (graph.State.Fork), valid while ours does not change.
	State *graph.State `json:"-"`
}

// Merge merges theirs into ours against their merge base: a change made on
// one side only is taken; the same change made on both sides (the same
// type, content and producer, whatever the versions) is taken once; an
// artifact changed differently on both sides, deleted on one side and
// changed on the other, an edge whose attrs differ, edges of one side to an
// artifact the other deleted, and merged dependency edges that close a
// cycle are conflicts. Unless resolutions settle every conflict, Merge
// returns a *ConflictError listing all of them and nothing else. It never
// modifies its arguments and is deterministic: the same states and
// resolutions give the same ops.
//
// Versions are explicit: an artifact taken from theirs keeps theirs'
// version when it is above ours' last version (live or deleted), otherwise
// it gets ours' last + 1; a resolved value gets the higher of both sides'
// last versions + 1. A resolution that keeps one side of a delete_edit or
// dangling_edge conflict with the artifact deleted drops the other side's
// edges to it (and settles their edge conflicts). Errors: *ConflictError
// (ErrConflict), ErrResolution.
//
// Merge visits every artifact and edge of the three states; MergeWithin
// visits only those a MergeScope names.
func Merge(base, ours, theirs *graph.State, resolutions map[string]Resolution) (*MergePlan, error) {
	return MergeWithin(base, ours, theirs, wholeScope(base, ours, theirs), resolutions)
}

// MergeOver is Merge against several merge bases: the best common
// ancestors of a criss-cross (MergeBases), none of which descends from
// another, and ancestor, their own merge base (MergeBasesOf) when they
// have one, else nil. Which of the bases has the higher Seq does not
// matter. An artifact or edge on which the bases all agree (the same
// type, content and producer; the same attrs; or absent from all) is
// merged against that, as Merge does. One on which they disagree is
// merged against a virtual base, as git's recursive merge merges the
// bases first: the bases that hold it as ancestor does left it
// unchanged, and when every other base changed it to the same (added,
// edited or deleted it alike), that is its base. So an artifact one
// branch added before the cross merges and edits or deletes after them
// merges cleanly. When two bases changed it differently, or there is no
// ancestor (the bases have several merge bases of their own: a nested
// criss-cross), it has no base: the sides take it once when they have
// the same, and are a conflict when they differ — an edit_edit, or a
// delete_edit when one side lacks it — marked BasesDisagree, with no
// Base, settled by a Resolution as any other. So two sides that settled
// an earlier conflict differently conflict again rather than one of the
// settlements winning by commit order. With one base it is Merge
// (ancestor is not read).
func MergeOver(bases []*graph.State, ancestor, ours, theirs *graph.State, resolutions map[string]Resolution) (*MergePlan, error) {
	return MergeOverWithinData(bases, ancestor, ours, theirs, wholeScope(append(slices.Clone(bases), ours, theirs)...), resolutions, nil)
}

// wholeScope is the scope of every artifact and edge of states, with the
// repeats MergeWithin drops.
func wholeScope(states ...*graph.State) MergeScope {
	var sc MergeScope
	for _, st := range states {
		sc.IDs = append(sc.IDs, st.ArtifactIDs()...)
		for _, e := range st.Edges() {
			sc.Edges = append(sc.Edges, e.Key())
		}
	}
	return sc
}

// MergeScope names the artifacts and edges a merge looks at. It must
// hold every artifact id and edge whose record differs between the base
// and ours or between the base and theirs — anything else is the same on
// all three sides and changes nothing — and may hold more; order and
// repeats do not matter. ScopeOf builds one from the two sides' diffs.
// Over several bases (MergeOverWithinData) it must also hold what differs
// between the bases: with the diffs from one base to ours, to theirs and
// to each other base.
type MergeScope struct {
	IDs   []string
	Edges []graph.EdgeKey
}

// ScopeOf returns the scope of a merge from the diffs base → ours and
// base → theirs: the artifacts and edges either of them adds, removes or
// changes.
func ScopeOf(diffs ...*DiffResult) MergeScope {
	var sc MergeScope
	for _, d := range diffs {
		for _, l := range [][]ArtifactChange{d.Added, d.Removed, d.Changed} {
			for _, c := range l {
				sc.IDs = append(sc.IDs, c.ID)
			}
		}
		for _, l := range [][]EdgeChange{d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged} {
			for _, c := range l {
				sc.Edges = append(sc.Edges, c.Key())
			}
		}
	}
	return sc
}

// sorted returns the scope's ids and edges sorted, without repeats.
func (sc MergeScope) sorted() ([]string, []graph.EdgeKey) {
	ids := slices.Clone(sc.IDs)
	sort.Strings(ids)
	edges := slices.Clone(sc.Edges)
	sort.Slice(edges, func(i, j int) bool { return edgeKeyLess(edges[i], edges[j]) })
	return slices.Compact(ids), slices.Compact(edges)
}

// MergeWithin is Merge looking only at the artifacts and edges scope
// names (see MergeScope): given the two sides' diffs against the base, a
// merge reads what changed, not the states (the store's merge, whose
// states are read through their state maps). With a scope that holds
// what it must, it returns what Merge returns.
func MergeWithin(base, ours, theirs *graph.State, scope MergeScope, resolutions map[string]Resolution) (*MergePlan, error) {
	return MergeWithinData(base, ours, theirs, scope, resolutions, nil)
}

// MergeWithinData is MergeWithin for a theirs state that may not hold its
// artifacts' data (a state read through its map): data reads the data of
// the definitions (graph.IsDefinitionType) the merge takes from theirs,
// which the merged ops must carry; a failed read fails the merge. With
// data nil it is MergeWithin.
func MergeWithinData(base, ours, theirs *graph.State, scope MergeScope, resolutions map[string]Resolution, data graph.DataFunc) (*MergePlan, error) {
	return MergeOverWithinData([]*graph.State{base}, nil, ours, theirs, scope, resolutions, data)
}

// MergeOverWithinData is MergeWithinData against several merge bases, as
// MergeOver merges: scope must also hold what differs between the bases
// (see MergeScope). With the scope it must hold it returns what MergeOver
// returns, and with one base what MergeWithinData does. bases must not be
// empty. Of ancestor it reads only the artifacts and edges the bases
// disagree on, each by a point lookup.
func MergeOverWithinData(bases []*graph.State, ancestor, ours, theirs *graph.State, scope MergeScope, resolutions map[string]Resolution, data graph.DataFunc) (*MergePlan, error) {
	if len(bases) == 0 {
		return nil, errors.New("replay: a merge needs a merge base")
	}
	m := &merger{base: bases[0], others: bases[1:], bases: bases, ours: ours, theirs: theirs, res: resolutions, data: data, ancestor: ancestor,
		used:    map[string]bool{},
		art:     map[string]*artOutcome{},
		edge:    map[graph.EdgeKey]*edgeOutcome{},
		pending: map[string]*Conflict{}}
	ids, edges := scope.sorted()
	m.mergeArtifacts(ids)
	m.mergeEdges(edges)
	m.checkDangling()
	m.checkCycles()
	if len(m.errs) > 0 {
		return nil, errors.Join(m.errs...)
	}
	if len(m.pending) > 0 {
		return nil, &ConflictError{Conflicts: sortedConflicts(m.pending)}
	}
	return m.plan()
}

// artOutcome is what the merge does to one artifact of ours.
type artOutcome struct {
	op *graph.Op // put or delete; nil keeps ours
	// undecided marks an unresolved artifact conflict: present or absent.
	undecided bool
	// deletedBy is set ("ours"/"theirs") when the artifact ends absent
	// because that side deleted it and the other did not touch it. An
	// artifact that ends absent without it was deleted by a resolution,
	// and its edges go with it.
	deletedBy string
}

// edgeOutcome is what the merge does to one edge of ours.
type edgeOutcome struct {
	op        *graph.Op // link or unlink; nil keeps ours
	undecided bool
	conflict  string // key of its unresolved edge conflict
}

type merger struct {
	base, ours, theirs *graph.State
	res                map[string]Resolution
	used               map[string]bool
	art                map[string]*artOutcome
	edge               map[graph.EdgeKey]*edgeOutcome
	pending            map[string]*Conflict
	resolved           []Conflict
	errs               []error
	// added holds, per source id, the dependency edges the merge may add
	// to ours (set by checkCycles).
	added map[string][]graph.EdgeKey
	// rels are the relations of the merged state: ours', and those whose
	// definitions the merge puts (set by checkCycles).
	rels graph.Relations
	// data reads the data of theirs' definitions when theirs does not
	// hold it (MergeWithinData); nil when it does.
	data graph.DataFunc
	// others are the merge bases beside base, when there are several
	// (MergeOver).
	others []*graph.State
	// bases are base and others, in order.
	bases []*graph.State
	// ancestor is the merge base of the bases, when there are several and
	// they have one (MergeOver); nil otherwise.
	ancestor *graph.State
}

// resolution returns the resolution for key, marking it used.
func (m *merger) resolution(key string) (Resolution, bool) {
	r, ok := m.res[key]
	if ok {
		m.used[key] = true
	}
	return r, ok
}

func (m *merger) badResolution(key, format string, a ...any) {
	m.errs = append(m.errs, fmt.Errorf("%w for %q: %s", ErrResolution, key, fmt.Sprintf(format, a...)))
}

func sameArtifact(a, b *graph.Artifact) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameArtifactMeta(a, b)
}

func sameEdge(a, b *graph.Edge) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return bytes.Equal(a.Attrs, b.Attrs)
}

// takeTheirs returns the op that makes ours' artifact id equal theirs'.
func (m *merger) takeTheirs(id string, t *graph.Artifact) *graph.Op {
	if t == nil {
		return &graph.Op{Op: graph.OpDelete, ID: id}
	}
	v := t.Version
	if last := m.ours.LastVersion(id); v <= last {
		v = last + 1
	}
	data := t.Data
	if data == nil && graph.IsDefinitionType(t.Type) && m.data != nil {
		// A definition's put carries its data: ours learns the type or
		// relation from it.
		got, err := m.data([]*graph.Artifact{t})
		if err != nil {
			m.errs = append(m.errs, fmt.Errorf("replay: read definition %q: %w", id, err))
		} else {
			data = got[0]
		}
	}
	return &graph.Op{Op: graph.OpPut, ID: id, Type: t.Type, Version: v, ContentHash: t.ContentHash, ProducedBy: t.ProducedBy, Data: data}
}

// valueOp returns the put of a resolved value for artifact id.
func (m *merger) valueOp(key, id string, r Resolution, o, t *graph.Artifact) *graph.Op {
	data, err := hashing.CanonicalizeObject(r.Value)
	if err != nil {
		m.badResolution(key, "value must be a JSON object: %v", err)
		return nil
	}
	typ, by := r.Type, r.ProducedBy
	for _, a := range []*graph.Artifact{o, t} {
		if a != nil && typ == "" {
			typ = a.Type
		}
		if a != nil && by == "" {
			by = a.ProducedBy
		}
	}
	if typ == "" {
		m.badResolution(key, "a value for an artifact neither side has needs a type")
		return nil
	}
	v := max(m.ours.LastVersion(id), m.theirs.LastVersion(id)) + 1
	return &graph.Op{Op: graph.OpPut, ID: id, Type: typ, Version: v, ContentHash: hashing.ContentHash(data), ProducedBy: by, Data: data}
}

// baseArtifact returns artifact id as the merge bases agree it is (nil:
// absent), or false when they disagree and have no virtual base for it
// (mergeBaseOf). Of bases that agree, the version is the highest they
// hold, whichever base that is.
func (m *merger) baseArtifact(id string) (*graph.Artifact, bool) {
	return mergeBaseOf(m, func(st *graph.State) *graph.Artifact { return st.Artifact(id) }, sameArtifact,
		func(a, b *graph.Artifact) bool { return a.Version > b.Version })
}

// baseEdge returns edge k as the merge bases agree it is (nil: absent),
// or false when they disagree and have no virtual base for it
// (mergeBaseOf).
func (m *merger) baseEdge(k graph.EdgeKey) (*graph.Edge, bool) {
	return mergeBaseOf(m, func(st *graph.State) *graph.Edge { return st.Edge(k) }, sameEdge, nil)
}

// mergeBaseOf returns one artifact or edge (get reads it from a state)
// as m's merge bases agree it is, by same (nil: absent), the newest of
// them by newer (nil: any). When they disagree it is the virtual base:
// what every base that changed it since their own merge base (ancestor)
// changed it to, the newest of them; or false when two of them changed
// it differently, or there is no ancestor.
func mergeBaseOf[T any](m *merger, get func(*graph.State) *T, same func(a, b *T) bool, newer func(a, b *T) bool) (*T, bool) {
	b := get(m.base)
	for _, st := range m.others {
		x := get(st)
		if !same(x, b) {
			return virtualBaseOf(m, get, same, newer)
		}
		if newer != nil && x != nil && newer(x, b) {
			b = x
		}
	}
	return b, true
}

// virtualBaseOf is mergeBaseOf's answer when the bases disagree.
func virtualBaseOf[T any](m *merger, get func(*graph.State) *T, same func(a, b *T) bool, newer func(a, b *T) bool) (*T, bool) {
	if m.ancestor == nil {
		return nil, false
	}
	anc := get(m.ancestor)
	var v *T
	changed := false
	for _, st := range m.bases {
		x := get(st)
		switch {
		case same(x, anc):
			// Unchanged since the ancestor.
		case !changed:
			v, changed = x, true
		case !same(x, v):
			return nil, false
		case newer != nil && x != nil && newer(x, v):
			v = x
		}
	}
	return v, changed
}

func (m *merger) mergeArtifacts(ids []string) {
	for _, id := range ids {
		o, t := m.ours.Artifact(id), m.theirs.Artifact(id)
		b, known := m.baseArtifact(id)
		switch {
		case sameArtifact(o, t):
			continue // the same on both sides
		case !known:
			// The bases disagree, with no virtual base: a conflict,
			// whatever the sides did.
		case sameArtifact(t, b):
			if o == nil {
				m.art[id] = &artOutcome{deletedBy: TakeOurs} // only ours deleted it
			}
			continue
		case sameArtifact(o, b):
			out := &artOutcome{op: m.takeTheirs(id, t)}
			if t == nil {
				out.deletedBy = TakeTheirs
			}
			m.art[id] = out
			continue
		}
		key := ArtifactKey(id)
		c := Conflict{Key: key, Kind: ConflictEditEdit, ID: id, BasesDisagree: !known, Base: versionOf(b), Ours: versionOf(o), Theirs: versionOf(t)}
		switch {
		case !known:
			if o == nil || t == nil {
				c.Kind = ConflictDeleteEdit
			}
			c.Detail = fmt.Sprintf("the merge bases disagree on %q, and the sides differ", id)
		case o == nil:
			c.Kind, c.Detail = ConflictDeleteEdit, fmt.Sprintf("ours deleted %q, theirs changed it", id)
		case t == nil:
			c.Kind, c.Detail = ConflictDeleteEdit, fmt.Sprintf("theirs deleted %q, ours changed it", id)
		case b == nil:
			c.Detail = fmt.Sprintf("both sides added %q, differently", id)
		default:
			c.Detail = fmt.Sprintf("both sides changed %q, differently", id)
		}
		r, ok := m.resolution(key)
		if !ok {
			m.art[id] = &artOutcome{undecided: true}
			m.pending[key] = &c
			continue
		}
		out := &artOutcome{}
		switch {
		case r.Value != nil:
			out.op = m.valueOp(key, id, r, o, t)
		case r.Take == TakeOurs:
		case r.Take == TakeTheirs:
			out.op = m.takeTheirs(id, t)
		default:
			m.badResolution(key, "take must be %q or %q, or give a value", TakeOurs, TakeTheirs)
		}
		m.art[id] = out
		m.resolved = append(m.resolved, c)
	}
}

// present reports whether artifact id may exist after the merge: it does,
// or an unresolved conflict leaves it open.
func (m *merger) present(id string) bool {
	if out := m.art[id]; out != nil {
		if out.undecided {
			return true
		}
		if out.op != nil {
			return out.op.Op == graph.OpPut
		}
	}
	return m.ours.Artifact(id) != nil
}

func edgeSide(e *graph.Edge) *EdgeSide {
	if e == nil {
		return nil
	}
	return &EdgeSide{Attrs: e.Attrs}
}

// edgeTo returns the op that makes ours' edge k equal e (nil: absent).
func edgeTo(k graph.EdgeKey, e *graph.Edge) *graph.Op {
	if e == nil {
		return &graph.Op{Op: graph.OpUnlink, From: k.From, Rel: k.Rel, To: k.To}
	}
	return &graph.Op{Op: graph.OpLink, From: k.From, Rel: k.Rel, To: k.To, Attrs: e.Attrs}
}

func (m *merger) mergeEdges(keys []graph.EdgeKey) {
	for _, k := range keys {
		o, t := m.ours.Edge(k), m.theirs.Edge(k)
		b, known := m.baseEdge(k)
		switch {
		case sameEdge(o, t):
			continue
		case !known:
			// The bases disagree, with no virtual base: a conflict,
			// whatever the sides did.
		case sameEdge(t, b):
			continue
		case sameEdge(o, b):
			m.edge[k] = &edgeOutcome{op: edgeTo(k, t)}
			continue
		}
		key := EdgeConflictKey(k)
		kc := k
		c := Conflict{Key: key, Kind: ConflictEdgeAttrs, Edge: &kc, BasesDisagree: !known, BaseEdge: edgeSide(b), OursEdge: edgeSide(o), TheirsEdge: edgeSide(t)}
		switch {
		case !known:
			if o == nil || t == nil {
				c.Kind = ConflictEdgeDeleteEdit
			}
			c.Detail = fmt.Sprintf("the merge bases disagree on edge %s, and the sides differ", k)
		case o == nil:
			c.Kind, c.Detail = ConflictEdgeDeleteEdit, fmt.Sprintf("ours removed edge %s, theirs changed its attrs", k)
		case t == nil:
			c.Kind, c.Detail = ConflictEdgeDeleteEdit, fmt.Sprintf("theirs removed edge %s, ours changed its attrs", k)
		default:
			c.Detail = fmt.Sprintf("edge %s has different attrs on each side", k)
		}
		r, ok := m.resolution(key)
		if !ok {
			m.edge[k] = &edgeOutcome{undecided: true, conflict: key}
			m.pending[key] = &c
			continue
		}
		out := &edgeOutcome{}
		switch {
		case r.Value != nil:
			attrs, err := hashing.CanonicalizeObject(r.Value)
			if err != nil {
				m.badResolution(key, "value must be a JSON attrs object: %v", err)
				break
			}
			out.op = edgeTo(k, &graph.Edge{Attrs: attrs})
		case r.Take == TakeOurs:
		case r.Take == TakeTheirs:
			out.op = edgeTo(k, t)
		default:
			m.badResolution(key, "take must be %q or %q, or give a value", TakeOurs, TakeTheirs)
		}
		m.edge[k] = out
		m.resolved = append(m.resolved, c)
	}
}

// edgePresent reports whether edge k may exist after the merge.
func (m *merger) edgePresent(k graph.EdgeKey) bool {
	if out := m.edge[k]; out != nil {
		if out.undecided {
			return true
		}
		if out.op != nil {
			return out.op.Op == graph.OpLink
		}
	}
	return m.ours.Edge(k) != nil
}

// dropEdge makes edge k absent after the merge, settling its edge
// conflict if it had one.
func (m *merger) dropEdge(k graph.EdgeKey) {
	out := m.edge[k]
	if out != nil && out.conflict != "" {
		delete(m.pending, out.conflict)
	}
	if m.ours.Edge(k) != nil {
		m.edge[k] = &edgeOutcome{op: edgeTo(k, nil)}
	} else {
		delete(m.edge, k)
	}
}

// checkDangling finds edges that may exist after the merge while an end of
// theirs ends absent: a dangling_edge conflict per artifact deleted by one
// side with edges of the other, or edges dropped with an artifact a
// resolution deleted.
func (m *merger) checkDangling() {
	// Candidate edges: ours' edges of artifacts the merge deletes, and the
	// edges the merge may add.
	cand := map[graph.EdgeKey]bool{}
	ids := make([]string, 0, len(m.art))
	for id := range m.art {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if m.present(id) || m.ours.Artifact(id) == nil {
			continue
		}
		for _, e := range m.ours.Out(id) {
			cand[e.Key()] = true
		}
		for _, e := range m.ours.In(id) {
			cand[e.Key()] = true
		}
	}
	for k := range m.edge {
		if m.ours.Edge(k) == nil && m.edgePresent(k) {
			cand[k] = true
		}
	}
	keys := make([]graph.EdgeKey, 0, len(cand))
	for k := range cand {
		if m.edgePresent(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return edgeKeyLess(keys[i], keys[j]) })
	dangling := map[string][]graph.EdgeKey{}
	var order []string
	for _, k := range keys {
		var ends []string
		drop := false
		for _, end := range []string{k.From, k.To} {
			if m.present(end) {
				continue
			}
			if out := m.art[end]; out == nil || out.deletedBy == "" {
				drop = true // deleted by a resolution (or on both sides)
			} else {
				ends = append(ends, end)
			}
		}
		if drop {
			m.dropEdge(k)
			continue
		}
		for _, end := range ends {
			if dangling[end] == nil {
				order = append(order, end)
			}
			dangling[end] = append(dangling[end], k)
		}
	}
	sort.Strings(order)
	for _, id := range order {
		out := m.art[id]
		edges := dangling[id]
		other := TakeOurs
		if out.deletedBy == TakeOurs {
			other = TakeTheirs
		}
		key := ArtifactKey(id)
		b, _ := m.baseArtifact(id) // the bases agree: a side deleted it
		c := Conflict{Key: key, Kind: ConflictDanglingEdge, ID: id, DeletedBy: out.deletedBy, Edges: edges,
			Base: versionOf(b), Ours: versionOf(m.ours.Artifact(id)), Theirs: versionOf(m.theirs.Artifact(id)),
			Detail: fmt.Sprintf("%s deleted %q; %d edge(s) of %s still point to or from it", out.deletedBy, id, len(edges), other)}
		r, ok := m.resolution(key)
		if !ok {
			m.pending[key] = &c
			continue
		}
		m.resolved = append(m.resolved, c)
		o, t := m.ours.Artifact(id), m.theirs.Artifact(id)
		switch {
		case r.Value != nil:
			out.op, out.deletedBy = m.valueOp(key, id, r, o, t), ""
		case r.Take == out.deletedBy:
			for _, k := range edges {
				m.dropEdge(k)
			}
		case r.Take == TakeOurs || r.Take == TakeTheirs:
			// Keep the artifact: ours has it unless ours deleted it.
			out.deletedBy, out.op = "", nil
			if o == nil {
				out.op = m.takeTheirs(id, t)
			}
		default:
			m.badResolution(key, "take must be %q or %q, or give a value", TakeOurs, TakeTheirs)
		}
	}
}

// checkCycles finds dependency edges the merge may add that close a cycle
// with the merged edges.
func (m *merger) checkCycles() {
	rels := m.mergedRelations()
	m.rels = rels
	var added []graph.EdgeKey
	m.added = map[string][]graph.EdgeKey{}
	for k := range m.edge {
		if rels.Depends(k.Rel) && m.ours.Edge(k) == nil && m.edgePresent(k) {
			added = append(added, k)
			m.added[k.From] = append(m.added[k.From], k)
		}
	}
	// The edges whose cycle has a resolution go first: one cycle closed
	// by several added edges is reported at each, and the resolution of
	// any one of them settles it, so the others are no longer asked
	// about (nor settled again in the client's stead).
	hasRes := func(k graph.EdgeKey) bool { _, ok := m.res[CycleKey(k)]; return ok }
	sort.Slice(added, func(i, j int) bool {
		if ri, rj := hasRes(added[i]), hasRes(added[j]); ri != rj {
			return ri
		}
		return edgeKeyLess(added[i], added[j])
	})
	for _, k := range added {
		if !m.edgePresent(k) {
			continue // dropped by an earlier resolution
		}
		path := m.depPath(k.To, k.From)
		if path == nil {
			continue
		}
		key := CycleKey(k)
		kc := k
		cycle := append([]string{k.From}, path...)
		c := Conflict{Key: key, Kind: ConflictCycle, Edge: &kc, Cycle: cycle,
			Detail: fmt.Sprintf("edge %s from theirs closes a dependency cycle with ours: %s", k, strings.Join(cycle, " -> "))}
		if m.theirs.Edge(k) == nil {
			c.Detail = fmt.Sprintf("edge %s closes a dependency cycle: %s", k, strings.Join(cycle, " -> "))
		}
		r, ok := m.resolution(key)
		if !ok {
			m.pending[key] = &c
			continue
		}
		m.resolved = append(m.resolved, c)
		switch {
		case r.Value != nil:
			m.badResolution(key, "a cycle is resolved with %q or %q, not a value", TakeOurs, TakeTheirs)
		case r.Take == TakeOurs:
			m.dropEdge(k)
		case r.Take == TakeTheirs:
			// Along every path that closes the cycle, not only the
			// shortest; a path with none of ours' edges to drop is left
			// for plan to report.
			for ; path != nil; path = m.depPath(k.To, k.From) {
				dropped := false
				for i := 0; i+1 < len(path); i++ {
					for _, e := range m.depEdges(path[i], path[i+1]) {
						if m.theirs.Edge(e) == nil && m.edgePresent(e) {
							m.dropEdge(e)
							dropped = true
						}
					}
				}
				if !dropped {
					break
				}
			}
		default:
			m.badResolution(key, "take must be %q or %q", TakeOurs, TakeTheirs)
		}
	}
}

// mergedRelations returns the relations the merged state has: ours', and
// each one whose definition the merge puts (one theirs defined, or a
// resolution of a definition both sides added), so that the edges of a
// dependency relation only theirs knows close cycles here as they do when
// the merged ops are applied.
func (m *merger) mergedRelations() graph.Relations {
	var rels graph.Relations
	for _, out := range m.art {
		if out.op == nil || out.op.Op != graph.OpPut || out.op.Type != graph.TypeRelationDef || out.op.Data == nil {
			continue
		}
		var d graph.RelationDef
		if err := json.Unmarshal(out.op.Data, &d); err != nil || d.Name == "" {
			continue // the put fails when the ops are applied
		}
		if rels == nil {
			rels = maps.Clone(m.ours.Relations())
		}
		rels[d.Name] = d.Depends
	}
	if rels == nil {
		return m.ours.Relations()
	}
	return rels
}

// depTargets returns the dependency targets id may have after the merge,
// sorted and deduplicated.
func (m *merger) depTargets(id string) []string {
	rels := m.rels
	var out []string
	for _, e := range m.ours.Out(id) {
		if rels.Depends(e.Rel) && m.edgePresent(e.Key()) {
			out = append(out, e.To)
		}
	}
	for _, k := range m.added[id] {
		if m.edgePresent(k) {
			out = append(out, k.To)
		}
	}
	sort.Strings(out)
	return dedupStrings(out)
}

// depEdges returns the merged dependency edges from one id to another.
func (m *merger) depEdges(from, to string) []graph.EdgeKey {
	var out []graph.EdgeKey
	for rel, dep := range m.rels {
		k := graph.EdgeKey{From: from, Rel: rel, To: to}
		if dep && m.edgePresent(k) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out
}

func dedupStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// depPath returns a shortest merged dependency path from src to dst (both
// included; the lexically smallest among the shortest), or nil.
func (m *merger) depPath(src, dst string) []string {
	return graph.ShortestPath(src, dst, m.depTargets)
}

func sortedConflicts(m map[string]*Conflict) []Conflict {
	out := make([]Conflict, 0, len(m))
	for _, c := range m {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// plan orders the decided ops, applies them to a fork of ours (which
// checks ends and cycles once more, and costs what the ops change) and
// drops the ones that turn out to be no-ops.
func (m *merger) plan() (*MergePlan, error) {
	var unlinks, deletes, puts, links []graph.Op
	for _, out := range m.art {
		if out.op == nil {
			continue
		}
		if out.op.Op == graph.OpDelete {
			deletes = append(deletes, *out.op)
		} else {
			puts = append(puts, *out.op)
		}
	}
	for _, out := range m.edge {
		if out.op == nil {
			continue
		}
		if out.op.Op == graph.OpUnlink {
			unlinks = append(unlinks, *out.op)
		} else {
			links = append(links, *out.op)
		}
	}
	byID := func(l []graph.Op) {
		sort.Slice(l, func(i, j int) bool { return l[i].ID < l[j].ID })
	}
	byEdge := func(l []graph.Op) {
		sort.Slice(l, func(i, j int) bool { return edgeKeyLess(l[i].EdgeKey(), l[j].EdgeKey()) })
	}
	byEdge(unlinks)
	byID(deletes)
	byID(puts)
	byEdge(links)
	ops := make([]graph.Op, 0, len(unlinks)+len(deletes)+len(puts)+len(links))
	ops = append(append(append(append(ops, unlinks...), deletes...), puts...), links...)

	st := m.ours.Fork()
	changes, err := st.ApplyOps(ops)
	if err != nil {
		var ce *graph.CycleError
		if errors.As(err, &ce) {
			// Left by a combination of resolutions; ask again about it.
			k := ce.Edge
			return nil, &ConflictError{Conflicts: []Conflict{{Key: CycleKey(k), Kind: ConflictCycle, Edge: &k, Cycle: ce.Cycle,
				Detail: fmt.Sprintf("the resolved merge still closes a dependency cycle: %s", strings.Join(ce.Cycle, " -> "))}}}
		}
		return nil, fmt.Errorf("replay: merged ops do not apply: %w", err)
	}
	kept := ops[:0]
	for i, ch := range changes {
		if !ch.Noop {
			kept = append(kept, ops[i])
		}
	}
	p := &MergePlan{Ops: kept, Resolved: m.resolved, Unused: []string{}, ContextHash: st.Hash(), State: st}
	sort.Slice(p.Resolved, func(i, j int) bool { return p.Resolved[i].Key < p.Resolved[j].Key })
	if p.Resolved == nil {
		p.Resolved = []Conflict{}
	}
	for k := range m.res {
		if !m.used[k] {
			p.Unused = append(p.Unused, k)
		}
	}
	sort.Strings(p.Unused)
	return p, nil
}

// MergeOutcome is the result of MergeCommits.
type MergeOutcome struct {
	MergeSetup
	// Plan is set for a three-way merge.
	Plan *MergePlan
}

// MergeCommits merges commit theirs into commit ours of one chain, with no
// store: it finds the merge bases, and for a three-way merge folds the
// bases, their own merge base when there are several (MergeSetup's
// Ancestor), ours and theirs (verifying them as Fold does, with opts)
// and calls MergeOver — Merge when there is one base. Errors:
// MergeBase's, Fold's and Merge's.
func MergeCommits(ctx context.Context, src Source, ours, theirs hashing.Digest, resolutions map[string]Resolution, opts Options) (*MergeOutcome, error) {
	ms, err := PrepareMerge(ctx, src, ours, theirs)
	if err != nil {
		return nil, err
	}
	out := &MergeOutcome{MergeSetup: *ms}
	if ms.Kind != MergeThreeWay {
		return out, nil
	}
	// The bases, ours, theirs, then the bases' own merge base (none when
	// there is one base, or the bases have no single one).
	commits := append(slices.Clone(ms.Bases), ms.Ours, ms.Theirs, ms.Ancestor)
	states := make([]*graph.State, len(commits))
	for i, c := range commits {
		if c == nil {
			continue
		}
		res, err := Fold(ctx, src, c.ID, opts)
		if err != nil {
			return nil, err
		}
		states[i] = res.State
	}
	n := len(ms.Bases)
	out.Plan, err = MergeOver(states[:n], states[n+2], states[n], states[n+1], resolutions)
	if err != nil {
		return nil, err
	}
	return out, nil
}
