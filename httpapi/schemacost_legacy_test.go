package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// legacyBomb is bombSchema with each level's anyOf behind the applicator
// keyword kw: "dependentSchemas" or "dependencies" (whose schema form the
// validator applies under draft 2020-12 as well, as the 2020-12
// metaschema still lists it) keyed by "a", or "$recursiveRef" in place of
// $ref. Validating {"a":1} evaluates 2^depth subschemas either way.
func legacyBomb(kw string, depth int) map[string]any {
	defs := map[string]any{}
	refKey := "$ref"
	if kw == "$recursiveRef" {
		refKey = kw
	}
	for i := range depth {
		next := fmt.Sprintf("#/$defs/d%d", i+1)
		branches := map[string]any{"anyOf": []any{
			map[string]any{refKey: next}, map[string]any{refKey: next, "type": "object"}}}
		if kw == "$recursiveRef" {
			defs[fmt.Sprintf("d%d", i)] = branches
		} else {
			defs[fmt.Sprintf("d%d", i)] = map[string]any{kw: map[string]any{"a": branches}}
		}
	}
	defs[fmt.Sprintf("d%d", depth)] = map[string]any{"type": "object"}
	return map[string]any{"$defs": defs, "$ref": "#/$defs/d0"}
}

func TestSchemaCostSeesEveryApplicator(t *testing.T) {
	e := newEnv(t)
	// The validator applies a "dependencies" schema to the object, as it
	// does a dependentSchemas one.
	e.must(e.send(req{method: "PUT", path: "/v1/types/dep", body: map[string]any{
		"schema": map[string]any{"type": "object", "dependencies": map[string]any{"a": false}}}}), 201)
	e.must(e.post("/v1/contexts", map[string]any{"id": "c"}), 201)
	e.must(e.post("/v1/contexts/c/artifacts", `{"type":"dep","data":{"a":1}}`), 422)
	e.must(e.post("/v1/contexts/c/artifacts", `{"type":"dep","data":{"b":1}}`), 201)

	for _, tc := range []struct {
		kw, rule string
	}{
		{"dependentSchemas", "cost"},
		{"dependencies", "cost"},
		{"$recursiveRef", "local_ref"},
	} {
		t.Run(tc.kw, func(t *testing.T) {
			r := e.send(req{method: "PUT", path: "/v1/types/bomb", body: map[string]any{"schema": legacyBomb(tc.kw, 24)}})
			if r.status != 422 || !strings.Contains(r.String(), `"type":"`+ProblemTypePrefix+CodeInvalidSchema+`"`) || !strings.Contains(r.String(), `"rule":"`+tc.rule+`"`) || !strings.Contains(r.String(), `"pointer":"/schema`) {
				t.Fatalf("refusal: %s", r)
			}
			if r := e.get("/v1/types/bomb"); r.status != 404 {
				t.Fatalf("a refused schema was registered: %s", r)
			}
		})
	}
}
