package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// randomPayload returns an artifact payload with values of every JSON
// kind, numbers and strings that canonical form rewrites, and nesting.
func randomPayload(rng *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range rng.IntN(4) {
		k := []string{"text", "value", "é", "\U00010000", "\ue000", "a\"b", "n"}[rng.IntN(7)]
		switch rng.IntN(7) {
		case 0:
			m[k] = json.Number([]string{"1", "-0.5", "1e21", "1E3", "100", "0.000001", "9007199254740992"}[rng.IntN(7)])
		case 1:
			m[k] = []string{"", "x", "é\u2028", "tab\there", "\u0001", "</script>"}[rng.IntN(6)]
		case 2:
			m[k] = rng.IntN(2) == 0
		case 3:
			m[k] = nil
		case 4:
			if depth < 3 {
				m[k] = randomPayload(rng, depth+1)
			}
		default:
			m[k] = []any{json.Number("2"), "y", map[string]any{}}
		}
	}
	return m
}

// randomArtifactRequest returns a body of POST .../artifacts: valid, or
// now and then not.
func randomArtifactRequest(rng *rand.Rand) map[string]any {
	req := map[string]any{"type": "note", "data": randomPayload(rng, 0)}
	if rng.IntN(2) == 0 {
		req["id"] = fmt.Sprintf("a%d", rng.IntN(9))
	}
	for _, k := range []string{"produced_by", "branch", "quarantine", "parent"} {
		if rng.IntN(3) == 0 {
			req[k] = map[string]string{"produced_by": "p", "branch": "b", "quarantine": "observe", "parent": "sha256:" + strings.Repeat("cd", 32)}[k]
		}
	}
	if rng.IntN(2) == 0 {
		edges := make([]any, rng.IntN(3))
		for i := range edges {
			e := map[string]any{"rel": "cites", "to": fmt.Sprint(i)}
			if rng.IntN(2) == 0 {
				e["attrs"] = randomPayload(rng, 1)
			}
			edges[i] = e
		}
		req["edges"] = edges
	}
	if rng.IntN(6) == 0 {
		req[[]string{"type", "data", "edges", "extra"}[rng.IntN(4)]] = randomValue(rng)
	}
	return req
}

// TestFromDocMatchesUnmarshal checks that a request struct filled from
// the document is the one json.Unmarshal makes of the canonical body, for
// every body the request schema passes among thousands of random ones.
func TestFromDocMatchesUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 41))
	checked := map[string]int{}
	for i := range 8000 {
		var body map[string]any
		var got, want any
		name := "commit"
		if i%2 == 0 {
			body = randomCommitRequest(rng, 1+i%5)
			if ops, _ := body["ops"].([]any); len(ops) > 0 && rng.IntN(2) == 0 {
				// Payloads and attrs of every kind.
				if op, ok := ops[0].(map[string]any); ok {
					if art, ok := op["artifact"].(map[string]any); ok {
						art["data"] = randomPayload(rng, 0)
					} else if op["op"] == "link" {
						op["attrs"] = randomPayload(rng, 0)
					}
				}
			}
			got, want = &CommitInput{}, &CommitInput{}
		} else {
			name = "artifact"
			body = randomArtifactRequest(rng)
			got, want = &ArtifactInput{}, &ArtifactInput{}
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := hashing.Canonicalize(raw)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := hashing.DecodeCanonical(canon)
		if err != nil {
			t.Fatal(err)
		}
		if validateWhole(name, doc) != nil {
			continue
		}
		if err := json.Unmarshal(canon, want); err != nil {
			t.Fatal(err)
		}
		if err := fromDoc[name](doc, got); err != nil {
			t.Fatalf("%s %s: %v", name, canon, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %s:\n from the document %+v\n json.Unmarshal   %+v", name, canon, got, want)
		}
		checked[name]++
	}
	if checked["commit"] < 1000 || checked["artifact"] < 1000 {
		t.Fatalf("only %v valid bodies checked", checked)
	}
}

// TestFromDocKnowsEveryField lists the JSON members of the request
// structs fromDoc fills: a field added to one must be filled there too
// (and added here), or a request would silently lose it.
func TestFromDocKnowsEveryField(t *testing.T) {
	fields := func(v any) []string {
		var out []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			out = append(out, tag)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{ArtifactInput{}, []string{"branch", "data", "edges", "id", "parent", "produced_by", "quarantine", "type"}},
		{EdgeInput{}, []string{"attrs", "rel", "to"}},
		{CommitInput{}, []string{"author", "branch", "message", "ops", "parent", "quarantine"}},
		{OpInput{}, []string{"artifact", "attrs", "from", "id", "op", "rel", "to"}},
		{PutInput{}, []string{"data", "id", "produced_by", "type"}},
	} {
		if got := fields(tc.v); !slices.Equal(got, tc.want) {
			t.Errorf("%T has members %v; fromDoc fills %v: fill the new ones in body.go", tc.v, got, tc.want)
		}
	}
}

// BenchmarkFromDoc fills the struct of a 5,000-artifact commit from its
// document, and with json.Unmarshal of its canonical body.
func BenchmarkFromDoc(b *testing.B) {
	raw, err := json.Marshal(bulkCommitRequest(5000))
	if err != nil {
		b.Fatal(err)
	}
	canon, err := hashing.Canonicalize(raw)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := hashing.DecodeCanonical(canon)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("document", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var in CommitInput
			if err := commitInputOf(doc, &in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var in CommitInput
			if err := json.Unmarshal(canon, &in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestFromDocWrongStruct hands a filler the wrong struct: an error, not a
// panic.
func TestFromDocWrongStruct(t *testing.T) {
	doc := map[string]any{"ops": []any{}}
	if err := fromDoc["commit"](doc, &ArtifactInput{}); err == nil {
		t.Fatal("a commit body filled an ArtifactInput")
	}
	if err := fromDoc["artifact"](doc, nil); err == nil {
		t.Fatal("a nil destination was filled")
	}
}
