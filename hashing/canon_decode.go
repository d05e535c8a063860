package hashing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodeCanonical decodes canon, a JSON text [Canonicalize] returned, into
// the generic value encoding/json's Decoder gives with UseNumber: objects
// as map[string]any, arrays as []any, numbers as [json.Number] (their
// canonical text), strings, booleans and nil. It is how a request body
// already canonicalized is handed to a JSON Schema validator without
// being parsed a third time by encoding/json, which for a 5,000-artifact
// commit costs several times the canonicalization itself
// (BenchmarkDecodeCanonical).
//
// It relies on what Canonicalize guarantees — well-formed JSON, valid
// UTF-8, no duplicate keys, nesting within [MaxDepth] — and checks only
// enough to never panic on other input: text that is not such a document
// gets an error wrapping [ErrSyntax] or [ErrTooDeep], though not every
// malformed text is caught (a string's invalid UTF-8 is kept as it is).
//
// The value shares no memory with canon: a caller may keep any part of
// it (an artifact's id in a cache) without keeping the whole body alive.
func DecodeCanonical(canon []byte) (any, error) {
	d := decoder{s: canon}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.pos != len(d.s) {
		return nil, d.errorf(ErrSyntax, "unexpected %s after the value", describeByte(d.s[d.pos]))
	}
	return v, nil
}

// decoder is the state of one DecodeCanonical call.
type decoder struct {
	s   []byte
	pos int
	// keys holds each object key decoded so far, so that the members a
	// request repeats thousands of times ("op", "id", "data") are one
	// string each, not one allocation each.
	keys map[string]string
}

func (d *decoder) errorf(sentinel error, format string, args ...any) error {
	return &CanonError{Err: sentinel, Offset: d.pos, Detail: fmt.Sprintf(format, args...)}
}

// value decodes the value at pos, inside depth open containers.
func (d *decoder) value(depth int) (any, error) {
	if d.pos >= len(d.s) {
		return nil, d.errorf(ErrSyntax, "unexpected end of input, expected a value")
	}
	switch c := d.s[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		b, err := d.str()
		if err != nil {
			return nil, err
		}
		return string(b), nil
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		start := d.pos
		for d.pos < len(d.s) && strings.IndexByte("+-.0123456789eE", d.s[d.pos]) >= 0 {
			d.pos++
		}
		return json.Number(d.s[start:d.pos]), nil // a copy
	default:
		return nil, d.errorf(ErrSyntax, "unexpected %s, expected a value", describeByte(c))
	}
}

func (d *decoder) literal(word string) error {
	if !bytes.HasPrefix(d.s[d.pos:], []byte(word)) {
		return d.errorf(ErrSyntax, "invalid literal, expected %s", word)
	}
	d.pos += len(word)
	return nil
}

// expect consumes byte c or fails naming what was wanted.
func (d *decoder) expect(c byte, want string) error {
	if d.pos >= len(d.s) {
		return d.errorf(ErrSyntax, "unexpected end of input, expected %s", want)
	}
	if d.s[d.pos] != c {
		return d.errorf(ErrSyntax, "unexpected %s, expected %s", describeByte(d.s[d.pos]), want)
	}
	d.pos++
	return nil
}

func (d *decoder) object(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, d.errorf(ErrTooDeep, "nesting deeper than %d", MaxDepth)
	}
	d.pos++ // '{'
	m := make(map[string]any)
	if d.pos < len(d.s) && d.s[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		if d.pos >= len(d.s) || d.s[d.pos] != '"' {
			return nil, d.expect('"', "an object key")
		}
		k, err := d.key()
		if err != nil {
			return nil, err
		}
		if err := d.expect(':', "':'"); err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		if d.pos < len(d.s) && d.s[d.pos] == ',' {
			d.pos++
			continue
		}
		return m, d.expect('}', "',' or '}'")
	}
}

func (d *decoder) array(depth int) (any, error) {
	if depth > MaxDepth {
		return nil, d.errorf(ErrTooDeep, "nesting deeper than %d", MaxDepth)
	}
	d.pos++ // '['
	a := []any{}
	if d.pos < len(d.s) && d.s[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if d.pos < len(d.s) && d.s[d.pos] == ',' {
			d.pos++
			continue
		}
		return a, d.expect(']', "',' or ']'")
	}
}

// key decodes the object key at pos, as the string the document holds
// for that key already when there is one.
func (d *decoder) key() (string, error) {
	b, err := d.str()
	if err != nil {
		return "", err
	}
	if k, ok := d.keys[string(b)]; ok {
		return k, nil
	}
	if d.keys == nil {
		d.keys = make(map[string]string)
	}
	k := string(b)
	d.keys[k] = k
	return k, nil
}

// str decodes the string at pos; the bytes are the document's own when
// the string has no escapes (nearly all of them in canonical JSON, which
// escapes only '"', '\\' and control characters), and are to be copied
// before they are kept.
func (d *decoder) str() ([]byte, error) {
	d.pos++ // '"'
	start := d.pos
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case '"':
			d.pos++
			return d.s[start : d.pos-1], nil
		case '\\':
			return d.escaped(start)
		}
		d.pos++
	}
	return nil, d.errorf(ErrSyntax, "unexpected end of input in a string")
}

// escaped decodes the rest of a string from its first backslash at pos;
// the string began at start.
func (d *decoder) escaped(start int) ([]byte, error) {
	b := bytes.Clone(d.s[start:d.pos])
	for d.pos < len(d.s) {
		c := d.s[d.pos]
		switch {
		case c == '"':
			d.pos++
			return b, nil
		case c != '\\':
			b = append(b, c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.s) {
			break // a backslash at the end: the string never closes
		}
		e := d.s[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, d.errorf(ErrSyntax, "invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				lo, ok := rune(0), false
				if bytes.HasPrefix(d.s[d.pos:], []byte(`\u`)) {
					d.pos += 2
					lo, ok = d.hex4()
				}
				if r = utf16.DecodeRune(r, lo); !ok || r == utf8.RuneError {
					return nil, d.errorf(ErrLoneSurrogate, "lone surrogate in a \\u escape")
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return nil, d.errorf(ErrSyntax, "invalid escape \\%s", printable(e))
		}
	}
	return nil, d.errorf(ErrSyntax, "unexpected end of input in a string")
}

// hex4 reads the four hex digits of a \u escape at pos.
func (d *decoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, c := range d.s[d.pos : d.pos+4] {
		v, ok := hexValue(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | v
	}
	d.pos += 4
	return r, true
}

// AppendCanonical appends the canonical JSON of v, a value as
// [DecodeCanonical] returns it (map[string]any, []any, string,
// [json.Number], bool, nil), to dst: for a value DecodeCanonical read
// from canon, exactly the bytes of canon it was read from. It is how a
// door that decoded a canonical body takes the canonical bytes of a part
// of it (an artifact's data) without parsing the body again. A number
// must be in canonical form already (FormatNumber's), as DecodeCanonical
// gives it; another number, or a value of another type, is an error
// wrapping [ErrSyntax]. Nesting deeper than [MaxDepth] is [ErrTooDeep].
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	return appendCanonical(dst, v, 0)
}

func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendString(dst, x), nil
	case json.Number:
		if !canonicalNumber(string(x)) {
			return dst, &CanonError{Err: ErrSyntax, Detail: fmt.Sprintf("number %q is not in canonical form", shorten([]byte(x)))}
		}
		return append(dst, x...), nil
	case []any:
		if depth >= MaxDepth {
			return dst, &CanonError{Err: ErrTooDeep, Detail: fmt.Sprintf("nesting deeper than %d", MaxDepth)}
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendCanonical(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		if depth >= MaxDepth {
			return dst, &CanonError{Err: ErrTooDeep, Detail: fmt.Sprintf("nesting deeper than %d", MaxDepth)}
		}
		var small [8]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return compareUTF16([]byte(a), []byte(b)) })
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendString(dst, k), ':')
			var err error
			if dst, err = appendCanonical(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, &CanonError{Err: ErrSyntax, Detail: fmt.Sprintf("a value of type %T has no JSON form here", v)}
}

// canonicalNumber reports whether s is a number as FormatNumber writes
// it.
func canonicalNumber(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) { // ParseFloat takes "NaN", "Inf"
		return false
	}
	var buf [32]byte
	return string(appendNumber(buf[:0], f)) == s
}
