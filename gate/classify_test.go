package gate

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// prose is a paragraph of real text, enough on its own for any HTML page
// under 40 KB.
const prose = "The quarterly report compares the spend of the three teams and explains why storage grew faster than compute during the spring."

func page(title, body string) string {
	return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" + title + "</title></head><body>" + body + "</body></html>"
}

func htmlEvidence(body string) Evidence {
	return Evidence{
		URL:     "https://site.example/a",
		Status:  200,
		Headers: map[string]string{"content-type": "text/html; charset=utf-8"},
		Body:    []byte(body),
	}
}

func gz(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func zl(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func rawDeflate(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func br(tb testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

type classifyCase struct {
	name    string
	ev      Evidence
	verdict Verdict
	layer   Layer
	reason  Reason
	check   func(t *testing.T, res Result)
}

func runClassifyCases(t *testing.T, cases []classifyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Classify(c.ev)
			if res.Verdict != c.verdict || res.Layer != c.layer || res.Reason != c.reason {
				t.Fatalf("got %s/%s/%s, want %s/%s/%s\nlayers: %+v",
					res.Verdict, res.Layer, res.Reason, c.verdict, c.layer, c.reason, res.Layers)
			}
			checkResultShape(t, res)
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

func withEncoding(ev Evidence, enc string, body []byte) Evidence {
	h := map[string]string{"content-encoding": enc}
	for k, v := range ev.Headers {
		h[k] = v
	}
	ev.Headers = h
	ev.Body = body
	return ev
}

func textContains(want string) func(*testing.T, Result) {
	return func(t *testing.T, res Result) {
		t.Helper()
		if !strings.Contains(res.Text, want) {
			t.Fatalf("text lacks %q:\n%s", want, res.Text)
		}
	}
}

func TestClassifyContentEncoding(t *testing.T) {
	doc := []byte(page("Costs", "<p>"+prose+"</p>"))
	base := htmlEvidence("")
	bomb := gz(t, make([]byte, MaxDecodedBytes+1))
	truncated := gz(t, doc)
	truncated = truncated[:len(truncated)/2]
	runClassifyCases(t, []classifyCase{
		{name: "gzip", ev: withEncoding(base, "gzip", gz(t, doc)), verdict: Retrieved, check: func(t *testing.T, res Result) {
			textContains(prose)(t, res)
			if res.Receipt.DecodedBytes != len(doc) || res.Receipt.ContentEncoding != "gzip" {
				t.Fatalf("receipt %+v", res.Receipt)
			}
		}},
		{name: "x-gzip upper case", ev: withEncoding(base, "X-GZIP", gz(t, doc)), verdict: Retrieved, check: textContains(prose)},
		{name: "deflate zlib", ev: withEncoding(base, "deflate", zl(t, doc)), verdict: Retrieved, check: textContains(prose)},
		{name: "deflate raw", ev: withEncoding(base, "deflate", rawDeflate(t, doc)), verdict: Retrieved, check: textContains(prose)},
		{name: "br", ev: withEncoding(base, "br", br(t, doc)), verdict: Retrieved, check: textContains(prose)},
		{name: "gzip then br", ev: withEncoding(base, "gzip, br", br(t, gz(t, doc))), verdict: Retrieved, check: textContains(prose)},
		{name: "identity", ev: withEncoding(base, "identity", doc), verdict: Retrieved, check: textContains(prose)},
		{name: "header kept after client decoded", ev: withEncoding(base, "gzip", doc), verdict: Retrieved, check: func(t *testing.T, res Result) {
			if len(res.Receipt.Notes) != 1 || res.Receipt.Notes[0] != NoteEncodingNotApplied {
				t.Fatalf("notes %v", res.Receipt.Notes)
			}
		}},
		{name: "br header on plain text body", ev: withEncoding(base, "br", doc), verdict: Retrieved},
		{name: "zstd header on plain text body", ev: withEncoding(base, "zstd", doc), verdict: Retrieved},
		{name: "truncated gzip", ev: withEncoding(base, "gzip", truncated), verdict: Failed, layer: LayerExtraction, reason: ReasonDecodeError},
		{name: "corrupt br", ev: withEncoding(base, "br", []byte{0x1b, 0xff, 0x00, 0x01, 0x02, 0x03}), verdict: Failed, layer: LayerExtraction, reason: ReasonDecodeError},
		{name: "zstd", ev: withEncoding(base, "zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 1, 2}), verdict: Unknown, layer: LayerExtraction, reason: ReasonUnsupportedEncoding},
		{name: "gzip bomb", ev: withEncoding(base, "gzip", bomb), verdict: Unknown, layer: LayerExtraction, reason: ReasonTooLarge},
		{name: "gzip of whitespace is empty", ev: withEncoding(base, "gzip", gz(t, []byte(" \n\t "))), verdict: Failed, layer: LayerTransport, reason: ReasonEmptyBody},
	})
}

func TestClassifyCharset(t *testing.T) {
	latin := "<html><head><meta charset=\"ISO-8859-1\"><title>Caf\xe9</title></head><body><p>Le caf\xe9 cr\xe8me co\xfbte trois euros dans la rue principale du village.</p></body></html>"
	sjisBody, err := japanese.ShiftJIS.NewEncoder().String("<html><head><meta charset=\"Shift_JIS\"><title>四半期報告</title></head><body><p>第二四半期には三つの分析ワークロードを予約インスタンスに移し、時間単価を約九パーセント下げました。ストレージは着実に増えました。</p></body></html>")
	if err != nil {
		t.Fatal(err)
	}
	cyr, err := charmap.Windows1251.NewEncoder().String("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1251\"></head><body><p>Привет, мир! Эта статья о расходах на облако во втором квартале.</p></body></html>")
	if err != nil {
		t.Fatal(err)
	}
	lateUTF8 := page("Later", "<p>"+strings.Repeat("ascii only text here. ", 60)+"</p><p>Größenänderung über Straße</p>")
	noMeta := func(body string) Evidence {
		ev := htmlEvidence(body)
		ev.Headers = map[string]string{"Content-Type": "text/html"}
		return ev
	}
	headerWins := htmlEvidence(latin)
	headerWins.Headers = map[string]string{"Content-Type": "text/html; charset=windows-1252"}
	runClassifyCases(t, []classifyCase{
		{name: "iso-8859-1 meta", ev: noMeta(latin), verdict: Retrieved, check: func(t *testing.T, res Result) {
			textContains("Le café crème coûte")(t, res)
			if res.Receipt.Charset != "windows-1252" || res.Receipt.Title != "Café" {
				t.Fatalf("charset %q title %q", res.Receipt.Charset, res.Receipt.Title)
			}
		}},
		{name: "shift_jis meta", ev: noMeta(sjisBody), verdict: Retrieved, check: func(t *testing.T, res Result) {
			textContains("予約インスタンスに移し")(t, res)
			if res.Receipt.Charset != "shift_jis" || res.Receipt.Title != "四半期報告" {
				t.Fatalf("charset %q title %q", res.Receipt.Charset, res.Receipt.Title)
			}
		}},
		{name: "http-equiv windows-1251", ev: noMeta(cyr), verdict: Retrieved, check: textContains("Привет, мир! Эта статья")},
		{name: "header charset", ev: headerWins, verdict: Retrieved, check: textContains("café")},
		{name: "utf-8 after an ascii first kilobyte", ev: noMeta(lateUTF8), verdict: Retrieved, check: textContains("Größenänderung über Straße")},
		{name: "utf-16 json with bom", ev: Evidence{URL: "https://api.example/p", Status: 200,
			Headers: map[string]string{"content-type": "application/json"},
			Body:    []byte("\xff\xfe{\x00\"\x00p\x00\"\x00:\x001\x00}\x00")}, verdict: Retrieved, check: textContains(`{"p":1}`)},
	})
}

// chain builds a redirect chain through urls, each answering 302.
func chain(urls ...string) []Redirect {
	out := make([]Redirect, len(urls))
	for i, u := range urls {
		out[i] = Redirect{URL: u, Status: 302}
	}
	return out
}

func TestClassifyTransport(t *testing.T) {
	okPage := page("Fine", "<p>"+prose+"</p>")
	ev := func(url, final string, redirects []Redirect, status int) Evidence {
		e := htmlEvidence(okPage)
		e.URL, e.FinalURL, e.Redirects, e.Status = url, final, redirects, status
		return e
	}
	var hops10, hops11 []string
	for i := 0; i < 11; i++ {
		u := "https://h.example/" + strconv.Itoa(i)
		if i < 10 {
			hops10 = append(hops10, u)
		}
		hops11 = append(hops11, u)
	}
	refused := ev("https://x.example/", "", nil, 0)
	refused.Error = "dial tcp 10.0.0.1:443: connect: connection refused"
	refused.Body = nil
	deadline := refused
	deadline.Error = "Get \"https://x.example/\": context deadline exceeded"
	runClassifyCases(t, []classifyCase{
		{name: "redirect loop then 200", ev: ev("https://a.example/", "https://a.example/", chain("https://a.example/", "https://b.example/"), 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonRedirectLoop},
		{name: "self redirect", ev: ev("https://a.example/x", "https://a.example/x", chain("https://a.example/x"), 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonRedirectLoop},
		{name: "loop through equivalent urls", ev: ev("https://a.example/", "HTTPS://A.EXAMPLE:443/#top", chain("https://a.example/", "https://b.example/"), 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonRedirectLoop},
		{name: "10 hops ok", ev: ev(hops10[0], "https://h.example/final", chain(hops10...), 200), verdict: Retrieved},
		{name: "11 hops", ev: ev(hops11[0], "https://h.example/final", chain(hops11...), 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonTooManyRedirects},
		{name: "downgrade in the middle", ev: ev("https://a.example/", "https://c.example/",
			chain("https://a.example/", "http://b.example/"), 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonHTTPSDowngrade,
			check: func(t *testing.T, res Result) {
				if !strings.Contains(res.Layers[0].Detail, "http://b.example/") {
					t.Fatalf("detail %q", res.Layers[0].Detail)
				}
			}},
		{name: "downgrade without reported redirects", ev: ev("https://a.example/", "http://a.example/", nil, 200),
			verdict: Failed, layer: LayerTransport, reason: ReasonHTTPSDowngrade},
		{name: "upgrade is fine", ev: ev("http://a.example/", "https://a.example/", chain("http://a.example/"), 200), verdict: Retrieved},
		{name: "404", ev: ev("https://a.example/", "", nil, 404), verdict: Failed, layer: LayerTransport, reason: "transport.http_404"},
		{name: "final 301", ev: ev("https://a.example/", "", nil, 301), verdict: Failed, layer: LayerTransport, reason: "transport.http_301"},
		{name: "no status no error", ev: ev("https://a.example/", "", nil, 0), verdict: Failed, layer: LayerTransport, reason: ReasonInvalidStatus},
		{name: "status 999", ev: ev("https://a.example/", "", nil, 999), verdict: Failed, layer: LayerTransport, reason: ReasonInvalidStatus},
		{name: "connection refused", ev: refused, verdict: Failed, layer: LayerTransport, reason: ReasonTransportError},
		{name: "deadline exceeded", ev: deadline, verdict: Failed, layer: LayerTransport, reason: ReasonTimeout},
		{name: "204", ev: func() Evidence { e := ev("https://a.example/", "", nil, 204); e.Body = nil; return e }(),
			verdict: Failed, layer: LayerTransport, reason: ReasonEmptyBody},
	})
}

func TestClassifyExtraction(t *testing.T) {
	typed := func(ct, body string) Evidence {
		e := htmlEvidence(body)
		e.Headers = map[string]string{"Content-Type": ct}
		if ct == "" {
			e.Headers = nil
		}
		return e
	}
	bigShell := page("Shop", "<div id=\"app\">Loading the shop for you</div><script>"+strings.Repeat("var a=1;", 60000)+"</script>")
	bigReal := page("Shop", "<main>"+strings.Repeat("<p>"+prose+"</p>", 6)+"</main><script>"+strings.Repeat("var a=1;", 60000)+"</script>")
	runClassifyCases(t, []classifyCase{
		{name: "tiny html without script", ev: typed("text/html", "<p>Price: 19.99</p>"), verdict: Unknown, layer: LayerExtraction, reason: ReasonTooLittleText},
		{name: "480 KB shell with a loading line", ev: typed("text/html", bigShell), verdict: Unknown, layer: LayerExtraction, reason: ReasonScriptShell},
		{name: "480 KB page with real text", ev: typed("text/html", bigReal), verdict: Retrieved},
		{name: "noscript text does not count", ev: typed("text/html", page("App", "<noscript>"+prose+"</noscript><script>x()</script>")),
			verdict: Unknown, layer: LayerExtraction, reason: ReasonScriptShell},
		{name: "template and svg text do not count", ev: typed("text/html", page("A", "<template><p>"+prose+"</p></template><svg><text>"+prose+"</text></svg>")),
			verdict: Unknown, layer: LayerExtraction, reason: ReasonTooLittleText},
		{name: "entities decoded", ev: typed("text/html", page("A", "<p>Fish &amp; chips &mdash; "+prose+"</p>")), verdict: Retrieved, check: textContains("Fish & chips — The")},
		{name: "blocks on lines", ev: typed("text/html", page("T", "<h1>Head</h1><p>"+prose+"</p><p>Two <b>bold</b>word</p>")), verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				want := "T\n\nHead\n" + prose + "\nTwo boldword"
				if res.Text != want {
					t.Fatalf("text %q\nwant %q", res.Text, want)
				}
			}},
		{name: "json array", ev: typed("application/json; charset=utf-8", "[]"), verdict: Retrieved},
		{name: "problem json", ev: typed("application/problem+json", `{"title":"x"}`), verdict: Retrieved},
		{name: "invalid json", ev: typed("application/json", `<html>oops</html>`), verdict: Unknown, layer: LayerExtraction, reason: ReasonInvalidJSON},
		{name: "truncated json", ev: typed("application/json", `{"price": 19.`), verdict: Unknown, layer: LayerExtraction, reason: ReasonInvalidJSON},
		{name: "plain text", ev: typed("text/plain", "ok"), verdict: Retrieved},
		{name: "punctuation only", ev: typed("text/plain", "-- ... --"), verdict: Unknown, layer: LayerExtraction, reason: ReasonTooLittleText},
		{name: "binary under text/plain", ev: typed("text/plain", "ab\x00\x01\x02cd"), verdict: Unknown, layer: LayerExtraction, reason: ReasonBinary},
		{name: "png", ev: typed("image/png", "\x89PNG\r\n\x1a\n\x00\x00"), verdict: Unknown, layer: LayerExtraction, reason: ReasonBinary},
		{name: "pdf", ev: typed("application/pdf", "%PDF-1.7\n"), verdict: Unknown, layer: LayerExtraction, reason: ReasonBinary},
		{name: "xml feed", ev: typed("application/rss+xml", "<?xml version=\"1.0\"?><rss><channel><title>News</title></channel></rss>"), verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				if res.Receipt.Kind != KindXML {
					t.Fatalf("kind %q", res.Receipt.Kind)
				}
			}},
		{name: "sniffed json", ev: typed("", `{"price": 19.99}`), verdict: Retrieved, check: func(t *testing.T, res Result) {
			if res.Receipt.Kind != KindJSON {
				t.Fatalf("kind %q", res.Receipt.Kind)
			}
		}},
		{name: "sniffed html shell", ev: typed("application/octet-stream", "<html><body><script>go()</script></body></html>"), verdict: Unknown, layer: LayerExtraction, reason: ReasonScriptShell},
		{name: "sniffed binary", ev: typed("", "\x00\x01\x02\x03\xff\xfe"), verdict: Unknown, layer: LayerExtraction, reason: ReasonBinary},
		{name: "csv", ev: typed("text/csv; header=present", "a,b\n1,2\n"), verdict: Retrieved},
	})
}

func TestClassifyFingerprint(t *testing.T) {
	article := "<article><h1>How challenge pages work</h1>" + strings.Repeat("<p>"+prose+"</p>", 3) + "</article>"
	about := page("How Cloudflare challenge pages work",
		"<article><h1>Just a moment...</h1><p>A challenge page shows 'Just a moment...' or 'Verify you are human', "+
			"uses a form with id <code>challenge-form</code> and a div <code>&lt;div id=\"cf-challenge\"&gt;</code>, "+
			"and loads /cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1. Consent walls say 'Accept all'; "+
			"login walls ask for a password; soft 404 pages say 'Page not found'.</p>"+strings.Repeat("<p>"+prose+"</p>", 3)+"</article>")
	aboutEv := htmlEvidence(about)
	aboutEv.Headers = map[string]string{
		"Content-Type":            "text/html",
		"Content-Security-Policy": "script-src 'self' challenges.cloudflare.com www.google.com/recaptcha/",
		"Server":                  "cloudflare",
		"CF-Mitigated":            "none",
	}
	headerUpper := htmlEvidence(page("Shop", article))
	headerUpper.Headers = map[string]string{"CONTENT-TYPE": "text/html", "Cf-Mitigated": "Challenge"}
	vercel := htmlEvidence(page("Shop", article))
	vercel.Headers["x-vercel-mitigated"] = "challenge"
	jsonChallenge := Evidence{URL: "https://api.example/p", Status: 200, Body: []byte(`{"p":1}`),
		Headers: map[string]string{"content-type": "application/json", "cf-mitigated": "challenge"}}
	toLogin := htmlEvidence(page("Shop", article))
	toLogin.URL, toLogin.FinalURL, toLogin.Redirects = "https://shop.example/orders", "https://shop.example/users/sign_in?next=/orders", chain("https://shop.example/orders")
	toDocs := htmlEvidence(page("Login overview", article))
	toDocs.URL, toDocs.FinalURL, toDocs.Redirects = "https://docs.example/auth", "https://docs.example/docs/login/overview", chain("https://docs.example/auth")
	toConsent := htmlEvidence(page("Before you continue to Google", article))
	toConsent.URL, toConsent.FinalURL, toConsent.Redirects = "https://www.google.com/search?q=x", "https://consent.google.com/ml?continue=x", chain("https://www.google.com/search?q=x")
	to404 := htmlEvidence(page("Shop", article))
	to404.URL, to404.FinalURL, to404.Redirects = "https://shop.example/item/9", "https://shop.example/404.html", chain("https://shop.example/item/9")
	notFound404 := htmlEvidence(page("Page not found", "<p>"+prose+"</p>"))
	notFound404.Status = 404
	runClassifyCases(t, []classifyCase{
		{name: "article about challenges", ev: aboutEv, verdict: Retrieved},
		{name: "headers case-insensitive", ev: headerUpper, verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "vercel challenge header", ev: vercel, verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "challenge header on json", ev: jsonChallenge, verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "challenge form id", ev: htmlEvidence(page("Shop", `<form id="challenge-form" action="/?__cf_chl_f_tk=x" method="POST"><input type="hidden"></form>`+article)),
			verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "attention required title", ev: htmlEvidence(page("Attention Required! | Cloudflare", article)), verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "title merely starting like a challenge", ev: htmlEvidence(page("Just a moment of calm: a review", article)), verdict: Retrieved},
		{name: "cloudflare bot script on a real page", ev: htmlEvidence(page("Shop", article+`<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script>`)), verdict: Retrieved},
		{name: "imperva script on a real page", ev: htmlEvidence(page("Shop", article+`<script src="/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e"></script>`)), verdict: Retrieved},
		{name: "imperva challenge iframe", ev: htmlEvidence(page("Shop", `<iframe id="main-iframe" src="/_Incapsula_Resource?CWUDNSAI=9&xinfo=1"></iframe>`+article)),
			verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "turnstile widget on a real page", ev: htmlEvidence(page("Contact", article+`<div class="cf-turnstile" data-sitekey="x"></div>`)), verdict: Retrieved},
		{name: "svg title is not the page title", ev: htmlEvidence("<html><body><svg><title>Just a moment...</title></svg>" + article + "</body></html>"), verdict: Retrieved},
		{name: "consent banner on an article", ev: htmlEvidence(page("News", article+`<div id="onetrust-banner-sdk"><p>We use cookies to improve your experience. Accept all or manage options.</p></div>`)), verdict: Retrieved},
		{name: "consent platform wall", ev: htmlEvidence(page("News", `<div id="qc-cmp2-container"><p>We value your privacy. We and our partners store and access information on a device.</p><button>AGREE</button></div>`)),
			verdict: Unknown, layer: LayerFingerprint, reason: ReasonConsentWall},
		{name: "empty consent mount on a shell", ev: htmlEvidence(page("App", `<div id="consent-root"></div><script>boot()</script>`)),
			verdict: Unknown, layer: LayerExtraction, reason: ReasonScriptShell},
		{name: "login box beside an article", ev: htmlEvidence(page("News", article+`<form action="/login"><input name="u"><input type="password" name="p"><button>Sign in</button></form>`)), verdict: Retrieved},
		{name: "login wall with site chrome", ev: htmlEvidence(page("Sign in", `<header><nav><a>Home</a><a>Products and services for every team</a><a>Pricing plans</a><a>Documentation and guides</a><a>Contact our sales team</a></nav></header><h1>Welcome back</h1><form><input name="user"><input type="PASSWORD"><button>Log in</button></form><footer>Copyright 2026 Example Corporation, all rights reserved worldwide</footer>`)),
			verdict: Unknown, layer: LayerFingerprint, reason: ReasonLoginWall},
		{name: "redirect to login", ev: toLogin, verdict: Unknown, layer: LayerFingerprint, reason: ReasonLoginWall},
		{name: "redirect to docs about login", ev: toDocs, verdict: Retrieved},
		{name: "login box in the header of a short page", ev: htmlEvidence(page("Example Domain", `<header><form><input name="u"><input type="password"></form></header><p>This domain is for use in illustrative examples in documents.</p>`)), verdict: Retrieved},
		{name: "redirect to consent host", ev: toConsent, verdict: Unknown, layer: LayerFingerprint, reason: ReasonConsentWall},
		{name: "redirect to 404 page", ev: to404, verdict: Unknown, layer: LayerFingerprint, reason: ReasonSoft404},
		{name: "next.js 404 title", ev: htmlEvidence(page("404: This page could not be found", "<p>"+prose+"</p>")), verdict: Unknown, layer: LayerFingerprint, reason: ReasonSoft404},
		{name: "real 404 is transport", ev: notFound404, verdict: Failed, layer: LayerTransport, reason: "transport.http_404"},
		{name: "not-found words in an article", ev: htmlEvidence(page("Shop", "<h1>Page not found?</h1><p>"+prose+"</p><p>"+prose+"</p>")), verdict: Retrieved},
		// gate/v2: on a short page (at most 200 letters and digits) the
		// words decide; gate/v1 only read the title.
		{name: "short page saying not found", ev: htmlEvidence(page("Shop", "<h1>Page not found?</h1><p>"+prose+"</p>")), verdict: Unknown, layer: LayerFingerprint, reason: ReasonSoft404},
	})
}

func TestHeaderLookup(t *testing.T) {
	ev := Evidence{Headers: map[string]string{"content-type": "a", "Content-Type": "b", "CONTENT-TYPE": "c", "X": "y"}}
	for i := 0; i < 50; i++ { // map order varies between runs of the loop
		if got := ev.Header("content-TYPE"); got != "c" { // "CONTENT-TYPE" is the smallest key
			t.Fatalf("Header = %q, want the smallest key's value", got)
		}
	}
	if ev.Header("missing") != "" || (Evidence{}).Header("x") != "" {
		t.Fatal("missing header not empty")
	}
}

// TestEvidenceJSON decodes evidence the way the fetch endpoint does and
// checks that the body never travels in the JSON form.
func TestEvidenceJSON(t *testing.T) {
	in := `{"url":"https://a.example/","final_url":"https://b.example/","redirects":[{"url":"https://a.example/","status":301}],"status":200,"headers":{"Content-Type":"text/plain"},"error":null,"body":"ignored"}`
	var ev Evidence
	if err := json.Unmarshal([]byte(in), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.URL != "https://a.example/" || ev.FinalURL != "https://b.example/" || len(ev.Redirects) != 1 ||
		ev.Redirects[0].Status != 301 || ev.Header("content-type") != "text/plain" || ev.Body != nil || ev.Error != "" {
		t.Fatalf("decoded %+v", ev)
	}
	ev.Body = []byte("secret body")
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret body") {
		t.Fatalf("body leaked into JSON: %s", out)
	}
}

func TestReceiptMasksSecretsAndIsStable(t *testing.T) {
	ev := htmlEvidence(page("T", "<p>"+prose+"</p>"))
	ev.URL = "https://bob:hunter22@a.example/x?api_key=abcdefghijklmnopqrstuvwxyz&q=1"
	ev.FinalURL = ev.URL
	res := Classify(ev)
	b1, _ := json.Marshal(res)
	if strings.Contains(string(b1), "hunter22") || strings.Contains(string(b1), "ghijklmnopqrst") {
		t.Fatalf("secret in receipt: %s", b1)
	}
	if res.Receipt.URL != "https://bob:***@a.example/x?api_key=abcdef...wxyz&q=1" {
		t.Fatalf("receipt url %q", res.Receipt.URL)
	}
	b2, _ := json.Marshal(Classify(ev))
	if !bytes.Equal(b1, b2) {
		t.Fatal("receipt not deterministic")
	}
}

func TestVerdictAndReason(t *testing.T) {
	if !Retrieved.Confirmed() || Unknown.Confirmed() || Failed.Confirmed() {
		t.Fatal("only RETRIEVED confirms")
	}
	if Verdict("retrieved").Valid() || !(Failed.Severity() > Unknown.Severity() && Unknown.Severity() > Retrieved.Severity()) {
		t.Fatal("severity order")
	}
	if HTTPStatusReason(418) != "transport.http_418" || HTTPStatusReason(418).Layer() != LayerTransport || Reason("").Layer() != "" {
		t.Fatal("reason helpers")
	}
}

// TestNonWebURLsAreNotReads: an HTTP read of a javascript:, data: or file:
// URL, or a redirect to one, is FAILED transport.invalid_url, whatever its
// status and body say.
func TestNonWebURLsAreNotReads(t *testing.T) {
	body := []byte(`{"price": 19.99, "currency": "EUR", "in_stock": true}`)
	h := map[string]string{"Content-Type": "application/json"}
	for _, ev := range []Evidence{
		{URL: "javascript:alert(1)", Status: 200, Headers: h, Body: body},
		{URL: "data:application/json,{}", Status: 200, Headers: h, Body: body},
		{URL: "file:///etc/passwd", Status: 200, Headers: h, Body: body},
		{URL: "https://shop.example/p", FinalURL: "javascript:void(0)", Redirects: []Redirect{{URL: "https://shop.example/p", Status: 302}}, Status: 200, Headers: h, Body: body},
	} {
		if r := Classify(ev); r.Verdict != Failed || r.Reason != ReasonInvalidURL {
			t.Errorf("%s: %s %s", ev.URL, r.Verdict, r.Reason)
		}
	}
	if r := Classify(Evidence{URL: "https://shop.example/p", Status: 200, Headers: h, Body: body}); r.Verdict != Retrieved {
		t.Fatalf("a plain https read: %s %s", r.Verdict, r.Reason)
	}
}

// TestStackedCodingsNotDecoded: a body whose Content-Encoding stacks more
// than MaxContentCodings codings is not decoded (each layer may decode to
// MaxDecodedBytes: a thousand layers of a 175 KB body took 13 s), and is
// not a read; two codings still decode.
func TestStackedCodingsNotDecoded(t *testing.T) {
	doc := []byte(page("Costs", strings.Repeat("<p>"+prose+"</p>", 20)))
	two := withEncoding(htmlEvidence(""), "deflate, gzip", gz(t, zl(t, doc)))
	if r := Classify(two); r.Verdict != Retrieved {
		t.Fatalf("two codings: %s %s %+v", r.Verdict, r.Reason, r.Layers)
	}
	body := doc
	for range MaxContentCodings + 1 {
		body = zl(t, body)
	}
	many := withEncoding(htmlEvidence(""), strings.TrimSuffix(strings.Repeat("deflate,", MaxContentCodings+1), ","), body)
	r := Classify(many)
	detail := ""
	for _, l := range r.Layers {
		detail += l.Detail + "; "
	}
	if r.Verdict == Retrieved || !strings.Contains(detail, "content codings") {
		t.Errorf("%d codings: %s %s %q", MaxContentCodings+1, r.Verdict, r.Reason, detail)
	}
}
