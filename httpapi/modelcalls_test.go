package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// TestEnsureContext: PUT creates once (201), repeats with the same
// settings (200, no change), refuses other settings (409 naming
// /quarantine) and a body id that differs from the path (422).
func TestEnsureContext(t *testing.T) {
	e := newEnv(t)
	put := func(body any) *resp { return e.send(req{method: "PUT", path: "/v1/contexts/run", body: body}) }
	if r := put(map[string]any{"quarantine": "observe"}); r.status != 201 {
		t.Fatalf("first PUT: %d %s", r.status, r.body)
	}
	before := e.hash("run")
	if r := put(map[string]any{"quarantine": "observe", "id": "run"}); r.status != 200 || r.obj(t)["quarantine"] != "observe" {
		t.Fatalf("same PUT: %d %s", r.status, r.body)
	}
	r := put(map[string]any{})
	if r.status != 409 || !strings.Contains(r.String(), `"pointer":"/quarantine"`) {
		t.Fatalf("PUT with the default (enforce) over observe: %d %s", r.status, r.body)
	}
	if r := put(map[string]any{"id": "other"}); r.status != 422 || !strings.Contains(r.String(), `"rule":"matches_path"`) {
		t.Fatalf("PUT with another id: %d %s", r.status, r.body)
	}
	if r := put(`{"quarantine":"sometimes"}`); r.status != 422 {
		t.Fatalf("PUT with a bad mode: %d %s", r.status, r.body)
	}
	if e.hash("run") != before {
		t.Fatal("a refused PUT changed the context")
	}
	if r := e.send(req{method: "PUT", path: "/v1/contexts/fresh"}); r.status != 201 || r.obj(t)["quarantine"] != "enforce" {
		t.Fatalf("PUT without a body: %d %s", r.status, r.body)
	}
	// An id no context may have cannot be made (422 naming the path's
	// parameter); reading it is a 404 as before.
	for _, bad := range []string{"a%20b", "..", "a%2Fb"} {
		r := e.send(req{method: "PUT", path: "/v1/contexts/" + bad})
		p := e.must(r, 422)
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["parameter"] != "ctx" || errs[0].(map[string]any)["rule"] != "context_id" {
			t.Errorf("PUT %s: %s", bad, r.body)
		}
		if r := e.get("/v1/contexts/" + bad); r.status != 404 {
			t.Errorf("GET %s: %d", bad, r.status)
		}
	}
	// A body without the id is held to canonical JSON as any other: a
	// key twice is refused, and no context is made in the weaker mode.
	for _, body := range []string{`{"quarantine":"enforce","quarantine":"observe"}`, `{"quarantine":"observe","\ud800":1}`} {
		r := e.send(req{method: "PUT", path: "/v1/contexts/twice", body: body})
		if r.status != 400 && r.status != 422 {
			t.Errorf("PUT %s: %d %s", body, r.status, r.body)
		}
		if r := e.get("/v1/contexts/twice"); r.status != 404 {
			t.Fatalf("a refused PUT %s made the context: %d %s", body, r.status, r.body)
		}
	}
}

// TestModelCallRecord: a recorded call is found by the hash of its
// canonical request however the request's members are ordered; a record
// whose request does not hash to its key is refused, never answered.
func TestModelCallRecord(t *testing.T) {
	e := newEnv(t)
	e.createContext("run", "")
	request := `{"model":"m","parameters":{"temperature":0},"messages":[{"role":"user","content":"6 x 7?"}]}`
	reordered := `{"messages":[{"content":"6 x 7?","role":"user"}],"parameters":{"temperature":0},"model":"m"}`
	h, err := ModelCallRequestHash(json.RawMessage(request))
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := ModelCallRequestHash(json.RawMessage(reordered))
	if h != h2 {
		t.Fatal("member order changed the request hash")
	}
	path := "/v1/contexts/run/model-calls/" + h.String()
	if r := e.get(path); r.status != 404 {
		t.Fatalf("before recording: %d", r.status)
	}
	var req0 any
	_ = json.Unmarshal([]byte(request), &req0)
	e.must(e.post("/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(h), "type": "model_call",
		"data": map[string]any{"model": "m", "request_hash": h.String(), "request": req0, "response": map[string]any{"text": "42"}}}), 201)
	got := e.must(e.get(path), 200)
	if got["response"].(map[string]any)["text"] != "42" || got["artifact"] != ModelCallID(h) {
		t.Fatalf("record %v", got)
	}
	if r := e.get("/v1/contexts/run/model-calls/" + h.Hex()); r.status != 200 {
		t.Fatalf("bare hex: %d", r.status)
	}
	// A forged record: the key does not match the request.
	other, _ := ModelCallRequestHash(json.RawMessage(`{"model":"other"}`))
	e.must(e.post("/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(other), "type": "model_call",
		"data": map[string]any{"model": "m", "request_hash": other.String(), "request": req0, "response": "x"}}), 201)
	if r := e.get("/v1/contexts/run/model-calls/" + other.String()); r.status != 409 {
		t.Fatalf("forged record: %d %s", r.status, r.body)
	}
}

// TestModelCallDigestErrorNamesTheDeclaredParameter: the 400 for a
// malformed digest on the model-call route names a path parameter that
// /openapi.json declares for that route, so a client can match the
// refusal to its request.
func TestModelCallDigestErrorNamesTheDeclaredParameter(t *testing.T) {
	e := newEnv(t)
	e.createContext("m", "")
	r := e.get("/v1/contexts/m/model-calls/not-a-digest")
	errs, _ := r.obj(t)["errors"].([]any)
	if r.status != 400 || len(errs) != 1 {
		t.Fatalf("malformed digest: %d %s", r.status, r.body)
	}
	named := errs[0].(map[string]any)["parameter"]
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(e.get("/openapi.json").body, &doc); err != nil {
		t.Fatal(err)
	}
	var declared []string
	for tmpl, item := range doc.Paths {
		if !strings.Contains(tmpl, "/model-calls/") {
			continue
		}
		for _, p := range item["get"].Parameters {
			if p.In == "path" {
				declared = append(declared, p.Name)
			}
		}
	}
	found := false
	for _, d := range declared {
		found = found || d == named
	}
	if !found {
		t.Fatalf("the refusal names parameter %v; the route declares %v", named, declared)
	}
}

// TestModelCallUnreplayableNamesTheHash: a record under a request hash
// that cannot be replayed — its request hashes elsewhere, it holds no
// response, or the artifact under the id is no model_call — is a 409 whose
// errors entry names the path parameter request_hash and the rule
// replayable, as the 404 of a hash with no record names it (rule exists).
// It named nothing.
func TestModelCallUnreplayableNamesTheHash(t *testing.T) {
	e := newEnv(t)
	e.createContext("run", "")
	var req0 any
	_ = json.Unmarshal([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), &req0)
	forged, _ := ModelCallRequestHash(json.RawMessage(`{"model":"other"}`))
	e.must(e.post("/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(forged), "type": "model_call",
		"data": map[string]any{"model": "m", "request_hash": forged.String(), "request": req0, "response": "x"}}), 201)
	mute, _ := ModelCallRequestHash(json.RawMessage(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	e.must(e.post("/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(mute), "type": "model_call",
		"data": map[string]any{"model": "m", "request_hash": mute.String(), "request": req0}}), 201)
	cases := map[string]hashing.Digest{"forged": forged, "no response": mute}
	if other, _ := ModelCallRequestHash(json.RawMessage(`{"model":"third"}`)); e.post("/v1/contexts/run/artifacts", map[string]any{"id": ModelCallID(other), "type": "claim",
		"data": map[string]any{"text": "not a call"}}).status == 201 {
		cases["another type"] = other
	}
	for name, h := range cases {
		r := e.get("/v1/contexts/run/model-calls/" + h.String())
		if r.status != 409 {
			t.Errorf("%s: %d %s", name, r.status, r.body)
			continue
		}
		errs, _ := r.obj(t)["errors"].([]any)
		if len(errs) != 1 {
			t.Errorf("%s: errors %v, want one naming request_hash", name, errs)
			continue
		}
		if f := errs[0].(map[string]any); f["parameter"] != "request_hash" || f["rule"] != "replayable" {
			t.Errorf("%s: errors entry %v, want parameter request_hash, rule replayable", name, f)
		}
	}
}
