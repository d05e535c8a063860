package web

import (
	"net/http"
	"slices"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Diff page limits.
const (
	// maxDiffRows bounds each list of the diff page.
	maxDiffRows = 500
	// maxFieldDiffs bounds the changed artifacts whose data is compared
	// field by field on one page.
	maxFieldDiffs = 100
	// maxFieldRows bounds the field changes shown per artifact.
	maxFieldRows = 50
	// maxFieldValue bounds each old or new value shown, in runes.
	maxFieldValue = 300
)

// diffView is what changed from one commit to another.
type diffView struct {
	FromRef, ToRef string
	From, To       *commitInfo
	Same           bool
	Artifacts      []artifactChange
	Edges          []edgeChange
	Trust          []trustChange
	// More counts rows left out of each list.
	MoreArtifacts, MoreEdges, MoreTrust int
	Branches                            []string
}

type artifactChange struct {
	Kind               string // added, removed, changed
	ID                 string
	OldType, NewType   string
	OldVersion         int64
	NewVersion         int64
	OldHash, NewHash   hashing.Digest
	OldProducer, NewBy string
	// Fields are the field-level changes of a changed artifact's data.
	Fields        []fieldChange
	FieldsMore    int
	FieldsOmitted bool
	// TrustOld and TrustNew are its trust change, when it has one.
	TrustOld, TrustNew graph.Status
	TrustChanged       bool
}

// fieldChange is one changed JSON pointer of an artifact's data.
type fieldChange struct {
	Pointer, Kind string
	Old, New      string
}

type edgeChange struct {
	Kind               string // added, removed, attrs changed
	From, Rel, To      string
	OldAttrs, NewAttrs string
}

type trustChange struct {
	ID       string
	Old, New graph.Status
	// Added is set when the artifact did not exist at the old commit.
	Added bool
}

// handleDiff compares two commits or branches with the store's diff:
// artifacts added, removed and changed (old and new version and hash, the
// changed JSON pointers of their data with old and new values, and their
// trust change beside them), edges, and every artifact whose trust
// changed. Query: from, to (default: to = ?at=
// or main, from = the first parent of to).
func (s *server) handleDiff(w http.ResponseWriter, r *http.Request, ctxID string) {
	ctx := r.Context()
	q := r.URL.Query()
	at := q.Get("at")
	view := diffView{FromRef: strings.TrimSpace(q.Get("from")), ToRef: strings.TrimSpace(q.Get("to"))}
	if _, err := s.store.GetContext(ctx, ctxID); err != nil {
		s.problem(w, r, storeProblem(err, "context"))
		return
	}
	toRef := view.ToRef
	if toRef == "" {
		toRef = at
	}
	to, err := s.store.Resolve(ctx, ctxID, toRef)
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit or branch "+quoteRef(toRef)+" in this context"))
		return
	}
	var from *replay.Commit
	switch {
	case view.FromRef != "":
		from, err = s.store.Resolve(ctx, ctxID, view.FromRef)
	case len(to.Parents) > 0:
		from, err = s.store.GetCommit(ctx, ctxID, to.Parents[0])
	default:
		from = to
	}
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit or branch "+quoteRef(view.FromRef)+" in this context"))
		return
	}
	view.From, view.To = newCommitInfo(from, ""), newCommitInfo(to, "")
	view.Same = from.ID == to.ID

	// The store's diff: what differs, read from the differing parts of
	// the two state maps, with trust changes.
	d, err := s.store.Diff(ctx, ctxID, from, to)
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit"))
		return
	}
	trustOf := map[string]replay.TrustChange{}
	for _, t := range d.Trust {
		trustOf[t.ID] = t
	}
	var arts []artifactChange
	for kind, list := range map[string][]replay.ArtifactChange{"added": d.Added, "removed": d.Removed, "changed": d.Changed} {
		for _, c := range list {
			ac := artifactChange{ID: c.ID, Kind: kind}
			if c.Old != nil {
				ac.OldType, ac.OldVersion, ac.OldHash, ac.OldProducer = c.Old.Type, c.Old.Version, c.Old.ContentHash, c.Old.ProducedBy
			}
			if c.New != nil {
				ac.NewType, ac.NewVersion, ac.NewHash, ac.NewBy = c.New.Type, c.New.Version, c.New.ContentHash, c.New.ProducedBy
			}
			if t, ok := trustOf[c.ID]; ok {
				ac.TrustOld, ac.TrustNew, ac.TrustChanged = t.Old, t.New, true
			}
			arts = append(arts, ac)
		}
	}
	slices.SortFunc(arts, func(a, b artifactChange) int { return compareIDs(a.ID, b.ID) })
	if len(arts) > maxDiffRows {
		view.MoreArtifacts = len(arts) - maxDiffRows
		arts = arts[:maxDiffRows]
	}
	fields := 0
	for i := range arts {
		ac := &arts[i]
		if ac.Kind != "changed" || ac.OldHash == ac.NewHash {
			continue
		}
		if fields >= maxFieldDiffs {
			ac.FieldsOmitted = true
			continue
		}
		fields++
		ac.Fields, ac.FieldsMore, err = s.fieldDiff(r, ctxID, from, to, ac.ID)
		if err != nil {
			s.problem(w, r, storeProblem(err, "artifact"))
			return
		}
	}
	view.Artifacts = arts
	for kind, list := range map[string][]replay.EdgeChange{"added": d.EdgesAdded, "removed": d.EdgesRemoved, "attrs changed": d.EdgesChanged} {
		for _, c := range list {
			ec := edgeChange{From: c.From, Rel: c.Rel, To: c.To, Kind: kind}
			if len(c.OldAttrs) > 0 {
				ec.OldAttrs, _ = prettyJSON(c.OldAttrs, 4<<10)
			}
			if len(c.NewAttrs) > 0 {
				ec.NewAttrs, _ = prettyJSON(c.NewAttrs, 4<<10)
			}
			view.Edges = append(view.Edges, ec)
		}
	}
	slices.SortFunc(view.Edges, func(a, b edgeChange) int {
		if c := compareIDs(a.From, b.From); c != 0 {
			return c
		}
		if c := strings.Compare(a.Rel, b.Rel); c != 0 {
			return c
		}
		return compareIDs(a.To, b.To)
	})
	if len(view.Edges) > maxDiffRows {
		view.MoreEdges = len(view.Edges) - maxDiffRows
		view.Edges = view.Edges[:maxDiffRows]
	}
	for _, t := range d.Trust {
		view.Trust = append(view.Trust, trustChange{ID: t.ID, Old: t.Old, New: t.New, Added: t.Old == ""})
	}
	slices.SortFunc(view.Trust, func(a, b trustChange) int { return compareIDs(a.ID, b.ID) })
	if len(view.Trust) > maxDiffRows {
		view.MoreTrust = len(view.Trust) - maxDiffRows
		view.Trust = view.Trust[:maxDiffRows]
	}
	shown := newCommitInfo(to, "")
	if bs, err := s.store.Branches(ctx, ctxID); err == nil {
		named := toRef
		if named == "" {
			named = store.DefaultBranch
		}
		for _, b := range bs {
			view.Branches = append(view.Branches, b.Name)
			if b.Name == named && b.Head == to.ID {
				shown.Branch = b.Name
			}
		}
	}
	p := &page{Title: "Diff · " + ctxID, Ctx: ctxID, Nav: "diff", At: at, Commit: shown,
		Keep: keep(q, "from", "to")}
	s.render(w, r, http.StatusOK, "diff", p, view)
}

// fieldDiff compares the data of artifact id at two commits (point
// lookups in their state maps) field by field.
func (s *server) fieldDiff(r *http.Request, ctxID string, from, to *replay.Commit, id string) ([]fieldChange, int, error) {
	var docs [2][]byte
	for i, c := range []*replay.Commit{from, to} {
		a, _, err := s.store.ArtifactAt(r.Context(), ctxID, c, id)
		if err != nil {
			return nil, 0, err
		}
		docs[i] = a.Data
	}
	return dataChanges(docs[0], docs[1])
}

// dataChanges is replay.DataDiff laid out for display: at most
// maxFieldRows rows (the count of the others is returned), values as
// compact JSON cut for reading.
func dataChanges(old, new []byte) ([]fieldChange, int, error) {
	dc, err := replay.DataDiff(old, new)
	if err != nil {
		return nil, 0, err
	}
	more := 0
	if len(dc) > maxFieldRows {
		more = len(dc) - maxFieldRows
		dc = dc[:maxFieldRows]
	}
	out := make([]fieldChange, 0, len(dc))
	for _, c := range dc {
		fc := fieldChange{Pointer: c.Pointer, Kind: c.Kind}
		if c.Old != nil {
			fc.Old = cut(string(c.Old), maxFieldValue)
		}
		if c.New != nil {
			fc.New = cut(string(c.New), maxFieldValue)
		}
		if fc.Pointer == "" {
			fc.Pointer = "(whole document)"
		}
		out = append(out, fc)
	}
	return out, more, nil
}

// compareIDs orders ids naturally (s2 before s10).
func compareIDs(a, b string) int {
	if c := naturalCompare(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}
