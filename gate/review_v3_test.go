package gate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/unicode"
)

// TestReviewV3HTMLControlBytes: gate/v3's HTML binary check counts the
// control bytes of the text, not of the body, so a page in a charset made
// of control bytes (ISO-2022-JP's escapes, UTF-16's zero bytes) is text,
// and a compressed stream served as HTML is still binary.
func TestReviewV3HTMLControlBytes(t *testing.T) {
	v3 := builtinRuleset(t, "gate/v3")
	var items strings.Builder
	for i := 0; i < 30; i++ {
		items.WriteString("<li>東京：晴れ (18)</li>\n")
	}
	src := page("天気", "<ul>"+items.String()+"</ul><p>全国の主な都市の天気と最高気温です。</p>")
	jis, err := japanese.ISO2022JP.NewEncoder().String(strings.Replace(src, `charset="utf-8"`, `charset="iso-2022-jp"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	u16, err := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().String(src)
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(page("Costs", "<p>"+prose+"</p><p>"+prose+"</p>"))
	for _, c := range []struct {
		name, ctype string
		body        []byte
		want        Reason
	}{
		{"iso-2022-jp", "text/html; charset=iso-2022-jp", []byte(jis), ""},
		{"iso-2022-jp by meta", "text/html", []byte(jis), ""},
		{"utf-16", "text/html", []byte(u16), ""},
		{"brotli as html", "text/html", br(t, doc), ReasonBinary},
		{"brotli as utf-8 html", "text/html; charset=utf-8", br(t, doc), ReasonBinary},
		{"gzip as html", "text/html; charset=iso-2022-jp", gz(t, doc), ReasonBinary},
	} {
		ev := Evidence{URL: "https://jp.example/today", Status: 200, Headers: map[string]string{"Content-Type": c.ctype}, Body: c.body}
		if res := ClassifyWith(ev, v3); res.Reason != c.want {
			t.Errorf("%s: %s %s (%s)", c.name, res.Verdict, res.Reason, res.Layers[1].Detail)
		}
	}
}

// verifies reports whether res's receipt verifies against body.
func verifies(t *testing.T, res Result, body []byte) error {
	t.Helper()
	data, err := json.Marshal(NewVerdictData(res, FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	return CheckVerdict(data, func(string) ([]byte, bool, error) { return body, true, nil })
}

// TestReviewV3RefreshToSelfWithSecret: a page that reloads itself by its
// own URL, which holds a secret the receipt masks, is a read, and so is
// the verdict derived again from its receipt (it was refused: the masked
// page URL and the refresh URL from the body differed).
func TestReviewV3RefreshToSelfWithSecret(t *testing.T) {
	v3 := builtinRuleset(t, "gate/v3")
	const u = "https://ops.example/board?access_token=Qm9hcmRWaWV3ZXIyMDI2"
	text := "<p>Berth B1 loading, berth B2 arriving at 15:40, berth B3 free.</p>"
	for _, c := range []struct {
		ref  string
		want Reason
	}{
		{u, ""},
		{"?access_token=Qm9hcmRWaWV3ZXIyMDI2", ""},
		{"board?access_token=Qm9hcmRWaWV3ZXIyMDI2", ""},
		{"/board?access_token=Qm9hcmRWaWV3ZXIyMDI2#top", ""},
		{"https://ops.example/board?access_token=T3RoZXJCb2FyZDIwMjc5", ReasonRedirectStub},
		{"https://ops.example/login", ReasonRedirectStub},
	} {
		body := []byte(page("Board", `<meta http-equiv="refresh" content="60; url=`+c.ref+`">`+text))
		ev := Evidence{URL: u, Status: 200, Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"}, Body: body}
		res := ClassifyWith(ev, v3)
		if res.Reason != c.want {
			t.Errorf("refresh to %s: %s %s %v", c.ref, res.Verdict, res.Reason, res.Receipt.Signals)
		}
		if err := verifies(t, res, body); err != nil {
			t.Errorf("refresh to %s: %v", c.ref, err)
		}
	}
}

// TestReviewV3JSONEnvelopeRuleWhole: json_error_max_members without keys,
// or keys without it, is refused once resolved (the check went with
// 667df31, which made a file extending gate/v3 parse, so both were
// accepted and never used); a file extending gate/v3 inherits the rest.
func TestReviewV3JSONEnvelopeRuleWhole(t *testing.T) {
	for _, c := range []struct{ file, ptr string }{
		{`{"format": 1, "name": "x", "extends": "gate/v2", "thresholds": {"json_error_max_members": 4}}`, "/json_error_keys"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "json_error_keys": ["error"]}`, "/thresholds/json_error_max_members"},
		{`{"format": 1, "name": "x", "extends": "gate/v1", "json_data_keys": ["rows"]}`, "/thresholds/json_error_max_members"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "json_data_keys": ["rows"]}`, ""},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "thresholds": {"json_error_max_members": 3}}`, ""},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "thresholds": {"json_error_max_members": 3}, "json_false_keys": ["ok"]}`, ""},
	} {
		_, err := ParseRules([]byte(c.file))
		var re *RulesError
		switch {
		case c.ptr == "" && err != nil:
			t.Errorf("%s: %v", c.file, err)
		case c.ptr != "" && (!errors.As(err, &re) || re.Pointer != c.ptr || re.Rule != "required"):
			t.Errorf("%s: %v, want %s required", c.file, err, c.ptr)
		}
	}
}

// TestReviewV3ThresholdErrors: a negative or too large threshold in a
// file extending gate/v3 is refused with its range, without the note for
// a missing threshold (which only a zero can be).
func TestReviewV3ThresholdErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{"format": 1, "name": "x", "extends": "gate/v3", "thresholds": {"min_partial_permille": -5}}`, "ruleset /thresholds/min_partial_permille: -5 is outside 0–1000 (range)"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "thresholds": {"home_redirect_min_segments": 101}}`, "ruleset /thresholds/home_redirect_min_segments: 101 is outside 0–100 (range)"},
		{`{"format": 1, "name": "x", "thresholds": {"max_redirects": 5}}`, "ruleset /thresholds/max_decoded_bytes: 0 is outside 1024–1073741824 (required: a file without extends must set every threshold) (range)"},
	} {
		if _, err := ParseRules([]byte(c.file)); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.file, err, c.want)
		}
	}
}

// TestReviewV3HostPhraseWholeName: a host phrase names the page's host as
// a whole name, not the end or start of a longer one.
func TestReviewV3HostPhraseWholeName(t *testing.T) {
	for text, want := range map[string]bool{
		"box.example is for sale":                               true,
		"www.box.example is for sale.":                          true,
		"the domain box.example is for sale":                    true,
		"voicebox.example is for sale":                          false,
		"voice-box.example is for sale":                         false,
		"my_box.example is for sale, box.example is":            false,
		"voicebox.example is for sale; box.example is for sale": true,
		"buy box.example today":                                 true,
		"buy box.example.":                                      true,
		"buy box.example.org now":                               false,
		"buy box.examples":                                      false,
		"buy box.example-shop.com":                              false,
	} {
		ph := "{host} is for sale"
		if strings.HasPrefix(text, "buy") {
			ph = "buy {host}"
		}
		if got := containsHostPhrase(text, ph, "box.example"); got != want {
			t.Errorf("%q in %q: %v", ph, text, got)
		}
	}
	v3 := builtinRuleset(t, "gate/v3")
	ev := Evidence{URL: "https://box.example/", Status: 200, Headers: map[string]string{"Content-Type": "text/plain"},
		Body: []byte("Our broker note of the week: voicebox.example is for sale, ask us about it.")}
	if res := ClassifyWith(ev, v3); res.Verdict != Retrieved {
		t.Errorf("another domain ending in the host: %s %s", res.Reason, res.Receipt.Signals)
	}
	ev.Body = []byte("This domain: www.box.example is for sale. Make an offer today.")
	if res := ClassifyWith(ev, v3); res.Reason != ReasonParkedDomain {
		t.Errorf("the host's own lander: %s %s", res.Verdict, res.Reason)
	}
}

// TestReviewV3URLForms: under gate/v3 (url_forms) the requested URL and a
// first redirect or final URL that differ only in form are one hop; a
// URL that redirects to itself is still a loop, and gate/v2 keeps its
// verdicts.
func TestReviewV3URLForms(t *testing.T) {
	v2, v3 := builtinRuleset(t, "gate/v2"), builtinRuleset(t, "gate/v3")
	body := []byte(page("Ferries", "<p>"+prose+"</p>"))
	loop := ReasonRedirectLoop
	for _, c := range []struct {
		name, url, final string
		redirects        []Redirect
		v2, v3           Reason
	}{
		{"host slash", "https://a.example", "https://a.example/", nil, loop, ""},
		{"fragment", "https://a.example/t#winter", "https://a.example/t", nil, loop, ""},
		{"case and port", "HTTPS://A.example:443/t", "https://a.example/t", nil, loop, ""},
		{"first hop in another form", "https://a.example", "https://b.example/x", []Redirect{{"https://a.example/", 301}}, loop, ""},
		{"same strings", "https://a.example/t", "https://a.example/t", nil, "", ""},
		{"redirect to itself", "https://a.example", "https://a.example/", []Redirect{{"https://a.example/", 301}}, loop, loop},
		{"real loop", "https://a.example/x", "https://a.example/x", []Redirect{{"https://a.example/x", 302}, {"https://a.example/y", 302}}, loop, loop},
		{"downgrade still seen", "https://a.example/t", "http://a.example/t", nil, ReasonHTTPSDowngrade, ReasonHTTPSDowngrade},
	} {
		ev := Evidence{URL: c.url, FinalURL: c.final, Redirects: c.redirects, Status: 200,
			Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"}, Body: body}
		if res := ClassifyWith(ev, v2); res.Reason != c.v2 {
			t.Errorf("%s: gate/v2 %s %s", c.name, res.Verdict, res.Reason)
		}
		res := ClassifyWith(ev, v3)
		if res.Reason != c.v3 {
			t.Errorf("%s: gate/v3 %s %s", c.name, res.Verdict, res.Reason)
		}
		if err := verifies(t, res, body); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestReviewV3PlaceholderOnlyInHostPhrases: "{host}" in a phrase rule
// (not a host phrase rule) was accepted and matched as the letters
// "{host}", never as a host; it is refused.
func TestReviewV3PlaceholderOnlyInHostPhrases(t *testing.T) {
	_, err := ParseRules([]byte(`{"format": 1, "name": "x", "extends": "gate/v3", "phrases": [{"reason": "fingerprint.parked_domain", "max_text": 600, "phrases": {"en": ["{Host} is on sale"]}}]}`))
	var re *RulesError
	if !errors.As(err, &re) || re.Pointer != "/phrases/0/phrases/en/0" || re.Rule != "host_placeholder" {
		t.Errorf("{host} in phrases: %v", err)
	}
}

// TestReviewV3RedirectMovesThePage: under gate/v3 the fingerprints of a
// redirect's target need a redirect to another host or path. A page at a
// login path whose URL ends in a secret-shaped value and a fragment was
// RETRIEVED, and derived again from its receipt (whose mask takes the
// fragment into the value, so the receipt's URL no longer matches the
// final URL) a login wall: its verdict did not verify.
func TestReviewV3RedirectMovesThePage(t *testing.T) {
	v2, v3 := builtinRuleset(t, "gate/v2"), builtinRuleset(t, "gate/v3")
	body := []byte(page("Sign in", "<p>"+prose+"</p>"))
	for _, c := range []struct {
		name, url, final string
		redirects        []Redirect
		v2, v3           Reason
	}{
		{"login page asked for, token and fragment", "https://a.example/login?token=Zx81kLqP0aRt77vBn2Mm#top", "https://a.example/login?token=Zx81kLqP0aRt77vBn2Mm", nil, ReasonRedirectLoop, ""},
		{"query changed only", "https://a.example/login?next=%2Fa", "https://a.example/login?next=%2Fb", []Redirect{{"https://a.example/login?next=%2Fa", 302}}, ReasonLoginWall, ""},
		{"redirect to a login path", "https://a.example/report", "https://a.example/login?next=%2Freport", []Redirect{{"https://a.example/report", 302}}, ReasonLoginWall, ReasonLoginWall},
		{"redirect to a 404 path", "https://a.example/report", "https://a.example/404", []Redirect{{"https://a.example/report", 302}}, ReasonSoft404, ReasonSoft404},
	} {
		ev := Evidence{URL: c.url, FinalURL: c.final, Redirects: c.redirects, Status: 200,
			Headers: map[string]string{"Content-Type": "text/html; charset=utf-8"}, Body: body}
		if res := ClassifyWith(ev, v2); res.Reason != c.v2 {
			t.Errorf("%s: gate/v2 %s %s", c.name, res.Verdict, res.Reason)
		}
		res := ClassifyWith(ev, v3)
		if res.Reason != c.v3 {
			t.Errorf("%s: gate/v3 %s %s", c.name, res.Verdict, res.Reason)
		}
		if err := verifies(t, res, body); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
