package web

import (
	"context"
	"fmt"
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
// type or producer, or differs in trust: the store's diff of the two
// states' maps, and the artifacts each side's trust index lists as
// unconfirmed (compareRuns).
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
	var reads [2]sideRead
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
			reads[i] = sideRead{commit: v.Commit, unconfirmed: unconfirmedOf(v.Trust)}
			return v.Err() // a list cut short by the read's end is not compared
		})
		if err != nil {
			what := "context " + quoteRef(side.Ctx) + " or commit " + quoteRef(side.At) + " (parameter " + name + ")"
			s.problem(w, r, storeProblem(err, what))
			return
		}
	}
	if err := s.compareRuns(ctx, &view, reads[0], reads[1]); err != nil {
		s.problem(w, r, storeProblem(err, "the states of "+quoteRef(view.A.Ctx)+" and "+quoteRef(view.B.Ctx)))
		return
	}
	view.Ready = true
	view.Same = view.A.Commit.ContextHash == view.B.Commit.ContextHash
	s.render(w, r, http.StatusOK, "compare", p, view)
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
	type diffRow struct {
		id, kind string
		a, b     *replay.ArtifactVersion // nil: to be looked up (same on both sides)
	}
	var inB []diffRow
	oneSide := make(map[string]bool, len(d.Added)+len(d.Removed))
	for _, ch := range d.Added {
		inB = append(inB, diffRow{id: ch.ID, kind: "only in B", b: ch.New})
		oneSide[ch.ID] = true
	}
	for _, ch := range d.Removed {
		oneSide[ch.ID] = true
	}
	view.OnlyB = len(d.Added)
	differs := map[string]bool{}
	versionOnly := map[string]replay.ArtifactChange{}
	for _, ch := range d.Changed {
		if ch.Old.ContentHash == ch.New.ContentHash && ch.Old.Type == ch.New.Type && ch.Old.ProducedBy == ch.New.ProducedBy {
			versionOnly[ch.ID] = ch
			continue
		}
		inB = append(inB, diffRow{id: ch.ID, kind: "differs", a: ch.Old, b: ch.New})
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
		inB = append(inB, row)
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
	slices.SortFunc(inB, func(x, y diffRow) int { return compareIDs(x.id, y.id) })
	shown := inB[:min(len(inB), maxCompareRows)]
	// A row of trust alone shows the artifact as both sides have it.
	var lookup []int
	for i, r := range shown {
		if r.a == nil && r.kind == "trust differs" {
			lookup = append(lookup, i)
		}
	}
	if len(lookup) > 0 {
		err := s.store.Read(ctx, view.B.Ctx, b.commit.ID.Hex(), func(v *store.View) error {
			for _, i := range lookup {
				art := v.State.Artifact(shown[i].id)
				if art == nil {
					return fmt.Errorf("%w: artifact %q, unconfirmed and unchanged, is not in the state", store.ErrCorrupt, shown[i].id)
				}
				ver := &replay.ArtifactVersion{Type: art.Type, Version: art.Version, ContentHash: art.ContentHash, ProducedBy: art.ProducedBy}
				shown[i].a, shown[i].b = ver, ver
			}
			return v.Err()
		})
		if err != nil {
			return err
		}
	}
	cell := func(ver *replay.ArtifactVersion, st graph.Status, url string) *compareCell {
		return &compareCell{Type: ver.Type, Version: ver.Version, Hash: ver.ContentHash, Status: st, URL: url}
	}
	for i, r := range inB {
		view.Differing++
		if i >= len(shown) {
			view.More++
			continue
		}
		row := compareRow{ID: r.id, Kind: r.kind, B: cell(r.b, b.unconfirmed.status(r.id), artifactURL(view.B.Ctx, r.id, b.commit.ID.Hex()))}
		if r.kind != "only in B" {
			row.A = cell(r.a, a.unconfirmed.status(r.id), artifactURL(view.A.Ctx, r.id, view.A.Commit.ID))
		}
		view.Rows = append(view.Rows, row)
	}
	removed := slices.Clone(d.Removed)
	slices.SortFunc(removed, func(x, y replay.ArtifactChange) int { return compareIDs(x.ID, y.ID) })
	view.OnlyA = len(removed)
	for _, ch := range removed {
		view.Differing++
		if len(view.Rows) >= maxCompareRows {
			view.More++
			continue
		}
		view.Rows = append(view.Rows, compareRow{ID: ch.ID, Kind: "only in A",
			A: cell(ch.Old, a.unconfirmed.status(ch.ID), artifactURL(view.A.Ctx, ch.ID, view.A.Commit.ID))})
	}
	return nil
}
