package web

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/httpapi"
)

// Problem codes of the UI: the error vocabulary's (package fault), the
// same names the JSON API uses.
const (
	codeNotFound         = fault.NotFound
	codeInvalidQuery     = fault.InvalidQuery
	codeAmbiguousRef     = fault.AmbiguousRef
	codeUnauthorized     = fault.Unauthorized
	codeForbidden        = fault.Forbidden
	codeMethodNotAllowed = fault.MethodNotAllowed
	codeInternal         = fault.Internal
	// codePreconditionFailed: an asset's If-Match that does not name its
	// ETag (httpapi.Preconditions).
	codePreconditionFailed = fault.PreconditionFailed
)

// problemTypePrefix starts every problem type URI (as in httpapi).
const problemTypePrefix = httpapi.ProblemTypePrefix

// problemTitles are the page titles of the UI's problems, worded for a
// person at a browser. Their statuses are the API's (httpapi.StatusOf):
// the vocabulary is mapped to HTTP once.
var problemTitles = map[fault.Code]string{
	codeNotFound:         "Not found",
	codeInvalidQuery:     "Invalid query parameter",
	codeAmbiguousRef:     "Ambiguous commit prefix",
	codeUnauthorized:     "Token required",
	codeForbidden:        "Forbidden",
	codeMethodNotAllowed: "Method not allowed",
	codeInternal:         "Internal server error",

	codePreconditionFailed: "Precondition failed",
}

// problem is an RFC 9457 problem: shown as an HTML page to browsers and as
// application/problem+json to clients that ask for JSON. Err is the cause;
// it is logged for internal problems and never shown. Errors names the
// parameters the problem is about, as in the API's problems.
type problem struct {
	Code   fault.Code
	Detail string
	Errors []fault.FieldError
	Err    error
}

// problemJSON is the wire form of a problem.
type problemJSON struct {
	Type     string             `json:"type"`
	Title    string             `json:"title"`
	Status   int                `json:"status"`
	Detail   string             `json:"detail,omitempty"`
	Instance string             `json:"instance,omitempty"`
	Errors   []fault.FieldError `json:"errors,omitempty"`
}

// problem writes p as the response: the one place errors reach the client.
// Internal problems are logged with their cause; their text is replaced by
// a generic detail.
func (s *server) problem(w http.ResponseWriter, r *http.Request, p *problem) {
	title, ok := problemTitles[p.Code]
	if !ok {
		p = &problem{Code: codeInternal, Err: p.Err}
		title = problemTitles[codeInternal]
	}
	status := httpapi.StatusOf(p.Code)
	detail := p.Detail
	if p.Code == codeInternal {
		if errors.Is(p.Err, context.Canceled) && r.Context().Err() != nil {
			// The browser left before the page was ready: nothing failed.
			s.log.Debug("web: request cancelled", "path", r.URL.Path)
		} else {
			s.log.Error("web: internal error", "path", r.URL.Path, "err", p.Err)
		}
		detail = "the page could not be shown; the server log has the cause"
	}
	body := problemJSON{
		Type:     problemTypePrefix + string(p.Code),
		Title:    title,
		Status:   status,
		Detail:   detail,
		Instance: r.URL.Path,
		Errors:   p.Errors,
	}
	w.Header().Set("Cache-Control", "no-store")
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	s.render(w, r, status, "problem", &page{Title: title}, body)
}

// wantsJSON reports whether the client asked for JSON rather than HTML:
// an Accept header naming application/problem+json or application/json
// and not text/html.
func wantsJSON(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	json, html := false, false
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/problem+json", "application/json":
			json = true
		case "text/html":
			html = true
		}
	}
	return json && !html
}
