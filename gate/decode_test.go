package gate

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeContent: the exported decoder undoes what the extraction
// layer undoes, tolerates a stale header on a text body, and names each
// failure by its error.
func TestDecodeContent(t *testing.T) {
	doc := []byte(page("Costs", "<p>"+prose+"</p>"))
	truncated := gz(t, doc)
	truncated = truncated[:len(truncated)/2]
	for _, c := range []struct {
		name, enc string
		body      []byte
		max       int
		err       error
	}{
		{"identity", "", doc, MaxDecodedBytes, nil},
		{"gzip", "gzip", gz(t, doc), MaxDecodedBytes, nil},
		{"deflate then br", "deflate, br", br(t, zl(t, doc)), MaxDecodedBytes, nil},
		{"raw deflate", "Deflate", rawDeflate(t, doc), MaxDecodedBytes, nil},
		{"identity entries skipped", "identity, gzip, identity", gz(t, doc), MaxDecodedBytes, nil},
		{"stale header on text", "gzip", doc, MaxDecodedBytes, nil},
		{"zstd", "zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 1, 2}, MaxDecodedBytes, ErrUnsupportedEncoding},
		{"too many codings", strings.Repeat("gzip,", MaxContentCodings) + "gzip", gz(t, doc), MaxDecodedBytes, ErrUnsupportedEncoding},
		{"truncated", "gzip", truncated, MaxDecodedBytes, ErrCorruptContent},
		{"decodes past the bound", "gzip", gz(t, doc), len(doc) - 1, ErrContentTooLarge},
		{"identity past the bound", "", doc, len(doc) - 1, ErrContentTooLarge},
		{"stale header on text past the bound", "gzip", doc, len(doc) - 1, ErrContentTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := DecodeContent(c.body, c.enc, c.max)
			if !errors.Is(err, c.err) || (err == nil && string(out) != string(doc)) {
				t.Fatalf("%q %v, want %v", out, err, c.err)
			}
			// The classifier sees the same bytes (but keeps a body under a
			// stale header whatever its size: a known gap its rulesets'
			// verdicts were made with).
			d := decodeContent(c.body, c.enc, c.max)
			stale := len(d.notes) > 0 && len(d.body) > c.max
			if (d.status == decodeOK) != (err == nil || stale) || (err == nil && string(d.body) != string(out)) {
				t.Fatalf("decodeContent disagrees: %d", d.status)
			}
		})
	}
	for c, want := range map[string]bool{"gzip": true, " X-GZIP ": true, "deflate": true, "br": true, "identity": true, "zstd": false, "compress": false, "": false} {
		if SupportedCoding(c) != want {
			t.Errorf("SupportedCoding(%q) != %v", c, want)
		}
	}
}
