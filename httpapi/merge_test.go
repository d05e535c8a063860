package httpapi

import (
	"testing"
)

// TestMerge: a clean merge, a conflict reported with nothing changed,
// resolutions by side and by value, and the client rules on values.
func TestMerge(t *testing.T) {
	e := newEnv(t)
	e.createContext("m", "observe")
	put := func(branch, id, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/m/artifacts", map[string]any{"id": id, "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "x", "base")
	e.must(e.post("/v1/contexts/m/branches", map[string]any{"name": "b"}), 201)
	e.must(e.post("/v1/contexts/m/branches", map[string]any{"name": "ff"}), 201)
	put("main", "x", "ours")
	put("b", "x", "theirs")
	put("b", "y", "only on b")

	before := e.must(e.get("/v1/contexts/m/hash"), 200)
	r := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b"})
	p := e.must(r, 409)
	cs := p["conflicts"].([]any)
	if p["type"] != ProblemTypePrefix+CodeMergeConflict || len(cs) != 1 || cs[0].(map[string]any)["key"] != "x" || cs[0].(map[string]any)["kind"] != "edit_edit" {
		t.Fatalf("conflict %s", r.body)
	}
	if after := e.must(e.get("/v1/contexts/m/hash"), 200); after["commit"] != before["commit"] {
		t.Fatal("a refused merge moved the head")
	}
	// Value resolutions follow the type's schema.
	bad := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{"value": map[string]any{"text": 5}}}})
	if bad.status != 422 || e.must(bad, 422)["errors"].([]any)[0].(map[string]any)["pointer"] != "/resolutions/x/value/text" {
		t.Fatalf("bad value: %d %s", bad.status, bad.body)
	}
	forged := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
		"type": "fetch_verdict", "value": map[string]any{"url": "https://x", "verdict": "RETRIEVED"}}}})
	if forged.status != 422 || e.must(forged, 422)["type"] != ProblemTypePrefix+CodeReservedType {
		t.Fatalf("forged verdict: %d %s", forged.status, forged.body)
	}
	m := e.must(e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "message": "merge b",
		"resolutions": map[string]any{"x": map[string]any{"take": "theirs"}}}), 201)
	if m["kind"] != "merge" || len(m["commit"].(map[string]any)["parents"].([]any)) != 2 || len(m["resolved"].([]any)) != 1 {
		t.Fatalf("merge %v", m)
	}
	x := e.must(e.get("/v1/contexts/m/artifacts/x"), 200)
	if x["data"].(map[string]any)["text"] != "theirs" {
		t.Fatalf("x is %v", x["data"])
	}
	e.must(e.get("/v1/contexts/m/artifacts/y"), 200)
	// Up to date, then a fast-forward of ff to main.
	if u := e.must(e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b"}), 200); u["kind"] != "up_to_date" {
		t.Fatalf("again: %v", u)
	}
	if f := e.must(e.post("/v1/contexts/m/merge", map[string]any{"ours": "ff", "theirs": "main"}), 200); f["kind"] != "fast_forward" || f["commit"].(map[string]any)["id"] != m["commit"].(map[string]any)["id"] {
		t.Fatalf("fast-forward: %v", f)
	}
}
