package gate

import (
	"errors"
	"strings"
	"testing"
)

func TestBuiltinRulesets(t *testing.T) {
	rs := BuiltinRulesets()
	if got := strings.Join(rs.Names(), ","); got != "gate/v1,gate/v2,gate/v3" {
		t.Fatalf("names %s", got)
	}
	def := BuiltinRules()
	if def.Name() != RulesetVersion || rs.Default() != def {
		t.Fatalf("default %s", def.Name())
	}
	v1, err := rs.Lookup(RulesetV1, "")
	if err != nil || v1.Name() != RulesetV1 {
		t.Fatalf("v1 without hash: %v", err)
	}
	if th := v1.Thresholds(); th.MaxRedirects != MaxRedirects || th.MaxDecodedBytes != MaxDecodedBytes ||
		th.MinHTMLText != MinHTMLText || th.LoginWallMaxOtherText != LoginWallMaxOtherText {
		t.Fatalf("v1 thresholds %+v differ from the constants", th)
	}
	want := v1.Thresholds()
	want.WideCharWeight = 3
	v2 := builtinRuleset(t, "gate/v2")
	if v2.Thresholds() != want {
		t.Fatal("gate/v2 inherits gate/v1's thresholds but the wide-character weight")
	}
	// gate/v3 inherits gate/v2's and sets only the thresholds that are
	// zero (off) in gate/v1 and gate/v2.
	if def.Name() != "gate/v3" {
		t.Fatalf("default %s, want gate/v3", def.Name())
	}
	want.HTMLMaxControlPermille, want.MinPartialPermille, want.MetaRefreshMaxText = 20, 500, 200
	want.HomeRedirectMinSegments, want.TitleRuleMaxText, want.JSONErrorMaxMembers = 2, 400, 6
	if def.Thresholds() != want {
		t.Fatalf("gate/v3 thresholds %+v", def.Thresholds())
	}
	for _, r := range []*Rules{v1, v2} {
		var zero Thresholds
		th := r.Thresholds()
		th.MaxRedirects, th.MaxDecodedBytes, th.MinHTMLText, th.HTMLBytesPerText, th.MaxHTMLTextRequired = 0, 0, 0, 0, 0
		th.MinPlainText, th.MaxControlPermille, th.ConsentWallMinText, th.ConsentWallMaxOtherText = 0, 0, 0, 0
		th.LoginWallMaxOtherText, th.WideCharWeight = 0, 0
		if th != zero || len(r.doc.Checks)+len(r.doc.LoginPathSuffixes)+len(r.doc.ConsentIgnorePrefixes)+
			len(r.doc.ConsentIgnoreElements)+len(r.doc.HostPhrases)+len(r.doc.JSONErrorKeys)+
			len(r.doc.JSONFalseKeys)+len(r.doc.JSONDataKeys) != 0 {
			t.Errorf("%s sets a gate/v3 field: %+v", r.Name(), th)
		}
		if strings.Contains(string(r.JSON()), `"checks":`) || strings.Contains(string(r.JSON()), `"host_phrases":`) {
			t.Errorf("%s: the gate/v3 fields must be absent from its canonical JSON", r.Name())
		}
	}
	for _, c := range []struct{ name, hash string }{
		{RulesetVersion, ""},        // only v1 may omit its hash
		{RulesetVersion, v1.Hash()}, // the wrong hash
		{"site/v9", def.Hash()},     // an unknown name
		{RulesetV1, "sha256:" + strings.Repeat("0", 64)},
	} {
		if _, err := rs.Lookup(c.name, c.hash); !errors.Is(err, ErrUnknownRuleset) {
			t.Errorf("Lookup(%q, %q): %v, want ErrUnknownRuleset", c.name, c.hash, err)
		}
	}
	if r, err := Lookup(def.Name(), def.Hash()); err != nil || r != def {
		t.Fatalf("Lookup of the default: %v", err)
	}
	// The canonical JSON is a ruleset file of the same hash.
	again, err := ParseRules(def.JSON())
	if err != nil || again.Hash() != def.Hash() {
		t.Fatalf("JSON round trip: %v %s %s", err, again.Hash(), def.Hash())
	}
}

func TestParseRules(t *testing.T) {
	ext := `{"format": 1, "name": "site/v1", "extends": "gate/v2",
	  "thresholds": {"min_html_text": 60},
	  "phrases": [{"reason": "fingerprint.paywall", "max_text": 900, "phrases": {"en": ["Members   only — join   today"]}}],
	  "domains": [{"host": "wall.example", "subdomains": true, "reason": "fingerprint.login_wall"}]}`
	r, err := ParseRules([]byte(ext))
	if err != nil {
		t.Fatal(err)
	}
	if r.Thresholds().MinHTMLText != 60 || r.Thresholds().MaxRedirects != MaxRedirects {
		t.Fatalf("thresholds %+v", r.Thresholds())
	}
	// Formatting does not change the hash; content does.
	r2, err := ParseRules([]byte(strings.Join(strings.Fields(ext), " ")))
	if err != nil || r2.Hash() != r.Hash() {
		t.Fatalf("whitespace changed the hash: %v", err)
	}
	r3, _ := ParseRules([]byte(strings.Replace(ext, "900", "901", 1)))
	if r3 == nil || r3.Hash() == r.Hash() {
		t.Fatal("content change kept the hash")
	}
	// The extension's rules apply; the base's still do.
	short := htmlEvidence(page("Story", "<p>Members only — join today to read this.</p><p>"+prose+"</p>"))
	if res := ClassifyWith(short, r); res.Reason != ReasonPaywall || res.Receipt.Ruleset != "site/v1" || res.Receipt.RulesetHash != r.Hash() {
		t.Fatalf("%s %s", res.Reason, res.Receipt.Ruleset)
	}
	if res := Classify(short); res.Verdict != Retrieved {
		t.Fatalf("built-in: %s", res.Reason)
	}
	onHost := htmlEvidence(page("Story", "<p>"+prose+"</p>"))
	onHost.URL = "https://news.wall.example/a"
	if res := ClassifyWith(onHost, r); res.Reason != ReasonLoginWall || res.Receipt.Signals[0] != "final-host:news.wall.example" {
		t.Fatalf("%s %v", res.Reason, res.Receipt.Signals)
	}

	// A file extending gate/v3 inherits its fields and may set its own.
	site3, err := ParseRules([]byte(`{"format": 1, "name": "site/v3", "extends": "gate/v3", "thresholds": {"min_partial_permille": 900},
	  "login_path_suffixes": ["/sso/start"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if th := site3.Thresholds(); th.MinPartialPermille != 900 || th.TitleRuleMaxText != 400 || !site3.checks[CheckContentLength] ||
		site3.loginSuffix("/a/SSO/start/") != "/sso/start" || site3.loginSuffix("/u/login/identifier") != "/u/login/identifier" {
		t.Fatalf("site/v3: %+v", th)
	}

	rs := BuiltinRulesets()
	if err := rs.Add(r); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Lookup("site/v1", r.Hash()); err != nil || got != r {
		t.Fatalf("lookup added: %v", err)
	}
	if err := rs.Add(r3); !errors.Is(err, ErrRules) {
		t.Fatalf("same name, other hash: %v", err)
	}

	bad := []struct{ doc, pointer, rule string }{
		{`{`, "", "json"},
		{`{"format": 1, "name": "x", "thresholds": {}, "extra": 1}`, "", "json"},
		{`{"format": 2, "name": "x"}`, "/format", "enum"},
		{`{"format": 1, "name": "has space"}`, "/name", "pattern"},
		{`{"format": 1, "name": "x", "extends": "gate/v9"}`, "/extends", "known_ruleset"},
		{`{"format": 1, "name": "x", "extends": "x"}`, "/extends", "not_self"},
		{`{"format": 1, "name": "x", "thresholds": {"max_redirects": 10}}`, "/thresholds/max_decoded_bytes", "range"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "thresholds": {"max_control_permille": 5000}}`, "/thresholds/max_control_permille", "range"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "thresholds": {"min_html_text": 900}}`, "/thresholds/max_html_text_required", "minimum"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "phrases": [{"reason": "transport.error", "max_text": 5, "phrases": {"en": ["a"]}}]}`, "/phrases/0/reason", "enum"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "phrases": [{"reason": "fingerprint.paywall", "max_text": 0, "phrases": {"en": ["a"]}}]}`, "/phrases/0/max_text", "range"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "phrases": [{"reason": "fingerprint.paywall", "max_text": 5, "phrases": {}}]}`, "/phrases/0/phrases", "required"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "phrases": [{"reason": "fingerprint.paywall", "max_text": 5, "phrases": {"EN": ["a"]}}]}`, "/phrases/0/phrases/EN", "language_tag"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "phrases": [{"reason": "fingerprint.paywall", "max_text": 5, "phrases": {"en": ["  "]}}]}`, "/phrases/0/phrases/en/0", "length"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "domains": [{"host": "Bad.Example", "reason": "fingerprint.paywall"}]}`, "/domains/0/host", "hostname"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "domains": [{"host": "a.example", "reason": "nope"}]}`, "/domains/0/reason", "enum"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "consent_markers": ["CMP"]}`, "/consent_markers/0", "lowercase"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "challenge_titles": [""]}`, "/challenge_titles/0", "length"},
		{`{"format": 1, "name": "x", "extends": "gate/v2", "challenge_headers": [{"name": "x-wall", "values": []}]}`, "/challenge_headers/0", "required"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "checks": ["everything"]}`, "/checks/0", "pattern"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "login_path_suffixes": ["u/login"]}`, "/login_path_suffixes/0", "pattern"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "consent_ignore_elements": ["Article"]}`, "/consent_ignore_elements/0", "pattern"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "thresholds": {"min_partial_permille": 1001}}`, "/thresholds/min_partial_permille", "range"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "host_phrases": [{"reason": "fingerprint.parked_domain", "max_text": 5, "phrases": {"en": ["for sale"]}}]}`, "/host_phrases/0/phrases/en/0", "host_placeholder"},
		{`{"format": 1, "name": "x", "extends": "gate/v3", "host_phrases": [{"reason": "fingerprint.soft_error", "max_text": 5, "phrases": {"en": ["{host} x"]}}]}`, "/host_phrases/0/reason", "enum"},
	}
	for _, b := range bad {
		_, err := ParseRules([]byte(b.doc))
		var re *RulesError
		if !errors.As(err, &re) || !errors.Is(err, ErrRules) || re.Pointer != b.pointer || re.Rule != b.rule {
			t.Errorf("ParseRules(%s): %v, want %s (%s)", b.doc, err, b.pointer, b.rule)
		}
	}
}
