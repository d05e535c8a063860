package graph

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/artifactd/artifactd/hashing"
)

// AppendCanonicalOp appends the recorded form of o (see Op) as canonical
// JSON (RFC 8785) to b: members in key order, strings with the minimal
// escapes and each invalid UTF-8 byte as U+FFFD (as encoding/json writes
// it), attrs as their canonical object. It is the fast path behind
// OpsHash; TestAppendCanonicalOpMatchesSlowPath keeps it equal to
// canonicalizing encoding/json's output.
func AppendCanonicalOp(b []byte, o *Op) ([]byte, error) {
	switch o.Op {
	case OpPut:
		if o.Version > 1<<53 || o.Version < -(1<<53) {
			return nil, fmt.Errorf("version %d is beyond 2^53", o.Version)
		}
		b = append(b, `{"content_hash":"sha256:`...)
		b = hex.AppendEncode(b, o.ContentHash[:])
		b = append(b, `","id":`...)
		b = appendCanonicalString(b, o.ID)
		b = append(b, `,"op":"put","produced_by":`...)
		b = appendCanonicalString(b, o.ProducedBy)
		b = append(b, `,"type":`...)
		b = appendCanonicalString(b, o.Type)
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, o.Version, 10)
		return append(b, '}'), nil
	case OpDelete:
		b = append(b, `{"id":`...)
		b = appendCanonicalString(b, o.ID)
		return append(b, `,"op":"delete"}`...), nil
	case OpLink, OpUnlink:
		b = append(b, '{')
		if o.Op == OpLink && !emptyAttrs(o.Attrs) {
			// Attrs of a resolved link are canonical already; anything else
			// goes through the canonicalizer.
			attrs, err := hashing.CanonicalizeObject(o.Attrs)
			if err != nil {
				return nil, err
			}
			b = append(b, `"attrs":`...)
			b = append(b, attrs...)
			b = append(b, ',')
		}
		b = append(b, `"from":`...)
		b = appendCanonicalString(b, o.From)
		b = append(b, `,"op":"`...)
		b = append(b, o.Op...)
		b = append(b, `","rel":`...)
		b = appendCanonicalString(b, o.Rel)
		b = append(b, `,"to":`...)
		b = appendCanonicalString(b, o.To)
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("unknown op %q", o.Op)
}

// appendCanonicalString appends s as an RFC 8785 string: '"' and '\\'
// escaped, control characters as \b \f \n \r \t or \u00xx, everything else
// as UTF-8, and each invalid byte as U+FFFD.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
		}
		b = append(b, s[run:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				const hexDigits = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				b = utf8.AppendRune(b, utf8.RuneError)
			}
		}
		i++
		run = i
	}
	b = append(b, s[run:]...)
	return append(b, '"')
}
