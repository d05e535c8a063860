package client

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDetailIsCutAtACharacter: the Detail of a refusal that is not a
// problem is cut at a character boundary, also where the read itself
// stopped inside a character (a page of 3-byte characters read to 4,096
// bytes ends with one byte of a character); what it shows is the page's
// text, whole characters only, with the marker.
func TestDetailIsCutAtACharacter(t *testing.T) {
	for _, c := range []struct {
		name string
		page string
		cut  bool
	}{
		{"read cut inside a character", strings.Repeat("€", 3000)[:MaxDetailBytes], true},
		{"read whole, text longer than the cap", strings.Repeat("€", 3000), false},
		{"read cut at a boundary", strings.Repeat("ab", 3000)[:MaxDetailBytes], true},
		{"short", "Bad Gateway €", false},
	} {
		got := detailOf([]byte(c.page), c.cut)
		if !utf8.ValidString(got) {
			t.Errorf("%s: Detail is not UTF-8: …%q", c.name, got[max(0, len(got)-60):])
		}
		text, _, marked := strings.Cut(got, " … [cut")
		if !strings.HasPrefix(c.page, text) || len(text) > MaxDetailBytes || len(c.page)-len(text) >= utf8.UTFMax && !marked {
			t.Errorf("%s: Detail %d bytes, marked %v: not a prefix of the page's text of at most %d bytes with its marker", c.name, len(text), marked, MaxDetailBytes)
		}
	}
}
