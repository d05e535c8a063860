package httpapi

import (
	"testing"
)

// TestFalseSchemaNamesItsRule: a member a request schema forbids (its
// subschema is false) is refused naming the member and the rule
// not_allowed. The rule was "" before: false schemas name no keyword.
func TestFalseSchemaNamesItsRule(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "")
	for _, c := range []struct{ path, body, pointer string }{
		{"/v1/contexts/c/tool-results", `{"ok":true,"output":"listing","error":"also an error"}`, "/error"},
		{"/v1/contexts/c/tool-results", `{"ok":false,"error":"boom","output":"and an output"}`, "/output"},
		{"/v1/contexts/c/fetches", `{"url":"https://x.example/","perform":true,"status":200}`, "/status"},
	} {
		r := e.post(c.path, c.body)
		m := r.obj(t)
		errs, _ := m["errors"].([]any)
		if r.status != 422 || len(errs) != 1 {
			t.Fatalf("%s %s: %d %s", c.path, c.body, r.status, r.body)
		}
		f := errs[0].(map[string]any)
		if f["pointer"] != c.pointer || f["rule"] != "not_allowed" || f["detail"] != `property "`+c.pointer[1:]+`" is not allowed here` {
			t.Errorf("POST %s %s: field error %v", c.path, c.body, f)
		}
	}
}

// TestRepeatedQueryParameter: a parameter given twice is a 400 naming it
// with the rule single, on every route; the first value silently won
// before (limit=5&limit=5000 listed 5).
func TestRepeatedQueryParameter(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "")
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "q1", "type": "question", "data": map[string]any{"text": "q"}}), 201)
	for _, c := range []struct{ path, param string }{
		{"/v1/contexts/c/artifacts?limit=5&limit=5000", "limit"},
		{"/v1/contexts/c/artifacts?limit=5&limit=abc", "limit"},
		{"/v1/contexts/c/artifacts/q1/provenance?format=json&format=xml", "format"},
		{"/v1/contexts/c/artifacts/q1?at=main&at=no%20good", "at"},
		{"/v1/contexts/c/diff?from=main&data=true&data=maybe", "data"},
		{"/healthz?x=1&x=2", "x"},
	} {
		r := e.get(c.path)
		m := r.obj(t)
		errs, _ := m["errors"].([]any)
		if r.status != 400 || m["type"] == nil || len(errs) != 1 {
			t.Errorf("GET %s: %d %s", c.path, r.status, r.body)
			continue
		}
		if f := errs[0].(map[string]any); f["parameter"] != c.param || f["rule"] != "single" {
			t.Errorf("GET %s: field error %v", c.path, f)
		}
	}
	// One value each is fine.
	e.must(e.get("/v1/contexts/c/artifacts?limit=5&type=question"), 200)
}

// TestQuarantinePointerWithNewDefinition: the first write of a user type
// into a context records the type's definition in front of its ops; an
// enforce refusal of that write still points at the edge or op the
// request sent. It pointed one further per definition recorded
// (/edges/1 for the only dependency edge, /ops/2 of a two-op commit).
func TestQuarantinePointerWithNewDefinition(t *testing.T) {
	e := newEnv(t)
	defer e.close()
	e.createContext("c", "enforce")
	e.must(e.send(req{method: "PUT", path: "/v1/types/ledger", body: `{"schema":{"type":"object"},"role":"derived"}`}), 201)
	e.must(e.send(req{method: "PUT", path: "/v1/relations/feeds", body: `{"depends":true}`}), 201)
	e.must(e.post("/v1/contexts/c/artifacts", `{"id":"bad","type":"tool_error","data":{"text":"boom"}}`), 201)
	before := e.hash("c")
	for _, c := range []struct{ path, body, pointer string }{
		{"/v1/contexts/c/artifacts", `{"id":"x","type":"ledger","data":{},"edges":[{"rel":"mentions","to":"bad"},{"rel":"feeds","to":"bad"}]}`, "/edges/1"},
		{"/v1/contexts/c/commits", `{"ops":[{"op":"put","artifact":{"id":"y","type":"ledger","data":{}}},{"op":"link","from":"y","rel":"derived_from","to":"bad"}]}`, "/ops/1"},
	} {
		r := e.post(c.path, c.body)
		m := r.obj(t)
		errs, _ := m["errors"].([]any)
		if r.status != 409 || m["type"] != ProblemTypePrefix+CodeQuarantined || len(errs) != 1 {
			t.Fatalf("POST %s: %d %s", c.path, r.status, r.body)
		}
		if f := errs[0].(map[string]any); f["pointer"] != c.pointer || f["rule"] != "confirmed" {
			t.Errorf("POST %s %s: field error %v, want pointer %s", c.path, c.body, f, c.pointer)
		}
	}
	if got := e.hash("c"); got != before {
		t.Errorf("a refused write moved the context hash: %s -> %s", before, got)
	}
}
