package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Receipt limits: untrusted header and page text quoted in a receipt is cut
// to these many characters, so a receipt stays small whatever arrives.
const (
	maxReceiptTitle = 256
	maxReceiptField = 256
	maxReceiptError = 2048
)

// Result is the outcome of [Classify]: the verdict, the layer and reason
// that decided it, every layer's own result, the receipt to store, and the
// extracted text.
type Result struct {
	// Verdict is the strictest layer verdict.
	Verdict Verdict `json:"verdict"`
	// Layer is the deciding layer; empty when the verdict is Retrieved (no
	// layer objected). Among layers with the same strictest verdict the most
	// specific decides: transport, then fingerprint, then extraction.
	Layer Layer `json:"layer,omitempty"`
	// Reason is the deciding layer's reason code; empty when Retrieved.
	Reason Reason `json:"reason,omitempty"`
	// Layers holds the transport, extraction and fingerprint results, in
	// that order, always all three.
	Layers []LayerResult `json:"layers"`
	// Receipt is the self-contained record to store as the fetch_verdict.
	Receipt Receipt `json:"receipt"`
	// Text is the extracted readable text (UTF-8): for HTML the title, a
	// blank line and the body text with one block per line; for JSON, CSV,
	// XML and plain text the decoded body. It may be long; it is not part of
	// the JSON form. It is empty when nothing could be decoded.
	Text string `json:"-"`
}

// Receipt records how a verdict was reached, in a form that can be stored
// and shown to a person: what was fetched, what arrived, what each layer
// said, under which ruleset. It is deterministic: the same evidence always
// gives the same receipt (no time, no randomness, no map order).
//
// URLs and the error text are secret-masked ([MaskSecrets]) before they are
// put here; the title, content type and error are cut to bounded lengths.
type Receipt struct {
	// Ruleset is the name of the ruleset applied ([RulesetVersion] for
	// [Classify]).
	Ruleset string `json:"ruleset"`
	// RulesetHash is its [Rules.Hash], "sha256:<hex>". Receipts of the
	// first release have none: an empty hash with ruleset gate/v1 means the
	// built-in gate/v1 ([Rulesets.Lookup]).
	RulesetHash string `json:"ruleset_hash,omitempty"`
	// Source is the evidence's read kind: empty for HTTP (the default),
	// "file" or "tool".
	Source string `json:"source,omitempty"`
	// Verdict, Layer and Reason repeat the [Result]'s.
	Verdict Verdict `json:"verdict"`
	Layer   Layer   `json:"layer,omitempty"`  // see Result.Layer
	Reason  Reason  `json:"reason,omitempty"` // see Result.Reason
	// URL is the requested URL.
	URL string `json:"url"`
	// FinalURL is the URL that gave the final response (URL when there were
	// no redirects; empty when the evidence does not say).
	FinalURL string `json:"final_url,omitempty"`
	// Redirects is the redirect chain as reported; never nil.
	Redirects []Redirect `json:"redirects"`
	// Status is the final HTTP status (0 if none).
	Status int `json:"status"`
	// Path, Size and Tool repeat a file or tool read's evidence.
	Path string `json:"path,omitempty"`
	Size *int64 `json:"size,omitempty"`
	Tool string `json:"tool,omitempty"`
	// Error is the transport error text, if any.
	Error string `json:"error,omitempty"`
	// ContentType is the Content-Type header as received.
	ContentType string `json:"content_type,omitempty"`
	// ContentEncoding is the Content-Encoding header as received.
	ContentEncoding string `json:"content_encoding,omitempty"`
	// Kind is the kind of document recognised.
	Kind Kind `json:"kind,omitempty"`
	// Charset is the encoding the text was read in (WHATWG name, e.g.
	// "utf-8", "shift_jis", "windows-1252").
	Charset string `json:"charset,omitempty"`
	// Title is the HTML title, whitespace collapsed.
	Title string `json:"title,omitempty"`
	// RawBytes is the body size as received.
	RawBytes int `json:"raw_bytes"`
	// DecodedBytes is the body size after content decoding (0 when decoding
	// failed).
	DecodedBytes int `json:"decoded_bytes"`
	// ExtractedBytes is the size of the extracted text (Result.Text).
	ExtractedBytes int `json:"extracted_bytes"`
	// ReadableChars counts the letters and digits of the extracted text (for
	// HTML, of the body text only): the quantity the thresholds apply to.
	ReadableChars int `json:"readable_chars"`
	// BodySHA256 is "sha256:<64 lowercase hex>" of the raw body as
	// received: the address of the body blob.
	BodySHA256 string `json:"body_sha256"`
	// Signals lists the structural fingerprint signals that matched, e.g.
	// "header:cf-mitigated=challenge", "id:cf-please-wait".
	Signals []string `json:"signals,omitempty"`
	// Notes lists tolerated irregularities (NoteEncodingNotApplied,
	// NoteCharsetUnknown).
	Notes []string `json:"notes,omitempty"`
	// Layers holds each layer's verdict, reason and detail.
	Layers []LayerResult `json:"layers"`
}

// Classify judges one fetch from its evidence and returns the verdict with
// its receipt. It is a pure function: no I/O, no clock, no randomness, safe
// for concurrent use, and deterministic (the same evidence always gives an
// identical Result). It never panics on any input, and it does not keep or
// modify ev.Body.
//
// The three layers always all run, each on what it can see:
//   - transport: error, redirect loop, more than MaxRedirects hops, an
//     https→http downgrade, a final status outside 2xx, an empty body →
//     Failed;
//   - extraction: undo Content-Encoding (gzip, deflate, br), pick the
//     charset, recognise the kind of document, extract readable text and
//     compare it with the thresholds → Unknown (or Failed for a corrupt
//     stream);
//   - fingerprint: challenge, consent and login walls and soft 404s,
//     recognised by structure only → Unknown.
//
// The strictest layer verdict wins (Failed > Unknown > Retrieved).
func Classify(ev Evidence) Result { return ClassifyWith(ev, BuiltinRules()) }

// ClassifyWith is [Classify] under the given ruleset (nil means
// [BuiltinRules]); the receipt names it and its hash. A verifier passes the
// ruleset the receipt names ([Rulesets.Lookup]) to re-derive a verdict.
func ClassifyWith(ev Evidence, rules *Rules) Result {
	if rules == nil {
		rules = BuiltinRules()
	}
	th := rules.doc.Thresholds
	contentType := ev.contentType()
	contentEncoding := ev.Header("Content-Encoding")
	dec := decodeContent(ev.Body, contentEncoding, th.MaxDecodedBytes)
	empty := len(bytes.TrimSpace(ev.Body)) == 0 ||
		(dec.status == decodeOK && len(bytes.TrimSpace(dec.body)) == 0)

	chain := redirectChain(ev, rules.checks[CheckURLForms])
	transport := transportLayer(ev, chain, empty, slices.Contains(dec.notes, NoteEncodingNotApplied), rules)
	extractRes, ex := extractionLayer(dec, contentType, rules)
	final := finalURLOf(ev)
	var main int
	switch {
	case ex.doc != nil:
		main = weighted(ex.doc.main, ex.doc.mainWide, th.WideCharWeight)
	case th.WideCharWeight > 1 && ex.readable <= rules.maxPhraseText:
		main = weighted(ex.readable, countWide(ex.text), th.WideCharWeight)
	default:
		main = ex.readable // wide characters can only add: no phrase rule applies anyway
	}
	redirect := final != "" && ev.URL != "" && normURL(final) != normURL(ev.URL)
	if rules.checks[CheckURLForms] {
		// The fingerprints of a redirect's target (a login or not-found
		// path, another site's home) need a redirect that moved the page:
		// one to the requested host and path (a query or fragment changed,
		// or only masked in the receipt) brought the reader nowhere else.
		redirect = redirect && pageKey(final) != pageKey(ev.URL)
	}
	fpRes, signals := fingerprintLayer(fingerprintInput{
		ev:       ev,
		redirect: redirect,
		final:    final,
		doc:      ex.doc,
		kind:     ex.kind,
		text:     ex.text,
		readable: main,
	}, rules)

	layers := []LayerResult{transport, extractRes, fpRes}
	verdict, layer, reason := decide(layers)

	sum := sha256.Sum256(ev.Body)
	rc := Receipt{
		Source:          receiptSource(ev),
		Ruleset:         rules.Name(),
		RulesetHash:     rules.Hash(),
		Verdict:         verdict,
		Layer:           layer,
		Reason:          reason,
		URL:             receiptText(ev.URL),
		FinalURL:        receiptText(final),
		Redirects:       make([]Redirect, 0, len(ev.Redirects)),
		Status:          ev.Status,
		Path:            truncateRunes(receiptText(ev.Path), maxReceiptError),
		Tool:            truncateRunes(receiptText(ev.Tool), maxReceiptField),
		Size:            ev.Size,
		Error:           truncateRunes(receiptText(ev.Error), maxReceiptError),
		ContentType:     truncateRunes(validUTF8(contentType), maxReceiptField),
		ContentEncoding: truncateRunes(validUTF8(contentEncoding), maxReceiptField),
		Kind:            ex.kind,
		Charset:         ex.charset,
		RawBytes:        len(ev.Body),
		ExtractedBytes:  len(ex.text),
		ReadableChars:   ex.readable,
		BodySHA256:      "sha256:" + hex.EncodeToString(sum[:]),
		Signals:         signals,
		Layers:          append([]LayerResult(nil), layers...),
	}
	if dec.status == decodeOK {
		rc.DecodedBytes = len(dec.body)
	}
	if ex.doc != nil {
		rc.Title = truncateRunes(strings.Join(strings.Fields(ex.doc.title), " "), maxReceiptTitle)
	}
	for _, r := range ev.Redirects {
		rc.Redirects = append(rc.Redirects, Redirect{URL: receiptText(r.URL), Status: r.Status})
	}
	rc.Notes = append(append(rc.Notes, dec.notes...), ex.notes...)

	return Result{
		Verdict: verdict,
		Layer:   layer,
		Reason:  reason,
		Layers:  layers,
		Receipt: rc,
		Text:    string(ex.text),
	}
}

// receiptSource is the receipt's Source: "" for HTTP.
func receiptSource(ev Evidence) string {
	if ev.readKind() == ReadHTTP {
		return ""
	}
	return truncateRunes(validUTF8(ev.Kind), maxReceiptField)
}

// receiptText makes untrusted text fit for a receipt: valid UTF-8, secrets
// masked.
func receiptText(s string) string { return MaskSecrets(validUTF8(s)) }

// validUTF8 replaces invalid UTF-8 with U+FFFD, so receipts always hash and
// encode canonically.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
