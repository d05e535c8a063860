package replay

import (
	"sort"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

// TestConflictKeysAtTheEdgesOfTheIDRules: the key of each conflict, for
// ids at the edges of graph.ValidateID (':', spaces, "->", braces,
// quotes) and relation names at the edges of graph.ValidateName ('-',
// '.'). Plain forms are kept wherever the id cannot be misread; the rest
// are escaped; and every key reads back as what it names.
func TestConflictKeysAtTheEdgesOfTheIDRules(t *testing.T) {
	e := func(from, rel, to string) graph.EdgeKey { return graph.EdgeKey{From: from, Rel: rel, To: to} }
	cases := []struct {
		target KeyTarget
		key    string
	}{
		{KeyTarget{Kind: KeyArtifact, ID: "s3"}, "s3"},
		{KeyTarget{Kind: KeyArtifact, ID: "a -cites-> b"}, "a -cites-> b"},
		{KeyTarget{Kind: KeyArtifact, ID: "edge:n"}, "edge:n"},
		{KeyTarget{Kind: KeyArtifact, ID: "cycle:"}, "cycle:"},
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a->b"}, "edge:a->b"},               // no " -rel"
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a -> b"}, "edge:a -> b"},           // no rel
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a -R-> b"}, "edge:a -R-> b"},       // not a relation name
		{KeyTarget{Kind: KeyArtifact, ID: "edge: -r-> b"}, "edge: -r-> b"},         // no from
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a -r-> "}, "edge:a -r-> "},         // no to
		{KeyTarget{Kind: KeyArtifact, ID: "edge:-> -json-> "}, "edge:-> -json-> "}, // no to
		{KeyTarget{Kind: KeyArtifact, ID: "Edge:a -r-> b"}, "Edge:a -r-> b"},
		{KeyTarget{Kind: KeyArtifact, ID: " edge:a -r-> b"}, " edge:a -r-> b"},
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a -r-> b"}, `edge:-> -json-> {"id":"edge:a -r-> b"}`},
		{KeyTarget{Kind: KeyArtifact, ID: "edge:a -r.-> b"}, `edge:-> -json-> {"id":"edge:a -r.-> b"}`},
		{KeyTarget{Kind: KeyArtifact, ID: `cycle:"a" -r-> <b>&`}, `cycle:-> -json-> {"id":"cycle:\"a\" -r-> <b>&"}`},
		{KeyTarget{Kind: KeyEdge, Edge: e("a", "cites", "b")}, "edge:a -cites-> b"},
		{KeyTarget{Kind: KeyEdge, Edge: e("a b", "x-", "c d")}, "edge:a b -x--> c d"},
		{KeyTarget{Kind: KeyEdge, Edge: e("a -r", "r.s", "- b")}, "edge:a -r -r.s-> - b"},
		{KeyTarget{Kind: KeyEdge, Edge: e("edge:a", "r", "{}")}, "edge:edge:a -r-> {}"},
		{KeyTarget{Kind: KeyEdge, Edge: e("-", "r", ">")}, "edge:- -r-> >"},
		{KeyTarget{Kind: KeyCycle, Edge: e("a", "uses", "b")}, "cycle:a -uses-> b"},
		{KeyTarget{Kind: KeyEdge, Edge: e("a -r-> b", "r", "c")}, `edge:-> -json-> {"from":"a -r-> b","rel":"r","to":"c"}`},
		{KeyTarget{Kind: KeyEdge, Edge: e("a", "r", "b -r-> c")}, `edge:-> -json-> {"from":"a","rel":"r","to":"b -r-> c"}`},
		{KeyTarget{Kind: KeyCycle, Edge: e("x->", "r", "y")}, `cycle:-> -json-> {"from":"x->","rel":"r","to":"y"}`},
		{KeyTarget{Kind: KeyEdge, Edge: e("->", "json", "{}")}, `edge:-> -json-> {"from":"->","rel":"json","to":"{}"}`},
	}
	for _, c := range cases {
		var got string
		switch c.target.Kind {
		case KeyArtifact:
			got = ArtifactKey(c.target.ID)
		case KeyEdge:
			got = EdgeConflictKey(c.target.Edge)
		case KeyCycle:
			got = CycleKey(c.target.Edge)
		}
		if got != c.key {
			t.Errorf("%+v: key %q, want %q", c.target, got, c.key)
		}
		if back, ok := ParseKey(c.key); !ok || back != c.target {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", c.key, back, ok, c.target)
		}
	}
	// Keys no conflict has: a resolution by one is reported unused.
	for _, key := range []string{
		"",
		"edge:a -r-> b -r-> c", // both edges it could be are escaped
		"edge:a->  b -r-> c",   // its first "-> " ends no rel
		"edge:x-> -r-> y",      // x-> holds "->": escaped
		"cycle:-> -json-> {}",  // from "->": escaped
		"edge:a -r-> b -> c",   // to holds "->"
		`edge:-> -json-> {"id":"cycle:a -r-> b"}`, // under the prefix its id does not have
		`edge:-> -json-> {"id":"edge:n"}`,         // an id that needs no escape
		`edge:-> -json-> {"from":"a","rel":"r","to":"b"}`,
		`edge:-> -json-> {"from":"a->","rel":"","to":"b"}`,
		`edge:-> -json-> {"from":"a->","rel":"r","to":"b"} `,
		`edge:-> -json-> {"to":"b","rel":"r","from":"a->"}`,
		`edge:-> -json-> {"from":"a-\u003e","rel":"r","to":"b"}`,
		`edge:-> -json-> {"id":"edge:a -r-> b","x":1}`,
		`edge:-> -json-> {"id":"edge:a -r-> b"`,
		`edge:-> -json-> {}`,
	} {
		if got, ok := ParseKey(key); ok {
			t.Errorf("ParseKey(%q) = %+v, want no conflict", key, got)
		}
	}
}

// TestConflictKeysOracle builds ids from fragments at the edges of the
// id rules, and checks the key of every artifact, edge and cycle among
// them — and of artifacts named like each of those keys — against a
// brute-force reading of the plain format: an artifact keeps its id
// unless the id splits, some way, as "edge:" or "cycle:" + from -rel->
// to; an edge or cycle keeps "edge:"/"cycle:" + from -rel-> to when
// neither end holds "->", and then that key splits one way only; no two
// keys are the same; and ParseKey returns what each names.
func TestConflictKeysOracle(t *testing.T) {
	frags := []string{"a", " ", "-", "->", " -r-> ", "edge:", "cycle:", "-> -json-> ", `{"id":"`}
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] && graph.ValidateID(id) == nil {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, x := range frags {
		add(x)
		for _, y := range frags {
			add(x + y)
		}
	}
	keys := map[string]KeyTarget{}
	check := func(target KeyTarget, key string) {
		t.Helper()
		if prev, dup := keys[key]; dup {
			t.Fatalf("%+v and %+v share the key %q", prev, target, key)
		}
		keys[key] = target
		if got, ok := ParseKey(key); !ok || got != target {
			t.Fatalf("ParseKey(%q) = %+v, %v; want %+v", key, got, ok, target)
		}
		plain, splits := plainKey(target), edgeSplits(plainKey(target))
		if target.Kind == KeyArtifact {
			if (key == plain) != (splits == 0) {
				t.Fatalf("artifact %q: key %q, though its id splits %d ways as an edge", target.ID, key, splits)
			}
			return
		}
		if (key == plain) == (strings.Contains(target.Edge.From, "->") || strings.Contains(target.Edge.To, "->")) {
			t.Fatalf("%+v: key %q", target, key)
		}
		if key == plain && splits != 1 {
			t.Fatalf("%+v: plain key %q splits %d ways", target, key, splits)
		}
	}
	for _, from := range ids {
		for _, rel := range []string{"r", "json"} {
			for _, to := range ids {
				k := graph.EdgeKey{From: from, Rel: rel, To: to}
				check(KeyTarget{Kind: KeyEdge, Edge: k}, EdgeConflictKey(k))
				check(KeyTarget{Kind: KeyCycle, Edge: k}, CycleKey(k))
			}
		}
	}
	for _, id := range ids {
		check(KeyTarget{Kind: KeyArtifact, ID: id}, ArtifactKey(id))
	}
	// Artifacts named like the keys so far, escaped ones included.
	var named []string
	for key := range keys {
		if !seen[key] && graph.ValidateID(key) == nil {
			named = append(named, key)
		}
	}
	sort.Strings(named)
	for _, id := range named {
		check(KeyTarget{Kind: KeyArtifact, ID: id}, ArtifactKey(id))
	}
}

// plainKey is the documented plain key of target.
func plainKey(target KeyTarget) string {
	switch target.Kind {
	case KeyEdge:
		return "edge:" + target.Edge.From + " -" + target.Edge.Rel + "-> " + target.Edge.To
	case KeyCycle:
		return "cycle:" + target.Edge.From + " -" + target.Edge.Rel + "-> " + target.Edge.To
	}
	return target.ID
}

// edgeSplits counts, by brute force, the edges whose plain key key is:
// each split of what follows "edge:" or "cycle:" into a non-empty from,
// " -", a relation name, "-> " and a non-empty to.
func edgeSplits(key string) int {
	n := 0
	for _, p := range []string{"edge:", "cycle:"} {
		rest, ok := strings.CutPrefix(key, p)
		if !ok {
			continue
		}
		for i := 1; i < len(rest); i++ {
			if !strings.HasPrefix(rest[i:], " -") {
				continue
			}
			for j := i + 2; j < len(rest); j++ {
				if strings.HasPrefix(rest[j:], "-> ") && j+3 < len(rest) && graph.ValidateName("rel", rest[i+2:j]) == nil {
					n++
				}
			}
		}
	}
	return n
}
