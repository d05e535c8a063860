package gate

import (
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
