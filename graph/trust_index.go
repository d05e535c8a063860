package graph

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// TrustIndex keeps every artifact's trust status for one state and follows
// the state commit by commit: Apply costs what the commit's changes touch
// plus the artifacts whose status actually changes, never the size of the
// graph. Per artifact it stores its base, whether it is confirmed, and how
// many of its dependency edges point to unconfirmed artifacts; roots and
// paths are computed on demand by Explain.
//
// A TrustIndex is not safe for concurrent mutation. Readers (Confirmed,
// Status, Explain, Report, Summary, Clone) may run concurrently with each
// other and with TaintedLinks or CheckEnforce, which leave the entries
// alone, but not with Apply, ApplyTainted or Revert. Only one of
// TaintedLinks, CheckEnforce, Apply, ApplyTainted and Revert may run at a
// time.
type TrustIndex struct {
	base BaseFunc
	// rebase, when set, gives the base of the state being judged (see
	// NewTrustIndexFor); base is then rebase of the state the index was
	// made from.
	rebase func(*State) BaseFunc
	nodes  map[string]tstate
	// roots maps each poison root to its reason.
	roots map[string]string
	// nq counts quarantined artifacts.
	nq int
	// memo holds base results of put artifacts computed by TaintedLinks,
	// for the Apply that follows (which may run after the payloads were
	// dropped from the artifacts).
	memo map[*Artifact]baseResult
	// n and nr count the entries and the poison roots (a fork's maps hold
	// only its changes).
	n, nr int
	// under is the index a fork overlays (nil: a whole index); in a fork,
	// gone and rootGone hold the ids whose entry or root the fork removed.
	// forkGen is under's gen when the fork was made; gen counts changes.
	under          *TrustIndex
	gone, rootGone map[string]struct{}
	forkGen, gen   uint64
	// src, in an index at the bottom of its forks, is the stored index it
	// reads through (NewTrustIndexOver; nil: a whole index or a fork);
	// such an index keeps removals in gone and rootGone, as a fork does.
	src TrustSource
}

// tstate is one artifact's entry. Invariants, for the state the index
// follows: conf == base && bad == 0, and bad is the number of dependency
// edges from the artifact to unconfirmed artifacts (one per edge).
type tstate struct {
	bad  int32
	base bool
	conf bool
}

func (st tstate) quarantined() bool { return st.base && !st.conf }

type baseResult struct {
	ok     bool
	reason string
}

// NewTrustIndex computes the index of s from scratch, calling base once
// per artifact (O(V+E)). The index keeps base for later Applies.
func NewTrustIndex(s *State, base BaseFunc) *TrustIndex {
	t := &TrustIndex{base: base, nodes: make(map[string]tstate, s.nArt), roots: make(map[string]string)}
	var roots []string
	for id, a := range s.allArtifacts() {
		ok, why := base(a)
		t.nodes[id] = tstate{base: ok, conf: ok}
		if !ok {
			t.roots[id] = why
			roots = append(roots, id)
		}
	}
	slices.Sort(roots)
	tn := findTaint(s, roots)
	for i, id := range tn.ids {
		st := t.nodes[id]
		st.conf, st.bad = false, tn.bad[i]
		t.nodes[id] = st
	}
	t.nq = len(tn.ids) - len(roots)
	t.n, t.nr = len(t.nodes), len(t.roots)
	return t
}

// NewTrustIndexFor is NewTrustIndex with a base that follows the state
// it judges: baseOf(st) is the base of state st (the definitions in force
// there, as State.Base gives), and every Apply, Revert, TaintedLinks and
// Verify judges with baseOf of the state it is given — a fork that
// records new definitions included — instead of one base fixed when the
// index was made.
func NewTrustIndexFor(s *State, baseOf func(*State) BaseFunc) *TrustIndex {
	t := NewTrustIndex(s, baseOf(s))
	t.rebase = baseOf
	return t
}

// baseFor returns the base with which t judges state s.
func (t *TrustIndex) baseFor(s *State) BaseFunc {
	if t.rebase != nil {
		return t.rebase(s)
	}
	return t.base
}

// Clone returns an independent, whole copy of the index (O(V)), even of
// a fork.
func (t *TrustIndex) Clone() *TrustIndex {
	c := &TrustIndex{base: t.base, rebase: t.rebase, nodes: make(map[string]tstate, t.n), roots: make(map[string]string, t.nr), nq: t.nq, n: t.n, nr: t.nr}
	for k, v := range t.allNodes() {
		c.nodes[k] = v
	}
	for k, v := range t.allRoots() {
		c.roots[k] = v
	}
	return c
}

// Confirmed reports whether id exists and is confirmed.
func (t *TrustIndex) Confirmed(id string) bool {
	st, ok := t.node(id)
	return ok && st.conf
}

// Status returns id's status, or "" when id is not in the index.
func (t *TrustIndex) Status(id string) Status {
	st, ok := t.node(id)
	if !ok {
		return ""
	}
	return st.status()
}

// TrustSummary counts artifacts by status.
type TrustSummary struct {
	Confirmed   int `json:"confirmed"`
	Quarantined int `json:"quarantined"`
	PoisonRoots int `json:"poison_roots"`
}

// Summary counts the index's artifacts by status in O(1). Quarantined is
// the total blast radius.
func (t *TrustIndex) Summary() TrustSummary {
	return TrustSummary{Confirmed: t.n - t.nq - t.nr, Quarantined: t.nq, PoisonRoots: t.nr}
}

// Report returns the full trust report of s, which must be the state the
// index follows. It reuses the index's poison roots (base is not called)
// and walks only the unconfirmed region, plus one pass over the artifacts
// to list the confirmed ones.
func (t *TrustIndex) Report(s *State) *TrustReport {
	roots := make([]rootInfo, 0, t.nr)
	for id, why := range t.allRoots() {
		roots = append(roots, rootInfo{id: id, reason: why})
	}
	return buildReport(s, roots)
}

// Explain returns id's trust in s, which must be the state the index
// follows: for a quarantined artifact it walks up the unconfirmed
// dependencies only, collecting every poison root and one shortest path
// (the same path ComputeTrust reports). The zero Status means id does not
// exist.
func (t *TrustIndex) Explain(s *State, id string) Trust {
	return (&trustTxn{t: t}).explain(s, id)
}

// Apply updates the index for changes, the result of one ApplyOps that has
// already been applied to s. Only the changed artifacts and edges are
// examined, and the update spreads to dependents only as far as their
// status changes: a new artifact with k edges costs O(k), a re-fetch that
// turns a poison root RETRIEVED costs what it lifts. Base is called for
// each put artifact (unless TaintedLinks already did).
//
// The update runs in two monotone phases, which terminate and reach the
// unique solution because dependency edges are acyclic: edge and base
// changes first adjust the per-artifact counts, then artifacts that must
// become unconfirmed are marked (spreading down), then artifacts that may
// become confirmed again are cleared (spreading down).
func (t *TrustIndex) Apply(s *State, changes []Change) {
	(&trustTxn{t: t, base: t.baseFor(s)}).update(s, changes, false)
	t.memo = nil
}

// Revert undoes an Apply: call it with the same changes after
// s.Undo(changes) restored the state before the commit.
func (t *TrustIndex) Revert(s *State, changes []Change) {
	(&trustTxn{t: t, base: t.baseFor(s)}).update(s, changes, true)
	t.memo = nil
}

// Verify recomputes the index of s from scratch and reports the first
// differences, for tests and consistency checks.
func (t *TrustIndex) Verify(s *State) error {
	want := NewTrustIndex(s, t.baseFor(s))
	var diffs []string
	ids := make([]string, 0, len(want.nodes))
	for id := range want.nodes {
		ids = append(ids, id)
	}
	for id := range t.allNodes() {
		if _, ok := want.nodes[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		got, gok := t.node(id)
		exp, eok := want.nodes[id]
		if got != exp || gok != eok {
			diffs = append(diffs, fmt.Sprintf("%s: have %+v (present %v), want %+v (present %v)", id, got, gok, exp, eok))
			if len(diffs) == 10 {
				break
			}
		}
	}
	if t.nq != want.nq || t.nr != want.nr || t.n != want.n {
		diffs = append(diffs, fmt.Sprintf("counts: have %d quarantined, %d roots, %d entries; want %d, %d, %d", t.nq, t.nr, t.n, want.nq, want.nr, want.n))
	}
	if len(diffs) > 0 {
		return errors.New("graph: trust index differs from a full pass: " + strings.Join(diffs, "; "))
	}
	return nil
}

// trustTxn reads and writes index entries, either straight into the index
// or, when over is set, into a copy-on-write overlay that leaves the index
// untouched.
type trustTxn struct {
	t *TrustIndex
	// base judges the state the transaction follows (TrustIndex.baseFor).
	base BaseFunc
	over map[string]ovEntry
}

type ovEntry struct {
	st        tstate
	present   bool
	reason    string
	hasReason bool
}

func (tx *trustTxn) get(id string) (tstate, bool) {
	if tx.over != nil {
		if e, ok := tx.over[id]; ok {
			return e.st, e.present
		}
	}
	return tx.t.node(id)
}

func (tx *trustTxn) reasonOf(id string) string {
	if tx.over != nil {
		if e, ok := tx.over[id]; ok && e.hasReason {
			return e.reason
		}
	}
	why, _ := tx.t.root(id)
	return why
}

// setState replaces old (the current entry of id) by st, with the same base.
func (tx *trustTxn) setState(id string, old, st tstate) {
	if tx.over != nil {
		e := tx.over[id]
		e.st, e.present = st, true
		tx.over[id] = e
		return
	}
	t := tx.t
	if old.quarantined() != st.quarantined() {
		if st.quarantined() {
			t.nq++
		} else {
			t.nq--
		}
	}
	// id has an entry already: nothing to count.
	t.setNodeEntry(id, st)
	t.gen++
}

// setNode writes id's entry with a possibly new base and its reason.
func (tx *trustTxn) setNode(id string, old tstate, had bool, st tstate, reason string) {
	if st.base {
		reason = ""
	}
	if tx.over != nil {
		tx.over[id] = ovEntry{st: st, present: true, reason: reason, hasReason: true}
		return
	}
	t := tx.t
	if had && old.quarantined() {
		t.nq--
	}
	if st.quarantined() {
		t.nq++
	}
	if st.base {
		t.delRoot(id)
	} else {
		t.putRoot(id, reason)
	}
	t.putNode(id, st)
}

func (tx *trustTxn) del(id string, old tstate) {
	if tx.over != nil {
		tx.over[id] = ovEntry{hasReason: true}
		return
	}
	t := tx.t
	if old.quarantined() {
		t.nq--
	}
	t.delRoot(id)
	t.delNode(id)
}

func (tx *trustTxn) baseOf(a *Artifact) (bool, string) {
	if r, ok := tx.t.memo[a]; ok {
		return r.ok, r.reason
	}
	base := tx.base
	if base == nil {
		base = tx.t.base
	}
	ok, why := base(a)
	if tx.over != nil && tx.t.memo != nil {
		tx.t.memo[a] = baseResult{ok, why}
	}
	return ok, why
}

type edgeDiff struct {
	k      EdgeKey
	before bool
}

// netChanges returns the artifacts a commit put or deleted and its
// dependency edges with whether each existed before: per the first change
// touching it, or, when reverting (s is then the state before the commit
// and the index follows the state after it), per the last.
func netChanges(s *State, changes []Change, revert bool) (ids []string, edges []edgeDiff) {
	// Small commits (the common case) are deduplicated by a linear scan.
	var seenN map[string]struct{}
	var seenE map[EdgeKey]struct{}
	small := len(changes) <= 16
	if !small {
		seenN = make(map[string]struct{})
		seenE = make(map[EdgeKey]struct{})
	}
	for n := range changes {
		i := n
		if revert {
			i = len(changes) - 1 - n
		}
		c := &changes[i]
		switch c.Op.Op {
		case OpPut, OpDelete:
			if c.Noop {
				continue
			}
			if d := c.def; d != nil && d.typ != "" && d.prevType == nil && s.countOf(d.typ) > 0 {
				// A type defined after artifacts of it were written (a
				// context older than recorded definitions): their base
				// changes with the definition. Rare, once per type.
				for _, id := range s.idsOfType(d.typ) {
					if _, ok := seenN[id]; !ok && (!small || !slices.Contains(ids, id)) {
						if !small {
							seenN[id] = struct{}{}
						}
						ids = append(ids, id)
					}
				}
			}
			if small {
				if !slices.Contains(ids, c.Op.ID) {
					ids = append(ids, c.Op.ID)
				}
			} else if _, ok := seenN[c.Op.ID]; !ok {
				seenN[c.Op.ID] = struct{}{}
				ids = append(ids, c.Op.ID)
			}
		case OpLink, OpUnlink:
			k := c.Op.EdgeKey()
			if !s.rels.Depends(k.Rel) {
				continue
			}
			if small {
				if slices.ContainsFunc(edges, func(e edgeDiff) bool { return e.k == k }) {
					continue
				}
			} else {
				if _, ok := seenE[k]; ok {
					continue
				}
				seenE[k] = struct{}{}
			}
			var before bool
			if revert {
				before = c.Op.Op == OpLink
			} else {
				before = c.Op.Op == OpUnlink || c.Noop || c.PrevEdge != nil
			}
			edges = append(edges, edgeDiff{k: k, before: before})
		}
	}
	return ids, edges
}

// update brings the entries in line with s after changes (see Apply).
func (tx *trustTxn) update(s *State, changes []Change, revert bool) {
	ids, edges := netChanges(s, changes, revert)
	seeds := make([]string, 0, len(ids)+len(edges))
	// Removed dependency edges, judged by the old status of their target
	// (before deleted artifacts leave the index).
	for _, e := range edges {
		if !e.before || s.edge(e.k) != nil {
			continue
		}
		if to, ok := tx.get(e.k.To); ok && !to.conf {
			if from, ok := tx.get(e.k.From); ok {
				st := from
				st.bad--
				tx.setState(e.k.From, from, st)
			}
		}
		seeds = append(seeds, e.k.From)
	}
	// Put and deleted artifacts. A new artifact starts confirmed with no
	// counted edges; the phases below correct it.
	for _, id := range ids {
		old, had := tx.get(id)
		a := s.art(id)
		switch {
		case a == nil && had:
			tx.del(id, old)
		case a != nil:
			ok, why := tx.baseOf(a)
			st := old
			if !had {
				st = tstate{conf: true}
			}
			st.base = ok
			tx.setNode(id, old, had, st, why)
			seeds = append(seeds, id)
		}
	}
	// Added dependency edges, judged by the current status of their target.
	for _, e := range edges {
		if e.before || s.edge(e.k) == nil {
			continue
		}
		if to, ok := tx.get(e.k.To); ok && !to.conf {
			if from, ok := tx.get(e.k.From); ok {
				st := from
				st.bad++
				tx.setState(e.k.From, from, st)
			}
		}
		seeds = append(seeds, e.k.From)
	}
	tx.taint(s, slices.Clone(seeds))
	tx.untaint(s, seeds)
}

// taint marks confirmed artifacts that must not be and spreads down. Only
// confirmed→unconfirmed flips happen, so each artifact flips at most once.
func (tx *trustTxn) taint(s *State, stack []string) {
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		st, ok := tx.get(x)
		if !ok || !st.conf || (st.base && st.bad == 0) {
			continue
		}
		nst := st
		nst.conf = false
		tx.setState(x, st, nst)
		for k := range s.inOf(x).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			d, ok := tx.get(k.From)
			if !ok {
				continue
			}
			nd := d
			nd.bad++
			tx.setState(k.From, d, nd)
			if nd.conf {
				stack = append(stack, k.From)
			}
		}
	}
}

// untaint confirms unconfirmed artifacts whose base is true and whose
// dependencies are all confirmed, and spreads down. Only
// unconfirmed→confirmed flips happen.
func (tx *trustTxn) untaint(s *State, stack []string) {
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		st, ok := tx.get(x)
		if !ok || st.conf || !st.base || st.bad != 0 {
			continue
		}
		nst := st
		nst.conf = true
		tx.setState(x, st, nst)
		for k := range s.inOf(x).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			d, ok := tx.get(k.From)
			if !ok {
				continue
			}
			nd := d
			nd.bad--
			tx.setState(k.From, d, nd)
			if !nd.conf && nd.base && nd.bad == 0 {
				stack = append(stack, k.From)
			}
		}
	}
}

// explain computes id's Trust from the entries (see TrustIndex.Explain).
func (tx *trustTxn) explain(s *State, id string) Trust {
	st, ok := tx.get(id)
	switch {
	case !ok:
		return Trust{ID: id}
	case st.conf:
		return Trust{ID: id, Status: StatusConfirmed}
	case !st.base:
		return Trust{ID: id, Status: StatusPoisonRoot, Reason: tx.reasonOf(id)}
	}
	// The unconfirmed ancestors of id: every node on a path from id to a
	// poison root is unconfirmed, so this region holds all of its roots.
	// preds[j] are the region's nodes with a dependency edge to order[j].
	order := []string{id}
	pos := map[string]int{id: 0}
	preds := [][]int{nil}
	for i := 0; i < len(order); i++ {
		for k := range s.outOf(order[i]).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			j, seen := pos[k.To]
			if !seen {
				if d, ok := tx.get(k.To); !ok || d.conf {
					continue
				}
				j = len(order)
				pos[k.To] = j
				order = append(order, k.To)
				preds = append(preds, nil)
			}
			preds[j] = append(preds[j], i)
		}
	}
	// Distance to the nearest root, by a breadth-first walk down from all
	// roots at once, within the region — over the edges the walk up found,
	// not the roots' dependents: a root or a hub on the way may have
	// thousands outside the region, and the UI explains every node it
	// draws.
	dist := make([]int32, len(order))
	var queue []int
	var roots []string
	for i, n := range order {
		dist[i] = -1
		if d, _ := tx.get(n); !d.base {
			dist[i] = 0
			queue = append(queue, i)
			roots = append(roots, n)
		}
	}
	for q := 0; q < len(queue); q++ {
		y := queue[q]
		for _, j := range preds[y] {
			if dist[j] < 0 {
				dist[j] = dist[y] + 1
				queue = append(queue, j)
			}
		}
	}
	slices.Sort(roots)
	tr := Trust{ID: id, Status: StatusQuarantined, Roots: roots, Path: []string{id}}
	for cur := 0; dist[cur] > 0; {
		if len(tr.Path) == MaxTrustPath {
			tr.PathTruncated = true
			break
		}
		best := -1
		for k := range s.outOf(order[cur]).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			if j, ok := pos[k.To]; ok && dist[j] == dist[cur]-1 && (best < 0 || order[j] < order[best]) {
				best = j
			}
		}
		if best < 0 {
			break // unreachable while the index is consistent
		}
		cur = best
		tr.Path = append(tr.Path, order[cur])
	}
	return tr
}

// ErrTainted marks a write refused because a new dependency edge rests on
// an unconfirmed artifact (enforce mode).
var ErrTainted = errors.New("rests on an unconfirmed artifact")

// TaintError reports a new dependency edge whose target is unconfirmed.
// Index is the position of the link op in its commit. Roots are the poison
// roots the target rests on (the target itself when it is one), with
// Reasons in the same order; Path runs from the edge's source through its
// target to a poison root.
type TaintError struct {
	Index   int
	Edge    EdgeKey
	Roots   []string
	Reasons []string
	Path    []string
}

// Error names the edge, the poison roots with their reasons, and the path.
func (e *TaintError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d: edge %s rests on unconfirmed %s; poison root", e.Index, e.Edge, e.Edge.To)
	if len(e.Roots) != 1 {
		b.WriteByte('s')
	}
	for i, r := range e.Roots {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(" " + r)
		if i < len(e.Reasons) && e.Reasons[i] != "" {
			b.WriteString(" (" + e.Reasons[i] + ")")
		}
	}
	b.WriteString("; path " + strings.Join(e.Path, " -> "))
	return b.String()
}

// Unwrap returns ErrTainted.
func (e *TaintError) Unwrap() error { return ErrTainted }

// TaintedLinks returns, ordered by op, the new dependency edges of a commit
// whose target is unconfirmed. Call it after ApplyOps applied changes to s
// and before t.Apply. A new edge is one that did not exist before the
// commit and does after it: re-linking an existing edge (new attrs), or
// putting a new version of an artifact that already rests on unconfirmed
// ones, is not judged.
//
// The target is judged on the state after the whole commit, not on t
// (which still reflects the state before it): the incremental update runs
// on a copy-on-write overlay of t. So a commit that re-fetches s1 as
// RETRIEVED and links s3 to it is accepted, and one that links to an
// artifact while turning one of its sources FAILED is refused. t's entries
// are not modified; base results of the commit's puts are kept for the
// next Apply, which thus does not need the artifacts' Data again.
func TaintedLinks(s *State, t *TrustIndex, changes []Change) []*TaintError {
	t.memo = make(map[*Artifact]baseResult)
	tx := &trustTxn{t: t, base: t.baseFor(s), over: make(map[string]ovEntry)}
	for i := range changes {
		if c := &changes[i]; c.Op.Op == OpPut && !c.Noop && c.Next != nil {
			tx.baseOf(c.Next)
		}
	}
	isNew := newDependencyEdges(s, changes)
	if len(isNew) == 0 {
		return nil
	}
	tx.update(s, changes, false)
	return judgeNewEdges(tx, s, changes, isNew)
}

// ApplyTainted is Apply that also returns what TaintedLinks would have
// returned before it, judging the new edges on the index it has just
// brought up to date rather than on an overlay it then throws away: the
// incremental update runs once per commit instead of twice. t holds the
// commit afterwards whether or not a link is tainted, so call it on a
// fork of the index that is dropped when the commit is refused (as the
// store does).
func (t *TrustIndex) ApplyTainted(s *State, changes []Change) []*TaintError {
	isNew := newDependencyEdges(s, changes)
	tx := &trustTxn{t: t, base: t.baseFor(s)}
	tx.update(s, changes, false)
	t.memo = nil
	if len(isNew) == 0 {
		return nil
	}
	return judgeNewEdges(tx, s, changes, isNew)
}

// newDependencyEdges returns the dependency edges changes made new: that
// did not exist before the commit and do in s, the state after it.
func newDependencyEdges(s *State, changes []Change) map[EdgeKey]bool {
	_, edges := netChanges(s, changes, false)
	isNew := make(map[EdgeKey]bool)
	for _, e := range edges {
		if !e.before && s.edge(e.k) != nil {
			isNew[e.k] = true
		}
	}
	return isNew
}

// judgeNewEdges returns, ordered by op, the TaintError of each edge of
// isNew whose target tx, which follows s (the state after the commit),
// holds unconfirmed; it empties isNew.
func judgeNewEdges(tx *trustTxn, s *State, changes []Change, isNew map[EdgeKey]bool) []*TaintError {
	// One explainer for the commit: each target's trust is computed once,
	// however many new edges point at it (a 10k-op commit onto one hub).
	ex := newExplainer(tx, s)
	var out []*TaintError
	for i := len(changes) - 1; i >= 0; i-- {
		c := &changes[i]
		k := c.Op.EdgeKey()
		if c.Op.Op != OpLink || c.Noop || !isNew[k] {
			continue
		}
		delete(isNew, k) // the last link of k in the commit is the one that stands
		if to, _ := tx.get(k.To); to.conf {
			continue
		}
		tr := ex.explain(k.To)
		e := &TaintError{Index: i, Edge: k, Roots: tr.Roots, Path: append([]string{k.From}, tr.Path...)}
		if tr.Status == StatusPoisonRoot {
			e.Roots = []string{k.To}
			e.Path = []string{k.From, k.To}
		}
		for _, r := range e.Roots {
			e.Reasons = append(e.Reasons, tx.reasonOf(r))
		}
		out = append(out, e)
	}
	slices.Reverse(out)
	return out
}

// CheckEnforce applies the enforce rule: it returns the first TaintError
// of TaintedLinks (errors.Is(err, ErrTainted)), or nil. Call it after
// ApplyOps and before t.Apply; on error undo the commit with s.Undo.
func CheckEnforce(s *State, t *TrustIndex, changes []Change) error {
	if errs := TaintedLinks(s, t, changes); len(errs) > 0 {
		return errs[0]
	}
	return nil
}
