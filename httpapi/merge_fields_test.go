package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// TestMergeResolutionProducerFollowsTheLabelRules: the produced_by a
// value resolution writes is a new producer like any other, so it follows
// the rules of names: an invisible or control character is 422 naming the
// resolution's field, with nothing written; a readable one lands.
func TestMergeResolutionProducerFollowsTheLabelRules(t *testing.T) {
	e := newEnv(t)
	e.createContext("mp", "observe")
	put := func(branch, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/mp/artifacts", map[string]any{"id": "x", "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "base")
	e.must(e.post("/v1/contexts/mp/branches", map[string]any{"name": "b"}), 201)
	put("main", "ours")
	put("b", "theirs")
	before := e.hash("mp")
	for _, c := range []struct{ by, rule, names string }{
		{"plan\u200Bner", "visible", "U+200B ZERO WIDTH SPACE"},
		{"step\u202E1", "visible", "U+202E"},
		{"a\nb", "printable", "U+000A"},
	} {
		r := e.post("/v1/contexts/mp/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
			"value": map[string]any{"text": "both"}, "produced_by": c.by}}})
		errs, _ := r.obj(t)["errors"].([]any)
		if r.status != 422 || len(errs) == 0 {
			t.Fatalf("produced_by %q: %d %s", c.by, r.status, r.body)
		}
		fe := errs[0].(map[string]any)
		if fe["pointer"] != "/resolutions/x/produced_by" || fe["rule"] != c.rule || !strings.Contains(fmt.Sprint(fe["detail"]), c.names) {
			t.Fatalf("produced_by %q: %v", c.by, fe)
		}
		if e.hash("mp") != before {
			t.Fatalf("produced_by %q: a refused merge changed main", c.by)
		}
	}
	e.must(e.post("/v1/contexts/mp/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
		"value": map[string]any{"text": "both"}, "produced_by": "planner"}}}), 201)
	if x := e.must(e.get("/v1/contexts/mp/artifacts/x"), 200); x["produced_by"] != "planner" {
		t.Fatalf("x = %v", x)
	}
}
