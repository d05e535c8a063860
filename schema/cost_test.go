package schema

import (
	"fmt"
	"strings"
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

// TestBranchingCheckIsBounded: the branching check pairs every two
// subschemas of a recursion and steps them over every member name the
// schema tells apart. A ring of $defs, each naming the next under a
// member of its own and the first under "z", is one recursion whose pairs
// times names grow with the cube of the ring: 800 links (60 KB) held a
// registration for two minutes, and were accepted. Past maxBranchWork
// steps the schema is refused instead, with rule cost, and the check stops
// there.
func TestBranchingCheckIsBounded(t *testing.T) {
	const n = 150
	defs := map[string]any{}
	for i := range n {
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"properties": map[string]any{
			fmt.Sprintf("p%d", i): map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)},
			"z":                   map[string]any{"$ref": "#/$defs/d0"}}}
	}
	defs[fmt.Sprintf("d%d", n)] = true
	doc := map[string]any{"$defs": defs, "$ref": "#/$defs/d0"}
	c := newCostWalk(doc)
	if _, err := c.cost(doc, ""); err != nil {
		t.Fatal(err)
	}
	err := checkBranching(doc, c)
	if err == nil || err.Rule != "cost" || !strings.HasPrefix(err.Pointer, "/$defs/") {
		t.Fatalf("refusal: %+v", err)
	}
	if c.work > maxBranchWork+10*n {
		t.Fatalf("the check did %d steps, more than %d", c.work, maxBranchWork+10*n)
	}
	// A recursion of a few kinds of node is checked as before.
	tree := map[string]any{"$defs": map[string]any{"n": map[string]any{"properties": map[string]any{
		"left": map[string]any{"$ref": "#/$defs/n"}, "right": map[string]any{"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}
	if err := CheckCost(tree); err != nil {
		t.Fatalf("a binary tree: %+v", err)
	}
}
