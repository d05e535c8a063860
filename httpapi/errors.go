package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/service"
)

// Problem codes: the error vocabulary's (package fault) under the names
// the API has always had, as untyped constants so that they compare with
// plain strings too (TestProblemTable keeps them equal to fault's). Each
// is the last part of a problem type URI (ProblemTypePrefix + code) and
// maps to one HTTP status in problemTable.
const (
	CodeMalformedJSON    = "malformed-json"         // fault.MalformedJSON
	CodeNonCanonicalJSON = "non-canonical-json"     // fault.NonCanonicalJSON
	CodeInvalidQuery     = "invalid-query"          // fault.InvalidQuery
	CodeInvalidRef       = "invalid-ref"            // fault.InvalidRef
	CodeAmbiguousRef     = "ambiguous-ref"          // fault.AmbiguousRef
	CodeUnauthorized     = "unauthorized"           // fault.Unauthorized
	CodeForbidden        = "forbidden"              // fault.Forbidden
	CodeNotFound         = "not-found"              // fault.NotFound
	CodeMethodNotAllowed = "method-not-allowed"     // fault.MethodNotAllowed
	CodeStaleParent      = "stale-parent"           // fault.Stale
	CodeQuarantined      = "quarantined"            // fault.Quarantined
	CodeExists           = "exists"                 // fault.Exists
	CodeConflict         = "conflict"               // fault.Conflict
	CodeMergeConflict    = "merge-conflict"         // fault.MergeConflict
	CodeTooLarge         = "payload-too-large"      // fault.TooLarge
	CodeUnsupportedMedia = "unsupported-media-type" // fault.UnsupportedMedia
	CodeValidation       = "validation"             // fault.Invalid
	CodeDanglingEdge     = "dangling-edge"          // fault.DanglingEdge
	CodeDependencyCycle  = "dependency-cycle"       // fault.DependencyCycle
	CodeUnknownType      = "unknown-type"           // fault.UnknownType
	CodeReservedType     = "reserved-type"          // fault.ReservedType
	CodeInvalidSchema    = "invalid-schema"         // fault.InvalidSchema
	CodeInternal         = "internal"               // fault.Internal
	CodeUnavailable      = "unavailable"            // fault.Unavailable
	CodeRequestTimeout   = "request-timeout"        // fault.RequestTimeout
	CodeHeadersTooLarge  = "headers-too-large"      // fault.HeadersTooLarge
	CodeHostNotAllowed   = "host-not-allowed"       // fault.HostNotAllowed
	CodeCrossOrigin      = "cross-origin"           // fault.CrossOrigin
	CodeOverloaded       = "overloaded"             // fault.Overloaded
	CodeLeaseToken       = "lease-token"            // fault.LeaseToken
	CodeStoreCorrupt     = "store-corrupt"          // fault.Corrupt
	CodeNoSpace          = "insufficient-storage"   // fault.NoSpace
	CodeGone             = "blob-pruned"            // fault.Pruned
	CodeLocked           = "locked"                 // fault.Locked
	CodeOutcomeUnknown   = "commit-outcome-unknown" // fault.OutcomeUnknown

	// CodePreconditionFailed: a read whose If-Match names no entity tag
	// of its current representation.
	CodePreconditionFailed = "precondition-failed" // fault.PreconditionFailed
)

// ProblemTypePrefix starts every problem type URI. The URIs are names,
// not links: docs/API.md describes each code.
const ProblemTypePrefix = "urn:artifactd:problem:"

// problemTable is the one mapping from a problem code to its HTTP status
// and title.
var problemTable = map[fault.Code]struct {
	status int
	title  string
}{

	CodeMalformedJSON:    {http.StatusBadRequest, "Malformed JSON"},
	CodeNonCanonicalJSON: {http.StatusBadRequest, "JSON that cannot be canonicalized without losing information"},
	CodeInvalidQuery:     {http.StatusBadRequest, "Invalid query parameter"},
	CodeInvalidRef:       {http.StatusBadRequest, "Invalid commit or branch reference"},
	CodeAmbiguousRef:     {http.StatusBadRequest, "Ambiguous commit prefix"},
	CodeUnauthorized:     {http.StatusUnauthorized, "Missing or unknown bearer token"},
	CodeForbidden:        {http.StatusForbidden, "Not allowed"},
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
	CodeLocked:           {http.StatusLocked, "Data directory held by another process"},
	CodeOutcomeUnknown:   {http.StatusServiceUnavailable, "Commit outcome unknown"},

	CodePreconditionFailed: {http.StatusPreconditionFailed, "Precondition failed"},
}

// StatusOf returns the HTTP status of a code: the one mapping of the
// vocabulary to HTTP (500 for a code outside the table). The browser UI
// answers with it too.
func StatusOf(code fault.Code) int {
	if p, ok := problemTable[code]; ok {
		return p.status
	}
	return http.StatusInternalServerError
}

// TitleOf returns the problem title of a code ("Internal server error"
// for a code outside the table).
func TitleOf(code fault.Code) string {
	if p, ok := problemTable[code]; ok {
		return p.title
	}
	return problemTable[CodeInternal].title
}

func errorf(code fault.Code, format string, a ...any) *Error {
	return fault.Errorf(code, format, a...)
}

// classify is service.Classify with the door's own transport errors
// first: a body that did not arrive in time, a body over its limit.
func classify(err error) *Error {
	if e, ok := fault.As(err); ok {
		return e
	}
	var mbe *http.MaxBytesError
	switch {
	case isTimeout(err):
		return &Error{Code: CodeRequestTimeout, Detail: "the request body did not arrive in time; send it at once, or store large payloads with POST /v1/contexts/{ctx}/blobs", Err: err}
	case errors.As(err, &mbe):
		return errorf(CodeTooLarge, "the request body exceeds %d bytes; store large payloads with POST /v1/contexts/{ctx}/blobs and name them by digest", mbe.Limit)
	}
	return service.Classify(err)
}

// writeError is the one place that turns an error into a response: it
// classifies err, logs internal errors and store corruption (whose text
// never reaches the client) and writes application/problem+json.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	p, ok := problemTable[e.Code]
	if !ok {
		e = &Error{Code: CodeInternal, Err: err}
		p = problemTable[CodeInternal]
	}
	if e.Code == CodeInternal || e.Code == CodeUnavailable || e.Code == CodeStoreCorrupt || e.Code == CodeOutcomeUnknown {
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
	s.metrics.problem(string(e.Code))
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

// nonNil returns s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// quoteJSON returns s as a JSON string.
func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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
	}{ProblemTypePrefix + string(e.Code), title, status, e.Detail, instance, e.Errors})
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
