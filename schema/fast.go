package schema

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Fast checks data against a JSON Schema (draft 2020-12) that uses only
// the plain keywords of request bodies and of most artifact types — type
// (except number and integer), enum and const of strings, required,
// properties, additionalProperties, minLength, maxLength, pattern, items,
// minItems, maxItems, allOf, anyOf, oneOf, not — with one walk of the
// data that allocates nothing. The library's validator, which a commit's thousands of ops and payloads
// go through one by one, sets up its evaluation state for every value it
// checks: for the body of a 5,000-artifact commit that was most of the
// time and garbage of decoding it (BenchmarkDecodeCommitBody in httpapi).
//
// Fast only answers valid or not, and answers as the library does for
// every schema CompileFast compiles (TestFastAgreesWithLibrary); callers
// explain a refusal with the library, which names each pointer and rule.
// It is safe for concurrent use.
type Fast struct {
	always, never bool // the schemas true and false

	types    kinds      // 0: any
	strs     [][]string // enum and const: the value is one of each list
	required []string
	props    map[string]*Fast
	extra    *Fast // additionalProperties; nil: any
	minLen   int
	maxLen   int // -1: none
	pattern  *regexp.Regexp
	items    *Fast
	minItems int
	maxItems int // -1: none
	allOf    []*Fast
	anyOf    []*Fast
	oneOf    []*Fast
	not      *Fast
}

// kinds is a set of JSON value kinds.
type kinds uint8

const (
	kindObject kinds = 1 << iota
	kindArray
	kindString
	kindBoolean
	kindNull
	kindNumber
)

// kindOf returns the kind of a decoded JSON value.
func kindOf(v any) kinds {
	switch v.(type) {
	case map[string]any:
		return kindObject
	case []any:
		return kindArray
	case string:
		return kindString
	case bool:
		return kindBoolean
	case nil:
		return kindNull
	}
	return kindNumber // json.Number, float64, …
}

var typeKinds = map[string]kinds{"object": kindObject, "array": kindArray, "string": kindString, "boolean": kindBoolean, "null": kindNull}

// annotations are keywords that do not change whether data is valid.
var annotations = map[string]bool{"$comment": true, "title": true, "description": true,
	"examples": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// CompileFast returns the Fast check of doc, a schema the library compiled
// (parsed as generic JSON: hashing.DecodeCanonical or
// jsonschema.UnmarshalJSON), or nil when doc uses a keyword or a value
// Fast does not know: $ref, number types, formats, enums of other than
// strings, unknown keywords, counts past maxCount, a $schema other than
// draft 2020-12 (under which the library reads keywords otherwise: draft
// 4 has no const), and so on. $defs are ignored, as no schema Fast
// compiles can refer to them.
func CompileFast(doc any) *Fast {
	return compileFast(doc, 0)
}

// maxFastDepth bounds the nesting of schemas CompileFast follows.
const maxFastDepth = 64

// maxCount is the largest minLength, maxLength, minItems or maxItems
// Fast takes: far past any body or payload, and small enough that no
// count overflows.
const maxCount = 1 << 30

// isDraft2020 reports whether uri, a $schema, names the only draft Fast
// reads, with or without its empty fragment.
func isDraft2020(uri string) bool {
	u := jsonschema.Draft2020.String()
	return uri == u || uri == u+"#"
}

// OtherDialect reports whether doc, a schema decoded into maps, declares
// a $schema other than draft 2020-12: the one dialect the type registry
// and Compile accept (an absent $schema is taken as it).
func OtherDialect(doc any) bool {
	m, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	d, ok := m["$schema"]
	if !ok {
		return false
	}
	uri, ok := d.(string)
	return !ok || !isDraft2020(uri)
}

// compileFast compiles doc at depth, or returns nil.
func compileFast(doc any, depth int) *Fast {
	if depth > maxFastDepth {
		return nil
	}
	switch d := doc.(type) {
	case bool:
		return &Fast{always: d, never: !d}
	case map[string]any:
		f := &Fast{maxLen: -1, maxItems: -1}
		for k, v := range d {
			if !f.keyword(k, v, depth) {
				return nil
			}
		}
		return f
	}
	return nil
}

// keyword compiles one keyword of a schema object into f.
func (f *Fast) keyword(k string, v any, depth int) bool {
	sub := func(v any) (*Fast, bool) {
		f := compileFast(v, depth+1)
		return f, f != nil
	}
	list := func(v any) ([]*Fast, bool) {
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			return nil, false
		}
		out := make([]*Fast, len(a))
		for i, s := range a {
			if out[i], ok = sub(s); !ok {
				return nil, false
			}
		}
		return out, true
	}
	var ok bool
	switch k {
	case "$defs":
		return true
	case "$schema":
		d, _ := v.(string)
		return isDraft2020(d)
	case "type":
		names, isList := v.([]any)
		if !isList {
			names = []any{v}
		}
		for _, n := range names {
			s, _ := n.(string)
			kd, known := typeKinds[s]
			if !known {
				return false
			}
			f.types |= kd
		}
		return f.types != 0
	case "enum", "const":
		vals, isList := v.([]any)
		if k == "const" {
			vals, isList = []any{v}, true
		}
		if !isList {
			return false
		}
		strs := make([]string, len(vals))
		for i, x := range vals {
			s, isStr := x.(string)
			if !isStr {
				return false
			}
			strs[i] = s
		}
		f.strs = append(f.strs, strs)
		return true
	case "required":
		a, isList := v.([]any)
		if !isList {
			return false
		}
		for _, x := range a {
			s, isStr := x.(string)
			if !isStr {
				return false
			}
			f.required = append(f.required, s)
		}
		return true
	case "properties":
		m, isMap := v.(map[string]any)
		if !isMap {
			return false
		}
		f.props = make(map[string]*Fast, len(m))
		for name, s := range m {
			if f.props[name], ok = sub(s); !ok {
				return false
			}
		}
		return true
	case "additionalProperties":
		f.extra, ok = sub(v)
		return ok
	case "minLength":
		f.minLen, ok = count(v)
		return ok
	case "maxLength":
		f.maxLen, ok = count(v)
		return ok
	case "minItems":
		f.minItems, ok = count(v)
		return ok
	case "maxItems":
		f.maxItems, ok = count(v)
		return ok
	case "pattern":
		s, isStr := v.(string)
		if !isStr {
			return false
		}
		re, err := regexp.Compile(s)
		if err != nil {
			return false
		}
		f.pattern = re
		return true
	case "items":
		f.items, ok = sub(v)
		return ok
	case "allOf":
		f.allOf, ok = list(v)
		return ok
	case "anyOf":
		f.anyOf, ok = list(v)
		return ok
	case "oneOf":
		f.oneOf, ok = list(v)
		return ok
	case "not":
		f.not, ok = sub(v)
		return ok
	}
	return annotations[k]
}

// count reads a keyword's non-negative integer, written as one (5, not
// 5.0), up to maxCount.
func count(v any) (int, bool) {
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false
	}
	i, err := strconv.Atoi(string(n))
	return i, err == nil && i >= 0 && i <= maxCount
}

// Valid reports whether v, decoded JSON (objects as map[string]any,
// arrays as []any), is valid against f's schema.
func (f *Fast) Valid(v any) bool {
	if f.always {
		return true
	}
	if f.never || f.types != 0 && f.types&kindOf(v) == 0 {
		return false
	}
	for _, strs := range f.strs {
		if s, ok := v.(string); !ok || !slices.Contains(strs, s) {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		if f.minLen > 0 && !atLeastRunes(x, f.minLen) || f.maxLen >= 0 && atLeastRunes(x, f.maxLen+1) {
			return false
		}
		if f.pattern != nil && !f.pattern.MatchString(x) {
			return false
		}
	case map[string]any:
		for _, name := range f.required {
			if _, ok := x[name]; !ok {
				return false
			}
		}
		if f.props != nil || f.extra != nil {
			for name, mv := range x {
				s, ok := f.props[name]
				if !ok {
					s = f.extra
				}
				if s != nil && !s.Valid(mv) {
					return false
				}
			}
		}
	case []any:
		if len(x) < f.minItems || f.maxItems >= 0 && len(x) > f.maxItems {
			return false
		}
		if f.items != nil {
			for _, it := range x {
				if !f.items.Valid(it) {
					return false
				}
			}
		}
	}
	for _, s := range f.allOf {
		if !s.Valid(v) {
			return false
		}
	}
	if f.anyOf != nil && !anyValid(f.anyOf, v) {
		return false
	}
	if f.oneOf != nil && countValid(f.oneOf, v) != 1 {
		return false
	}
	return f.not == nil || !f.not.Valid(v)
}

// anyValid reports whether v is valid against one of fs at least.
func anyValid(fs []*Fast, v any) bool {
	for _, s := range fs {
		if s.Valid(v) {
			return true
		}
	}
	return false
}

// countValid returns how many of fs v is valid against.
func countValid(fs []*Fast, v any) int {
	n := 0
	for _, s := range fs {
		if s.Valid(v) {
			n++
		}
	}
	return n
}

// atLeastRunes reports whether s has at least n characters (code points,
// as JSON Schema counts a string's length; an invalid byte counts as one,
// as the library counts it).
func atLeastRunes(s string, n int) bool {
	if len(s) < n {
		return false
	}
	if len(s) >= n*utf8.UTFMax {
		return true
	}
	return utf8.RuneCountInString(s) >= n
}
