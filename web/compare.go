package web

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// maxCompareRows bounds the differing artifacts listed.
const maxCompareRows = 500

// compareView is two runs side by side.
type compareView struct {
	A, B       compareSide
	Ready      bool
	Same       bool
	Rows       []compareRow
	More       int
	Differing  int
	OnlyA      int
	OnlyB      int
	Changed    int
	TrustDiffs int
	Contexts   []string
}

type compareSide struct {
	Ctx, At string
	Commit  *commitInfo
	Summary graph.TrustSummary
}

type compareRow struct {
	ID     string
	Kind   string // "only in A", "only in B", "differs", "trust differs"
	A, B   *compareCell
	Detail string
}

type compareCell struct {
	Type    string
	Version int64
	Hash    hashing.Digest
	Status  graph.Status
	Said    string
	URL     string
}

// handleCompare compares two runs: the state of context ?a= at ?a_at=
// with that of ?b= at ?b_at= (branch heads of main by default). It shows
// both commits and context hashes — equal hashes mean the same state —
// and every artifact that exists on one side only, differs in content,
// type or producer, or differs in trust, found the way that reads least
// (compare).
func (s *server) handleCompare(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	view := compareView{
		A: compareSide{Ctx: strings.TrimSpace(q.Get("a")), At: strings.TrimSpace(q.Get("a_at"))},
		B: compareSide{Ctx: strings.TrimSpace(q.Get("b")), At: strings.TrimSpace(q.Get("b_at"))},
	}
	if infos, err := s.store.ListContexts(ctx); err == nil {
		for i, info := range infos {
			if i >= 500 {
				break
			}
			view.Contexts = append(view.Contexts, info.ID)
		}
	}
	p := &page{Title: "Compare runs", Nav: "compare"}
	if view.A.Ctx == "" || view.B.Ctx == "" {
		s.render(w, r, http.StatusOK, "compare", p, view)
		return
	}
	for _, side := range []*compareSide{&view.A, &view.B} {
		if store.ValidateContextID(side.Ctx) != nil {
			s.problem(w, r, &problem{Code: codeNotFound, Detail: "no context " + quoteRef(side.Ctx) + " (parameter " + view.param(side) + ")"})
			return
		}
	}
	if side, err := s.compare(ctx, &view); err != nil {
		what := "the states of " + quoteRef(view.A.Ctx) + " and " + quoteRef(view.B.Ctx)
		if side != nil {
			what = "context " + quoteRef(side.Ctx) + " or commit " + quoteRef(side.At) + " (parameter " + view.param(side) + ")"
		}
		s.problem(w, r, storeProblem(err, what))
		return
	}
	view.Ready = true
	view.Same = view.A.Commit.ContextHash == view.B.Commit.ContextHash
	s.render(w, r, http.StatusOK, "compare", p, view)
}

// compare reads both sides of view (each side's commit and trust
// summary) and fills its rows and counts, the way that reads least:
//
//   - two commits of one context: the store's diff of their maps
//     (compareRuns), which skips what the maps share — after a small
//     change, nearly all of them;
//   - two contexts: their maps share nothing (an entry names the commit
//     that wrote it), and a diff would read both whole, edges and index
//     included, so it passes once over each side's artifacts instead
//     (sideEntries, compareWith): 5.6–5.8 s for a million artifacts
//     against a small run, where the diff took 15 s (docs/BENCHMARKS.md).
//
// A read that fails returns its side.
func (s *server) compare(ctx context.Context, view *compareView) (*compareSide, error) {
	sameContext := view.A.Ctx == view.B.Ctx
	var reads [2]sideRead
	var left map[string]compareEntry
	for i, side := range []*compareSide{&view.A, &view.B} {
		err := s.store.Read(ctx, side.Ctx, side.At, func(v *store.View) error {
			side.Commit = newCommitInfo(v.Commit, v.Branch)
			side.Summary = v.Trust.Summary()
			switch {
			case sameContext:
				reads[i] = sideRead{commit: v.Commit, unconfirmed: unconfirmedOf(v.Trust)}
			case i == 0:
				left = sideEntries(v)
			default:
				compareWith(v, left, view)
			}
			return v.Err() // what a cut read listed is not compared
		})
		if err != nil {
			return side, err
		}
	}
	if sameContext {
		return nil, s.compareRuns(ctx, view, reads[0], reads[1])
	}
	onlyInA(left, view)
	return nil, nil
}

// sideRead is what the comparison keeps of one side's read: its commit
// and the artifacts its trust index lists as unconfirmed.
type sideRead struct {
	commit      *replay.Commit
	unconfirmed unconfirmedSet
}

// compareRuns fills view's rows and counts from the store's diff of the
// two sides' state maps (Store.DiffStates: what differs, read without
// loading either state — for two commits of one context, only the parts
// their maps do not share) and the two sides' unconfirmed artifacts: an
// artifact whose status differs is unconfirmed on one side at least.
// The rows of the artifacts side B has come first, then those only A
// has, each in natural id order, up to maxCompareRows (the rest counted
// in More).
func (s *server) compareRuns(ctx context.Context, view *compareView, a, b sideRead) error {
	d := &replay.DiffResult{}
	if a.commit.ContextHash != b.commit.ContextHash {
		var err error
		if d, err = s.store.DiffStates(ctx, a.commit, b.commit); err != nil {
			return err
		}
	}
	inB := classifyDiff(d, a, b, view)
	slices.SortFunc(inB, func(x, y diffRow) int { return compareIDs(x.id, y.id) })
	shown := inB[:min(len(inB), maxCompareRows)]
	if err := s.lookUpUnchanged(ctx, view.B.Ctx, b.commit, shown); err != nil {
		return err
	}
	for _, r := range inB {
		if view.room() {
			row := compareRow{ID: r.id, Kind: r.kind, B: cellOf(*r.b, b.unconfirmed.status(r.id), artifactURL(view.B.Ctx, r.id, b.commit.ID.Hex()))}
			if r.kind != "only in B" {
				row.A = cellOf(*r.a, a.unconfirmed.status(r.id), artifactURL(view.A.Ctx, r.id, view.A.Commit.ID))
			}
			view.Rows = append(view.Rows, row)
		}
	}
	removed := d.Removed // the diff is this comparison's own
	slices.SortFunc(removed, func(x, y replay.ArtifactChange) int { return compareIDs(x.ID, y.ID) })
	view.OnlyA = len(removed)
	for _, ch := range removed {
		if view.room() {
			view.Rows = append(view.Rows, compareRow{ID: ch.ID, Kind: "only in A",
				A: cellOf(*ch.Old, a.unconfirmed.status(ch.ID), artifactURL(view.A.Ctx, ch.ID, view.A.Commit.ID))})
		}
	}
	return nil
}

// diffRow is a row of compareRuns before its cells: the artifact as each
// side has it, nil where a row of trust alone still has to look it up
// (the same on both sides).
type diffRow struct {
	id, kind string
	a, b     *replay.ArtifactVersion
}

// classifyDiff returns, unsorted, the rows of the artifacts side B has
// that differ — only in B, other content, or trust alone — and counts
// them in view. An artifact on one side only or of other content is
// listed as such whatever its trust; one whose version alone changed (a
// content written and then written back) differs only if its trust does.
func classifyDiff(d *replay.DiffResult, a, b sideRead, view *compareView) []diffRow {
	var rows []diffRow
	oneSide := make(map[string]bool, len(d.Added)+len(d.Removed))
	for _, ch := range d.Added {
		rows = append(rows, diffRow{id: ch.ID, kind: "only in B", b: ch.New})
		oneSide[ch.ID] = true
	}
	for _, ch := range d.Removed {
		oneSide[ch.ID] = true
	}
	view.OnlyB = len(d.Added)
	differs := map[string]bool{}
	versionOnly := map[string]replay.ArtifactChange{}
	for _, ch := range d.Changed {
		if ch.Old.SameContent(*ch.New) {
			versionOnly[ch.ID] = ch
			continue
		}
		rows = append(rows, diffRow{id: ch.ID, kind: "differs", a: ch.Old, b: ch.New})
		differs[ch.ID] = true
		view.Changed++
	}
	trustDiffers := func(id string) {
		if oneSide[id] || differs[id] || a.unconfirmed.status(id) == b.unconfirmed.status(id) {
			return
		}
		row := diffRow{id: id, kind: "trust differs"}
		if ch, ok := versionOnly[id]; ok {
			row.a, row.b = ch.Old, ch.New
		}
		rows = append(rows, row)
		view.TrustDiffs++
	}
	for id := range a.unconfirmed {
		trustDiffers(id)
	}
	for id := range b.unconfirmed {
		if _, seen := a.unconfirmed[id]; !seen {
			trustDiffers(id)
		}
	}
	return rows
}

// lookUpUnchanged fills in the artifacts of the rows that still lack
// them (rows of trust alone, whose artifact the diff did not name: the
// same on both sides), each looked up at commit c of context ctxID.
func (s *server) lookUpUnchanged(ctx context.Context, ctxID string, c *replay.Commit, rows []diffRow) error {
	var lookup []int
	for i, r := range rows {
		if r.a == nil {
			lookup = append(lookup, i)
		}
	}
	if len(lookup) == 0 {
		return nil
	}
	return s.store.Read(ctx, ctxID, c.ID.Hex(), func(v *store.View) error {
		for _, i := range lookup {
			art := v.State.Artifact(rows[i].id)
			if art == nil {
				return fmt.Errorf("%w: artifact %q, unconfirmed and unchanged, is not in the state", store.ErrCorrupt, rows[i].id)
			}
			ver := replay.VersionOf(art)
			rows[i].a, rows[i].b = &ver, &ver
		}
		return v.Err()
	})
}

// compareEntry is what a pass over side A knows of an artifact.
type compareEntry struct {
	ver    replay.ArtifactVersion
	status graph.Status
}

// sideEntries returns the artifacts of v's state, without their data,
// with their trust, in one pass over the state: each status comes from
// the few artifacts the trust index lists as unconfirmed
// (unconfirmedOf), not from a lookup per artifact — over a state map a
// million lookups took seconds.
func sideEntries(v *store.View) map[string]compareEntry {
	unconfirmed := unconfirmedOf(v.Trust)
	out := make(map[string]compareEntry, v.State.NumArtifacts())
	v.State.RangeArtifacts(func(a *graph.Artifact) bool {
		out[a.ID] = compareEntry{ver: replay.VersionOf(a), status: unconfirmed.status(a.ID)}
		return true
	})
	return out
}

// compareWith passes once over side B's state against the entries of
// side A, taking every matched id out of left, and appends the rows that
// differ, in natural id order, up to maxCompareRows (counting the rest in
// More).
func compareWith(v *store.View, left map[string]compareEntry, view *compareView) {
	unconfirmed := unconfirmedOf(v.Trust)
	type differing struct {
		row compareRow
		b   replay.ArtifactVersion
		st  graph.Status
	}
	var diffs []differing
	v.State.RangeArtifacts(func(a *graph.Artifact) bool {
		bs := unconfirmed.status(a.ID)
		e, inA := left[a.ID]
		delete(left, a.ID)
		row := compareRow{ID: a.ID}
		switch {
		case !inA:
			row.Kind = "only in B"
			view.OnlyB++
		case !e.ver.SameContent(replay.VersionOf(a)):
			row.Kind = "differs"
			view.Changed++
		case e.status != bs:
			row.Kind = "trust differs"
			view.TrustDiffs++
		default:
			return true
		}
		if inA {
			row.A = cellOf(e.ver, e.status, artifactURL(view.A.Ctx, a.ID, view.A.Commit.ID))
		}
		diffs = append(diffs, differing{row: row, b: replay.VersionOf(a), st: bs})
		return true
	})
	slices.SortFunc(diffs, func(x, y differing) int { return compareIDs(x.row.ID, y.row.ID) })
	for _, d := range diffs {
		if view.room() {
			d.row.B = cellOf(d.b, d.st, artifactURL(view.B.Ctx, d.row.ID, v.Commit.ID.Hex()))
			view.Rows = append(view.Rows, d.row)
		}
	}
}

// onlyInA appends the rows of the artifacts compareWith left in left
// (side A's alone), in natural id order.
func onlyInA(left map[string]compareEntry, view *compareView) {
	ids := slices.Collect(maps.Keys(left))
	naturalSort(ids)
	view.OnlyA = len(ids)
	for _, id := range ids {
		if view.room() {
			e := left[id]
			view.Rows = append(view.Rows, compareRow{ID: id, Kind: "only in A", A: cellOf(e.ver, e.status, artifactURL(view.A.Ctx, id, view.A.Commit.ID))})
		}
	}
}

// room counts one more differing artifact and reports whether its row
// is shown: the first maxCompareRows are, the rest are counted in More.
func (v *compareView) room() bool {
	v.Differing++
	if len(v.Rows) >= maxCompareRows {
		v.More++
		return false
	}
	return true
}

// param names the query parameter of one side of v: "a" or "b".
func (v *compareView) param(side *compareSide) string {
	if side == &v.B {
		return "b"
	}
	return "a"
}

// cellOf is one side's cell of a row: the artifact's version there, its
// trust there, and the link to it.
func cellOf(ver replay.ArtifactVersion, st graph.Status, url string) *compareCell {
	return &compareCell{Type: ver.Type, Version: ver.Version, Hash: ver.ContentHash, Status: st, URL: url}
}
