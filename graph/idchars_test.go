package graph

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateIDRefusesInvisibleAndNonNFC: ids that could render the same
// as another id are refused with the rule and the code point named; NFC
// text in any script passes.
func TestValidateIDRefusesInvisibleAndNonNFC(t *testing.T) {
	for _, c := range []struct {
		id, rule, names string
	}{
		{"invoice\u202Efdp.exe", "visible", "U+202E RIGHT-TO-LEFT OVERRIDE"},
		{"a\u200Bb", "visible", "U+200B ZERO WIDTH SPACE"},
		{"a\u200Db", "visible", "U+200D ZERO WIDTH JOINER"},
		{"\uFEFFa", "visible", "U+FEFF"},
		{"a\u2066b\u2069", "visible", "U+2066 LEFT-TO-RIGHT ISOLATE"},
		{"a\u061Cb", "visible", "U+061C ARABIC LETTER MARK"},
		{"soft\u00ADhyphen", "visible", "U+00AD SOFT HYPHEN"},
		{"tag\U000E0041", "visible", "U+E0041 TAG LATIN CAPITAL LETTER A"},
		{"no\u00A0break", "visible", "U+00A0 NO-BREAK SPACE"},
		{"wide\u3000space", "visible", "U+3000 IDEOGRAPHIC SPACE"},
		{"filler\u3164", "visible", "U+3164 HANGUL FILLER"},
		{"vs\uFE0F", "visible", "U+FE0F VARIATION SELECTOR-16"},
		{"private\uE000", "visible", "U+E000"},
		{"non\uFFFEchar", "visible", "U+FFFE"},
		{"cgj\u034F", "visible", "U+034F COMBINING GRAPHEME JOINER"},
		{"bell\a", "printable", "U+0007"},
		{"c1\u0085", "printable", "U+0085"},
		{"line\u2028sep", "printable", "U+2028"},
		{"cafe\u0301", "nfc", "\"café\""},
		{"\u212B", "nfc", "\"Å\""}, // ANGSTROM SIGN → U+00C5
	} {
		err := ValidateID(c.id)
		var oe *OpError
		if !errors.As(err, &oe) {
			t.Errorf("%q: %v, want an OpError", c.id, err)
			continue
		}
		if oe.Rule != c.rule || oe.Field != "/id" || !strings.Contains(oe.Detail, c.names) {
			t.Errorf("%q: rule %q field %q detail %q; want rule %q naming %q", c.id, oe.Rule, oe.Field, oe.Detail, c.rule, c.names)
		}
	}
	for _, id := range []string{"a", "claim:0123abcd", "café", "日本語の記事", "مقالة", "Ωμέγα", "a b", "x/y?z#w", "emoji🙂", strings.Repeat("é", 128)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
}

// TestEdgeEndsAreChecked: a link whose end holds a bidi control is
// refused with the pointer of that end.
func TestEdgeEndsAreChecked(t *testing.T) {
	s := NewState(nil)
	for _, c := range []struct {
		op    Op
		field string
	}{
		{Op{Op: OpLink, From: "a\u202E", Rel: "cites", To: "b"}, "/from"},
		{Op{Op: OpLink, From: "a", Rel: "cites", To: "b\u200B"}, "/to"},
		{Op{Op: OpUnlink, From: "a", Rel: "cites", To: "e\u0301"}, "/to"},
	} {
		_, err := s.ApplyOps([]Op{c.op})
		var oe *OpError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%+v: %v, want an error on %s", c.op, err, c.field)
		}
	}
}
