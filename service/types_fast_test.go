package service

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// randomPayload returns an artifact payload for a type whose schema names
// props: some of them, sometimes another member, each of a random kind.
func randomPayload(rng *rand.Rand, props []string) any {
	m := map[string]any{}
	for _, p := range props {
		if rng.IntN(3) > 0 {
			m[p] = randomMember(rng)
		}
	}
	if rng.IntN(4) == 0 {
		m["other"] = randomMember(rng)
	}
	if rng.IntN(20) == 0 {
		return randomMember(rng) // not an object at all
	}
	return m
}

func randomMember(rng *rand.Rand) any {
	switch rng.IntN(9) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return json.Number(fmt.Sprint(rng.IntN(2000) - 2))
	case 3:
		return []any{"x"}
	case 4:
		return map[string]any{"receipt": map[string]any{}, "body_blob": "sha256:" + strings.Repeat("0", 64)}
	case 5:
		return ""
	case 6:
		return "sha256:" + strings.Repeat("ab", 32)
	case 7:
		return []string{"RETRIEVED", "FAILED", "UNKNOWN", "pending", "sent", "agent", "transport"}[rng.IntN(7)]
	}
	return "text"
}

// TestBuiltinTypesFastAgree checks the fast check of every built-in type
// that has one against the library, on random payloads made of the
// members its schema names; and lists which types have one.
func TestBuiltinTypesFastAgree(t *testing.T) {
	r := NewRegistry()
	var fast []string
	rng := rand.New(rand.NewPCG(8, 9))
	for _, name := range graph.BuiltinTypes() {
		e := r.entry(name)
		if e.fast == nil {
			continue
		}
		fast = append(fast, name)
		var doc map[string]any
		if err := json.Unmarshal(e.rec.Schema, &doc); err != nil {
			t.Fatal(err)
		}
		var props []string
		if p, ok := doc["properties"].(map[string]any); ok {
			for k := range p {
				props = append(props, k)
			}
		}
		slices.Sort(props)
		valid, invalid := 0, 0
		for range 4000 {
			b, err := json.Marshal(randomPayload(rng, props))
			if err != nil {
				t.Fatal(err)
			}
			data, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			want := e.schema.Validate(data) == nil
			if got := e.fast.Valid(data); got != want {
				t.Fatalf("type %s, payload %s: fast check %v, the library %v", name, b, got, want)
			}
			if want {
				valid++
			} else {
				invalid++
			}
		}
		if valid < 50 || invalid < 50 {
			t.Fatalf("type %s: %d valid and %d invalid payloads: both must be common", name, valid, invalid)
		}
	}
	// The types agents write most are checked fast; the gate's and the
	// outbox's records (integers, $ref, anyOf of required) by the library.
	for _, name := range []string{"claim", "evidence", "answer", "note"} {
		if !slices.Contains(fast, name) {
			t.Errorf("built-in type %s has no fast check (fast: %v)", name, fast)
		}
	}
	t.Logf("built-in types with a fast check: %v", fast)
}

// BenchmarkValidateClaims validates the payloads of a 5,000-artifact
// commit of claims ({"text": "claim aN"}) as the registry does, and with
// the library alone (as before the fast check).
func BenchmarkValidateClaims(b *testing.B) {
	r := NewRegistry()
	docs := make([]any, 5000)
	for i := range docs {
		docs[i] = map[string]any{"text": fmt.Sprintf("claim a%d", i)}
	}
	b.Run("registry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, d := range docs {
				if err := r.Validate("claim", d, fmt.Sprintf("/ops/%d/artifact/data", i)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		e := r.entry("claim")
		for b.Loop() {
			for _, d := range docs {
				if err := e.schema.Validate(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
