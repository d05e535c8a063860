package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects [Canonicalize]
// accepts: a top-level object holding MaxDepth-1 nested containers is fine,
// one more is [ErrTooDeep].
const MaxDepth = 64

// maxSafeDigits is 2^53 in decimal; integer literals are compared with it as
// strings so that huge literals never go through float conversion.
const maxSafeDigits = "9007199254740992"

// sortedInsertMax is the member count up to which an object's members are
// kept sorted as they are read; larger objects use a map to find duplicate
// keys and sort once at the end.
const sortedInsertMax = 128

// Canonicalize parses the JSON text raw and returns its RFC 8785 (JCS)
// canonical form: no insignificant whitespace, object members sorted by the
// UTF-16 code units of their keys, strings with the minimal escapes, numbers
// as [FormatNumber] writes them. Whitespace around the value is allowed;
// anything else after it is a syntax error.
//
// Input that cannot be canonicalized without losing information is refused,
// never repaired: the error is a [*CanonError] wrapping ErrSyntax,
// ErrDuplicateKey, ErrInvalidUTF8, ErrLoneSurrogate, ErrNonFinite,
// ErrUnsafeInteger or ErrTooDeep. The first problem in document order is
// reported.
//
// Numbers are IEEE doubles. An integer literal (no fraction or exponent)
// beyond 2^53 in magnitude is refused with ErrUnsafeInteger, because the
// double would round it (12345678901234567890, -9007199254740993), unless
// it is written exactly as the canonical form of its double, digit for digit
// (100000000000000000000): that text round-trips unchanged, and it is what
// Canonicalize itself writes for 1e20, so output is always valid input.
// Numbers written with a fraction or exponent are accepted as doubles
// whatever their size, unless they overflow to ±Infinity (ErrNonFinite).
//
// The output is a new slice; raw is not modified or retained.
// Canonicalize(Canonicalize(x)) == Canonicalize(x) for every accepted x.
func Canonicalize(raw []byte) ([]byte, error) {
	return canonicalize(raw, false)
}

// CanonicalizeObject is [Canonicalize] for data that must be a JSON object,
// such as an artifact's data or an edge's attrs. Valid JSON whose top-level
// value is an array, string, number, boolean or null is refused with
// [ErrNotObject]; invalid JSON gets the error Canonicalize gives.
func CanonicalizeObject(raw []byte) ([]byte, error) {
	return canonicalize(raw, true)
}

// ErrNotCanonicalForm is [CheckCanonicalObject]'s error for a JSON object
// that canonicalizes, to other bytes.
var ErrNotCanonicalForm = errors.New("not in canonical form (HASHING.md §1)")

// CheckCanonicalObject reports whether raw is a JSON object written in
// exactly its canonical form, as HASHING.md §2 hashes it: nil, the error
// [CanonicalizeObject] gives, or [ErrNotCanonicalForm] (keys out of order,
// a number or string written another way, whitespace).
func CheckCanonicalObject(raw []byte) error {
	c, err := CanonicalizeObject(raw)
	if err != nil {
		return err
	}
	if !bytes.Equal(c, raw) {
		return ErrNotCanonicalForm
	}
	return nil
}

// Marshal returns the canonical JSON of v: encoding/json's Marshal followed
// by [Canonicalize]. Errors are those of either step; in particular an int64
// or uint64 beyond 2^53 is refused with [ErrUnsafeInteger] unless a double
// holds it digit for digit (as it does 10^18), so big ids belong in strings.
// Invalid UTF-8 in Go strings is replaced with U+FFFD by encoding/json, not
// refused.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(raw)
}

func canonicalize(raw []byte, wantObject bool) ([]byte, error) {
	c := canonicalizer{in: raw, out: make([]byte, 0, len(raw)+16)}
	c.keys = c.keysBuf[:0]
	c.members = c.membersBuf[:0]
	c.path = c.pathBuf[:0]
	c.skipSpace()
	start := c.pos
	if err := c.value(0); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return nil, c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s after the top-level value at byte %d", describeByte(c.in[c.pos]), c.pos)
	}
	if wantObject && raw[start] != '{' {
		return nil, c.errorf(ErrNotObject, start, "top-level value is %s; a JSON object is required", kindOf(raw[start]))
	}
	return c.out, nil
}

// canonicalizer is the state of one Canonicalize call. It writes canonical
// output while it parses; an object's members are written in input order and
// permuted into key order when the object closes.
type canonicalizer struct {
	in  []byte
	pos int // next input byte
	out []byte

	// keys holds the decoded keys of the members of every open object, as a
	// stack: an object truncates it back when it closes.
	keys []byte
	// members is the stack of members of every open object, likewise.
	members []member
	// path locates the value being parsed, for error pointers.
	path []pathElem
	// scratch is used while permuting an object's members.
	scratch []byte

	// Initial backing arrays, so small documents need no growth.
	keysBuf    [128]byte
	membersBuf [16]member
	pathBuf    [8]pathElem
}

// member is one object member: its decoded key in keys and its canonical
// `"key":value` bytes in out.
type member struct {
	keyStart, keyEnd int
	outStart, outEnd int
}

// pathElem is one step of a JSON pointer: an object key (as a range of
// canonicalizer.keys) or an array index.
type pathElem struct {
	isKey            bool
	keyStart, keyEnd int
	index            int
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value parses one JSON value at c.pos (no leading space) and appends its
// canonical form. depth is the number of containers already open.
func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.unexpectedEnd("a value")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str(false)
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	default:
		return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want a value", describeByte(b), c.pos)
	}
}

func (c *canonicalizer) literal(word string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(word)) {
		return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want a value", describeByte(c.in[c.pos]), c.pos)
	}
	c.pos += len(word)
	c.out = append(c.out, word...)
	return nil
}

func (c *canonicalizer) object(depth int) error {
	if depth > MaxDepth {
		return c.errorf(ErrTooDeep, c.pos, "arrays and objects nested deeper than %d levels", MaxDepth)
	}
	c.pos++ // '{'
	c.out = append(c.out, '{')
	bodyStart := len(c.out)
	memBase, keyBase := len(c.members), len(c.keys)
	defer func() {
		c.members = c.members[:memBase]
		c.keys = c.keys[:keyBase]
	}()

	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}

	// c.members[memBase:] is kept sorted by key while the object is small,
	// which finds duplicates by binary search and leaves the members in
	// output order. A large object switches to a map for duplicates and
	// sorts once at the end.
	inOrder := true   // input order is key order: no permutation needed
	needSort := false // map mode appended a member out of order
	var seen map[string]struct{}
	for {
		if c.pos >= len(c.in) {
			return c.unexpectedEnd("an object key")
		}
		if c.in[c.pos] != '"' {
			return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want a string key", describeByte(c.in[c.pos]), c.pos)
		}
		n := len(c.members) - memBase
		if n > 0 {
			c.out = append(c.out, ',')
		}
		keyAt, outStart, keyStart := c.pos, len(c.out), len(c.keys)
		if err := c.str(true); err != nil {
			return err
		}
		key := c.keys[keyStart:]

		// Where the member goes, and whether the key is a duplicate; checked
		// before the value so the first problem in the input is reported.
		ms := c.members[memBase:]
		at, dup := n, false
		switch {
		case n == 0:
		case seen == nil && n >= sortedInsertMax:
			seen = make(map[string]struct{}, 2*n)
			for _, m := range ms {
				seen[string(c.keys[m.keyStart:m.keyEnd])] = struct{}{}
			}
			fallthrough
		case seen != nil:
			if _, dup = seen[string(key)]; !dup {
				seen[string(key)] = struct{}{}
				last := ms[n-1]
				if compareUTF16(c.keys[last.keyStart:last.keyEnd], key) > 0 {
					inOrder, needSort = false, true
				}
			}
		default:
			last := ms[n-1]
			if compareUTF16(c.keys[last.keyStart:last.keyEnd], key) < 0 {
				break // the common case: keys arrive sorted
			}
			at, dup = slices.BinarySearchFunc(ms, key, func(m member, k []byte) int {
				return compareUTF16(c.keys[m.keyStart:m.keyEnd], k)
			})
			inOrder = false
		}
		c.path = append(c.path, pathElem{isKey: true, keyStart: keyStart, keyEnd: len(c.keys)})
		if dup {
			return c.errorf(ErrDuplicateKey, keyAt, "duplicate key %s; each key may appear once per object", strconv.Quote(string(key)))
		}

		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.unexpectedEnd("':'")
		}
		if c.in[c.pos] != ':' {
			return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want ':'", describeByte(c.in[c.pos]), c.pos)
		}
		c.pos++
		c.out = append(c.out, ':')
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		// Nested objects have truncated c.members back to this object's.
		c.members = slices.Insert(c.members, memBase+at, member{keyStart: keyStart, keyEnd: len(c.keys), outStart: outStart, outEnd: len(c.out)})

		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.unexpectedEnd("',' or '}'")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.skipSpace()
			continue
		case '}':
			c.pos++
		default:
			return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want ',' or '}'", describeByte(c.in[c.pos]), c.pos)
		}
		break
	}

	if !inOrder {
		ms := c.members[memBase:]
		if needSort {
			slices.SortFunc(ms, func(a, b member) int {
				return compareUTF16(c.keys[a.keyStart:a.keyEnd], c.keys[b.keyStart:b.keyEnd])
			})
		}
		c.scratch = append(c.scratch[:0], c.out[bodyStart:]...)
		c.out = c.out[:bodyStart]
		for i, m := range ms {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.scratch[m.outStart-bodyStart:m.outEnd-bodyStart]...)
		}
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > MaxDepth {
		return c.errorf(ErrTooDeep, c.pos, "arrays and objects nested deeper than %d levels", MaxDepth)
	}
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.path = append(c.path, pathElem{index: i})
		if err := c.value(depth); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.unexpectedEnd("',' or ']'")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.skipSpace()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errorf(ErrSyntax, c.pos, "invalid JSON: unexpected %s at byte %d; want ',' or ']'", describeByte(c.in[c.pos]), c.pos)
		}
	}
}

// str parses the string at c.pos and appends its canonical form to out; for
// a key it also appends the decoded UTF-8 text to keys.
func (c *canonicalizer) str(isKey bool) error {
	c.pos++ // opening quote
	c.out = append(c.out, '"')
	run := c.pos // start of bytes copied unchanged
	flush := func() {
		c.out = append(c.out, c.in[run:c.pos]...)
		if isKey {
			c.keys = append(c.keys, c.in[run:c.pos]...)
		}
	}
	for {
		if c.pos >= len(c.in) {
			return c.unexpectedEnd("the end of the string")
		}
		b := c.in[c.pos]
		switch {
		case b == '"':
			flush()
			c.pos++
			c.out = append(c.out, '"')
			return nil
		case b == '\\':
			flush()
			r, err := c.escape()
			if err != nil {
				return err
			}
			c.out = appendStringRune(c.out, r)
			if isKey {
				c.keys = utf8.AppendRune(c.keys, r)
			}
			run = c.pos
		case b < 0x20:
			return c.errorf(ErrSyntax, c.pos, "invalid JSON: control character U+%04X at byte %d must be escaped in a string", b, c.pos)
		case b < utf8.RuneSelf:
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && size == 1 {
				return c.errorf(ErrInvalidUTF8, c.pos, "invalid UTF-8 byte 0x%02x at byte %d in a string; send text as UTF-8", b, c.pos)
			}
			c.pos += size
		}
	}
}

// escape decodes the escape sequence at c.pos (a backslash), combining a
// surrogate pair, and advances past it.
func (c *canonicalizer) escape() (rune, error) {
	at := c.pos
	if at+1 >= len(c.in) {
		return 0, c.unexpectedEnd("an escape sequence")
	}
	var r rune
	switch c.in[at+1] {
	case '"':
		r = '"'
	case '\\':
		r = '\\'
	case '/':
		r = '/'
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		u, err := c.hex4(at)
		if err != nil {
			return 0, err
		}
		c.pos = at + 6
		switch {
		case 0xDC00 <= u && u <= 0xDFFF:
			return 0, c.errorf(ErrLoneSurrogate, at, "lone UTF-16 surrogate \\u%04x at byte %d (a low surrogate without a high one); it cannot be represented in UTF-8", u, at)
		case 0xD800 <= u && u <= 0xDBFF:
			next := c.pos
			if next+1 < len(c.in) && c.in[next] == '\\' && c.in[next+1] == 'u' {
				lo, err := c.hex4(next)
				if err != nil {
					return 0, err
				}
				if 0xDC00 <= lo && lo <= 0xDFFF {
					c.pos = next + 6
					return 0x10000 + (u-0xD800)<<10 + (lo - 0xDC00), nil
				}
			}
			return 0, c.errorf(ErrLoneSurrogate, at, "lone UTF-16 surrogate \\u%04x at byte %d (a high surrogate not followed by a low one); it cannot be represented in UTF-8", u, at)
		}
		return u, nil
	default:
		return 0, c.errorf(ErrSyntax, at, "invalid JSON: invalid escape \\%s at byte %d", printable(c.in[at+1]), at)
	}
	c.pos = at + 2
	return r, nil
}

// hex4 decodes the four hex digits of the \u escape starting at at.
func (c *canonicalizer) hex4(at int) (rune, error) {
	if at+6 > len(c.in) {
		return 0, c.unexpectedEnd("four hex digits of a \\u escape")
	}
	var r rune
	for i := at + 2; i < at+6; i++ {
		v, ok := hexValue(c.in[i])
		if !ok {
			return 0, c.errorf(ErrSyntax, i, "invalid JSON: invalid \\u escape at byte %d; want four hex digits", at)
		}
		r = r<<4 | v
	}
	return r, nil
}

// hexValue returns the value of the hex digit b, either case.
func hexValue(b byte) (rune, bool) {
	switch {
	case '0' <= b && b <= '9':
		return rune(b - '0'), true
	case 'a' <= b && b <= 'f':
		return rune(b-'a') + 10, true
	case 'A' <= b && b <= 'F':
		return rune(b-'A') + 10, true
	}
	return 0, false
}

// number parses a number at c.pos and appends its canonical form.
func (c *canonicalizer) number() error {
	start := c.pos
	p := c.pos
	in := c.in
	digitsAt := func() bool { return p < len(in) && '0' <= in[p] && in[p] <= '9' }
	bad := func(want string) error {
		if p >= len(in) {
			return c.unexpectedEnd(want)
		}
		return c.errorf(ErrSyntax, p, "invalid JSON: invalid number at byte %d: unexpected %s; want %s", p, describeByte(in[p]), want)
	}
	if in[p] == '-' {
		p++
	}
	switch {
	case p < len(in) && in[p] == '0':
		p++
	case digitsAt():
		for digitsAt() {
			p++
		}
	default:
		return bad("a digit")
	}
	intEnd := p
	isInt := true
	if p < len(in) && in[p] == '.' {
		isInt = false
		p++
		if !digitsAt() {
			return bad("a digit after '.'")
		}
		for digitsAt() {
			p++
		}
	}
	if p < len(in) && (in[p] == 'e' || in[p] == 'E') {
		isInt = false
		p++
		if p < len(in) && (in[p] == '+' || in[p] == '-') {
			p++
		}
		if !digitsAt() {
			return bad("a digit in the exponent")
		}
		for digitsAt() {
			p++
		}
	}
	c.pos = p
	lit := in[start:p]

	if isInt {
		mag := in[start:intEnd]
		if mag[0] == '-' {
			mag = mag[1:]
		}
		if len(mag) < len(maxSafeDigits) || len(mag) == len(maxSafeDigits) && string(mag) <= maxSafeDigits {
			// A safe integer literal is already canonical, except "-0".
			if string(lit) == "-0" {
				c.out = append(c.out, '0')
			} else {
				c.out = append(c.out, lit...)
			}
			return nil
		}
		// Beyond 2^53 an integer literal survives only if it is exactly the
		// canonical form of the double it denotes (as Canonicalize writes
		// 1e20 or 6.766371305466666e16), so that canonical output is always
		// accepted again and nothing the client wrote is changed.
		f, err := strconv.ParseFloat(string(lit), 64)
		var buf [32]byte
		if err != nil || math.IsInf(f, 0) || !bytes.Equal(appendNumber(buf[:0], f), lit) {
			return c.errorf(ErrUnsafeInteger, start, "integer %s exceeds 2^53; send it as a string", shorten(lit))
		}
		c.out = append(c.out, lit...)
		return nil
	}

	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		// The grammar above is stricter than ParseFloat's, so the only
		// possible failure is overflow.
		return c.errorf(ErrNonFinite, start, "number %s is too large for a double (it would be Infinity); send it as a string", shorten(lit))
	}
	c.out = appendNumber(c.out, f)
	return nil
}

func (c *canonicalizer) unexpectedEnd(want string) error {
	return c.errorf(ErrSyntax, len(c.in), "invalid JSON: unexpected end of input at byte %d; want %s", len(c.in), want)
}

// errorf returns a *CanonError for the value at the current path.
func (c *canonicalizer) errorf(sentinel error, offset int, format string, args ...any) error {
	return &CanonError{
		Pointer: c.pointer(),
		Offset:  offset,
		Err:     sentinel,
		Detail:  fmt.Sprintf(format, args...),
	}
}

// pointer renders c.path as an RFC 6901 JSON pointer.
func (c *canonicalizer) pointer() string {
	var b strings.Builder
	for _, e := range c.path {
		b.WriteByte('/')
		if !e.isKey {
			b.WriteString(strconv.Itoa(e.index))
			continue
		}
		for _, ch := range c.keys[e.keyStart:e.keyEnd] {
			switch ch {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(ch)
			}
		}
	}
	return b.String()
}

// appendStringRune appends r as it appears inside a canonical JSON string:
// the two-character escapes JCS requires, \u00xx for other controls, and
// the raw UTF-8 for everything else.
func appendStringRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// appendString appends s as a canonical JSON string. Invalid UTF-8 in s is
// written as U+FFFD, as encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b < utf8.RuneSelf && b != '"' && b != '\\' {
			dst = append(dst, b)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		dst = appendStringRune(dst, r)
		i += size
	}
	return append(dst, '"')
}

// compareUTF16 compares two UTF-8 strings by their UTF-16 code units, the
// key order of RFC 8785. It differs from bytewise order only where one
// string has a supplementary character (4-byte UTF-8, a surrogate pair in
// UTF-16) and the other a character in U+E000..U+FFFF at the same place:
// UTF-16 puts the surrogate pair (0xD800..0xDBFF) first.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		// The strings agree up to here, so x and y are at the same position
		// in the same character (continuation bytes, same order in both
		// encodings) or both start a character. Lead bytes 0xEE..0xEF start
		// U+E000..U+FFFF; 0xF0..0xF4 start supplementary characters.
		if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
			if x >= 0xF0 {
				return -1
			}
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// describeByte names an unexpected input byte for an error message.
func describeByte(b byte) string {
	if b >= 0x20 && b < 0x7F {
		return fmt.Sprintf("character %q", rune(b))
	}
	return fmt.Sprintf("byte 0x%02x", b)
}

func printable(b byte) string {
	if b >= 0x20 && b < 0x7F {
		return string(rune(b))
	}
	return fmt.Sprintf("<0x%02x>", b)
}

// kindOf names the JSON type of a value from its first byte.
func kindOf(b byte) string {
	switch b {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// shorten cuts a very long literal for an error message.
func shorten(lit []byte) string {
	const limit = 40
	if len(lit) > limit {
		return string(lit[:limit]) + "..."
	}
	return string(lit)
}
