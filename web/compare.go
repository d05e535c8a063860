package web

import (
	"net/http"
	"slices"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
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

// compareEntry is what one side knows about an artifact.
type compareEntry struct {
	a      *graph.Artifact
	status graph.Status
}

// handleCompare compares two runs: the state of context ?a= at ?a_at=
// with that of ?b= at ?b_at= (branch heads of main by default). It shows
// both commits and context hashes — equal hashes mean the same state —
// and every artifact that exists on one side only, differs in content,
// type or producer, or differs in trust. Each state is read on its own.
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
	left := map[string]compareEntry{}
	for i, side := range []*compareSide{&view.A, &view.B} {
		name := "a"
		if i == 1 {
			name = "b"
		}
		if store.ValidateContextID(side.Ctx) != nil {
			s.problem(w, r, &problem{Code: codeNotFound, Detail: "no context " + quoteRef(side.Ctx) + " (parameter " + name + ")"})
			return
		}
		err := s.store.Read(ctx, side.Ctx, side.At, func(v *store.View) error {
			side.Commit = newCommitInfo(v.Commit, v.Branch)
			side.Summary = v.Trust.Summary()
			if i == 0 {
				left = sideEntries(v)
				return nil
			}
			compareWith(v, left, &view)
			return nil
		})
		if err != nil {
			what := "context " + quoteRef(side.Ctx) + " or commit " + quoteRef(side.At) + " (parameter " + name + ")"
			s.problem(w, r, storeProblem(err, what))
			return
		}
	}
	// What is left in the map exists in A only.
	var onlyA []string
	for id := range left {
		onlyA = append(onlyA, id)
	}
	naturalSort(onlyA)
	for _, id := range onlyA {
		view.OnlyA++
		view.Differing++
		if len(view.Rows) >= maxCompareRows {
			view.More++
			continue
		}
		e := left[id]
		view.Rows = append(view.Rows, compareRow{ID: id, Kind: "only in A", A: &compareCell{Type: e.a.Type, Version: e.a.Version, Hash: e.a.ContentHash, Status: e.status,
			URL: artifactURL(view.A.Ctx, id, view.A.Commit.ID)}})
	}
	view.Ready = true
	view.Same = view.A.Commit.ContextHash == view.B.Commit.ContextHash
	s.render(w, r, http.StatusOK, "compare", p, view)
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
		c := *a // the view is valid only inside the callback
		c.Data = nil
		out[a.ID] = compareEntry{a: &c, status: unconfirmed.status(a.ID)}
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
		b   compareEntry
		inA bool
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
		case e.a.ContentHash != a.ContentHash || e.a.Type != a.Type || e.a.ProducedBy != a.ProducedBy:
			row.Kind = "differs"
			view.Changed++
		case e.status != bs:
			row.Kind = "trust differs"
			view.TrustDiffs++
		default:
			return true
		}
		b := *a
		b.Data = nil
		diffs = append(diffs, differing{row: row, b: compareEntry{a: &b, status: bs}, inA: inA})
		if inA {
			diffs[len(diffs)-1].row.A = &compareCell{Type: e.a.Type, Version: e.a.Version, Hash: e.a.ContentHash, Status: e.status,
				URL: artifactURL(view.A.Ctx, a.ID, view.A.Commit.ID)}
		}
		return true
	})
	slices.SortFunc(diffs, func(x, y differing) int { return compareIDs(x.row.ID, y.row.ID) })
	for _, d := range diffs {
		view.Differing++
		if len(view.Rows) >= maxCompareRows {
			view.More++
			continue
		}
		b := d.b.a
		d.row.B = &compareCell{Type: b.Type, Version: b.Version, Hash: b.ContentHash, Status: d.b.status, URL: artifactURL(view.B.Ctx, b.ID, v.Commit.ID.Hex())}
		view.Rows = append(view.Rows, d.row)
	}
}
