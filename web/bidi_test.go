package web

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestHasBidiControlAgreesWithContainsAny: the byte-level look for the
// bidi controls answers as bytes.ContainsAny over their runes does, on
// random texts of those runes, their neighbours in the same UTF-8 blocks
// (U+2029, U+202F, U+2065, U+206A, dashes and quotes, all led by E2),
// other text, and texts cut in the middle of a rune.
func TestHasBidiControlAgreesWithContainsAny(t *testing.T) {
	runes := []rune(bidiControls + "\u2029\u202F\u2065\u206A\u2014\u201C\u20AC\u00E2aé日\n")
	rng := rand.New(rand.NewPCG(5, 9))
	for i := range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		page := []byte(b.String())
		if len(page) > 0 && rng.IntN(4) == 0 {
			page = page[:rng.IntN(len(page))]
		}
		if got, want := hasBidiControl(page), bytes.ContainsAny(page, bidiControls); got != want {
			t.Fatalf("text %d %q: hasBidiControl %v, ContainsAny %v", i, page, got, want)
		}
	}
}

// BenchmarkBidiLook: the look every rendered page goes through, on a
// 4.7 MB page of table rows with a dash in each, against the
// bytes.ContainsAny it replaced.
func BenchmarkBidiLook(b *testing.B) {
	page := []byte(strings.Repeat("<tr><td><a href=\"/ui/x?id=a123\">a123 — claim</a></td><td>confirmed</td></tr>\n", 60000))
	for _, bc := range []struct {
		name string
		has  func([]byte) bool
	}{
		{"IndexByte", hasBidiControl},
		{"ContainsAny", func(p []byte) bool { return bytes.ContainsAny(p, bidiControls) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			for b.Loop() {
				if bc.has(page) {
					b.Fatal("no control in the page")
				}
			}
		})
	}
}
