package httpapi

import (
	"net/http"
	"testing"
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
