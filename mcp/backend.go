package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/artifactd/artifactd/service"
)

// Backend is what the tools call: the artifactd operations they need, with
// the bodies and answers of the HTTP API. InProcess and Remote implement
// it. Errors that refuse a request are *Problem values; any other error is
// the backend failing (I/O, a server that does not answer). Methods must be
// safe for concurrent use.
type Backend interface {
	// PutArtifact is POST /v1/contexts/{ctx}/artifacts.
	PutArtifact(ctx context.Context, ctxID string, in ArtifactBody) (*ArtifactWrite, error)
	// Commit is POST /v1/contexts/{ctx}/commits.
	Commit(ctx context.Context, ctxID string, in CommitBody) (*CommitWrite, error)
	// Artifact is GET /v1/contexts/{ctx}/artifacts/{id}?at=: the artifact
	// with its data and explained trust.
	Artifact(ctx context.Context, ctxID, id, at string) (*ArtifactView, error)
	// RecordFetch is POST /v1/contexts/{ctx}/fetches.
	RecordFetch(ctx context.Context, ctxID string, in FetchBody) (*FetchWrite, error)
	// RecordToolResult is POST /v1/contexts/{ctx}/tool-results.
	RecordToolResult(ctx context.Context, ctxID string, in ToolResultBody) (*ArtifactWrite, error)
	// Provenance is GET /v1/contexts/{ctx}/artifacts/{id}/provenance.
	Provenance(ctx context.Context, ctxID string, q ProvenanceQuery) (*Provenance, error)
	// Audit is GET /v1/contexts/{ctx}/audit/{id}.
	Audit(ctx context.Context, ctxID string, q AuditQuery) (*Audit, error)
	// Diff is GET /v1/contexts/{ctx}/diff?from=&to=.
	Diff(ctx context.Context, ctxID, from, to string) (*Diff, error)
	// Verify is POST /v1/contexts/{ctx}/verify.
	Verify(ctx context.Context, ctxID string, in VerifyBody) (*VerifyResult, error)
}

// FieldError is one entry of a problem's errors list: a JSON pointer into
// the request body (or a query parameter), the rule and what is wrong.
type FieldError struct {
	Pointer   string `json:"pointer,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Rule      string `json:"rule"`
	Detail    string `json:"detail"`
}

// Problem is a refusal of the API (RFC 9457 problem+json) as an error.
type Problem struct {
	// Status is the HTTP status (409, 422…).
	Status int `json:"status"`
	// Code is the problem type without its "urn:artifactd:problem:"
	// prefix: quarantined, validation, not-found…
	Code   string       `json:"code"`
	Title  string       `json:"title,omitempty"`
	Detail string       `json:"detail"`
	Errors []FieldError `json:"errors,omitempty"`
	// TaintedBy is the tainted_by member of a quarantine refusal.
	TaintedBy *Taint `json:"tainted_by,omitempty"`
}

// problemTypePrefix starts every problem type URI of the API.
const problemTypePrefix = "urn:artifactd:problem:"

// Error returns the text a tool result shows a model: the status and
// code, the detail, every field error with its pointer, and for a
// quarantine refusal the poison roots, their reasons and the path.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refused (%d %s): %s", p.Status, p.Code, p.Detail)
	for _, f := range p.Errors {
		where := f.Pointer
		if where == "" && f.Parameter != "" {
			where = "parameter " + f.Parameter
		}
		if where == "" {
			where = "/"
		}
		fmt.Fprintf(&b, "\n- %s: %s (rule %s)", where, f.Detail, f.Rule)
	}
	if t := p.TaintedBy; t != nil {
		fmt.Fprintf(&b, "\nThe edge %s -%s-> %s rests on unconfirmed artifacts.", t.Edge.From, t.Edge.Rel, t.Edge.To)
		for i, r := range t.Roots {
			reason := ""
			if i < len(t.Reasons) && t.Reasons[i] != "" {
				reason = " (" + t.Reasons[i] + ")"
			}
			fmt.Fprintf(&b, "\nPoison root: %s%s", r, reason)
		}
		if len(t.Path) > 0 {
			fmt.Fprintf(&b, "\nPath: %s", strings.Join(t.Path, " -> "))
		}
		b.WriteString("\nNothing was written. Build on confirmed artifacts instead (check_trust), or re-fetch the root's URL with submit_fetch under the same id: a RETRIEVED verdict lifts the quarantine.")
	}
	return b.String()
}

// problemFromJSON decodes a problem+json body; ok is false when raw is
// not one.
func problemFromJSON(status int, raw []byte) (*Problem, bool) {
	var doc struct {
		Type      string          `json:"type"`
		Title     string          `json:"title"`
		Status    int             `json:"status"`
		Detail    string          `json:"detail"`
		Errors    []FieldError    `json:"errors"`
		TaintedBy json.RawMessage `json:"tainted_by"`
	}
	if json.Unmarshal(raw, &doc) != nil || !strings.HasPrefix(doc.Type, problemTypePrefix) {
		return nil, false
	}
	p := &Problem{Status: status, Code: strings.TrimPrefix(doc.Type, problemTypePrefix), Title: doc.Title, Detail: doc.Detail, Errors: doc.Errors}
	if doc.Status != 0 {
		p.Status = doc.Status
	}
	if len(doc.TaintedBy) > 0 && string(doc.TaintedBy) != "null" {
		var t Taint
		if json.Unmarshal(doc.TaintedBy, &t) == nil {
			p.TaintedBy = &t
		}
	}
	return p, true
}

// encode is the JSON of a request body as both backends measure it
// against the body limit, and as the remote one sends it: service.Marshal's,
// which leaves <, > and & as they are (json.Marshal writes each as a
// 6-byte \u003c escape, and an HTML page HTTP takes was over the limit
// here), without its final newline.
func encode(v any) ([]byte, error) {
	raw, err := service.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(raw, []byte("\n")), nil
}

// convert moves a value of one type into another through its JSON, the way
// a client would read the server's answer.
func convert[T any](v any) (*T, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decode into %T: %w", out, err)
	}
	return out, nil
}
