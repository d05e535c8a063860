package web

import (
	"net/http"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// maxQuarantineRows bounds the quarantined list of one page.
const maxQuarantineRows = 1000

// quarantineView is the trust report of a state.
type quarantineView struct {
	Summary     graph.TrustSummary
	Roots       []rootRow
	Quarantined []quarantinedRow
	// More counts quarantined artifacts left out of the list.
	More int
}

type quarantinedRow struct {
	ID            string
	Type          string
	Roots         []string
	Path          []string
	PathTruncated bool
}

// handleQuarantine lists the poison roots with their reasons and blast
// radius, then every quarantined artifact with its roots and one path.
func (s *server) handleQuarantine(w http.ResponseWriter, r *http.Request, ctxID string) {
	at := r.URL.Query().Get("at")
	var view quarantineView
	var shown *commitInfo
	_, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		view.Summary = v.Trust.Summary()
		rep := v.Trust.Report(v.State)
		for _, root := range rep.PoisonRoots {
			row := rootRow{ID: root.ID, Reason: root.Reason, Blast: root.BlastRadius}
			if a := v.State.Artifact(root.ID); a != nil {
				row.Type = a.Type
			}
			view.Roots = append(view.Roots, row)
		}
		for i, t := range rep.Quarantined {
			if i >= maxQuarantineRows {
				view.More = len(rep.Quarantined) - i
				break
			}
			row := quarantinedRow{ID: t.ID, Roots: t.Roots, Path: t.Path, PathTruncated: t.PathTruncated}
			if a := v.State.Artifact(t.ID); a != nil {
				row.Type = a.Type
			}
			view.Quarantined = append(view.Quarantined, row)
		}
		return nil
	})
	if !ok {
		return
	}
	p := &page{Title: "Quarantine · " + ctxID, Ctx: ctxID, Nav: "quarantine", At: at, Commit: shown}
	s.render(w, r, http.StatusOK, "quarantine", p, view)
}
