package service

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/hashing"
)

// Tool results: POST /v1/contexts/{ctx}/tool-results turns a tool's error
// or output into a tool_error or tool_output artifact whose model_view is
// gate's sanitised text. The full text, secret-masked, is stored as a blob
// (full_blob) in the artifact's commit, and only when the commit is
// accepted; the raw text itself is never stored.

// Types the tool-results path writes.
const (
	TypeToolError  = "tool_error"
	TypeToolOutput = "tool_output"
)

// maxToolNameChars bounds the tool name kept in the data.
const maxToolNameChars = 200

// ToolResultInput is POST /v1/contexts/{ctx}/tool-results: a tool's error
// ({"ok": false, "error": "…"}) or output ({"ok": true, "output": "…"}).
type ToolResultInput struct {
	// ID defaults to "<type>:<first 16 hex of the content hash>".
	ID         string      `json:"id,omitempty"`
	Tool       string      `json:"tool,omitempty"`
	OK         bool        `json:"ok"`
	Error      *string     `json:"error,omitempty"`
	Output     *string     `json:"output,omitempty"`
	ProducedBy string      `json:"produced_by,omitempty"`
	Edges      []EdgeInput `json:"edges,omitempty"`
	Branch     string      `json:"branch,omitempty"`
	Quarantine string      `json:"quarantine,omitempty"`
	// IfMatch, when set, is the head the write expects its branch to
	// have (an If-Match header; never read from the body): the write is
	// refused as stale, naming If-Match, when the head is another.
	IfMatch *hashing.Digest `json:"-"`
}

// ToolErrorData is the data of a tool_error written by the tool-results
// path: gate.ErrorView with the tool and the blob of the full masked text.
type ToolErrorData struct {
	Tool       string `json:"tool,omitempty"`
	ModelView  string `json:"model_view"`
	TotalChars int    `json:"total_chars"`
	Truncated  bool   `json:"truncated"`
	Spilled    bool   `json:"spilled"`
	FullBlob   string `json:"full_blob"`
}

// ToolOutputData is the data of a tool_output written by the tool-results
// path: gate.OutputView with the tool and the blob of the full masked
// output (which the model view's omission notice names).
type ToolOutputData struct {
	Tool         string `json:"tool,omitempty"`
	ModelView    string `json:"model_view"`
	TotalChars   int    `json:"total_chars"`
	OmittedChars int    `json:"omitted_chars"`
	Truncated    bool   `json:"truncated"`
	FullBlob     string `json:"full_blob"`
}

// RecordToolResult is POST .../tool-results as a Go call. The error or
// output is sanitised with the server's options (Options.Sanitize): masked
// first (gate.SanitizeError, gate.PrepareOutput), the model view made,
// and the masked full text kept as a blob; the tool name is masked too.
// The artifact is written with the client's rules (PutArtifact); the
// blob's bytes are stored in its commit and the context comes to hold
// them with it, so a refused write stores none of them and leaves the
// context holding nothing new. Errors are *fault.Error values.
func (s *Service) RecordToolResult(ctx context.Context, ctxID string, in ToolResultInput) (*ArtifactWrite, error) {
	if _, err := s.st.GetContext(ctx, ctxID); err != nil {
		return nil, err
	}
	if err := s.checkIfMatch(ctx, ctxID, in.Branch, in.IfMatch); err != nil {
		return nil, err
	}
	// The request schema's rule, for every door: an error when not ok, an
	// output when ok, never both; the refusal names the field as the
	// schema's does (a missing one required, an extra one not_allowed).
	give, other, giveP, otherP := in.Output, in.Error, "/output", "/error"
	detail := "a successful tool result has an output and no error"
	if !in.OK {
		give, other, giveP, otherP = in.Error, in.Output, "/error", "/output"
		detail = "a failed tool result has an error and no output"
	}
	switch {
	case other != nil:
		return nil, &fault.Error{Code: fault.Invalid, Detail: detail,
			Errors: []fault.FieldError{{Pointer: otherP, Rule: "not_allowed", Detail: "property " + strconv.Quote(otherP[1:]) + " is not allowed here: ok is " + strconv.FormatBool(in.OK)}}}
	case give == nil:
		return nil, &fault.Error{Code: fault.Invalid, Detail: detail,
			Errors: []fault.FieldError{{Pointer: giveP, Rule: "required", Detail: "missing property " + strconv.Quote(giveP[1:]) + ": ok is " + strconv.FormatBool(in.OK)}}}
	}
	opt := s.sanitizeOptions()
	tool := truncateChars(opt.Mask(in.Tool), maxToolNameChars)
	// The id and the edges' attributes name and join artifacts: masked,
	// they would name others. A declared secret in them is refused. The
	// attributes are looked at as they will be stored, canonical: escapes
	// that no encoder writes ("\u0051" for "Q") are decoded there. Ones
	// that are not JSON objects are refused by the write.
	if err := refuseSecret(opt, "/id", in.ID); err != nil {
		return nil, err
	}
	for i, e := range in.Edges {
		attrs := []byte(e.Attrs)
		if c, err := hashing.CanonicalizeObject(attrs); err == nil {
			attrs = c
		}
		if err := refuseSecret(opt, "/edges/"+strconv.Itoa(i)+"/attrs", string(attrs)); err != nil {
			return nil, err
		}
	}
	var typ string
	var data any
	var held heldBlobs
	if !in.OK {
		v := gate.SanitizeError(*in.Error, opt)
		d := held.put([]byte(v.Masked))
		if v.Spilled || v.Truncated {
			held.spills = append(held.spills, d)
		}
		typ = TypeToolError
		data = ToolErrorData{Tool: tool, ModelView: v.ModelView, TotalChars: v.TotalChars, Truncated: v.Truncated, Spilled: v.Spilled, FullBlob: d.String()}
	} else {
		full := gate.PrepareOutput(*in.Output, opt)
		d := held.put([]byte(full))
		v := gate.SanitizeOutput(full, d.String(), opt)
		if v.OmittedChars > 0 || v.Truncated {
			held.spills = append(held.spills, d)
		}
		typ = TypeToolOutput
		data = ToolOutputData{Tool: tool, ModelView: v.ModelView, TotalChars: v.TotalChars, OmittedChars: v.OmittedChars, Truncated: v.Truncated, FullBlob: d.String()}
	}
	raw, err := canonicalData(data)
	if err != nil {
		return nil, err
	}
	return s.putArtifactGo(ctx, ctxID, ArtifactInput{
		ID: in.ID, Type: typ, ProducedBy: opt.Mask(in.ProducedBy), Data: raw,
		Edges: in.Edges, Branch: in.Branch, Quarantine: in.Quarantine,
	}, true, &held, in.IfMatch)
}

// refuseSecret refuses v, the value at pointer ptr of a gate write, when
// it holds a declared secret.
func refuseSecret(opt gate.SanitizeOptions, ptr, v string) error {
	if v == "" || opt.Secrets.Mask(v) == v {
		return nil
	}
	return &fault.Error{Code: fault.Invalid, Detail: ptr[1:] + " holds a declared secret",
		Errors: []fault.FieldError{{Pointer: ptr, Rule: "no_secret", Detail: "a declared secret may not be stored here; it cannot be masked without changing what the value names"}}}
}

// truncateChars cuts s to at most n characters.
func truncateChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}
