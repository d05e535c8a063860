package replay

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// StatusFunc returns an artifact's trust status in one state, or "" when
// the artifact does not exist there. (*graph.TrustIndex).Status and a
// closure over (*graph.TrustReport).Trust fit.
type StatusFunc func(id string) graph.Status

// ArtifactVersion is one version of an artifact as a diff or a conflict
// names it: everything its leaf covers except the id.
type ArtifactVersion struct {
	Type        string         `json:"type"`
	Version     int64          `json:"version"`
	ContentHash hashing.Digest `json:"content_hash"`
	ProducedBy  string         `json:"produced_by"`
}

// VersionOf returns a's version: what a diff or a comparison shows of it.
func VersionOf(a *graph.Artifact) ArtifactVersion {
	return ArtifactVersion{Type: a.Type, Version: a.Version, ContentHash: a.ContentHash, ProducedBy: a.ProducedBy}
}

// SameContent reports whether v and o hold the same content, type and
// producer, whatever their version numbers.
func (v ArtifactVersion) SameContent(o ArtifactVersion) bool {
	return v.ContentHash == o.ContentHash && v.Type == o.Type && v.ProducedBy == o.ProducedBy
}

// versionOf returns a's version, or nil for a nil artifact.
func versionOf(a *graph.Artifact) *ArtifactVersion {
	if a == nil {
		return nil
	}
	v := VersionOf(a)
	return &v
}

// artifact rebuilds a payload-less artifact from a version.
func (v *ArtifactVersion) artifact(id string) *graph.Artifact {
	if v == nil {
		return nil
	}
	return &graph.Artifact{ID: id, Type: v.Type, Version: v.Version, ContentHash: v.ContentHash, ProducedBy: v.ProducedBy}
}

// ArtifactChange is one artifact that differs: Old is nil for an added
// artifact, New for a removed one.
type ArtifactChange struct {
	ID  string           `json:"id"`
	Old *ArtifactVersion `json:"old,omitempty"`
	New *ArtifactVersion `json:"new,omitempty"`
}

// EdgeChange is one edge that differs. OldAttrs and NewAttrs are the
// canonical attrs on each side (nil when empty or when the edge is absent
// on that side; an added edge has no OldAttrs, a removed one no NewAttrs).
type EdgeChange struct {
	From     string          `json:"from"`
	Rel      string          `json:"rel"`
	To       string          `json:"to"`
	OldAttrs json.RawMessage `json:"old_attrs,omitempty"`
	NewAttrs json.RawMessage `json:"new_attrs,omitempty"`
}

// Key returns the edge's identity.
func (e *EdgeChange) Key() graph.EdgeKey { return graph.EdgeKey{From: e.From, Rel: e.Rel, To: e.To} }

// TrustChange is an artifact whose trust status differs: Old is its status
// in the from state ("" when it did not exist), New in the to state.
type TrustChange struct {
	ID  string       `json:"id"`
	Old graph.Status `json:"old,omitempty"`
	New graph.Status `json:"new"`
}

// DiffResult is what differs between two states. Every list is sorted
// (artifacts and trust by id, edges by from, rel, to), never nil, and
// holds each id or edge once; an edge whose attrs changed is in
// EdgesChanged only. Trust lists the artifacts present in the to state
// whose status differs from the from state, except artifacts added as
// confirmed; removed artifacts are not listed (Removed names them). It is
// empty when the diff was computed without trust. From, To and the
// context hashes are set by callers that diff commits.
type DiffResult struct {
	From         hashing.Digest   `json:"from,omitzero"`
	To           hashing.Digest   `json:"to,omitzero"`
	FromHash     hashing.Digest   `json:"from_context_hash,omitzero"`
	ToHash       hashing.Digest   `json:"to_context_hash,omitzero"`
	Added        []ArtifactChange `json:"added"`
	Removed      []ArtifactChange `json:"removed"`
	Changed      []ArtifactChange `json:"changed"`
	EdgesAdded   []EdgeChange     `json:"edges_added"`
	EdgesRemoved []EdgeChange     `json:"edges_removed"`
	EdgesChanged []EdgeChange     `json:"edges_changed"`
	Trust        []TrustChange    `json:"trust"`
}

// Empty reports whether nothing differs (trust included).
func (d *DiffResult) Empty() bool { return d.Len()+len(d.Trust) == 0 }

// Len is how many artifacts and edges differ (trust changes not counted).
func (d *DiffResult) Len() int {
	return len(d.Added) + len(d.Removed) + len(d.Changed) + len(d.EdgesAdded) + len(d.EdgesRemoved) + len(d.EdgesChanged)
}

// HasType reports whether an artifact that differs is of a type is
// accepts, on either side.
func (d *DiffResult) HasType(is func(typ string) bool) bool {
	for _, l := range [][]ArtifactChange{d.Added, d.Removed, d.Changed} {
		for _, c := range l {
			if c.Old != nil && is(c.Old.Type) || c.New != nil && is(c.New.Type) {
				return true
			}
		}
	}
	return false
}

// ArtifactDelta is one raw difference between two states' artifacts, as a
// caller that already knows what differs (the store's state-map diff)
// hands it to NewDiff. Old or New is nil where the artifact is absent.
type ArtifactDelta struct {
	ID       string
	Old, New *graph.Artifact
}

// EdgeDelta is one raw difference between two states' edges. Present says
// on which sides the edge exists; attrs are canonical or nil.
type EdgeDelta struct {
	Key                    graph.EdgeKey
	OldPresent, NewPresent bool
	OldAttrs, NewAttrs     json.RawMessage
}

// NewDiff classifies raw deltas into a DiffResult (without trust). Deltas
// that do not differ (same metadata, same attrs) are dropped; the input
// order does not matter. Each list is sized before it is filled: the
// diff of two unrelated big states holds millions, and growing the lists
// copied them again and again.
func NewDiff(arts []ArtifactDelta, edges []EdgeDelta) *DiffResult {
	var nArts [4]int
	for _, a := range arts {
		nArts[a.kind()]++
	}
	var nEdges [4]int
	for _, e := range edges {
		nEdges[e.kind()]++
	}
	b := &DiffBuilder{d: emptyDiff()}
	d := b.d
	d.Added, d.Removed, d.Changed = make([]ArtifactChange, 0, nArts[deltaAdded]), make([]ArtifactChange, 0, nArts[deltaRemoved]), make([]ArtifactChange, 0, nArts[deltaChanged])
	d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged = make([]EdgeChange, 0, nEdges[deltaAdded]), make([]EdgeChange, 0, nEdges[deltaRemoved]), make([]EdgeChange, 0, nEdges[deltaChanged])
	for _, a := range arts {
		b.AddArtifact(a)
	}
	for _, e := range edges {
		b.AddEdge(e)
	}
	return b.Result()
}

// DiffBuilder makes a DiffResult (without trust) of raw deltas handed to
// it one at a time, as NewDiff does of a list of them: a caller that
// finds a big diff piece by piece (the store's diff of two state maps)
// then holds the result alone, not a list of deltas beside it. Its lists
// grow as deltas come (append's growth, a copy now and then), where
// NewDiff, which sees them all first, sizes them once. The zero value is
// an empty diff.
type DiffBuilder struct{ d *DiffResult }

// diff returns the diff under way, empty at first.
func (b *DiffBuilder) diff() *DiffResult {
	if b.d == nil {
		b.d = emptyDiff()
	}
	return b.d
}

// AddArtifact adds a, dropped when it does not differ.
func (b *DiffBuilder) AddArtifact(a ArtifactDelta) {
	if a.kind() != deltaSame {
		b.AddVersions(a.ID, versionOf(a.Old), versionOf(a.New))
	}
}

// AddVersions adds artifact id at versions old and new (nil where it is
// absent), dropped when they do not differ: AddArtifact for a caller that
// reads versions (the store's diff of two maps), which then makes no
// artifact only to drop it.
func (b *DiffBuilder) AddVersions(id string, old, new *ArtifactVersion) {
	d := b.diff()
	switch {
	case old == nil && new == nil:
	case old == nil:
		d.Added = append(d.Added, ArtifactChange{ID: id, New: new})
	case new == nil:
		d.Removed = append(d.Removed, ArtifactChange{ID: id, Old: old})
	case *old != *new:
		d.Changed = append(d.Changed, ArtifactChange{ID: id, Old: old, New: new})
	}
}

// AddEdge adds e, dropped when it does not differ.
func (b *DiffBuilder) AddEdge(e EdgeDelta) {
	d := b.diff()
	ch := EdgeChange{From: e.Key.From, Rel: e.Key.Rel, To: e.Key.To}
	switch e.kind() {
	case deltaAdded:
		ch.NewAttrs = e.NewAttrs
		d.EdgesAdded = append(d.EdgesAdded, ch)
	case deltaRemoved:
		ch.OldAttrs = e.OldAttrs
		d.EdgesRemoved = append(d.EdgesRemoved, ch)
	case deltaChanged:
		ch.OldAttrs, ch.NewAttrs = e.OldAttrs, e.NewAttrs
		d.EdgesChanged = append(d.EdgesChanged, ch)
	}
}

// Len is how many artifacts and edges the diff under way holds.
func (b *DiffBuilder) Len() int { return b.diff().Len() }

// Result returns the diff, its lists sorted. The builder must not be used
// after it.
func (b *DiffBuilder) Result() *DiffResult {
	d := b.diff()
	d.sort()
	return d
}

// The kinds of a raw delta: what NewDiff makes of it.
const (
	deltaSame = iota // no difference: dropped
	deltaAdded
	deltaRemoved
	deltaChanged
)

// kind says what a is: added, removed, changed (its metadata or its
// version), or the same on both sides.
func (a ArtifactDelta) kind() int {
	switch {
	case a.Old == nil && a.New == nil:
		return deltaSame
	case a.Old == nil:
		return deltaAdded
	case a.New == nil:
		return deltaRemoved
	case !sameArtifactMeta(a.Old, a.New) || a.Old.Version != a.New.Version:
		return deltaChanged
	}
	return deltaSame
}

// kind says what e is: added, removed, changed (its attrs), or the same
// on both sides.
func (e EdgeDelta) kind() int {
	switch {
	case !e.OldPresent && !e.NewPresent:
		return deltaSame
	case !e.OldPresent:
		return deltaAdded
	case !e.NewPresent:
		return deltaRemoved
	case !bytes.Equal(e.OldAttrs, e.NewAttrs):
		return deltaChanged
	}
	return deltaSame
}

func emptyDiff() *DiffResult {
	return &DiffResult{Added: []ArtifactChange{}, Removed: []ArtifactChange{}, Changed: []ArtifactChange{},
		EdgesAdded: []EdgeChange{}, EdgesRemoved: []EdgeChange{}, EdgesChanged: []EdgeChange{}, Trust: []TrustChange{}}
}

func (d *DiffResult) sort() {
	for _, l := range [][]ArtifactChange{d.Added, d.Removed, d.Changed} {
		sort.Slice(l, func(i, j int) bool { return l[i].ID < l[j].ID })
	}
	for _, l := range [][]EdgeChange{d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged} {
		sort.Slice(l, func(i, j int) bool { return edgeKeyLess(l[i].Key(), l[j].Key()) })
	}
	sort.Slice(d.Trust, func(i, j int) bool { return d.Trust[i].ID < d.Trust[j].ID })
}

// edgeKeyLess orders edge keys as graph.EdgeKey.Compare does.
func edgeKeyLess(a, b graph.EdgeKey) bool { return a.Compare(b) < 0 }

// sameArtifactMeta reports whether two artifacts have the same value,
// ignoring the version: the same type, content and producer.
func sameArtifactMeta(a, b *graph.Artifact) bool {
	return a.Type == b.Type && a.ContentHash == b.ContentHash && a.ProducedBy == b.ProducedBy
}

// Diff compares two whole states. trustFrom and trustTo give each state's
// trust statuses; when either is nil, Trust stays empty. It visits every
// artifact and edge of both states (O(n log n)); the store's Diff reads
// only the parts of two commits' state maps that differ.
func Diff(from, to *graph.State, trustFrom, trustTo StatusFunc) *DiffResult {
	var arts []ArtifactDelta
	for _, a := range from.Artifacts() {
		if b := to.Artifact(a.ID); b == nil || b.Version != a.Version || !sameArtifactMeta(a, b) {
			arts = append(arts, ArtifactDelta{ID: a.ID, Old: a, New: b})
		}
	}
	for _, b := range to.Artifacts() {
		if from.Artifact(b.ID) == nil {
			arts = append(arts, ArtifactDelta{ID: b.ID, New: b})
		}
	}
	var edges []EdgeDelta
	for _, e := range from.Edges() {
		n := to.Edge(e.Key())
		if n == nil || !bytes.Equal(n.Attrs, e.Attrs) {
			d := EdgeDelta{Key: e.Key(), OldPresent: true, OldAttrs: e.Attrs}
			if n != nil {
				d.NewPresent, d.NewAttrs = true, n.Attrs
			}
			edges = append(edges, d)
		}
	}
	for _, e := range to.Edges() {
		if from.Edge(e.Key()) == nil {
			edges = append(edges, EdgeDelta{Key: e.Key(), NewPresent: true, NewAttrs: e.Attrs})
		}
	}
	d := NewDiff(arts, edges)
	if trustFrom == nil || trustTo == nil {
		return d
	}
	for _, id := range to.ArtifactIDs() {
		d.AddTrust(id, trustFrom(id), trustTo(id))
	}
	return d
}

// AddTrust records that artifact id's status was old on the from side
// and is new on the to side ("" where it is absent), by the rule of
// DiffResult.Trust: nothing when they are the same, when it was removed,
// or when it was added confirmed. Calls must come in the order of ids.
func (d *DiffResult) AddTrust(id string, old, new graph.Status) {
	if old == new || new == "" || (old == "" && new == graph.StatusConfirmed) {
		return
	}
	d.Trust = append(d.Trust, TrustChange{ID: id, Old: old, New: new})
}

// Side names one of the two states of a diff.
type Side int

// The sides of a diff.
const (
	SideFrom Side = iota
	SideTo
)

// DiffTrust fills d.Trust when only one of the two states is at hand:
// known is the state on side knownSide with its statuses, d the diff
// between the two (without trust), base the trust base function (called
// only for changed artifacts, as they are on the other side). Trust can
// change only for artifacts present on one side or whose base changed,
// the sources of changed dependency edges, and their dependents, so only
// those are examined: the cost is that set and its dependency edges, not
// the size of the state. The result equals Diff's with both states.
func DiffTrust(d *DiffResult, known *graph.State, status StatusFunc, knownSide Side, base graph.BaseFunc) {
	diffTrust(d, stateView{known, status}, knownSide, base, 0)
}

// DiffTrustWithin is DiffTrust for a caller that would rather do without
// the trust of a big change (a page that can count its state whole
// instead): once more than limit artifacts may have changed trust it
// stops, leaves d.Trust empty and reports false. A limit of 0 or less is
// no limit.
func DiffTrustWithin(d *DiffResult, known *graph.State, status StatusFunc, knownSide Side, base graph.BaseFunc, limit int) bool {
	return diffTrust(d, stateView{known, status}, knownSide, base, limit)
}

// DiffTrustVia fills d.Trust when neither of its states is at hand but a
// third one is (a branch head, say): known with its statuses, and
// sideToKnown, the diff (without trust) from d's state on side to known.
// That state is seen as known with sideToKnown undone, without building
// it, and the trust of d follows as in DiffTrust; the cost follows the
// two diffs, not the size of the states.
func DiffTrustVia(d *DiffResult, known *graph.State, status StatusFunc, side Side, sideToKnown *DiffResult, base graph.BaseFunc) {
	DiffTrustViaWithin(d, known, status, side, sideToKnown, base, 0)
}

// DiffTrustViaWithin is DiffTrustVia bounded as DiffTrustWithin is: it
// reports false, d.Trust empty, once more than limit artifacts may have
// changed trust between d's two states (what may have changed between
// the third state and d's is not bounded).
func DiffTrustViaWithin(d *DiffResult, known *graph.State, status StatusFunc, side Side, sideToKnown *DiffResult, base graph.BaseFunc, limit int) bool {
	rels := known.Relations()
	view := newOverlay(sideToKnown, stateView{known, status}, SideTo, base, rels, 0)
	return diffTrust(d, view, side, base, limit)
}

// diffTrust fills d.Trust from known on knownSide; false (d.Trust empty)
// when more than limit artifacts (limit > 0) may have changed trust.
func diffTrust(d *DiffResult, known trustView, knownSide Side, base graph.BaseFunc, limit int) bool {
	o := newOverlay(d, known, knownSide, base, known.relations(), limit)
	d.Trust = d.Trust[:0]
	if o.over {
		return false
	}
	ids := make([]string, 0, len(o.affected))
	for id := range o.affected {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if knownSide == SideTo {
			d.AddTrust(id, o.status(id), known.status(id))
		} else {
			d.AddTrust(id, known.status(id), o.status(id))
		}
	}
	return true
}

// trustView is what computing trust needs of a state: its artifacts, its
// dependency edges both ways (one entry per edge, so an id may repeat when
// two relations join the same pair) and every artifact's status.
type trustView interface {
	artifact(id string) *graph.Artifact
	depTargets(id string) []string
	depSources(id string) []string
	status(id string) graph.Status
	relations() graph.Relations
}

// stateView is a whole state with its statuses.
type stateView struct {
	st       *graph.State
	statusOf StatusFunc
}

func (v stateView) artifact(id string) *graph.Artifact { return v.st.Artifact(id) }
func (v stateView) status(id string) graph.Status      { return v.statusOf(id) }
func (v stateView) relations() graph.Relations         { return v.st.Relations() }

func (v stateView) depTargets(id string) []string {
	var out []string
	rels := v.st.Relations()
	for _, e := range v.st.Out(id) {
		if rels.Depends(e.Rel) {
			out = append(out, e.To)
		}
	}
	return out
}

func (v stateView) depSources(id string) []string {
	var out []string
	rels := v.st.Relations()
	for _, e := range v.st.In(id) {
		if rels.Depends(e.Rel) {
			out = append(out, e.From)
		}
	}
	return out
}

// overlay is the other state of a diff, seen through the known one: the
// known view with the diff undone (or applied), built without copying
// anything. Statuses are computed on demand for the artifacts whose trust
// may differ and taken from the known view for all others. An overlay is
// a trustView itself, so overlays chain.
type overlay struct {
	known trustView
	base  graph.BaseFunc
	// arts holds the other side's version of each changed artifact (nil
	// when absent there), bases the base trust of those present on both
	// sides.
	arts  map[string]*graph.Artifact
	bases map[string]bool
	// addOut/addIn and delOut/delIn list, per id, the dependency edges the
	// other side has and known has not, and the reverse, by their other
	// end.
	addOut, addIn, delOut, delIn map[string][]string
	rels                         graph.Relations
	// affected holds every id whose status may differ from known's: the
	// artifacts present on one side only or whose base differs, the
	// sources of changed dependency edges, and their dependents in known
	// (a path that differs on the other side leaves known's edges at one
	// of those).
	affected map[string]bool
	memo     map[string]graph.Status
	// over is set when affected would pass the limit newOverlay was
	// given: the overlay is then incomplete and must not be read.
	over bool
}

// newOverlay returns the state on the other side of d from known. With a
// limit > 0 it stops once more than limit artifacts may have changed
// trust, and sets over.
func newOverlay(d *DiffResult, known trustView, knownSide Side, base graph.BaseFunc, rels graph.Relations, limit int) *overlay {
	n := len(d.Added) + len(d.Removed) + len(d.Changed)
	o := &overlay{known: known, base: base, rels: rels,
		arts: make(map[string]*graph.Artifact, n), bases: make(map[string]bool, len(d.Changed)),
		addOut: map[string][]string{}, addIn: map[string][]string{}, delOut: map[string][]string{}, delIn: map[string][]string{},
		affected: make(map[string]bool, 2*n), memo: make(map[string]graph.Status, 2*n)}
	other := func(c ArtifactChange) *ArtifactVersion {
		if knownSide == SideTo {
			return c.Old
		}
		return c.New
	}
	var queue []string
	touch := func(id string) {
		if o.affected[id] || o.over {
			return
		}
		if limit > 0 && len(o.affected) >= limit {
			o.over = true
			return
		}
		o.affected[id] = true
		queue = append(queue, id)
	}
	for _, l := range [][]ArtifactChange{d.Added, d.Removed} {
		for _, c := range l {
			o.arts[c.ID] = other(c).artifact(c.ID)
			touch(c.ID)
		}
	}
	// A changed artifact whose base is the same on both sides behaves like
	// an unchanged one: its status follows its dependencies.
	for _, c := range d.Changed {
		a := other(c).artifact(c.ID)
		o.arts[c.ID] = a
		ok, _ := base(a)
		o.bases[c.ID] = ok
		if ok != (known.status(c.ID) != graph.StatusPoisonRoot) {
			touch(c.ID)
		}
	}
	onlyOther, onlyKnown := d.EdgesRemoved, d.EdgesAdded
	if knownSide == SideFrom {
		onlyOther, onlyKnown = d.EdgesAdded, d.EdgesRemoved
	}
	for _, e := range onlyOther {
		if rels.Depends(e.Rel) {
			o.addOut[e.From] = append(o.addOut[e.From], e.To)
			o.addIn[e.To] = append(o.addIn[e.To], e.From)
			touch(e.From)
		}
	}
	for _, e := range onlyKnown {
		if rels.Depends(e.Rel) {
			o.delOut[e.From] = append(o.delOut[e.From], e.To)
			o.delIn[e.To] = append(o.delIn[e.To], e.From)
			touch(e.From)
		}
	}
	for len(queue) > 0 && !o.over {
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, dep := range known.depSources(id) {
			touch(dep)
		}
	}
	return o
}

func (o *overlay) relations() graph.Relations { return o.rels }

// artifact returns id's artifact on the other side, or nil.
func (o *overlay) artifact(id string) *graph.Artifact {
	if a, ok := o.arts[id]; ok {
		return a
	}
	return o.known.artifact(id)
}

func (o *overlay) depTargets(id string) []string {
	return adjust(o.known.depTargets(id), o.delOut[id], o.addOut[id])
}

func (o *overlay) depSources(id string) []string {
	return adjust(o.known.depSources(id), o.delIn[id], o.addIn[id])
}

// adjust removes one occurrence of each of del from ids and appends add.
func adjust(ids, del, add []string) []string {
	if len(del) == 0 && len(add) == 0 {
		return ids
	}
	out := make([]string, 0, len(ids)+len(add))
	drop := make(map[string]int, len(del))
	for _, d := range del {
		drop[d]++
	}
	for _, id := range ids {
		if drop[id] > 0 {
			drop[id]--
			continue
		}
		out = append(out, id)
	}
	return append(out, add...)
}

// status returns id's trust status on the other side. Dependency edges
// are acyclic on both sides, so the recursion ends.
func (o *overlay) status(id string) graph.Status {
	if !o.affected[id] {
		return o.known.status(id) // its closure is the same on both sides
	}
	if st, ok := o.memo[id]; ok {
		return st
	}
	a := o.artifact(id)
	var st graph.Status
	switch {
	case a == nil:
	case !o.baseOK(id, a):
		st = graph.StatusPoisonRoot
	default:
		st = graph.StatusConfirmed
		for _, dep := range o.depTargets(id) {
			if o.status(dep) != graph.StatusConfirmed {
				st = graph.StatusQuarantined
				break
			}
		}
	}
	o.memo[id] = st
	return st
}

// baseOK returns a's base trust on the other side. An artifact that did
// not change has the same base on both sides, which known's status tells
// (only a poison root has a false base), so base is called only for
// changed artifacts, once.
func (o *overlay) baseOK(id string, a *graph.Artifact) bool {
	if ok, changed := o.bases[id]; changed {
		return ok
	}
	if _, added := o.arts[id]; !added {
		return o.known.status(id) != graph.StatusPoisonRoot
	}
	ok, _ := o.base(a)
	return ok
}
