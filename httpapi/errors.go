package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Problem codes. Each is the last part of a problem type URI
// (ProblemTypePrefix + code) and maps to one HTTP status in problemTable.
const (
	CodeMalformedJSON    = "malformed-json"
	CodeNonCanonicalJSON = "non-canonical-json"
	CodeInvalidQuery     = "invalid-query"
	CodeInvalidRef       = "invalid-ref"
	CodeAmbiguousRef     = "ambiguous-ref"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not-found"
	CodeMethodNotAllowed = "method-not-allowed"
	CodeStaleParent      = "stale-parent"
	CodeQuarantined      = "quarantined"
	CodeExists           = "exists"
	CodeConflict         = "conflict"
	CodeMergeConflict    = "merge-conflict"
	CodeTooLarge         = "payload-too-large"
	CodeUnsupportedMedia = "unsupported-media-type"
	CodeValidation       = "validation"
	CodeDanglingEdge     = "dangling-edge"
	CodeDependencyCycle  = "dependency-cycle"
	CodeUnknownType      = "unknown-type"
	CodeReservedType     = "reserved-type"
	CodeInvalidSchema    = "invalid-schema"
	CodeInternal         = "internal"
	CodeUnavailable      = "unavailable"
	CodeRequestTimeout   = "request-timeout"
	CodeHeadersTooLarge  = "headers-too-large"
	CodeHostNotAllowed   = "host-not-allowed"
	CodeCrossOrigin      = "cross-origin"
	CodeOverloaded       = "overloaded"
	CodeLeaseToken       = "lease-token"
	CodeStoreCorrupt     = "store-corrupt"
	CodeNoSpace          = "insufficient-storage"
	CodeGone             = "blob-pruned"
)

// ProblemTypePrefix starts every problem type URI. The URIs are names,
// not links: docs/API.md describes each code.
const ProblemTypePrefix = "urn:artifactd:problem:"

// problemTable is the one mapping from a problem code to its HTTP status
// and title.
var problemTable = map[string]struct {
	status int
	title  string
}{
	CodeMalformedJSON:    {http.StatusBadRequest, "Malformed JSON"},
	CodeNonCanonicalJSON: {http.StatusBadRequest, "JSON that cannot be canonicalized without losing information"},
	CodeInvalidQuery:     {http.StatusBadRequest, "Invalid query parameter"},
	CodeInvalidRef:       {http.StatusBadRequest, "Invalid commit or branch reference"},
	CodeAmbiguousRef:     {http.StatusBadRequest, "Ambiguous commit prefix"},
	CodeUnauthorized:     {http.StatusUnauthorized, "Missing or unknown bearer token"},
	CodeForbidden:        {http.StatusForbidden, "Token does not grant this access"},
	CodeNotFound:         {http.StatusNotFound, "Not found"},
	CodeMethodNotAllowed: {http.StatusMethodNotAllowed, "Method not allowed"},
	CodeStaleParent:      {http.StatusConflict, "Stale parent commit"},
	CodeQuarantined:      {http.StatusConflict, "Write rests on an unconfirmed artifact"},
	CodeExists:           {http.StatusConflict, "Already exists"},
	CodeConflict:         {http.StatusConflict, "Conflict"},
	CodeMergeConflict:    {http.StatusConflict, "Merge conflicts"},
	CodeTooLarge:         {http.StatusRequestEntityTooLarge, "Request body too large"},
	CodeUnsupportedMedia: {http.StatusUnsupportedMediaType, "Unsupported content type"},
	CodeValidation:       {http.StatusUnprocessableEntity, "Validation failed"},
	CodeDanglingEdge:     {http.StatusUnprocessableEntity, "Edge without an end"},
	CodeDependencyCycle:  {http.StatusUnprocessableEntity, "Dependency cycle"},
	CodeUnknownType:      {http.StatusUnprocessableEntity, "Unknown artifact type"},
	CodeReservedType:     {http.StatusUnprocessableEntity, "Reserved artifact type"},
	CodeInvalidSchema:    {http.StatusUnprocessableEntity, "Invalid JSON Schema"},
	CodeInternal:         {http.StatusInternalServerError, "Internal server error"},
	CodeUnavailable:      {http.StatusServiceUnavailable, "Service unavailable"},
	CodeRequestTimeout:   {http.StatusRequestTimeout, "Request body not received in time"},
	CodeHeadersTooLarge:  {http.StatusRequestHeaderFieldsTooLarge, "Request headers too large"},
	CodeHostNotAllowed:   {http.StatusMisdirectedRequest, "Host not served"},
	CodeCrossOrigin:      {http.StatusForbidden, "Cross-origin write refused"},
	CodeOverloaded:       {http.StatusServiceUnavailable, "Server busy"},
	CodeLeaseToken:       {http.StatusForbidden, "Missing or wrong lease token"},
	CodeStoreCorrupt:     {http.StatusInternalServerError, "The stored history does not verify"},
	CodeNoSpace:          {http.StatusInsufficientStorage, "Not enough free disk space for writes"},
	CodeGone:             {http.StatusGone, "Blob pruned after its retention window"},
}

// FieldError is one entry of a problem's errors list: where in the request
// (a JSON pointer into the body, or a query parameter), which rule, and
// what is wrong.
type FieldError struct {
	Pointer   string `json:"pointer"`
	Parameter string `json:"parameter,omitempty"`
	Rule      string `json:"rule"`
	Detail    string `json:"detail"`
}

// MarshalJSON writes "pointer" for body errors and "parameter" (without a
// pointer) for query, path and header errors.
func (f FieldError) MarshalJSON() ([]byte, error) {
	if f.Parameter != "" {
		b, err := marshal(struct {
			Parameter string `json:"parameter"`
			Rule      string `json:"rule"`
			Detail    string `json:"detail"`
		}{f.Parameter, f.Rule, f.Detail})
		return bytes.TrimSuffix(b, []byte("\n")), err
	}
	type plain FieldError
	b, err := marshal(plain(f))
	return bytes.TrimSuffix(b, []byte("\n")), err
}

// Error is the API's one error vocabulary: a problem code, a detail safe to
// show to the client, optional field errors and extension members. Domain
// errors from store and graph are turned into an *Error by classify.
type Error struct {
	Code   string
	Detail string
	Errors []FieldError
	// Extra holds problem extension members (tainted_by, head, cycle…).
	Extra map[string]any
	// Err is the cause, logged for internal errors and never shown.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Code == CodeInternal {
		return e.Code + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// Status returns the HTTP status of the error's code.
func (e *Error) Status() int {
	if p, ok := problemTable[e.Code]; ok {
		return p.status
	}
	return http.StatusInternalServerError
}

func errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, a...)}
}

// writeError is the one place that turns an error into a response: it
// classifies err, logs internal errors (whose text never reaches the
// client) and writes application/problem+json.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	p, ok := problemTable[e.Code]
	if !ok {
		e = &Error{Code: CodeInternal, Err: err}
		p = problemTable[CodeInternal]
	}
	if e.Code == CodeInternal || e.Code == CodeUnavailable {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
		if e.Code == CodeInternal {
			e.Detail = "the server could not complete the request; the error was logged"
		}
	}
	if e.Detail == "" {
		e.Detail = p.title
	}
	raw, err2 := problemJSON(e, p.title, p.status, r.URL.Path)
	if err2 != nil {
		s.log.Error("encode problem", "err", err2)
		raw = []byte(`{"type":"` + ProblemTypePrefix + CodeInternal + `","title":"Internal server error","status":500,"detail":"the error could not be encoded"}` + "\n")
		p = problemTable[CodeInternal]
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	if e.Code == CodeUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="artifactd"`)
	}
	switch e.Code {
	case CodeStoreCorrupt:
		// Stop claiming readiness and stop writing on top of it.
		s.st.NoteCorruption(err)
	case CodeNoSpace:
		h.Set("Retry-After", "30")
	}
	closing := bodyPending(r) || e.Code == CodeRequestTimeout || e.Code == CodeOverloaded || e.Code == CodeTooLarge
	if closing {
		// Close rather than drain what the client is still sending: a
		// refused request must not hold the connection.
		h.Set("Connection", "close")
	}
	s.metrics.problem(e.Code)
	w.WriteHeader(p.status)
	_, _ = w.Write(raw)
	if closing {
		// net/http reads up to 256 KiB of an unread body when the
		// handler returns, even on a closing connection; a past read
		// deadline makes that read fail at once. (Unsupported on
		// recorders, where it does not matter.)
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}

// problemJSON writes the RFC 9457 members in their usual order, then the
// extension members (sorted).
func problemJSON(e *Error, title string, status int, instance string) ([]byte, error) {
	std, err := marshal(struct {
		Type     string       `json:"type"`
		Title    string       `json:"title"`
		Status   int          `json:"status"`
		Detail   string       `json:"detail"`
		Instance string       `json:"instance,omitempty"`
		Errors   []FieldError `json:"errors,omitempty"`
	}{ProblemTypePrefix + e.Code, title, status, e.Detail, instance, e.Errors})
	if err != nil || len(e.Extra) == 0 {
		return std, err
	}
	keys := make([]string, 0, len(e.Extra))
	for k := range e.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := std[:len(std)-2] // drop "}\n"
	for _, k := range keys {
		v, err := marshal(e.Extra[k])
		if err != nil {
			return nil, err
		}
		out = append(out, ',')
		out = append(out, quoteJSON(k)...)
		out = append(out, ':')
		out = append(out, bytes.TrimRight(v, "\n")...)
	}
	return append(out, "}\n"...), nil
}

// canonRules names the rule of each canonicalisation refusal.
var canonRules = []struct {
	err  error
	rule string
}{
	{hashing.ErrSyntax, "syntax"},
	{hashing.ErrDuplicateKey, "duplicate_key"},
	{hashing.ErrInvalidUTF8, "invalid_utf8"},
	{hashing.ErrLoneSurrogate, "lone_surrogate"},
	{hashing.ErrNonFinite, "non_finite"},
	{hashing.ErrUnsafeInteger, "unsafe_integer"},
	{hashing.ErrTooDeep, "too_deep"},
	{hashing.ErrNotObject, "not_object"},
}

// classify maps any error to an *Error: API errors pass through, domain
// errors of hashing, graph and store get their code here, and everything
// else is internal.
func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ce *hashing.CanonError
	if errors.As(err, &ce) {
		rule := "canonical_json"
		for _, cr := range canonRules {
			if errors.Is(ce.Err, cr.err) {
				rule = cr.rule
			}
		}
		code := CodeNonCanonicalJSON
		if rule == "syntax" {
			code = CodeMalformedJSON
		}
		return &Error{Code: code, Detail: ce.Error(), Errors: []FieldError{{Pointer: ce.Pointer, Rule: rule, Detail: ce.Detail}}}
	}
	var te *graph.TaintError
	if errors.As(err, &te) {
		return &Error{Code: CodeQuarantined, Detail: te.Error(), Extra: map[string]any{"tainted_by": taintView(te)}}
	}
	var cy *graph.CycleError
	if errors.As(err, &cy) {
		return &Error{Code: CodeDependencyCycle, Detail: cy.Error(), Extra: map[string]any{"cycle": cy.Cycle}}
	}
	var oe *graph.OpError
	if errors.As(err, &oe) {
		code := CodeValidation
		if errors.Is(oe, graph.ErrDangling) {
			code = CodeDanglingEdge
		}
		rule := oe.Rule
		if rule == "" {
			rule = "invalid"
		}
		return &Error{Code: code, Detail: oe.Detail, Errors: []FieldError{{Pointer: oe.Field, Rule: rule, Detail: oe.Detail}}}
	}
	var mc *replay.ConflictError
	if errors.As(err, &mc) {
		return &Error{Code: CodeMergeConflict, Detail: fmt.Sprintf("%d unresolved conflict(s); nothing was changed: settle each with a resolution keyed by its key", len(mc.Conflicts)),
			Extra: map[string]any{"conflicts": mc.Conflicts}}
	}
	var mbe *http.MaxBytesError
	var pruned *store.PrunedError
	switch {
	case isTimeout(err):
		return &Error{Code: CodeRequestTimeout, Detail: "the request body did not arrive in time; send it at once, or store large payloads with POST /v1/contexts/{ctx}/blobs", Err: err}
	case errors.Is(err, replay.ErrResolution), errors.Is(err, replay.ErrNoMergeBase):
		return &Error{Code: CodeValidation, Detail: err.Error()}
	case errors.As(err, &mbe):
		return errorf(CodeTooLarge, "the request body exceeds %d bytes; store large payloads with POST /v1/contexts/{ctx}/blobs and name them by digest", mbe.Limit)
	case errors.Is(err, store.ErrStale):
		return &Error{Code: CodeStaleParent, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrNotFound), errors.Is(err, graph.ErrNotFound):
		return &Error{Code: CodeNotFound, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrExists):
		return &Error{Code: CodeExists, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrAmbiguous):
		return &Error{Code: CodeAmbiguousRef, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Code: CodeValidation, Detail: stripSentinel(err)}
	case errors.As(err, &pruned):
		return &Error{Code: CodeGone, Detail: pruned.Error() + "; the artifact that names it keeps its digest", Extra: map[string]any{"pruned_at": pruned.PrunedAt}}
	case errors.Is(err, store.ErrNoSpace):
		return &Error{Code: CodeNoSpace, Detail: err.Error() + "; reads go on", Err: err}
	case errors.Is(err, replay.ErrBroken), errors.Is(err, store.ErrCorrupt):
		return &Error{Code: CodeStoreCorrupt, Detail: "the stored records do not verify: " + err.Error() + "; stop the server and run `artifactd fsck` on its data directory", Err: err}
	case errors.Is(err, store.ErrWriteFailed):
		return &Error{Code: CodeUnavailable, Detail: "the store stopped taking writes after a write failure; restart artifactd and run fsck", Err: err}
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Detail: "the server is shutting down or the request was cancelled", Err: err}
	}
	return &Error{Code: CodeInternal, Err: err}
}

// stripSentinel returns the message of a store error, which names only
// what the client sent (ids, refs) and never internal state.
func stripSentinel(err error) string {
	msg := err.Error()
	for _, s := range []error{store.ErrNotFound, store.ErrExists, store.ErrStale, store.ErrInvalid, store.ErrAmbiguous} {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	return msg
}

// TaintView is the tainted_by member of a quarantine refusal (409) and of
// the flags a write gets in observe mode.
type TaintView struct {
	Edge    graph.EdgeKey `json:"edge"`
	Roots   []string      `json:"roots"`
	Reasons []string      `json:"reasons"`
	Path    []string      `json:"path"`
}

func taintView(te *graph.TaintError) TaintView {
	return TaintView{Edge: te.Edge, Roots: nonNil(te.Roots), Reasons: nonNil(te.Reasons), Path: nonNil(te.Path)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
