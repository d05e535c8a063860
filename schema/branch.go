package schema

import (
	"cmp"
	"fmt"
	"slices"
)

// A recursive schema (a tree through items or properties) costs each
// level of the data once — unless it can reach one of its subschemas
// twice over the same path of the data: `anyOf` over two branches that
// each recurse through items, `items` and `contains` that both recurse,
// or branches that come back after one and after two levels. Validation
// then doubles (or grows as Fibonacci numbers do) with every level of
// nesting: 17 s for one write at depth 20, and the validator cannot be
// interrupted. CheckCost bounds what one place of the data costs;
// checkBranching refuses these schemas at registration.
//
// The walk models one level of the data as a step: from a subschema that
// applies at some place (an entry: the schema of a member or an item), the
// subschemas evaluated at that same place (its $refs, allOf, anyOf,
// oneOf, not, if/then/else, dependentSchemas, counted by path), then the
// keywords that descend to one member or item. Which member or item the
// data has next is the step's letter: a property name, any other name, an
// index of prefixItems, any other index, or a property name as a string
// (propertyNames). Over that alphabet the schema is an automaton whose
// states are the entries, and validation is exponential exactly when the
// automaton is exponentially ambiguous: some entry reaches itself by two
// different walks over the same letters. That is decided on the pairs of
// entries (Weber and Seidl's criterion): a cycle of the pair graph
// through a pair (n, n) that passes a pair of two different entries, or
// a step that reaches one entry twice, is such a pair of walks.

// branchEdge is a keyword that descends from a subschema to the schema of
// one member or item: kind 'o' (a member of an object), 'a' (an item of an
// array) or 'k' (a property name), and the name or index it applies to
// ("" for any).
type branchEdge struct {
	kind byte
	name string
	to   string
}

// branchNode is a subschema: the subschemas evaluated at its place and
// the keywords that descend from it.
type branchNode struct {
	same []string
	down []branchEdge
}

// letter is one step of the data: kind as in branchEdge, name "" for a
// name or index no keyword names.
type letter struct {
	kind byte
	name string
}

func (e branchEdge) applies(l letter) bool {
	return e.kind == l.kind && (e.name == "" || e.name == l.name)
}

// checkBranching refuses doc, a schema that CheckCost accepted, when
// its recursion can evaluate a subschema twice at one place of the data
// per level of nesting.
func checkBranching(doc any, walk *costWalk) *CostError {
	g := &branchGraph{nodes: map[string]*branchNode{}, walk: walk}
	g.add(doc, "")
	if p := g.samePlaceCycle(); p != "" {
		// CheckCost's walk reuses what it found of a subschema, so
		// a cycle it cut where it descended can come back unseen through
		// a same-place keyword elsewhere.
		return &CostError{p, "cyclic_ref", fmt.Sprintf("$ref cycle at %q applies the schema to the same value forever; a recursive schema must go through properties or items", orRoot(p))}
	}
	entries, letters := g.entries()
	if len(entries) == 0 {
		return nil
	}
	// step[n][l] counts, up to 2, the walks from entry n to each entry
	// over one level of the data with letter l.
	step := make(map[string][]map[string]int, len(entries))
	for _, n := range entries {
		reach := g.closure(n)
		row := make([]map[string]int, len(letters))
		for i, l := range letters {
			for x, ways := range reach {
				for _, e := range g.nodes[x].down {
					if e.applies(l) { // add made every edge's node
						row[i] = addWays(row[i], e.to, ways)
					}
				}
			}
		}
		step[n] = row
	}
	for _, scc := range cyclicComponents(entries, func(n string, yield func(string)) {
		for _, m := range step[n] {
			for t := range m {
				yield(t)
			}
		}
	}) {
		n, over := ambiguousIn(scc, step, len(letters), &walk.work)
		if over {
			return &CostError{scc[0], "cost", fmt.Sprintf(
				"the recursion at %q has %d subschemas that reach one another over %d kinds of member or item: too many to check that validating it stays linear (at most %d steps); split the recursion or name fewer members in it", orRoot(scc[0]), len(scc), len(letters), maxBranchWork)}
		}
		if n != "" {
			return &CostError{n, "branching_recursion", fmt.Sprintf(
				"the recursion at %q can apply one subschema twice at the same place of the data (anyOf/oneOf/allOf branches, or items and contains, that each recurse), so validating doubles with every level of nesting; let each level of the data recurse once", orRoot(n))}
		}
	}
	return nil
}

// addWays adds ways walks to t in m, counting up to 2 (enough to tell a
// step that reaches an entry twice).
func addWays(m map[string]int, t string, ways int) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[t] = min(2, m[t]+ways)
	return m
}

// branchGraph is the schema's subschemas by pointer.
type branchGraph struct {
	nodes map[string]*branchNode
	walk  *costWalk // resolves $refs as CheckCost did
}

// add records the subschema s at ptr and, once, those it names.
func (g *branchGraph) add(s any, ptr string) {
	obj, ok := s.(map[string]any)
	if !ok || g.nodes[ptr] != nil {
		return
	}
	n := &branchNode{}
	g.nodes[ptr] = n
	same := func(v any, p string) {
		if _, ok := v.(map[string]any); ok {
			n.same = append(n.same, p)
			g.add(v, p)
		}
	}
	down := func(kind byte, name string, v any, p string) {
		if _, ok := v.(map[string]any); ok {
			n.down = append(n.down, branchEdge{kind, name, p})
			g.add(v, p)
		}
	}
	if ref, ok := obj["$ref"].(string); ok {
		if target, tptr, err := g.walk.resolve(ref, ptr); err == nil {
			same(target, tptr)
		}
	}
	eachSubschema(obj, ptr, func(v any, p string, part byte, name string) bool {
		if part == 0 {
			same(v, p)
		} else {
			down(part, name, v, p)
		}
		return false
	})
}

// entries returns the subschemas a descending keyword leads to, sorted,
// and the letters the schema tells apart: each property name and
// prefixItems index it names, any other name, any other index, and a
// property name as a string.
func (g *branchGraph) entries() ([]string, []letter) {
	seen := map[string]bool{}
	lset := map[letter]bool{{'o', ""}: true, {'a', ""}: true, {'k', ""}: true}
	for _, n := range g.nodes {
		for _, e := range n.down {
			seen[e.to] = true
			lset[letter{e.kind, e.name}] = true
		}
	}
	entries := make([]string, 0, len(seen))
	for p := range seen {
		entries = append(entries, p)
	}
	slices.Sort(entries)
	letters := make([]letter, 0, len(lset))
	for l := range lset {
		letters = append(letters, l)
	}
	slices.SortFunc(letters, func(a, b letter) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	return entries, letters
}

// samePlaceCycle returns a subschema on a cycle of same-place keywords
// ($ref, allOf, anyOf, ...), the least such pointer, or "".
func (g *branchGraph) samePlaceCycle() string {
	ptrs := make([]string, 0, len(g.nodes))
	for p := range g.nodes {
		ptrs = append(ptrs, p)
	}
	slices.Sort(ptrs)
	for _, comp := range cyclicComponents(ptrs, func(p string, yield func(string)) {
		for _, q := range g.nodes[p].same {
			yield(q)
		}
	}) {
		return comp[0]
	}
	return ""
}

// closure returns the subschemas evaluated at the place where n applies,
// with the number of ways (up to 2) n reaches each through same-place
// keywords. checkBranching refused cycles among those, so the walk ends.
func (g *branchGraph) closure(n string) map[string]int {
	out := map[string]int{}
	var visit func(p string, ways int)
	visit = func(p string, ways int) {
		out[p] = min(2, out[p]+ways)
		for _, q := range g.nodes[p].same {
			visit(q, ways)
		}
	}
	visit(n, 1)
	return out
}

// cyclicComponents returns the strongly connected components of the graph
// over nodes (next yields a node's successors) that hold a cycle: more
// than one node, or one with an edge to itself. Tarjan's algorithm,
// recursive: a schema's entries are few.
func cyclicComponents(nodes []string, next func(string, func(string))) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	on := map[string]bool{}
	var stack []string
	var out [][]string
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		on[v] = true
		self := false
		next(v, func(w string) {
			if w == v {
				self = true
			}
			if _, ok := index[w]; !ok {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		})
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			on[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > 1 || self {
			slices.Sort(comp)
			out = append(out, comp)
		}
	}
	for _, v := range nodes {
		if _, ok := index[v]; !ok {
			strong(v)
		}
	}
	return out
}

// maxBranchWork bounds the steps of ambiguousIn, which grow with the
// square of a recursion's entries times the letters: far past the
// recursions of real schemas (a tree of a few kinds of node), and small
// enough that a registration or an import answers at once.
const maxBranchWork = 1 << 22

// ambiguousIn returns an entry of scc that reaches itself by two walks
// over the same letters, or "": the pair graph over scc × scc steps both
// sides with one letter; a component of it that holds a pair (n, n) and
// either a pair of two entries or a step that reaches one entry twice
// closes two such walks. It adds its steps to *work and gives up, over
// true, when they would pass maxBranchWork.
func ambiguousIn(scc []string, step map[string][]map[string]int, letters int, work *int) (string, bool) {
	if n := len(scc); n*n*max(letters, 1) > maxBranchWork-*work {
		return "", true
	}
	over := false
	in := make(map[string]bool, len(scc))
	for _, n := range scc {
		in[n] = true
	}
	type pair struct{ p, q string }
	key := func(p pair) string { return p.p + "\x00" + p.q }
	pairs := map[string]pair{}
	var names []string
	for _, p := range scc {
		for _, q := range scc {
			pp := pair{p, q}
			pairs[key(pp)] = pp
			names = append(names, key(pp))
		}
	}
	// twice marks the pairs (n, n) with a step to (t, t) that reaches t
	// twice.
	twice := map[string]map[string]bool{}
	succ := func(k string, yield func(string)) {
		pp := pairs[k]
		for l := range letters {
			a, b := step[pp.p][l], step[pp.q][l]
			*work += 1 + len(a)*len(b)
			if *work > maxBranchWork {
				over = true
			}
			if over {
				return
			}
			for t1 := range a {
				if !in[t1] {
					continue
				}
				for t2 := range b {
					if !in[t2] {
						continue
					}
					to := key(pair{t1, t2})
					if pp.p == pp.q && t1 == t2 && a[t1] >= 2 {
						if twice[k] == nil {
							twice[k] = map[string]bool{}
						}
						twice[k][to] = true
					}
					yield(to)
				}
			}
		}
	}
	for _, comp := range cyclicComponents(names, succ) {
		inComp := make(map[string]bool, len(comp))
		for _, k := range comp {
			inComp[k] = true
		}
		diagonal, split := "", false
		for _, k := range comp {
			pp := pairs[k]
			if pp.p == pp.q {
				if diagonal == "" {
					diagonal = pp.p
				}
				for to := range twice[k] {
					split = split || inComp[to]
				}
			} else {
				split = true
			}
		}
		if diagonal != "" && split {
			return diagonal, false
		}
	}
	return "", over
}
