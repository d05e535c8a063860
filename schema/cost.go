package schema

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/fault"
)

// maxSchemaExpansion bounds how many subschemas one validation of a value
// may evaluate at one place of the data: the size of the schema with every
// $ref expanded. A schema of nested anyOf/$ref can otherwise cost 4× per
// two levels (1.4 KB cost 3.2 s and 700 MB per put at depth 20).
const maxSchemaExpansion = 5000

// applicator is a keyword whose value holds subschemas: how it holds them
// (shape: '1' one, '[' an array, '{' a map by name) and the part of the
// value they apply to (part: 0 the same value, 'o' a member, 'a' an item,
// 'k' a member's name). A named applicator's array index or map key names
// the item or member (prefixItems, properties); patternProperties' keys
// are patterns, which may match any name.
type applicator struct {
	name        string
	shape, part byte
	named       bool
}

// applicators are every keyword the cost walk and the branching check
// descend through ($ref apart): one list, so the two checks see the same
// schema.
var applicators = []applicator{
	{name: "not", shape: '1'}, {name: "if", shape: '1'}, {name: "then", shape: '1'}, {name: "else", shape: '1'},
	{name: "allOf", shape: '['}, {name: "anyOf", shape: '['}, {name: "oneOf", shape: '['},
	{name: "dependentSchemas", shape: '{'},
	// dependencies, the keyword dependentSchemas replaced, is still in the
	// 2020-12 metaschema, and the validator applies its schema values to
	// the object as it does dependentSchemas' (its string lists are no
	// subschemas and cost nothing).
	{name: "dependencies", shape: '{'},
	{name: "additionalProperties", shape: '1', part: 'o'}, {name: "unevaluatedProperties", shape: '1', part: 'o'},
	{name: "items", shape: '1', part: 'a'}, {name: "contains", shape: '1', part: 'a'}, {name: "unevaluatedItems", shape: '1', part: 'a'},
	{name: "propertyNames", shape: '1', part: 'k'},
	{name: "prefixItems", shape: '[', part: 'a', named: true},
	{name: "properties", shape: '{', part: 'o', named: true},
	{name: "patternProperties", shape: '{', part: 'o'},
}

// eachSubschema calls fn, in the order of applicators, for each value obj
// holds through one (a one-subschema keyword's value whatever its type,
// each element of an array, each value of a map): the value, its pointer,
// the part of the data it applies to, and the member or index that part
// is ("" for any). It stops at fn's first error.
func eachSubschema[E comparable](obj map[string]any, ptr string, fn func(v any, p string, part byte, name string) E) E {
	var zero E
	for _, a := range applicators {
		base := ptr + "/" + a.name
		switch a.shape {
		case '1':
			if v, ok := obj[a.name]; ok {
				if err := fn(v, base, a.part, ""); err != zero {
					return err
				}
			}
		case '[':
			arr, _ := obj[a.name].([]any)
			for i, v := range arr {
				name := ""
				if a.named {
					name = strconv.Itoa(i)
				}
				if err := fn(v, base+"/"+strconv.Itoa(i), a.part, name); err != zero {
					return err
				}
			}
		case '{':
			m, _ := obj[a.name].(map[string]any)
			for key, v := range m {
				name := ""
				if a.named {
					name = key
				}
				if err := fn(v, base+"/"+fault.PointerToken(key), a.part, name); err != zero {
					return err
				}
			}
		}
	}
	return zero
}

// CostError says why CheckCost refuses a schema: Pointer is a JSON
// pointer into the schema ("" for its root), Rule names the rule broken
// (cost, cyclic_ref, local_ref, ref_resolves, branching_recursion) and
// Detail says what to change.
type CostError struct {
	Pointer, Rule, Detail string
}

func (e *CostError) Error() string {
	return fmt.Sprintf("%s (rule %s at %q)", e.Detail, e.Rule, orRoot(e.Pointer))
}

// CheckCost refuses, before a schema is registered or used, one whose
// validation cost could explode or never end: a $ref cycle that does not
// descend into the data (`{"$ref":"#"}` fails every put), a $ref that does
// not resolve inside the schema (and $dynamicRef, $recursiveRef, or an
// $id below the root, which would make a $ref resolve elsewhere than this
// walk does), an expansion of more than maxSchemaExpansion subschemas for
// one value, and a recursion that applies one subschema twice at one
// place of the data (checkBranching). Recursion through a descending
// keyword (a tree of items) is allowed: each level of the data pays once.
// doc is the schema decoded into maps and slices (json.Number numbers).
// The type registry and Compile both refuse what it refuses, so a schema
// judged at registration and one read from a chain are judged alike.
func CheckCost(doc any) *CostError {
	c := newCostWalk(doc)
	n, err := c.cost(doc, "")
	if err != nil {
		return err
	}
	if n > maxSchemaExpansion {
		return &CostError{"", "cost", fmt.Sprintf("validating one value would evaluate more than %d subschemas (the schema's $refs expand to %d); flatten the anyOf/oneOf/$ref nesting", maxSchemaExpansion, n)}
	}
	return checkBranching(doc, c)
}

type costWalk struct {
	root any
	// memo is the expansion of each subschema, by pointer. descends counts
	// the descending keywords on the path from the root to the subschema
	// being expanded, and onStack holds, for each pointer on that path,
	// the count when it was entered: a cycle back to it descends iff the
	// count has moved since. Both are O(1) per step, so the walk is linear
	// in the schema however deep its path.
	memo     map[string]int
	onStack  map[string]int
	descends int
	// work counts the subschemas the walk enters (a cycle's check among
	// them): what the walk costs (TestCostWalkIsLinear).
	work int
}

func newCostWalk(root any) *costWalk {
	return &costWalk{root: root, memo: map[string]int{}, onStack: map[string]int{}}
}

func (c *costWalk) add(a, b int) int {
	if a+b > maxSchemaExpansion+1 {
		return maxSchemaExpansion + 1
	}
	return a + b
}

// cost returns the expansion of the subschema s at ptr.
func (c *costWalk) cost(s any, ptr string) (int, *CostError) {
	if n, ok := c.memo[ptr]; ok {
		return n, nil
	}
	c.work++
	obj, ok := s.(map[string]any)
	if !ok {
		return 1, nil // true, false
	}
	if entered, ok := c.onStack[ptr]; ok {
		// A cycle: allowed only if a descending keyword lies between.
		if c.descends == entered {
			return 0, &CostError{ptr, "cyclic_ref", fmt.Sprintf("$ref cycle at %q applies the schema to the same value forever; a recursive schema must go through properties or items", orRoot(ptr))}
		}
		return 1, nil
	}
	// The validator follows draft 2019-09's $recursiveRef under 2020-12
	// too (as a $ref, or a dynamic one beside $recursiveAnchor); neither
	// walk here does.
	for _, kw := range []string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := obj[kw]; ok {
			return 0, &CostError{ptr + "/" + kw, "local_ref", kw + " is not supported: use $ref with a JSON pointer inside the schema (#/$defs/name)"}
		}
	}
	if _, ok := obj["$id"]; ok && ptr != "" {
		return 0, &CostError{ptr + "/$id", "local_ref", "$id is allowed only at the schema's root: a $ref inside a subschema with an $id of its own would resolve against that subschema"}
	}
	c.onStack[ptr] = c.descends
	defer delete(c.onStack, ptr)
	total := 1
	visit := func(child any, cptr string, descends bool) *CostError {
		if descends {
			c.descends++
			defer func() { c.descends-- }()
		}
		n, err := c.cost(child, cptr)
		if err != nil {
			return err
		}
		total = c.add(total, n)
		return nil
	}
	if ref, ok := obj["$ref"].(string); ok {
		target, tptr, err := c.resolve(ref, ptr)
		if err != nil {
			return 0, err
		}
		if err := visit(target, tptr, false); err != nil {
			return 0, err
		}
	}
	if err := eachSubschema(obj, ptr, func(v any, p string, part byte, _ string) *CostError {
		return visit(v, p, part != 0)
	}); err != nil {
		return 0, err
	}
	// $defs are reached through $refs only; an unreferenced one costs
	// nothing, but it must itself be sound.
	if defs, ok := obj["$defs"].(map[string]any); ok {
		for name, v := range defs {
			if _, err := c.cost(v, ptr+"/$defs/"+fault.PointerToken(name)); err != nil {
				return 0, err
			}
		}
	}
	c.memo[ptr] = total
	return total, nil
}

// resolve finds the subschema a local $ref names.
func (c *costWalk) resolve(ref, at string) (any, string, *CostError) {
	if !strings.HasPrefix(ref, "#") {
		return nil, "", &CostError{at + "/$ref", "local_ref", fmt.Sprintf("$ref %q: only references inside the schema (#/...) are allowed", ref)}
	}
	// The fragment is percent-decoded before it is read as a JSON pointer
	// (RFC 6901 section 6), as the validator reads it: "#/$defs/b%6Fmb"
	// names $defs "bomb", whatever a member named "b%6Fmb" holds.
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, "", &CostError{at + "/$ref", "ref_resolves", fmt.Sprintf("$ref %q: the fragment is not a valid percent-encoded JSON pointer", ref)}
	}
	cur := c.root
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return nil, "", &CostError{at + "/$ref", "ref_resolves", fmt.Sprintf("$ref %q: anchors are not supported; use a JSON pointer (#/$defs/name)", ref)}
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch v := cur.(type) {
			case map[string]any:
				next, ok := v[tok]
				if !ok {
					return nil, "", &CostError{at + "/$ref", "ref_resolves", fmt.Sprintf("$ref %q does not resolve inside the schema", ref)}
				}
				cur = next
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(v) {
					return nil, "", &CostError{at + "/$ref", "ref_resolves", fmt.Sprintf("$ref %q does not resolve inside the schema", ref)}
				}
				cur = v[i]
			default:
				return nil, "", &CostError{at + "/$ref", "ref_resolves", fmt.Sprintf("$ref %q does not resolve inside the schema", ref)}
			}
		}
	}
	return cur, frag, nil
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "#"
	}
	return "#" + ptr
}
