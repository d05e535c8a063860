package web

import (
	"net/http"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// maxAuditSaid bounds the rows of an audit that get their short text.
const maxAuditSaid = 1000

// auditView is the audit report of one answer.
type auditView struct {
	Report *graph.AuditReport
	// Said holds the short text of each artifact of the report (the
	// first maxAuditSaid).
	Said     map[string]string
	Answer   string
	Markdown string
	Mermaid  string
}

// handleAudit shows what an answer rests on over dependency edges, with
// trust and sources, and the same report as Markdown and the dependency
// graph as Mermaid in text areas to copy. Both texts come from the graph
// package, which escapes every client string for its format; here they are
// only ever text content.
func (s *server) handleAudit(w http.ResponseWriter, r *http.Request, ctxID, id string) {
	at := r.URL.Query().Get("at")
	var view auditView
	var shown *commitInfo
	_, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		if v.State.Artifact(id) == nil {
			return &problem{Code: codeNotFound, Detail: "no artifact with this id at commit " + v.Commit.ID.Short()}
		}
		rep, wv, err := v.Audit(r.Context(), id)
		if err != nil {
			return err
		}
		view.Report = rep
		view.Said = map[string]string{}
		for i, aa := range rep.Artifacts {
			if i >= maxAuditSaid {
				break
			}
			if art := v.State.Artifact(aa.ID); art != nil {
				view.Said[aa.ID] = cut(s.said.get(art, v.Data), saidRow)
			}
		}
		if art := v.State.Artifact(id); art != nil {
			view.Answer = s.said.get(art, v.Data)
		}
		view.Markdown = rep.Markdown()
		sg := &graph.Subgraph{Edges: rep.Edges}
		for _, a := range rep.Artifacts {
			if art := wv.State.Artifact(a.ID); art != nil {
				sg.Nodes = append(sg.Nodes, art)
			}
		}
		view.Mermaid = graph.Mermaid(sg, wv.Trust.Explainer(wv.State))
		return nil
	})
	if !ok {
		return
	}
	p := &page{Title: "Audit · " + id, Ctx: ctxID, Nav: "audit", At: at, Commit: shown}
	s.render(w, r, http.StatusOK, "audit", p, view)
}
