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
		// Recursions that apply one subschema twice at one place of the
		// data: validation doubles with each level of nesting.
		{"recursion through two anyOf branches", branchingSchema(map[string]any{"anyOf": []any{
			map[string]any{"type": "array", "items": ref("n")}, map[string]any{"type": "array", "items": ref("n")}}}), "branching_recursion"},
		{"recursion through items and contains", branchingSchema(map[string]any{"items": ref("n"), "contains": ref("n")}), "branching_recursion"},
		{"recursion after one level and after two", branchingSchema(map[string]any{"anyOf": []any{
			map[string]any{"items": ref("n")}, map[string]any{"items": map[string]any{"items": ref("n")}}}}), "branching_recursion"},
		{"recursion through a property and a pattern", branchingSchema(map[string]any{
			"properties": map[string]any{"a": ref("n")}, "patternProperties": map[string]any{"^a": ref("n")}}), "branching_recursion"},
		{"recursion through oneOf of allOf", branchingSchema(map[string]any{"oneOf": []any{
			map[string]any{"allOf": []any{map[string]any{"properties": map[string]any{"x": ref("n")}}}},
			map[string]any{"properties": map[string]any{"x": ref("m")}}}}), "branching_recursion"},
		// n reaches m through a descending keyword first, then through
		// anyOf: a same-place cycle a walk that reuses m's cost missed.
		{"cycle behind a recursion", branchingSchema(map[string]any{"anyOf": []any{
			map[string]any{"properties": map[string]any{"b": map[string]any{"items": ref("m")}}}, ref("m")}}), "cyclic_ref"},
		{"dynamic ref", map[string]any{"$dynamicAnchor": "a", "anyOf": []any{map[string]any{"$dynamicRef": "#a"}}}, "local_ref"},
		{"id below the root", map[string]any{"properties": map[string]any{"x": map[string]any{"$id": "urn:zz:a", "anyOf": []any{map[string]any{"$ref": "#"}}}}}, "local_ref"},
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

	// Recursions that take one way down a level are fine, however many
	// ways they have: a binary tree, any JSON value, two properties whose
	// values share a member's name, a tree through prefixItems.
	for name, n := range map[string]any{
		"binary": map[string]any{"type": "object", "properties": map[string]any{"left": ref("n"), "right": ref("n")}},
		"json": map[string]any{"anyOf": []any{map[string]any{"type": []any{"string", "number", "boolean", "null"}},
			map[string]any{"type": "array", "items": ref("n")}, map[string]any{"type": "object", "additionalProperties": ref("n")}}},
		"shared": map[string]any{"properties": map[string]any{
			"a": map[string]any{"properties": map[string]any{"x": ref("n")}},
			"b": map[string]any{"properties": map[string]any{"x": ref("m")}}}},
		"pairs": map[string]any{"type": "array", "prefixItems": []any{ref("n"), ref("m")}},
	} {
		e.must(e.send(req{method: "PUT", path: "/v1/types/rec-" + name, body: map[string]any{"schema": branchingSchema(n)}}), 201)
	}
	// The deepest data the API takes validates at once against each.
	for name, data := range map[string]any{"binary": nested(60, "left", nil), "json": nested(60, "k", nil), "shared": nested(60, "a", "x"), "pairs": nestedArray(60)} {
		raw, _ := json.Marshal(map[string]any{"type": "rec-" + name, "data": data})
		start := time.Now()
		e.must(e.post("/v1/contexts/c/artifacts", string(raw)), 201)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a write of rec-%s took %v", name, d)
		}
	}
}

// ref is a $ref to $defs name.
func ref(name string) map[string]any { return map[string]any{"$ref": "#/$defs/" + name} }

// branchingSchema is an object whose member "a" is $defs n, n given, and
// $defs m is a second name for n.
func branchingSchema(n any) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"a": ref("n")},
		"$defs": map[string]any{"n": n, "m": ref("n")}}
}

// nested returns {"a": v} with v depth levels of objects, each holding the
// next under k, then under k2 when not nil, in turn.
func nested(depth int, k, k2 any) map[string]any {
	var inner any = map[string]any{}
	for i := range depth {
		key := k
		if k2 != nil && i%2 == 0 {
			key = k2
		}
		inner = map[string]any{key.(string): inner}
	}
	return map[string]any{"a": inner}
}

// nestedArray returns {"a": [[[...]]]} depth levels deep.
func nestedArray(depth int) map[string]any {
	var inner any = []any{}
	for range depth {
		inner = []any{inner}
	}
	return map[string]any{"a": inner}
}
