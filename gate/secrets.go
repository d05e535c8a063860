package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MinSecretChars is the shortest value [NewSecrets] accepts: a shorter one
// would mask ordinary words wherever they appear.
const MinSecretChars = 8

// MaxSecrets bounds how many values one [Secrets] holds.
const MaxSecrets = 4096

// SecretMarker replaces every occurrence of a declared secret. It is fixed
// (it says nothing about the value, not even its length) and shorter than
// any declared value, so masking never lengthens a text.
const SecretMarker = "***"

// ErrBadSecret marks a value [NewSecrets] refuses; the error (a
// *SecretError) names its index in the list, never the value.
var ErrBadSecret = errors.New("invalid secret")

// SecretError is a value [NewSecrets] or [Secrets.Add] refuses: Index is
// its position in the list given, Reason the rule it breaks. It wraps
// [ErrBadSecret] and never holds the value.
type SecretError struct {
	Index  int
	Reason string
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("secret %d: invalid secret: %s", e.Index, e.Reason)
}

// Unwrap returns ErrBadSecret.
func (e *SecretError) Unwrap() error { return ErrBadSecret }

// Secrets is a set of literal values an operator declared secret (a loaded
// credential, a database password): values with no recognisable shape that
// [MaskSecrets] cannot find by itself. [Secrets.Mask] replaces each
// occurrence, and each occurrence of its URL-escaped and JSON-escaped
// forms, by [SecretMarker]. The zero value holds no secrets and masks
// nothing. A Secrets is immutable: [Secrets.Add] returns a new one, so it is
// safe for concurrent use and cheap to copy into [SanitizeOptions].
type Secrets struct {
	// forms holds every value and its escaped forms, longest first, without
	// duplicates.
	forms []string
	n     int // declared values
}

// NewSecrets builds a set from literal values. Surrounding whitespace of a
// value is not part of it (a value read from a file line). It returns an
// *SecretError (wrapping [ErrBadSecret]) naming the value's index, when a value is
// shorter than [MinSecretChars] characters, not valid UTF-8, holds a line
// break, or when there are more than [MaxSecrets] values; duplicates are
// merged.
func NewSecrets(values []string) (Secrets, error) {
	return Secrets{}.Add(values...)
}

// Add returns a set holding s's values and values (see [NewSecrets] for the
// rules and errors); s itself is unchanged.
func (s Secrets) Add(values ...string) (Secrets, error) {
	seen := make(map[string]bool, len(s.forms)+3*len(values))
	forms := append([]string(nil), s.forms...)
	for _, f := range forms {
		seen[f] = true
	}
	n := s.n
	for i, v := range values {
		// A byte-order mark is not part of a value (a secrets file saved
		// by an editor that writes one).
		v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "\ufeff"))
		switch {
		case !utf8.ValidString(v):
			return Secrets{}, &SecretError{i, "not valid UTF-8"}
		case strings.ContainsAny(v, "\r\n"):
			return Secrets{}, &SecretError{i, "holds a line break"}
		case utf8.RuneCountInString(v) < MinSecretChars:
			return Secrets{}, &SecretError{i, fmt.Sprintf("shorter than %d characters", MinSecretChars)}
		}
		if seen[v] {
			continue
		}
		n++
		if n > MaxSecrets {
			return Secrets{}, &SecretError{i, fmt.Sprintf("more than %d secrets", MaxSecrets)}
		}
		for _, f := range secretForms(v) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	sort.Slice(forms, func(i, j int) bool {
		if len(forms[i]) != len(forms[j]) {
			return len(forms[i]) > len(forms[j])
		}
		return forms[i] < forms[j]
	})
	return Secrets{forms: forms, n: n}, nil
}

// secretForms returns a value and the forms it takes inside URLs and JSON
// strings, as the usual encoders write them: Go's and Python's query and
// path escapes (Python's quote escapes '+' and '=' and keeps '/'), and the
// inside of a JSON string from Go (&, <, > as \u00XX), from an encoder
// that escapes every character past ASCII (Python's json.dumps: \u00e4,
// or \u00E4) and from one that also escapes '/' (PHP's json_encode).
func secretForms(v string) []string {
	out := []string{v, url.QueryEscape(v), url.PathEscape(v), percentEscape(v, false), percentEscape(v, true)}
	q := strconv.Quote(v)
	out = append(out, q[1:len(q)-1])
	js := []string{jsonASCII(v, "%04x"), jsonASCII(v, "%04X")}
	if b, err := json.Marshal(v); err == nil {
		js = append(js, string(b[1:len(b)-1]))
	}
	for _, f := range js {
		out = append(out, f, strings.ReplaceAll(f, "/", `\/`))
	}
	return out
}

// percentEscape escapes every byte of v but the unreserved characters of
// RFC 3986 (and '/' when keepSlash) as %XX.
func percentEscape(v string, keepSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~', keepSlash && c == '/':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsonASCII is the inside of a JSON string of v as an encoder that
// escapes every character past ASCII writes it: those as \u escapes
// (pairs past U+FFFF) in hex format hexFmt, '"', '\\' and the controls
// escaped, everything else as it is.
func jsonASCII(v, hexFmt string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e && r <= 0xFFFF:
			fmt.Fprintf(&b, `\u`+hexFmt, r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u`+hexFmt+`\u`+hexFmt, hi, lo)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Len returns the number of distinct values declared.
func (s Secrets) Len() int { return s.n }

// Mask returns text with every occurrence of a declared value (or of its
// URL- or JSON-escaped form) replaced by [SecretMarker]. Overlapping
// occurrences are masked as one. It runs in time proportional to the text
// length times the number of forms, never lengthens text, and is
// idempotent.
func (s Secrets) Mask(text string) string {
	if len(s.forms) == 0 || len(text) < MinSecretChars {
		return text
	}
	var spans [][2]int
	for _, f := range s.forms {
		for off := 0; off < len(text); {
			i := strings.Index(text[off:], f)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{off + i, off + i + len(f)})
			off += i + 1
		}
	}
	if len(spans) == 0 {
		return text
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for k := 0; k < len(spans); {
		start, end := spans[k][0], spans[k][1]
		for k++; k < len(spans) && spans[k][0] < end; k++ {
			if spans[k][1] > end {
				end = spans[k][1]
			}
		}
		b.WriteString(text[last:start])
		b.WriteString(SecretMarker)
		last = end
	}
	b.WriteString(text[last:])
	return b.String()
}
