package gate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Extraction thresholds of the built-in rulesets (a ruleset may set others:
// [Thresholds]). "Readable characters" are letters and digits of the
// extracted text (Unicode categories L and N): whitespace, punctuation and
// markup never count.
//
// HTML needs at least MinHTMLText readable characters in its body, and a
// large page needs one more per HTMLBytesPerText bytes of (content-decoded)
// document, up to MaxHTMLTextRequired. So the 400-byte example.com page
// (about 150) passes, a 400 KB page of scripts with a three-letter title does
// not, and a 400 KB page needs 400 characters of text. Titles do not count:
// a shell has one too.
//
// JSON, CSV, XML and plain text count as they are: a 17-byte JSON price is a
// read. JSON must parse; the others need MinPlainText readable characters
// and at most MaxControlPermille control characters per thousand bytes.
const (
	MinHTMLText         = 40   // readable characters any HTML body needs
	HTMLBytesPerText    = 1000 // one more needed per this many document bytes
	MaxHTMLTextRequired = 512  // the most an HTML body is ever asked for
	MinPlainText        = 1    // readable characters CSV, XML or text needs
	MaxControlPermille  = 100  // control bytes per 1000 tolerated in text
)

// requiredHTMLText is the readable text an HTML document of n decoded bytes
// must have.
func requiredHTMLText(n int, th Thresholds) int {
	req := n / th.HTMLBytesPerText
	if req > th.MaxHTMLTextRequired {
		req = th.MaxHTMLTextRequired
	}
	if req < th.MinHTMLText {
		req = th.MinHTMLText
	}
	return req
}

// extraction is what the extraction layer found besides its verdict.
type extraction struct {
	kind     Kind
	charset  string
	text     []byte   // readable text, UTF-8
	readable int      // letters and digits in text (HTML: body only)
	doc      *htmlDoc // the HTML scan, nil for other kinds
	notes    []string
}

// extractionLayer separates readable text from a content-decoded body and
// judges whether it is enough for the kind of document.
func extractionLayer(dec contentDecoding, contentType string, r *Rules) (LayerResult, extraction) {
	th := r.doc.Thresholds
	var ex extraction
	res := LayerResult{Layer: LayerExtraction, Verdict: Unknown}
	switch dec.status {
	case decodeCorrupt:
		res.Verdict, res.Reason, res.Detail = Failed, ReasonDecodeError, dec.detail
		return res, ex
	case decodeUnsupported:
		res.Reason, res.Detail = ReasonUnsupportedEncoding, dec.detail
		return res, ex
	case decodeTooLarge:
		res.Reason, res.Detail = ReasonTooLarge, dec.detail
		return res, ex
	}
	body := dec.body
	if len(bytes.TrimSpace(body)) == 0 {
		res.Reason, res.Detail = ReasonTooLittleText, "no body"
		return res, ex
	}
	mt, declared := mediaType(contentType)
	kind, typed := kindOf(mt)
	if !typed {
		kind = sniffKind(body)
	}
	ex.kind = kind
	if kind == KindBinary {
		res.Reason = ReasonBinary
		if typed {
			res.Detail = "media type " + quoteShort(mt) + " is not text"
		} else {
			res.Detail = "body is not text"
		}
		return res, ex
	}
	text, cs, notes := toUTF8(body, contentType, declared, kind)
	ex.charset, ex.notes = cs, notes

	if kind == KindHTML {
		if what := htmlNotText(body, text, th.HTMLMaxControlPermille); what != "" {
			res.Reason, res.Detail = ReasonBinary, "html: body is not text ("+what+")"
			return res, ex
		}
		doc := scanHTML(text, r)
		ex.doc, ex.readable = doc, doc.readable
		ex.text = htmlText(doc)
		need := requiredHTMLText(len(body), th)
		if r.checks[CheckHTMLMainText] && doc.scripts > 0 && doc.main < need && doc.readable >= need {
			// A client-rendered page: the server sent the site chrome, the
			// scripts write the content.
			res.Reason = ReasonScriptShell
			res.Detail = "html: " + strconv.Itoa(doc.main) + " readable characters outside site chrome (" +
				strconv.Itoa(doc.readable) + " with it), " + strconv.Itoa(need) + " needed for " + strconv.Itoa(len(body)) +
				" bytes (" + strconv.Itoa(doc.scripts) + " scripts, " + strconv.Itoa(doc.scriptBytes) + " bytes of inline script)"
			return res, ex
		}
		if doc.readable < need {
			res.Reason = ReasonTooLittleText
			if doc.scripts > 0 {
				res.Reason = ReasonScriptShell
			}
			res.Detail = "html: " + strconv.Itoa(doc.readable) + " readable characters, " +
				strconv.Itoa(need) + " needed for " + strconv.Itoa(len(body)) + " bytes (" +
				strconv.Itoa(doc.scripts) + " scripts, " + strconv.Itoa(doc.scriptBytes) + " bytes of inline script)"
			return res, ex
		}
		res.Verdict, res.Reason = Retrieved, ""
		res.Detail = "html: " + strconv.Itoa(doc.readable) + " readable characters"
		return res, ex
	}

	if !utf8.Valid(text) {
		text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
	}
	ex.text = text
	ex.readable = countReadable(text)
	if kind == KindJSON {
		if !jsonValid(text) {
			res.Reason, res.Detail = ReasonInvalidJSON, "body does not parse as JSON"
			return res, ex
		}
		res.Verdict, res.Detail = Retrieved, "json: "+strconv.Itoa(len(text))+" bytes"
		return res, ex
	}
	if nul, ctl := controlCount(text); nul || ctl*1000 > len(text)*th.MaxControlPermille {
		res.Reason, res.Detail = ReasonBinary, string(kind)+": body holds binary control characters"
		return res, ex
	}
	if ex.readable < th.MinPlainText {
		res.Reason, res.Detail = ReasonTooLittleText, string(kind)+": no letters or digits"
		return res, ex
	}
	res.Verdict = Retrieved
	res.Detail = string(kind) + ": " + strconv.Itoa(ex.readable) + " readable characters"
	return res, ex
}

// compressedMagic are the openings of compressed streams and archives
// that a server may send as text/html without saying so.
var compressedMagic = []struct {
	name  string
	magic string
}{
	{"gzip stream", "\x1f\x8b"},
	{"zstd stream", "\x28\xb5\x2f\xfd"},
	{"zip archive", "PK\x03\x04"},
	{"xz stream", "\xfd7zXZ\x00"},
	{"bzip2 stream", "BZh"},
}

// htmlNotText says why a content-decoded HTML body is not text, or "":
// it starts like a compressed stream or an archive, or more than
// maxPermille of the bytes of text, the body read in its charset (UTF-8),
// are control bytes. The control bytes are counted in the text, not in the
// body, because some charsets are made of them: UTF-16's zero bytes, and
// the escape sequences of ISO-2022-JP, which a Japanese page repeats
// around every run of kanji and kana (see htmlControlCount). A maxPermille of 0 judges nothing
// (gate/v1, gate/v2). Bzip2 ("BZh") must be followed by a block size digit
// and the block magic, so a page starting "BZh" is not taken for one.
func htmlNotText(body, text []byte, maxPermille int) string {
	if maxPermille == 0 {
		return ""
	}
	for _, m := range compressedMagic {
		if !bytes.HasPrefix(body, []byte(m.magic)) {
			continue
		}
		if m.name == "bzip2 stream" && !(len(body) >= 10 && body[3] >= '1' && body[3] <= '9' && string(body[4:10]) == "\x31\x41\x59\x26\x53\x59") {
			continue
		}
		return m.name
	}
	if ctl := htmlControlCount(text); ctl*1000 > len(text)*maxPermille {
		return strconv.Itoa(ctl) + " control bytes in " + strconv.Itoa(len(text)) + " bytes of text"
	}
	return ""
}

// htmlControlCount counts the control bytes (isControl) of an HTML text,
// but not an escape that opens an ISO-2022 designation (ESC "$" or ESC
// "("): an ISO-2022-JP page whose charset is named only by its <meta> is
// valid 7-bit UTF-8 and read as such, its escapes left in the text.
func htmlControlCount(b []byte) int {
	n := 0
	for i, c := range b {
		if c == 0x1b && i+1 < len(b) && (b[i+1] == '$' || b[i+1] == '(') {
			continue
		}
		if isControl(c) {
			n++
		}
	}
	return n
}

// htmlText joins the title and the body text.
func htmlText(d *htmlDoc) []byte {
	title := bytes.TrimSpace([]byte(d.title))
	if len(title) == 0 {
		return d.text
	}
	out := make([]byte, 0, len(title)+2+len(d.text))
	out = append(out, title...)
	if len(d.text) > 0 {
		out = append(out, '\n', '\n')
		out = append(out, d.text...)
	}
	return out
}

// countReadable counts letters and digits.
func countReadable(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if asciiAlnum[c] {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			n++
		}
		i += size
	}
	return n
}

// countWide counts the wide characters (isWide) of b.
func countWide(b []byte) int {
	n := 0
	for _, r := range string(b) {
		if r >= 0x1100 && isWide(r) {
			n++
		}
	}
	return n
}

// controlCount reports whether b holds a NUL byte and how many other
// control bytes (see isControl) it holds.
func controlCount(b []byte) (nul bool, n int) {
	for _, c := range b {
		if c == 0 {
			nul = true
		}
		if isControl(c) {
			n++
		}
	}
	return nul, n
}

// jsonValid reports whether b is one valid JSON value (surrounding
// whitespace allowed).
func jsonValid(b []byte) bool { return json.Valid(b) }
