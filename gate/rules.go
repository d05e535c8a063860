package gate

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/hashing"
)

// Rulesets.
//
// A ruleset is the data the classifier applies: thresholds, fingerprint
// titles, ids, classes, paths and phrases, and per-domain rules. It is a
// JSON document (format 1, below) with a name; its hash is the SHA-256 of
// the RFC 8785 canonical form of the resolved document (after "extends"),
// so formatting does not change it and any change of content does. Every
// receipt names the ruleset and its hash, and a verifier re-derives a
// verdict with exactly that ruleset ([Rulesets.Lookup]).
//
// The built-in rulesets are embedded from gate/rules: gate/v1 (the rules
// of the first release, kept so its receipts re-derive identically),
// gate/v2 (walls in eleven languages, kept likewise) and gate/v3
// ([RulesetVersion], the default: the fixes of gate/v2's review, switched
// on by fields that are absent, hence zero, in gate/v1 and gate/v2).
// docs/GATE.md describes the format.

//go:embed rules/*.json
var builtinFiles embed.FS

// RulesFormat is the ruleset file format this package reads.
const RulesFormat = 1

// RulesetV1 is the name of the first built-in ruleset. A receipt that names
// it without a hash was made by it (receipts of the first release carry no
// hash).
const RulesetV1 = "gate/v1"

// Limits on a ruleset file, so an operator's file cannot make
// classification slow.
const (
	maxRulesBytes    = 1 << 20
	maxRuleEntries   = 4096 // entries of any one list
	maxPhraseChars   = 200
	maxRulesetName   = 64
	maxPhraseMaxText = 100000
)

// ErrRules marks an invalid ruleset document; the *RulesError says where.
var ErrRules = errors.New("invalid ruleset")

// ErrUnknownRuleset is returned by [Rulesets.Lookup] for a name or hash it
// does not hold: a verdict made by an unknown ruleset cannot be re-derived
// and must be refused.
var ErrUnknownRuleset = errors.New("unknown ruleset")

// RulesError is a ruleset defect: Pointer is the JSON pointer of the field
// ("/thresholds/min_html_text"), Rule the rule it breaks ("minimum",
// "enum", "required", …). It wraps [ErrRules].
type RulesError struct {
	Pointer string
	Rule    string
	Detail  string
}

func (e *RulesError) Error() string {
	return fmt.Sprintf("ruleset %s: %s (%s)", e.Pointer, e.Detail, e.Rule)
}

// Unwrap returns ErrRules.
func (e *RulesError) Unwrap() error { return ErrRules }

// Thresholds are a ruleset's numbers. In a file that extends another
// ruleset, a zero (absent) field inherits the base's value.
type Thresholds struct {
	// MaxRedirects: more hops is transport.too_many_redirects.
	MaxRedirects int `json:"max_redirects,omitempty"`
	// MaxDecodedBytes: a larger decoded body is extraction.too_large.
	MaxDecodedBytes int `json:"max_decoded_bytes,omitempty"`
	// MinHTMLText, HTMLBytesPerText, MaxHTMLTextRequired: the readable
	// characters an HTML body needs (see [MinHTMLText]).
	MinHTMLText         int `json:"min_html_text,omitempty"`
	HTMLBytesPerText    int `json:"html_bytes_per_text,omitempty"`
	MaxHTMLTextRequired int `json:"max_html_text_required,omitempty"`
	// MinPlainText: readable characters CSV, XML or text needs.
	MinPlainText int `json:"min_plain_text,omitempty"`
	// MaxControlPermille: control bytes per 1000 tolerated in text.
	MaxControlPermille int `json:"max_control_permille,omitempty"`
	// ConsentWallMinText, ConsentWallMaxOtherText, LoginWallMaxOtherText:
	// the structural wall thresholds (see [ConsentWallMinText]).
	ConsentWallMinText      int `json:"consent_wall_min_text,omitempty"`
	ConsentWallMaxOtherText int `json:"consent_wall_max_other_text,omitempty"`
	LoginWallMaxOtherText   int `json:"login_wall_max_other_text,omitempty"`
	// WideCharWeight is how many readable characters one Han ideograph,
	// kana or Hangul syllable counts as when the fingerprint layer compares
	// a page's text with a wall threshold (the consent and login
	// thresholds above and each phrase rule's max_text): one such
	// character carries about as much as two or three Latin letters, so
	// with 1 a short Chinese or Japanese article looks like a wall's few
	// words. The extraction thresholds always count 1.
	WideCharWeight int `json:"wide_char_weight,omitempty"`

	// The thresholds below came with gate/v3. Each is zero (absent) in
	// gate/v1 and gate/v2, and zero switches its check off, so their
	// verdicts never change.

	// HTMLMaxControlPermille: control bytes per 1000 tolerated in the text
	// of an HTML body (read in its charset, ISO-2022 escapes not counted),
	// which otherwise gets no binary check; a body that starts like a
	// compressed stream or an archive is binary too. A gzipped page served
	// as text/html without Content-Encoding is extraction.binary.
	HTMLMaxControlPermille int `json:"html_max_control_permille,omitempty"`
	// MinPartialPermille: the share, per 1000 of the complete length its
	// Content-Range names, a 206 answer must carry; less is
	// transport.size_mismatch (a slice is not a read of the resource).
	MinPartialPermille int `json:"min_partial_permille,omitempty"`
	// MetaRefreshMaxText: an HTML page with a <meta http-equiv="refresh">
	// to another URL and at most this much main text (weighted as the wall
	// thresholds) is fingerprint.redirect_stub.
	MetaRefreshMaxText int `json:"meta_refresh_max_text,omitempty"`
	// HomeRedirectMinSegments: a URL of at least this many path segments
	// redirected to the home page ("/") of another host (a leading "www."
	// ignored) is fingerprint.soft_404.
	HomeRedirectMinSegments int `json:"home_redirect_min_segments,omitempty"`
	// TitleRuleMaxText: the not-found and rate-limit title rules apply only
	// to a page whose main text (weighted) is at most this long, so a long
	// document titled "404 Not Found - HTTP" is a read. Zero: no limit.
	TitleRuleMaxText int `json:"title_rule_max_text,omitempty"`
	// JSONErrorMaxMembers: a JSON object of at most this many members that
	// is an error envelope (see the json_* lists of the ruleset) is
	// fingerprint.soft_error.
	JSONErrorMaxMembers int `json:"json_error_max_members,omitempty"`
}

// HeaderRule is a response header whose value (one of Values, compared
// case-insensitively) means a challenge was served.
type HeaderRule struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// PhraseRule lowers a short page to UNKNOWN with Reason when its title or
// text holds one of the phrases: only pages whose main readable text (HTML:
// outside nav, header, footer and aside; text: all of it) has at most
// MaxText letters and digits, so an article that mentions the phrase is
// never a wall. Phrases are grouped by language tag ("en", "de", "ja", …);
// matching ignores case and runs of whitespace.
type PhraseRule struct {
	Reason  Reason              `json:"reason"`
	MaxText int                 `json:"max_text"`
	Phrases map[string][]string `json:"phrases"`
}

// DomainRule lowers every page whose final URL's host is Host (or, with
// Subdomains, ends in "."+Host) to UNKNOWN with Reason.
type DomainRule struct {
	Host       string `json:"host"`
	Subdomains bool   `json:"subdomains,omitempty"`
	Reason     Reason `json:"reason"`
}

// Checks a ruleset may switch on by name (gate/v3; see rulesDoc.Checks).
const (
	// CheckContentLength: an HTTP body shorter than its Content-Length is
	// transport.size_mismatch (a transfer that broke off). A body a client
	// decoded while keeping the headers (NoteEncodingNotApplied) is not
	// judged: its Content-Length counted the encoded bytes.
	CheckContentLength = "content_length"
	// CheckHTMLMainText: an HTML page with scripts is asked for its
	// readable text outside site chrome (nav, header, footer, aside), so a
	// client-rendered page whose server sends only the chrome is
	// extraction.script_shell.
	CheckHTMLMainText = "html_main_text"
	// CheckURLForms: the requested URL and the first redirect, or without
	// redirects the final URL, that differ only in form (the path "/" of
	// a bare host, a fragment, the case of scheme and host, a default
	// port) are one hop of the chain, not a redirect loop: a client that
	// reports "https://example.com/" as the final URL of
	// "https://example.com" did not loop. And the fingerprints of a
	// redirect's target (login and not-found paths, another site's home)
	// need a redirect to another host or path: the receipt's masks may
	// change a URL's query, never its path.
	CheckURLForms = "url_forms"
)

// knownChecks are the names [rulesDoc.Checks] may hold.
var knownChecks = map[string]bool{CheckContentLength: true, CheckHTMLMainText: true, CheckURLForms: true}

// hostPlaceholder stands for the page's host in a host phrase.
const hostPlaceholder = "{host}"

// rulesDoc is the ruleset file (format 1). In a resolved ruleset Extends is
// empty and every list holds the base's entries followed by the file's.
type rulesDoc struct {
	Format                 int          `json:"format"`
	Name                   string       `json:"name"`
	Extends                string       `json:"extends,omitempty"`
	About                  string       `json:"about,omitempty"`
	Thresholds             Thresholds   `json:"thresholds"`
	ChallengeHeaders       []HeaderRule `json:"challenge_headers,omitempty"`
	ChallengeTitles        []string     `json:"challenge_titles,omitempty"`
	ChallengeTitlePrefixes []string     `json:"challenge_title_prefixes,omitempty"`
	ChallengeIDs           []string     `json:"challenge_ids,omitempty"`
	ChallengeClasses       []string     `json:"challenge_classes,omitempty"`
	ConsentMarkers         []string     `json:"consent_markers,omitempty"`
	LoginPaths             []string     `json:"login_paths,omitempty"`
	NotFoundPaths          []string     `json:"not_found_paths,omitempty"`
	NotFoundTitles         []string     `json:"not_found_titles,omitempty"`
	RateLimitTitles        []string     `json:"rate_limit_titles,omitempty"`
	Phrases                []PhraseRule `json:"phrases,omitempty"`
	Domains                []DomainRule `json:"domains,omitempty"`

	// From gate/v3; empty in gate/v1 and gate/v2.

	// Checks names the checks switched on (CheckContentLength, …).
	Checks []string `json:"checks,omitempty"`
	// LoginPathSuffixes are path endings ("/u/login/identifier") a
	// redirect may end on that mean a login wall, besides LoginPaths.
	LoginPathSuffixes []string `json:"login_path_suffixes,omitempty"`
	// ConsentIgnorePrefixes are id and class token openings ("tag-") that
	// never name a consent container, and ConsentIgnoreElements the
	// elements ("article") whose ids and classes are not looked at for
	// consent markers.
	ConsentIgnorePrefixes []string `json:"consent_ignore_prefixes,omitempty"`
	ConsentIgnoreElements []string `json:"consent_ignore_elements,omitempty"`
	// HostPhrases are phrase rules whose phrases hold "{host}", which
	// stands for the requested and the final host (without "www."):
	// "{host} is for sale".
	HostPhrases []PhraseRule `json:"host_phrases,omitempty"`
	// JSONErrorKeys, JSONFalseKeys, JSONDataKeys describe a JSON error
	// envelope (Thresholds.JSONErrorMaxMembers): an object with an error
	// key of a non-empty value or a false key of value false, and no data
	// key of a non-empty value.
	JSONErrorKeys []string `json:"json_error_keys,omitempty"`
	JSONFalseKeys []string `json:"json_false_keys,omitempty"`
	JSONDataKeys  []string `json:"json_data_keys,omitempty"`
}

// Rules is a parsed, validated, resolved ruleset, ready for [ClassifyWith].
// It is immutable and safe for concurrent use.
type Rules struct {
	doc  rulesDoc
	hash string
	raw  []byte // canonical JSON of doc

	challengeTitles  map[string]bool
	notFoundSegments map[string]bool
	rateLimitSegs    map[string]bool
	loginPaths       map[string]bool
	notFoundPaths    map[string]bool
	phrases          []phraseSet
	maxPhraseText    int // the largest MaxText of phrases

	checks        map[string]bool
	consentIgnore map[string]bool // ConsentIgnoreElements
	jsonErrorKeys map[string]bool
	jsonFalseKeys map[string]bool
	jsonDataKeys  map[string]bool
}

// phraseSet is one PhraseRule, normalised.
type phraseSet struct {
	reason  Reason
	maxText int
	phrases []string
	host    bool // a host phrase: "{host}" stands for the page's hosts
}

// Name returns the ruleset's name, e.g. "gate/v3".
func (r *Rules) Name() string { return r.doc.Name }

// Hash returns "sha256:<64 hex>" of the canonical JSON of the resolved
// ruleset ([Rules.JSON]).
func (r *Rules) Hash() string { return r.hash }

// JSON returns the resolved ruleset as canonical JSON (RFC 8785): the
// bytes [Rules.Hash] is computed over, and a valid ruleset file itself.
func (r *Rules) JSON() []byte { return append([]byte(nil), r.raw...) }

// Thresholds returns the ruleset's numbers.
func (r *Rules) Thresholds() Thresholds { return r.doc.Thresholds }

// fingerprintReasons are the reasons a phrase or domain rule may give.
var fingerprintReasons = map[Reason]bool{
	ReasonChallenge: true, ReasonConsentWall: true, ReasonLoginWall: true, ReasonSoft404: true,
	ReasonPaywall: true, ReasonParkedDomain: true, ReasonRateLimited: true,
	ReasonPlaceholder: true,
}

// ParseRules reads a ruleset file (format 1), resolves "extends" against
// the built-in rulesets, and validates it. Errors are *RulesError values
// (wrapping [ErrRules]) naming the field by JSON pointer; unknown fields
// are refused.
func ParseRules(b []byte) (*Rules, error) {
	return parseRules(b, func(name string) *Rules { return builtin().byName(name) })
}

func parseRules(b []byte, base func(string) *Rules) (*Rules, error) {
	if len(b) > maxRulesBytes {
		return nil, &RulesError{Pointer: "", Rule: "maxBytes", Detail: fmt.Sprintf("more than %d bytes", maxRulesBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d rulesDoc
	if err := dec.Decode(&d); err != nil {
		return nil, &RulesError{Pointer: "", Rule: "json", Detail: err.Error()}
	}
	if dec.More() {
		return nil, &RulesError{Pointer: "", Rule: "json", Detail: "data after the ruleset object"}
	}
	switch {
	case d.Format != RulesFormat:
		return nil, &RulesError{Pointer: "/format", Rule: "enum", Detail: fmt.Sprintf("format %d; this version reads format %d", d.Format, RulesFormat)}
	case d.Name == "" || len(d.Name) > maxRulesetName || strings.TrimSpace(d.Name) != d.Name || strings.ContainsAny(d.Name, " \t\r\n\"\\"):
		return nil, &RulesError{Pointer: "/name", Rule: "pattern", Detail: fmt.Sprintf("want a name of 1 to %d characters without spaces, e.g. \"site/v1\"", maxRulesetName)}
	}
	if d.Extends != "" {
		if d.Extends == d.Name {
			return nil, &RulesError{Pointer: "/extends", Rule: "not_self", Detail: "a ruleset cannot extend itself"}
		}
		b := base(d.Extends)
		if b == nil {
			return nil, &RulesError{Pointer: "/extends", Rule: "known_ruleset", Detail: fmt.Sprintf("%q is not a built-in ruleset", d.Extends)}
		}
		// Check the file's own entries first, so errors point into the
		// file rather than into the merged lists.
		own := d
		own.Thresholds = merge(b.doc, d).Thresholds
		if _, err := newRules(own); err != nil {
			return nil, err
		}
		d = merge(b.doc, d)
	}
	if err := jsonEnvelopeRule(d); err != nil {
		return nil, err
	}
	return newRules(d)
}

// jsonEnvelopeRule checks that a resolved ruleset's JSON error envelope
// rule is whole: json_error_max_members needs error or false keys to look
// for, and the json_* key lists need json_error_max_members, else either
// is parsed and never used. It runs on the resolved document only, since a
// file extending gate/v3 inherits the one and may set the other.
func jsonEnvelopeRule(d rulesDoc) error {
	keys := len(d.JSONErrorKeys) + len(d.JSONFalseKeys)
	switch {
	case d.Thresholds.JSONErrorMaxMembers > 0 && keys == 0:
		return &RulesError{Pointer: "/json_error_keys", Rule: "required", Detail: "json_error_max_members needs json_error_keys or json_false_keys (here or in the ruleset extended)"}
	case d.Thresholds.JSONErrorMaxMembers == 0 && keys+len(d.JSONDataKeys) > 0:
		return &RulesError{Pointer: "/thresholds/json_error_max_members", Rule: "required", Detail: "json_error_keys, json_false_keys and json_data_keys need json_error_max_members (here or in the ruleset extended)"}
	}
	return nil
}

// merge resolves a file that extends base: lists are appended, zero
// thresholds inherited.
func merge(base, d rulesDoc) rulesDoc {
	out := base
	out.Name, out.About, out.Extends = d.Name, d.About, ""
	if out.About == "" {
		out.About = "extends " + base.Name
	}
	t, bt := &out.Thresholds, d.Thresholds
	for _, f := range []struct{ dst, src *int }{
		{&t.MaxRedirects, &bt.MaxRedirects}, {&t.MaxDecodedBytes, &bt.MaxDecodedBytes},
		{&t.MinHTMLText, &bt.MinHTMLText}, {&t.HTMLBytesPerText, &bt.HTMLBytesPerText},
		{&t.MaxHTMLTextRequired, &bt.MaxHTMLTextRequired}, {&t.MinPlainText, &bt.MinPlainText},
		{&t.MaxControlPermille, &bt.MaxControlPermille}, {&t.ConsentWallMinText, &bt.ConsentWallMinText},
		{&t.ConsentWallMaxOtherText, &bt.ConsentWallMaxOtherText}, {&t.LoginWallMaxOtherText, &bt.LoginWallMaxOtherText},
		{&t.WideCharWeight, &bt.WideCharWeight},
		{&t.HTMLMaxControlPermille, &bt.HTMLMaxControlPermille}, {&t.MinPartialPermille, &bt.MinPartialPermille},
		{&t.MetaRefreshMaxText, &bt.MetaRefreshMaxText}, {&t.HomeRedirectMinSegments, &bt.HomeRedirectMinSegments},
		{&t.TitleRuleMaxText, &bt.TitleRuleMaxText}, {&t.JSONErrorMaxMembers, &bt.JSONErrorMaxMembers},
	} {
		if *f.src != 0 {
			*f.dst = *f.src
		}
	}
	cat := func(a, b []string) []string { return append(append([]string(nil), a...), b...) }
	out.ChallengeHeaders = append(append([]HeaderRule(nil), base.ChallengeHeaders...), d.ChallengeHeaders...)
	out.ChallengeTitles = cat(base.ChallengeTitles, d.ChallengeTitles)
	out.ChallengeTitlePrefixes = cat(base.ChallengeTitlePrefixes, d.ChallengeTitlePrefixes)
	out.ChallengeIDs = cat(base.ChallengeIDs, d.ChallengeIDs)
	out.ChallengeClasses = cat(base.ChallengeClasses, d.ChallengeClasses)
	out.ConsentMarkers = cat(base.ConsentMarkers, d.ConsentMarkers)
	out.LoginPaths = cat(base.LoginPaths, d.LoginPaths)
	out.NotFoundPaths = cat(base.NotFoundPaths, d.NotFoundPaths)
	out.NotFoundTitles = cat(base.NotFoundTitles, d.NotFoundTitles)
	out.RateLimitTitles = cat(base.RateLimitTitles, d.RateLimitTitles)
	out.Phrases = append(append([]PhraseRule(nil), base.Phrases...), d.Phrases...)
	out.Domains = append(append([]DomainRule(nil), base.Domains...), d.Domains...)
	out.Checks = cat(base.Checks, d.Checks)
	out.LoginPathSuffixes = cat(base.LoginPathSuffixes, d.LoginPathSuffixes)
	out.ConsentIgnorePrefixes = cat(base.ConsentIgnorePrefixes, d.ConsentIgnorePrefixes)
	out.ConsentIgnoreElements = cat(base.ConsentIgnoreElements, d.ConsentIgnoreElements)
	out.HostPhrases = append(append([]PhraseRule(nil), base.HostPhrases...), d.HostPhrases...)
	out.JSONErrorKeys = cat(base.JSONErrorKeys, d.JSONErrorKeys)
	out.JSONFalseKeys = cat(base.JSONFalseKeys, d.JSONFalseKeys)
	out.JSONDataKeys = cat(base.JSONDataKeys, d.JSONDataKeys)
	return out
}

// thresholdRange is the accepted range of each threshold.
var thresholdRange = []struct {
	name     string
	get      func(*Thresholds) int
	min, max int
}{
	{"max_redirects", func(t *Thresholds) int { return t.MaxRedirects }, 1, 100},
	{"max_decoded_bytes", func(t *Thresholds) int { return t.MaxDecodedBytes }, 1 << 10, 1 << 30},
	{"min_html_text", func(t *Thresholds) int { return t.MinHTMLText }, 1, 100000},
	{"html_bytes_per_text", func(t *Thresholds) int { return t.HTMLBytesPerText }, 1, 1 << 20},
	{"max_html_text_required", func(t *Thresholds) int { return t.MaxHTMLTextRequired }, 1, 1 << 20},
	{"min_plain_text", func(t *Thresholds) int { return t.MinPlainText }, 1, 100000},
	{"max_control_permille", func(t *Thresholds) int { return t.MaxControlPermille }, 1, 1000},
	{"consent_wall_min_text", func(t *Thresholds) int { return t.ConsentWallMinText }, 1, 100000},
	{"consent_wall_max_other_text", func(t *Thresholds) int { return t.ConsentWallMaxOtherText }, 1, 100000},
	{"login_wall_max_other_text", func(t *Thresholds) int { return t.LoginWallMaxOtherText }, 1, 100000},
	{"wide_char_weight", func(t *Thresholds) int { return t.WideCharWeight }, 1, 10},
	// gate/v3: zero switches the check off.
	{"html_max_control_permille", func(t *Thresholds) int { return t.HTMLMaxControlPermille }, 0, 1000},
	{"min_partial_permille", func(t *Thresholds) int { return t.MinPartialPermille }, 0, 1000},
	{"meta_refresh_max_text", func(t *Thresholds) int { return t.MetaRefreshMaxText }, 0, 100000},
	{"home_redirect_min_segments", func(t *Thresholds) int { return t.HomeRedirectMinSegments }, 0, 100},
	{"title_rule_max_text", func(t *Thresholds) int { return t.TitleRuleMaxText }, 0, 100000},
	{"json_error_max_members", func(t *Thresholds) int { return t.JSONErrorMaxMembers }, 0, 1000},
}

// newRules validates a resolved document and builds its lookup tables.
func newRules(d rulesDoc) (*Rules, error) {
	for _, f := range thresholdRange {
		if v := f.get(&d.Thresholds); v < f.min || v > f.max {
			detail := fmt.Sprintf("%d is outside %d–%d", v, f.min, f.max)
			if v == 0 {
				detail += " (required: a file without extends must set every threshold)"
			}
			return nil, &RulesError{Pointer: "/thresholds/" + f.name, Rule: "range", Detail: detail}
		}
	}
	if d.Thresholds.MaxHTMLTextRequired < d.Thresholds.MinHTMLText {
		return nil, &RulesError{Pointer: "/thresholds/max_html_text_required", Rule: "minimum", Detail: "must not be below min_html_text"}
	}
	lists := []struct {
		ptr  string
		vals []string
	}{
		{"/challenge_titles", d.ChallengeTitles}, {"/challenge_title_prefixes", d.ChallengeTitlePrefixes},
		{"/challenge_ids", d.ChallengeIDs}, {"/challenge_classes", d.ChallengeClasses},
		{"/consent_markers", d.ConsentMarkers}, {"/login_paths", d.LoginPaths},
		{"/not_found_paths", d.NotFoundPaths}, {"/not_found_titles", d.NotFoundTitles},
		{"/rate_limit_titles", d.RateLimitTitles},
	}
	for _, l := range lists {
		if len(l.vals) > maxRuleEntries {
			return nil, &RulesError{Pointer: l.ptr, Rule: "maxItems", Detail: fmt.Sprintf("more than %d entries", maxRuleEntries)}
		}
		for i, v := range l.vals {
			if strings.TrimSpace(v) == "" || len(v) > maxPhraseChars {
				return nil, &RulesError{Pointer: fmt.Sprintf("%s/%d", l.ptr, i), Rule: "length", Detail: fmt.Sprintf("want 1 to %d characters", maxPhraseChars)}
			}
		}
	}
	for i, m := range d.ConsentMarkers {
		if m != strings.ToLower(m) || len(m) < 4 {
			return nil, &RulesError{Pointer: fmt.Sprintf("/consent_markers/%d", i), Rule: "lowercase", Detail: "want lower case, at least 4 characters"}
		}
	}
	for i, h := range d.ChallengeHeaders {
		if h.Name == "" || len(h.Values) == 0 {
			return nil, &RulesError{Pointer: fmt.Sprintf("/challenge_headers/%d", i), Rule: "required", Detail: "want a name and at least one value"}
		}
	}
	r := &Rules{
		challengeTitles:  set(d.ChallengeTitles, normTitle),
		notFoundSegments: set(d.NotFoundTitles, normTitle),
		rateLimitSegs:    set(d.RateLimitTitles, normTitle),
		loginPaths:       set(d.LoginPaths, strings.ToLower),
		notFoundPaths:    set(d.NotFoundPaths, strings.ToLower),
	}
	// Phrases are stored normalised, so the hash covers what is matched.
	normalised := make([]PhraseRule, 0, len(d.Phrases))
	for i, p := range d.Phrases {
		ps, np, err := phraseRule(fmt.Sprintf("/phrases/%d", i), p, false)
		if err != nil {
			return nil, err
		}
		normalised = append(normalised, np)
		r.addPhrases(ps)
	}
	if len(normalised) > 0 {
		d.Phrases = normalised
	}
	hostNormalised := make([]PhraseRule, 0, len(d.HostPhrases))
	for i, p := range d.HostPhrases {
		ps, np, err := phraseRule(fmt.Sprintf("/host_phrases/%d", i), p, true)
		if err != nil {
			return nil, err
		}
		hostNormalised = append(hostNormalised, np)
		r.addPhrases(ps)
	}
	if len(hostNormalised) > 0 {
		d.HostPhrases = hostNormalised
	}
	if err := r.v3Lists(d); err != nil {
		return nil, err
	}
	for i, dr := range d.Domains {
		at := fmt.Sprintf("/domains/%d", i)
		if dr.Host == "" || dr.Host != strings.ToLower(dr.Host) || strings.ContainsAny(dr.Host, "/:@ ") || strings.HasPrefix(dr.Host, ".") {
			return nil, &RulesError{Pointer: at + "/host", Rule: "hostname", Detail: "want a lower-case host name such as \"consent.example.com\""}
		}
		if !fingerprintReasons[dr.Reason] {
			return nil, &RulesError{Pointer: at + "/reason", Rule: "enum", Detail: fmt.Sprintf("%q is not a fingerprint reason", dr.Reason)}
		}
	}
	raw, err := hashing.Marshal(d)
	if err != nil {
		return nil, &RulesError{Pointer: "", Rule: "canonical", Detail: err.Error()}
	}
	sum := sha256.Sum256(raw)
	r.doc, r.raw, r.hash = d, raw, "sha256:"+hex.EncodeToString(sum[:])
	return r, nil
}

// phraseRule validates and normalises the phrase rule at pointer at; a
// host rule's phrases must each hold hostPlaceholder once.
func phraseRule(at string, p PhraseRule, host bool) (phraseSet, PhraseRule, error) {
	switch {
	case !fingerprintReasons[p.Reason]:
		return phraseSet{}, PhraseRule{}, &RulesError{Pointer: at + "/reason", Rule: "enum", Detail: fmt.Sprintf("%q is not a fingerprint reason", p.Reason)}
	case p.MaxText < 1 || p.MaxText > maxPhraseMaxText:
		return phraseSet{}, PhraseRule{}, &RulesError{Pointer: at + "/max_text", Rule: "range", Detail: fmt.Sprintf("want 1–%d", maxPhraseMaxText)}
	case len(p.Phrases) == 0:
		return phraseSet{}, PhraseRule{}, &RulesError{Pointer: at + "/phrases", Rule: "required", Detail: "want at least one language with phrases"}
	}
	ps := phraseSet{reason: p.Reason, maxText: p.MaxText, host: host}
	np := PhraseRule{Reason: p.Reason, MaxText: p.MaxText, Phrases: make(map[string][]string, len(p.Phrases))}
	langs := make([]string, 0, len(p.Phrases))
	for lang := range p.Phrases {
		langs = append(langs, lang)
	}
	sort.Strings(langs)
	for _, lang := range langs {
		if len(lang) < 2 || len(lang) > 8 || strings.ToLower(lang) != lang {
			return phraseSet{}, PhraseRule{}, &RulesError{Pointer: at + "/phrases/" + lang, Rule: "language_tag", Detail: "want a lower-case language tag such as \"en\" or \"pt-br\""}
		}
		for j, ph := range p.Phrases[lang] {
			n := normPhrase(ph)
			ptr := fmt.Sprintf("%s/phrases/%s/%d", at, lang, j)
			if n == "" || len(ph) > maxPhraseChars {
				return phraseSet{}, PhraseRule{}, &RulesError{Pointer: ptr, Rule: "length", Detail: fmt.Sprintf("want 1 to %d characters", maxPhraseChars)}
			}
			if host && (strings.Count(n, hostPlaceholder) != 1 || n == hostPlaceholder) {
				return phraseSet{}, PhraseRule{}, &RulesError{Pointer: ptr, Rule: "host_placeholder", Detail: "want " + hostPlaceholder + " once, with words around it"}
			}
			if !host && strings.Contains(n, hostPlaceholder) {
				// It would be matched as the letters "{host}", never as a host.
				return phraseSet{}, PhraseRule{}, &RulesError{Pointer: ptr, Rule: "host_placeholder", Detail: hostPlaceholder + " stands for the page's host only in host_phrases"}
			}
			ps.phrases = append(ps.phrases, n)
			np.Phrases[lang] = append(np.Phrases[lang], n)
		}
	}
	if len(ps.phrases) > maxRuleEntries {
		return phraseSet{}, PhraseRule{}, &RulesError{Pointer: at + "/phrases", Rule: "maxItems", Detail: fmt.Sprintf("more than %d phrases", maxRuleEntries)}
	}
	return ps, np, nil
}

// addPhrases adds a validated phrase rule.
func (r *Rules) addPhrases(ps phraseSet) {
	r.phrases = append(r.phrases, ps)
	if ps.maxText > r.maxPhraseText {
		r.maxPhraseText = ps.maxText
	}
}

// v3Lists validates the lists gate/v3 added and builds their tables.
func (r *Rules) v3Lists(d rulesDoc) error {
	lists := []struct {
		ptr  string
		vals []string
		ok   func(string) bool
		want string
	}{
		{"/checks", d.Checks, func(v string) bool { return knownChecks[v] }, "a known check"},
		{"/login_path_suffixes", d.LoginPathSuffixes, func(v string) bool {
			return v == strings.ToLower(v) && len(v) > 1 && v[0] == '/' && !strings.HasSuffix(v, "/") && !strings.ContainsAny(v, "?# ")
		}, "a lower-case path ending such as \"/u/login/identifier\""},
		{"/consent_ignore_prefixes", d.ConsentIgnorePrefixes, func(v string) bool { return v == strings.ToLower(v) && !strings.ContainsAny(v, " \t") }, "a lower-case token opening"},
		{"/consent_ignore_elements", d.ConsentIgnoreElements, func(v string) bool { return v == strings.ToLower(v) && !strings.ContainsAny(v, " <>/") }, "a lower-case element name"},
		{"/json_error_keys", d.JSONErrorKeys, nil, ""},
		{"/json_false_keys", d.JSONFalseKeys, nil, ""},
		{"/json_data_keys", d.JSONDataKeys, nil, ""},
	}
	for _, l := range lists {
		if len(l.vals) > maxRuleEntries {
			return &RulesError{Pointer: l.ptr, Rule: "maxItems", Detail: fmt.Sprintf("more than %d entries", maxRuleEntries)}
		}
		for i, v := range l.vals {
			at := fmt.Sprintf("%s/%d", l.ptr, i)
			if strings.TrimSpace(v) == "" || len(v) > maxPhraseChars {
				return &RulesError{Pointer: at, Rule: "length", Detail: fmt.Sprintf("want 1 to %d characters", maxPhraseChars)}
			}
			if l.ok != nil && !l.ok(v) {
				return &RulesError{Pointer: at, Rule: "pattern", Detail: "want " + l.want}
			}
		}
	}
	r.checks = set(d.Checks, identity)
	r.consentIgnore = set(d.ConsentIgnoreElements, identity)
	r.jsonErrorKeys = set(d.JSONErrorKeys, identity)
	r.jsonFalseKeys = set(d.JSONFalseKeys, identity)
	r.jsonDataKeys = set(d.JSONDataKeys, identity)
	return nil
}

func identity(s string) string { return s }

func set(vals []string, norm func(string) string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[norm(v)] = true
	}
	return m
}

// Rulesets is a set of rulesets a verifier knows, by name and hash: the
// built-in ones and any the operator added. The zero value is empty; use
// [BuiltinRulesets]. Methods are not safe for concurrent use with Add.
type Rulesets struct {
	byKey  map[string]*Rules // name + " " + hash
	byNm   map[string]*Rules // name → the ruleset of that name
	latest *Rules
}

// BuiltinRulesets returns a new set holding the embedded rulesets (gate/v1,
// gate/v2 and gate/v3); its [Rulesets.Default] is gate/v3.
func BuiltinRulesets() *Rulesets {
	b := builtin()
	out := &Rulesets{latest: b.latest}
	for _, r := range b.byNm {
		if err := out.Add(r); err != nil {
			panic(err) // unreachable: the built-in set has no duplicates
		}
	}
	return out
}

// Add puts r in the set. A ruleset with the same name and another hash is
// refused: one name must mean one ruleset, or receipts would be ambiguous.
func (s *Rulesets) Add(r *Rules) error {
	if r == nil {
		return errors.New("gate: nil ruleset")
	}
	if s.byKey == nil {
		s.byKey, s.byNm = map[string]*Rules{}, map[string]*Rules{}
	}
	if have, ok := s.byNm[r.Name()]; ok {
		if have.Hash() != r.Hash() {
			return fmt.Errorf("gate: ruleset %q is already defined with hash %s (this one has %s): give the new one another name: %w", r.Name(), have.Hash(), r.Hash(), ErrRules)
		}
		return nil
	}
	s.byNm[r.Name()] = r
	s.byKey[r.Name()+" "+r.Hash()] = r
	return nil
}

// Default returns the ruleset new verdicts use: gate/v3 for the built-in
// set.
func (s *Rulesets) Default() *Rules { return s.latest }

// Names returns the names held, sorted.
func (s *Rulesets) Names() []string {
	out := make([]string, 0, len(s.byNm))
	for n := range s.byNm {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the ruleset a receipt names. An empty hash is accepted
// only for [RulesetV1], whose receipts carry none. Any other name or hash
// the set does not hold gives an error wrapping [ErrUnknownRuleset].
func (s *Rulesets) Lookup(name, hash string) (*Rules, error) {
	if hash == "" {
		if name == RulesetV1 {
			if r := s.byNm[name]; r != nil {
				return r, nil
			}
		}
		return nil, fmt.Errorf("gate: ruleset %q without a hash: %w", name, ErrUnknownRuleset)
	}
	if r := s.byKey[name+" "+hash]; r != nil {
		return r, nil
	}
	if r := s.byNm[name]; r != nil {
		return nil, fmt.Errorf("gate: ruleset %q has hash %s here, not %s: %w", name, r.Hash(), hash, ErrUnknownRuleset)
	}
	return nil, fmt.Errorf("gate: ruleset %q is not known (known: %s): %w", name, strings.Join(s.Names(), ", "), ErrUnknownRuleset)
}

// Lookup finds a ruleset by the name and hash a receipt carries in the
// built-in set (see [Rulesets.Lookup]).
func Lookup(name, hash string) (*Rules, error) { return BuiltinRulesets().Lookup(name, hash) }

// BuiltinRules returns the default built-in ruleset, gate/v3.
func BuiltinRules() *Rules { return builtin().latest }

// builtinTable is the parsed embedded rulesets.
type builtinTable struct {
	byNm   map[string]*Rules
	latest *Rules
}

func (b *builtinTable) byName(n string) *Rules { return b.byNm[n] }

// builtinRules is parsed once: the embedded files are constants of the
// program, so this is not mutable state.
var builtinRules = func() *builtinTable {
	t := &builtinTable{byNm: map[string]*Rules{}}
	for _, f := range []string{"rules/gate-v1.json", "rules/gate-v2.json", "rules/gate-v3.json"} {
		b, err := builtinFiles.ReadFile(f)
		if err != nil {
			panic(err)
		}
		r, err := parseRules(b, t.byName)
		if err != nil {
			panic(fmt.Sprintf("built-in ruleset %s: %v", f, err))
		}
		t.byNm[r.Name()] = r
		t.latest = r
	}
	return t
}()

func builtin() *builtinTable { return builtinRules }
