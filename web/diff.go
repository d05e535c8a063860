package web

import (
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// maxDiffRows bounds each list of the diff page.
const maxDiffRows = 500

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

// handleDiff compares two commits or branches: artifacts added, removed
// and changed (old and new version and hash), edges added and removed, and
// every artifact whose trust changed. Query: from, to (default: to = ?at=
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

	changes, err := s.store.DiffCommits(ctx, from, to)
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit"))
		return
	}
	for _, c := range changes {
		switch c.Kind {
		case "artifact":
			if len(view.Artifacts) >= maxDiffRows {
				view.MoreArtifacts++
				continue
			}
			ac := artifactChange{ID: c.ID, Kind: "changed"}
			if c.Old != nil {
				ac.OldType, ac.OldVersion, ac.OldHash, ac.OldProducer = c.Old.Type, c.Old.Version, c.Old.ContentHash, c.Old.ProducedBy
			} else {
				ac.Kind = "added"
			}
			if c.New != nil {
				ac.NewType, ac.NewVersion, ac.NewHash, ac.NewBy = c.New.Type, c.New.Version, c.New.ContentHash, c.New.ProducedBy
			} else {
				ac.Kind = "removed"
			}
			view.Artifacts = append(view.Artifacts, ac)
		case "edge":
			if len(view.Edges) >= maxDiffRows {
				view.MoreEdges++
				continue
			}
			ec := edgeChange{From: c.Edge.From, Rel: c.Edge.Rel, To: c.Edge.To, Kind: "attrs changed"}
			switch {
			case c.Added:
				ec.Kind = "added"
			case c.Removed:
				ec.Kind = "removed"
			}
			if len(c.OldAttrs) > 0 {
				ec.OldAttrs, _ = prettyJSON(c.OldAttrs, 4<<10)
			}
			if len(c.NewAttrs) > 0 {
				ec.NewAttrs, _ = prettyJSON(c.NewAttrs, 4<<10)
			}
			view.Edges = append(view.Edges, ec)
		}
	}

	// Trust changes: the status of every artifact at both commits. Each
	// state is read on its own (never one Read inside another).
	if !view.Same {
		before, err := s.statuses(r, ctxID, from)
		if err != nil {
			s.problem(w, r, storeProblem(err, "commit"))
			return
		}
		err = s.store.ReadCommit(ctx, ctxID, to, func(v *store.View) error {
			for _, id := range v.State.ArtifactIDs() {
				now := v.Trust.Status(id)
				old, existed := before[id]
				if (existed && old != now) || (!existed && now != graph.StatusConfirmed) {
					if len(view.Trust) >= maxDiffRows {
						view.MoreTrust++
						continue
					}
					view.Trust = append(view.Trust, trustChange{ID: id, Old: old, New: now, Added: !existed})
				}
			}
			return nil
		})
		if err != nil {
			s.problem(w, r, storeProblem(err, "commit"))
			return
		}
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

// statuses returns every artifact's trust status at commit c.
func (s *server) statuses(r *http.Request, ctxID string, c *replay.Commit) (map[string]graph.Status, error) {
	var out map[string]graph.Status
	err := s.store.ReadCommit(r.Context(), ctxID, c, func(v *store.View) error {
		ids := v.State.ArtifactIDs()
		out = make(map[string]graph.Status, len(ids))
		for _, id := range ids {
			out[id] = v.Trust.Status(id)
		}
		return nil
	})
	return out, err
}
