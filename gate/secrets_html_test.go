package gate

import (
	"fmt"
	"html"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// pythonHTMLEscape is Python's html.escape(s, quote=True).
func pythonHTMLEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;").Replace(s)
}

// refEscape writes every character of s that is not an ASCII letter or
// digit (every character when all) as a numeric reference in format
// (an OWASP-style encoder writes "&#x%02X;" or "&#x%02x;").
func refEscape(s, format string, all bool) string {
	var b strings.Builder
	for _, r := range s {
		if !all && r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
			continue
		}
		fmt.Fprintf(&b, format, r)
	}
	return b.String()
}

// TestSecretsHTMLEscapedForms: a declared secret is masked where a text
// writes its characters as HTML character references, as escapers write
// them: Go's html.EscapeString (&#39;, &#34;), Python's html.escape
// (&#x27;, &quot;), an encoder writing every other character as &#xHH;
// (in either case) or &#NN;, hex with an upper-case X and leading zeros,
// a character past ASCII (&#xE4;, &#228;, &auml;), named references for
// punctuation (&sol;, &plus;, &equals;), a URL- or JSON-escaped form of the
// value HTML-escaped again, and the value in a server's error page. Each
// survived whole before: only the raw, URL- and JSON-escaped forms were
// looked for. A value far from the text's other references is found too.
func TestSecretsHTMLEscapedForms(t *testing.T) {
	page := func(v string) string {
		return "<!DOCTYPE html>\n<html><head><title>400 Bad Request</title></head>\n<body><h1>Bad Request</h1>\n" +
			"<p>The request URL <code>/login?user=app&amp;token=" + v + "&amp;next=&#x2F;home</code> was rejected.</p>\n</body></html>\n"
	}
	for _, c := range []struct{ name, secret, escaped string }{
		{"Go html.EscapeString", `p'ss<w>rd&"more"`, html.EscapeString(`p'ss<w>rd&"more"`)},
		{"Python html.escape", `p'ss<w>rd&"more"`, pythonHTMLEscape(`p'ss<w>rd&"more"`)},
		{"every non-alphanumeric as &#xHH;", "wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", refEscape("wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", "&#x%02X;", false)},
		{"every non-alphanumeric as &#xhh;", "wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", refEscape("wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", "&#x%02x;", false)},
		{"every non-alphanumeric as &#NN;", "wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", refEscape("wJalrXUtnFEMI/K7MDENG+bPxRfiCY==", "&#%d;", false)},
		{"every character as a reference", "AbCd+EfGh/IjKl==", refEscape("AbCd+EfGh/IjKl==", "&#x%X;", true)},
		{"mixed case hex and leading zeros", "AbCd+EfGh/IjKl==", "AbCd&#X2b;EfGh&#x002F;IjKl&#0061;&#X3D;"},
		{"one character only", "AbCd+EfGh/IjKl==", "AbCd+EfGh&#x2F;IjKl=="},
		{"first and last characters", "/AbCdEfGh+", "&#47;AbCdEfGh&#43;"},
		{"past ASCII as &#xE4;", "pässwort-Geheim42", "p&#xE4;sswort-Geheim42"},
		{"past ASCII as &#228;", "pässwort-Geheim42", "p&#228;sswort-Geheim42"},
		{"past ASCII as &auml;", "pässwort-Geheim42", "p&auml;sswort-Geheim42"},
		{"past U+FFFF", "zeichen-😀-geheim", "zeichen-&#x1F600;-geheim"},
		{"named punctuation", "AbCd+EfGh/IjKl==", "AbCd&plus;EfGh&sol;IjKl&equals;&equals;"},
		{"upper-case named", `a&b<c>d"efgh`, "a&AMP;b&LT;c&GT;d&QUOT;efgh"},
		{"apostrophe as &apos;", "tilde~and'quote", "tilde~and&apos;quote"},
		{"URL path form, & as &amp;", "p@ss w/rd&more", "p@ss%20w%2Frd&amp;more"},
		{"URL path form in lower case, & as &amp;", "p@ss w/rd&more", "p@ss%20w%2frd&amp;more"},
		{"encodeURIComponent, ' as &#39;", "tilde~and'quote", "tilde~and&#39;quote"},
		{"JSON form, quotes as &quot;", `say "open" now!`, `say \&quot;open\&quot; now!`},
		{"escaped % of a URL form", "AbCd+EfGh/IjKl==", "AbCd&#37;2BEfGh/IjKl&#37;3D&#37;3D"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sec := mustSecrets(t, c.secret)
			far := strings.Repeat("x", 5000)
			for _, in := range []string{c.escaped, "pw=" + c.escaped + ";", page(c.escaped), "&lt;" + far + c.escaped + far + "&gt;" + c.escaped} {
				want := strings.ReplaceAll(in, c.escaped, SecretMarker)
				if got := sec.Mask(in); got != want {
					t.Fatalf("mask(%q)\n got %q\nwant %q", in, got, want)
				}
			}
		})
	}
}

// TestSecretsHTMLEscapedNotOtherwise: a text whose references decode to
// something else than a declared value, a '&' that starts no reference, a
// reference without its ';' and one escaped twice (&amp;#x2F;) are left as
// they are.
func TestSecretsHTMLEscapedNotOtherwise(t *testing.T) {
	sec := mustSecrets(t, "AbCd+EfGh/IjKl==", "p@ss w/rd&more")
	for _, in := range []string{
		"AbCd&#x2F;EfGh/IjKl==",
		"AbCd&#x2B;EfGh/IjKl=&#x3E;",
		"AbCd&#x2BEfGh/IjKl==",
		"AbCd&#43EfGh/IjKl==",
		"AbCd&plusEfGh/IjKl==",
		"AbCd&#x;EfGh/IjKl==",
		"AbCd&#xZZ;EfGh/IjKl==",
		"AbCd&#;EfGh/IjKl==",
		"AbCd&#x2B0000;EfGh/IjKl==",
		"AbCd&#x110000;EfGh/IjKl==",
		"AbCd&nosuchname;EfGh/IjKl==",
		"AbCd&amp;#x2B;EfGh/IjKl==",
		"AbCd & EfGh/IjKl== & more",
		"p@ss w/rd&amp;mor",
		"p@ss w/rd&ampmore",
		"&&&&&&;;;;&#&#x&;&amp",
		"AbCd&#x2B;EfGh&#x2F;IjKl=",
	} {
		if got := sec.Mask(in); got != in {
			t.Errorf("mask(%q) = %q, want it unchanged", in, got)
		}
	}
}

// htmlRefs are named references the oracle writes, by the character they
// stand for.
var htmlRefs = map[rune][]string{
	'&': {"amp", "AMP"}, '<': {"lt", "LT"}, '>': {"gt", "GT"}, '"': {"quot", "QUOT"},
	'\'': {"apos"}, '/': {"sol"}, '+': {"plus"}, '=': {"equals"}, 'ä': {"auml"}, '€': {"euro"},
}

// randomRef writes r as a random HTML character reference: decimal, hex
// (x or X, either case of digits, up to three leading zeros) or named.
func randomRef(rng *rand.Rand, r rune) string {
	zeros := strings.Repeat("0", rng.IntN(4))
	switch k := rng.IntN(4); {
	case k == 0:
		return fmt.Sprintf("&#%s%d;", zeros, r)
	case k == 1 || k == 2 && len(htmlRefs[r]) == 0:
		x := "x"
		if rng.IntN(2) == 0 {
			x = "X"
		}
		h := fmt.Sprintf("%x", r)
		if rng.IntN(2) == 0 {
			h = strings.ToUpper(h)
		}
		return "&#" + x + zeros + h + ";"
	case len(htmlRefs[r]) > 0:
		names := htmlRefs[r]
		return "&" + names[rng.IntN(len(names))] + ";"
	default:
		return string(r)
	}
}

// TestSecretsHTMLEscapedOracle: random values, a random part of whose
// characters a text writes as random references, inside random text with
// references of its own: wherever the text, decoded as a browser does
// (html.UnescapeString), holds a value, the masked text decoded so holds
// none. Masking never lengthens the text and is idempotent.
func TestSecretsHTMLEscapedOracle(t *testing.T) {
	alphabet := []rune(`abcXYZ0123/+=&<>"'!#$%()-._~@:;?[]{}| äé€😀`)
	filler := []string{"a", "b", "X", "0", " ", "<p>", "</p>", "=", "/", ";", "#", "x", "&amp;", "&#x41;", "&#65;", "&lt;", "&quot;", "\n"}
	rng := rand.New(rand.NewPCG(7, 11))
	checked := 0
	for n := range 4000 {
		var values []string
		for range 1 + rng.IntN(3) {
			var v []rune
			for range MinSecretChars + rng.IntN(12) {
				v = append(v, alphabet[rng.IntN(len(alphabet))])
			}
			values = append(values, strings.TrimSpace(string(v)))
		}
		sec, err := NewSecrets(values)
		if err != nil {
			continue // a value trimmed too short
		}
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			for range rng.IntN(8) {
				b.WriteString(filler[rng.IntN(len(filler))])
			}
			v := values[rng.IntN(len(values))]
			if rng.IntN(4) == 0 {
				v = url.PathEscape(v)
			}
			for _, r := range v {
				if rng.IntN(2) == 0 {
					b.WriteString(randomRef(rng, r))
				} else {
					b.WriteRune(r)
				}
			}
		}
		for range rng.IntN(8) {
			b.WriteString(filler[rng.IntN(len(filler))])
		}
		text := b.String()
		decoded := html.UnescapeString(text)
		holds := false
		for _, v := range values {
			holds = holds || strings.Contains(decoded, v) || strings.Contains(decoded, url.PathEscape(v))
		}
		if !holds {
			continue // the value's raw characters and the text around it read as a reference
		}
		checked++
		got := sec.Mask(text)
		for _, v := range values {
			if d := html.UnescapeString(got); strings.Contains(d, v) || strings.Contains(d, url.PathEscape(v)) {
				t.Fatalf("text %d, values %q:\n%q\nmasked %q\ndecoded %q still holds %q", n, values, text, got, d, v)
			}
		}
		if len(got) > len(text) {
			t.Fatalf("text %d: masking lengthened %q to %q", n, text, got)
		}
		if again := sec.Mask(got); again != got {
			t.Fatalf("text %d: masking is not idempotent: %q, then %q", n, got, again)
		}
	}
	if checked < 2000 {
		t.Fatalf("only %d texts held a value", checked)
	}
}

// TestSecretsHTMLEscapedIdempotent: masking a masked text changes nothing,
// also where a value found as it is starts inside a reference (the "p;…"
// of "&amp;…") and another value, HTML-escaped, ends with the reference's
// start: the first span takes the whole reference, so what is left does
// not read as the second value.
func TestSecretsHTMLEscapedIdempotent(t *testing.T) {
	sec := mustSecrets(t, "xyz/wvu&am", "p;qqqqqqq", "AbCd+EfGh/IjKl==")
	for _, in := range []string{
		"xyz&#47;wvu&amp;qqqqqqq",
		"qqqqqqq p;qqqqqqq&#x41;bCd+EfGh&#x2F;IjKl&#61;=",
		"AbCd&#43;EfGh&sol;IjKl&equals;&#X3d;AbCd&#43;EfGh&sol;IjKl&equals;&#X3d;",
		"&#x41;&#x41;bCd+EfGh/IjKl==&#x3D;",
	} {
		once := sec.Mask(in)
		if twice := sec.Mask(once); twice != once {
			t.Errorf("mask(%q) = %q, masked again %q", in, once, twice)
		}
		if len(once) > len(in) || once == in {
			t.Errorf("mask(%q) = %q", in, once)
		}
	}
}

// FuzzSecretsMask checks Secrets.Mask on a value a text writes with some
// of its characters as references (sel picks them, kinds their kind)
// between pre and post: masking never lengthens the text and is
// idempotent, and where the text, its references decoded as Mask reads
// them, holds the value, the masked text decoded so holds none. Values
// with '*' are left out: SecretMarker next to one can form it again.
func FuzzSecretsMask(f *testing.F) {
	f.Add("AbCd+EfGh/IjKl==", "pw=", "&amp;next", uint64(0x2a5), uint64(0x1b3))
	f.Add(`p'ss<w>rd&"more"`, "<p>", "</p>", uint64(0xffff), uint64(0xe4e4))
	f.Add("pässwort-Geheim42", "&#x", ";", uint64(2), uint64(3))
	f.Add("p;qqqqqqq", "xyz&#47;wvu&am", "", uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, v, pre, post string, sel, kinds uint64) {
		if strings.ContainsRune(v, '*') || strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "\ufeff")) != v {
			return
		}
		sec, err := NewSecrets([]string{v})
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString(pre)
		for i, r := range []rune(v) {
			if sel>>(i%64)&1 == 0 {
				b.WriteRune(r)
				continue
			}
			switch names := htmlRefs[r]; kinds >> (2 * (i % 32)) & 3 {
			case 0:
				fmt.Fprintf(&b, "&#%d;", r)
			case 1:
				fmt.Fprintf(&b, "&#x%x;", r)
			case 2:
				fmt.Fprintf(&b, "&#X%04X;", r)
			default:
				if len(names) > 0 {
					b.WriteString("&" + names[0] + ";")
				} else {
					fmt.Fprintf(&b, "&#0%d;", r)
				}
			}
		}
		b.WriteString(post)
		text := b.String()
		decode := func(s string) string {
			d, _ := decodeHTMLRefs(nil, nil, s)
			return string(d)
		}
		got := sec.Mask(text)
		if len(got) > len(text) {
			t.Fatalf("mask(%q) = %q, longer", text, got)
		}
		if again := sec.Mask(got); again != got {
			t.Fatalf("mask(%q) = %q, masked again %q", text, got, again)
		}
		if strings.Contains(decode(text), v) && strings.Contains(decode(got), v) {
			t.Fatalf("mask(%q) = %q, which decoded (%q) holds %q", text, got, decode(got), v)
		}
	})
}
