package hashing

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const abcHex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" // SHA-256("abc")

func TestDigestForms(t *testing.T) {
	d := Sum([]byte("abc"))
	if got := d.Hex(); got != abcHex {
		t.Fatalf("Sum(abc).Hex() = %s", got)
	}
	if got := d.String(); got != "sha256:"+abcHex {
		t.Errorf("String() = %s", got)
	}
	if got := d.Short(); got != abcHex[:12] {
		t.Errorf("Short() = %s", got)
	}
	if d.IsZero() || !(Digest{}).IsZero() {
		t.Error("IsZero wrong")
	}
	back, err := ParseDigest(d.String())
	if err != nil || back != d {
		t.Errorf("ParseDigest(String()) = %v, %v", back, err)
	}
}

func TestParseDigestRejects(t *testing.T) {
	for _, s := range []string{
		"",
		abcHex,                   // bare hex
		"sha256:" + abcHex[:63],  // short
		"sha256:" + abcHex + "0", // long
		"SHA256:" + abcHex,       // tag case
		"sha256:" + strings.ToUpper(abcHex),
		"sha256:" + abcHex[:63] + "g",
		"sha512:" + abcHex,
		" sha256:" + abcHex,
		"sha256:" + abcHex[:62] + "\u00e9", // right byte length, not hex
	} {
		if d, err := ParseDigest(s); !errors.Is(err, ErrInvalidDigest) || !d.IsZero() {
			t.Errorf("ParseDigest(%q) = %v, %v; want ErrInvalidDigest", s, d, err)
		}
	}
}

func TestDigestJSON(t *testing.T) {
	type doc struct {
		H Digest `json:"h"`
	}
	d := Sum([]byte("abc"))
	b, err := json.Marshal(doc{H: d})
	if err != nil || string(b) != `{"h":"sha256:`+abcHex+`"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil || back.H != d {
		t.Errorf("Unmarshal = %v, %v", back.H, err)
	}
	back.H = d
	err = json.Unmarshal([]byte(`{"h":"`+abcHex+`"}`), &back)
	if !errors.Is(err, ErrInvalidDigest) {
		t.Errorf("Unmarshal(bare hex) = %v, want ErrInvalidDigest", err)
	}
	if back.H != d {
		t.Error("failed UnmarshalText changed the digest")
	}
}

func TestHexPrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sha256:" + abcHex, abcHex},
		{abcHex, abcHex},
		{strings.ToUpper(abcHex), abcHex},
		{"ba7816bf", "ba7816bf"},
		{"BA7816BF8F", "ba7816bf8f"},
		{"sha256:ba7816Bf", "ba7816bf"},
	}
	for _, tt := range tests {
		if got, err := HexPrefix(tt.in); err != nil || got != tt.want {
			t.Errorf("HexPrefix(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{
		"", "ba7816b", "sha256:", "sha256:ba7816b", abcHex + "0",
		"ba7816bg", "ba7816bf ", " ba7816bf", "0x7816bf12", "SHA256:ba7816bf", "sha256:sha256:ba7816bf",
	} {
		if got, err := HexPrefix(in); !errors.Is(err, ErrInvalidDigest) || got != "" {
			t.Errorf("HexPrefix(%q) = %q, %v; want ErrInvalidDigest", in, got, err)
		}
	}
	// Long junk is cut in the message.
	_, err := HexPrefix(strings.Repeat("z", 10000))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error for long input is %d bytes", len(err.Error()))
	}
}
