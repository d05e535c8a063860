// Package gate decides, from evidence and outside any model, whether a fetch
// really read its resource, and makes tool errors and long tool outputs safe
// to show a model.
//
// Everything here is pure: no network, no files, no clock, no logging, no
// randomness. The same input always gives the same output, so a verdict
// recomputed at replay is the verdict that was stored. The HTTP endpoints,
// blob storage and live fetching live elsewhere and call in:
//
//	POST /contexts/{ctx}/fetches
//	  1. decode the request into an [Evidence]; set Evidence.Body from the
//	     request (it has no JSON form);
//	  2. res := gate.ClassifyWith(ev, rules) (gate.Classify for the
//	     built-in ruleset);
//	  3. store ev.Body as a blob: its address is res.Receipt.BodySHA256;
//	  4. store res.Receipt as the fetch_verdict artifact (only the gate writes
//	     that type); res.Text may be stored as a document extracted_from it.
//
//	POST /contexts/{ctx}/tool-results
//	  error:  v := gate.SanitizeError(msg, opt); store v.Masked as a blob;
//	          keep v.ModelView, v.TotalChars, v.Truncated in the tool_error.
//	  output: full := gate.PrepareOutput(out, opt); ref := store full as a blob;
//	          v := gate.SanitizeOutput(full, ref, opt); keep v in the tool_output.
//
// # Glossary
//
// Verdict: [Retrieved] (the fetch read real content), [Unknown] (bytes
// arrived, but the gate cannot vouch for them) or [Failed] (the fetch did
// not deliver). The strictest layer verdict wins: Failed > Unknown >
// Retrieved. Only Retrieved confirms a fact ([Verdict.Confirmed]).
//
// Layer: one of three independent judges, always all run.
//   - transport ([LayerTransport]): the exchange. Gives Failed or passes.
//   - extraction ([LayerExtraction]): undoes Content-Encoding (gzip,
//     deflate, br), finds the charset (BOM, header, <meta>, via
//     golang.org/x/net/html/charset), recognises the kind of document, and
//     separates readable text: HTML is tokenized with golang.org/x/net/html,
//     script, style, noscript, template, svg, math, iframe, object and select
//     content and all markup dropped, whitespace collapsed; JSON, CSV, XML
//     and plain text count as they are. Gives Unknown when there is too little
//     readable text for the kind of document, Failed for a corrupt stream.
//   - fingerprint ([LayerFingerprint]): known walls, by structure (signal
//     headers, the title element, element ids and classes, password forms,
//     consent containers, challenge script and iframe sources, the redirect
//     target, the final host) and, from gate/v2, by phrases in the text of
//     short pages only (see [PhraseRule]), so an article about challenge
//     pages is Retrieved; from gate/v3 also meta-refresh stubs, stock
//     placeholders and JSON error envelopes. Gives Unknown or passes, never
//     Failed.
//
// Deciding layer: the layer whose verdict is the result's; among layers with
// the same strictest verdict the most specific wins (transport, then
// fingerprint, then extraction: "a challenge page" explains "too little
// text"). A Retrieved result has no deciding layer and no reason.
//
// Reason code: "<layer>.<what>", stable within a ruleset.
//
//	transport.error                 transport error (Failed)
//	transport.timeout               transport error that is a timeout (Failed)
//	transport.redirect_loop         the chain visits a URL twice ((v3) a URL and its own other form, e.g. with
//	                                "/" or without its fragment, are one hop, not two) (Failed)
//	transport.too_many_redirects    more than MaxRedirects hops (Failed)
//	transport.https_downgrade       http:// after https:// in the chain (Failed)
//	transport.invalid_status        status 0 without error, or outside 100–599 (Failed)
//	transport.http_<code>           final status outside 2xx, e.g. http_403 (Failed)
//	transport.empty_body            empty or whitespace-only body (Failed)
//	transport.size_mismatch         a file read of fewer or more bytes than the file's size; (v3) an HTTP body
//	                                shorter than its Content-Length (unless a client decoded it and kept the
//	                                headers), a 206 of a small part of the resource (Failed)
//	transport.invalid_kind          evidence kind other than http, file, tool (Failed)
//	extraction.decode_error         corrupt or truncated gzip/deflate/br stream (Failed)
//	extraction.unsupported_encoding a Content-Encoding other than gzip, deflate, br (Unknown)
//	extraction.too_large            more than MaxDecodedBytes after decoding (Unknown)
//	extraction.binary               not text: image, PDF, archive, control bytes; (v3) HTML that is a compressed stream (Unknown)
//	extraction.invalid_json         JSON that does not parse (Unknown)
//	extraction.script_shell         HTML with scripts and too little text ((v3) outside site chrome) (Unknown)
//	extraction.too_little_text      too little readable text, no scripts (Unknown)
//	fingerprint.challenge           bot challenge or block page (Unknown)
//	fingerprint.consent_wall        consent container is the main content (Unknown)
//	fingerprint.login_wall          password form is the main content, or redirect to a login path (Unknown)
//	fingerprint.soft_404            2xx page titled "not found" ((v3) and short), redirect to a 404 path, (v2) a short
//	                                page saying so, or (v3) a deep URL redirected to another site's home page (Unknown)
//	fingerprint.paywall             (v2) a short page that is a paywall or metering notice (Unknown)
//	fingerprint.rate_limited        (v2) a 2xx page titled or (short) saying "too many requests" (Unknown)
//	fingerprint.parked_domain       (v2) a short page of a parked or for-sale domain, or a parking host (Unknown)
//	fingerprint.placeholder         (v3) a short stock placeholder: server welcome page, under construction, lorem ipsum (Unknown)
//	fingerprint.redirect_stub       (v3) a page with little text whose meta refresh leads elsewhere (Unknown)
//	fingerprint.soft_error          (v3) a 2xx JSON error envelope: {"ok": false}, {"error": …} without data (Unknown)
//
// Ruleset: the data the layers apply ([Rules]): thresholds ([Thresholds];
// the named constants [MaxRedirects], [MaxDecodedBytes], [MinHTMLText], …
// are the built-in values), fingerprint titles, ids, classes, paths, phrases
// by language and per-domain rules. The built-in rulesets are embedded JSON
// files (rules/gate-v1.json, rules/gate-v2.json, rules/gate-v3.json); an
// operator's file is parsed by [ParseRules] and may extend one. A receipt names its ruleset
// and hash; [Rulesets.Lookup] finds the ruleset to re-derive a verdict with
// and refuses an unknown one. [Classify] applies gate/v3, [ClassifyWith]
// any. Changing any rule means a new ruleset name.
//
// Read kind: evidence is an HTTP exchange by default; kind "file" (a local
// file: path, size, bytes) and "tool" (a tool's read of a resource) are
// judged by their bytes without a status: a zero status is not a failure
// for them.
//
// Receipt: the self-contained, deterministic record of a verdict ([Receipt]):
// ruleset version, requested and final URL, redirect chain, status, content
// type and encoding, kind, charset, title, raw, decoded and extracted sizes,
// readable characters, "sha256:<hex>" of the raw body, matched signals,
// notes, and each layer's verdict, reason and detail. URLs and errors in it
// are secret-masked.
//
// Model view: the text a model may be shown for a tool result: an error
// framed by [ErrorPrefix], with role tags, chat-template tokens, CDATA
// markers and code-fence lines removed, cut at MaxErrorChars characters with
// [TruncationMarker]; a long output as head, one notice line naming the
// omitted and total characters and the blob, and tail. Secrets are masked
// before anything is stored: by shape ([MaskSecrets]) and by value, for
// the values an operator declared ([Secrets], carried by
// [SanitizeOptions]). A model view is still untrusted data, never an
// instruction.
package gate
