package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

const testTokens = `
# token                   scope  contexts
admin-token-0123456789    admin  *
write-token-0123456789    write  *
read-token-01234567890    read   *
other-token-0123456789    write  other-*,elsewhere
`

const adminToken = "admin-token-0123456789"

// knownPair are two commit messages whose commits in setupBad share the
// first 8 hex digits of their ids.
var knownPair = [2]string{"m32301", "m117822"}

// setupBad makes context "bad" (enforce) holding a question, a RETRIEVED
// and a FAILED fetch verdict, a document and a claim, plus two branches
// whose heads share their first 8 hex digits (for the ambiguous-prefix
// case). It returns that prefix.
func setupBad(t *testing.T, e *env, now time.Time) string {
	e.createContext("bad", "enforce")
	ctx := context.Background()
	for _, v := range []struct {
		id     string
		status int
		body   string
	}{{"f1", 200, `{"price": 3}`}, {"f2", 503, "unavailable"}} {
		body := v.body
		in := FetchInput{ID: v.id, URL: "https://example.test/" + v.id, Status: v.status, Headers: map[string]string{"content-type": "application/json"}, Body: &body}
		if _, err := e.srv.RecordFetch(ctx, "bad", in); err != nil {
			t.Fatal(err)
		}
	}
	e.must(e.post("/v1/contexts/bad/artifacts", map[string]any{"id": "q1", "type": "question", "data": map[string]any{"text": "How much?"}}), 201)
	e.must(e.post("/v1/contexts/bad/artifacts", map[string]any{"id": "d1", "type": "document", "data": map[string]any{"text": "It costs 3."},
		"edges": []any{map[string]any{"rel": "extracted_from", "to": "f1"}}}), 201)
	e.must(e.post("/v1/contexts/bad/artifacts", map[string]any{"id": "c1", "type": "claim", "data": map[string]any{"text": "3", "value": 3},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "d1"}}}), 201)

	// Two commits, on two branches from the same head, that put the same
	// artifact with messages chosen so that their ids share a prefix. The
	// store's clock is fixed, so the ids can be computed in advance.
	head := e.must(e.get("/v1/contexts/bad/hash"), 200)["commit"].(string)
	for _, b := range []string{"amb0", "amb1", "amb2"} {
		e.must(e.post("/v1/contexts/bad/branches", map[string]any{"name": b, "at": head}), 201)
	}
	put := func(branch, msg string) map[string]any {
		return e.must(e.post("/v1/contexts/bad/commits", map[string]any{"branch": branch, "author": "t", "message": msg,
			"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": "amb", "type": "note", "data": map[string]any{"text": "x"}}}}}), 201)
	}
	scratch := put("amb0", "scratch")
	afterHash, _ := hashing.ParseDigest(scratch["context_hash"].(string))
	parent, _ := hashing.ParseDigest(head)
	ops := []graph.Op{{Op: graph.OpPut, ID: "amb", Type: "note", Version: 1, ContentHash: hashing.ContentHash([]byte(`{"text":"x"}`))}}
	when := hashing.FormatTime(now)
	idOf := func(msg string) hashing.Digest {
		c, err := replay.NewCommit([]hashing.Digest{parent}, ops, afterHash, "t", msg, when)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	if got := idOf("scratch").String(); got != scratch["commit"] {
		t.Fatalf("predicted commit id %s, store made %s", got, scratch["commit"])
	}
	// The pair was found by the search below; it only needs redoing when
	// the setup above changes.
	if a, b := idOf(knownPair[0]), idOf(knownPair[1]); a.Hex()[:8] == b.Hex()[:8] {
		put("amb1", knownPair[0])
		put("amb2", knownPair[1])
		return a.Hex()[:8]
	}
	opsHash, _, _ := graph.OpsHash(ops)
	seen := map[[4]byte]string{}
	for i := 0; ; i++ {
		msg := "m" + fmt.Sprint(i)
		id := hashing.CommitID(hashing.CommitHeader{Parents: []hashing.Digest{parent}, ContextHash: afterHash, OpsHash: opsHash, Author: "t", Message: msg, Time: when})
		var k [4]byte
		copy(k[:], id[:4])
		if other, ok := seen[k]; ok {
			t.Logf("colliding messages: %q %q (update knownPair)", other, msg)
			c1, c2 := put("amb1", other), put("amb2", msg)
			if c1["commit"].(string)[:15] != c2["commit"].(string)[:15] {
				t.Fatalf("commits %s and %s do not share a prefix", c1["commit"], c2["commit"])
			}
			return id.Hex()[:8]
		}
		seen[k] = msg
	}
}

// TestBadInput sends requests that must be refused and checks each
// answer's status, problem+json shape and field pointer, and that the
// context's head and hash did not move.
func TestBadInput(t *testing.T) {
	now := time.Date(2026, 11, 30, 7, 42, 5, 0, time.UTC)
	e := newEnv(t, withTokens(testTokens), withMaxBody(64<<10), withClock(now))
	e.token = adminToken
	ambiguous := setupBad(t, e, now)
	e.must(e.send(req{method: "PUT", path: "/v1/types/switch_state", body: `{"schema":{"type":"object","properties":{"status":{"enum":["on","off"]}}}}`}), 201)
	root := e.must(e.get("/v1/contexts/bad/commits?limit=1000"), 200)["items"].([]any)
	oldest := root[len(root)-1].(map[string]any)["id"].(string)

	art := func(extra string) string {
		return `{"id":"n1","type":"note","data":{"text":"hi"}` + extra + `}`
	}
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	big := `{"type":"note","data":{"text":"` + strings.Repeat("x", 100<<10) + `"}}`
	type tc struct {
		name, method, path string
		body               any
		hdr                map[string]string
		status             int
		code               string
		pointer, param     string // an errors[] entry that must be present
	}
	A := "/v1/contexts/bad/artifacts"
	C := "/v1/contexts/bad/commits"
	cases := []tc{
		{name: "malformed JSON", path: A, body: `{"type":`, status: 400, code: CodeMalformedJSON},
		{name: "trailing data", path: A, body: art(``) + ` x`, status: 400, code: CodeMalformedJSON},
		{name: "empty body", path: A, body: ``, status: 400, code: CodeMalformedJSON},
		{name: "duplicate key", path: A, body: `{"type":"note","type":"claim","data":{"text":"a"}}`, status: 400, code: CodeNonCanonicalJSON, pointer: "/type"},
		{name: "duplicate key in data", path: A, body: `{"type":"note","data":{"text":"a","text":"b"}}`, status: 400, code: CodeNonCanonicalJSON, pointer: "/data/text"},
		{name: "big integer", path: A, body: `{"type":"note","data":{"text":"a","n":12345678901234567890}}`, status: 400, code: CodeNonCanonicalJSON, pointer: "/data/n"},
		{name: "lone surrogate", path: A, body: `{"type":"note","data":{"text":"\ud800"}}`, status: 400, code: CodeNonCanonicalJSON, pointer: "/data/text"},
		{name: "too deep", path: A, body: `{"type":"note","data":` + deep + `}`, status: 400, code: CodeNonCanonicalJSON},
		{name: "body not an object", path: A, body: `[1,2]`, status: 422, code: CodeValidation, pointer: ""},
		{name: "type is a number", path: A, body: `{"type":5,"data":{"text":"a"}}`, status: 422, code: CodeValidation, pointer: "/type"},
		{name: "data is an array", path: A, body: `{"type":"note","data":[1]}`, status: 422, code: CodeValidation, pointer: "/data"},
		{name: "edges is an object", path: A, body: art(`,"edges":{}`), status: 422, code: CodeValidation, pointer: "/edges"},
		{name: "unknown member", path: A, body: art(`,"version":3`), status: 422, code: CodeValidation, pointer: "/version"},
		{name: "attrs not an object", path: A, body: art(`,"edges":[{"rel":"mentions","to":"q1","attrs":[]}]`), status: 422, code: CodeValidation, pointer: "/edges/0/attrs"},
		{name: "schema: wrong type", path: A, body: `{"type":"claim","data":{"text":5}}`, status: 422, code: CodeValidation, pointer: "/data/text"},
		{name: "schema: missing member", path: A, body: `{"type":"claim","data":{"value":1}}`, status: 422, code: CodeValidation, pointer: "/data/text"},
		{name: "schema: enum", path: C, body: `{"ops":[{"op":"put","artifact":{"type":"switch_state","data":{"status":"done"}}}]}`, status: 422, code: CodeValidation, pointer: "/ops/0/artifact/data/status"},
		{name: "missing edge target", path: A, body: art(`,"edges":[{"rel":"derived_from","to":"nope"}]`), status: 422, code: CodeDanglingEdge, pointer: "/edges/0/to"},
		{name: "unknown relation", path: A, body: art(`,"edges":[{"rel":"frobnicates","to":"q1"}]`), status: 422, code: CodeValidation, pointer: "/edges/0/rel"},
		{name: "cycle", path: A, body: `{"id":"d1","type":"document","data":{"text":"It costs 3."},"edges":[{"rel":"derived_from","to":"c1"}]}`, status: 422, code: CodeDependencyCycle, pointer: "/edges/0"},
		{name: "cycle in commit", path: C, body: `{"ops":[{"op":"link","from":"f1","rel":"uses","to":"c1"}]}`, status: 422, code: CodeDependencyCycle, pointer: "/ops/0"},
		{name: "quarantine refusal", path: A, body: `{"id":"c2","type":"claim","data":{"text":"down"},"edges":[{"rel":"derived_from","to":"f2"}]}`, status: 409, code: CodeQuarantined, pointer: "/edges/0"},
		{name: "cannot loosen enforce", path: A, body: art(`,"quarantine":"observe"`), status: 422, code: CodeValidation, pointer: "/quarantine"},
		{name: "unknown context", path: "/v1/contexts/nope/artifacts", body: art(``), status: 404, code: CodeNotFound},
		{name: "unknown type", path: A, body: `{"type":"gizmo","data":{}}`, status: 422, code: CodeUnknownType, pointer: "/type"},
		{name: "client fetch_verdict", path: A, body: `{"id":"f3","type":"fetch_verdict","data":{"url":"https://x","verdict":"RETRIEVED"}}`, status: 422, code: CodeReservedType, pointer: "/type"},
		{name: "client fetch_verdict in commit", path: C, body: `{"ops":[{"op":"put","artifact":{"type":"fetch_verdict","data":{"url":"https://x","verdict":"RETRIEVED"}}}]}`, status: 422, code: CodeReservedType, pointer: "/ops/0/artifact/type"},
		{name: "client effect", path: A, body: `{"id":"e1","type":"effect","data":{"idempotency_key":"k","kind":"email","target":"x","payload":{},"status":"sent","attempts":1}}`, status: 422, code: CodeReservedType, pointer: "/type"},
		{name: "client effect in commit", path: C, body: `{"ops":[{"op":"put","artifact":{"id":"e2","type":"effect","data":{"idempotency_key":"k","kind":"email","target":"x","payload":{},"status":"sent","attempts":1}}}]}`, status: 422, code: CodeReservedType, pointer: "/ops/0/artifact/type"},
		{name: "client overwrites a verdict", path: A, body: `{"id":"f2","type":"note","data":{"text":"fine"}}`, status: 422, code: CodeReservedType, pointer: "/id"},
		{name: "client deletes a verdict", path: C, body: `{"ops":[{"op":"delete","id":"f2"}]}`, status: 422, code: CodeReservedType, pointer: "/ops/0/id"},
		{name: "delete missing", path: C, body: `{"ops":[{"op":"delete","id":"ghost"}]}`, status: 422, code: CodeValidation, pointer: "/ops/0/id"},
		{name: "unknown op", path: C, body: `{"ops":[{"op":"merge"}]}`, status: 422, code: CodeValidation, pointer: "/ops/0/op"},
		{name: "link without to", path: C, body: `{"ops":[{"op":"link","from":"c1","rel":"mentions"}]}`, status: 422, code: CodeValidation, pointer: "/ops/0/to"},
		{name: "control character in id", path: A, body: `{"id":"a\u0001b","type":"note","data":{"text":"a"}}`, status: 422, code: CodeValidation, pointer: "/id"},
		{name: "oversize body", path: A, body: big, hdr: map[string]string{"Expect": "100-continue"}, status: 413, code: CodeTooLarge},
		{name: "wrong content type", path: A, body: art(``), hdr: map[string]string{"Content-Type": "text/plain"}, status: 415, code: CodeUnsupportedMedia, param: "Content-Type"},
		{name: "no content type", path: A, body: art(``), hdr: map[string]string{"Content-Type": ""}, status: 415, code: CodeUnsupportedMedia, param: "Content-Type"},
		{name: "no token", path: A, body: art(``), hdr: map[string]string{"Authorization": ""}, status: 401, code: CodeUnauthorized},
		{name: "unknown token", path: A, body: art(``), hdr: map[string]string{"Authorization": "Bearer not-a-token-0123456789"}, status: 401, code: CodeUnauthorized},
		{name: "not a bearer token", path: A, body: art(``), hdr: map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4="}, status: 401, code: CodeUnauthorized},
		{name: "read token writes", path: A, body: art(``), hdr: map[string]string{"Authorization": "Bearer read-token-01234567890"}, status: 403, code: CodeForbidden},
		{name: "token for other contexts", path: A, body: art(``), hdr: map[string]string{"Authorization": "Bearer other-token-0123456789"}, status: 403, code: CodeForbidden},
		{name: "write token resets a branch", path: "/v1/contexts/bad/branches/main/reset", body: `{"to":"` + oldest + `"}`, hdr: map[string]string{"Authorization": "Bearer write-token-0123456789"}, status: 403, code: CodeForbidden},
		{name: "traversal in context", method: "GET", path: "/v1/contexts/..%2F..%2Fetc/state", status: 404, code: CodeNotFound},
		{name: "dot-dot context", method: "GET", path: "/v1/contexts/%2e%2e/state", status: 404, code: CodeNotFound},
		{name: "traversal in artifact id", method: "GET", path: "/v1/contexts/bad/artifacts/..%2Fx", status: 404, code: CodeNotFound},
		{name: "traversal in blob", method: "GET", path: "/v1/blobs/..%2F..%2Fetc%2Fpasswd", status: 404, code: CodeNotFound},
		{name: "traversal in new context id", path: "/v1/contexts", body: `{"id":"../x"}`, status: 422, code: CodeValidation, pointer: "/id"},
		{name: "stale parent", path: A, body: art(`,"parent":"` + oldest + `"`), status: 409, code: CodeStaleParent},
		{name: "stale If-Match", path: A, body: art(``), hdr: map[string]string{"If-Match": `"` + oldest + `"`}, status: 409, code: CodeStaleParent},
		{name: "malformed parent", path: A, body: art(`,"parent":"abc"`), status: 422, code: CodeValidation, pointer: "/parent"},
		{name: "invalid at", method: "GET", path: "/v1/contexts/bad/state?at=..%2Fx", status: 400, code: CodeInvalidRef, param: "at"},
		{name: "unknown at", method: "GET", path: "/v1/contexts/bad/state?at=nosuchbranch", status: 404, code: CodeNotFound},
		{name: "ambiguous prefix", method: "GET", path: "/v1/contexts/bad/state?at=" + ambiguous, status: 400, code: CodeAmbiguousRef, param: "at"},
		{name: "bad limit", method: "GET", path: "/v1/contexts/bad/artifacts?limit=0", status: 400, code: CodeInvalidQuery, param: "limit"},
		{name: "bad cursor", method: "GET", path: "/v1/contexts/bad/artifacts?cursor=%25%25", status: 400, code: CodeInvalidQuery, param: "cursor"},
		{name: "bad format", method: "GET", path: "/v1/contexts/bad/artifacts/c1/provenance?format=png", status: 400, code: CodeInvalidQuery, param: "format"},
		{name: "unknown relation query", method: "GET", path: "/v1/contexts/bad/artifacts/c1/related?rel=frobnicates", status: 400, code: CodeInvalidQuery, param: "rel"},
		{name: "redefine fetch_verdict", method: "PUT", path: "/v1/types/fetch_verdict", body: `{"schema":{"type":"object"}}`, status: 422, code: CodeReservedType, param: "name"},
		{name: "redefine a built-in type", method: "PUT", path: "/v1/types/claim", body: `{"schema":{"type":"object"}}`, status: 409, code: CodeConflict, param: "name"},
		{name: "redefine a built-in relation", method: "PUT", path: "/v1/relations/derived_from", body: `{"depends":false}`, status: 409, code: CodeConflict, param: "name"},
		{name: "schema does not compile", method: "PUT", path: "/v1/types/gadget", body: `{"schema":{"type":5}}`, status: 422, code: CodeInvalidSchema, pointer: "/schema/type"},
		{name: "schema reads a file", method: "PUT", path: "/v1/types/gadget", body: `{"schema":{"$ref":"file:///etc/passwd"}}`, status: 422, code: CodeInvalidSchema, pointer: "/schema/$ref"},
		{name: "method not allowed", method: "DELETE", path: "/v1/contexts", status: 405, code: CodeMethodNotAllowed},
		{name: "unknown route", method: "GET", path: "/v1/nothing", status: 404, code: CodeNotFound},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.must(e.get("/v1/contexts/bad/hash"), 200)
			m := c.method
			if m == "" {
				m = "POST"
			}
			r := e.send(req{method: m, path: c.path, body: c.body, header: c.hdr})
			t.Logf("%s", r.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			p := r.obj(t)
			if p["type"] != ProblemTypePrefix+c.code || p["status"] != float64(c.status) {
				t.Fatalf("problem type/status %v %v, want %s %d: %s", p["type"], p["status"], c.code, c.status, r.body)
			}
			if s, _ := p["title"].(string); s == "" {
				t.Fatalf("no title: %s", r.body)
			}
			if s, _ := p["detail"].(string); s == "" {
				t.Fatalf("no detail: %s", r.body)
			}
			if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if c.pointer != "" || c.param != "" || (c.code == CodeValidation && c.status == 422) {
				found := false
				errs, _ := p["errors"].([]any)
				for _, x := range errs {
					fe := x.(map[string]any)
					if _, ok := fe["rule"].(string); !ok {
						t.Errorf("errors entry without rule: %v", fe)
					}
					if c.param != "" && fe["parameter"] == c.param {
						found = true
					}
					if c.param == "" && fe["pointer"] == c.pointer {
						found = true
					}
				}
				if !found {
					t.Errorf("no errors entry for pointer %q / parameter %q: %s", c.pointer, c.param, r.body)
				}
			}
			switch c.code {
			case CodeQuarantined:
				tb := p["tainted_by"].(map[string]any)
				if fmt.Sprint(tb["roots"]) != "[f2]" || fmt.Sprint(tb["path"]) != "[c2 f2]" {
					t.Errorf("tainted_by %v", tb)
				}
			case CodeStaleParent:
				if p["head"] != before["commit"] {
					t.Errorf("stale-parent head %v, want %v", p["head"], before["commit"])
				}
			case CodeDependencyCycle:
				if len(p["cycle"].([]any)) < 3 {
					t.Errorf("cycle %v", p["cycle"])
				}
			}
			after := e.must(e.get("/v1/contexts/bad/hash"), 200)
			if after["commit"] != before["commit"] || after["context_hash"] != before["context_hash"] {
				t.Fatalf("refused request moved the head: %v -> %v", before, after)
			}
		})
	}
	if _, ok := e.srv.Types().Get("gadget"); ok {
		t.Errorf("a refused type was registered")
	}
}
