package web

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"
)

// Problem codes of the UI. Each is the last part of a problem type URI
// (problemTypePrefix + code), the same names the JSON API uses.
const (
	codeNotFound         = "not-found"
	codeInvalidQuery     = "invalid-query"
	codeAmbiguousRef     = "ambiguous-ref"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeMethodNotAllowed = "method-not-allowed"
	codeInternal         = "internal"
)

// problemTypePrefix starts every problem type URI (as in httpapi).
const problemTypePrefix = "urn:artifactd:problem:"

// problemTable is the one mapping from a problem code to its HTTP status
// and title.
var problemTable = map[string]struct {
	status int
	title  string
}{
	codeNotFound:         {http.StatusNotFound, "Not found"},
	codeInvalidQuery:     {http.StatusBadRequest, "Invalid query parameter"},
	codeAmbiguousRef:     {http.StatusBadRequest, "Ambiguous commit prefix"},
	codeUnauthorized:     {http.StatusUnauthorized, "Token required"},
	codeForbidden:        {http.StatusForbidden, "Forbidden"},
	codeMethodNotAllowed: {http.StatusMethodNotAllowed, "Method not allowed"},
	codeInternal:         {http.StatusInternalServerError, "Internal server error"},
}

// problem is an RFC 9457 problem: shown as an HTML page to browsers and as
// application/problem+json to clients that ask for JSON. Err is the cause;
// it is logged for internal problems and never shown.
type problem struct {
	Code   string
	Detail string
	Err    error
}

// problemJSON is the wire form of a problem.
type problemJSON struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// problem writes p as the response: the one place errors reach the client.
// Internal problems are logged with their cause; their text is replaced by
// a generic detail.
func (s *server) problem(w http.ResponseWriter, r *http.Request, p *problem) {
	entry, ok := problemTable[p.Code]
	if !ok {
		p = &problem{Code: codeInternal, Err: p.Err}
		entry = problemTable[codeInternal]
	}
	detail := p.Detail
	if p.Code == codeInternal {
		s.log.Error("web: internal error", "path", r.URL.Path, "err", p.Err)
		detail = "the page could not be shown; the server log has the cause"
	}
	body := problemJSON{
		Type:     problemTypePrefix + p.Code,
		Title:    entry.title,
		Status:   entry.status,
		Detail:   detail,
		Instance: r.URL.Path,
	}
	w.Header().Set("Cache-Control", "no-store")
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(entry.status)
		_ = json.NewEncoder(w).Encode(body)
		return
	}
	s.render(w, r, entry.status, "problem", &page{Title: entry.title}, body)
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
