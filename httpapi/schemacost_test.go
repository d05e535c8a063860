package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// bombSchema nests anyOf over two $refs depth levels deep: each level
// doubles what validating one value evaluates.
func bombSchema(depth int) map[string]any {
	defs := map[string]any{}
	for i := range depth {
		next := fmt.Sprintf("#/$defs/d%d", i+1)
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{
			map[string]any{"$ref": next}, map[string]any{"$ref": next, "type": "object"}}}
	}
	defs[fmt.Sprintf("d%d", depth)] = map[string]any{"type": "object"}
	return map[string]any{"$defs": defs, "$ref": "#/$defs/d0"}
}

func TestSchemaBombsRefusedAtRegistration(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		schema any
		rule   string
	}{
		{"self reference", map[string]any{"$ref": "#"}, "cyclic_ref"},
		{"cycle through anyOf", map[string]any{"anyOf": []any{map[string]any{"$ref": "#"}}}, "cyclic_ref"},
		{"mutual cycle", map[string]any{"$defs": map[string]any{"a": map[string]any{"$ref": "#/$defs/b"}, "b": map[string]any{"allOf": []any{map[string]any{"$ref": "#/$defs/a"}}}}, "$ref": "#/$defs/a"}, "cyclic_ref"},
		{"dangling ref", map[string]any{"$ref": "#/$defs/missing"}, "ref_resolves"},
		{"anyOf bomb", bombSchema(20), "cost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := e.send(req{method: "PUT", path: "/v1/types/bomb", body: map[string]any{"schema": tc.schema}})
			p := e.must(r, 422)
			if p["type"] != ProblemTypePrefix+CodeInvalidSchema || !strings.Contains(r.String(), `"rule":"`+tc.rule+`"`) {
				t.Fatalf("refusal: %s", r)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("refusing took %v", d)
			}
		})
	}
	if r := e.get("/v1/types/bomb"); r.status != 404 {
		t.Fatalf("a refused schema was registered: %s", r)
	}
	// A shallow nesting and a recursive tree through items are fine.
	e.must(e.send(req{method: "PUT", path: "/v1/types/shallow", body: map[string]any{"schema": bombSchema(6)}}), 201)
	tree := map[string]any{"type": "object", "properties": map[string]any{
		"children": map[string]any{"type": "array", "items": map[string]any{"$ref": "#"}}}}
	e.must(e.send(req{method: "PUT", path: "/v1/types/tree", body: map[string]any{"schema": tree}}), 201)
	e.must(e.post("/v1/contexts", map[string]any{"id": "c"}), 201)
	deep := map[string]any{}
	cur := deep
	for range 30 {
		kid := map[string]any{}
		cur["children"] = []any{kid}
		cur = kid
	}
	raw, _ := json.Marshal(map[string]any{"type": "tree", "data": deep})
	e.must(e.post("/v1/contexts/c/artifacts", string(raw)), 201)
}
