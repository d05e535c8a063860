package gate

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkClassifyHTML classifies every HTML body of the gate fixtures in
// turn; SetBytes makes the result a throughput over raw body bytes.
func BenchmarkClassifyHTML(b *testing.B) {
	var evs []Evidence
	total := 0
	for _, c := range loadGateCases(b) {
		ev := c.evidence()
		if !strings.HasPrefix(ev.Header("content-type"), "text/html") || len(ev.Body) == 0 {
			continue
		}
		evs = append(evs, ev)
		total += len(ev.Body)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			Classify(ev)
		}
	}
}

// BenchmarkClassifyArticleGzip measures a compressed article page.
func BenchmarkClassifyArticleGzip(b *testing.B) {
	doc := []byte(page("Costs", strings.Repeat("<p>"+prose+"</p>", 400)))
	ev := withEncoding(htmlEvidence(""), "gzip", gz(b, doc))
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		Classify(ev)
	}
}

// BenchmarkMaskSecrets masks a megabyte of code-like output with a few
// secrets in it.
func BenchmarkMaskSecrets(b *testing.B) {
	line := "func f(key string) { m[key] = token; x := a == b; u := \"https://example.com:8080/p\" }\n"
	out := strings.Repeat(line, 12000) + "Authorization: Bearer abcdefghijklmnopqrstuvwxyz\nDB_PASSWORD=hunter22\n"
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		MaskSecrets(out)
	}
}

// BenchmarkSanitizeOutput prepares and shortens the same megabyte.
func BenchmarkSanitizeOutput(b *testing.B) {
	line := "func f(key string) { m[key] = token; x := a <= b; u := \"https://example.com:8080/p\" }\n"
	out := strings.Repeat(line, 12000)
	opt := DefaultSanitizeOptions()
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		full := PrepareOutput(out, opt)
		SanitizeOutput(full, "sha256:feed", opt)
	}
}

// BenchmarkClassifyStrayEndTags classifies a megabyte of end tags that
// close nothing behind the most open elements the scan keeps: each such
// tag scanned the whole stack before the open elements were counted.
func BenchmarkClassifyStrayEndTags(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("<html><body>" + strings.Repeat("<div>", maxOpenElements))
	for sb.Len() < 1<<20 {
		sb.WriteString("</b></x-y>")
	}
	ev := htmlEvidence(sb.String())
	b.SetBytes(int64(sb.Len()))
	for b.Loop() {
		Classify(ev)
	}
}

// BenchmarkMaskSecretsRepeatedFields masks 64 KiB of field names whose
// values are refused, and of Authorization headers whose credential is a
// placeholder: each value was read again from every separator inside it,
// which made the pass quadratic.
func BenchmarkMaskSecretsRepeatedFields(b *testing.B) {
	for _, unit := range []string{"a_key=", "authorization:$"} {
		s := strings.Repeat(unit, (64<<10)/len(unit))
		b.Run(strings.Trim(unit, "=:$"), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				MaskSecrets(s)
			}
		})
	}
}

// benchSecrets returns the 16 declared secrets of the Secrets benchmarks
// (each with its escaped forms; no two start alike) and their values.
func benchSecrets(b *testing.B) (Secrets, []string) {
	b.Helper()
	var values []string
	for i := range 16 {
		values = append(values, fmt.Sprintf("%c%cK3y/s3cr3t+%02d!(x)", 'a'+i, 'z'-i, i))
	}
	sec, err := NewSecrets(values)
	if err != nil {
		b.Fatal(err)
	}
	return sec, values
}

// BenchmarkSecretsMask masks the megabyte of BenchmarkMaskSecrets by value
// with 16 declared secrets (each with its escaped forms; no two start
// alike), three of which occur in it.
func BenchmarkSecretsMask(b *testing.B) {
	sec, values := benchSecrets(b)
	line := "func f(key string) { m[key] = token; x := a == b; u := \"https://example.com:8080/p\" }\n"
	out := strings.Repeat(line, 12000) + values[0] + "\n" + url.QueryEscape(values[1]) + "\n" + url.PathEscape(values[2]) + "\n"
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		sec.Mask(out)
	}
}

// BenchmarkSecretsMaskHTML masks a megabyte of HTML whose every line holds
// character references (&amp;, &#x2F;) by value with the 16 declared
// secrets of BenchmarkSecretsMask, three of which occur in it
// HTML-escaped: the whole text is decoded and searched again.
func BenchmarkSecretsMaskHTML(b *testing.B) {
	sec, values := benchSecrets(b)
	line := "<tr><td><a href=\"/p?a=1&amp;b=2\">Tom &amp; Jerry&#x2F;s &lt;page&gt;</a></td><td>&#8364; 3</td></tr>\n"
	out := strings.Repeat(line, 10000) + strings.ReplaceAll(values[0], "!", "&excl;") + "\n" + strings.ReplaceAll(values[1], "/", "&#x2F;") + "\n" + strings.ReplaceAll(values[2], "+", "&#43;") + "\n"
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		sec.Mask(out)
	}
}
