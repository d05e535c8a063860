package httpapi

import (
	"strings"
	"testing"
)

// TestGateOutputsCannotBeLaundered: a tool_error poison root cannot be
// turned into a confirmed claim (or a tool_output, or deleted) by a client
// put of the same id; only a new gate result supersedes it. Every refusal
// names the rule and leaves the head unchanged.
func TestGateOutputsCannotBeLaundered(t *testing.T) {
	e := newEnv(t)
	e.must(e.post("/v1/contexts", map[string]any{"id": "t", "quarantine": "observe"}), 201)
	e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"id": "e1", "tool": "read_file", "ok": false, "error": "ENOENT"}), 201)
	e.must(e.post("/v1/contexts/t/artifacts", map[string]any{"id": "c", "type": "claim", "data": map[string]any{"text": "x"},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "e1"}}}), 201)
	before := e.hash("t")
	for _, tc := range []struct {
		name string
		path string
		body any
	}{
		{"retype as claim", "/v1/contexts/t/artifacts", map[string]any{"id": "e1", "type": "claim", "data": map[string]any{"text": "fine"}}},
		{"overwrite tool_error", "/v1/contexts/t/artifacts", map[string]any{"id": "e1", "type": "tool_error", "data": map[string]any{"model_view": "ok", "total_chars": 2, "truncated": false, "spilled": false, "full_blob": "sha256:" + strings.Repeat("0", 64)}}},
		{"delete", "/v1/contexts/t/commits", map[string]any{"ops": []any{
			map[string]any{"op": "unlink", "from": "c", "rel": "derived_from", "to": "e1"},
			map[string]any{"op": "delete", "id": "e1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(tc.path, tc.body)
			p := e.must(r, 422)
			if p["type"] != ProblemTypePrefix+CodeReservedType || !strings.Contains(r.String(), `"rule":"gate_owned"`) || !strings.Contains(p["detail"].(string), "tool-results") {
				t.Fatalf("refusal does not name the rule and the way: %s", r)
			}
			if e.hash("t") != before {
				t.Fatal("a refused laundering changed the state")
			}
		})
	}
	// The gate path supersedes it: a successful retry of the tool.
	e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"id": "e1", "tool": "read_file", "ok": true, "output": "contents"}), 201)
	q := e.must(e.get("/v1/contexts/t/quarantine"), 200)
	if q["blast_radius"].(float64) != 0 {
		t.Fatalf("after the tool succeeded: %v", q)
	}
}
