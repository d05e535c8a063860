package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// readBody reads a request body of at most limit bytes. A larger body is
// a 413 problem, whether announced by Content-Length or found while
// reading.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || isTimeout(err) {
			return nil, err
		}
		return nil, errorf(CodeMalformedJSON, "could not read the request body: %v", err)
	}
	return b, nil
}

// requireJSON checks that the request declares a JSON body.
func requireJSON(r *http.Request) error {
	refuse := func(detail string) error {
		return &Error{Code: CodeUnsupportedMedia, Detail: detail,
			Errors: []FieldError{{Parameter: "Content-Type", Rule: "media_type", Detail: "want application/json (UTF-8)"}}}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return refuse("send the body with Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return refuse(fmt.Sprintf("Content-Type %q is not accepted here; send application/json", ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return refuse(fmt.Sprintf("charset %q is not accepted; JSON is UTF-8", cs))
	}
	return nil
}

// decodeJSON reads a JSON request body and checks it in the order that
// gives the most precise problem: content type (415), size (413),
// canonical JSON (400 naming the pointer and rule: duplicate keys, unsafe
// integers, lone surrogates, nesting), the request schema (422 naming
// each pointer), then decodes it into dst. It returns the body parsed as a
// generic value for schema validation of nested data.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, schema string, dst any) (any, error) {
	if err := requireJSON(r); err != nil {
		return nil, err
	}
	body, err := readBody(w, r, s.maxBody)
	if err != nil {
		return nil, err
	}
	return decodeCanonical(body, schema, dst)
}

// DecodeRequest checks body, the JSON of a request whose body schema is
// name ("artifact", "commit", "fetch", "tool-result", "verify"…), as
// the HTTP door checks a request body once read — at most maxBody bytes
// (DefaultMaxBodyBytes when ≤ 0; 413), canonical JSON (400 naming the
// pointer and rule), the request schema (422 naming each pointer) — and
// decodes it into dst. Other doors call it so that they refuse what HTTP
// refuses, with the same problems.
func DecodeRequest(body []byte, maxBody int64, name string, dst any) error {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if int64(len(body)) > maxBody {
		return classify(&http.MaxBytesError{Limit: maxBody})
	}
	if requestSchemas[name] == nil {
		return &Error{Code: CodeInternal, Err: fmt.Errorf("no request schema %q", name)}
	}
	_, err := decodeCanonical(body, name, dst)
	return err
}

// decodeCanonical is decodeJSON after the body was read.
func decodeCanonical(body []byte, schema string, dst any) (any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, &Error{Code: CodeMalformedJSON, Detail: "the request body is empty; send a JSON object",
			Errors: []FieldError{{Pointer: "", Rule: "syntax", Detail: "empty body"}}}
	}
	canon, err := hashing.Canonicalize(body)
	if err != nil {
		return nil, err
	}
	doc, err := hashing.DecodeCanonical(canon)
	if err != nil {
		return nil, &Error{Code: CodeInternal, Err: fmt.Errorf("decode canonical body: %w", err)}
	}
	if err := validateRequest(schema, doc); err != nil {
		return nil, err
	}
	if fill := fromDoc[schema]; fill != nil {
		err = fill(doc, dst)
	} else {
		err = json.Unmarshal(canon, dst)
	}
	if err != nil {
		// The schema admits only what dst can hold; this is a bug.
		return nil, &Error{Code: CodeInternal, Err: fmt.Errorf("decode %s body: %w", schema, err)}
	}
	return doc, nil
}

// member returns doc's nested member at path (object keys and array
// indexes), or nil.
func member(doc any, path ...any) any {
	cur := doc
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			cur = a[k]
		}
	}
	return cur
}

// urlParam returns a path parameter, unescaped. chi matches on the raw
// (escaped) path when the URL has escapes that its decoded form cannot
// show, such as %2F inside an artifact id; the parameter is then still
// escaped.
func urlParam(r *http.Request, name string) (string, error) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", errorf(CodeNotFound, "bad escape in path parameter %s", name)
	}
	return u, nil
}

// ctxParam returns the {ctx} path parameter; an id that cannot name a
// context is a 404, like any context that does not exist.
func ctxParam(r *http.Request) (string, error) {
	id, err := urlParam(r, "ctx")
	if err != nil {
		return "", err
	}
	if store.ValidateContextID(id) != nil {
		return "", errorf(CodeNotFound, "no context %q", id)
	}
	return id, nil
}

// intQuery parses an integer query parameter within [lo, hi].
func intQuery(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := service.ParseRange(name, v, lo, hi)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// enumQuery parses a query parameter that takes one of a few values; the
// first is the default.
func enumQuery(r *http.Request, name string, values ...string) (string, error) {
	return service.CheckEnum(name, r.URL.Query().Get(name), values...)
}

// parseParent reads an expected parent commit from the body field or the
// If-Match header (a full commit id, optionally quoted). Given both, they
// must name the same commit: two conditions that disagree are a request
// error (422 naming If-Match, rule agrees_with_parent), whichever of them
// is the head, and neither is dropped.
func parseParent(r *http.Request, field string) (*hashing.Digest, error) {
	h, err := parseIfMatch(r)
	if err != nil || field == "" {
		return h, err
	}
	d, err := service.ParseParent(field)
	if err != nil {
		return nil, err
	}
	if h != nil && *h != d {
		return nil, &Error{Code: CodeValidation, Detail: "the If-Match header and the body's parent name different commits; give one, or the same in both",
			Errors: []FieldError{{Parameter: "If-Match", Rule: "agrees_with_parent", Detail: "names another commit than /parent"}}}
	}
	return &d, nil
}

// parseIfMatch reads the If-Match header, the head commit a write expects
// its branch to have (a full commit id, optionally quoted); nil when the
// header is absent. Sent, it must name one commit: an empty value, or two
// header lines (one list), is refused as any other value that is not a
// full commit id (422 naming If-Match, rule commit_id), never dropped.
func parseIfMatch(r *http.Request) (*hashing.Digest, error) {
	vs := r.Header.Values("If-Match")
	if len(vs) == 0 {
		return nil, nil
	}
	v := strings.Trim(strings.TrimSpace(strings.Join(vs, ",")), `"`)
	d, err := service.ParseParent(v)
	if err != nil {
		return nil, &Error{Code: CodeValidation, Detail: "parent must be a full commit id",
			Errors: []FieldError{{Parameter: "If-Match", Rule: "commit_id", Detail: "want the full head commit id"}}}
	}
	return &d, nil
}
