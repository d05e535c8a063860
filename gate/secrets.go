package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
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
// forms, also where a text writes some of their characters as HTML
// character references, by [SecretMarker]. The zero value holds no
// secrets and masks nothing. A Secrets is immutable: [Secrets.Add] returns
// a new one, so it is safe for concurrent use and cheap to copy into
// [SanitizeOptions].
type Secrets struct {
	// forms holds every value and its escaped forms, in byte order, without
	// duplicates.
	forms []string
	// groups holds forms, grouped by a shared prefix that Mask looks for
	// once per group; escaped those with a percent escape (%XX, upper-case
	// hex), which Mask also looks for where a text writes its escapes in
	// lower or mixed case; width is the length of the longest of those.
	groups, escaped []formGroup
	width           int
	// refWidth bounds the length of an occurrence of a form in a text
	// that writes its characters as HTML character references: the most
	// characters of a form times maxRefLen.
	refWidth int
	n        int // declared values
}

// formGroup is forms sharing prefix (at least minGroupPrefix bytes, or a
// single form that is its own prefix), in byte order.
type formGroup struct {
	prefix string
	forms  []string
}

// minGroupPrefix is the shortest prefix forms are grouped by: the escaped
// forms of a value share the value's bytes up to its first escaped one.
const minGroupPrefix = 4

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
	sort.Strings(forms)
	var escaped []string
	width, refWidth := 0, 0
	for _, f := range forms {
		if hasPercentEscape(f) {
			escaped = append(escaped, f)
			width = max(width, len(f))
		}
		refWidth = max(refWidth, utf8.RuneCountInString(f)*maxRefLen)
	}
	return Secrets{forms: forms, groups: groupForms(forms), escaped: groupForms(escaped), width: width, refWidth: refWidth, n: n}, nil
}

// groupForms groups forms by shared prefixes of at least minGroupPrefix
// bytes: in byte order, a form joins the group before it while the prefix
// they all share stays that long; forms must be in byte order.
func groupForms(forms []string) []formGroup {
	var groups []formGroup
	for _, f := range forms {
		if n := len(groups); n > 0 {
			g := &groups[n-1]
			if p := commonPrefix(g.prefix, f); len(p) >= minGroupPrefix {
				g.prefix = p
				g.forms = append(g.forms, f)
				continue
			}
		}
		groups = append(groups, formGroup{prefix: f, forms: []string{f}})
	}
	return groups
}

// commonPrefix returns the longest prefix a and b share.
func commonPrefix(a, b string) string {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return a[:i]
}

// secretForms returns a value and the forms it takes inside URLs and JSON
// strings, as the usual encoders write them: Go's and Python's query and
// path escapes (Python's quote escapes '+' and '=' and keeps '/'),
// JavaScript's encodeURIComponent (keeps !'()*~), .NET's UrlEncode (space
// as '+', keeps !()*; it writes lower-case hex, which Mask matches: every
// percent form is written here in upper case and matched in either), and
// the inside of a JSON string from Go (&, <, > as \u00XX), from an encoder
// that escapes every character past ASCII (Python's json.dumps: \u00e4,
// or \u00E4) and from one that also escapes '/' (PHP's json_encode).
func secretForms(v string) []string {
	out := []string{v, url.QueryEscape(v), url.PathEscape(v),
		percentEscape(v, "-._~", false),
		percentEscape(v, "-._~/", false),
		percentEscape(v, "-._~!'()*", false),
		percentEscape(v, "-._!()*", true),
	}
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

// percentEscape escapes every byte of v but ASCII letters, digits and the
// bytes of keep as %XX (upper-case hex), and a space as '+' when
// spaceAsPlus.
func percentEscape(v, keep string, spaceAsPlus bool) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte(keep, c) >= 0:
			b.WriteByte(c)
		case c == ' ' && spaceAsPlus:
			b.WriteByte('+')
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// hasPercentEscape reports whether f holds a percent escape with a letter
// in its hex (%2F, not %20), which a text may write in lower case.
func hasPercentEscape(f string) bool {
	for i := 0; i < len(f); i++ {
		if hexEscapeAt(f, i) {
			return true
		}
	}
	return false
}

// hexEscapeAt reports whether s[p:] starts with a percent escape with a
// letter (either case) in its hex.
func hexEscapeAt(s string, p int) bool {
	return p+2 < len(s) && s[p] == '%' && isHex(s[p+1]) && isHex(s[p+2]) && (s[p+1] > '9' || s[p+2] > '9')
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

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

// findGroups appends to spans the start and end, offset by off, of every
// occurrence in text of each group's forms: the group's prefix is looked
// for once, and its forms are compared where it occurs. Where the prefix
// occurs so often that the comparisons cost more than groupBudget passes
// over the text (a long prefix in a text that repeats it: 4095 "a" in a
// megabyte of "a"), the rest of the text is searched for each form on its
// own, which strings.Index does in linear time. It adds to *work the bytes
// it scanned and compared (counting a comparison as the form's length).
func findGroups(spans [][2]int, text string, groups []formGroup, off int, work *int) [][2]int {
	budget := groupBudget * len(text)
	for _, g := range groups {
		spent := 0
		at := 0
		for at < len(text) && spent <= budget {
			i := strings.Index(text[at:], g.prefix)
			if i < 0 {
				spent += len(text) - at
				at = len(text)
				break
			}
			p := at + i
			spent += i + len(g.prefix)
			for _, f := range g.forms {
				spent += len(f)
				if strings.HasPrefix(text[p:], f) {
					spans = append(spans, [2]int{off + p, off + p + len(f)})
				}
			}
			at = p + 1
		}
		if at < len(text) {
			for _, f := range g.forms {
				spans = findForm(spans, text, f, at, off, &spent)
			}
		}
		*work += spent
	}
	return spans
}

// groupBudget is how many passes over a text a group's comparisons may cost
// before its forms are searched for one by one.
const groupBudget = 8

// findForm appends to spans, offset by off, every occurrence of f in text
// that starts at from or later, adding the bytes scanned to *work.
func findForm(spans [][2]int, text, f string, from, off int, work *int) [][2]int {
	for at := from; at < len(text); {
		i := strings.Index(text[at:], f)
		if i < 0 {
			*work += len(text) - at
			break
		}
		p := at + i
		*work += i + len(f)
		spans = append(spans, [2]int{off + p, off + p + len(f)})
		at = p + 1
	}
	return spans
}

// findLowerEscaped appends to spans the occurrences of the escaped forms
// that text writes with percent escapes in lower or mixed case (%2f,
// .NET's UrlEncode). Such an occurrence holds a lower-case escape and is no
// longer than the longest escaped form, so only the windows of text that
// reach that far around one are copied with their escapes in upper case and
// searched: a text without a lower-case escape costs one scan for '%'.
func (s Secrets) findLowerEscaped(spans [][2]int, text string, work *int) [][2]int {
	width := s.width
	var buf []byte
	w0, w1 := 0, -1 // the window gathered so far; none while w1 < 0
	for at := 0; ; {
		p := -1
		if i := strings.IndexByte(text[at:], '%'); i >= 0 {
			p = at + i
			at = p + 1
			if !lowerEscape(text, p) {
				continue
			}
		}
		if w1 >= 0 && (p < 0 || p-width+1 > w1) {
			buf = upperEscapes(buf[:0], text[w0:w1])
			spans = findGroups(spans, string(buf), s.escaped, w0, work)
			w1 = -1
		}
		if p < 0 {
			return spans
		}
		if w1 < 0 {
			w0 = max(0, p-width+1)
		}
		w1 = min(len(text), p+3+width-1)
	}
}

// lowerEscape reports whether text[p:] starts with a percent escape with a
// lower-case hex digit.
func lowerEscape(text string, p int) bool {
	return hexEscapeAt(text, p) && ('a' <= text[p+1] && text[p+1] <= 'f' || 'a' <= text[p+2] && text[p+2] <= 'f')
}

// upperEscapes appends text to dst with the hex digits of its percent
// escapes in upper case (the same length, so offsets hold).
func upperEscapes(dst []byte, text string) []byte {
	n := len(dst)
	dst = append(dst, text...)
	for i := 0; i+2 < len(text); i++ {
		if text[i] == '%' && isHex(text[i+1]) && isHex(text[i+2]) {
			for k := i + 1; k <= i+2; k++ {
				if c := text[k]; 'a' <= c && c <= 'f' {
					dst[n+k] = c - ('a' - 'A')
				}
			}
			i += 2
		}
	}
	return dst
}

// maxRefLen is the longest HTML character reference Mask reads: 33 bytes,
// the longest named reference of HTML (&CounterClockwiseContourIntegral;).
// A numeric reference written longer (with more leading zeros) is left as
// it is.
const maxRefLen = 33

// findHTMLEscaped appends to spans the occurrences of the forms in text
// that writes some of their characters as HTML character references
// (&#47;, &#x2F;, &sol;, &amp;: see htmlRef). Such an occurrence holds a
// reference and is at most refWidth long, so only the windows of text that
// reach that far around one are decoded (once: &amp;#47; stays &#47;) and
// searched as the text is, for every form and for the escaped ones in
// lower-case escapes; each span found is mapped back to the text, from the
// start of the character or reference it starts with to the end of the one
// it ends with. A text without a reference costs one scan for '&'. It
// reports whether text holds a reference.
func (s Secrets) findHTMLEscaped(spans [][2]int, text string, work *int) ([][2]int, bool) {
	width := s.refWidth
	seen := false
	var buf []byte
	var refs []decodedRef
	var found [][2]int
	w0, w1 := 0, -1 // the window gathered so far; none while w1 < 0
	for at := 0; ; {
		p, n := -1, 0
		if i := strings.IndexByte(text[at:], '&'); i >= 0 {
			p = at + i
			if n, _, _ = htmlRef(text, p); n == 0 {
				at = p + 1
				continue
			}
			at = p + n
			seen = true
		}
		if w1 >= 0 && (p < 0 || p-width > w1) {
			win := text[w0:w1]
			if cap(buf) < len(win) {
				buf = make([]byte, 0, len(win))
			}
			if k := strings.Count(win, "&"); cap(refs) < k {
				refs = make([]decodedRef, 0, k)
			}
			buf, refs = decodeHTMLRefs(buf[:0], refs[:0], win)
			*work += w1 - w0
			decoded := string(buf)
			found = findGroups(found[:0], decoded, s.groups, 0, work)
			if len(s.escaped) > 0 {
				found = s.findLowerEscaped(found, decoded, work)
			}
			for _, f := range found {
				spans = append(spans, [2]int{w0 + sourceStart(refs, f[0]), w0 + sourceEnd(refs, f[1])})
			}
			w1 = -1
		}
		if p < 0 {
			return spans, seen
		}
		if w1 < 0 {
			w0 = max(0, p-width)
		}
		w1 = min(len(text), p+n+width)
	}
}

// decodedRef is a reference decodeHTMLRefs decoded: the bytes
// [start, end) of its output stand for the n bytes of its input at src.
type decodedRef struct{ start, end, src, n int }

// decodeHTMLRefs appends to dst text with its HTML character references
// (see htmlRef) decoded, and to refs each of them, in order. The output is
// no longer than text.
func decodeHTMLRefs(dst []byte, refs []decodedRef, text string) ([]byte, []decodedRef) {
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '&')
		if j < 0 {
			return append(dst, text[i:]...), refs
		}
		dst = append(dst, text[i:i+j]...)
		i += j
		n, r1, r2 := htmlRef(text, i)
		if n == 0 {
			dst = append(dst, '&')
			i++
			continue
		}
		start := len(dst)
		dst = utf8.AppendRune(dst, r1)
		if r2 >= 0 {
			dst = utf8.AppendRune(dst, r2)
		}
		refs = append(refs, decodedRef{start, len(dst), i, n})
		i += n
	}
	return dst, refs
}

// refBefore returns the last of refs (in order) that starts at or before
// the output offset d, and whether there is one.
func refBefore(refs []decodedRef, d int) (decodedRef, bool) {
	k := sort.Search(len(refs), func(k int) bool { return refs[k].start > d })
	if k == 0 {
		return decodedRef{}, false
	}
	return refs[k-1], true
}

// sourceStart maps the output offset d of decodeHTMLRefs to the input:
// the start of the reference it falls in, or of the byte it was.
func sourceStart(refs []decodedRef, d int) int {
	r, ok := refBefore(refs, d)
	switch {
	case !ok:
		return d
	case d < r.end:
		return r.src
	default:
		return r.src + r.n + d - r.end
	}
}

// sourceEnd maps the end e (> 0) of an output span of decodeHTMLRefs to
// the input: the end of the reference or byte its last byte comes from.
func sourceEnd(refs []decodedRef, e int) int {
	if r, ok := refBefore(refs, e-1); ok && e-1 < r.end {
		return r.src + r.n
	}
	return sourceStart(refs, e-1) + 1
}

// htmlRef returns the length of the HTML character reference text[p:]
// starts with and the character it stands for (r2 is the second of a named
// reference that stands for two, else -1), or n == 0 when it starts none.
// A reference is one of HTML's named references (&amp;, &lt;, &quot;,
// &apos;, &sol;, &auml;: the names are case-sensitive, &AMP; is one too),
// a decimal one (&#47;) or a hex one (&#x2F;, &#X2f;), leading zeros
// allowed, that names a character other than NUL or a surrogate (one of
// U+0080 to U+009F stands for the windows-1252 character as in a browser);
// it ends with ';' (a browser also reads some without one; Mask does not)
// and is at most maxRefLen bytes long.
func htmlRef(text string, p int) (n int, r1, r2 rune) {
	end := min(len(text), p+maxRefLen)
	if p+3 >= end || text[p] != '&' {
		return 0, 0, 0
	}
	i := p + 1
	if text[i] == '#' {
		i++
		hex := i < end && (text[i] == 'x' || text[i] == 'X')
		if hex {
			i++
		}
		start, c := i, 0
		for ; i < end; i++ {
			d := text[i]
			switch {
			case '0' <= d && d <= '9':
				d -= '0'
			case hex && 'a' <= d && d <= 'f':
				d -= 'a' - 10
			case hex && 'A' <= d && d <= 'F':
				d -= 'A' - 10
			default:
				d = 255
			}
			if d == 255 {
				break
			}
			if hex {
				c = c*16 + int(d)
			} else {
				c = c*10 + int(d)
			}
			c = min(c, utf8.MaxRune+1)
		}
		if i == start || i == end || text[i] != ';' || c == 0 || c > utf8.MaxRune || 0xD800 <= c && c <= 0xDFFF {
			return 0, 0, 0
		}
		r := rune(c)
		if 0x80 <= c && c <= 0x9F {
			r, _ = utf8.DecodeRuneInString(html.UnescapeString(text[p : i+1]))
		}
		return i + 1 - p, r, -1
	}
	for i < end && ('a' <= text[i] && text[i] <= 'z' || 'A' <= text[i] && text[i] <= 'Z' || '0' <= text[i] && text[i] <= '9') {
		i++
	}
	if i == p+1 || i == end || text[i] != ';' {
		return 0, 0, 0
	}
	n = i + 1 - p
	switch text[p+1 : i] {
	case "amp":
		return n, '&', -1
	case "lt":
		return n, '<', -1
	case "gt":
		return n, '>', -1
	case "quot":
		return n, '"', -1
	case "apos":
		return n, '\'', -1
	case "nbsp":
		return n, '\u00a0', -1
	}
	// A named reference stands for one or two characters; what
	// html.UnescapeString makes of a name it does not know whole is the
	// reference itself or a shorter name's character and the rest of the
	// name and ';' (three characters at least).
	u := html.UnescapeString(text[p : p+n])
	r1, k := utf8.DecodeRuneInString(u)
	switch rest := u[k:]; {
	case u == text[p:p+n]:
		return 0, 0, 0
	case rest == "":
		return n, r1, -1
	default:
		r2, k = utf8.DecodeRuneInString(rest)
		if k != len(rest) {
			return 0, 0, 0
		}
		return n, r1, r2
	}
}

// spans returns the start and end of every occurrence of a form in text,
// in no particular order.
func (s Secrets) spans(text string) [][2]int {
	var work int
	return s.spansWork(text, &work)
}

// spansWork is spans, adding to *work the bytes its searches scanned and
// compared (a test bounds it).
func (s Secrets) spansWork(text string, work *int) [][2]int {
	spans := findGroups(nil, text, s.groups, 0, work)
	if len(s.escaped) > 0 {
		spans = s.findLowerEscaped(spans, text, work)
	}
	spans, refs := s.findHTMLEscaped(spans, text, work)
	if refs {
		for i, sp := range spans {
			spans[i] = outsideRefs(text, sp)
		}
	}
	return spans
}

// outsideRefs widens span so that it neither starts nor ends inside an
// HTML character reference of text (a raw form found in "&amp;…" from its
// "amp;"): masking part of one would leave the rest to be read as text,
// where Mask, run again, could find a value the first run did not. A
// reference holds no '&' past its first byte, so the one a byte is in
// starts at the last '&' at or before it.
func outsideRefs(text string, span [2]int) [2]int {
	start, end := span[0], span[1]
	lo := max(0, start-maxRefLen+1)
	if q := strings.LastIndexByte(text[lo:start], '&'); q >= 0 {
		if n, _, _ := htmlRef(text, lo+q); lo+q+n > start {
			span[0] = lo + q
		}
	}
	lo = max(0, end-maxRefLen)
	if q := strings.LastIndexByte(text[lo:end], '&'); q >= 0 {
		if n, _, _ := htmlRef(text, lo+q); lo+q+n > end {
			span[1] = lo + q + n
		}
	}
	return span
}

// Len returns the number of distinct values declared.
func (s Secrets) Len() int { return s.n }

// Mask returns text with every occurrence of a declared value (or of its
// URL- or JSON-escaped form, its percent escapes in upper, lower or mixed
// case) replaced by [SecretMarker], also where the text writes any of its
// characters as an HTML character reference, as an error page does: the
// reference and the rest of the occurrence are masked as one. A reference
// is decimal (&#47;) or hex (&#x2F;, &#X2f;), leading zeros allowed, or
// one of HTML's named references (&amp;, &lt;, &gt;, &quot;, &apos;,
// &sol;, &auml;; names are case-sensitive); it must end with ';' and be at
// most 33 bytes long, and references are decoded once (&amp;#47; reads as
// &#47;, not '/'). A masked span never starts or ends inside a reference.
// Overlapping occurrences are masked as one. It runs in time proportional
// to the text length times the number of forms at most (forms sharing a
// prefix are looked for together, the forms with a percent escape again
// only near the text's lower-case escapes, and all of them again only in
// the text around its references, decoded), never lengthens text, and is
// idempotent (for values without '*').
func (s Secrets) Mask(text string) string {
	if len(s.forms) == 0 || len(text) < MinSecretChars {
		return text
	}
	spans := s.spans(text)
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
