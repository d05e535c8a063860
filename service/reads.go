package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// The reads every door answers alike: HTTP (httpapi) and the MCP tools
// (mcp.InProcess) call these with a view they opened, so that a read's
// rules — what is missing, the bounds of a walk, the formats — are
// written once. The doors keep only their transport: query parameters,
// ETags, media types.

// MissingArtifact is the not-found refusal of an artifact that view v
// does not hold, naming the parameter id (NotFoundParam).
func MissingArtifact(id string, v *store.View) error {
	return NotFoundParam("id", fmt.Sprintf("no artifact %q at commit %s", id, v.Commit.ID.Short()))
}

// NameRef names the parameter param a ref was given in when err is the
// store's refusal of that ref: an ambiguous commit prefix (an
// ambiguous-ref *fault.Error with an entry of rule "unique_prefix") says
// which ref to lengthen, or, for a branch's name that is a commit's
// prefix too (store.BranchOrCommitError), how to name each; a ref that
// names no branch or commit of the context (store.UnknownRefError) is a
// not-found with an entry of rule "exists". Every door's query and path
// parameters that name a ref (at, from, to, commit, a, b) and the body
// members (RefAt) go through it. Other errors, a missing context among
// them, are returned as they are.
func NameRef(err error, param string) error {
	var unknown *store.UnknownRefError
	switch {
	case errors.As(err, &unknown):
		e := Classify(err)
		e.Errors = append(e.Errors, fault.FieldError{Parameter: param, Rule: RuleExists, Detail: "no branch or commit of the context has this name or id"})
		return e
	case !errors.Is(err, store.ErrAmbiguous):
		return err
	}
	e := Classify(err)
	detail := "matches more than one commit; give more digits"
	var both *store.BranchOrCommitError
	if errors.As(err, &both) {
		detail = fmt.Sprintf("names branch %s (at %s) and commit %s; give sha256:%s for the commit, or the branch's head %s", both.Ref, both.Head.Short(), both.Commit.Short(), both.Ref, both.Head.Short())
	}
	e.Errors = append(e.Errors, fault.FieldError{Parameter: param, Rule: "unique_prefix", Detail: detail})
	return e
}

// CheckEnum checks a query parameter that takes one of a few values and
// returns it, or the first value when v is empty; the refusal is an
// invalid-query *fault.Error naming the parameter and the rule "enum".
func CheckEnum(param, v string, values ...string) (string, error) {
	if v == "" {
		return values[0], nil
	}
	for _, ok := range values {
		if v == ok {
			return v, nil
		}
	}
	return "", &fault.Error{Code: fault.InvalidQuery, Detail: fmt.Sprintf("%s must be one of %s", param, strings.Join(values, ", ")),
		Errors: []fault.FieldError{{Parameter: param, Rule: "enum", Detail: "want " + strings.Join(values, ", ")}}}
}

// CheckRange checks an integer query parameter against [lo, hi]; the
// refusal is an invalid-query *fault.Error naming the parameter and the
// rule "range".
func CheckRange(param string, v, lo, hi int) error {
	if v < lo || v > hi {
		return rangeError(param, lo, hi)
	}
	return nil
}

// ParseRange parses an integer query parameter's text and checks it
// against [lo, hi]; text that is not a decimal integer (or overflows one)
// gets the same refusal as a number out of the range.
func ParseRange(param, text string, lo, hi int) (int, error) {
	v, err := strconv.Atoi(text)
	if err != nil {
		return 0, rangeError(param, lo, hi)
	}
	return v, CheckRange(param, v, lo, hi)
}

// rangeError is the refusal of CheckRange and ParseRange.
func rangeError(param string, lo, hi int) error {
	return &fault.Error{Code: fault.InvalidQuery, Detail: fmt.Sprintf("%s must be an integer from %d to %d", param, lo, hi),
		Errors: []fault.FieldError{{Parameter: param, Rule: "range", Detail: fmt.Sprintf("want %d..%d", lo, hi)}}}
}

// ArtifactAt returns artifact id of view v (of context ctxID) with its
// data, its explained trust and the commit that wrote its version: GET
// …/artifacts/{id} and the get_artifact tool.
func (s *Service) ArtifactAt(ctx context.Context, ctxID string, v *store.View, id string) (*ArtifactView, error) {
	if v.State.Artifact(id) == nil {
		return nil, MissingArtifact(id, v)
	}
	a, wrote, err := s.st.ArtifactAt(ctx, ctxID, v.Commit, id)
	if err != nil {
		return nil, err
	}
	t := v.Trust.Explain(v.State, id)
	return &ArtifactView{ID: a.ID, Type: a.Type, Version: a.Version, ContentHash: a.ContentHash,
		ProducedBy: a.ProducedBy, Data: a.Data, Trust: &t, WrittenIn: &wrote}, nil
}

// Provenance formats: JSON, Mermaid and Graphviz DOT source.
const (
	FormatJSON    = "json"
	FormatMermaid = "mermaid"
	FormatDOT     = "dot"
)

// ProvenanceQuery is what a provenance read asks for besides the
// artifact: how deep to walk (-1: no bound), how many artifacts at most,
// and the format.
type ProvenanceQuery struct {
	Depth    int
	MaxNodes int
	Format   string
}

// Check refuses a query out of the bounds every door keeps
// (graph.MaxProvenanceDepth, graph.MaxProvenanceNodes) or of a format
// other than json, mermaid and dot ("" is json), naming the parameter.
func (q ProvenanceQuery) Check() (ProvenanceQuery, error) {
	if err := CheckRange("depth", q.Depth, -1, graph.MaxProvenanceDepth); err != nil {
		return q, err
	}
	if err := CheckRange("max_nodes", q.MaxNodes, 1, graph.MaxProvenanceNodes); err != nil {
		return q, err
	}
	f, err := CheckEnum("format", q.Format, FormatJSON, FormatMermaid, FormatDOT)
	q.Format = f
	return q, err
}

// Provenance is the subgraph reached from an artifact over its edges: in
// JSON its nodes with their trust and its edges (the fields in the order
// the API has always written them), in the text formats its source.
type Provenance struct {
	Commit    hashing.Digest `json:"commit"`
	Edges     []*graph.Edge  `json:"edges"`
	ID        string         `json:"id"`
	Nodes     []ArtifactView `json:"nodes"`
	Truncated bool           `json:"truncated"`
	// Format is the query's format; Text the Mermaid or DOT source.
	Format string `json:"-"`
	Text   string `json:"-"`
}

// ProvenanceAt walks the provenance of artifact id in view v as q asks
// (checked with ProvenanceQuery.Check): GET …/artifacts/{id}/provenance
// and the get_provenance tool.
func ProvenanceAt(v *store.View, id string, q ProvenanceQuery) (*Provenance, error) {
	q, err := q.Check()
	if err != nil {
		return nil, err
	}
	sg := graph.ProvenanceLimit(v.State, id, q.Depth, q.MaxNodes)
	if sg == nil {
		return nil, MissingArtifact(id, v)
	}
	trust := func(id string) graph.Trust { return v.Trust.Explain(v.State, id) }
	out := &Provenance{Commit: v.Commit.ID, ID: id, Truncated: sg.Truncated, Format: q.Format}
	switch q.Format {
	case FormatMermaid:
		out.Text = graph.Mermaid(sg, trust)
		return out, nil
	case FormatDOT:
		out.Text = graph.DOT(sg, trust)
		return out, nil
	}
	out.Nodes = make([]ArtifactView, len(sg.Nodes))
	for i, a := range sg.Nodes {
		t := trust(a.ID)
		out.Nodes[i] = ArtifactView{ID: a.ID, Type: a.Type, Version: a.Version, ContentHash: a.ContentHash, ProducedBy: a.ProducedBy, Trust: &t}
	}
	out.Edges = sg.Edges
	if out.Edges == nil {
		out.Edges = []*graph.Edge{}
	}
	return out, nil
}

// Audit formats.
const (
	AuditJSON     = "json"
	AuditMarkdown = "markdown"
)

// AuditAt is "why did it say that?" for artifact id in view v: GET
// …/audit/{id} and the audit tool. A view of a big state walks its map
// (store.View.Audit).
func AuditAt(ctx context.Context, v *store.View, id string) (*graph.AuditReport, error) {
	if v.State.Artifact(id) == nil {
		return nil, MissingArtifact(id, v)
	}
	rep, _, err := v.Audit(ctx, id)
	return rep, err
}

// DiffSides resolves the two ends of a diff of context ctxID: from is
// required, to defaults to the main branch; each must be a branch name or
// a commit id (CheckRef), refusals naming the parameter.
func (s *Service) DiffSides(ctx context.Context, ctxID, from, to string) ([2]*replay.Commit, error) {
	var sides [2]*replay.Commit
	if from == "" {
		return sides, &fault.Error{Code: fault.InvalidQuery, Detail: "from is required",
			Errors: []fault.FieldError{{Parameter: "from", Rule: "required", Detail: "missing"}}}
	}
	for i, p := range [][2]string{{"from", from}, {"to", to}} {
		if err := CheckRef(p[0], p[1]); err != nil {
			return sides, err
		}
		c, err := s.st.Resolve(ctx, ctxID, p[1])
		if err != nil {
			return sides, NameRef(err, p[0])
		}
		sides[i] = c
	}
	return sides, nil
}

// MaxDataDiffs bounds how many changed artifacts of one diff get their
// field-level changes (DiffData); the rest are marked data_omitted.
const MaxDataDiffs = 1000

// MaxDataChanges bounds the field-level changes listed per artifact.
const MaxDataChanges = 200

// DiffWithData is the diff document of GET …/diff?data=true: every
// changed artifact also lists the JSON pointers whose values differ.
type DiffWithData struct {
	*replay.DiffResult
	// Changed shadows DiffResult.Changed with the field-level changes.
	Changed []ChangedWithData `json:"changed"`
}

// ChangedWithData is a changed artifact with its field-level changes
// (replay.DataDiff of the old and new data).
type ChangedWithData struct {
	replay.ArtifactChange
	Data []replay.DataChange `json:"data"`
	// DataTruncated says more than MaxDataChanges changes were found.
	DataTruncated bool `json:"data_truncated,omitempty"`
	// DataOmitted says the diff had more than MaxDataDiffs changed
	// artifacts and this one's data was not compared.
	DataOmitted bool `json:"data_omitted,omitempty"`
}

// DiffData adds the field-level changes to d, the diff of context ctxID
// from sides[0] to sides[1], reading both versions' data by point lookups
// at the two commits.
func (s *Service) DiffData(ctx context.Context, ctxID string, sides [2]*replay.Commit, d *replay.DiffResult) (*DiffWithData, error) {
	out := &DiffWithData{DiffResult: d, Changed: make([]ChangedWithData, len(d.Changed))}
	for i, c := range d.Changed {
		out.Changed[i] = ChangedWithData{ArtifactChange: c, Data: []replay.DataChange{}}
		if i >= MaxDataDiffs {
			out.Changed[i].DataOmitted = true
			continue
		}
		if c.Old == nil || c.New == nil || c.Old.ContentHash == c.New.ContentHash {
			continue
		}
		var docs [2][]byte
		for j, side := range sides {
			a, _, err := s.st.ArtifactAt(ctx, ctxID, side, c.ID)
			if err != nil {
				return nil, fmt.Errorf("service: diff data of %q: %w", c.ID, err)
			}
			docs[j] = a.Data
		}
		dc, err := replay.DataDiff(docs[0], docs[1])
		if err != nil {
			return nil, fmt.Errorf("service: diff data of %q: %w", c.ID, err)
		}
		if len(dc) > MaxDataChanges {
			dc, out.Changed[i].DataTruncated = dc[:MaxDataChanges], true
		}
		if dc != nil {
			out.Changed[i].Data = dc
		}
	}
	return out, nil
}
