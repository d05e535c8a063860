package httpapi

import (
	"net/url"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// TestPutTypeWithoutRoleKeepsItsRole: PUT /v1/types/{name} without a
// role meant derived, so putting a new schema for a source type without
// repeating its role was refused 409 (role change). An update without a
// role keeps the type's role; a create without one is derived, and the
// definition the chain records for it is what it always was.
func TestPutTypeWithoutRoleKeepsItsRole(t *testing.T) {
	e := newEnv(t)
	put := func(name string, body map[string]any) *resp {
		return e.send(req{method: "PUT", path: "/v1/types/" + name, body: body})
	}
	v1 := map[string]any{"type": "object"}
	v2 := map[string]any{"type": "object", "required": []any{"text"}}
	e.must(put("src", map[string]any{"role": "source", "schema": v1}), 201)

	// An update without a role: the schema changes, the role stays.
	if rec := e.must(put("src", map[string]any{"schema": v2}), 200); rec["role"] != "source" || rec["version"] != 2.0 {
		t.Errorf("update without a role: %v, want role source, version 2", rec)
	}
	if rec := e.must(put("src", map[string]any{"schema": v2}), 200); rec["version"] != 2.0 {
		t.Errorf("the same update again: %v, want version 2 (nothing changed)", rec)
	}
	// A role given is still checked against the registered one.
	if r := put("src", map[string]any{"role": "derived", "schema": v2}); r.status != 409 {
		t.Errorf("update to another role: %d %s, want 409", r.status, r)
	}
	if rec := e.must(e.get("/v1/types/src"), 200); rec["role"] != "source" || rec["version"] != 2.0 {
		t.Errorf("GET after the updates: %v", rec)
	}

	// A create without a role is derived, and so is its recorded definition.
	if rec := e.must(put("fresh", map[string]any{"schema": v1}), 201); rec["role"] != "derived" || rec["version"] != 1.0 {
		t.Errorf("create without a role: %v, want role derived, version 1", rec)
	}
	e.createContext("t", "observe")
	e.must(e.post("/v1/contexts/t/artifacts", map[string]any{"id": "f", "type": "fresh", "data": map[string]any{}}), 201)
	e.must(e.post("/v1/contexts/t/artifacts", map[string]any{"id": "s", "type": "src", "data": map[string]any{"text": "x"}}), 201)
	for name, data := range map[string]string{
		"fresh": `{"name":"fresh","role":"derived","schema":{"type":"object"}}`,
		"src":   `{"name":"src","role":"source","schema":{"required":["text"],"type":"object"}}`,
	} {
		def := e.must(e.get("/v1/contexts/t/artifacts/"+url.PathEscape("artifactd.type/"+name)), 200)
		if want := hashing.ContentHash([]byte(data)).String(); def["content_hash"] != want {
			t.Errorf("recorded definition of %s: %v, want the content hash of %s (%s)", name, def, data, want)
		}
	}
	if tr := e.must(e.get("/v1/contexts/t/artifacts/s"), 200)["trust"].(map[string]any); tr["status"] != "confirmed" {
		t.Errorf("an artifact of the source type: trust %v", tr)
	}
}
