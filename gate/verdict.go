package gate

import (
	"strconv"
	"strings"
)

// RulesetVersion names the default built-in ruleset ([BuiltinRules]): the
// rules, thresholds and reason codes [Classify] applies. Every [Receipt]
// carries its ruleset's name and hash, so a verdict can always be traced
// to the rules that produced it; any change that can alter a verdict for
// some evidence must be a new ruleset with a new name.
const RulesetVersion = "gate/v3"

// Verdict is the outcome of classifying a fetch: [Retrieved], [Failed] or
// [Unknown]. Its JSON form is the bare string.
type Verdict string

// The three verdicts, from the most to the least trusting.
const (
	// Retrieved: every layer found a real read of readable content.
	Retrieved Verdict = "RETRIEVED"
	// Unknown: the bytes arrived but the gate cannot vouch for them (a script
	// shell, a wall, too little text, an encoding it cannot read).
	Unknown Verdict = "UNKNOWN"
	// Failed: the fetch did not deliver the resource (error status, transport
	// error, unsafe redirect chain, empty or corrupt body).
	Failed Verdict = "FAILED"
)

// Valid reports whether v is one of the three verdicts.
func (v Verdict) Valid() bool { return v.Severity() >= 0 }

// Severity orders verdicts by strictness: 0 for [Retrieved], 1 for
// [Unknown], 2 for [Failed] and -1 for anything else. The strictest layer
// verdict (highest severity) is the verdict of a fetch.
func (v Verdict) Severity() int {
	switch v {
	case Retrieved:
		return 0
	case Unknown:
		return 1
	case Failed:
		return 2
	}
	return -1
}

// Confirmed reports whether v confirms the fetched fact: only [Retrieved]
// does. A fetch_verdict artifact is a trust root exactly when this is false.
func (v Verdict) Confirmed() bool { return v == Retrieved }

// Layer names one of the three classification layers. Its JSON form is the
// bare string.
type Layer string

// The classification layers, in evaluation order.
const (
	// LayerTransport judges the exchange itself: status, transport error,
	// redirect chain, empty body.
	LayerTransport Layer = "transport"
	// LayerExtraction judges whether readable content could be separated from
	// the raw bytes: content decoding, charset, kind of document, amount of text.
	LayerExtraction Layer = "extraction"
	// LayerFingerprint recognises known walls by structure (headers, title,
	// element ids and classes, forms, redirect targets). It can only lower a
	// verdict to [Unknown].
	LayerFingerprint Layer = "fingerprint"
)

// Reason is a stable, machine-readable code "<layer>.<what>" saying why a
// layer gave its verdict, e.g. "transport.http_403". Codes are part of the
// ruleset: they are never renamed within one [RulesetVersion]. A passing
// layer has the empty Reason.
type Reason string

// Transport reasons. All give [Failed]. See also [HTTPStatusReason].
const (
	// ReasonTimeout: the transport error text says the fetch timed out.
	ReasonTimeout Reason = "transport.timeout"
	// ReasonTransportError: any other transport error (connection refused,
	// DNS failure, reset, TLS failure, a body read that broke off).
	ReasonTransportError Reason = "transport.error"
	// ReasonRedirectLoop: the redirect chain visits one URL twice.
	ReasonRedirectLoop Reason = "transport.redirect_loop"
	// ReasonTooManyRedirects: more than [MaxRedirects] hops.
	ReasonTooManyRedirects Reason = "transport.too_many_redirects"
	// ReasonHTTPSDowngrade: an http:// URL follows an https:// one anywhere in
	// the chain.
	ReasonHTTPSDowngrade Reason = "transport.https_downgrade"
	// ReasonInvalidStatus: no status (0) without a transport error, or a
	// status outside 100–599.
	ReasonInvalidStatus Reason = "transport.invalid_status"
	// ReasonEmptyBody: the body is empty or only whitespace (after content
	// decoding, when that succeeds).
	ReasonEmptyBody Reason = "transport.empty_body"
	// ReasonSizeMismatch: a file read returned fewer or more bytes than the
	// file's size (a short or torn read); from gate/v3 also an HTTP body
	// shorter than its Content-Length, or a 206 whose Content-Range covers
	// too little of the resource.
	ReasonSizeMismatch Reason = "transport.size_mismatch"
	// ReasonInvalidKind: the evidence's kind is not http, file or tool.
	ReasonInvalidKind Reason = "transport.invalid_kind"
	// ReasonInvalidURL: an HTTP read whose URL (or a URL of its redirect
	// chain) is not http or https — a javascript:, data: or file: URL is
	// not a fetch of the web.
	ReasonInvalidURL Reason = "transport.invalid_url"
)

// Extraction reasons.
const (
	// ReasonDecodeError ([Failed]): the body does not decode under its
	// Content-Encoding (truncated or corrupt stream): what arrived is not the
	// whole resource.
	ReasonDecodeError Reason = "extraction.decode_error"
	// ReasonUnsupportedEncoding ([Unknown]): a Content-Encoding the gate
	// cannot decode (zstd, compress, …).
	ReasonUnsupportedEncoding Reason = "extraction.unsupported_encoding"
	// ReasonTooLarge ([Unknown]): the decoded body exceeds [MaxDecodedBytes]
	// (a decompression bomb or a document too big to judge).
	ReasonTooLarge Reason = "extraction.too_large"
	// ReasonBinary ([Unknown]): a media type or content the gate cannot read
	// as text (image, PDF, archive, control-character soup).
	ReasonBinary Reason = "extraction.binary"
	// ReasonInvalidJSON ([Unknown]): declared or sniffed JSON that does not
	// parse (truncated, or an HTML error page served as JSON).
	ReasonInvalidJSON Reason = "extraction.invalid_json"
	// ReasonScriptShell ([Unknown]): an HTML document with scripts and too
	// little readable text: it needs a browser to render.
	ReasonScriptShell Reason = "extraction.script_shell"
	// ReasonTooLittleText ([Unknown]): too little readable text for the kind
	// of document, with no script to explain it.
	ReasonTooLittleText Reason = "extraction.too_little_text"
)

// Fingerprint reasons. All give [Unknown].
const (
	// ReasonChallenge: a bot challenge or block page (signal header, known
	// title, challenge element ids/classes, challenge scripts or iframes).
	ReasonChallenge Reason = "fingerprint.challenge"
	// ReasonConsentWall: a consent container is the page's main content.
	ReasonConsentWall Reason = "fingerprint.consent_wall"
	// ReasonLoginWall: a password form is the page's main content, or the
	// chain redirected to a login path.
	ReasonLoginWall Reason = "fingerprint.login_wall"
	// ReasonSoft404: a 2xx page whose title says "not found", or a redirect
	// to a 404 path, or (gate/v2) a short page saying so.
	ReasonSoft404 Reason = "fingerprint.soft_404"
	// ReasonPaywall (gate/v2): a short page that is a paywall or a metering
	// notice ("subscribe to continue reading").
	ReasonPaywall Reason = "fingerprint.paywall"
	// ReasonParkedDomain (gate/v2): a short page of a parked or for-sale
	// domain.
	ReasonParkedDomain Reason = "fingerprint.parked_domain"
	// ReasonRateLimited (gate/v2): a 2xx page whose title or short text
	// says the client is rate limited ("429 Too Many Requests").
	ReasonRateLimited Reason = "fingerprint.rate_limited"
	// ReasonPlaceholder (gate/v3): a short page that is a stock
	// placeholder: a web server's welcome page, "under construction",
	// lorem ipsum filler.
	ReasonPlaceholder Reason = "fingerprint.placeholder"
	// ReasonRedirectStub (gate/v3): an HTML page with little text of its
	// own whose <meta http-equiv="refresh"> sends the reader to another
	// URL: the resource is there, not here.
	ReasonRedirectStub Reason = "fingerprint.redirect_stub"
	// ReasonSoftError (gate/v3): a 2xx JSON answer that is an error
	// envelope ({"ok": false, …}, {"error": …} without data).
	ReasonSoftError Reason = "fingerprint.soft_error"
)

// httpStatusPrefix starts every status reason.
const httpStatusPrefix = "transport.http_"

// HTTPStatusReason returns the [Failed] transport reason for a final status
// outside 2xx: "transport.http_<code>", e.g. "transport.http_403".
func HTTPStatusReason(code int) Reason {
	return Reason(httpStatusPrefix + strconv.Itoa(code))
}

// Layer returns the layer a reason belongs to (the part before the first
// dot), or "" for the empty reason.
func (r Reason) Layer() Layer {
	s := string(r)
	if i := strings.IndexByte(s, '.'); i > 0 {
		return Layer(s[:i])
	}
	return ""
}

// LayerResult is one layer's verdict with its reason and a short
// human-readable detail (numbers, the matched signal). Detail is for people;
// programs should switch on Reason.
type LayerResult struct {
	Layer   Layer   `json:"layer"`            // which layer
	Verdict Verdict `json:"verdict"`          // its verdict
	Reason  Reason  `json:"reason,omitempty"` // empty when it passed
	Detail  string  `json:"detail,omitempty"` // numbers and signals, for people
}

// precedence is the tie-break among layers that give the same (strictest)
// verdict: the most specific diagnosis decides. Transport only gives FAILED
// and fingerprint only UNKNOWN, so the order matters for transport vs
// extraction (both FAILED: transport is the cause) and fingerprint vs
// extraction (both UNKNOWN: a named wall explains the missing text).
var precedence = [...]Layer{LayerTransport, LayerFingerprint, LayerExtraction}

// decide combines layer results: the strictest verdict wins, ties go by
// precedence. With every layer passing, the verdict is Retrieved with no
// deciding layer.
func decide(layers []LayerResult) (Verdict, Layer, Reason) {
	best := Retrieved
	for _, l := range layers {
		if l.Verdict.Severity() > best.Severity() {
			best = l.Verdict
		}
	}
	if best == Retrieved {
		return Retrieved, "", ""
	}
	for _, name := range precedence {
		for _, l := range layers {
			if l.Layer == name && l.Verdict == best {
				return best, l.Layer, l.Reason
			}
		}
	}
	return best, "", "" // unreachable: some layer gave best
}
