package schema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// parseJSON parses text as the validators read documents.
func parseJSON(t testing.TB, text string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

// libraryOf compiles doc with the compiler of type schemas.
func libraryOf(t testing.TB, doc any) *jsonschema.Schema {
	t.Helper()
	c := NewCompiler()
	if err := c.AddResource("urn:test", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("urn:test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Pools the random schemas and data draw from, small enough that data
// often meets what a schema names.
var (
	fastNames    = []string{"a", "b", "op", "é"}
	fastStrings  = []string{"", "a", "b", "ab", "é", "éé", "put", "x\u0000"}
	fastPatterns = []string{"^a", "b$", "^[a-z]+$", "é", "^(sha256:)?[0-9a-f]{2}$"}
	fastTypes    = []string{"object", "array", "string", "boolean", "null"}
)

// randomSchema returns a random schema of the keywords Fast compiles.
func randomSchema(rng *rand.Rand, depth int) any {
	if rng.IntN(8) == 0 {
		return rng.IntN(3) > 0 // true more often than false
	}
	s := map[string]any{}
	sub := func() any { return randomSchema(rng, depth+1) }
	subs := func() []any {
		out := make([]any, 1+rng.IntN(3))
		for i := range out {
			out[i] = sub()
		}
		return out
	}
	for range 1 + rng.IntN(3) {
		switch k := rng.IntN(17); {
		case k == 0:
			s["type"] = fastTypes[rng.IntN(len(fastTypes))]
		case k == 1:
			i := rng.IntN(len(fastTypes))
			s["type"] = []any{fastTypes[i], fastTypes[(i+1+rng.IntN(len(fastTypes)-1))%len(fastTypes)]}
		case k == 2:
			i := rng.IntN(len(fastStrings))
			s["enum"] = []any{fastStrings[i], fastStrings[(i+1+rng.IntN(len(fastStrings)-1))%len(fastStrings)]}
		case k == 3:
			s["const"] = fastStrings[rng.IntN(len(fastStrings))]
		case k == 4:
			s["required"] = []any{fastNames[rng.IntN(len(fastNames))]}
		case k == 5 && depth < 3:
			props := map[string]any{}
			for range 1 + rng.IntN(2) {
				props[fastNames[rng.IntN(len(fastNames))]] = sub()
			}
			s["properties"] = props
		case k == 6 && depth < 3:
			s["additionalProperties"] = sub()
		case k == 7:
			s["minLength"] = rng.IntN(3)
		case k == 8:
			s["pattern"] = fastPatterns[rng.IntN(len(fastPatterns))]
		case k == 9 && depth < 3:
			s["items"] = sub()
		case k == 10 && depth < 3:
			s["allOf"] = subs()
		case k == 11 && depth < 3:
			s["anyOf"] = subs()
		case k == 12 && depth < 3:
			s["oneOf"] = subs()
		case k == 13 && depth < 3:
			s["not"] = sub()
		case k == 14:
			s["maxLength"] = rng.IntN(3)
		case k == 15:
			s["minItems"] = rng.IntN(3)
		case k == 16:
			s["maxItems"] = rng.IntN(3)
		default:
			s["description"] = "d"
		}
	}
	return s
}

// randomData returns a random JSON value built from the pools.
func randomData(rng *rand.Rand, depth int) any {
	switch rng.IntN(9) {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return json.Number(fmt.Sprint(rng.IntN(5)))
	case 3, 4:
		return fastStrings[rng.IntN(len(fastStrings))]
	case 5, 6:
		if depth < 3 {
			m := map[string]any{}
			for range rng.IntN(3) {
				m[fastNames[rng.IntN(len(fastNames))]] = randomData(rng, depth+1)
			}
			return m
		}
	case 7:
		if depth < 3 {
			a := make([]any, rng.IntN(3))
			for i := range a {
				a[i] = randomData(rng, depth+1)
			}
			return a
		}
	}
	return "a"
}

// roundTrip gives v the types a validator reads (json.Number numbers).
func roundTrip(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return parseJSON(t, string(b))
}

// TestFastAgreesWithLibrary checks Fast against the library on random
// schemas of the keywords it compiles and random data: valid exactly when
// the library says valid.
func TestFastAgreesWithLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	valid, invalid := 0, 0
	for i := range 3000 {
		doc := roundTrip(t, randomSchema(rng, 0))
		lib := libraryOf(t, doc)
		fast := CompileFast(doc)
		if fast == nil {
			t.Fatalf("schema %d: %v did not compile to a Fast check", i, doc)
		}
		for range 20 {
			data := roundTrip(t, randomData(rng, 0))
			want := lib.Validate(data) == nil
			if got := fast.Valid(data); got != want {
				t.Fatalf("schema %v, data %#v: Fast says %v, the library %v", doc, data, got, want)
			}
			if want {
				valid++
			} else {
				invalid++
			}
		}
	}
	// Both answers must be common, or the comparison proves little.
	if valid < 10000 || invalid < 10000 {
		t.Fatalf("%d valid and %d invalid cases: the pools do not exercise both", valid, invalid)
	}
}

// TestCompileFastRefuses lists schemas Fast does not check: nil, so that
// the library checks them.
func TestCompileFastRefuses(t *testing.T) {
	for _, s := range []string{
		`{"$ref":"#/$defs/x","$defs":{"x":true}}`,
		`{"type":"integer"}`,
		`{"type":"number"}`,
		`{"type":["string","number"]}`,
		`{"format":"email"}`,
		`{"enum":["a",1]}`,
		`{"const":null}`,
		`{"minimum":0}`,
		`{"maxLength":-1}`,
		`{"minItems":"1"}`,
		`{"uniqueItems":true}`,
		`{"minLength":1.5}`,
		`{"pattern":"("}`,
		`{"patternProperties":{"a":true}}`,
		`{"unevaluatedProperties":false}`,
		`{"if":true,"then":true}`,
		`{"x-custom":1}`,
		`{"properties":{"a":{"type":"integer"}}}`,
		`{"allOf":[]}`,
		`"string"`,
		// Another draft: under draft 4 the library has no const, so Fast
		// would refuse what the library passes (and pass it under not).
		`{"$schema":"http://json-schema.org/draft-04/schema#","not":{"const":"a"}}`,
		`{"items":{"$schema":"http://json-schema.org/draft-07/schema#"}}`,
		// Counts past maxCount: one more than the largest int overflows.
		`{"maxLength":9223372036854775807}`,
		`{"not":{"maxLength":1073741825}}`,
		`{"minLength":4611686018427387904}`,
		`{"maxItems":1073741825}`,
		`{"items":{"items":{"items":` + strings.Repeat(`{"items":`, 70) + `true` + strings.Repeat(`}`, 73),
	} {
		if f := CompileFast(parseJSON(t, s)); f != nil {
			t.Fatalf("CompileFast(%s) = %+v, want nil", s, f)
		}
	}
}

// TestCompileFastDraft2020 compiles the dialect Fast reads, named with
// and without its empty fragment, and the largest counts it takes.
func TestCompileFastDraft2020(t *testing.T) {
	for _, s := range []string{
		`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"string","maxLength":1073741824}`,
		`{"$schema":"https://json-schema.org/draft/2020-12/schema#","not":{"const":"a"}}`,
	} {
		doc := parseJSON(t, s)
		f := CompileFast(doc)
		if f == nil {
			t.Fatalf("CompileFast(%s) = nil", s)
		}
		lib := libraryOf(t, doc)
		for _, data := range []string{`"a"`, `"b"`, `1`} {
			v := parseJSON(t, data)
			if got, want := f.Valid(v), lib.Validate(v) == nil; got != want {
				t.Fatalf("%s on %s: Fast %v, the library %v", s, data, got, want)
			}
		}
	}
}

// TestFastValues pins a few answers of a request-like schema.
func TestFastValues(t *testing.T) {
	f := CompileFast(parseJSON(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,
	  "required":["op","to"],"properties":{"op":{"enum":["link","unlink"]},"to":{"type":"string","minLength":2},"attrs":{"type":"object"},
	  "at":{"type":"string","pattern":"^(sha256:)?[0-9a-f]{4}$"}}}`))
	if f == nil {
		t.Fatal("did not compile")
	}
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"op":"link","to":"ab"}`, true},
		{`{"op":"link","to":"éé","attrs":{},"at":"sha256:00ff"}`, true},
		{`{"op":"link","to":"é"}`, false},
		{`{"op":"frob","to":"ab"}`, false},
		{`{"op":"link"}`, false},
		{`{"op":"link","to":"ab","x":1}`, false},
		{`{"op":"link","to":"ab","attrs":[]}`, false},
		{`{"op":"link","to":"ab","at":"00FF"}`, false},
		{`[]`, false},
		{`null`, false},
	} {
		if got := f.Valid(parseJSON(t, tc.data)); got != tc.want {
			t.Fatalf("%s: %v, want %v", tc.data, got, tc.want)
		}
	}
}
