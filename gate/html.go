package gate

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxOpenElements bounds the element stack of the HTML scan; deeper nesting
// is not tracked (its text still counts).
const maxOpenElements = 10000

// maxSignals bounds the fingerprint signals kept for a receipt.
const maxSignals = 8

// Element flags of the HTML scan, and the index of each flag's counter of
// open elements.
const (
	idxSkip    = iota // content is not readable text (script, style, svg, …)
	idxForm           // a <form>
	idxConsent        // a consent container (by id or class)
	idxChrome         // site chrome: nav, header, footer, aside
	numFlags

	flagSkip    uint8 = 1 << idxSkip
	flagForm    uint8 = 1 << idxForm
	flagConsent uint8 = 1 << idxConsent
	flagChrome  uint8 = 1 << idxChrome
)

// openElement is one entry of the scan's element stack.
type openElement struct {
	a     atom.Atom
	name  string // only for elements without an atom (custom elements)
	flags uint8
}

// htmlDoc is what one pass over an HTML document found: the readable text,
// the counts the extraction thresholds use, and the structural facts the
// fingerprint layer reads. Counts of "readable characters" count letters and
// digits only, so punctuation and whitespace cannot inflate them.
type htmlDoc struct {
	title    string
	hasTitle bool
	text     []byte // body text, whitespace collapsed, blocks on their own lines

	readable          int // letters and digits of the body text
	main              int // ... outside site chrome (nav, header, footer, aside)
	mainOutsideForms  int // ... outside chrome and outside every <form>
	mainOutsideConsnt int // ... outside chrome and outside every consent container
	consentText       int // ... inside consent containers

	// Wide characters (Han, kana, Hangul: see isWide) among main,
	// mainOutsideForms and mainOutsideConsnt, for Thresholds.WideCharWeight.
	mainWide, formsWide, consentWide int

	scripts     int // <script> elements (inline or src)
	scriptBytes int // bytes of inline script

	hasPassword bool     // an <input type=password> in main content (not skipped, not chrome)
	refresh     string   // the URL of the first <meta http-equiv="refresh"> that names one
	rules       *Rules   // the ruleset whose ids, classes and consent markers are looked for
	challenge   []string // structural challenge signals, in document order

	// scan state
	stack  []openElement
	counts [numFlags]int // open elements per flag (indexed by idxSkip, …)
	// openAtoms and openNames count the open elements by atom and, for
	// names without one, by name, so that an end tag that closes nothing
	// costs nothing (a scan of the stack for each made 10,000 open
	// elements and 250,000 stray end tags quadratic).
	openAtoms map[atom.Atom]int
	openNames map[string]int
	raw       atom.Atom
	space     bool
	brk       bool
}

// scanHTML tokenizes a UTF-8 HTML document once with golang.org/x/net/html's
// tokenizer (no tree is built), dropping script, style, noscript, template,
// svg, math, iframe, object and select content and all markup.
func scanHTML(b []byte, r *Rules) *htmlDoc {
	d := &htmlDoc{text: make([]byte, 0, len(b)/8), rules: r}
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return d
		case html.TextToken:
			d.onText(z)
		case html.StartTagToken, html.SelfClosingTagToken:
			d.onStart(z, tt)
		case html.EndTagToken:
			d.raw = 0
			name, _ := z.TagName()
			d.onEnd(atom.Lookup(name), name)
		default:
			d.raw = 0
		}
	}
}

func (d *htmlDoc) onText(z *html.Tokenizer) {
	switch d.raw {
	case atom.Script:
		d.scriptBytes += len(z.Raw())
		return
	case atom.Title:
		if d.counts[idxSkip] == 0 && !d.hasTitle {
			d.title += strings.ToValidUTF8(string(z.Text()), "\uFFFD")
		}
		return
	}
	if d.counts[idxSkip] > 0 {
		return
	}
	d.addText(z.Text())
}

func (d *htmlDoc) onStart(z *html.Tokenizer, tt html.TokenType) {
	name, hasAttr := z.TagName()
	a := atom.Lookup(name)
	d.raw = 0
	var flags uint8
	switch a {
	case atom.Script:
		d.scripts++
		flags |= flagSkip
	case atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Math, atom.Iframe,
		atom.Noembed, atom.Noframes, atom.Object, atom.Select, atom.Datalist:
		flags |= flagSkip
	case atom.Form:
		flags |= flagForm
	case atom.Nav, atom.Header, atom.Footer, atom.Aside:
		flags |= flagChrome
	}
	if hasAttr {
		flags |= d.attrs(z, a, name)
	}
	switch a {
	case atom.Script, atom.Style, atom.Title, atom.Textarea, atom.Noscript, atom.Iframe,
		atom.Noembed, atom.Noframes, atom.Xmp, atom.Plaintext:
		// The tokenizer reads these as raw text even when written <x/>.
		d.raw = a
		if a == atom.Title {
			d.brk = true
		}
		d.push(a, name, flags)
		return
	}
	switch {
	case isBlock(a):
		d.brk = true
	case a == atom.Td || a == atom.Th:
		d.space = true
	}
	if tt == html.SelfClosingTagToken || isVoid(a) {
		return
	}
	d.push(a, name, flags)
}

// attrs reads the attributes of a start tag, records fingerprint facts and
// returns extra flags for the element.
func (d *htmlDoc) attrs(z *html.Tokenizer, a atom.Atom, name []byte) uint8 {
	var flags uint8
	skipped := d.counts[idxSkip] > 0
	chrome := d.counts[idxChrome] > 0
	consent := !skipped && !d.rules.consentIgnored(a, name)
	var refresh bool
	var content string
	for {
		key, val, more := z.TagAttr()
		switch string(key) {
		case "http-equiv":
			refresh = a == atom.Meta && !skipped && bytes.EqualFold(bytes.TrimSpace(val), []byte("refresh"))
		case "content":
			// Only a ruleset that judges refresh stubs reads them.
			if a == atom.Meta && d.refresh == "" && len(val) <= maxRefreshContent && d.rules.doc.Thresholds.MetaRefreshMaxText > 0 {
				content = string(val)
			}
		case "id":
			if consent && d.rules.matchConsentToken(val) {
				flags |= flagConsent
			}
			if sig := d.rules.challengeID(val); sig != "" {
				d.signal("id:" + sig)
			}
		case "class":
			for _, tok := range bytes.Fields(val) {
				if consent && d.rules.matchConsentToken(tok) {
					flags |= flagConsent
				}
				if sig := d.rules.challengeClass(tok); sig != "" {
					d.signal("class:" + sig)
				}
			}
		case "type":
			if a == atom.Input && !skipped && !chrome && bytes.EqualFold(bytes.TrimSpace(val), []byte("password")) {
				d.hasPassword = true
			}
		case "src":
			if a == atom.Script || a == atom.Iframe {
				if sig := challengeSrc(a == atom.Iframe, val); sig != "" {
					d.signal(a.String() + "-src:" + sig)
				}
			}
		case "action":
			if a == atom.Form && bytes.Contains(val, []byte("__cf_chl_")) {
				d.signal("form-action:__cf_chl_")
			}
		}
		if !more {
			if refresh && d.refresh == "" {
				d.refresh = refreshURL(content)
			}
			return flags
		}
	}
}

// maxRefreshContent bounds the content attribute of a meta refresh that is
// read.
const maxRefreshContent = 2048

// refreshURL returns the URL of a meta refresh's content ("5; url=/next",
// "0;URL='https://a.example/'"), or "" when it names none (a plain reload).
func refreshURL(content string) string {
	_, rest, ok := strings.Cut(content, ";")
	if !ok {
		if _, rest, ok = strings.Cut(content, ","); !ok {
			return ""
		}
	}
	rest = strings.TrimSpace(rest)
	if len(rest) >= 3 && strings.EqualFold(rest[:3], "url") {
		if after := strings.TrimSpace(rest[3:]); strings.HasPrefix(after, "=") {
			rest = strings.TrimSpace(after[1:])
		}
	}
	rest = strings.Trim(rest, "'\"")
	return strings.TrimSpace(rest)
}

func (d *htmlDoc) signal(s string) {
	for _, have := range d.challenge {
		if have == s {
			return
		}
	}
	if len(d.challenge) < maxSignals {
		d.challenge = append(d.challenge, s)
	}
}

func (d *htmlDoc) push(a atom.Atom, name []byte, flags uint8) {
	if len(d.stack) >= maxOpenElements {
		return
	}
	e := openElement{a: a, flags: flags}
	if a == 0 {
		e.name = string(name)
	}
	d.stack = append(d.stack, e)
	d.count(flags, +1)
	d.opened(e, +1)
}

// opened counts e as opened (delta +1) or closed (-1).
func (d *htmlDoc) opened(e openElement, delta int) {
	if e.a != 0 {
		if d.openAtoms == nil {
			d.openAtoms = map[atom.Atom]int{}
		}
		d.openAtoms[e.a] += delta
		return
	}
	if d.openNames == nil {
		d.openNames = map[string]int{}
	}
	d.openNames[e.name] += delta
}

// onEnd closes the innermost open element with this name and everything
// opened inside it; an end tag with no open element is ignored.
func (d *htmlDoc) onEnd(a atom.Atom, name []byte) {
	switch {
	case isBlock(a):
		d.brk = true
	case a == atom.Td || a == atom.Th:
		d.space = true
	}
	if a != 0 && d.openAtoms[a] == 0 || a == 0 && d.openNames[string(name)] == 0 {
		return
	}
	for i := len(d.stack) - 1; i >= 0; i-- {
		e := d.stack[i]
		if e.a != a || (a == 0 && e.name != string(name)) {
			continue
		}
		for j := len(d.stack) - 1; j >= i; j-- {
			d.count(d.stack[j].flags, -1)
			d.opened(d.stack[j], -1)
		}
		d.stack = d.stack[:i]
		if a == atom.Title && !d.hasTitle && d.counts[idxSkip] == 0 {
			d.hasTitle = true
		}
		return
	}
}

func (d *htmlDoc) count(flags uint8, delta int) {
	for bit := 0; bit < len(d.counts); bit++ {
		if flags&(1<<bit) != 0 {
			d.counts[bit] += delta
		}
	}
}

// addText appends readable text, collapsing whitespace runs to one space and
// putting block boundaries on new lines, and counts letters and digits.
func (d *htmlDoc) addText(t []byte) {
	for i := 0; i < len(t); {
		c := t[i]
		if c < utf8.RuneSelf {
			i++
			if asciiSpace[c] {
				d.space = true
				continue
			}
			d.sep()
			d.text = append(d.text, c)
			if asciiAlnum[c] {
				d.countReadable(false)
			}
			continue
		}
		r, n := utf8.DecodeRune(t[i:])
		i += n
		if unicode.IsSpace(r) {
			d.space = true
			continue
		}
		d.sep()
		if r == utf8.RuneError && n == 1 {
			d.text = append(d.text, "\uFFFD"...)
			continue
		}
		d.text = utf8.AppendRune(d.text, r)
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			d.countReadable(isWide(r))
		}
	}
}

func (d *htmlDoc) sep() {
	if len(d.text) > 0 {
		if d.brk {
			d.text = append(d.text, '\n')
		} else if d.space {
			d.text = append(d.text, ' ')
		}
	}
	d.brk, d.space = false, false
}

func (d *htmlDoc) countReadable(wide bool) {
	d.readable++
	if d.counts[idxChrome] > 0 {
		return
	}
	w := 0
	if wide {
		w = 1
	}
	d.main++
	d.mainWide += w
	if d.counts[idxForm] == 0 {
		d.mainOutsideForms++
		d.formsWide += w
	}
	if d.counts[idxConsent] == 0 {
		d.mainOutsideConsnt++
		d.consentWide += w
	} else {
		d.consentText++
	}
}

// isWide reports a Han ideograph, a kana or a Hangul syllable.
func isWide(r rune) bool {
	return r >= 0x1100 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// weighted counts n readable characters of which wide are wide, each wide
// one as weight.
func weighted(n, wide, weight int) int { return n + (weight-1)*wide }

var asciiSpace, asciiAlnum [utf8.RuneSelf]bool

func init() {
	for _, c := range " \t\n\r\f\v" {
		asciiSpace[c] = true
	}
	for c := 0; c < utf8.RuneSelf; c++ {
		asciiAlnum[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
}

// isVoid reports HTML void elements, which have no end tag.
func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Param, atom.Source, atom.Track, atom.Wbr, atom.Keygen:
		return true
	}
	return false
}

// isBlock reports elements whose start and end break the text into lines.
func isBlock(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body, atom.Br,
		atom.Caption, atom.Dd, atom.Details, atom.Dialog, atom.Div, atom.Dl, atom.Dt,
		atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form, atom.H1,
		atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Header, atom.Hgroup, atom.Hr,
		atom.Html, atom.Legend, atom.Li, atom.Main, atom.Nav, atom.Ol, atom.P, atom.Pre,
		atom.Section, atom.Summary, atom.Table, atom.Tr, atom.Ul, atom.Head:
		return true
	}
	return false
}
