package gate

import (
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxFuzzSeed bounds the seed inputs taken from the fixtures.
const maxFuzzSeed = 16 << 10

// FuzzClassify checks that Classify never panics, always gives one of the
// three verdicts with a consistent result, and is deterministic.
func FuzzClassify(f *testing.F) {
	for _, c := range loadGateCases(f) {
		ev := c.evidence()
		// Large seeds make every execution and every minimisation slow;
		// their first 16 KiB keep the structure.
		if len(ev.Body) > maxFuzzSeed {
			ev.Body = ev.Body[:maxFuzzSeed]
		}
		var hops []string
		for _, r := range ev.Redirects {
			hops = append(hops, r.URL)
		}
		f.Add(ev.URL, ev.FinalURL, strings.Join(hops, "\n"), ev.Status, ev.Header("content-type"), ev.Header("content-encoding"), ev.Header("cf-mitigated"), ev.Body, ev.Error)
	}
	doc := []byte(page("Costs", "<p>"+prose+"</p>"))
	f.Add("https://a.example/", "", "", 200, "text/html", "gzip", "", gz(f, doc), "")
	f.Add("https://a.example/", "", "", 200, "text/html", "br", "", br(f, doc), "")
	f.Add("https://a.example/", "", "", 200, "text/html", "deflate", "", zl(f, doc), "")
	f.Add("https://a.example/", "http://a.example/", "https://a.example/\nhttp://b.example/", 200, "application/json", "", "", []byte(`{"a":1}`), "")
	f.Add("", "", "", 0, "", "", "", []byte("\xff\xfe<\x00h\x00"), "")
	f.Fuzz(func(t *testing.T, url, final, hops string, status int, ctype, cenc, mitigated string, body []byte, errText string) {
		ev := Evidence{URL: url, FinalURL: final, Status: status, Body: body, Error: errText,
			Headers: map[string]string{"Content-Type": ctype, "content-encoding": cenc, "CF-Mitigated": mitigated}}
		if hops != "" {
			for i, u := range strings.Split(hops, "\n") {
				if i == 20 {
					break
				}
				ev.Redirects = append(ev.Redirects, Redirect{URL: u, Status: 302})
			}
		}
		a := Classify(ev)
		b := Classify(ev)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("not deterministic:\n%+v\n%+v", a, b)
		}
		if a.Verdict != Retrieved && a.Verdict != Unknown && a.Verdict != Failed {
			t.Fatalf("verdict %q", a.Verdict)
		}
		checkResultShape(t, a)
	})
}

// markerRe is an independent oracle for what a model view must not hold: a
// complete role tag, chat-template token or CDATA marker.
var markerRe = func() *regexp.Regexp {
	names := make([]string, 0, len(roleTags))
	for n := range roleTags {
		names = append(names, regexp.QuoteMeta(n))
	}
	sort.Strings(names)
	brackets := make([]string, 0, len(bracketTokens))
	for n := range bracketTokens {
		brackets = append(brackets, regexp.QuoteMeta(n))
	}
	sort.Strings(brackets)
	return regexp.MustCompile(`(?i)<(?:/?(?:` + strings.Join(names, "|") + `)(?:[\s/][^<>]*)?|(?:\||｜)[^\s<>]+(?:\||｜))>|<!\[CDATA\[|\]\]>` +
		`|\[/?(?:` + strings.Join(brackets, "|") + `)\]|<</?sys>>`)
}()

// FuzzSanitize checks the model views: no panic, no marker, valid UTF-8,
// the length caps, and masking that is idempotent and never lengthens.
func FuzzSanitize(f *testing.F) {
	fx := loadSanitizeFixtures(f)
	for _, c := range fx.Errors {
		f.Add(c.Error, 0)
	}
	long := makeLongOutput()
	f.Add(long[:2000]+long[len(long)-2000:], 1000) // the fixture's shape, smaller
	f.Add("<sys<system>tem> <|im_<|im_end|>start|> <![CD<![CDATA[ATA[", 40)
	f.Add("[IN[INST]ST] <<SY<<SYS>>S>> <s>x</s> [/SYSTEM_PROMPT] <bos><eos>", 30)
	f.Add("<system\n```\n>x", 5)
	f.Add(`{"error": "<system>boom</system> \u003c \"quoted\" long long long long long long long long long long long long long long long long long", "code": 1}`, 70)
	f.Add(`{"error": {"message": "`+strings.Repeat("m", 300)+`", "type": "x"}, "trace": "`+strings.Repeat("t", 300)+`"}`, 90)
	f.Add("-----BEGIN PRIV<system>ATE KEY-----x-----END PRIVATE KEY-----]>", 0)
	f.Add("bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw //u:pw@h https://0123456789abcdef0123@h eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", 0)
	f.Add("https://discord.com/api/webhooks/1/AbCdEfGhIjKlMnOpQrStUvWxYz0123 openai_key=Q2hlY2tUaGlzT3V0MTIz Bearer\u00a0abcdefghijklmnop1234", 0)
	f.Add(`map[Authorization:[Basic dXNlcjpw] Cookie:[a=COOKIE: b=cookie:c=1; d=\"e\"]] Set-Cookie: s=abcdef; Path=/ {\"Authorization\":\"x`, 0)
	f.Add(`http.Header{"X-Api-Key":[]string{"9f8e7d6c5b4a3928"}, "Cookie":[]string{"sid=9f8e7d6c5b4a3928; x="}} cookie:[=`, 0)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 0 {
			limit = -limit
		}
		limit %= 5000
		opt := SanitizeOptions{MaxErrorChars: limit, MaxOutputChars: limit}

		masked := MaskSecrets(s)
		if MaskSecrets(masked) != masked {
			t.Fatalf("MaskSecrets not idempotent on %q: %q -> %q", s, masked, MaskSecrets(masked))
		}
		if utf8.RuneCountInString(masked) > utf8.RuneCountInString(s) {
			t.Fatalf("MaskSecrets lengthened %q to %q", s, masked)
		}

		ev := SanitizeError(s, opt)
		if !strings.HasPrefix(ev.ModelView, ErrorPrefix) || !utf8.ValidString(ev.ModelView) {
			t.Fatalf("error view %q", ev.ModelView)
		}
		maxErr := limit
		if maxErr == 0 {
			maxErr = DefaultMaxErrorChars
		}
		if n := utf8.RuneCountInString(ev.ModelView); n > utf8.RuneCountInString(ErrorPrefix)+maxErr+utf8.RuneCountInString(TruncationMarker) {
			t.Fatalf("error view has %d characters, cap %d", n, maxErr)
		}
		if m := markerRe.FindString(ev.ModelView); m != "" {
			t.Fatalf("error view of %q holds marker %q: %q", s, m, ev.ModelView)
		}
		if ev.Structured && !json.Valid([]byte(strings.TrimPrefix(ev.ModelView, ErrorPrefix))) {
			t.Fatalf("structured error view of %q is not JSON: %q", s, ev.ModelView)
		}

		full := PrepareOutput(s, opt)
		ov := SanitizeOutput(full, "sha256:feed", opt)
		maxOut := limit
		if maxOut == 0 {
			maxOut = DefaultMaxOutputChars
		}
		if n := utf8.RuneCountInString(ov.ModelView); n > maxOut {
			t.Fatalf("output view has %d characters, cap %d", n, maxOut)
		}
		if m := markerRe.FindString(ov.ModelView); m != "" {
			t.Fatalf("output view of %q holds marker %q: %q", s, m, ov.ModelView)
		}
		if !utf8.ValidString(ov.ModelView) {
			t.Fatalf("output view not valid UTF-8")
		}
	})
}

// FuzzReadKinds checks file and tool reads like FuzzClassify: no panic, a
// consistent result, determinism, and (for file reads) the size rule.
func FuzzReadKinds(f *testing.F) {
	f.Add("file", "/a/b.md", int64(5), []byte("hello"), "")
	f.Add("file", "x.json", int64(-1), []byte(`{"a":1}`), "")
	f.Add("tool", "browser", int64(0), []byte(page("T", "<p>"+prose+"</p>")), "https://a.example/")
	f.Add("", "", int64(0), []byte("<p>x</p>"), "")
	f.Add("ftp", "", int64(0), []byte("x"), "ftp://a/")
	f.Fuzz(func(t *testing.T, kind, name string, size int64, body []byte, url string) {
		ev := Evidence{Kind: kind, Path: name, Tool: name, URL: url, Body: body}
		if size >= 0 {
			ev.Size = &size
		}
		a, b := Classify(ev), Classify(ev)
		if !reflect.DeepEqual(a, b) {
			t.Fatal("not deterministic")
		}
		checkResultShape(t, a)
		if kind == ReadFile && size >= 0 && size != int64(len(body)) && a.Reason != ReasonSizeMismatch {
			t.Fatalf("size %d for %d bytes gave %s", size, len(body), a.Reason)
		}
	})
}
