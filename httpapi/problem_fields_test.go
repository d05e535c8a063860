package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// TestProblemsNameTheirField: every refusal of a request that names
// something (a ref or branch in the body, an id or name in the path, an
// expected parent, a name that exists, the outbox's id of an effect, a
// fetch the server will not perform) says where, with its rule, as
// docs/API.md's errors section promises: errors[0] carries a JSON pointer
// into the body, or a parameter of the path, query or header. The
// status and problem code are the ones the API always gave.
func TestProblemsNameTheirField(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "q"}}), 201)
	// An artifact of another type at the id an idempotency key's effect
	// would have (written beneath the service, which refuses it).
	squat := EffectID("squatted")
	if _, err := e.st.Commit(t.Context(), store.CommitRequest{Context: "c", Author: "t", Message: "squat",
		Ops: []graph.Op{{Op: graph.OpPut, ID: squat, Type: "note", Data: []byte(`{"text":"x"}`)}}}); err != nil {
		t.Fatal(err)
	}
	stale := "sha256:" + strings.Repeat("0", 64)
	noCommit := "sha256:" + strings.Repeat("0", 64)
	claim := map[string]any{"type": "claim", "data": map[string]any{"text": "x"}}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name         string
		method, path string
		body         any
		header       map[string]string
		status       int
		code         string
		ptr, param   string // one of them
		rule         string
	}{
		{"merge theirs not found", "POST", "/v1/contexts/c/merge", map[string]any{"theirs": "nope"}, nil, 404, CodeNotFound, "/theirs", "", "exists"},
		{"merge theirs no such commit", "POST", "/v1/contexts/c/merge", map[string]any{"theirs": noCommit}, nil, 404, CodeNotFound, "/theirs", "", "exists"},
		{"merge ours not found", "POST", "/v1/contexts/c/merge", map[string]any{"theirs": "main", "ours": "nope"}, nil, 404, CodeNotFound, "/ours", "", "exists"},
		{"reset to not found", "POST", "/v1/contexts/c/branches/main/reset", map[string]any{"to": "nope"}, nil, 404, CodeNotFound, "/to", "", "exists"},
		{"reset of no branch", "POST", "/v1/contexts/c/branches/nope/reset", map[string]any{"to": "main"}, nil, 404, CodeNotFound, "", "branch", "exists"},
		{"branch at not found", "POST", "/v1/contexts/c/branches", map[string]any{"name": "x", "at": "nope"}, nil, 404, CodeNotFound, "/at", "", "exists"},
		{"verify at not found", "POST", "/v1/contexts/c/verify", map[string]any{"hash": noCommit, "at": "nope"}, nil, 404, CodeNotFound, "/at", "", "exists"},
		{"artifact on no branch", "POST", "/v1/contexts/c/artifacts", with(claim, "branch", "nope"), nil, 404, CodeNotFound, "/branch", "", "exists"},
		{"commit on no branch", "POST", "/v1/contexts/c/commits", map[string]any{"branch": "nope", "ops": []any{map[string]any{"op": "put", "artifact": claim}}}, nil, 404, CodeNotFound, "/branch", "", "exists"},
		{"fetch on no branch", "POST", "/v1/contexts/c/fetches", map[string]any{"url": "http://x", "status": 200, "body": "x", "branch": "nope"}, nil, 404, CodeNotFound, "/branch", "", "exists"},
		{"tool result on no branch", "POST", "/v1/contexts/c/tool-results", map[string]any{"ok": false, "error": "x", "branch": "nope"}, nil, 404, CodeNotFound, "/branch", "", "exists"},
		{"no artifact", "GET", "/v1/contexts/c/artifacts/nope", nil, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no artifact, not an id", "GET", "/v1/contexts/c/artifacts/%00", nil, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no artifact to audit", "GET", "/v1/contexts/c/audit/nope", nil, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no artifact's provenance", "GET", "/v1/contexts/c/artifacts/nope/provenance", nil, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no artifact's related", "GET", "/v1/contexts/c/artifacts/nope/related", nil, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no effect", "POST", "/v1/contexts/c/effects/nope/complete", map[string]any{"worker": "w", "lease_token": "x"}, nil, 404, CodeNotFound, "", "id", "exists"},
		{"an artifact that is no effect", "POST", "/v1/contexts/c/effects/q/fail", map[string]any{"worker": "w", "lease_token": "x"}, nil, 404, CodeNotFound, "", "id", "exists"},
		{"no type", "GET", "/v1/types/nope", nil, nil, 404, CodeNotFound, "", "name", "exists"},
		{"no relation", "GET", "/v1/relations/nope", nil, nil, 404, CodeNotFound, "", "name", "exists"},
		{"stale parent in the body", "POST", "/v1/contexts/c/artifacts", with(claim, "parent", stale), nil, 409, CodeStaleParent, "/parent", "", "head"},
		{"stale parent in If-Match", "POST", "/v1/contexts/c/artifacts", claim, map[string]string{"If-Match": `"` + stale + `"`}, 409, CodeStaleParent, "", "If-Match", "head"},
		{"stale commit parent", "POST", "/v1/contexts/c/commits", map[string]any{"parent": stale, "ops": []any{map[string]any{"op": "put", "artifact": claim}}}, nil, 409, CodeStaleParent, "/parent", "", "head"},
		{"stale commit If-Match", "POST", "/v1/contexts/c/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": claim}}}, map[string]string{"If-Match": stale}, 409, CodeStaleParent, "", "If-Match", "head"},
		{"stale reset parent", "POST", "/v1/contexts/c/branches/main/reset", map[string]any{"to": "main", "parent": stale}, nil, 409, CodeStaleParent, "/parent", "", "head"},
		{"stale reset If-Match", "POST", "/v1/contexts/c/branches/main/reset", map[string]any{"to": "main"}, map[string]string{"If-Match": stale}, 409, CodeStaleParent, "", "If-Match", "head"},
		{"branch exists", "POST", "/v1/contexts/c/branches", map[string]any{"name": "main"}, nil, 409, CodeExists, "/name", "", "unique"},
		{"context exists", "POST", "/v1/contexts", map[string]any{"id": "c"}, nil, 409, CodeExists, "/id", "", "unique"},
		{"effect id held by another type", "POST", "/v1/contexts/c/effects", map[string]any{"idempotency_key": "squatted", "kind": "x"}, nil, 409, CodeConflict, "/idempotency_key", "", "unique"},
		{"perform while fetching is off", "POST", "/v1/contexts/c/fetches", map[string]any{"url": "http://x", "perform": true}, nil, 403, CodeForbidden, "/perform", "", "fetch_enabled"},
		{"diff from not found", "GET", "/v1/contexts/c/diff?from=nope", nil, nil, 404, CodeNotFound, "", "from", "exists"},
		{"diff from no such commit", "GET", "/v1/contexts/c/diff?from=" + noCommit, nil, nil, 404, CodeNotFound, "", "from", "exists"},
		{"diff to not found", "GET", "/v1/contexts/c/diff?from=main&to=nope", nil, nil, 404, CodeNotFound, "", "to", "exists"},
		{"list at not found", "GET", "/v1/contexts/c/artifacts?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"artifact at no such commit", "GET", "/v1/contexts/c/artifacts/q?at=" + noCommit, nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"history at not found", "GET", "/v1/contexts/c/artifacts/q/history?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"state at not found", "GET", "/v1/contexts/c/state?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"hash at not found", "GET", "/v1/contexts/c/hash?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"commits at not found", "GET", "/v1/contexts/c/commits?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"effects at not found", "GET", "/v1/contexts/c/effects?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
		{"no commit", "GET", "/v1/contexts/c/commits/nope", nil, nil, 404, CodeNotFound, "", "commit", "exists"},
		{"compare a at not found", "GET", "/v1/compare?a=c@nope&b=c", nil, nil, 404, CodeNotFound, "", "a", "exists"},
		{"compare b at not found", "GET", "/v1/compare?a=c&b=c@" + noCommit, nil, nil, 404, CodeNotFound, "", "b", "exists"},
		{"compare a context not found", "GET", "/v1/compare?a=nosuch@main&b=c", nil, nil, 404, CodeNotFound, "", "a", "exists"},
		{"compare b context not found", "GET", "/v1/compare?a=c&b=nosuch", nil, nil, 404, CodeNotFound, "", "b", "exists"},
		{"no model call", "GET", "/v1/contexts/c/model-calls/" + strings.Repeat("0", 64), nil, nil, 404, CodeNotFound, "", "request_hash", "exists"},
		{"model call at not found", "GET", "/v1/contexts/c/model-calls/" + strings.Repeat("0", 64) + "?at=nope", nil, nil, 404, CodeNotFound, "", "at", "exists"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.send(req{method: tc.method, path: tc.path, body: tc.body, header: tc.header})
			var p struct {
				Type   string `json:"type"`
				Errors []struct {
					Pointer   *string `json:"pointer"`
					Parameter string  `json:"parameter"`
					Rule      string  `json:"rule"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatalf("%d %s: %v", r.status, r.body, err)
			}
			if r.status != tc.status || p.Type != ProblemTypePrefix+tc.code {
				t.Fatalf("%d %s, want %d %s: %s", r.status, p.Type, tc.status, tc.code, r.body)
			}
			if len(p.Errors) == 0 {
				t.Fatalf("no errors entry (want %s%s, rule %s): %s", tc.ptr, tc.param, tc.rule, r.body)
			}
			f := p.Errors[0]
			ptr := ""
			if f.Pointer != nil {
				ptr = *f.Pointer
			}
			if tc.param != "" && (f.Parameter != tc.param || f.Pointer != nil) || tc.param == "" && (f.Pointer == nil || ptr != tc.ptr) || f.Rule != tc.rule {
				t.Fatalf("errors[0] pointer %q parameter %q rule %q, want %s%s rule %s: %s", ptr, f.Parameter, f.Rule, tc.ptr, tc.param, tc.rule, r.body)
			}
		})
	}
}

// TestMissingContextIsNotTheRefs: a read at a ref of a context that does
// not exist is the context's not-found: no errors entry blames the ref's
// query parameter, which names nothing wrong.
func TestMissingContextIsNotTheRefs(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/v1/contexts/nosuch/artifacts?at=nope", "/v1/contexts/nosuch/hash?at=nope", "/v1/contexts/nosuch/diff?from=nope", "/v1/contexts/nosuch/commits/nope"} {
		r := e.get(path)
		var p struct {
			Errors []struct {
				Parameter string `json:"parameter"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("%s: %d %s: %v", path, r.status, r.body, err)
		}
		if r.status != 404 {
			t.Errorf("%s: %d %s, want 404", path, r.status, r.body)
		}
		for _, f := range p.Errors {
			if f.Parameter == "at" || f.Parameter == "from" || f.Parameter == "commit" {
				t.Errorf("%s: the context is missing, but errors name the ref: %s", path, r.body)
			}
		}
	}
}
