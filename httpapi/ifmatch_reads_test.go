package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// sendHeaders sends a request (body, when not nil, as JSON) with exactly
// the header lines given, empty values included (req.header drops an
// empty value).
func (e *env) sendHeaders(method, path string, body any, h http.Header) *resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	hr, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range h {
		hr.Header[k] = vs
	}
	res, err := e.ts.Client().Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: b}
}

// ifMatchReadEnv is a context with an artifact q, a deleted artifact gone,
// a blob and two commits; first is the commit that wrote q.
func ifMatchReadEnv(t *testing.T) (e *env, first, digest string) {
	e = newEnv(t)
	e.createContext("im", "observe")
	first = e.must(e.post("/v1/contexts/im/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 201)["commit"].(string)
	e.must(e.post("/v1/contexts/im/artifacts", map[string]any{"id": "gone", "type": "note", "data": map[string]any{"text": "x"}}), 201)
	e.must(e.post("/v1/contexts/im/commits", map[string]any{"ops": []any{map[string]any{"op": "delete", "id": "gone"}}}), 201)
	digest = e.send(req{method: "POST", path: "/v1/contexts/im/blobs", body: []byte("hello")}).obj(t)["digest"].(string)
	e.must(e.post("/v1/contexts/im/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "n"}}), 201)
	return e, first, digest
}

// ifMatchReadPaths are GET routes that answer with an ETag, one of each
// way a read computes it.
func ifMatchReadPaths(first, digest string) []string {
	return []string{
		"/v1/contexts/im",             // branches salt the tag
		"/v1/contexts/im/artifacts/q", // a view
		"/v1/contexts/im/artifacts/q?at=" + url.QueryEscape(first),
		"/v1/contexts/im/artifacts",                        // a list
		"/v1/contexts/im/artifacts/q/history",              // a resolved commit
		"/v1/contexts/im/audit/q",                          // streamed
		"/v1/contexts/im/commits",                          // the log
		"/v1/contexts/im/commits/main",                     // a branch head
		"/v1/contexts/im/commits/" + url.PathEscape(first), // a commit
		"/v1/contexts/im/hash",
		"/v1/contexts/im/state", // streamed export
		"/v1/contexts/im/diff?from=" + url.QueryEscape(first),
		"/v1/contexts/im/branches",
		"/v1/contexts/im/effects",         // leases salt the tag
		"/v1/contexts/im/blobs/" + digest, // the digest is the tag
		"/v1/blobs/" + digest,
		"/v1/types", // the bytes are the tag
		"/v1/types/claim",
		"/v1/relations",
	}
}

// wantPreconditionFailed checks a 412 precondition-failed problem naming
// If-Match with rule matches_etag (a HEAD: the status and no body).
func wantPreconditionFailed(t *testing.T, what, method string, r *resp) {
	t.Helper()
	if r.status != http.StatusPreconditionFailed {
		t.Errorf("%s: %d, want 412: %.200s", what, r.status, r.body)
		return
	}
	if r.header.Get("Content-Type") != "application/problem+json" || r.header.Get("ETag") != "" {
		t.Errorf("%s: Content-Type %q, ETag %q", what, r.header.Get("Content-Type"), r.header.Get("ETag"))
	}
	if method == http.MethodHead {
		if len(r.body) != 0 {
			t.Errorf("%s: a HEAD answered with a body of %d bytes", what, len(r.body))
		}
		return
	}
	wantIfMatchProblem(t, what, r, 412, "precondition-failed", "matches_etag")
}

// TestIfMatchOnReads: every GET (and HEAD) that answers with an ETag
// evaluates If-Match against it before If-None-Match (RFC 9110 §13.1.1,
// §13.2.2): the tag itself, or a list holding it, or "*" is 200; another
// tag, the weak form of the tag, or an empty list is 412 precondition-failed
// naming If-Match; If-Match true and If-None-Match naming the tag is 304,
// If-Match false and If-None-Match naming the tag is 412.
func TestIfMatchOnReads(t *testing.T) {
	e, first, digest := ifMatchReadEnv(t)
	v := newOpenAPIValidator(t, e.get("/openapi.json").body)
	const other = `"0123456789abcdef"`
	checkConditionalReads(t, e, ifMatchReadPaths(first, digest), "If-Match", func(tag string) []conditionalCase {
		return []conditionalCase{
			{"its tag", http.Header{"If-Match": {tag}}, 200},
			{"star", http.Header{"If-Match": {"*"}}, 200},
			{"a list holding it", http.Header{"If-Match": {other + ", " + tag}}, 200},
			{"two lines, one holding it", http.Header{"If-Match": {other, tag}}, 200},
			{"its tag and If-None-Match naming it", http.Header{"If-Match": {tag}, "If-None-Match": {tag}}, 304},
			{"star and If-None-Match naming it", http.Header{"If-Match": {"*"}, "If-None-Match": {tag}}, 304},
			{"its tag and If-None-Match another", http.Header{"If-Match": {tag}, "If-None-Match": {other}}, 200},
			{"another tag", http.Header{"If-Match": {other}}, 412},
			{"the weak form of its tag", http.Header{"If-Match": {"W/" + tag}}, 412},
			{"its tag unquoted", http.Header{"If-Match": {strings.Trim(tag, `"`)}}, 412},
			{"an empty list", http.Header{"If-Match": {""}}, 412},
			{"another tag and If-None-Match naming it", http.Header{"If-Match": {other}, "If-None-Match": {tag}}, 412},
		}
	}, v.check)
}

// conditionalCase is a read's conditional headers and the status they
// must give: 200 (the ETag and the body of the read without them), 304
// (the ETag) or 412 (wantPreconditionFailed).
type conditionalCase struct {
	name   string
	h      http.Header
	status int
}

// checkConditionalReads sends each of paths by GET and HEAD, plain and with
// the headers of each case cases makes of its ETag, and checks the
// answers; what names the header the cases are about, and check (when not
// nil) sees every conditional answer.
func checkConditionalReads(t *testing.T, e *env, paths []string, what string, cases func(tag string) []conditionalCase, check func(method, path string, r *resp)) {
	t.Helper()
	for _, p := range paths {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			plain := e.send(req{method: method, path: p})
			tag := plain.header.Get("ETag")
			if plain.status != 200 || tag == "" {
				t.Errorf("%s %s: %d with ETag %q", method, p, plain.status, tag)
				continue
			}
			for _, c := range cases(tag) {
				name := method + " " + p + " with " + what + " " + c.name
				r := e.sendHeaders(method, p, nil, c.h)
				switch c.status {
				case 412:
					wantPreconditionFailed(t, name, method, r)
				case 304:
					if r.status != 304 || r.header.Get("ETag") != tag {
						t.Errorf("%s: %d with ETag %q, want 304 with %s", name, r.status, r.header.Get("ETag"), tag)
					}
				default:
					if r.status != 200 || r.header.Get("ETag") != tag || string(r.body) != string(plain.body) {
						t.Errorf("%s: %d with ETag %q, want 200 with %s and the plain body", name, r.status, r.header.Get("ETag"), tag)
					}
				}
				if check != nil {
					check(method, p, r)
				}
			}
		}
	}
}

// TestIfMatchOnReadsKeepsA4xx: a precondition applies only where the read
// would answer 2xx (RFC 9110 §13.2.1): an artifact deleted or never
// written, its history or audit, a blob the context does not hold, a
// context that does not exist answer the same 404 with any If-Match —
// "*", a tag, an empty list — and never 412 or 200.
func TestIfMatchOnReadsKeepsA4xx(t *testing.T) {
	e, _, _ := ifMatchReadEnv(t)
	tag := e.get("/v1/contexts/im/artifacts/q").header.Get("ETag")
	for _, p := range []string{
		"/v1/contexts/im/artifacts/gone",
		"/v1/contexts/im/artifacts/never",
		"/v1/contexts/im/artifacts/never/history",
		"/v1/contexts/im/audit/gone",
		"/v1/contexts/im/commits/nosuchbranch",
		"/v1/contexts/im/blobs/" + digestOf([]byte("not held")),
		"/v1/blobs/" + digestOf([]byte("not held")),
		"/v1/types/nosuch",
		"/v1/contexts/nosuch/artifacts/q",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			plain := e.send(req{method: method, path: p}).status
			if plain != 404 {
				t.Errorf("%s %s: %d, want 404", method, p, plain)
				continue
			}
			for _, im := range []string{"*", tag, `"0123456789abcdef"`, ""} {
				r := e.sendHeaders(method, p, nil, http.Header{"If-Match": {im}})
				if r.status != plain {
					t.Errorf("%s %s with If-Match %q: %d, want the %d it answers without", method, p, im, r.status, plain)
				}
			}
		}
	}
}

// TestIfMatchOnUntaggedReads: a GET that sends no ETag (the context list, a
// comparison, the operational routes) has no tag a list could match: "*"
// is 200 as without it, any list of tags is 412; a comparison that
// answers 404 still does.
func TestIfMatchOnUntaggedReads(t *testing.T) {
	e, _, _ := ifMatchReadEnv(t)
	for _, p := range []string{"/v1/contexts", "/v1/compare?a=im&b=im%40main", "/healthz", "/readyz", "/metrics", "/openapi.json"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if r := e.sendHeaders(method, p, nil, http.Header{"If-Match": {"*"}}); r.status != 200 {
				t.Errorf("%s %s with If-Match *: %d, want 200", method, p, r.status)
			}
			wantPreconditionFailed(t, method+" "+p+` with If-Match "x"`, method, e.sendHeaders(method, p, nil, http.Header{"If-Match": {`"x"`}}))
		}
	}
	if r := e.sendHeaders("GET", "/v1/compare?a=im&b=nosuch", nil, http.Header{"If-Match": {`"x"`}}); r.status != 404 {
		t.Errorf("a comparison with a context that does not exist, with If-Match: %d, want 404", r.status)
	}
}

// TestOpenAPIDeclaresPreconditionFailed: every GET and HEAD evaluates
// If-Match, and /openapi.json declares its 412 for each.
func TestOpenAPIDeclaresPreconditionFailed(t *testing.T) {
	e := newEnv(t)
	doc := e.must(e.get("/openapi.json"), 200)
	n := 0
	for path, item := range doc["paths"].(map[string]any) {
		for _, method := range []string{"get", "head"} {
			op, ok := item.(map[string]any)[method].(map[string]any)
			if !ok {
				continue
			}
			n++
			if _, ok := op["responses"].(map[string]any)["412"]; !ok {
				t.Errorf("%s %s: no 412 declared", method, path)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d GET and HEAD operations", n)
	}
}

// TestEmptyIfMatchOnWrites: an If-Match header sent empty is a condition
// that names no commit, refused on a write that lands on a branch as any
// If-Match that is not a full commit id is (422 naming If-Match, rule
// commit_id), and nothing is written; it was ignored and the write
// applied. So is a second If-Match line, which was dropped.
func TestEmptyIfMatchOnWrites(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	before := e.ifMatchSnapshot("c", "")
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "1"}}},
		{"/v1/contexts/c/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": "b", "type": "note", "data": map[string]any{"text": "x"}}}}}},
		{"/v1/contexts/c/effects", map[string]any{"idempotency_key": "k1", "kind": "email"}},
	} {
		r := e.sendHeaders("POST", c.path, c.body, http.Header{"If-Match": {""}})
		wantIfMatchProblem(t, "POST "+c.path+" with an empty If-Match", r, 422, "validation", "commit_id")
		if after := e.ifMatchSnapshot("c", ""); after != before {
			t.Errorf("POST %s: the refused write changed the context: %s", c.path, before.diff(after))
			before = after
		}
	}
	// Two header lines are one list, which names no one commit: the
	// second line is not dropped.
	head := `"` + before.head + `"`
	r := e.sendHeaders("POST", "/v1/contexts/c/artifacts", map[string]any{"id": "two", "type": "note", "data": map[string]any{"text": "1"}}, http.Header{"If-Match": {head, `"sha256:` + strings.Repeat("0", 64) + `"`}})
	wantIfMatchProblem(t, "POST artifacts with two If-Match lines", r, 422, "validation", "commit_id")
	if after := e.ifMatchSnapshot("c", ""); after != before {
		t.Errorf("two If-Match lines: the refused write changed the context: %s", before.diff(after))
	}
	// A write with no branch head refuses it as it refuses any If-Match.
	r = e.sendHeaders("POST", "/v1/contexts/c/branches", map[string]any{"name": "b2"}, http.Header{"If-Match": {""}})
	wantIfMatchProblem(t, "POST branches with an empty If-Match", r, 422, "validation", "not_supported")
}

// TestIfNoneMatchOnTwoLines: If-None-Match sent on several header lines is
// one comma-separated list (RFC 9110 §5.3), as If-Match is: the read's
// ETag, its weak form or "*" on the second line is 304 as it is on the
// first — on the early path (the tag known before the read) and after it
// alike — and If-Match is still evaluated first. A read that would answer
// 404 keeps it with "*" on a second line.
func TestIfNoneMatchOnTwoLines(t *testing.T) {
	e, first, digest := ifMatchReadEnv(t)
	const other = `"0123456789abcdef"`
	checkConditionalReads(t, e, ifMatchReadPaths(first, digest), "If-None-Match", func(tag string) []conditionalCase {
		return []conditionalCase{
			{"another tag, then its tag", http.Header{"If-None-Match": {other, tag}}, 304},
			{"another tag, then its weak form", http.Header{"If-None-Match": {other, "W/" + tag}}, 304},
			{"another tag, then star", http.Header{"If-None-Match": {other, "*"}}, 304},
			{"an empty line, then its tag", http.Header{"If-None-Match": {"", tag}}, 304},
			{"another tag, then its tag, and If-Match its tag", http.Header{"If-None-Match": {other, tag}, "If-Match": {tag}}, 304},
			{"another tag, then its tag, and If-Match another", http.Header{"If-None-Match": {other, tag}, "If-Match": {other}}, 412},
			{"two other tags", http.Header{"If-None-Match": {other, `"fedcba9876543210"`}}, 200},
		}
	}, nil)
	for _, p := range []string{"/v1/contexts/im/artifacts/gone", "/v1/contexts/im/artifacts/never/history", "/v1/contexts/im/audit/gone"} {
		if r := e.sendHeaders(http.MethodGet, p, nil, http.Header{"If-None-Match": {other, "*"}}); r.status != 404 {
			t.Errorf("GET %s with If-None-Match another tag, then star: %d, want the 404 it answers without", p, r.status)
		}
	}
}
