package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Display limits of the artifact page.
const (
	maxDataBytes = 256 << 10 // pretty-printed data shown
	maxEdgeRows  = 500       // per direction
)

// artifactView is one artifact at one commit.
type artifactView struct {
	ID          string
	Type        string
	Version     int64
	ContentHash hashing.Digest
	ProducedBy  string
	// Wrote is the commit that wrote this version.
	Wrote hashing.Digest

	Data          string
	DataBytes     int
	DataTruncated bool

	Trust graph.Trust
	Roots []rootRow

	Out, In          []edgeRow
	OutMore, InMore  int
	History          []store.Version
	HistoryTruncated bool

	// Said is the short text of what it said.
	Said string
	// VersionDiff compares this version with the one ?vs= names.
	VersionDiff *versionDiff
	// PrevOf maps a version's commit (hex) to a link comparing it with
	// the version before it.
	PrevOf map[string]string

	// Verdict and Reason are a fetch_verdict's; Receipt its data.receipt.
	Verdict, VerdictReason string
	Receipt                *receiptView
}

// versionDiff is the field-level difference between two versions.
type versionDiff struct {
	OldVersion, NewVersion int64
	OldCommit, NewCommit   string
	Fields                 []fieldChange
	More                   int
	Same                   bool
}

type rootRow struct {
	ID     string
	Type   string
	Reason string
	Blast  int
}

// edgeRow is one edge seen from the artifact: Other is the artifact at
// the far end.
type edgeRow struct {
	From, Rel, To string
	Other         string
	OtherStatus   graph.Status
	Depends       bool
	Attrs         string
}

// errAbsentHere is the artifact page's read finding no artifact with the
// id at the commit shown.
var errAbsentHere = errors.New("artifact absent at this commit")

// handleArtifact shows an artifact: its data, trust (with the path to its
// poison root), edges both ways, version history and, for a
// fetch_verdict, its receipt.
func (s *server) handleArtifact(w http.ResponseWriter, r *http.Request, ctxID, id string) {
	at := r.URL.Query().Get("at")
	var view artifactView
	var shown *commitInfo
	var commit replay.Commit
	var absent bool
	_, ok := s.readOr(w, r, ctxID, func(err error) bool {
		absent = errors.Is(err, errAbsentHere)
		return absent
	}, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		commit = *v.Commit
		a := v.State.Artifact(id)
		if a == nil {
			return errAbsentHere
		}
		view.ID, view.Type, view.Version, view.ContentHash, view.ProducedBy = a.ID, a.Type, a.Version, a.ContentHash, a.ProducedBy
		data, err := v.Data(a)
		if err != nil {
			return err
		}
		view.DataBytes = len(data)
		view.Said = said(a.Type, data)
		view.Data, view.DataTruncated = prettyJSON(data, maxDataBytes)
		if a.Type == "fetch_verdict" {
			view.Verdict, view.VerdictReason = graph.VerdictFromData(data)
			view.Receipt = parseReceipt(data)
		}
		view.Trust = v.Trust.Explain(v.State, id)
		for _, root := range view.Trust.Roots {
			ra := v.State.Artifact(root)
			row := rootRow{ID: root, Reason: v.Trust.Explain(v.State, root).Reason}
			if ra != nil {
				row.Type = ra.Type
			}
			view.Roots = append(view.Roots, row)
		}
		rels := v.State.Relations()
		out, in := v.State.Out(id), v.State.In(id)
		view.Out, view.OutMore = edgeRows(v, rels, out, false)
		view.In, view.InMore = edgeRows(v, rels, in, true)
		return nil
	})
	if absent {
		// Not at this commit (slid back past its creation, or a later
		// delete): say so, and keep the control to slide on.
		pr := &problem{Code: codeNotFound, Detail: "no artifact with this id at commit " + commit.ID.Short() + "; move along the branch to a commit that has it"}
		if wantsJSON(r) {
			s.problem(w, r, pr)
			return
		}
		body := problemJSON{Type: problemTypePrefix + string(pr.Code), Title: problemTitles[pr.Code],
			Status: http.StatusNotFound, Detail: pr.Detail, Instance: r.URL.Path}
		w.Header().Set("Cache-Control", "no-store")
		p := &page{Title: problemTitles[pr.Code], Ctx: ctxID, Nav: "artifact", At: at, Commit: shown, Keep: keep(r.URL.Query(), "vs"), TravelOnError: true}
		s.render(w, r, http.StatusNotFound, "problem", p, body)
		return
	}
	if !ok {
		return
	}
	hist, err := s.store.History(r.Context(), ctxID, &commit, id)
	if err != nil {
		s.problem(w, r, storeProblem(err, "artifact"))
		return
	}
	if len(hist) > 0 {
		view.Wrote = hist[0].Commit
	}
	if len(hist) > 200 {
		hist, view.HistoryTruncated = hist[:200], true
	}
	view.History = hist
	view.PrevOf = map[string]string{}
	for i := 0; i+1 < len(hist); i++ {
		view.PrevOf[hist[i].Commit.Hex()] = artifactURL(ctxID, id, hist[i].Commit.Hex()) + "&vs=" + hist[i+1].Commit.Hex()
	}
	if vs := r.URL.Query().Get("vs"); vs != "" {
		other, err := s.store.Resolve(r.Context(), ctxID, vs)
		if err != nil {
			s.problem(w, r, storeProblem(err, "commit "+quoteRef(vs)+" (parameter vs)"))
			return
		}
		old, _, err := s.store.ArtifactAt(r.Context(), ctxID, other, id)
		if err != nil {
			s.problem(w, r, storeProblem(err, "artifact "+quoteRef(id)+" at commit "+other.ID.Short()+" (parameter vs)"))
			return
		}
		cur, _, err := s.store.ArtifactAt(r.Context(), ctxID, &commit, id)
		if err != nil {
			s.problem(w, r, storeProblem(err, "artifact"))
			return
		}
		vd := &versionDiff{OldVersion: old.Version, NewVersion: cur.Version, OldCommit: other.ID.Hex(), NewCommit: commit.ID.Hex(),
			Same: old.ContentHash == cur.ContentHash}
		if vd.Fields, vd.More, err = dataChanges(old.Data, cur.Data); err != nil {
			s.problem(w, r, storeProblem(err, "artifact"))
			return
		}
		view.VersionDiff = vd
	}
	p := &page{Title: id, Ctx: ctxID, Nav: "artifact", At: at, Commit: shown, Keep: keep(r.URL.Query(), "vs")}
	s.render(w, r, http.StatusOK, "artifact", p, view)
}

func edgeRows(v *store.View, rels graph.Relations, edges []*graph.Edge, incoming bool) ([]edgeRow, int) {
	more := 0
	if len(edges) > maxEdgeRows {
		more = len(edges) - maxEdgeRows
		edges = edges[:maxEdgeRows]
	}
	rows := make([]edgeRow, 0, len(edges))
	for _, e := range edges {
		other := e.To
		if incoming {
			other = e.From
		}
		row := edgeRow{From: e.From, Rel: e.Rel, To: e.To, Other: other,
			OtherStatus: v.Trust.Status(other), Depends: rels.Depends(e.Rel)}
		if len(e.Attrs) > 0 {
			row.Attrs, _ = prettyJSON(e.Attrs, 4<<10)
		}
		rows = append(rows, row)
	}
	return rows, more
}

// prettyJSON indents canonical JSON for display, cut at limit bytes.
func prettyJSON(raw []byte, limit int) (string, bool) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	if buf.Len() > limit {
		return string(bytes.ToValidUTF8(buf.Bytes()[:limit], nil)), true
	}
	return buf.String(), false
}

// receiptView is a fetch verdict's receipt laid out for reading. Known
// members get their own rows in a fixed order; any others follow, sorted.
type receiptView struct {
	Fields    []field
	Redirects []redirectRow
	Layers    []layerRow
	Lists     []listField
}

type field struct{ Name, Value string }

type redirectRow struct{ Status, URL string }

type layerRow struct{ Layer, Verdict, Reason, Detail string }

type listField struct {
	Name  string
	Items []string
}

// receiptOrder is the display order of the receipt members gate/v1 writes.
var receiptOrder = []string{"verdict", "layer", "reason", "ruleset", "url", "final_url", "status", "error",
	"content_type", "content_encoding", "kind", "charset", "title", "raw_bytes", "decoded_bytes",
	"extracted_bytes", "readable_chars", "body_sha256"}

// parseReceipt reads data.receipt; nil when there is none. Every value is
// kept as text: URLs are shown, never linked or loaded.
func parseReceipt(data []byte) *receiptView {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(top["receipt"], &m) != nil || m == nil {
		return nil
	}
	rv := &receiptView{}
	done := map[string]bool{}
	for _, k := range receiptOrder {
		if raw, ok := m[k]; ok {
			rv.Fields = append(rv.Fields, field{Name: k, Value: jsonText(raw)})
			done[k] = true
		}
	}
	if raw, ok := m["redirects"]; ok {
		done["redirects"] = true
		var hops []map[string]json.RawMessage
		if json.Unmarshal(raw, &hops) == nil {
			for _, h := range hops {
				rv.Redirects = append(rv.Redirects, redirectRow{Status: jsonText(h["status"]), URL: jsonText(h["url"])})
			}
		} else {
			rv.Fields = append(rv.Fields, field{Name: "redirects", Value: jsonText(raw)})
		}
	}
	if raw, ok := m["layers"]; ok {
		done["layers"] = true
		var layers []map[string]json.RawMessage
		if json.Unmarshal(raw, &layers) == nil {
			for _, l := range layers {
				rv.Layers = append(rv.Layers, layerRow{Layer: jsonText(l["layer"]), Verdict: jsonText(l["verdict"]),
					Reason: jsonText(l["reason"]), Detail: jsonText(l["detail"])})
			}
		} else {
			rv.Fields = append(rv.Fields, field{Name: "layers", Value: jsonText(raw)})
		}
	}
	for _, k := range []string{"signals", "notes"} {
		raw, ok := m[k]
		if !ok {
			continue
		}
		done[k] = true
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			rv.Fields = append(rv.Fields, field{Name: k, Value: jsonText(raw)})
			continue
		}
		lf := listField{Name: k}
		for _, it := range items {
			lf.Items = append(lf.Items, jsonText(it))
		}
		rv.Lists = append(rv.Lists, lf)
	}
	var rest []string
	for k := range m {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		rv.Fields = append(rv.Fields, field{Name: k, Value: jsonText(m[k])})
	}
	return rv
}

// jsonText renders a JSON value as display text: a string as itself, null
// or absent as "", anything else as compact JSON.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return strconv.Quote(string(raw))
}
