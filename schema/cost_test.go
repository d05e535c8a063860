package schema

import (
	"fmt"
	"testing"
)

// TestCostWalkIsLinear: the walk's work grows with the schema, not with
// its square. A chain of $defs, each naming the next through properties,
// is as deep as the schema is long (an 8 MiB body holds 150,000 links);
// the walk once touched every frame of its path at each descending
// keyword, so its work grew with the square of the chain.
func TestCostWalkIsLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(next string) any
	}{
		{"properties", func(next string) any {
			return map[string]any{"properties": map[string]any{"a": map[string]any{"$ref": next}}}
		}},
		{"items", func(next string) any { return map[string]any{"items": map[string]any{"$ref": next}} }},
		// A chain that comes back to its start: the cycle check must not
		// search the path either.
		{"cycle", func(next string) any {
			return map[string]any{"items": map[string]any{"$ref": next}, "contains": map[string]any{"$ref": "#/$defs/d0"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000
			defs := map[string]any{}
			for i := range n {
				defs[fmt.Sprintf("d%d", i)] = tc.link(fmt.Sprintf("#/$defs/d%d", i+1))
			}
			defs[fmt.Sprintf("d%d", n)] = true
			doc := map[string]any{"$defs": defs, "$ref": "#/$defs/d0"}
			c := newCostWalk(doc)
			if _, err := c.cost(doc, ""); err != nil && err.Rule != "cost" {
				t.Fatal(err)
			}
			// Each link is three subschemas at most, each entered once
			// and reached once more through a $ref or a cycle.
			if limit := 10 * n; c.work > limit {
				t.Fatalf("the walk of %d links did %d units of work, more than %d", n, c.work, limit)
			}
		})
	}
}
