package gate

import (
	"net/url"
	"strconv"
	"strings"
)

// MaxRedirects is the most redirect hops a fetch may take under the
// built-in rulesets; more is [ReasonTooManyRedirects]. Ten is the common client default (browsers use
// about 20, curl 50 with -L, Go's net/http 10).
const MaxRedirects = 10

// maxDetailErrorChars bounds the transport error text quoted in a layer
// detail; the full text is in the receipt.
const maxDetailErrorChars = 200

// redirectChain returns the URLs of the exchange in order: the requested URL,
// each redirecting URL, and the final URL. A requested URL equal to the first
// redirect entry is listed once; with redirects the final URL is always its
// own hop, so a URL that redirects to itself shows as a loop. Without
// redirects a final URL other than the requested one is listed after it.
// With forms (CheckURLForms, gate/v3) "equal" and "other" compare
// normalised URLs (normURL), so that a client's form of the requested URL
// ("https://example.com/" for "https://example.com", the fragment
// dropped) is the same hop and not a loop; gate/v1 and gate/v2 compare
// the strings.
func redirectChain(ev Evidence, forms bool) []string {
	same := func(a, b string) bool { return a == b || forms && normURL(a) == normURL(b) }
	chain := make([]string, 0, len(ev.Redirects)+2)
	if ev.URL != "" && (len(ev.Redirects) == 0 || !same(ev.Redirects[0].URL, ev.URL)) {
		chain = append(chain, ev.URL)
	}
	for _, r := range ev.Redirects {
		chain = append(chain, r.URL)
	}
	if ev.FinalURL != "" && (len(ev.Redirects) > 0 || !same(ev.FinalURL, ev.URL)) {
		chain = append(chain, ev.FinalURL)
	}
	return chain
}

// finalURLOf returns the URL that produced the final response, or "" when
// the evidence does not say.
func finalURLOf(ev Evidence) string {
	if ev.FinalURL != "" {
		return ev.FinalURL
	}
	if len(ev.Redirects) == 0 {
		return ev.URL
	}
	return ""
}

// transportLayer judges the exchange. emptyBody reports whether the entity is
// empty or whitespace only; decodedByClient, that the body is not encoded
// as its Content-Encoding says (NoteEncodingNotApplied: a client decoded it
// and kept the headers), so its Content-Length counted other bytes.
func transportLayer(ev Evidence, chain []string, emptyBody, decodedByClient bool, rules *Rules) LayerResult {
	maxRedirects := rules.doc.Thresholds.MaxRedirects
	res := LayerResult{Layer: LayerTransport, Verdict: Failed}
	kind := ev.readKind()
	if kind != ReadHTTP && kind != ReadFile && kind != ReadTool {
		res.Reason = ReasonInvalidKind
		res.Detail = "read kind " + quoteShort(ev.Kind) + " is not http, file or tool"
		return res
	}
	if ev.Error != "" {
		res.Reason = ReasonTransportError
		if isTimeout(ev.Error) {
			res.Reason = ReasonTimeout
		}
		res.Detail = truncateRunes(receiptText(ev.Error), maxDetailErrorChars)
		return res
	}
	if u, ok := firstRepeat(chain); ok {
		res.Reason = ReasonRedirectLoop
		res.Detail = "redirect chain visits " + receiptText(u) + " twice"
		return res
	}
	if n := len(ev.Redirects); n > maxRedirects {
		res.Reason = ReasonTooManyRedirects
		res.Detail = strconv.Itoa(n) + " redirects, more than " + strconv.Itoa(maxRedirects)
		return res
	}
	if from, to, ok := downgrade(chain); ok {
		res.Reason = ReasonHTTPSDowngrade
		res.Detail = receiptText(from) + " is followed by " + receiptText(to)
		return res
	}
	if kind == ReadHTTP {
		for _, u := range chain {
			if s := schemeOf(u); s != "http" && s != "https" {
				res.Reason = ReasonInvalidURL
				res.Detail = "URL " + quoteShort(receiptText(u)) + " is not an http or https URL"
				return res
			}
		}
	}
	if kind != ReadHTTP && ev.Status == 0 {
		return localRead(ev, kind, emptyBody)
	}
	switch st := ev.Status; {
	case st < 100 || st > 599:
		res.Reason = ReasonInvalidStatus
		res.Detail = "status " + strconv.Itoa(st) + " without a transport error"
		return res
	case st < 200 || st > 299:
		res.Reason = HTTPStatusReason(st)
		res.Detail = "status " + strconv.Itoa(st)
		return res
	}
	if emptyBody {
		res.Reason = ReasonEmptyBody
		res.Detail = "status " + strconv.Itoa(ev.Status) + " with an empty or whitespace-only body"
		return res
	}
	if kind == ReadHTTP {
		if detail := shortBody(ev, decodedByClient, rules); detail != "" {
			res.Reason, res.Detail = ReasonSizeMismatch, detail
			return res
		}
	}
	return LayerResult{
		Layer:   LayerTransport,
		Verdict: Retrieved,
		Detail:  "status " + strconv.Itoa(ev.Status) + ", redirects: " + strconv.Itoa(len(ev.Redirects)),
	}
}

// shortBody says why an HTTP body is not the whole resource, or "": under
// CheckContentLength a body shorter than its Content-Length, and under
// Thresholds.MinPartialPermille a 206 whose Content-Range covers less than
// that share of the complete length. Headers that do not parse are not
// judged, nor is the Content-Length of a body a client decoded while
// keeping the headers (decodedByClient): it counted the encoded bytes,
// and a small or incompressible body is shorter decoded than encoded.
func shortBody(ev Evidence, decodedByClient bool, rules *Rules) string {
	if rules.checks[CheckContentLength] && !decodedByClient {
		if n, ok := parseSize(ev.Header("Content-Length")); ok && int64(len(ev.Body)) < n {
			return "body of " + strconv.Itoa(len(ev.Body)) + " bytes, Content-Length " + strconv.FormatInt(n, 10)
		}
	}
	if min := rules.doc.Thresholds.MinPartialPermille; min > 0 && ev.Status == 206 {
		first, last, complete, ok := parseContentRange(ev.Header("Content-Range"))
		if ok && complete > 0 && (last-first+1)*1000 < complete*int64(min) {
			return "206 of bytes " + strconv.FormatInt(first, 10) + "-" + strconv.FormatInt(last, 10) + " of " +
				strconv.FormatInt(complete, 10) + ", less than " + strconv.Itoa(min) + "/1000 of the resource"
		}
	}
	return ""
}

// maxSizeDigits bounds the digits of a size header, so that products of
// sizes and permille stay far inside int64.
const maxSizeDigits = 15

// parseSize reads a decimal size of at most maxSizeDigits digits.
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if len(s) > maxSizeDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64) // digits only: no sign, no underscores
	return int64(n), err == nil
}

// parseContentRange reads "bytes <first>-<last>/<complete>" (RFC 9110
// 14.4); ok is false for anything else, including an unknown complete
// length ("/*").
func parseContentRange(v string) (first, last, complete int64, ok bool) {
	unit, rest, found := strings.Cut(strings.TrimSpace(v), " ")
	if !found || !strings.EqualFold(unit, "bytes") {
		return 0, 0, 0, false
	}
	rng, total, found := strings.Cut(strings.TrimSpace(rest), "/")
	a, b, dash := strings.Cut(rng, "-")
	if !found || !dash {
		return 0, 0, 0, false
	}
	var okA, okB, okC bool
	first, okA = parseSize(a)
	last, okB = parseSize(b)
	complete, okC = parseSize(total)
	if !okA || !okB || !okC || last < first || last >= complete {
		return 0, 0, 0, false
	}
	return first, last, complete, true
}

// localRead judges a file or tool read without a status: the size the
// reader saw, and the body.
func localRead(ev Evidence, kind string, emptyBody bool) LayerResult {
	res := LayerResult{Layer: LayerTransport, Verdict: Failed}
	if kind == ReadFile && ev.Size != nil && *ev.Size != int64(len(ev.Body)) {
		res.Reason = ReasonSizeMismatch
		res.Detail = "file of " + strconv.FormatInt(*ev.Size, 10) + " bytes, " + strconv.Itoa(len(ev.Body)) + " read"
		return res
	}
	if emptyBody {
		res.Reason = ReasonEmptyBody
		res.Detail = kind + " read with an empty or whitespace-only body"
		return res
	}
	return LayerResult{Layer: LayerTransport, Verdict: Retrieved, Detail: kind + " read of " + strconv.Itoa(len(ev.Body)) + " bytes"}
}

// isTimeout reports whether a transport error text describes a timeout, in
// the words Go, Python, Node and curl use for it.
func isTimeout(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range [...]string{"timeout", "timed out", "deadline exceeded", "etimedout"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// firstRepeat returns the first URL of the chain (in chain order) that an
// earlier hop already visited, comparing normalised URLs.
func firstRepeat(chain []string) (string, bool) {
	if len(chain) < 2 {
		return "", false
	}
	seen := make(map[string]struct{}, len(chain))
	for _, u := range chain {
		k := normURL(u)
		if _, dup := seen[k]; dup {
			return u, true
		}
		seen[k] = struct{}{}
	}
	return "", false
}

// downgrade finds the first http:// URL that comes after an https:// one.
func downgrade(chain []string) (from, to string, ok bool) {
	lastHTTPS := ""
	for _, u := range chain {
		switch schemeOf(u) {
		case "https":
			lastHTTPS = u
		case "http":
			if lastHTTPS != "" {
				return lastHTTPS, u, true
			}
		}
	}
	return "", "", false
}

// schemeOf returns the lower-cased scheme of an absolute URL, or "".
func schemeOf(u string) string {
	u = strings.TrimSpace(u)
	i := strings.Index(u, "://")
	if i <= 0 {
		return ""
	}
	return strings.ToLower(u[:i])
}

// pageKey is normURL without the query: the scheme, host, port and path
// of a URL that parses as an absolute one, else the text as it is.
func pageKey(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	return normURL(u.String())
}

// normURL puts a URL in a canonical form for loop detection: lower-case
// scheme and host, default port dropped, empty path as "/", fragment dropped.
// Text that does not parse as an absolute URL is compared as it is.
func normURL(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	out := scheme + "://" + host + path
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + u.RawQuery
	}
	return out
}
