package httpapi

import (
	"fmt"
	"strings"
	"testing"
)

// TestSchemaCostResolvesRefsAsTheValidator: a $ref's fragment is
// percent-decoded before it is read as a JSON pointer (RFC 3986, as the
// validator reads it), so "#/$defs/b%6Fmb" names $defs "bomb". The cost
// walk must reach the subschema the validator reaches, not a decoy
// spelled with the escapes.
func TestSchemaCostResolvesRefsAsTheValidator(t *testing.T) {
	e := newEnv(t)
	defs := map[string]any{"b%6Fmb": map[string]any{"type": "object"}}
	const depth = 24
	for i := range depth {
		next := fmt.Sprintf("#/$defs/d%d", i+1)
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{
			map[string]any{"$ref": next}, map[string]any{"$ref": next, "type": "object"}}}
	}
	defs[fmt.Sprintf("d%d", depth)] = map[string]any{"type": "object"}
	defs["bomb"] = map[string]any{"$ref": "#/$defs/d0"}
	s := map[string]any{"$defs": defs, "$ref": "#/$defs/b%6Fmb"}
	r := e.send(req{method: "PUT", path: "/v1/types/bomb", body: map[string]any{"schema": s}})
	if r.status != 422 || !strings.Contains(r.String(), `"type":"`+ProblemTypePrefix+CodeInvalidSchema+`"`) || !strings.Contains(r.String(), `"rule":"cost"`) {
		t.Fatalf("refusal: %s", r)
	}
	if r := e.get("/v1/types/bomb"); r.status != 404 {
		t.Fatalf("a refused schema was registered: %s", r)
	}
	// An escaped $ref that names a cheap subschema is still fine.
	ok := map[string]any{"$defs": map[string]any{"a b": map[string]any{"type": "object"}}, "$ref": "#/$defs/a%20b"}
	e.must(e.send(req{method: "PUT", path: "/v1/types/escaped", body: map[string]any{"schema": ok}}), 201)
}
