package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestCanonicalizeValid(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"whitespace", " \t\r\n{ \"b\" : [ true , false , null ] , \"a\" : { } } \n", `{"a":{},"b":[true,false,null]}`},
		{"scalar true", "true", "true"},
		{"scalar null with space", "  null  ", "null"},
		{"scalar string", `"x"`, `"x"`},
		{"empty string", `""`, `""`},
		{"empty array", `[ ]`, `[]`},
		{"empty object", `{ }`, `{}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"nested sort", `{"b":{"d":1,"c":2},"a":[{"z":0,"y":0}]}`, `{"a":[{"y":0,"z":0}],"b":{"c":2,"d":1}}`},

		// Strings: the escapes JCS keeps, controls as \u00xx, the rest raw.
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{"controls", `"\u0000\u0001\u001f\u001F"`, `"\u0000\u0001\u001f\u001f"`},
		{"DEL and C1 raw", `"\u007f\u0080\u009f"`, "\"\x7f\u0080\u009f\""},
		{"line separators raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"html raw", `"<\u003c>&\u0026'"`, `"<<>&&'"`},
		{"upper-case hex escape", `"\u00E9\u00e9"`, `"éé"`},
		{"surrogate pair", `"\ud83d\ude00\uD83D\uDE00"`, `"😀😀"`},
		{"raw UTF-8 kept", "\"é€😀\ufeff\"", "\"é€😀\ufeff\""},
		{"noncharacter U+FFFF", `"\uffff"`, "\"\uffff\""},
		{"slash raw", `"a/b"`, `"a/b"`},

		// Numbers.
		{"zero forms", `[0,-0,0.0,-0.0,0e5,-0E-5]`, `[0,0,0,0,0,0]`},
		{"integers", `[1,-1,1.0,1.5e3,1E2,123456789012]`, `[1,-1,1,1500,100,123456789012]`},
		{"fractions", `[0.1,0.5,4.50,2e-3,333333333.33333329]`, `[0.1,0.5,4.5,0.002,333333333.3333333]`},
		{"small", `[0.000001,1e-6,1e-7,0.0000001,1e-27]`, `[0.000001,0.000001,1e-7,1e-7,1e-27]`},
		{"large", `[1e21,1e+21,1E30,1.5e300,1e20]`, `[1e+21,1e+21,1e+30,1.5e+300,100000000000000000000]`},
		{"2^53 exactly", `[9007199254740992,-9007199254740992]`, `[9007199254740992,-9007199254740992]`},
		{"canonical big integer kept", `[100000000000000000000,67663713054666660,9007199254740994]`, `[100000000000000000000,67663713054666660,9007199254740994]`},
		{"big double with exponent", `[9007199254740993.0,6.766371305466666e16]`, `[9007199254740992,67663713054666660]`},
		{"underflow to zero", `[1e-400,-1e-400]`, `[0,0]`},
		{"min subnormal", `[5e-324,4.9406564584124654e-324]`, `[5e-324,5e-324]`},
		{"max double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"long mantissa", `0.1000000000000000055511151231257827021181583404541015625`, `0.1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	deepArrays := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	var big strings.Builder
	big.WriteString("{")
	for i := range 20 {
		fmt.Fprintf(&big, `"k%d":%d,`, i, i)
	}
	big.WriteString(`"k3":0}`)
	bigDupAt := strings.LastIndex(big.String(), `"k3"`)

	tests := []struct {
		name    string
		in      string
		want    error
		pointer string
		offset  int
	}{
		{"duplicate", `{"a":1,"a":2}`, ErrDuplicateKey, "/a", 7},
		{"duplicate nested", `{"b":{"a":1,"b":2,"a":3}}`, ErrDuplicateKey, "/b/a", 18},
		{"duplicate via escape", `{"\u0061":1,"a":2}`, ErrDuplicateKey, "/a", 12},
		{"duplicate in big object", big.String(), ErrDuplicateKey, "/k3", bigDupAt},
		{"duplicate reported before later error", `{"a":1,"a":1e999}`, ErrDuplicateKey, "/a", 7},

		{"lone high surrogate", `{"a":"\ud800"}`, ErrLoneSurrogate, "/a", 6},
		{"lone low surrogate", `["\ude00"]`, ErrLoneSurrogate, "/0", 2},
		{"high then non-low", `"\ud83d\u0041"`, ErrLoneSurrogate, "", 1},
		{"high then two highs", `"x\ud83d\ud83d\ude00"`, ErrLoneSurrogate, "", 2},
		{"high at end of string", `"\ud83d"`, ErrLoneSurrogate, "", 1},
		{"surrogate in key points at object", `{"k":{"\ud800x":1}}`, ErrLoneSurrogate, "/k", 7},
		{"pointer escapes", `{"a/b~c":{"x":"\udc00"}}`, ErrLoneSurrogate, "/a~1b~0c/x", 15},

		{"unsafe integer", `{"id":12345678901234567890}`, ErrUnsafeInteger, "/id", 6},
		{"unsafe negative", `{"n":-9007199254740993}`, ErrUnsafeInteger, "/n", 5},
		{"unsafe 2^53+1", `[9007199254740993]`, ErrUnsafeInteger, "/0", 1},
		{"unsafe huge literal", "[" + strings.Repeat("9", 400) + "]", ErrUnsafeInteger, "/0", 1},

		{"overflow", `{"a":1e400}`, ErrNonFinite, "/a", 5},
		{"negative overflow", `[1,2,{"k":[0,-1.8e308]}]`, ErrNonFinite, "/2/k/1", 13},

		{"NaN", `{"x":NaN}`, ErrSyntax, "/x", 5},
		{"Infinity", `[Infinity]`, ErrSyntax, "/0", 1},
		{"-Infinity", `[-Infinity]`, ErrSyntax, "/0", 2},
		{"empty input", ``, ErrSyntax, "", 0},
		{"only space", "   ", ErrSyntax, "", 3},
		{"trailing garbage", `{"a":1} x`, ErrSyntax, "", 8},
		{"two values", `{"a":1}{}`, ErrSyntax, "", 7},
		{"trailing comma object", `{"a":1,}`, ErrSyntax, "", 7},
		{"trailing comma array", `[1,]`, ErrSyntax, "/1", 3},
		{"missing colon", `{"a" 1}`, ErrSyntax, "/a", 5},
		{"missing comma", `[1 2]`, ErrSyntax, "", 3},
		{"unclosed array", `{"a":[1,2`, ErrSyntax, "/a", 9},
		{"unclosed string", `"\u00e9`, ErrSyntax, "", 7},
		{"raw tab in string", "\"a\tb\"", ErrSyntax, "", 2},
		{"raw newline in key", "{\"a\nb\":1}", ErrSyntax, "", 3},
		{"bad escape", `"\x"`, ErrSyntax, "", 1},
		{"bad hex escape", `"\u12G4"`, ErrSyntax, "", 5},
		{"short hex escape", `"\u12"`, ErrSyntax, "", 6},
		{"leading zero", `01`, ErrSyntax, "", 1},
		{"bare point", `1.`, ErrSyntax, "", 2},
		{"point then exponent", `[1.e5]`, ErrSyntax, "/0", 3},
		{"bare minus", `-`, ErrSyntax, "", 1},
		{"empty exponent", `1e+`, ErrSyntax, "", 3},
		{"leading point", `.5`, ErrSyntax, "", 0},
		{"leading plus", `+1`, ErrSyntax, "", 0},
		{"hex number", `0x10`, ErrSyntax, "", 1},
		{"truncated literal", `tru`, ErrSyntax, "", 0},
		{"long literal", `nulll`, ErrSyntax, "", 4},
		{"single quotes", `{'a':1}`, ErrSyntax, "", 1},
		{"comment", "// c\n{}", ErrSyntax, "", 0},
		{"byte order mark", "\ufeff{}", ErrSyntax, "", 0},
		{"non-string key", `{1:2}`, ErrSyntax, "", 1},

		{"invalid UTF-8", "{\"a\":\"\xc0\"}", ErrInvalidUTF8, "/a", 6},
		{"UTF-8 surrogate", "{\"a\":\"x\xed\xa0\x80\"}", ErrInvalidUTF8, "/a", 7},
		{"overlong UTF-8", "[\"\xc1\xbf\"]", ErrInvalidUTF8, "/0", 2},
		{"truncated UTF-8", "[\"\xe2\x82\"]", ErrInvalidUTF8, "/0", 2},
		{"invalid UTF-8 in key", "{\"\xff\":1}", ErrInvalidUTF8, "", 2},

		{"too deep arrays", deepArrays, ErrTooDeep, strings.Repeat("/0", MaxDepth), MaxDepth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Canonicalize(%q) = %q, %v; want %v", tt.in, out, err, tt.want)
			}
			if out != nil {
				t.Errorf("output %q returned with an error", out)
			}
			var ce *CanonError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *CanonError", err)
			}
			if ce.Pointer != tt.pointer || ce.Offset != tt.offset {
				t.Errorf("pointer %q offset %d; want %q offset %d (%v)", ce.Pointer, ce.Offset, tt.pointer, tt.offset, err)
			}
			if ce.Detail == "" {
				t.Errorf("no detail: %v", err)
			}
			// Exactly one sentinel.
			for _, s := range allSentinels {
				if s != tt.want && errors.Is(err, s) {
					t.Errorf("error also matches %v", s)
				}
			}
		})
	}
}

var allSentinels = []error{ErrSyntax, ErrDuplicateKey, ErrInvalidUTF8, ErrLoneSurrogate, ErrNonFinite, ErrUnsafeInteger, ErrTooDeep, ErrNotObject}

func TestCanonErrorMessage(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"id":12345678901234567890}`, `/id: integer 12345678901234567890 exceeds 2^53; send it as a string`},
		{`{"a":1,"a":2}`, `/a: duplicate key "a"; each key may appear once per object`},
		{`{"x":NaN}`, `/x: invalid JSON: unexpected character 'N' at byte 5; want a value`},
		{`[1]x`, `(root): invalid JSON: unexpected character 'x' after the top-level value at byte 3`},
		{`["\ud800"]`, `/0: lone UTF-16 surrogate \ud800 at byte 2 (a high surrogate not followed by a low one); it cannot be represented in UTF-8`},
	}
	for _, tt := range tests {
		_, err := Canonicalize([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Canonicalize(%q) error\n got %v\nwant %s", tt.in, err, tt.want)
		}
	}
	// A bare CanonError falls back to the sentinel's text.
	e := &CanonError{Pointer: "/p", Err: ErrTooDeep}
	if got := e.Error(); got != "/p: nesting too deep" {
		t.Errorf("Error() = %q", got)
	}
}

func TestDepthLimit(t *testing.T) {
	nest := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	mixed := func(n int) string {
		var pre, post strings.Builder
		for i := range n {
			if i%2 == 0 {
				pre.WriteString(`{"a":`)
				post.WriteString("}")
			} else {
				pre.WriteString("[")
				post.WriteString("]")
			}
		}
		p := post.String()
		// Close in reverse order of opening.
		r := []byte(p)
		slices.Reverse(r)
		return pre.String() + "1" + string(r)
	}
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"64 arrays", nest(MaxDepth, "[", "]"), true},
		{"65 arrays", nest(MaxDepth+1, "[", "]"), false},
		{"64 objects", nest(MaxDepth, `{"a":`, "}"), true},
		{"65 objects", nest(MaxDepth+1, `{"a":`, "}"), false},
		{"64 mixed", mixed(MaxDepth), true},
		{"65 mixed", mixed(MaxDepth + 1), false},
		{"65 empty arrays", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false},
		{"64 then siblings", "[" + nest(MaxDepth-1, "[", "]") + "," + nest(MaxDepth-1, "[", "]") + "]", true},
	} {
		out, err := Canonicalize([]byte(tc.in))
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.ok && string(out) != strings.Join(strings.Fields(tc.in), ""):
			t.Errorf("%s: output %q", tc.name, out)
		case !tc.ok && !errors.Is(err, ErrTooDeep):
			t.Errorf("%s: got %v, want ErrTooDeep", tc.name, err)
		}
	}
}

func TestCanonicalizeObject(t *testing.T) {
	if got, err := CanonicalizeObject([]byte(` {"b":1,"a":2} `)); err != nil || string(got) != `{"a":2,"b":1}` {
		t.Errorf("object: %q, %v", got, err)
	}
	for _, in := range []string{`[1]`, `"s"`, `1`, `true`, `null`, ` [ ] `} {
		_, err := CanonicalizeObject([]byte(in))
		var ce *CanonError
		if !errors.Is(err, ErrNotObject) || !errors.As(err, &ce) {
			t.Errorf("CanonicalizeObject(%q) = %v; want ErrNotObject", in, err)
			continue
		}
		if want := len(in) - len(strings.TrimLeft(in, " ")); ce.Pointer != "" || ce.Offset != want {
			t.Errorf("CanonicalizeObject(%q): pointer %q offset %d, want \"\" %d", in, ce.Pointer, ce.Offset, want)
		}
	}
	// Invalid JSON is a syntax error, not "not an object".
	for _, in := range []string{`[1,`, ``, `{"a":1}]`} {
		if _, err := CanonicalizeObject([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("CanonicalizeObject(%q) = %v; want ErrSyntax", in, err)
		}
	}
}

func TestKeyOrderUTF16(t *testing.T) {
	// Bytewise (code point) order would put U+1F600 after U+FFFF; UTF-16
	// order puts its surrogate pair (0xD83D 0xDE00) before U+E000.
	in := `{"\uffff":6,"\ue000":5,"😀":4,"é":3,"a":2,"":1,"\u0080":2.5,"aa":2.1,"\ud800\udc00":3.5}`
	want := "{\"\":1,\"a\":2,\"aa\":2.1,\"\u0080\":2.5,\"é\":3,\"\U00010000\":3.5,\"😀\":4,\"\ue000\":5,\"\uffff\":6}"
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestCompareUTF16Oracle checks compareUTF16 against comparing the UTF-16
// encodings directly.
func TestCompareUTF16Oracle(t *testing.T) {
	pool := []rune{0, 'A', 'a', 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xe001, 0xfb33, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x1f601, 0x10ffff}
	rng := rand.New(rand.NewPCG(7, 7))
	gen := func() string {
		rs := make([]rune, rng.IntN(4))
		for i := range rs {
			rs[i] = pool[rng.IntN(len(pool))]
		}
		return string(rs)
	}
	for range 20000 {
		a, b := gen(), gen()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := compareUTF16([]byte(a), []byte(b)); got != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
}

func TestCanonicalizeDoesNotAliasInput(t *testing.T) {
	in := []byte(`{"a":"b"}`)
	out, err := Canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i] = 'x'
	}
	if string(in) != `{"a":"b"}` {
		t.Errorf("input changed to %q", in)
	}
}

func TestMarshal(t *testing.T) {
	type inner struct {
		Z string  `json:"z"`
		A float64 `json:"a"`
	}
	v := map[string]any{
		"list":  []any{1, "two", nil, true},
		"inner": inner{Z: "<&>", A: 0.5},
		"neg0":  math.Copysign(0, -1),
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"inner":{"a":0.5,"z":"<&>"},"list":[1,"two",null,true],"neg0":0}`; string(got) != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	if _, err := Marshal(map[string]int64{"id": 1<<53 + 1}); !errors.Is(err, ErrUnsafeInteger) {
		t.Errorf("Marshal(2^53+1) = %v, want ErrUnsafeInteger", err)
	}
	if _, err := Marshal(math.Inf(1)); err == nil {
		t.Error("Marshal(+Inf) succeeded")
	}
	// Invalid UTF-8 in a Go string is replaced by encoding/json, not refused.
	if got, err := Marshal("a\xffb"); err != nil || string(got) != "\"a\ufffdb\"" {
		t.Errorf("Marshal(invalid UTF-8) = %q, %v", got, err)
	}
}

// TestIdempotentAndSemantic checks, on the reference files, the vectors and
// random documents, that canonical output is a fixed point and means the
// same as the input to encoding/json.
func TestIdempotentAndSemantic(t *testing.T) {
	inputs := corpusInputs(t)
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		v := randomValue(rng, 0)
		var b []byte
		var err error
		if seed%2 == 0 {
			b, err = json.Marshal(v)
		} else {
			b, err = json.MarshalIndent(v, " ", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		checkCanonical(t, in)
	}
}

// corpusInputs returns the JSON texts of the JCS test inputs and of the
// vectors' artifact data.
func corpusInputs(t *testing.T) [][]byte {
	t.Helper()
	var inputs [][]byte
	for _, name := range jcsFiles(t) {
		b, err := os.ReadFile(filepath.Join(jcsDir, name+".input.json"))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	for _, s := range loadVectors(t).States {
		for _, a := range s.Artifacts {
			inputs = append(inputs, a.Data)
		}
	}
	return inputs
}

// checkCanonical fails t unless in canonicalizes to a fixed point that
// encoding/json reads as the same value as in.
func checkCanonical(t *testing.T, in []byte) {
	t.Helper()
	out, err := Canonicalize(in)
	if err != nil {
		t.Fatalf("Canonicalize(%q): %v", in, err)
	}
	again, err := Canonicalize(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("not idempotent on %q:\n once  %q\n twice %q, %v", in, out, again, err)
	}
	var vin, vout any
	if err := json.Unmarshal(in, &vin); err != nil {
		t.Fatalf("encoding/json rejects the input %q: %v", in, err)
	}
	if err := json.Unmarshal(out, &vout); err != nil {
		t.Fatalf("encoding/json rejects the output %q: %v", out, err)
	}
	if !reflect.DeepEqual(vin, vout) {
		t.Fatalf("meaning changed:\n in  %q\n out %q", in, out)
	}
}

// randomValue builds a random JSON-able value: nested maps and slices,
// strings with awkward characters, and finite doubles of every magnitude.
func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(8)
	if depth > 5 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return randomString(rng)
	case 3:
		return randomFloat(rng)
	case 4:
		return float64(rng.Int64N(1<<54) - 1<<53)
	case 5, 6:
		m := map[string]any{}
		for range rng.IntN(6) {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	default:
		s := make([]any, rng.IntN(5))
		for i := range s {
			s[i] = randomValue(rng, depth+1)
		}
		return s
	}
}

func randomString(rng *rand.Rand) string {
	pool := []rune{'a', 'b', 'Z', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0, 0x1f, 0x7f, 0x80, 'é', 0x2028, '<', '&', 0xe000, 0xffff, 0xfffd, 0x1f600, 0x10000, 0x10ffff}
	rs := make([]rune, rng.IntN(6))
	for i := range rs {
		rs[i] = pool[rng.IntN(len(pool))]
	}
	return string(rs)
}

func randomFloat(rng *rand.Rand) float64 {
	for {
		f := math.Float64frombits(rng.Uint64())
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

func TestAppendStringMatchesCanonicalize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		s := randomString(rng)
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Canonicalize(enc)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%+q) = %q, want %q", s, got, want)
		}
	}
	if got := appendString(nil, "a\xffb"); string(got) != "\"a\ufffdb\"" || !utf8.Valid(got) {
		t.Errorf("appendString(invalid UTF-8) = %q", got)
	}
}

// TestLargeObjects covers both ways of ordering members (sorted insertion
// for small objects, a map and a final sort for large ones) around the
// switchover, with keys in random order and duplicates at random places.
func TestLargeObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	for _, n := range []int{2, 17, sortedInsertMax - 1, sortedInsertMax, sortedInsertMax + 1, 1000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%d", randomString(rng), i) // unique
		}
		for _, order := range []string{"sorted", "reversed", "shuffled"} {
			ks := slices.Clone(keys)
			slices.SortFunc(ks, func(a, b string) int { return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b))) })
			want := canonicalObject(ks)
			switch order {
			case "reversed":
				slices.Reverse(ks)
			case "shuffled":
				rng.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
			}
			in := canonicalObject(ks)
			got, err := Canonicalize([]byte(in))
			if err != nil {
				t.Fatalf("n=%d %s: %v", n, order, err)
			}
			if string(got) != want {
				t.Fatalf("n=%d %s: wrong order", n, order)
			}

			// Repeat one key later on: the duplicate is found and located.
			i, j := rng.IntN(n), rng.IntN(n)
			if i > j {
				i, j = j, i
			}
			dupKeys := slices.Insert(slices.Clone(ks), j+1, ks[i])
			in = canonicalObject(dupKeys)
			_, err = Canonicalize([]byte(in))
			var ce *CanonError
			if !errors.As(err, &ce) || !errors.Is(err, ErrDuplicateKey) {
				t.Fatalf("n=%d %s: duplicate %q not found: %v", n, order, ks[i], err)
			}
			if wantPtr := "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(ks[i]); ce.Pointer != wantPtr {
				t.Errorf("n=%d: pointer %q, want %q", n, ce.Pointer, wantPtr)
			}
			if wantAt := len(canonicalObject(dupKeys[:j+1])); ce.Offset != wantAt {
				t.Errorf("n=%d: offset %d, want %d", n, ce.Offset, wantAt)
			}
		}
	}
}

// canonicalObject writes {"k":index,...} in the order of keys.
func canonicalObject(keys []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(appendString(nil, k))
		fmt.Fprintf(&b, ":%d", len(k))
	}
	b.WriteByte('}')
	return b.String()
}

func TestCheckCanonicalObject(t *testing.T) {
	for raw, want := range map[string]error{
		`{"a":2.5,"b":1}`:     nil,
		`{"b":1,"a":2.5}`:     ErrNotCanonicalForm,
		`{"a": 1}`:            ErrNotCanonicalForm,
		`{"a":1.0}`:           ErrNotCanonicalForm,
		`{"a":"\u0041"}`:      ErrNotCanonicalForm,
		`{"a":1,"a":2}`:       ErrDuplicateKey,
		`[1]`:                 ErrNotObject,
		`{"a":"<b>&"}`:        nil,
		`{"a":{"c":1,"b":2}}`: ErrNotCanonicalForm,
	} {
		if err := CheckCanonicalObject([]byte(raw)); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("CheckCanonicalObject(%s) = %v, want %v", raw, err, want)
		}
	}
}
