package web

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
)

// TestLabelShowsInvisibleCodePoints: a label writes every code point
// that draws nothing or draws as a space, and every byte that is not
// UTF-8, as a visible escape, escapes the escape's own delimiters (and
// the brackets drawn like them) where a name holds them, and leaves
// every other identifier as it is.
func TestLabelShowsInvisibleCodePoints(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"agent", "agent"},
		{"step-07/ä日本", "step-07/ä日本"},
		{"a b", "a b"},
		{"agent\u200b", "agent⟨U+200B⟩"},
		{"a\u00a0b", "a⟨U+00A0⟩b"},
		{"\ufeffagent", "⟨U+FEFF⟩agent"},
		{"ag\u00adent", "ag⟨U+00AD⟩ent"},
		{"agent\x01", "agent⟨U+0001⟩"},
		{"agent\u202e", "agent⟨U+202E⟩"},
		{"a\xffb", "a⟨0xFF⟩b"},
		{"a\ufffdb", "a\ufffdb"},
		{"agent\U000E0041", "agent⟨U+E0041⟩"},
		// An identifier's ZWJ sequence is shown apart; content keeps it.
		{"👩\u200d💻", "👩⟨U+200D⟩💻"},
		{"agent⟨U+200B⟩", "agent⟨U+27E8⟩U+200B⟨U+27E9⟩"},
		{"agent\u3008U+200B\u3009", "agent⟨U+3008⟩U+200B⟨U+3009⟩"},
	} {
		if got := labelText(c.in); got != c.want {
			t.Errorf("labelText(%q) = %q, want %q", c.in, got, c.want)
		}
		var joined strings.Builder
		for _, p := range labelParts(c.in) {
			if p.Esc != strings.HasPrefix(p.Text, escOpen) {
				t.Errorf("labelParts(%q): run %q marked Esc=%v", c.in, p.Text, p.Esc)
			}
			joined.WriteString(p.Text)
		}
		if joined.String() != c.want {
			t.Errorf("labelParts(%q) joins to %q, want %q", c.in, joined.String(), c.want)
		}
	}
	// The code points the UI must never draw as they are in a label.
	hidden := []rune{0x00A0, 0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x1680, 0x180E, 0x2000, 0x200A,
		0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x3164, 0xFFA0, 0x2800, 0xFE0F, 0xE000, 0xFFFE, 0x9F, 0x7F}
	for r := rune(0x200B); r <= 0x200F; r++ {
		hidden = append(hidden, r)
	}
	for r := rune(0x2060); r <= 0x2064; r++ {
		hidden = append(hidden, r)
	}
	hidden = append(hidden, 0xFEFF, 0x202A, 0x202E, 0x2066, 0x2069)
	for _, r := range hidden {
		if got, want := labelText("a"+string(r)+"b"), fmt.Sprintf("a⟨U+%04X⟩b", r); got != want {
			t.Errorf("labelText with U+%04X = %q, want %q", r, got, want)
		}
	}
}

// escapeForm is how every escape a label holds reads; a label holds ⟨
// and ⟩ only in escapes.
var escapeForm = regexp.MustCompile(`⟨(U\+[0-9A-F]{4,6}|0x[0-9A-F]{2})⟩`)

// TestLabelsNeverReadAlike: over random names from an alphabet of
// look-alikes (invisible code points, spaces, the delimiters and the
// letters of an escape), two different names never have the same label,
// no label holds a code point that does not read as it renders, and ⟨
// or ⟩ stand in a label only as an escape — so no name reads like the
// overview's merged cluster (clusterLabel), whose label stands between
// them.
func TestLabelsNeverReadAlike(t *testing.T) {
	alphabet := []string{"a", "U", "+", "2", "0", "B", "x", "F", " ", "⟨", "⟩", "\u3008", "\u2329",
		"\u200b", "\u200d", "\u00a0", "\u3164", "\x01", "\xff", "\ufe0f", "\u2028"}
	rng := rand.New(rand.NewPCG(3, 7))
	seenBy := map[string]string{}
	for range 50000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		name := b.String()
		label := labelText(name)
		if prev, ok := seenBy[label]; ok && prev != name {
			t.Fatalf("%q and %q both read %q", prev, name, label)
		}
		seenBy[label] = name
		if !utf8.ValidString(label) {
			t.Fatalf("the label of %q is not UTF-8: %q", name, label)
		}
		for _, r := range label {
			if graph.Unreadable(r) {
				t.Fatalf("the label of %q holds U+%04X: %q", name, r, label)
			}
		}
		if rest := escapeForm.ReplaceAllString(label, ""); strings.ContainsAny(rest, escOpen+escClose) {
			t.Fatalf("the label of %q holds a delimiter outside an escape: %q", name, label)
		}
	}
	merged := (&cluster{merged: true, parts: 12}).label("producer")
	if merged != "⟨12 other producers⟩" {
		t.Fatalf("the merged cluster reads %q", merged)
	}
	if got := labelText(merged); got == merged {
		t.Errorf("a producer named %q reads like the merged cluster", merged)
	}
}

// TestShortLabelCountsEscapes: a drawing's label is shortened by the
// runes it shows, escapes included — an id of invisible code points is
// about as wide as any other — and an escape at the cut is shown whole,
// so that ids apart by the code point there read apart.
func TestShortLabelCountsEscapes(t *testing.T) {
	const most = labelRunes + len("⟨U+10FFFF⟩") - 1 // runes, at most
	for _, c := range []struct{ in, want string }{
		{"agent", "agent"},
		{"agent\u200b", "agent⟨U+200B⟩"},
		{strings.Repeat("a", 40), strings.Repeat("a", labelRunes-1) + "…"},
		{strings.Repeat("\u200b", 3), strings.Repeat("⟨U+200B⟩", 3)},
		{strings.Repeat("\u200b", 40), strings.Repeat("⟨U+200B⟩", 4) + "…"},
		{strings.Repeat("a", labelRunes-2) + "\xffzzzz", strings.Repeat("a", labelRunes-2) + "⟨0xFF⟩…"},
		{strings.Repeat("a", labelRunes-2) + "\x00zzzz", strings.Repeat("a", labelRunes-2) + "⟨U+0000⟩…"},
		{"ab\u200bcdefghijklmnopqrstuvwxyz0123456789", "ab⟨U+200B⟩cdefghijklmnopqrs…"},
	} {
		got := shortLabel(c.in)
		if got != c.want {
			t.Errorf("shortLabel(%q) = %q, want %q", c.in, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > most {
			t.Errorf("shortLabel(%q) is %d runes wide, more than %d", c.in, n, most)
		}
	}
	long := strings.Repeat("\U000E0041", 40)
	if n := utf8.RuneCountInString(shortLabel(long)); n > most {
		t.Errorf("a label of 40 tag characters is %d runes wide, more than %d", n, most)
	}
}
