package graph

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"
)

// invisibleRune returns what kind of code point r is when an id must not
// hold it, or "": code points that render as nothing, as a space, or
// differently from their bytes, so that two ids which look the same in
// the UI, a log or a terminal could differ (U+202E reverses the text after
// it, U+200B is invisible, U+00A0 looks like a space).
func invisibleRune(r rune) string {
	switch {
	case unicode.Is(unicode.Cf, r):
		return "format character (Cf: bidi control, zero-width or tag)"
	case unicode.Is(unicode.Co, r):
		return "private-use character"
	case r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe:
		return "noncharacter"
	case unicode.Is(unicode.Variation_Selector, r):
		return "variation selector"
	case r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, r == 0x2800:
		return "blank filler character"
	case r != ' ' && unicode.Is(unicode.Zs, r):
		return "non-ASCII space"
	case r == 0x034f:
		return "combining grapheme joiner"
	}
	return ""
}

// runeName names a code point as U+XXXX and its Unicode name.
func runeName(r rune) string {
	if n := runenames.Name(r); n != "" && n[0] != '<' {
		return fmt.Sprintf("U+%04X %s", r, n)
	}
	return fmt.Sprintf("U+%04X", r)
}

// checkNFC refuses an id that is not in Unicode Normalization Form C,
// naming its NFC form.
func checkNFC(id string) error {
	if norm.NFC.IsNormalString(id) {
		return nil
	}
	return &OpError{Index: -1, Field: "/id", Rule: "nfc",
		Detail: fmt.Sprintf("artifact id %q is not in Unicode NFC; send %q: ids are stored and hashed byte for byte, so the server does not normalise them", id, norm.NFC.String(id))}
}

// CheckLabel says why s, a producer or an author name, would not read as
// it renders: not UTF-8 (rule "utf8"), a control character ("printable")
// or a code point an id may not hold ("visible": invisible, a
// look-alike space, a bidi control…), with a detail naming it; "" and ""
// when it reads as it renders. Writers check new labels with it; the
// core does not, so that history written before the rule still replays.
func CheckLabel(s string) (rule, detail string) {
	if !utf8.ValidString(s) {
		return "utf8", "must be valid UTF-8"
	}
	rule, r, i, kind := unreadableRune(s)
	switch rule {
	case "printable":
		return rule, fmt.Sprintf("contains a control character (%s at byte %d)", runeName(r), i)
	case "visible":
		return rule, fmt.Sprintf("contains %s, a %s, at byte %d: a name must read the same as it renders", runeName(r), kind, i)
	}
	return "", ""
}

// unreadableRune finds the first code point of s that keeps it from
// reading as it renders: a control character (rule "printable") or one
// invisibleRune names (rule "visible", its kind). Its rule is "" when
// there is none.
func unreadableRune(s string) (rule string, r rune, at int, kind string) {
	for i, r := range s {
		if controlRune(r) {
			return "printable", r, i, ""
		}
		if kind := invisibleRune(r); kind != "" {
			return "visible", r, i, kind
		}
	}
	return "", 0, 0, ""
}

// controlRune reports whether r is a control character an id or a label
// may not hold (rule "printable"): C0, DEL, C1, and the line and
// paragraph separators.
func controlRune(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029
}

// Unreadable reports whether r is a code point that does not read as it
// renders: a control character, or one that draws nothing, draws as a
// space or is drawn like another (invisibleRune) — which ValidateID and
// CheckLabel refuse — or one Unicode lists as otherwise default-ignorable
// (U+17B4, U+2065, U+FFF0…, unassigned tags), which browsers draw as
// nothing too and which those rules accept: an id written with one is
// valid, and history holding it must replay as it was written. A reader
// of an identifier shown as a label (a producer, an author, an id) uses
// Unreadable to show such a code point instead of drawing it.
func Unreadable(r rune) bool {
	return controlRune(r) || invisibleRune(r) != "" || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}
