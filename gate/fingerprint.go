package gate

import (
	"bytes"
	"net/url"
	"strings"
)

// Fingerprint thresholds. A wall is a page whose main content is the wall:
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

// Header signals: name and the values (case-insensitive) that mean a
// challenge was served instead of the resource.
var challengeHeaders = []struct {
	name   string
	values []string
}{
	{"cf-mitigated", []string{"challenge"}},                 // Cloudflare
	{"x-vercel-mitigated", []string{"challenge"}},           // Vercel firewall
	{"x-amzn-waf-action", []string{"challenge", "captcha"}}, // AWS WAF
}

// challengeTitles are whole page titles (normalised: lower case, spaces
// collapsed, "…" as "...") of challenge and block pages.
var challengeTitles = map[string]bool{
	"just a moment...":                          true,
	"just a moment":                             true,
	"attention required! | cloudflare":          true,
	"please wait...":                            true,
	"one more step":                             true,
	"ddos-guard":                                true,
	"access denied":                             true,
	"robot or human?":                           true,
	"are you a robot?":                          true,
	"human verification":                        true,
	"verify you are human":                      true,
	"pardon our interruption":                   true,
	"security checkpoint":                       true,
	"vercel security checkpoint":                true,
	"checking your browser":                     true,
	"checking your browser...":                  true,
	"bot verification":                          true,
	"captcha":                                   true,
	"you have been blocked":                     true,
	"sorry, you have been blocked":              true,
	"request rejected":                          true,
	"checking if the site connection is secure": true,
}

// challengeTitlePrefixes are long, specific title openings of challenge
// pages that go on with the site name.
var challengeTitlePrefixes = []string{
	"checking your browser before accessing",
	"attention required! |",
	"ddos-guard |",
}

// notFoundSegments are title segments (the title split at | · • – — : and
// " - ") that mark a "not found" page.
var notFoundSegments = map[string]bool{
	"404":                          true,
	"404 not found":                true,
	"not found":                    true,
	"page not found":               true,
	"404 page not found":           true,
	"page not found (404)":         true,
	"error 404":                    true,
	"404 error":                    true,
	"file not found":               true,
	"this page could not be found": true,
	"page does not exist":          true,
	"page cannot be found":         true,
	"the page cannot be found":     true,
	"seite nicht gefunden":         true,
	"página no encontrada":         true,
	"page introuvable":             true,
	"pagina non trovata":           true,
	"pagina niet gevonden":         true,
	"ページが見つかりません":                  true,
	"页面不存在":                        true,
}

// challengeIDs are element ids used by challenge pages.
var challengeIDs = []string{
	"challenge-form", "challenge-running", "challenge-stage", "challenge-body-text",
	"challenge-error-title", "challenge-error-text", "cf-challenge-running", "cf-challenge",
	"cf-please-wait", "cf-spinner-please-wait", "cf-chl-widget", "px-captcha",
	"sec-if-cpt-container", "ddg-captcha",
}

// challengeClasses are class tokens used by challenge pages.
var challengeClasses = []string{
	"cf-challenge", "challenge-form", "cf-browser-verification", "cf-im-under-attack",
	"px-captcha", "ddg-captcha",
}

// consentMarkers are substrings of ids and class tokens (lower-cased) of
// consent containers: generic names and the common consent platforms.
var consentMarkers = []string{
	"consent", "cookiewall", "cookie-wall", "cookie_wall", "cookiebot", "onetrust",
	"qc-cmp", "didomi", "usercentrics", "sp_message_container", "cmpbox", "gdpr",
}

// consentHosts are hosts that only serve consent interstitials.
var consentHosts = map[string]bool{
	"consent.google.com":  true,
	"consent.youtube.com": true,
	"consent.yahoo.com":   true,
	"guce.yahoo.com":      true,
	"consent.aol.com":     true,
}

// loginPaths are last path segments (lower case, without extension) of login
// pages: a redirect chain that ends on one when the requested URL was
// elsewhere is a login wall. Only the last segment counts, so a redirect to
// documentation such as /docs/login/overview is not one.
var loginPaths = map[string]bool{
	"login": true, "log-in": true, "log_in": true, "signin": true, "sign-in": true,
	"sign_in": true, "logon": true, "signon": true, "servicelogin": true, "authorize": true,
}

// notFoundPaths are last path segments (without extension) of "not
// found" pages that sites redirect to.
var notFoundPaths = map[string]bool{
	"404": true, "not-found": true, "notfound": true, "page-not-found": true,
	"error404": true, "error-404": true, "404-error": true,
}

// challengeID returns the matched id, or "".
func challengeID(v []byte) string {
	v = bytes.TrimSpace(v)
	for _, id := range challengeIDs {
		if bytes.EqualFold(v, []byte(id)) {
			return id
		}
	}
	return ""
}

// challengeClass returns the matched class token, or "".
func challengeClass(tok []byte) string {
	for _, c := range challengeClasses {
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
func matchConsentToken(v []byte) bool {
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
	for _, m := range consentMarkers {
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
}

// fingerprintLayer recognises walls by structure only: response headers, the
// title element, element ids and classes, forms and password inputs, script
// and iframe sources, and the redirect target. It never looks for words in
// the body text, so a page that talks about challenges is not one. It gives
// Unknown or Retrieved, never Failed. When several walls match, the first of
// challenge, consent, login, soft 404 decides.
func fingerprintLayer(in fingerprintInput) (LayerResult, []string) {
	var signals []string
	var reason Reason
	hit := func(r Reason, s string) {
		if reason == "" {
			reason = r
		}
		if len(signals) < maxSignals {
			signals = append(signals, s)
		}
	}
	for _, h := range challengeHeaders {
		v := strings.TrimSpace(in.ev.Header(h.name))
		for _, want := range h.values {
			if strings.EqualFold(v, want) {
				hit(ReasonChallenge, "header:"+h.name+"="+want)
			}
		}
	}
	doc := in.doc
	title := ""
	if doc != nil {
		title = normTitle(doc.title)
		if isChallengeTitle(title) {
			hit(ReasonChallenge, "title:"+quoteShort(title))
		}
		for _, s := range doc.challenge {
			hit(ReasonChallenge, s)
		}
		if doc.consentText >= ConsentWallMinText && doc.mainOutsideConsnt <= ConsentWallMaxOtherText {
			hit(ReasonConsentWall, "consent-container")
		}
	}
	fu := parseURL(in.final)
	if fu != nil && consentHosts[strings.ToLower(fu.Hostname())] {
		hit(ReasonConsentWall, "final-host:"+strings.ToLower(fu.Hostname()))
	}
	if doc != nil && doc.hasPassword && doc.mainOutsideForms <= LoginWallMaxOtherText {
		hit(ReasonLoginWall, "password-form")
	}
	if in.redirect && fu != nil {
		if last := lastSegment(fu.Path); loginPaths[last] {
			hit(ReasonLoginWall, "redirect-to:/"+last)
		}
	}
	if in.ev.Status >= 200 && in.ev.Status <= 299 {
		if doc != nil {
			for _, seg := range titleSegments(title) {
				if notFoundSegments[seg] {
					hit(ReasonSoft404, "title:"+quoteShort(title))
					break
				}
			}
		}
		if in.redirect && fu != nil {
			if last := lastSegment(fu.Path); notFoundPaths[last] {
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

func isChallengeTitle(t string) bool {
	if t == "" {
		return false
	}
	if challengeTitles[t] {
		return true
	}
	for _, p := range challengeTitlePrefixes {
		if strings.HasPrefix(t, p) {
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
