package gate

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// MaxDecodedBytes bounds the body after content decoding (and an identity
// body) under the built-in rulesets. A larger one is [ReasonTooLarge]: either a decompression bomb or a
// document too big to judge. The HTTP layer should refuse bodies over this
// size before they reach [Classify].
const MaxDecodedBytes = 32 << 20

// Notes that can appear in [Receipt].Notes.
const (
	// NoteEncodingNotApplied: the Content-Encoding header names an encoding,
	// but the body is not encoded that way and reads as text; the client most
	// likely decompressed it and kept the header. The body was read as is.
	NoteEncodingNotApplied = "content_encoding_not_applied"
	// NoteCharsetUnknown: the declared charset label is not a known encoding;
	// the charset was detected instead.
	NoteCharsetUnknown = "charset_label_unknown"
)

// decodeStatus is how content decoding ended.
type decodeStatus int

const (
	decodeOK decodeStatus = iota
	decodeUnsupported
	decodeCorrupt
	decodeTooLarge
)

// contentDecoding is the result of undoing Content-Encoding.
type contentDecoding struct {
	body   []byte // the entity; aliases the raw body when nothing was decoded
	status decodeStatus
	detail string
	notes  []string
}

// decodeContent undoes the Content-Encoding codings in reverse order of
// application. An unknown coding stops with decodeUnsupported, a stream that
// does not decode with decodeCorrupt, more than MaxDecodedBytes with
// decodeTooLarge. When the outermost coding is unknown or fails and the body
// reads as plain text, the header is taken to be stale: the client decoded
// the body and kept the header (NoteEncodingNotApplied).
func decodeContent(raw []byte, header string, maxBytes int) contentDecoding {
	var codings []string
	for _, c := range strings.Split(header, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	d := contentDecoding{body: raw}
	if len(codings) > MaxContentCodings {
		// Each layer may decode to maxBytes: a thousand stacked codings
		// of a small body cost a thousand such decodes.
		d.status, d.detail = decodeUnsupported, fmt.Sprintf("%d content codings; at most %d are decoded", len(codings), MaxContentCodings)
		return d
	}
	for i := len(codings) - 1; i >= 0; i-- {
		out, err := decodeOne(d.body, codings[i], maxBytes)
		if err != nil && err != errTooLarge && i == len(codings)-1 && looksTextual(d.body) {
			d.notes = append(d.notes, NoteEncodingNotApplied)
			return d
		}
		switch {
		case err == errUnsupportedCoding:
			d.status, d.detail = decodeUnsupported, "content-encoding "+quoteShort(codings[i])+" is not supported"
			return d
		case err == errTooLarge:
			d.status, d.detail = decodeTooLarge, fmt.Sprintf("decoded body exceeds %d bytes", maxBytes)
			return d
		case err != nil:
			d.status, d.detail = decodeCorrupt, codings[i]+" stream does not decode: "+err.Error()
			return d
		}
		d.body = out
	}
	if len(d.body) > maxBytes {
		d.status, d.detail = decodeTooLarge, fmt.Sprintf("body exceeds %d bytes", maxBytes)
	}
	return d
}

// Errors of [DecodeContent].
var (
	// ErrUnsupportedEncoding: a coding other than gzip, deflate and br, or
	// more than MaxContentCodings of them.
	ErrUnsupportedEncoding = errors.New("unsupported content encoding")
	// ErrCorruptContent: the body does not decode under its coding
	// (truncated or corrupt stream).
	ErrCorruptContent = errors.New("content does not decode")
	// ErrContentTooLarge: the body is, or decodes to, more than the bound.
	ErrContentTooLarge = errors.New("content too large")
)

// DecodeContent undoes the Content-Encoding header's codings (gzip,
// x-gzip, deflate as zlib or raw DEFLATE, br; identity and empty entries
// skipped; at most MaxContentCodings) of a body exactly as the gate's
// extraction layer does, and returns at most maxBytes bytes. When the
// outermost coding is not applied to the body and the body reads as text,
// the header is taken to be stale (a client decoded the body and kept the
// header) and the body is returned as it is. Errors wrap
// ErrUnsupportedEncoding, ErrCorruptContent or ErrContentTooLarge. The
// result may alias raw. It is pure and safe for concurrent use.
func DecodeContent(raw []byte, contentEncoding string, maxBytes int) ([]byte, error) {
	d := decodeContent(raw, contentEncoding, maxBytes)
	if d.status == decodeOK && len(d.body) > maxBytes {
		// A body taken as is under a stale header: decodeContent keeps it
		// whatever its size, as the rulesets' verdicts were made with it
		// (docs/GATE.md, known gaps); the bound here is the caller's.
		d.status, d.detail = decodeTooLarge, fmt.Sprintf("body exceeds %d bytes", maxBytes)
	}
	switch d.status {
	case decodeUnsupported:
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedEncoding, d.detail)
	case decodeCorrupt:
		return nil, fmt.Errorf("%w: %s", ErrCorruptContent, d.detail)
	case decodeTooLarge:
		return nil, fmt.Errorf("%w: %s", ErrContentTooLarge, d.detail)
	}
	return d.body, nil
}

// SupportedCoding reports whether DecodeContent decodes the content coding
// c (a single coding, any case): gzip, x-gzip, deflate, br, identity.
func SupportedCoding(c string) bool {
	switch strings.ToLower(strings.TrimSpace(c)) {
	case "gzip", "x-gzip", "deflate", "br", "identity":
		return true
	}
	return false
}

// MaxContentCodings is the most Content-Encoding codings a body may
// stack (browsers send and servers use one, rarely two); a body with more
// is not decoded.
const MaxContentCodings = 4

var (
	errUnsupportedCoding = errors.New("unsupported content coding")
	errTooLarge          = errors.New("decoded body too large")
	errNotGzip           = errors.New("no gzip header")
)

// decodeOne undoes one content coding. Third-party decoders run on untrusted
// bytes, so a panic inside one is turned into a decode error rather than
// taking the caller down.
func decodeOne(b []byte, coding string, maxBytes int) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			return nil, errNotGzip
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "deflate":
		// RFC 9110 deflate is zlib-wrapped; many servers send raw DEFLATE.
		if isZlibHeader(b) {
			zr, err := zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			r = zr
		} else {
			r = flate.NewReader(bytes.NewReader(b))
		}
	case "br":
		r = brotli.NewReader(bytes.NewReader(b))
	default:
		return nil, errUnsupportedCoding
	}
	buf := bytes.NewBuffer(make([]byte, 0, decodedSizeHint(b, coding, maxBytes)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(maxBytes)+1)); err != nil {
		return nil, err
	}
	if buf.Len() > maxBytes {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// maxDeflateRatio is DEFLATE's largest possible expansion (258 bytes from
// two bits, about 1032:1).
const maxDeflateRatio = 1032

// decodedSizeHint guesses the decoded size so the output buffer rarely
// grows: gzip records it (modulo 2^32) in its last four bytes; otherwise
// four times the input. The hint never exceeds what the input could
// possibly expand to, nor MaxDecodedBytes, so a forged size cannot make a
// small body allocate much.
func decodedSizeHint(b []byte, coding string, maxBytes int) int {
	hint := 4 * len(b)
	if (coding == "gzip" || coding == "x-gzip") && len(b) >= 18 {
		hint = int(binary.LittleEndian.Uint32(b[len(b)-4:]))
	}
	if limit := maxDeflateRatio*len(b) + 1024; hint > limit {
		hint = limit
	}
	if hint > maxBytes {
		hint = maxBytes
	}
	return hint
}

// isZlibHeader reports whether b starts with a valid zlib (RFC 1950) header
// for DEFLATE.
func isZlibHeader(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint(b[0])<<8|uint(b[1]))%31 == 0
}

// looksTextual reports whether the start of b reads as text: valid UTF-8
// (a rune cut at the end of the sample is allowed) with no control bytes
// other than tab, newline, form feed and carriage return. Compressed streams
// fail this within their first bytes.
func looksTextual(b []byte) bool {
	const sample = 1024
	if len(b) > sample {
		b = b[:sample]
		for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	if !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if isControl(c) {
			return false
		}
	}
	return true
}

// isControl reports an ASCII control byte other than \t \n \f \r.
func isControl(c byte) bool {
	return (c < 0x20 && c != '\t' && c != '\n' && c != '\f' && c != '\r') || c == 0x7f
}

// Kind is the kind of document the extraction layer recognised. Its JSON
// form is the bare string.
type Kind string

// Document kinds.
const (
	KindHTML   Kind = "html"   // text/html, application/xhtml+xml: parsed, markup dropped
	KindJSON   Kind = "json"   // application/json and +json: must parse, counts as is
	KindCSV    Kind = "csv"    // text/csv, text/tab-separated-values: counts as is
	KindXML    Kind = "xml"    // application/xml, text/xml, +xml (feeds): counts as is
	KindText   Kind = "text"   // other text/*: counts as is
	KindBinary Kind = "binary" // images, PDF, archives, undecodable text: not judged
)

// mediaType returns the lower-cased media type and charset parameter of a
// Content-Type value; malformed parameters are ignored.
func mediaType(ct string) (mt, cs string) {
	if ct == "" {
		return "", ""
	}
	m, params, err := mime.ParseMediaType(ct)
	if err != nil {
		m, _, _ = strings.Cut(ct, ";")
		m = strings.ToLower(strings.TrimSpace(m))
		return m, ""
	}
	return m, params["charset"]
}

// kindOf maps a media type to a kind; ok is false when the body must be
// sniffed (no type, octet-stream, an unknown application/* type).
func kindOf(mt string) (k Kind, ok bool) {
	switch mt {
	case "text/html", "application/xhtml+xml":
		return KindHTML, true
	case "application/json", "text/json", "application/x-json":
		return KindJSON, true
	case "text/csv", "application/csv", "text/tab-separated-values":
		return KindCSV, true
	case "application/xml", "text/xml":
		return KindXML, true
	case "application/pdf", "application/zip", "application/gzip", "application/x-gzip",
		"application/x-tar", "application/x-7z-compressed", "application/vnd.rar",
		"application/wasm", "application/x-protobuf", "application/vnd.ms-excel",
		"application/msword":
		return KindBinary, true
	case "", "application/octet-stream", "binary/octet-stream", "application/unknown":
		return "", false
	}
	switch {
	case strings.HasSuffix(mt, "+json"):
		return KindJSON, true
	case strings.HasSuffix(mt, "+xml"):
		return KindXML, true
	case strings.HasPrefix(mt, "text/"):
		return KindText, true
	case strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/"),
		strings.HasPrefix(mt, "video/"), strings.HasPrefix(mt, "font/"),
		strings.HasPrefix(mt, "model/"), strings.HasPrefix(mt, "application/vnd.openxmlformats"):
		return KindBinary, true
	case mt == "application/javascript", mt == "application/ecmascript",
		mt == "application/x-ndjson", mt == "application/jsonl", mt == "application/x-yaml",
		mt == "application/yaml", mt == "application/toml", mt == "application/sql":
		return KindText, true
	}
	return "", false
}

// sniffKind guesses the kind of an untyped body from its first bytes.
func sniffKind(b []byte) Kind {
	b = bytes.TrimPrefix(b, utf8BOM)
	b = bytes.TrimLeft(b, " \t\r\n\f")
	head := b
	if len(head) > 1024 {
		head = head[:1024]
	}
	switch {
	case len(b) == 0:
		return KindText
	case b[0] == '<':
		if hasPrefixFold(b, "<?xml") && !bytes.Contains(bytes.ToLower(head), []byte("<html")) {
			return KindXML
		}
		return KindHTML
	case (b[0] == '{' || b[0] == '[') && jsonValid(b):
		return KindJSON
	case looksTextual(b):
		return KindText
	}
	return KindBinary
}

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// hasPrefixFold reports whether b starts with the ASCII prefix p, ignoring
// ASCII case.
func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && bytes.EqualFold(b[:len(p)], []byte(p))
}

// toUTF8 converts a document to UTF-8 and names the charset it used.
//
// HTML follows the WHATWG order through golang.org/x/net/html/charset: BOM,
// the Content-Type charset, a <meta> in the first 1024 bytes. Other text
// uses the BOM, then the Content-Type charset. Without a BOM or header
// charset, a body that is valid UTF-8 throughout is read as UTF-8 (the HTML
// prescan only samples 1 KiB and would otherwise guess windows-1252 for a
// page whose first kilobyte is ASCII); otherwise the meta charset, and
// failing that windows-1252, is used.
func toUTF8(b []byte, contentType, declared string, kind Kind) (text []byte, name string, notes []string) {
	if declared != "" {
		if e, _ := charset.Lookup(declared); e == nil {
			notes = append(notes, NoteCharsetUnknown)
		}
	}
	var enc encoding.Encoding
	certain := false
	if kind == KindHTML {
		enc, name, certain = charset.DetermineEncoding(b, contentType)
	} else {
		enc, name, certain = textEncoding(b, declared)
	}
	if !certain && name != "utf-8" && utf8.Valid(b) {
		enc, name = encoding.Nop, "utf-8"
	}
	if name == "utf-8" {
		return bytes.TrimPrefix(b, utf8BOM), name, notes
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		// x/text decoders replace invalid input rather than fail; keep the
		// bytes as a last resort so extraction still sees something.
		return b, name, notes
	}
	return bytes.TrimPrefix(out, utf8BOM), name, notes
}

// textEncoding picks the encoding of a non-HTML text body: BOM, then the
// declared charset, then UTF-8 if valid, else windows-1252.
func textEncoding(b []byte, declared string) (encoding.Encoding, string, bool) {
	switch {
	case bytes.HasPrefix(b, utf8BOM):
		return encoding.Nop, "utf-8", true
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		e, n := charset.Lookup("utf-16be")
		return e, n, true
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		e, n := charset.Lookup("utf-16le")
		return e, n, true
	}
	if declared != "" {
		if e, n := charset.Lookup(declared); e != nil {
			return e, n, true
		}
	}
	if utf8.Valid(b) {
		return encoding.Nop, "utf-8", false
	}
	e, n := charset.Lookup("windows-1252")
	return e, n, false
}
