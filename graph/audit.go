package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/hashing"
)

// AuditMeta identifies the state an audit was taken from.
type AuditMeta struct {
	Context     string `json:"context"`
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
}

// AuditArtifact is one artifact an answer rests on. Depth is its distance
// in dependency edges from the answer (0 for the answer itself).
type AuditArtifact struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Version     int64          `json:"version"`
	ContentHash hashing.Digest `json:"content_hash"`
	ProducedBy  string         `json:"produced_by"`
	Depth       int            `json:"depth"`
	Trust       Trust          `json:"trust"`
}

// AuditSource is one distinct URL or locator found in the walked
// artifacts' data, with the ids of the artifacts that name it (sorted).
type AuditSource struct {
	Locator   string   `json:"locator"`
	Artifacts []string `json:"artifacts"`
}

// AuditReport answers "why did it say that?" for one answer: everything it
// rests on over dependency edges, with trust, the edges, and the sources.
type AuditReport struct {
	AuditMeta
	Answer string `json:"answer"`
	// Trust is the answer's trust.
	Trust Trust `json:"trust"`
	// Artifacts are sorted by depth, then id; the answer comes first.
	Artifacts []AuditArtifact `json:"artifacts"`
	// Edges are the dependency edges among Artifacts, sorted.
	Edges   []*Edge       `json:"edges"`
	Sources []AuditSource `json:"sources"`
	// Summary counts Artifacts by status.
	Summary TrustSummary `json:"summary"`
}

// DataFunc gives the data of arts, in their order (an entry may be nil).
type DataFunc func(arts []*Artifact) ([]json.RawMessage, error)

// AuditDataWindow is how many artifacts' data Audit asks a DataFunc for
// at a time: enough for one batched read, few enough that an audit of a
// deep chain never holds every payload at once.
const AuditDataWindow = 1024

// sourceFields are the top-level data members whose string values Audit
// collects as sources.
var sourceFields = []string{"url", "final_url", "locator", "source_url"}

// Audit walks the dependency edges from answerID and reports every artifact
// reached (id, type, version, content hash, producer, trust), the edges
// walked and the distinct source locators named in the artifacts' data
// (the string values of their top-level "url", "final_url", "locator" and
// "source_url" members).
// trust gives an artifact's trust (TrustReport.Trust, or a closure over
// TrustIndex.Explain); when nil the trust is computed with s.Base(nil):
// the definitions in force at the state. data gives the data of the
// artifacts reached, in the report's order, AuditDataWindow at a call (a
// store reads each window in one batch, and a window's payloads are
// dropped before the next is read); nil takes each artifact's Data. An
// error from data is returned wrapped. The error wraps ErrNotFound when
// answerID does not exist.
func Audit(s *State, answerID string, trust func(id string) Trust, data DataFunc, meta AuditMeta) (*AuditReport, error) {
	if s.art(answerID) == nil {
		return nil, fmt.Errorf("graph: audit %q: %w", answerID, ErrNotFound)
	}
	if trust == nil {
		trust = ComputeTrust(s, s.Base(nil)).Trust
	}
	r := &AuditReport{AuditMeta: meta, Answer: answerID, Edges: []*Edge{}, Sources: []AuditSource{}}
	// depth[i] is the depth of order[i]: the walk is breadth first, so
	// the artifacts of one depth are a run of the order, and sorting each
	// run by id sorts the whole by depth, then id.
	depth := []int{0}
	order := s.walkProvenance(answerID, func(from int, e *Edge, reached bool) bool {
		r.Edges = append(r.Edges, e)
		if reached {
			depth = append(depth, depth[from]+1)
		}
		return true
	})
	SortEdges(r.Edges)
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && depth[hi] == depth[lo] {
			hi++
		}
		slices.Sort(order[lo:hi])
		lo = hi
	}
	arts := make([]*Artifact, len(order))
	for i, id := range order {
		arts[i] = s.art(id)
	}
	if data == nil {
		data = func(arts []*Artifact) ([]json.RawMessage, error) {
			out := make([]json.RawMessage, len(arts))
			for i, a := range arts {
				out[i] = a.Data
			}
			return out, nil
		}
	}
	sources := map[string][]string{}
	r.Artifacts = make([]AuditArtifact, 0, len(order))
	var datas []json.RawMessage
	for i, id := range order {
		if i%AuditDataWindow == 0 {
			// The next window's payloads; the last window's are dropped.
			window := arts[i:min(i+AuditDataWindow, len(arts))]
			var err error
			if datas, err = data(window); err != nil {
				return nil, fmt.Errorf("graph: audit %q: %w", answerID, err)
			}
			if len(datas) != len(window) {
				return nil, fmt.Errorf("graph: audit %q: data gave %d payloads for %d artifacts", answerID, len(datas), len(window))
			}
		}
		a := arts[i]
		tr := trust(id)
		r.Artifacts = append(r.Artifacts, AuditArtifact{ID: id, Type: a.Type, Version: a.Version,
			ContentHash: a.ContentHash, ProducedBy: a.ProducedBy, Depth: depth[i], Trust: tr})
		switch tr.Status {
		case StatusConfirmed:
			r.Summary.Confirmed++
		case StatusQuarantined:
			r.Summary.Quarantined++
		case StatusPoisonRoot:
			r.Summary.PoisonRoots++
		}
		for _, loc := range locators(datas[i%AuditDataWindow]) {
			if l := sources[loc]; len(l) == 0 || l[len(l)-1] != id {
				sources[loc] = append(l, id)
			}
		}
	}
	r.Trust = r.Artifacts[0].Trust
	for loc, ids := range sources {
		slices.Sort(ids)
		r.Sources = append(r.Sources, AuditSource{Locator: loc, Artifacts: ids})
	}
	slices.SortFunc(r.Sources, func(a, b AuditSource) int { return strings.Compare(a.Locator, b.Locator) })
	return r, nil
}

// ProvenanceWithin reports whether artifact id and every artifact it rests
// on over dependency edges — the artifacts Audit reports for it — number
// at most limit. It stops at the first artifact past limit, so it reads
// the outgoing edges of at most limit artifacts: a caller can ask cheaply
// whether a walk is small before it decides how to read a big state. An
// id the state lacks has nothing to walk (true for any limit ≥ 0).
func (s *State) ProvenanceWithin(id string, limit int) bool {
	if s.art(id) == nil {
		return limit >= 0
	}
	if limit < 1 {
		return false
	}
	n := 1
	within := true
	s.walkProvenance(id, func(_ int, _ *Edge, reached bool) bool {
		if reached {
			if n == limit {
				within = false
				return false
			}
			n++
		}
		return true
	})
	return within
}

// walkProvenance walks the dependency edges from id breadth first — what
// an audit of id reports — calling edge with each edge walked, the
// position in the walk's order of the artifact it leaves, and whether it
// reaches an artifact for the first time; the walk stops when edge
// returns false. It returns the artifacts reached, id first, in the order
// reached.
func (s *State) walkProvenance(id string, edge func(from int, e *Edge, reached bool) bool) []string {
	seen := map[string]bool{id: true}
	order := []string{id}
	for i := 0; i < len(order); i++ {
		for k, e := range s.outOf(order[i]).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			reached := !seen[k.To]
			if !edge(i, e, reached) {
				return order
			}
			if reached {
				seen[k.To] = true
				order = append(order, k.To)
			}
		}
	}
	return order
}

// locators returns the non-empty string values of sourceFields in data.
func locators(data json.RawMessage) []string {
	// Stored payloads are canonical JSON, which writes member names
	// unescaped: a payload that names none of the fields has neither
	// substring, and is not decoded (most are not; decoding each into a
	// map was most of what a deep audit allocated).
	if len(data) == 0 || !bytes.Contains(data, []byte("url")) && !bytes.Contains(data, []byte("locator")) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	var out []string
	for _, f := range sourceFields {
		if v := jsonString(m[f]); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Markdown renders the report as a Markdown document. Every value that
// comes from clients (ids, types, producers, reasons, locators) is
// escaped and placed in a table cell, so it cannot start a block, close a
// cell, open a link or code span, or inject HTML.
func (r *AuditReport) Markdown() string {
	var b strings.Builder
	row := func(cells ...string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + c + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("# Audit report\n\n")
	row("", "")
	row("---", "---")
	row("Context", MarkdownText(r.Context))
	row("Commit", MarkdownText(r.Commit))
	row("Context hash", MarkdownText(r.ContextHash))
	row("Answer", MarkdownText(r.Answer))
	row("Trust", trustText(r.Trust))
	row("Artifacts", fmt.Sprintf("%d (%d confirmed, %d quarantined, %d poison roots)",
		len(r.Artifacts), r.Summary.Confirmed, r.Summary.Quarantined, r.Summary.PoisonRoots))

	fmt.Fprintf(&b, "\n## Artifacts\n\n")
	row("depth", "id", "type", "version", "content hash", "produced by", "trust")
	row("---:", "---", "---", "---:", "---", "---", "---")
	for _, a := range r.Artifacts {
		row(strconv.Itoa(a.Depth), MarkdownText(a.ID), MarkdownText(a.Type), strconv.FormatInt(a.Version, 10),
			"`"+a.ContentHash.String()+"`", MarkdownText(a.ProducedBy), trustText(a.Trust))
	}

	fmt.Fprintf(&b, "\n## Edges\n\n")
	if len(r.Edges) == 0 {
		b.WriteString("None.\n")
	} else {
		row("from", "relation", "to")
		row("---", "---", "---")
		for _, e := range r.Edges {
			row(MarkdownText(e.From), MarkdownText(e.Rel), MarkdownText(e.To))
		}
	}

	fmt.Fprintf(&b, "\n## Sources\n\n")
	if len(r.Sources) == 0 {
		b.WriteString("None.\n")
	} else {
		row("locator", "named by")
		row("---", "---")
		for _, src := range r.Sources {
			ids := make([]string, len(src.Artifacts))
			for i, id := range src.Artifacts {
				ids[i] = MarkdownText(id)
			}
			row(MarkdownText(src.Locator), strings.Join(ids, ", "))
		}
	}
	return b.String()
}

func trustText(t Trust) string {
	switch t.Status {
	case StatusPoisonRoot:
		return "**poison root**: " + MarkdownText(t.Reason)
	case StatusQuarantined:
		roots := make([]string, len(t.Roots))
		for i, r := range t.Roots {
			roots[i] = MarkdownText(r)
		}
		path := make([]string, len(t.Path))
		for i, p := range t.Path {
			path[i] = MarkdownText(p)
		}
		s := "**quarantined**; roots: " + strings.Join(roots, ", ") + "; path: " + strings.Join(path, " → ")
		if t.PathTruncated {
			s += " …"
		}
		return s
	case StatusConfirmed:
		return "confirmed"
	}
	return "unknown"
}

// MarkdownText escapes s for use as inline text in a Markdown table cell:
// line breaks and other control characters become spaces; &, < and >
// become HTML entities; and the characters that open emphasis, code,
// links, strikethrough or close a cell (\ ` * _ [ ] | ~ !) are
// backslash-escaped.
func MarkdownText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029:
			b.WriteByte(' ')
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case strings.ContainsRune("\\`*_[]|~!", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
