package gate

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html/atom"
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
	for _, p := range r.doc.ConsentIgnorePrefixes {
		if bytes.HasPrefix(low, []byte(p)) {
			return false
		}
	}
	for _, m := range r.doc.ConsentMarkers {
		if bytes.Contains(low, []byte(m)) {
			return true
		}
	}
	return false
}

// consentIgnored reports an element whose ids and classes are not looked
// at for consent markers (ConsentIgnoreElements: a blog's <article
// class="tag-gdpr"> is not a consent banner).
func (r *Rules) consentIgnored(a atom.Atom, name []byte) bool {
	if len(r.consentIgnore) == 0 {
		return false
	}
	if a != 0 {
		return r.consentIgnore[a.String()]
	}
	return r.consentIgnore[string(name)]
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
// article that talks about challenges is not one; from gate/v3 also
// meta-refresh stubs, redirects to another site's home page and JSON error
// envelopes. It gives Unknown or Retrieved, never Failed. When several
// walls match, the first of challenge, consent, domain rule, login, phrase
// (paywall, rate limit, parked domain, soft 404, placeholder), redirect
// stub, title (rate limit, soft 404), soft 404 redirect, soft error
// decides.
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
		} else if suffix := r.loginSuffix(fu.Path); suffix != "" {
			hit(ReasonLoginWall, "redirect-to:"+suffix)
		}
	}
	if s, rs := r.matchPhrases(in); rs != "" {
		hit(rs, s)
	}
	if doc != nil && th.MetaRefreshMaxText > 0 && doc.refresh != "" && in.readable <= th.MetaRefreshMaxText {
		if target, elsewhere := refreshTarget(in, doc.refresh); elsewhere {
			hit(ReasonRedirectStub, "meta-refresh:"+quoteShort(receiptText(target)))
		}
	}
	if in.ev.Status >= 200 && in.ev.Status <= 299 {
		// gate/v3 guards the title rules with the length of the main text.
		if doc != nil && (th.TitleRuleMaxText == 0 || in.readable <= th.TitleRuleMaxText) {
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
			if host, ok := homeRedirect(in.ev.URL, fu, th.HomeRedirectMinSegments); ok {
				hit(ReasonSoft404, "redirect-to-home:"+host)
			}
		}
		if th.JSONErrorMaxMembers > 0 && in.kind == KindJSON {
			if s := r.jsonErrorEnvelope(in.text); s != "" {
				hit(ReasonSoftError, s)
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
	ReasonRateLimited, ReasonParkedDomain, ReasonSoft404, ReasonPlaceholder}

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
	var hosts []string // the page's hosts, for host phrases; read once
	hostsRead := false
	for _, want := range phraseOrder {
		for _, ps := range r.phrases {
			if ps.reason != want || in.readable > ps.maxText {
				continue
			}
			if ps.host && !hostsRead {
				hosts, hostsRead = pageHosts(in), true
			}
			for _, ph := range ps.phrases {
				if !ps.host && strings.Contains(text, ph) {
					return "phrase:" + strings.TrimPrefix(string(ps.reason), "fingerprint.") + ":" + quoteShort(ph), ps.reason
				}
				for _, h := range hosts {
					if ps.host && containsHostPhrase(text, ph, h) {
						return "phrase:" + strings.TrimPrefix(string(ps.reason), "fingerprint.") + ":" + quoteShort(ph), ps.reason
					}
				}
			}
		}
	}
	return "", ""
}

// containsHostPhrase reports whether text holds the host phrase ph with
// host in place of "{host}", the host a whole name: where the placeholder
// opens or ends the phrase, the text must not go on with the name, so
// "voicebox.example is for sale" is not "{host} is for sale" for
// box.example, nor "buy box.example.org" "buy {host}". A subdomain
// ("www.box.example is for sale") is the host's.
func containsHostPhrase(text, ph, host string) bool {
	p := strings.Index(ph, hostPlaceholder)
	if p < 0 {
		return false
	}
	want := ph[:p] + host + ph[p+len(hostPlaceholder):]
	atEnd := p+len(hostPlaceholder) == len(ph)
	for from := 0; from <= len(text); {
		i := strings.Index(text[from:], want)
		if i < 0 {
			return false
		}
		i += from
		start, end := i+p, i+p+len(host)
		if (p > 0 || !nameContinuesBefore(text[:start])) && (!atEnd || !nameContinuesAfter(text[end:])) {
			return true
		}
		from = i + 1
	}
	return false
}

// nameContinuesBefore reports whether a host name found right after s is
// the end of a longer name: s ends in a letter, digit, "-" or "_" (a dot
// before it makes a subdomain, which is the host's).
func nameContinuesBefore(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isNameRune(r)
}

// nameContinuesAfter reports whether a host name found right before s is
// the start of a longer name: s starts with a letter, digit, "-" or "_",
// or with a dot and one of those ("box.example.org").
func nameContinuesAfter(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '.' {
		s = s[1:]
	}
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isNameRune(r)
}

func isNameRune(r rune) bool {
	return r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// pageHosts returns the requested and final hosts, lower case, without a
// leading "www.", each once.
func pageHosts(in fingerprintInput) []string {
	var out []string
	for _, raw := range [...]string{in.ev.URL, in.final} {
		if u := parseURL(raw); u != nil {
			h := siteHost(u.Hostname())
			if h != "" && (len(out) == 0 || out[0] != h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// siteHost lower-cases a host name and drops a leading "www.".
func siteHost(h string) string {
	return strings.TrimPrefix(strings.ToLower(h), "www.")
}

// loginSuffix returns the LoginPathSuffixes entry the path ends with (at a
// segment boundary, a trailing slash ignored), or "".
func (r *Rules) loginSuffix(path string) string {
	if len(r.doc.LoginPathSuffixes) == 0 {
		return ""
	}
	p := strings.TrimRight(strings.ToLower(path), "/")
	for _, s := range r.doc.LoginPathSuffixes {
		if strings.HasSuffix(p, s) {
			return s
		}
	}
	return ""
}

// homeRedirect reports a requested URL of at least minSegments path
// segments that ended on the home page of another host (a leading "www."
// ignored), and that host. A minSegments of 0 reports nothing.
func homeRedirect(requested string, final *url.URL, minSegments int) (string, bool) {
	if minSegments == 0 || (final.Path != "" && final.Path != "/") {
		return "", false
	}
	ru := parseURL(requested)
	if ru == nil || siteHost(ru.Hostname()) == siteHost(final.Hostname()) {
		return "", false
	}
	n := 0
	for _, seg := range strings.Split(ru.Path, "/") {
		if seg != "" {
			n++
		}
	}
	if n < minSegments {
		return "", false
	}
	return siteHost(final.Hostname()), true
}

// refreshTarget resolves a meta refresh URL against the page's URL and
// reports whether it leads elsewhere. A refresh to the page itself is a
// reload, whether it names the page as fetched or as its receipt records it
// (secrets masked): a verdict derived again from the receipt meets the
// page's URL masked and the refresh URL, from the body, as it was, and must
// not find a stub where the first derivation found a reload.
func refreshTarget(in fingerprintInput, ref string) (string, bool) {
	base := in.final
	if base == "" {
		base = in.ev.URL
	}
	bu := parseURL(base)
	if bu == nil {
		return ref, true
	}
	tu, err := bu.Parse(ref)
	if err != nil {
		return "", false
	}
	tu.Fragment, tu.RawFragment = "", "" // never part of the comparison, and a mask would take it in
	target := tu.String()
	elsewhere := normURL(target) != normURL(base) && normURL(receiptText(target)) != normURL(receiptText(base))
	return target, elsewhere
}

// jsonErrorEnvelope returns a signal when a JSON body is an error
// envelope: an object of at most Thresholds.JSONErrorMaxMembers members,
// one of them an error key (JSONErrorKeys) with a non-empty value or a
// false key (JSONFalseKeys) with the value false, and no data key
// (JSONDataKeys) with a non-empty value. Keys match exactly. The members
// are read one by one, so a larger object is given up at once.
func (r *Rules) jsonErrorEnvelope(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	signal := ""
	for members := 1; dec.More(); members++ {
		if members > r.doc.Thresholds.JSONErrorMaxMembers {
			return ""
		}
		kt, err := dec.Token()
		key, isKey := kt.(string)
		var val json.RawMessage
		if err != nil || !isKey || dec.Decode(&val) != nil {
			return ""
		}
		switch {
		case r.jsonDataKeys[key] && !emptyJSON(val):
			return ""
		case signal == "" && r.jsonErrorKeys[key] && !emptyJSON(val):
			signal = "json-error:" + quoteShort(key)
		case signal == "" && r.jsonFalseKeys[key] && string(bytes.TrimSpace(val)) == "false":
			signal = "json-false:" + quoteShort(key)
		}
	}
	return signal
}

// emptyJSON reports a JSON value that carries nothing: null, false, "",
// {} or [].
func emptyJSON(v []byte) bool {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0:
		return true
	case len(v) >= 2 && (v[0] == '{' || v[0] == '['):
		return len(bytes.TrimSpace(v[1:len(v)-1])) == 0
	}
	s := string(v)
	return s == "null" || s == "false" || s == `""`
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
