package web

import (
	"io"
	"net/http"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// maxAuditRows bounds the artifacts, and the sources, an audit page lists
// (the report's first: nearest to the answer, then by id), and the report
// a page puts in its Markdown and Mermaid text areas. A deeper report is
// downloaded whole (?format=json or markdown): the page of a 100,000-deep
// chain was 65 MB of HTML that took seconds to build and no browser could
// use.
const maxAuditRows = 1000

// maxAuditNames bounds the ids a page names in one place: the poison
// roots of the verdict, the artifacts that name one source. The rest are
// counted.
const maxAuditNames = 20

// maxAuditCopy bounds the Markdown and the Mermaid flowchart a page puts
// in its text areas, in bytes (a report within maxAuditRows artifacts can
// still have tens of thousands of edges, or roots repeated on every row);
// maxAuditCopyEdges is the most edges a report may have for the page to
// build them at all (each edge a line of each, at least 64 bytes).
const (
	maxAuditCopy      = 1 << 20
	maxAuditCopyEdges = maxAuditCopy / 64
)

// auditView is the audit report of one answer.
type auditView struct {
	Report *graph.AuditReport
	// Rows are the report's artifacts the page lists (at most
	// maxAuditRows), Sources its sources (as many); Said holds the short
	// text of each of Rows.
	Rows    []graph.AuditArtifact
	Sources []auditSourceRow
	Said    map[string]string
	Answer  string
	// Roots are the answer's poison roots the verdict names (at most
	// maxAuditNames), MoreRoots how many it leaves out.
	Roots     []string
	MoreRoots int
	// Markdown and Mermaid are the report's texts to copy, empty when
	// they would pass maxAuditRows artifacts or maxAuditCopy bytes;
	// JSONURL and MarkdownURL download the report whole, at the commit
	// the page shows.
	Markdown, Mermaid    string
	JSONURL, MarkdownURL string
}

// auditSourceRow is one source as the page lists it: its locator, the
// first maxAuditNames artifacts that name it, and how many more do.
type auditSourceRow struct {
	Locator string
	Named   []string
	More    int
}

// firstNames returns ids cut to maxAuditNames, and how many it left out.
func firstNames(ids []string) ([]string, int) {
	n := min(len(ids), maxAuditNames)
	return ids[:n], len(ids) - n
}

// Truncated reports whether the page lists fewer artifacts than the
// report holds.
func (v auditView) Truncated() bool { return len(v.Rows) < len(v.Report.Artifacts) }

// MaxRows is maxAuditRows, for the page to name.
func (v auditView) MaxRows() int { return maxAuditRows }

// SourcesTruncated reports whether the page lists fewer sources than the
// report holds.
func (v auditView) SourcesTruncated() bool { return len(v.Sources) < len(v.Report.Sources) }

// TooLongToCopy reports whether the page leaves the Markdown and the
// flowchart out.
func (v auditView) TooLongToCopy() bool { return v.Markdown == "" }

// auditFormat is a download of the whole report: its content type and
// its file name.
type auditFormat struct{ contentType, file string }

// auditFormats are the ?format= values of an audit page besides the page
// itself: the whole report as a download.
var auditFormats = map[string]auditFormat{
	"json":     {"application/json", "audit.json"},
	"markdown": {"text/markdown; charset=utf-8", "audit.md"},
}

// auditDownloadURL is the address of the whole report of id's audit in
// format (a key of auditFormats).
func auditDownloadURL(ctx, id, at, format string) string {
	return idURL(ctx, "audit", id, "at", at, "format", format)
}

// handleAudit shows what an answer rests on over dependency edges, with
// trust and sources, and the same report as Markdown and the dependency
// graph as Mermaid in text areas to copy. Both texts come from the graph
// package, which escapes every client string for its format; here they are
// only ever text content.
//
// With ?format=json or ?format=markdown it answers the whole report as a
// download instead, the JSON streamed as the API's audit writes it.
func (s *server) handleAudit(w http.ResponseWriter, r *http.Request, ctxID, id string) {
	at := r.URL.Query().Get("at")
	format := r.URL.Query().Get("format")
	if _, ok := auditFormats[format]; format != "" && !ok {
		s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "parameter format: must be json or markdown (or absent, for the page)"})
		return
	}
	var view auditView
	var shown *commitInfo
	_, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		answer := v.State.Artifact(id)
		if answer == nil {
			return &problem{Code: codeNotFound, Detail: "no artifact with this id at commit " + v.Commit.ID.Short()}
		}
		rep, wv, err := v.Audit(r.Context(), id)
		if err != nil {
			return err
		}
		view.Report = rep
		if format != "" {
			return nil
		}
		view.Rows = rep.Artifacts[:min(len(rep.Artifacts), maxAuditRows)]
		for _, src := range rep.Sources[:min(len(rep.Sources), maxAuditRows)] {
			named, more := firstNames(src.Artifacts)
			view.Sources = append(view.Sources, auditSourceRow{Locator: src.Locator, Named: named, More: more})
		}
		view.Roots, view.MoreRoots = firstNames(rep.Trust.Roots)
		view.Said = map[string]string{}
		for _, aa := range view.Rows {
			if art := v.State.Artifact(aa.ID); art != nil {
				view.Said[aa.ID] = cut(s.said.get(art, v.Data), saidRow)
			}
		}
		view.Answer = s.said.get(answer, v.Data)
		// The downloads name the commit shown, not the ref: a commit
		// landing meanwhile does not change the report they give.
		pinned := v.Commit.ID.String()
		view.JSONURL, view.MarkdownURL = auditDownloadURL(ctxID, id, pinned, "json"), auditDownloadURL(ctxID, id, pinned, "markdown")
		if len(rep.Artifacts) > maxAuditRows || len(rep.Edges) > maxAuditCopyEdges {
			return nil
		}
		md := rep.Markdown()
		if len(md) > maxAuditCopy {
			return nil
		}
		sg := &graph.Subgraph{Edges: rep.Edges}
		for _, a := range rep.Artifacts {
			if art := wv.State.Artifact(a.ID); art != nil {
				sg.Nodes = append(sg.Nodes, art)
			}
		}
		if mm := graph.Mermaid(sg, wv.Trust.Explainer(wv.State)); len(mm) <= maxAuditCopy {
			view.Markdown, view.Mermaid = md, mm
		}
		return nil
	})
	if !ok {
		return
	}
	if format != "" {
		s.downloadAudit(w, r, view.Report, format)
		return
	}
	p := &page{Title: "Audit · " + id, Ctx: ctxID, Nav: "audit", At: at, Commit: shown}
	s.render(w, r, http.StatusOK, "audit", p, view)
}

// downloadAudit answers rep whole in format (a key of auditFormats), as
// an attachment: a browser saves it rather than shows it.
func (s *server) downloadAudit(w http.ResponseWriter, r *http.Request, rep *graph.AuditReport, format string) {
	f := auditFormats[format]
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", `attachment; filename="`+f.file+`"`)
	serverTiming(h, r)
	if format == "markdown" {
		_, _ = io.WriteString(w, rep.Markdown())
		return
	}
	if err := service.WriteAuditJSON(w, rep); err != nil {
		// Part of the report may be on its way: all that is left is to
		// stop, and say so in the log.
		s.log.Warn("web: audit download cut short", "path", r.URL.Path, "err", err)
	}
}
