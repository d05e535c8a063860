package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Time travel limits.
const (
	// maxChain bounds the commits one slider steps through: the newest
	// maxChain commits of a branch (older ones stay reachable with ?at=).
	maxChain = 20_000
	// maxStepDiff is the largest step (in ops) whose summary lists what
	// it changed artifact by artifact, with trust; a larger step is
	// summarized by its counts (a bulk load), the diff page has the rest.
	maxStepDiff = 2_000
	// stepNames bounds the changed artifacts and trust changes a step
	// summary names.
	stepNames = 6
	// nearbySteps is how many commits around the shown one the list
	// under the slider shows.
	nearbySteps = 12
)

// travel is the time-travel control every context page carries: a slider
// over the commits of one branch (its first-parent chain, oldest first),
// the shown commit's step on it, links to the same view one step before
// and after, and what changed at the shown step.
type travel struct {
	// Branch is the branch stepped through; "" when the shown commit is on
	// no branch's recent chain (the slider then ends at the shown commit).
	Branch string
	// On is the branch the form carries (?on=); "" for main.
	On string
	// Len is the number of steps; Pos the shown commit's (1-based).
	Len, Pos int
	// Keep are the query parameters of the page the form carries over
	// (every value, repeated ones too), at= and step= aside.
	Keep []param
	// First, Prev, Next and Last are the same view at those steps ("" at
	// the ends, or when that step is the one shown).
	First, Prev, Next, Last string
	// Step is what changed at the shown commit.
	Step *stepSummary
	// Nearby are the commits around the shown one, newest first.
	Nearby []timelineRow
}

// stepSummary is what one commit changed against its first parent.
type stepSummary struct {
	Ops int
	// Root is set for a context's first commit (no parent).
	Root bool
	// Merge is set for a commit with more than one parent; the summary is
	// against the first.
	Merge bool
	// Large is set for a step of more than maxStepDiff ops: only the
	// counts below are known (from the two commits' records).
	Large                   bool
	Added, Changed, Removed int
	EdgesAdded, EdgesGone   int
	EdgesChanged            int
	// ArtifactsDelta and EdgesDelta are the state's growth (Large steps).
	ArtifactsDelta, EdgesDelta int
	// Names are the first changed artifacts, Trust the first trust
	// changes; NamesMore and TrustMore count the others.
	Names     []stepName
	NamesMore int
	Trust     []trustChange
	TrustMore int
	// TrustCount is the number of trust changes.
	TrustCount int
	DiffURL    string
}

// stepName is one artifact a step changed.
type stepName struct {
	Kind, ID, URL string
}

// Empty reports whether the step changed nothing in the state.
func (st *stepSummary) Empty() bool {
	return !st.Large && st.Added+st.Changed+st.Removed+st.EdgesAdded+st.EdgesGone+st.EdgesChanged+st.TrustCount == 0
}

// chain is a first-parent chain of commits, oldest first, ending at the
// head it was built from. seqs are increasing (a parent's Seq is lower),
// so a commit is found by binary search on its Seq.
type chain struct {
	ids  []hashing.Digest
	seqs []uint64
}

func (c *chain) find(cm *replay.Commit) int {
	i, ok := slices.BinarySearch(c.seqs, cm.Seq)
	if !ok || c.ids[i] != cm.ID {
		return -1
	}
	return i
}

// commitKey keys a commit of a context in the travel caches.
func commitKey(ctxID string, id hashing.Digest) string { return ctxID + "\x00" + string(id[:]) }

// chainTo returns the first-parent chain ending at head (its newest
// maxChain commits). A chain is immutable, so it is cached by its head;
// a head one commit past a cached one costs one commit read.
func (s *server) chainTo(ctx context.Context, ctxID string, head *replay.Commit) (*chain, error) {
	if c, ok := s.chains.Get(commitKey(ctxID, head.ID)); ok {
		return c, nil
	}
	var walked []*replay.Commit // newest first
	var base *chain
	cur := head
	for len(walked) < maxChain {
		if len(walked) > 0 {
			if c, ok := s.chains.Get(commitKey(ctxID, cur.ID)); ok {
				base = c
				break
			}
		}
		walked = append(walked, cur)
		if len(cur.Parents) == 0 {
			break
		}
		next, err := s.store.GetCommit(ctx, ctxID, cur.Parents[0])
		if err != nil {
			return nil, err
		}
		cur = next
	}
	n := len(walked)
	if base != nil {
		n += len(base.ids)
	}
	skip := max(0, n-maxChain)
	out := &chain{ids: make([]hashing.Digest, 0, n-skip), seqs: make([]uint64, 0, n-skip)}
	if base != nil {
		out.ids = append(out.ids, base.ids[min(skip, len(base.ids)):]...)
		out.seqs = append(out.seqs, base.seqs[min(skip, len(base.seqs)):]...)
		skip = max(0, skip-len(base.ids))
	}
	for i := len(walked) - 1 - skip; i >= 0; i-- {
		out.ids = append(out.ids, walked[i].ID)
		out.seqs = append(out.seqs, walked[i].Seq)
	}
	s.chains.Put(commitKey(ctxID, head.ID), out)
	return out, nil
}

// travelChain chooses the chain the slider of a page showing commit c
// steps through: c's own branch when c is a branch head; else the branch
// on (?on=), main, or another branch whose chain holds c; else the chain
// ending at c. It returns the branch ("" for the last case), the chain
// and c's index on it.
func (s *server) travelChain(ctx context.Context, ctxID string, c *replay.Commit, branch, on string) (string, *chain, int, error) {
	if branch != "" {
		ch, err := s.chainTo(ctx, ctxID, c)
		if err != nil {
			return "", nil, 0, err
		}
		return branch, ch, len(ch.ids) - 1, nil
	}
	names := []string{}
	if on != "" && store.ValidateBranch(on) == nil {
		names = append(names, on)
	}
	names = append(names, store.DefaultBranch)
	if bs, err := s.store.Branches(ctx, ctxID); err == nil {
		for i, b := range bs {
			if i >= 8 {
				break
			}
			names = append(names, b.Name)
		}
	}
	tried := map[string]bool{}
	for _, name := range names {
		if tried[name] {
			continue
		}
		tried[name] = true
		head, err := s.store.Resolve(ctx, ctxID, name)
		if err != nil || head.Seq < c.Seq {
			continue
		}
		ch, err := s.chainTo(ctx, ctxID, head)
		if err != nil {
			return "", nil, 0, err
		}
		if i := ch.find(c); i >= 0 {
			return name, ch, i, nil
		}
	}
	ch, err := s.chainTo(ctx, ctxID, c)
	if err != nil {
		return "", nil, 0, err
	}
	return "", ch, len(ch.ids) - 1, nil
}

// travelQuery is the page's query without what the control sets: at=,
// step=, on=, and the pagination (log=, page=); on the diff page also
// from= and to= (moving there shows what changed at the step).
func travelQuery(r *http.Request, nav string) url.Values {
	q := r.URL.Query()
	for _, k := range []string{"at", "step", "on", "log", "page"} {
		q.Del(k)
	}
	if nav == "diff" {
		q.Del("from")
		q.Del("to")
	}
	return q
}

// travelURL is the page at path with q, at= set to ref and on= to the
// branch stepped through (left out for main).
func travelURL(path string, q url.Values, ref, on string) string {
	q2 := url.Values{}
	for k, vs := range q {
		q2[k] = vs
	}
	if ref != "" {
		q2.Set("at", ref)
	}
	if on != "" && on != store.DefaultBranch {
		q2.Set("on", on)
	}
	return path + queryPrefix(q2.Encode())
}

// travelControl fills p.Travel (and p.Timeline, its nearby commits) for a
// context page showing p.Commit. Failures leave the control out: the page
// is still worth showing.
func (s *server) travelControl(r *http.Request, p *page) {
	ctx := r.Context()
	c, err := s.store.Resolve(ctx, p.Ctx, p.Commit.ID)
	if err != nil {
		return
	}
	q := r.URL.Query()
	branch, ch, pos, err := s.travelChain(ctx, p.Ctx, c, p.Commit.Branch, q.Get("on"))
	if err != nil {
		s.log.Warn("web: time travel", "context", p.Ctx, "err", err)
		return
	}
	keepQ := travelQuery(r, p.Nav)
	path := r.URL.EscapedPath()
	tv := &travel{Branch: branch, Len: len(ch.ids), Pos: pos + 1}
	if branch != store.DefaultBranch {
		tv.On = branch
	}
	names := make([]string, 0, len(keepQ))
	for k := range keepQ {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range keepQ[k] {
			tv.Keep = append(tv.Keep, formParam(k, v))
		}
	}
	at := func(i int) string {
		if i < 0 || i >= len(ch.ids) || i == pos {
			return ""
		}
		return travelURL(path, keepQ, ch.ids[i].Hex(), branch)
	}
	tv.First, tv.Prev, tv.Next, tv.Last = at(0), at(pos-1), at(pos+1), at(len(ch.ids)-1)
	if branch != "" && pos == len(ch.ids)-1 && p.Commit.Branch == "" {
		tv.Last = "" // the shown commit is the head: Latest says so
	}
	tv.Step = s.stepOf(ctx, p.Ctx, c)
	p.Travel = tv

	// The nearby commits, newest first: up to nearbySteps around pos.
	lo := max(0, pos-nearbySteps/2)
	hi := min(len(ch.ids), lo+nearbySteps)
	lo = max(0, hi-nearbySteps)
	for i := hi - 1; i >= lo; i-- {
		cm, err := s.store.GetCommit(ctx, p.Ctx, ch.ids[i])
		if err != nil {
			return
		}
		row := timelineRow{Short: cm.ID.Short(), ID: cm.ID.String(), Message: cut(cm.Message, 80), Time: cm.Time, Ops: cm.NumOps,
			URL: travelURL(path, keepQ, cm.ID.Hex(), branch), Current: i == pos, Step: i + 1}
		if len(cm.Parents) > 0 {
			row.DiffURL = ctxURL(p.Ctx, "") + "/diff" + query("from", cm.Parents[0].Hex(), "to", cm.ID.Hex())
		}
		p.Timeline = append(p.Timeline, row)
	}
	if p.Commit.Branch == "" {
		b := branch
		if b == "" {
			b = store.DefaultBranch
		}
		p.Latest = travelURL(path, keepQ, b, "")
	}
}

// stepOf summarizes what commit c changed against its first parent, from
// the store's diff (cached by commit: a commit never changes). A step of
// more than maxStepDiff ops is summarized from the commits' counts.
func (s *server) stepOf(ctx context.Context, ctxID string, c *replay.Commit) *stepSummary {
	key := commitKey(ctxID, c.ID)
	if st, ok := s.steps.Get(key); ok {
		return st
	}
	st := &stepSummary{Ops: c.NumOps, Merge: len(c.Parents) > 1}
	if len(c.Parents) == 0 {
		st.Root = true
		s.steps.Put(key, st)
		return st
	}
	parent, err := s.store.GetCommit(ctx, ctxID, c.Parents[0])
	if err != nil {
		s.log.Warn("web: step summary", "context", ctxID, "err", err)
		return nil
	}
	st.DiffURL = ctxURL(ctxID, "") + "/diff" + query("from", parent.ID.Hex(), "to", c.ID.Hex())
	if c.NumOps > maxStepDiff {
		st.Large = true
		st.ArtifactsDelta, st.EdgesDelta = c.Artifacts-parent.Artifacts, c.Edges-parent.Edges
		s.steps.Put(key, st)
		return st
	}
	d, err := s.store.Diff(ctx, ctxID, parent, c)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("web: step summary", "context", ctxID, "err", err)
		}
		return nil
	}
	summarizeStep(st, d, func(id string) string { return artifactURL(ctxID, id, c.ID.Hex()) })
	s.steps.Put(key, st)
	return st
}

// summarizeStep counts a diff into st and names its first changes.
func summarizeStep(st *stepSummary, d *replay.DiffResult, urlOf func(id string) string) {
	st.Added, st.Changed, st.Removed = len(d.Added), len(d.Changed), len(d.Removed)
	st.EdgesAdded, st.EdgesGone, st.EdgesChanged = len(d.EdgesAdded), len(d.EdgesRemoved), len(d.EdgesChanged)
	var names []stepName
	for kind, list := range map[string][]replay.ArtifactChange{"added": d.Added, "changed": d.Changed, "removed": d.Removed} {
		for _, a := range list {
			n := stepName{Kind: kind, ID: a.ID}
			if kind != "removed" {
				n.URL = urlOf(a.ID)
			}
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b stepName) int { return compareIDs(a.ID, b.ID) })
	if len(names) > stepNames {
		st.NamesMore = len(names) - stepNames
		names = names[:stepNames]
	}
	st.Names = names
	st.TrustCount = len(d.Trust)
	for _, t := range d.Trust {
		st.Trust = append(st.Trust, trustChange{ID: t.ID, Old: t.Old, New: t.New, Added: t.Old == ""})
	}
	slices.SortFunc(st.Trust, func(a, b trustChange) int { return compareIDs(a.ID, b.ID) })
	if len(st.Trust) > stepNames {
		st.TrustMore = len(st.Trust) - stepNames
		st.Trust = st.Trust[:stepNames]
	}
}

// handleStep answers the time-travel form (?step=N, with ?on= naming the
// branch, main by default): a redirect to the same page and query at the
// Nth commit of that branch's chain (1 is the oldest). It reports false
// when the request has no step= (the page then renders as usual).
func (s *server) handleStep(w http.ResponseWriter, r *http.Request, ctxID, nav string) bool {
	q := r.URL.Query()
	if !q.Has("step") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(q.Get("step")))
	if err != nil || n < 1 {
		s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "step: a step number of at least 1 (1 is the oldest commit of the branch)"})
		return true
	}
	on := q.Get("on")
	if on == "" {
		on = store.DefaultBranch
	}
	if store.ValidateBranch(on) != nil {
		s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "on: a branch name"})
		return true
	}
	ctx := r.Context()
	head, err := s.store.Resolve(ctx, ctxID, on)
	if err != nil {
		s.problem(w, r, storeProblem(err, "branch "+quoteRef(on)+" in this context"))
		return true
	}
	ch, err := s.chainTo(ctx, ctxID, head)
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit"))
		return true
	}
	n = min(n, len(ch.ids))
	target := travelURL(r.URL.EscapedPath(), travelQuery(r, nav), ch.ids[n-1].Hex(), on)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusSeeOther)
	return true
}

// stepLine is the one-line text of a step summary, as the list and the
// banner show it: "3 ops: +1 artifact, 2 edges added; trust of 1 changed".
func stepLine(st *stepSummary) string {
	if st == nil {
		return ""
	}
	if st.Root {
		return "the context was created"
	}
	var parts []string
	add := func(n int, one, many, how string) {
		if n != 0 {
			parts = append(parts, plural(n, one, many)+" "+how)
		}
	}
	if st.Large {
		grow := func(n int, one, many string) {
			if n < 0 {
				add(-n, one, many, "fewer")
			} else {
				add(n, one, many, "more")
			}
		}
		grow(st.ArtifactsDelta, "artifact", "artifacts")
		grow(st.EdgesDelta, "edge", "edges")
	} else {
		add(st.Added, "artifact", "artifacts", "added")
		add(st.Changed, "artifact", "artifacts", "changed")
		add(st.Removed, "artifact", "artifacts", "removed")
		add(st.EdgesAdded, "edge", "edges", "added")
		add(st.EdgesChanged, "edge", "edges", "changed")
		add(st.EdgesGone, "edge", "edges", "removed")
		if st.TrustCount > 0 {
			parts = append(parts, "trust of "+plural(st.TrustCount, "artifact", "artifacts")+" changed")
		}
	}
	head := plural(st.Ops, "op", "ops")
	if len(parts) == 0 {
		return head + ": nothing changed in the state"
	}
	return fmt.Sprintf("%s: %s", head, strings.Join(parts, ", "))
}
