package web

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
)

// An identifier shown as a label (a producer, an author, an artifact,
// context or branch id) must never look like another one. A producer
// written before new names were checked may hold a code point that draws
// nothing or draws as a space ("agent" and "agent" with a ZERO WIDTH
// SPACE), so a label shows each such code point as an escape: its code
// point between escOpen and escClose, "⟨U+200B⟩". So that a name cannot
// be typed to read like an escape, a literal escOpen or escClose, and the
// brackets drawn like them, are escaped too: the producer "agent⟨U+200B⟩"
// reads "agent⟨U+27E8⟩U+200B⟨U+27E9⟩". Every ⟨ in a label thus starts an
// escape or a mark of the UI's own (the overview's merged cluster), and
// two different identifiers never read alike. In HTML an escape is also
// styled apart (class "esc"), which text cannot produce. Artifact content
// (data, said texts, commit messages) is evidence and is shown as it is.
const (
	escOpen  = "⟨"
	escClose = "⟩"
)

// escapedInLabel reports whether r is written as an escape in a label: a
// code point that does not read as it renders (graph.Unreadable: a
// control, a format character such as U+200B or U+FEFF, a space other
// than the ASCII one, a Hangul filler, a variation selector…), or one of
// the escape's delimiters or a bracket drawn like them.
func escapedInLabel(r rune) bool {
	switch r {
	case '⟨', '⟩', // the delimiters
		'\u2329', '\u232A', // 〈 〉 angle brackets
		'\u3008', '\u3009', // 〈 〉 CJK angle brackets
		'\u276C', '\u276D', '\u2770', '\u2771', // ❬ ❭ ❰ ❱ ornaments
		'\u29FC', '\u29FD': // ⧼ ⧽ curved angle brackets
		return true
	}
	return graph.Unreadable(r)
}

// labelPart is a run of a label: text shown as it is, or one escape.
type labelPart struct {
	Text string
	Esc  bool
}

// labelParts splits s, an identifier, into the runs its label shows:
// text, and an escape for each code point escapedInLabel names ("⟨U+200B⟩")
// and each byte that is not UTF-8 ("⟨0xFF⟩"). An identifier with none is
// one run holding s.
func labelParts(s string) []labelPart {
	if !needsEscape(s) {
		return []labelPart{{Text: s}}
	}
	return splitLabel(s)
}

// splitLabel is labelParts of an s that needsEscape.
func splitLabel(s string) []labelPart {
	var parts []labelPart
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		invalid := r == utf8.RuneError && size == 1
		if !invalid && !escapedInLabel(r) {
			i += size
			continue
		}
		if start < i {
			parts = append(parts, labelPart{Text: s[start:i]})
		}
		esc := fmt.Sprintf("%sU+%04X%s", escOpen, r, escClose)
		if invalid {
			esc = fmt.Sprintf("%s0x%02X%s", escOpen, s[i], escClose)
		}
		parts = append(parts, labelPart{Text: esc, Esc: true})
		i += size
		start = i
	}
	if start < len(s) {
		parts = append(parts, labelPart{Text: s[start:]})
	}
	return parts
}

// needsEscape reports whether s has anything labelParts escapes; most
// identifiers are ASCII letters, digits and punctuation, which it passes
// without decoding.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return strings.ContainsFunc(s, escapedInLabel) || !utf8.ValidString(s)
		}
	}
	return false
}

// labelText is s as a label where no markup can go (the drawings' text
// and tooltips, a page's title, attribute values): labelParts' runs
// joined, escapes as text.
func labelText(s string) string {
	if !needsEscape(s) {
		return s
	}
	return joinLabel(splitLabel(s))
}

// joinLabel is the text of a label's runs, escapes as text.
func joinLabel(parts []labelPart) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// shortLabel is s as a drawing's label: escaped, and shortened to about
// labelRunes as it reads — an escape counts as the runes it shows, so an
// id of invisible code points is not eight times as wide as any other.
// The cut, marked "…" as clip marks it, never goes through an escape: one
// that starts before labelRunes-1 is shown whole (at most
// len("⟨U+10FFFF⟩")-1 runes over), so that ids apart by the code point
// there still read apart.
func shortLabel(s string) string {
	if !needsEscape(s) {
		return clip(s, labelRunes)
	}
	parts := splitLabel(s)
	width := 0
	for _, p := range parts {
		width += utf8.RuneCountInString(p.Text)
	}
	if width <= labelRunes {
		return joinLabel(parts)
	}
	var b strings.Builder
	room := labelRunes - 1 // the runes left before "…"
	for _, p := range parts {
		n := utf8.RuneCountInString(p.Text)
		if n <= room {
			b.WriteString(p.Text)
			room -= n
			continue
		}
		if p.Esc {
			if room > 0 {
				b.WriteString(p.Text) // whole: an escape is never cut
			}
			break
		}
		b.WriteString(runePrefix(p.Text, room))
		break
	}
	return b.String() + "…"
}
