package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOpenAPIDeclaresNotModified: every GET that answers with an ETag
// answers 304 to it in If-None-Match, and /openapi.json declares that
// 304 for the operation (a client generated from the document must not
// meet a status it was never told of).
func TestOpenAPIDeclaresNotModified(t *testing.T) {
	e := newEnv(t)
	v := newOpenAPIValidator(t, e.get("/openapi.json").body)
	e.createContext("nm", "observe")
	w := e.must(e.post("/v1/contexts/nm/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 201)
	first := w["commit"].(string)
	blob := e.send(req{method: "POST", path: "/v1/contexts/nm/blobs", body: []byte("hello")})
	digest := blob.obj(t)["digest"].(string)
	e.must(e.post("/v1/contexts/nm/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "n"}}), 201)
	for _, p := range []string{
		"/v1/contexts/nm",
		"/v1/contexts/nm/commits",
		"/v1/contexts/nm/commits/main",
		"/v1/contexts/nm/artifacts",
		"/v1/contexts/nm/artifacts/q",
		"/v1/contexts/nm/artifacts/q/history",
		"/v1/contexts/nm/artifacts/q/related",
		"/v1/contexts/nm/artifacts/q/provenance",
		"/v1/contexts/nm/edges",
		"/v1/contexts/nm/state",
		"/v1/contexts/nm/hash",
		"/v1/contexts/nm/quarantine",
		"/v1/contexts/nm/diff?from=" + first,
		"/v1/contexts/nm/audit/q",
		"/v1/contexts/nm/eval",
		"/v1/contexts/nm/branches",
		"/v1/contexts/nm/effects", // on the real clock, which moves between the two requests
		"/v1/contexts/nm/blobs/" + digest,
		"/v1/types",
		"/v1/types/claim",
		"/v1/relations",
		"/v1/relations/derived_from",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			r := e.send(req{method: method, path: p})
			tag := r.header.Get("ETag")
			if r.status != 200 || tag == "" {
				t.Errorf("%s %s: %d with ETag %q", method, p, r.status, tag)
				continue
			}
			nm := e.send(req{method: method, path: p, header: map[string]string{"If-None-Match": tag}})
			if nm.status != http.StatusNotModified {
				t.Errorf("%s %s with its ETag: %d, want 304", method, p, nm.status)
				continue
			}
			v.check(method, p, nm)
		}
	}
}

// TestReadCacheControl: a read at a branch (which moves) or at a prefix
// (which a later commit can make ambiguous) is kept only on the condition
// that it is revalidated with its ETag; a read at a full commit id,
// which never changes, is immutable; a read that depends on more than
// its commit (the branches, the clock) is revalidated at any ref.
func TestReadCacheControl(t *testing.T) {
	e := newEnv(t)
	e.createContext("cc", "observe")
	c1 := e.must(e.post("/v1/contexts/cc/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 201)["commit"].(string)
	c2 := e.must(e.post("/v1/contexts/cc/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "n"}}), 201)["commit"].(string)
	prefix := strings.TrimPrefix(c2, "sha256:")[:12]
	at := "?at=" + url.QueryEscape(c2)
	const revalidate, fixed = "private, no-cache", "private, max-age=31536000, immutable"
	for _, tc := range []struct{ path, want string }{
		{"/v1/contexts/cc/artifacts/q", revalidate},
		{"/v1/contexts/cc/artifacts/q?at=main", revalidate},
		{"/v1/contexts/cc/artifacts/q?at=" + prefix, revalidate},
		{"/v1/contexts/cc/artifacts/q" + at, fixed},
		{"/v1/contexts/cc/artifacts/q?at=" + strings.TrimPrefix(c2, "sha256:"), fixed},
		{"/v1/contexts/cc/artifacts", revalidate},
		{"/v1/contexts/cc/artifacts" + at, fixed},
		{"/v1/contexts/cc/artifacts/q/history", revalidate},
		{"/v1/contexts/cc/artifacts/q/history" + at, fixed},
		{"/v1/contexts/cc/edges" + at, fixed},
		{"/v1/contexts/cc/state", revalidate},
		{"/v1/contexts/cc/state" + at, fixed},
		{"/v1/contexts/cc/hash", revalidate},
		{"/v1/contexts/cc/hash" + at, fixed},
		{"/v1/contexts/cc/quarantine" + at, fixed},
		{"/v1/contexts/cc/commits", revalidate},
		{"/v1/contexts/cc/commits" + at, fixed},
		{"/v1/contexts/cc/commits/main", revalidate},
		{"/v1/contexts/cc/commits/" + prefix, revalidate},
		{"/v1/contexts/cc/commits/" + url.PathEscape(c2), fixed},
		{"/v1/contexts/cc/diff?from=" + url.QueryEscape(c1), revalidate},
		{"/v1/contexts/cc/diff?from=" + url.QueryEscape(c1) + "&to=" + url.QueryEscape(c2), fixed},
		{"/v1/contexts/cc" + at, revalidate},         // lists the branches
		{"/v1/contexts/cc/effects" + at, revalidate}, // lease expiry reads the clock
		{"/v1/contexts/cc/branches", revalidate},
		{"/v1/types", revalidate},
		{"/v1/contexts", revalidate},                 // no ETag: asked again each time
		{"/v1/compare?a=cc&b=cc%40main", revalidate}, // no ETag: asked again each time
	} {
		r := e.get(tc.path)
		if r.status != 200 || r.header.Get("Cache-Control") != tc.want {
			t.Errorf("GET %s: %d, Cache-Control %q, want %q", tc.path, r.status, r.header.Get("Cache-Control"), tc.want)
			continue
		}
		nm := e.send(req{method: "GET", path: tc.path, header: map[string]string{"If-None-Match": r.header.Get("ETag")}})
		if nm.status == http.StatusNotModified && nm.header.Get("Cache-Control") != tc.want {
			t.Errorf("GET %s: 304 with Cache-Control %q, want %q", tc.path, nm.header.Get("Cache-Control"), tc.want)
		}
	}
	// A refusal is never kept.
	if r := e.get("/v1/contexts/cc/artifacts/zz" + at); r.status != 404 || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("404: Cache-Control %q", r.header.Get("Cache-Control"))
	}
}

// TestAmbiguousPrefixNamesItsParameter: a commit prefix that matches
// more than one commit is refused with 400 ambiguous-ref naming the
// parameter (or body member) it was given in, as every other refusal of
// a query does, and never answered with one of the commits.
func TestAmbiguousPrefixNamesItsParameter(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 42, 5, 0, time.UTC) // TestBadInput's: knownPair holds
	e := newEnv(t, withClock(now))
	amb := setupBad(t, e, now)
	for _, tc := range []struct{ method, path, param, pointer string }{
		{"GET", "/v1/contexts/bad/state?at=" + amb, "at", ""},
		{"GET", "/v1/contexts/bad/artifacts?at=" + amb, "at", ""},
		{"GET", "/v1/contexts/bad?at=" + amb, "at", ""},
		{"GET", "/v1/contexts/bad/hash?at=" + amb, "at", ""},
		{"GET", "/v1/contexts/bad/commits?at=" + amb, "at", ""},
		{"GET", "/v1/contexts/bad/commits/" + amb, "commit", ""},
		{"GET", "/v1/contexts/bad/diff?from=" + amb, "from", ""},
		{"GET", "/v1/contexts/bad/diff?from=main&to=" + amb, "to", ""},
		{"POST", "/v1/contexts/bad/branches", "", "/at"},
		{"GET", "/v1/compare?a=bad@" + amb + "&b=bad@main", "a", ""},
		{"GET", "/v1/compare?a=bad@main&b=bad@" + amb, "b", ""},
	} {
		var body any
		if tc.method == "POST" {
			body = map[string]any{"name": "from-amb", "at": amb}
		}
		r := e.send(req{method: tc.method, path: tc.path, body: body})
		if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, r.status, r.body)
			continue
		}
		p := r.obj(t)
		if p["type"] != ProblemTypePrefix+CodeAmbiguousRef {
			t.Errorf("%s %s: %v", tc.method, tc.path, p["type"])
		}
		named := false
		errs, _ := p["errors"].([]any)
		for _, x := range errs {
			fe := x.(map[string]any)
			if fe["rule"] == "unique_prefix" && fe["parameter"] == nilIfEmpty(tc.param) && fe["pointer"] == nilIfEmpty(tc.pointer) {
				named = true
			}
		}
		if !named {
			t.Errorf("%s %s: no errors entry naming %q%q with rule unique_prefix: %s", tc.method, tc.path, tc.param, tc.pointer, r.body)
		}
	}
}

// nilIfEmpty is s as a decoded JSON member: absent (nil) when empty.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestHeadOfAStreamedReadStreamsNothing: HEAD of the state export, a
// diff or an audit answers the GET's status and headers without
// producing the body net/http would throw away: the export reads no
// payload (the streamed-artifacts counter does not move) and the answer
// still carries the ETag and Cache-Control of the GET.
func TestHeadOfAStreamedReadStreamsNothing(t *testing.T) {
	e := newEnv(t)
	e.createContext("hd", "observe")
	first := e.must(e.post("/v1/contexts/hd/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 201)["commit"].(string)
	e.must(e.post("/v1/contexts/hd/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "n"}}), 201)
	streamed := func() string {
		for _, line := range strings.Split(e.get("/metrics").String(), "\n") {
			if strings.HasPrefix(line, "artifactd_state_artifacts_streamed_total ") {
				return line
			}
		}
		t.Fatal("no artifactd_state_artifacts_streamed_total in /metrics")
		return ""
	}
	before := streamed()
	for _, p := range []string{"/v1/contexts/hd/state", "/v1/contexts/hd/diff?from=" + url.QueryEscape(first), "/v1/contexts/hd/audit/q"} {
		get := e.get(p)
		head := e.send(req{method: http.MethodHead, path: p})
		if head.status != 200 || len(head.body) != 0 || head.header.Get("ETag") != get.header.Get("ETag") ||
			head.header.Get("Content-Type") != get.header.Get("Content-Type") || head.header.Get("Cache-Control") != get.header.Get("Cache-Control") {
			t.Errorf("HEAD %s: %d %v, GET %v", p, head.status, head.header, get.header)
		}
	}
	e.get("/v1/contexts/hd/state") // one GET: 2 artifacts
	for i := 0; i < 3; i++ {
		e.send(req{method: http.MethodHead, path: "/v1/contexts/hd/state"})
	}
	after := streamed()
	var b, a float64
	fmt.Sscanf(strings.Fields(before)[1], "%g", &b)
	fmt.Sscanf(strings.Fields(after)[1], "%g", &a)
	if a-b != 4 { // the two GETs' artifacts, none of the HEADs'
		t.Errorf("streamed artifacts went from %v to %v, want +4 (two GETs of 2, no HEAD)", b, a)
	}
}

// TestAmbiguousPrefixInABodyNamesItsMember: a commit prefix given in a
// write's body and matching more than one commit is refused naming the
// member it was given in, as a new branch's /at is: a reset's /to, a
// merge's /theirs and a verify's /at were refused with 400 ambiguous-ref
// and no errors entry.
func TestAmbiguousPrefixInABodyNamesItsMember(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 42, 5, 0, time.UTC) // TestBadInput's: knownPair holds
	e := newEnv(t, withClock(now))
	amb := setupBad(t, e, now)
	e.must(e.post("/v1/contexts/bad/branches", map[string]any{"name": "side", "at": "main"}), 201)
	for _, tc := range []struct {
		path, pointer string
		body          map[string]any
	}{
		{"/v1/contexts/bad/branches/side/reset", "/to", map[string]any{"to": amb}},
		{"/v1/contexts/bad/merge", "/theirs", map[string]any{"ours": "main", "theirs": amb}},
		{"/v1/contexts/bad/verify", "/at", map[string]any{"hash": strings.Repeat("0", 64), "at": amb}},
	} {
		r := e.send(req{method: "POST", path: tc.path, body: tc.body})
		if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("POST %s: %d %s", tc.path, r.status, r.body)
			continue
		}
		p := r.obj(t)
		if p["type"] != ProblemTypePrefix+CodeAmbiguousRef {
			t.Errorf("POST %s: %v", tc.path, p["type"])
		}
		named := false
		errs, _ := p["errors"].([]any)
		for _, x := range errs {
			fe := x.(map[string]any)
			if fe["rule"] == "unique_prefix" && fe["pointer"] == tc.pointer && fe["parameter"] == nil {
				named = true
			}
		}
		if !named {
			t.Errorf("POST %s: no errors entry naming %s with rule unique_prefix: %s", tc.path, tc.pointer, r.body)
		}
	}
}

// TestStarIfNoneMatchOnlyForARepresentation: If-None-Match: * matches
// only a current representation (RFC 9110 §13.1.2): a read that would
// answer 404 without the header (an artifact deleted or never written, its
// history, provenance, related or audit, a model call not recorded)
// answers the same 404 with it, never 304; one that would answer 200
// answers 304.
func TestStarIfNoneMatchOnlyForARepresentation(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "1"}}), 201)
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "k", "type": "note", "data": map[string]any{"text": "kept"}}), 201)
	e.must(e.post("/v1/contexts/c/commits", map[string]any{"ops": []any{map[string]any{"op": "delete", "id": "a"}}}), 201)
	star := map[string]string{"If-None-Match": "*"}
	for _, p := range []string{
		"/v1/contexts/c/artifacts/a",
		"/v1/contexts/c/artifacts/a/history",
		"/v1/contexts/c/artifacts/a/provenance",
		"/v1/contexts/c/artifacts/a/related",
		"/v1/contexts/c/artifacts/never",
		"/v1/contexts/c/artifacts/never/history",
		"/v1/contexts/c/audit/a",
		"/v1/contexts/c/audit/never",
		"/v1/contexts/c/model-calls/sha256:" + strings.Repeat("0", 64),
		"/v1/contexts/nosuch/artifacts/a",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			plain := e.send(req{method: method, path: p}).status
			r := e.send(req{method: method, path: p, header: star})
			if plain == 200 || r.status != plain {
				t.Errorf("%s %s: %d without If-None-Match, %d with If-None-Match: * (want the same, not 200)", method, p, plain, r.status)
			}
		}
	}
	for _, p := range []string{
		"/v1/contexts/c/artifacts/k",
		"/v1/contexts/c/artifacts/k/history",
		"/v1/contexts/c/artifacts/k/provenance",
		"/v1/contexts/c/artifacts/k/related",
		"/v1/contexts/c/audit/k",
		"/v1/contexts/c/state",
		"/v1/contexts/c/hash",
		"/v1/contexts/c/commits/main",
		"/v1/types",
	} {
		if r := e.send(req{method: http.MethodGet, path: p, header: star}); r.status != http.StatusNotModified || r.header.Get("ETag") == "" {
			t.Errorf("GET %s with If-None-Match: *: %d with ETag %q, want 304 with one", p, r.status, r.header.Get("ETag"))
		}
	}
}
