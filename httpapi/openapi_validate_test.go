package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// openAPIValidator checks real responses against the schemas the OpenAPI
// document declares for them.
type openAPIValidator struct {
	t     *testing.T
	doc   map[string]any
	c     *jsonschema.Compiler
	paths []openAPIPath
	seen  map[string]bool // operationIds whose response was validated
}

type openAPIPath struct {
	re       *regexp.Regexp
	template string
}

func newOpenAPIValidator(t *testing.T, raw []byte) *openAPIValidator {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:artifactd:openapi", inst); err != nil {
		t.Fatal(err)
	}
	v := &openAPIValidator{t: t, doc: doc, c: c, seen: map[string]bool{}}
	for tmpl := range doc["paths"].(map[string]any) {
		re := "^" + regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		v.paths = append(v.paths, openAPIPath{regexp.MustCompile(re), tmpl})
	}
	// Literal segments beat parameters: try longer templates first.
	sort.Slice(v.paths, func(i, j int) bool { return len(v.paths[i].template) > len(v.paths[j].template) })
	return v
}

// check validates r, the response of method on path (with its query),
// against the declared schema of its status; it fails when the status is
// not declared or the body does not match.
func (v *openAPIValidator) check(method, path string, r *resp) {
	v.t.Helper()
	p, _, _ := strings.Cut(path, "?")
	var tmpl string
	for _, cand := range v.paths {
		if cand.re.MatchString(p) {
			if _, ok := v.doc["paths"].(map[string]any)[cand.template].(map[string]any)[strings.ToLower(method)]; ok {
				tmpl = cand.template
				break
			}
		}
	}
	if tmpl == "" {
		v.t.Errorf("%s %s: no documented operation", method, path)
		return
	}
	op := v.doc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	id := op["operationId"].(string)
	responses := op["responses"].(map[string]any)
	code := strconv.Itoa(r.status)
	decl, ok := responses[code].(map[string]any)
	pointer := "/paths/" + jsonPointerEscape(tmpl) + "/" + strings.ToLower(method) + "/responses/" + code
	if !ok {
		if r.status >= 400 {
			decl, ok = responses["default"].(map[string]any)
			pointer = "/paths/" + jsonPointerEscape(tmpl) + "/" + strings.ToLower(method) + "/responses/default"
		}
		if !ok {
			v.t.Errorf("%s %s (%s): status %d is not declared", method, path, id, r.status)
			return
		}
	}
	if method == http.MethodHead {
		// A declared status, and never a body.
		if len(r.body) != 0 {
			v.t.Errorf("%s %s (%s): %d with a body of %d bytes", method, path, id, r.status, len(r.body))
			return
		}
		v.seen[id] = true
		return
	}
	if ref, ok := decl["$ref"].(string); ok {
		pointer = strings.TrimPrefix(ref, "#")
		decl = v.resolve(pointer)
	}
	ct, _, _ := strings.Cut(r.header.Get("Content-Type"), ";")
	content, _ := decl["content"].(map[string]any)
	media, ok := content[ct].(map[string]any)
	if !ok {
		if len(r.body) == 0 && content == nil {
			v.seen[id] = true
			return
		}
		v.t.Errorf("%s %s (%s): content type %q not declared for %d", method, path, id, ct, r.status)
		return
	}
	if ct != "application/json" && ct != "application/problem+json" {
		v.seen[id] = true
		return
	}
	sch, err := v.c.Compile("urn:artifactd:openapi#" + pointer + "/content/" + jsonPointerEscape(ct) + "/schema")
	if err != nil {
		v.t.Fatalf("compile schema of %s %d: %v", id, r.status, err)
	}
	_ = media
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		v.t.Errorf("%s %s: body is not JSON: %v", method, path, err)
		return
	}
	if err := sch.Validate(inst); err != nil {
		v.t.Errorf("%s %s (%s, %d): the response does not match its schema: %v\nbody: %.600s", method, path, id, r.status, err, r.body)
		return
	}
	v.seen[id] = true
}

func (v *openAPIValidator) resolve(pointer string) map[string]any {
	var cur any = v.doc
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		cur = cur.(map[string]any)[part]
	}
	return cur.(map[string]any)
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TestOpenAPIResponsesMatch drives every JSON operation over real HTTP and
// validates each response — successes and problems — against the schema
// /openapi.json declares for its status.
func TestOpenAPIResponsesMatch(t *testing.T) {
	e := newEnv(t)
	v := newOpenAPIValidator(t, e.get("/openapi.json").body)
	do := func(method, path string, body any) map[string]any {
		t.Helper()
		r := e.send(req{method: method, path: path, body: body})
		v.check(method, path, r)
		if method == http.MethodGet {
			head := e.send(req{method: http.MethodHead, path: path})
			if head.status != r.status {
				t.Errorf("HEAD %s: %d, GET %d", path, head.status, r.status)
			}
			v.check(http.MethodHead, path, head)
		}
		if len(r.body) == 0 || r.body[0] != '{' {
			return nil
		}
		return r.obj(t)
	}
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics"} {
		do("GET", p, nil)
	}
	do("POST", "/v1/contexts", map[string]any{"id": "run", "quarantine": "enforce"})
	do("POST", "/v1/contexts", map[string]any{"id": "run"})                 // 409 exists
	do("POST", "/v1/contexts", map[string]any{"id": "bad id"})              // 422
	do("PUT", "/v1/contexts/run2", map[string]any{"quarantine": "observe"}) // 201
	do("PUT", "/v1/contexts/run2", map[string]any{"quarantine": "observe"}) // 200
	do("PUT", "/v1/contexts/run2", map[string]any{"quarantine": "enforce"}) // 409
	do("PUT", "/v1/contexts/run3", nil)                                     // 201 without a body
	do("GET", "/v1/contexts", nil)
	do("GET", "/v1/contexts/run", nil)
	do("GET", "/v1/contexts/nothing", nil) // 404
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": "q", "type": "question", "produced_by": "user", "data": map[string]any{"text": "6 x 7?"}})
	fetch := do("POST", "/v1/contexts/run/fetches", map[string]any{"id": "f", "url": "https://example.com/x", "status": 200,
		"headers": map[string]any{"content-type": "text/plain"}, "body": "The answer is forty-two, as every careful reader of the guide knows."})
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": "c", "type": "claim", "produced_by": "agent", "data": map[string]any{"text": "42"},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "f", "attrs": map[string]any{"why": "read"}}}})
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": "a", "type": "answer", "produced_by": "agent", "data": map[string]any{"text": "42"},
		"edges": []any{map[string]any{"rel": "supported_by", "to": "c"}, map[string]any{"rel": "responds_to", "to": "q"}}})
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"type": "answer", "data": map[string]any{"n": json.Number("12345678901234567890")}})                             // 400
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"type": "claim", "data": map[string]any{}})                                                                      // 422
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": "x", "type": "claim", "data": map[string]any{"text": "x"}, "parent": "sha256:" + strings.Repeat("0", 64)}) // 409 stale
	do("POST", "/v1/contexts/run/tool-results", map[string]any{"id": "t", "tool": "calc", "output": "42"})
	do("POST", "/v1/contexts/run/fetches", map[string]any{"kind": "file", "path": "/notes/a.md", "size": 11, "body": "hello world", "produced_by": "agent"})
	do("POST", "/v1/admin/secrets", map[string]any{"secrets": []any{"a-long-secret-1"}})
	do("POST", "/v1/admin/secrets", map[string]any{"secrets": []any{"tiny"}}) // 422
	do("POST", "/v1/contexts/run/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "n"}}}}})
	do("GET", "/v1/contexts/run/commits", nil)
	do("GET", "/v1/contexts/run/commits/main", nil)
	do("GET", "/v1/contexts/run/artifacts", nil)
	do("GET", "/v1/contexts/run/artifacts/a", nil)
	do("GET", "/v1/contexts/run/artifacts/zz", nil) // 404
	do("GET", "/v1/contexts/run/artifacts/a/history", nil)
	do("GET", "/v1/contexts/run/artifacts/a/related", nil)
	do("GET", "/v1/contexts/run/artifacts/a/provenance", nil)
	do("GET", "/v1/contexts/run/artifacts/a/provenance?format=mermaid", nil)
	do("GET", "/v1/contexts/run/edges", nil)
	do("GET", "/v1/contexts/run/state", nil)
	do("GET", "/v1/contexts/run/hash", nil)
	do("GET", "/v1/contexts/run/quarantine", nil)
	first := do("GET", "/v1/contexts/run/commits?limit=100", nil)["items"].([]any)
	root := first[len(first)-1].(map[string]any)["id"].(string)
	do("GET", "/v1/contexts/run/diff?from="+root, nil)
	do("GET", "/v1/contexts/run/diff?from=nope~1", nil) // 400
	do("GET", "/v1/contexts/run/audit/a", nil)
	do("GET", "/v1/contexts/run/audit/a?format=markdown", nil)
	do("GET", "/v1/contexts/run/branches", nil)
	do("POST", "/v1/contexts/run/branches", map[string]any{"name": "alt", "at": root})
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": "q", "type": "question", "branch": "alt", "data": map[string]any{"text": "6 x 7?"}})
	do("POST", "/v1/contexts/run/merge", map[string]any{"theirs": "alt"})
	do("POST", "/v1/contexts/run/branches/alt/reset", map[string]any{"to": root})
	do("POST", "/v1/contexts/run/effects", map[string]any{"kind": "email", "target": "ops", "idempotency_key": "k1", "payload": map[string]any{"x": 1}})
	do("GET", "/v1/contexts/run/effects", nil)
	do("POST", "/v1/contexts/run/effects/claim", map[string]any{"worker": "w"})
	do("GET", "/v1/contexts/run/eval", nil)
	hashNow := do("GET", "/v1/contexts/run/hash", nil)
	do("POST", "/v1/contexts/run/verify", map[string]any{"hash": hashNow["context_hash"]})
	do("POST", "/v1/contexts/run/verify", map[string]any{"hash": "sha256:" + strings.Repeat("0", 64)})
	do("GET", "/v1/relations", nil)
	do("PUT", "/v1/relations/pending_for", map[string]any{"depends": false})
	do("GET", "/v1/relations/pending_for", nil)
	do("GET", "/v1/types", nil)
	do("GET", "/v1/types/claim", nil)
	do("PUT", "/v1/types/recipe", map[string]any{"role": "derived", "schema": map[string]any{"type": "object", "required": []any{"name"}}})
	r := e.send(req{method: "POST", path: "/v1/blobs", body: []byte("hello")})
	v.check("POST", "/v1/blobs", r)
	do("GET", "/v1/blobs/"+fetch["body_blob"].(string), nil)
	r = e.send(req{method: "POST", path: "/v1/contexts/run/blobs", body: []byte("hello")})
	v.check("POST", "/v1/contexts/run/blobs", r)
	do("GET", "/v1/contexts/run/blobs/"+fetch["body_blob"].(string), nil)
	do("GET", "/v1/contexts/run/blobs/sha256:"+strings.Repeat("0", 64), nil) // 404
	// Recorded model calls.
	request := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "6 x 7?"}}}
	canon, _ := json.Marshal(request)
	h, err := ModelCallRequestHash(canon)
	if err != nil {
		t.Fatal(err)
	}
	do("GET", "/v1/contexts/run/model-calls/"+h.String(), nil) // 404
	do("POST", "/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(h), "type": "model_call", "produced_by": "agent",
		"data": map[string]any{"model": "m", "request_hash": h.String(), "request": request, "response": map[string]any{"text": "42"}}})
	do("GET", "/v1/contexts/run/model-calls/"+h.String(), nil)
	do("GET", "/v1/contexts/run/model-calls/xyz", nil) // 400
	// Comparison.
	do("GET", "/v1/compare?a=run&b=run", nil)
	do("GET", "/v1/compare?a=run&b=run2", nil)
	do("GET", "/v1/compare?a=run&b=nothing", nil) // 404
	do("GET", "/v1/compare?a=run", nil)           // 400

	var missing []string
	for _, item := range v.doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			id := op.(map[string]any)["operationId"].(string)
			if !v.seen[id] {
				missing = append(missing, id)
			}
		}
	}
	sort.Strings(missing)
	// The effect completion routes need a lease token from the claim; the
	// outbox tests cover them. Everything else must have been validated.
	if got := fmt.Sprint(missing); got != "[completeEffect failEffect]" {
		t.Errorf("operations never validated: %s", got)
	}
}
