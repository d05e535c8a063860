package hashing

import (
	"errors"
	"strings"
)

// Sentinel errors of [Canonicalize]. Each is returned wrapped in a
// [*CanonError] that says where the problem is; test with errors.Is.
var (
	// ErrSyntax: the input is not JSON text (RFC 8259), including NaN,
	// Infinity, comments, trailing commas, raw control characters in strings
	// and data after the top-level value.
	ErrSyntax = errors.New("invalid JSON")
	// ErrDuplicateKey: an object has the same key twice (after decoding
	// escapes), so its meaning is ambiguous.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrInvalidUTF8: a string contains bytes that are not UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrLoneSurrogate: a \u escape names half of a UTF-16 surrogate pair
	// without the other half; no UTF-8 text can represent it.
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate")
	// ErrNonFinite: a number overflows float64 (it would become ±Infinity),
	// or FormatNumber was given NaN or ±Inf.
	ErrNonFinite = errors.New("number is not finite")
	// ErrUnsafeInteger: an integer literal beyond 2^53 in magnitude that
	// would not survive conversion to a double digit for digit; the client
	// should send it as a string.
	ErrUnsafeInteger = errors.New("integer exceeds 2^53")
	// ErrTooDeep: arrays and objects nested more than [MaxDepth] levels.
	ErrTooDeep = errors.New("nesting too deep")
	// ErrNotObject: [CanonicalizeObject] was given valid JSON whose
	// top-level value is not an object.
	ErrNotObject = errors.New("not a JSON object")
)

// CanonError is the error returned by [Canonicalize] and
// [CanonicalizeObject]. It wraps exactly one of the sentinels above.
type CanonError struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value ("" for the
	// top-level value). For a problem inside an object key it points at the
	// object; for a duplicate key it points at the second member.
	Pointer string
	// Offset is the byte offset in the input where the problem was found
	// (the start of the offending number, key, escape or byte; len(input)
	// for an unexpected end).
	Offset int
	// Err is the sentinel: ErrSyntax, ErrDuplicateKey, and so on.
	Err error
	// Detail says what is wrong and, where there is one, what to do instead.
	Detail string
}

// Error returns "<pointer>: <detail>", with "(root)" for the top-level
// value, e.g. `/id: integer 12345678901234567890 exceeds 2^53; send it as a
// string`.
func (e *CanonError) Error() string {
	var b strings.Builder
	if e.Pointer == "" {
		b.WriteString("(root)")
	} else {
		b.WriteString(e.Pointer)
	}
	b.WriteString(": ")
	switch {
	case e.Detail != "":
		b.WriteString(e.Detail)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString("canonical JSON error")
	}
	return b.String()
}

// Unwrap returns the sentinel, so errors.Is(err, ErrDuplicateKey) works.
func (e *CanonError) Unwrap() error { return e.Err }
