package httpapi

import (
	"fmt"
	"github.com/artifactd/artifactd/service"
	"net/url"
	"strings"
	"testing"
)

// ifMatchSnap is what a refused conditional write must leave as it was.
type ifMatchSnap struct {
	head, hash, branches, effects, artifacts string
	commits                                  int
	blob                                     int
}

// ifMatchSnapshot reads ctx's main head, hash, first-parent log length,
// branches, effects and artifacts, and whether it holds the blob digest.
func (e *env) ifMatchSnapshot(ctx, digest string) ifMatchSnap {
	e.t.Helper()
	h := e.must(e.get("/v1/contexts/"+ctx+"/hash"), 200)
	n, cursor := 0, ""
	for {
		p := e.must(e.get("/v1/contexts/"+ctx+"/commits?limit=1000"+cursor), 200)
		n += len(p["items"].([]any))
		c, _ := p["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = "&cursor=" + url.QueryEscape(c)
	}
	return ifMatchSnap{
		head: h["commit"].(string), hash: h["context_hash"].(string), commits: n,
		branches:  string(e.get("/v1/contexts/" + ctx + "/branches").body),
		effects:   string(e.get("/v1/contexts/" + ctx + "/effects?limit=1000").body),
		artifacts: string(e.get("/v1/contexts/" + ctx + "/artifacts?limit=1000").body),
		blob:      e.get("/v1/contexts/" + ctx + "/blobs/" + digest).status,
	}
}

// diff names the parts of a snapshot that differ in b.
func (a ifMatchSnap) diff(b ifMatchSnap) string {
	var out []string
	for _, f := range []struct {
		name string
		a, b any
	}{{"head", a.head, b.head}, {"hash", a.hash, b.hash}, {"commits", a.commits, b.commits}, {"blob", a.blob, b.blob},
		{"branches", a.branches != b.branches, false}, {"effects", a.effects != b.effects, false}, {"artifacts", a.artifacts != b.artifacts, false}} {
		if f.a != f.b {
			out = append(out, fmt.Sprintf("%s %v -> %v", f.name, f.a, f.b))
		}
	}
	return strings.Join(out, ", ")
}

// wantIfMatchProblem checks a refusal that names the If-Match header with
// rule.
func wantIfMatchProblem(t *testing.T, what string, r *resp, status int, code, rule string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: %d, want %d: %.300s", what, r.status, status, r.body)
		return
	}
	p := r.obj(t)
	if p["type"] != "urn:artifactd:problem:"+code {
		t.Errorf("%s: type %v, want %s", what, p["type"], code)
	}
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 {
		t.Errorf("%s: errors %v, want one naming If-Match", what, p["errors"])
		return
	}
	fe := errs[0].(map[string]any)
	if fe["parameter"] != "If-Match" || fe["rule"] != rule || fe["pointer"] != nil {
		t.Errorf("%s: errors[0] %v, want parameter If-Match, rule %s", what, fe, rule)
	}
}

// TestIfMatchBesideParentMustAgree: a write that gives both a body parent
// and an If-Match header that name different commits is refused (422
// naming If-Match, rule agrees_with_parent) whichever of them is the
// head, and changes nothing; the two agreeing is the one condition.
func TestIfMatchBesideParentMustAgree(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	h0 := e.ifMatchSnapshot("c", "").head
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "1"}}), 201)
	before := e.ifMatchSnapshot("c", "")
	h1 := before.head
	put := func(id string) map[string]any {
		return map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": "note", "data": map[string]any{"text": "x"}}}
	}
	for _, c := range []struct {
		name, path         string
		body               map[string]any
		parent, ifMatch    string
		status             int
		code, rule, branch string
	}{
		{"artifact: current parent, stale If-Match", "/v1/contexts/c/artifacts", map[string]any{"id": "b", "type": "note", "data": map[string]any{"text": "1"}}, h1, h0, 422, "validation", "agrees_with_parent", ""},
		{"artifact: stale parent, current If-Match", "/v1/contexts/c/artifacts", map[string]any{"id": "b", "type": "note", "data": map[string]any{"text": "1"}}, h0, h1, 422, "validation", "agrees_with_parent", ""},
		{"commit: current parent, stale If-Match", "/v1/contexts/c/commits", map[string]any{"ops": []any{put("b")}}, h1, h0, 422, "validation", "agrees_with_parent", ""},
		{"commit: current parent, If-Match not a commit id", "/v1/contexts/c/commits", map[string]any{"ops": []any{put("b")}}, h1, "*", 422, "validation", "commit_id", ""},
		{"reset: current parent, stale If-Match", "/v1/contexts/c/branches/main/reset", map[string]any{"to": h0}, h1, h0, 422, "validation", "agrees_with_parent", ""},
	} {
		c.body["parent"] = c.parent
		r := e.send(req{method: "POST", path: c.path, body: c.body, header: map[string]string{"If-Match": `"` + c.ifMatch + `"`}})
		wantIfMatchProblem(t, c.name, r, c.status, c.code, c.rule)
		if after := e.ifMatchSnapshot("c", ""); after != before {
			t.Errorf("%s: the refused write changed the context: %s", c.name, before.diff(after))
		}
	}
	// Agreeing, they are one condition.
	r := e.send(req{method: "POST", path: "/v1/contexts/c/artifacts", header: map[string]string{"If-Match": `"` + h1 + `"`},
		body: map[string]any{"id": "b", "type": "note", "data": map[string]any{"text": "1"}, "parent": h1}})
	e.must(r, 201)
}

// TestIfMatchOnBranchWrites: the writes that land on a branch without a
// body parent (a tool result, a fetch, an effect, a merge) evaluate an
// If-Match against that branch's head: a stale one is 409 stale-parent
// naming the header, with nothing written (no commit, no blob held, no
// effect); the current one lets the write through.
func TestIfMatchOnBranchWrites(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	h0 := e.ifMatchSnapshot("c", "").head
	e.must(e.post("/v1/contexts/c/branches", map[string]any{"name": "side"}), 201)
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "s", "type": "note", "branch": "side", "data": map[string]any{"text": "s"}}), 201)
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "1"}}), 201)
	const output = "the tool's output, held only by a written result"
	digest := digestOf([]byte(output))
	fetch := map[string]any{"id": "f", "url": "https://x.example/p", "status": 200,
		"headers": map[string]any{"Content-Type": "text/plain"}, "body_base64": "aGVsbG8="}
	cases := []struct {
		name, path string
		body       any
	}{
		{"tool result", "/v1/contexts/c/tool-results", map[string]any{"id": "t1", "ok": true, "tool": "grep", "output": output}},
		{"fetch", "/v1/contexts/c/fetches", fetch},
		{"effect", "/v1/contexts/c/effects", map[string]any{"idempotency_key": "k1", "kind": "email"}},
		{"merge", "/v1/contexts/c/merge", map[string]any{"theirs": "side"}},
	}
	for _, c := range cases {
		before := e.ifMatchSnapshot("c", digest)
		r := e.send(req{method: "POST", path: c.path, body: c.body, header: map[string]string{"If-Match": `"` + h0 + `"`}})
		wantIfMatchProblem(t, c.name+" with a stale If-Match", r, 409, "stale-parent", "head")
		if r.status == 409 {
			if got := r.obj(t)["head"]; got != before.head {
				t.Errorf("%s: head %v, want %s", c.name, got, before.head)
			}
		}
		if after := e.ifMatchSnapshot("c", digest); after != before {
			t.Errorf("%s: the refused write changed the context: %s", c.name, before.diff(after))
		}
	}
	// Refused before it stored the output: the bytes are in no context,
	// nor stored at all.
	if r := e.get("/v1/blobs/" + digest); r.status != 404 {
		t.Errorf("the refused tool result's output was stored: %d", r.status)
	}
	for _, c := range cases {
		head := e.ifMatchSnapshot("c", digest).head
		r := e.send(req{method: "POST", path: c.path, body: c.body, header: map[string]string{"If-Match": `"` + head + `"`}})
		if r.status != 201 {
			t.Errorf("%s with the current If-Match: %d, want 201: %.300s", c.name, r.status, r.body)
		}
	}
	if s := e.ifMatchSnapshot("c", digest); s.blob != 200 {
		t.Errorf("the written tool result's blob: %d", s.blob)
	}
}

// TestIfMatchNotSupported: a write route with no branch head to compare
// an If-Match to refuses one (422 naming the header, rule not_supported)
// rather than dropping the condition, and writes nothing.
func TestIfMatchNotSupported(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	e.must(e.post("/v1/contexts/c/effects", map[string]any{"idempotency_key": "k0", "kind": "email"}), 201)
	before := e.ifMatchSnapshot("c", digestOf([]byte("blob bytes")))
	stale := map[string]string{"If-Match": `"` + before.head + `"`}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/contexts", map[string]any{"id": "d"}},
		{"PUT", "/v1/contexts/d", map[string]any{}},
		{"POST", "/v1/contexts/c/branches", map[string]any{"name": "b2"}},
		{"POST", "/v1/contexts/c/verify", map[string]any{}},
		{"POST", "/v1/contexts/c/effects/claim", map[string]any{"worker": "w"}},
		{"POST", "/v1/contexts/c/effects/" + url.PathEscape(service.EffectID("k0")) + "/complete", map[string]any{"worker": "w", "lease_token": "x"}},
		{"POST", "/v1/contexts/c/effects/" + url.PathEscape(service.EffectID("k0")) + "/fail", map[string]any{"worker": "w", "lease_token": "x", "error": "e"}},
		{"PUT", "/v1/types/widget", map[string]any{"schema": map[string]any{"type": "object"}, "role": "derived"}},
		{"PUT", "/v1/relations/touches", map[string]any{"depends": false}},
		{"POST", "/v1/contexts/c/blobs", []byte("blob bytes")},
		{"POST", "/v1/blobs", []byte("blob bytes")},
		{"POST", "/v1/admin/secrets", map[string]any{"secrets": []any{"hunter2-hunter2"}}},
	} {
		what := c.method + " " + c.path
		r := e.send(req{method: c.method, path: c.path, body: c.body, header: stale})
		wantIfMatchProblem(t, what, r, 422, "validation", "not_supported")
		if after := e.ifMatchSnapshot("c", digestOf([]byte("blob bytes"))); after != before {
			t.Errorf("%s: the refused write changed the context: %s", what, before.diff(after))
			before = after
		}
	}
	if r := e.get("/v1/contexts/d"); r.status != 404 {
		t.Errorf("context d after the refused creates: %d", r.status)
	}
	if r := e.get("/v1/types/widget"); r.status != 404 {
		t.Errorf("type widget after the refused put: %d", r.status)
	}
}
