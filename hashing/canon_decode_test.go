package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeOracle is what DecodeCanonical must agree with: encoding/json's
// Decoder with UseNumber, as JSON Schema validators read documents.
func decodeOracle(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", b, err)
	}
	return v
}

// checkDecode fails t unless DecodeCanonical reads canon as the oracle
// does.
func checkDecode(t testing.TB, canon []byte) {
	t.Helper()
	got, err := DecodeCanonical(canon)
	if err != nil {
		t.Fatalf("DecodeCanonical(%q): %v", canon, err)
	}
	if want := decodeOracle(t, canon); !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeCanonical(%q)\n got  %#v\n want %#v", canon, got, want)
	}
	again, err := AppendCanonical([]byte("x"), got)
	if err != nil || !bytes.Equal(again, append([]byte("x"), canon...)) {
		t.Fatalf("AppendCanonical(DecodeCanonical(%q)) = %q, %v", canon, again, err)
	}
}

// TestAppendCanonicalRefuses gives AppendCanonical what DecodeCanonical
// never returns: numbers not in canonical form, Go values JSON does not
// have here, nesting past MaxDepth.
func TestAppendCanonicalRefuses(t *testing.T) {
	deep := any(map[string]any{})
	for range MaxDepth {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		v    any
		want error
	}{
		{json.Number("1.0"), ErrSyntax},
		{json.Number("1E3"), ErrSyntax},
		{json.Number("-0"), ErrSyntax},
		{json.Number("0x10"), ErrSyntax},
		{json.Number("NaN"), ErrSyntax},
		{json.Number("Inf"), ErrSyntax},
		{json.Number("-infinity"), ErrSyntax},
		{json.Number("1e999"), ErrSyntax},
		{map[string]any{"a": []any{json.Number("+1")}}, ErrSyntax},
		{1.5, ErrSyntax},
		{[]string{"a"}, ErrSyntax},
		{deep, ErrTooDeep},
	} {
		if out, err := AppendCanonical(nil, tc.v); !errors.Is(err, tc.want) {
			t.Fatalf("AppendCanonical(%#v) = %q, %v; want %v", tc.v, out, err, tc.want)
		}
	}
	// Keys in UTF-16 order, not bytewise: U+10000 (a surrogate pair)
	// before U+E000.
	out, err := AppendCanonical(nil, map[string]any{"\ue000": json.Number("1"), "\U00010000": json.Number("2"), "a": "\u0001"})
	if want := "{\"a\":\"\\u0001\",\"\U00010000\":2,\"\ue000\":1}"; err != nil || string(out) != want {
		t.Fatalf("AppendCanonical = %s, %v; want %s", out, err, want)
	}
}

// TestDecodeCanonicalOracle decodes the canonical form of the JCS inputs,
// the vectors' artifact data and random documents (awkward strings,
// numbers of every magnitude, nesting) and compares with encoding/json.
func TestDecodeCanonicalOracle(t *testing.T) {
	inputs := corpusInputs(t)
	for seed := range uint64(500) {
		v := randomValue(rand.New(rand.NewPCG(seed, 7)), 0)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	for _, s := range canonSeeds {
		inputs = append(inputs, []byte(s))
	}
	n := 0
	for _, in := range inputs {
		canon, err := Canonicalize(in)
		if err != nil {
			continue // the refused seeds
		}
		checkDecode(t, canon)
		n++
	}
	if n < 500 {
		t.Fatalf("only %d of %d inputs were decoded", n, len(inputs))
	}
}

// TestDecodeCanonicalValues pins the shape of each kind of value.
func TestDecodeCanonicalValues(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`{}`, map[string]any{}},
		{`[]`, []any{}},
		{`null`, nil},
		{`true`, true},
		{`false`, false},
		{`-0.5`, json.Number("-0.5")},
		{`1e+21`, json.Number("1e+21")},
		{`""`, ""},
		{`"a\"b\\c\n\u0001"`, "a\"b\\c\n\x01"},
		{`"\/\b\f\r\t"`, "/\b\f\r\t"},
		{`"\ud83d\ude00é"`, "😀é"},
		{`"\u00E9x"`, "éx"},
		{`{"a":[1,{"b":null}],"c":"d"}`, map[string]any{"a": []any{json.Number("1"), map[string]any{"b": nil}}, "c": "d"}},
	} {
		got, err := DecodeCanonical([]byte(tc.in))
		if err != nil {
			t.Fatalf("DecodeCanonical(%s): %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("DecodeCanonical(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

// TestDecodeCanonicalRefuses feeds text that is not a canonical document:
// each gets an error with its sentinel, never a panic or a value.
func TestDecodeCanonicalRefuses(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for _, tc := range []struct {
		in   string
		want error
	}{
		{``, ErrSyntax},
		{` {}`, ErrSyntax},
		{`{}x`, ErrSyntax},
		{`{`, ErrSyntax},
		{`{"a"`, ErrSyntax},
		{`{"a":`, ErrSyntax},
		{`{"a":}`, ErrSyntax},
		{`{"a":1,}`, ErrSyntax},
		{`{"a":1 }`, ErrSyntax},
		{`{1:2}`, ErrSyntax},
		{`[1,`, ErrSyntax},
		{`[1 2]`, ErrSyntax},
		{`"abc`, ErrSyntax},
		{`"ab\`, ErrSyntax},
		{`"\u12"`, ErrSyntax},
		{`"\uzzzz"`, ErrSyntax},
		{`"\x"`, ErrSyntax},
		{`"\ud800"`, ErrLoneSurrogate},
		{`"\ud800\u0041"`, ErrLoneSurrogate},
		{`"\udc00"`, ErrLoneSurrogate},
		{`tru`, ErrSyntax},
		{`nul`, ErrSyntax},
		{`}`, ErrSyntax},
		{deep, ErrTooDeep},
		{`{"a":` + deep + `}`, ErrTooDeep},
	} {
		v, err := DecodeCanonical([]byte(tc.in))
		if !errors.Is(err, tc.want) {
			t.Fatalf("DecodeCanonical(%q) = %#v, %v; want %v", tc.in, v, err, tc.want)
		}
		var ce *CanonError
		if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(tc.in) || ce.Detail == "" {
			t.Fatalf("DecodeCanonical(%q): error %#v is not a CanonError within the input", tc.in, err)
		}
	}
	// Depth MaxDepth is fine, as it is for Canonicalize.
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := DecodeCanonical([]byte(ok)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
}

// TestDecodeCanonicalTruncated cuts a document at every byte: each prefix
// is refused without a panic.
func TestDecodeCanonicalTruncated(t *testing.T) {
	doc, err := Canonicalize([]byte(`{"ops":[{"op":"put","artifact":{"id":"a\"1","data":{"n":-1.5e-7,"s":"\ud83d\ude00\u0007","t":[true,false,null]}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, doc)
	for i := range len(doc) {
		if v, err := DecodeCanonical(doc[:i]); err == nil {
			t.Fatalf("prefix %q decoded to %#v", doc[:i], v)
		}
	}
}

func FuzzDecodeCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":[1,{"b":"\u0000"}],"c":"\ud83d\ude00"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := DecodeCanonical(in) // never panics
		if err == nil && json.Valid(in) && utf8.Valid(in) {
			// Any JSON without whitespace reads as encoding/json reads it
			// (which replaces what DecodeCanonical refuses: lone surrogates).
			if want := decodeOracle(t, in); !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeCanonical(%q)\n got  %#v\n want %#v", in, got, want)
			}
		}
		if canon, err := Canonicalize(in); err == nil {
			checkDecode(t, canon)
		}
	})
}

// BenchmarkDecodeCanonical decodes the canonical body of a 5,000-artifact
// commit — each artifact put and linked to an earlier one, as `artifactd
// bench --scenario big` sends them — with DecodeCanonical and with
// encoding/json (the Decoder with UseNumber, as JSON Schema validators read
// documents).
func BenchmarkDecodeCanonical(b *testing.B) {
	const n = 5000
	ops := make([]any, 0, 2*n)
	for i := range n {
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": fmt.Sprintf("a%d", i), "type": "claim", "produced_by": "bench", "data": map[string]any{"text": fmt.Sprintf("claim a%d", i)}}})
	}
	for i := 1; i < n; i++ {
		ops = append(ops, map[string]any{"op": "link", "from": fmt.Sprintf("a%d", i), "rel": "derived_from", "to": fmt.Sprintf("a%d", i/2)})
	}
	raw, err := json.Marshal(map[string]any{"author": "bench", "message": "bulk", "ops": ops})
	if err != nil {
		b.Fatal(err)
	}
	canon, err := Canonicalize(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeCanonical", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(canon)))
		for b.Loop() {
			if _, err := DecodeCanonical(canon); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(canon)))
		for b.Loop() {
			decodeOracle(b, canon)
		}
	})
}

// TestDecodeCanonicalOwnsItsStrings changes the input after decoding it:
// the value must not change (its strings are its own, so a caller may keep
// one without keeping the body).
func TestDecodeCanonicalOwnsItsStrings(t *testing.T) {
	in := []byte(`{"id":"abc","n":12,"s":"x\ny","t":["uvw"]}`)
	v, err := DecodeCanonical(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'z'
	}
	want := map[string]any{"id": "abc", "n": json.Number("12"), "s": "x\ny", "t": []any{"uvw"}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("after the input changed: %#v", v)
	}
}
