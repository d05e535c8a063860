package gate

import (
	"bytes"
	"net/url"
	"strings"
)

// Fingerprint thresholds of the built-in rulesets (a ruleset may set others:
// [Thresholds]). A wall is a page whose main content is the wall:
// the wall's container must hold some text, and the page's other main text
// (outside nav/header/footer/aside, outside the container) must be short.
// A real article with a consent banner or a sidebar login box has far more.
const (
	// ConsentWallMinText is the fewest readable characters (letters and
	// digits) a consent container must hold to count; an empty mount point
	// for a consent script is not a wall.
	ConsentWallMinText = 20
	// ConsentWallMaxOtherText is the most readable characters the main text
	// outside consent containers may have for the page to be a consent wall.
	ConsentWallMaxOtherText = 100
	// LoginWallMaxOtherText is the most readable characters the main text
	// outside forms may have for a page with a password input to be a login
	// wall.
	LoginWallMaxOtherText = 100
)

// challengeID returns the matched id, or "".
func (r *Rules) challengeID(v []byte) string {
	v = bytes.TrimSpace(v)
	for _, id := range r.doc.ChallengeIDs {
		if bytes.EqualFold(v, []byte(id)) {
			return id
		}
	}
	return ""
}

// challengeClass returns the matched class token, or "".
func (r *Rules) challengeClass(tok []byte) string {
	for _, c := range r.doc.ChallengeClasses {
		if bytes.EqualFold(tok, []byte(c)) {
			return c
		}
	}
	return ""
}

// challengeSrc recognises challenge scripts and iframes by their source:
// the script of Cloudflare's challenge orchestration (not its bot-detection
// script, which ordinary pages load too), and the captcha iframes of DataDome
// and Imperva (whose scripts ordinary pages load too).
func challengeSrc(iframe bool, v []byte) string {
	switch {
	case !iframe && bytes.Contains(v, []byte("/cdn-cgi/challenge-platform/")) && bytes.Contains(v, []byte("/orchestrate/")):
		return "cloudflare-challenge-platform"
	case iframe && bytes.Contains(v, []byte("captcha-delivery.com")):
		return "datadome-captcha"
	case iframe && bytes.Contains(v, []byte("_Incapsula_Resource")):
		return "incapsula"
	}
	return ""
}

// matchConsentToken reports whether an id or class token names a consent
// container.
func (r *Rules) matchConsentToken(v []byte) bool {
	if len(v) < 4 || len(v) > 128 {
		return false
	}
	var buf [128]byte
	low := buf[:len(v)]
	for i, c := range v {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	for _, m := range r.doc.ConsentMarkers {
		if bytes.Contains(low, []byte(m)) {
			return true
		}
	}
	return false
}

// normTitle lower-cases a title, turns "…" into "...", and collapses
// whitespace.
func normTitle(t string) string {
	t = strings.ReplaceAll(t, "…", "...")
	return strings.Join(strings.Fields(strings.ToLower(t)), " ")
}

// titleSegments splits a normalised title at the separators sites put
// between the page name and the site name.
func titleSegments(t string) []string {
	f := func(r rune) bool {
		switch r {
		case '|', '·', '•', '–', '—', ':':
			return true
		}
		return false
	}
	var out []string
	for _, part := range strings.FieldsFunc(t, f) {
		for _, seg := range strings.Split(part, " - ") {
			if seg = strings.TrimSpace(seg); seg != "" {
				out = append(out, seg)
			}
		}
	}
	return out
}

// fingerprintInput is what the fingerprint layer reads.
type fingerprintInput struct {
	ev       Evidence
	redirect bool     // the final URL differs from the requested one
	final    string   // final URL ("" if unknown)
	doc      *htmlDoc // nil unless the body is HTML
	kind     Kind     // the kind of document ("" when nothing decoded)
	text     []byte   // extracted text (HTML: title and body)
	readable int      // readable characters of the main text (HTML: outside chrome), wide ones weighted
}

// fingerprintLayer recognises walls: by structure (response headers, the
// title element, element ids and classes, forms and password inputs,
// script and iframe sources, the redirect target and the final host), and,
// on short pages only, by the ruleset's phrases (see [PhraseRule]), so an
// article that talks about challenges is not one. It gives Unknown or
// Retrieved, never Failed. When several walls match, the first of
// challenge, consent, domain rule, login, paywall, rate limit, parked
// domain, soft 404 decides.
func fingerprintLayer(in fingerprintInput, r *Rules) (LayerResult, []string) {
	var signals []string
	var reason Reason
	hit := func(rs Reason, s string) {
		if reason == "" {
			reason = rs
		}
		if len(signals) < maxSignals {
			signals = append(signals, s)
		}
	}
	th := r.doc.Thresholds
	for _, h := range r.doc.ChallengeHeaders {
		v := strings.TrimSpace(in.ev.Header(h.Name))
		for _, want := range h.Values {
			if strings.EqualFold(v, want) {
				hit(ReasonChallenge, "header:"+strings.ToLower(h.Name)+"="+strings.ToLower(want))
			}
		}
	}
	doc := in.doc
	title := ""
	if doc != nil {
		title = normTitle(doc.title)
		if r.isChallengeTitle(title) {
			hit(ReasonChallenge, "title:"+quoteShort(title))
		}
		for _, s := range doc.challenge {
			hit(ReasonChallenge, s)
		}
		if doc.consentText >= th.ConsentWallMinText && weighted(doc.mainOutsideConsnt, doc.consentWide, th.WideCharWeight) <= th.ConsentWallMaxOtherText {
			hit(ReasonConsentWall, "consent-container")
		}
	}
	fu := parseURL(in.final)
	if fu != nil {
		host := strings.ToLower(fu.Hostname())
		for _, d := range r.doc.Domains {
			if host == d.Host || (d.Subdomains && strings.HasSuffix(host, "."+d.Host)) {
				hit(d.Reason, "final-host:"+host)
				break
			}
		}
	}
	if doc != nil && doc.hasPassword && weighted(doc.mainOutsideForms, doc.formsWide, th.WideCharWeight) <= th.LoginWallMaxOtherText {
		hit(ReasonLoginWall, "password-form")
	}
	if in.redirect && fu != nil {
		if last := lastSegment(fu.Path); r.loginPaths[last] {
			hit(ReasonLoginWall, "redirect-to:/"+last)
		}
	}
	if s, rs := r.matchPhrases(in); rs != "" {
		hit(rs, s)
	}
	if in.ev.Status >= 200 && in.ev.Status <= 299 {
		if doc != nil {
			for _, seg := range titleSegments(title) {
				if r.rateLimitSegs[seg] {
					hit(ReasonRateLimited, "title:"+quoteShort(title))
					break
				}
			}
			for _, seg := range titleSegments(title) {
				if r.notFoundSegments[seg] {
					hit(ReasonSoft404, "title:"+quoteShort(title))
					break
				}
			}
		}
		if in.redirect && fu != nil {
			if last := lastSegment(fu.Path); r.notFoundPaths[last] {
				hit(ReasonSoft404, "redirect-to:/"+last)
			}
		}
	}
	if reason == "" {
		return LayerResult{Layer: LayerFingerprint, Verdict: Retrieved, Detail: "no wall recognised"}, nil
	}
	return LayerResult{
		Layer:   LayerFingerprint,
		Verdict: Unknown,
		Reason:  reason,
		Detail:  strings.Join(signals, ", "),
	}, signals
}

// phraseOrder is the order in which phrase reasons are tried: the first
// that matches decides.
var phraseOrder = [...]Reason{ReasonChallenge, ReasonConsentWall, ReasonLoginWall, ReasonPaywall,
	ReasonRateLimited, ReasonParkedDomain, ReasonSoft404}

// matchPhrases looks for the ruleset's phrases in a short HTML or text
// page and returns the signal ("phrase:<reason>:\"<phrase>\"") and reason
// of the first match, by phraseOrder then by rule order.
func (r *Rules) matchPhrases(in fingerprintInput) (string, Reason) {
	if len(r.phrases) == 0 || in.readable > r.maxPhraseText || (in.kind != KindHTML && in.kind != KindText) {
		return "", ""
	}
	text := normPhrase(string(in.text))
	if text == "" {
		return "", ""
	}
	for _, want := range phraseOrder {
		for _, ps := range r.phrases {
			if ps.reason != want || in.readable > ps.maxText {
				continue
			}
			for _, ph := range ps.phrases {
				if strings.Contains(text, ph) {
					return "phrase:" + strings.TrimPrefix(string(ps.reason), "fingerprint.") + ":" + quoteShort(ph), ps.reason
				}
			}
		}
	}
	return "", ""
}

// normPhrase puts text in the form phrases are matched in: lower case,
// typographic apostrophes and ellipses as ASCII, every run of whitespace
// (any Unicode space) as one space, trimmed.
func normPhrase(s string) string {
	s = strings.ToLower(s)
	s = phraseReplacer.Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// phraseReplacer maps typographic apostrophes and the ellipsis to ASCII.
// A strings.Replacer is safe for concurrent use and never changes.
var phraseReplacer = strings.NewReplacer("’", "'", "‘", "'", "…", "...", "ʼ", "'")

func (r *Rules) isChallengeTitle(t string) bool {
	if t == "" {
		return false
	}
	if r.challengeTitles[t] {
		return true
	}
	for _, p := range r.doc.ChallengeTitlePrefixes {
		if strings.HasPrefix(t, normTitle(p)) {
			return true
		}
	}
	return false
}

// parseURL parses an absolute URL, or returns nil.
func parseURL(s string) *url.URL {
	if s == "" {
		return nil
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return nil
	}
	return u
}

// lastSegment returns the last non-empty path segment, lower-cased, without
// a file extension.
func lastSegment(path string) string {
	path = strings.TrimRight(strings.ToLower(path), "/")
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		path = path[i+1:]
	}
	if i := strings.IndexByte(path, '.'); i > 0 {
		path = path[:i]
	}
	return path
}
