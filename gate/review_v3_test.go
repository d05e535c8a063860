package gate

import (
	"encoding/json"
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
