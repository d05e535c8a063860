package schema

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestBranchingAgreesWithWalks checks checkBranching's pair-graph verdict
// against walks counted letter by letter, on random recursive schemas:
// a schema must be refused exactly when some entry reaches itself by two
// walks over one word (validation then doubles with every repetition of
// the word). The counting explores, from each entry, every vector of walk
// counts a word can reach, counts capped at 2 (enough to tell two walks
// from one): finitely many, so the search is exhaustive.
func TestBranchingAgreesWithWalks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 38))
	refused, checked := 0, 0
	for i := range 3000 {
		doc := randomRecursive(rng)
		c := newCostWalk(doc)
		if _, err := c.cost(doc, ""); err != nil {
			continue // refused before the branching check: a same-place cycle
		}
		err := checkBranching(doc, c)
		if err != nil && err.Rule == "cyclic_ref" {
			continue // a same-place cycle the cost walk's memo hid
		}
		checked++
		got := err != nil
		g := &branchGraph{nodes: map[string]*branchNode{}, walk: &costWalk{root: doc}}
		g.add(doc, "")
		entries, letters := g.entries()
		if want := twoWalks(g, entries, letters); got != want {
			t.Fatalf("schema %d: checkBranching refused %v, two walks over one word %v\n%v", i, got, want, doc)
		}
		if got {
			refused++
		}
	}
	t.Logf("%d of %d schemas refused", refused, checked)
	if refused < checked/20 || refused > checked-checked/20 {
		t.Fatalf("the generator made %d branching schemas of %d: too few of one kind to check", refused, checked)
	}
}

// twoWalks reports whether an entry reaches itself by at least two walks
// over some word, exploring the vectors of walk counts (capped at 2) that
// words reach from it.
func twoWalks(g *branchGraph, entries []string, letters []letter) bool {
	index := make(map[string]int, len(entries))
	for i, n := range entries {
		index[n] = i
	}
	// step[i][l] is entry i's walks over letter l, by entry.
	step := make([][][]int, len(entries))
	for i, n := range entries {
		step[i] = make([][]int, len(letters))
		for li, l := range letters {
			row := make([]int, len(entries))
			for x, w := range g.closure(n) {
				for _, e := range g.nodes[x].down {
					if e.applies(l) && g.nodes[e.to] != nil {
						row[index[e.to]] += w
					}
				}
			}
			step[i][li] = row
		}
	}
	for start := range entries {
		v := make([]int, len(entries))
		v[start] = 1
		seen := map[string]bool{}
		queue := [][]int{v}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for li := range letters {
				next := make([]int, len(entries))
				for i, c := range v {
					if c == 0 {
						continue
					}
					for j, w := range step[i][li] {
						next[j] = min(2, next[j]+c*w)
					}
				}
				if next[start] >= 2 {
					return true
				}
				k := fmt.Sprint(next)
				if !seen[k] {
					seen[k] = true
					queue = append(queue, next)
				}
			}
		}
	}
	return false
}

// randomRecursive returns a small schema whose $defs n and m refer to
// each other and to themselves through random keywords.
func randomRecursive(rng *rand.Rand) map[string]any {
	var node func(depth int) any
	node = func(depth int) any {
		if depth > 2 || rng.IntN(4) == 0 {
			switch rng.IntN(3) {
			case 0:
				return map[string]any{"$ref": "#/$defs/n"}
			case 1:
				return map[string]any{"$ref": "#/$defs/m"}
			}
			return map[string]any{"type": "string"}
		}
		switch rng.IntN(7) {
		case 0:
			return map[string]any{"anyOf": []any{node(depth + 1), node(depth + 1)}}
		case 1:
			return map[string]any{"items": node(depth + 1)}
		case 2:
			return map[string]any{"items": node(depth + 1), "contains": node(depth + 1)}
		case 3:
			return map[string]any{"properties": map[string]any{"a": node(depth + 1), "b": node(depth + 1)}}
		case 4:
			return map[string]any{"properties": map[string]any{"a": node(depth + 1)}, "additionalProperties": node(depth + 1)}
		case 5:
			return map[string]any{"prefixItems": []any{node(depth + 1), node(depth + 1)}}
		}
		return map[string]any{"allOf": []any{node(depth + 1)}}
	}
	return map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/n"}},
		"$defs": map[string]any{"n": node(0), "m": node(0)}}
}

func TestBranchingRefusalNamesTheRecursion(t *testing.T) {
	doc := map[string]any{"$defs": map[string]any{"n": map[string]any{"anyOf": []any{
		map[string]any{"items": map[string]any{"$ref": "#/$defs/n"}}, map[string]any{"items": map[string]any{"$ref": "#/$defs/n"}}}}},
		"$ref": "#/$defs/n"}
	err := CheckCost(doc)
	if err == nil || err.Rule != "branching_recursion" {
		t.Fatalf("refusal: %+v", err)
	}
	if want := fmt.Sprintf("%q", "#"+err.Pointer); err.Pointer == "" || !strings.Contains(err.Detail, want) {
		t.Fatalf("the refusal names %q: %s", err.Pointer, err.Detail)
	}
}
