package schema

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileAndValidate(t *testing.T) {
	s, err := Compile("spend", []byte(`{"type":"object","required":["usd"],"properties":{"usd":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for data, ok := range map[string]bool{`{"usd":3}`: true, `{"usd":"3"}`: false, `{}`: false, `{"usd":1,"x":[]}`: true} {
		err := s.Validate([]byte(data))
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v", data, err)
		}
	}
	if _, err := Compile("x", []byte(`{"$ref":"file:///etc/passwd"}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an external reference compiled: %v", err)
	}
	if _, err := Compile("x", []byte(`{"type":12}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an invalid schema compiled: %v", err)
	}
}

// TestValidateFastSchema validates against a schema of plain keywords,
// which Compile also gives a Fast check: the answers are the library's,
// and a refusal is still the library's error, naming where data fails.
func TestValidateFastSchema(t *testing.T) {
	s, err := Compile("claim", []byte(`{"type":"object","required":["text"],"properties":{"text":{"type":"string","minLength":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.fast == nil {
		t.Fatal("a schema of plain keywords has no Fast check")
	}
	for data, ok := range map[string]bool{`{"text":"a"}`: true, `{"text":""}`: false, `{}`: false, `{"text":"é","x":1}`: true, `[]`: false} {
		err := s.Validate([]byte(data))
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v", data, err)
		}
	}
	if err := s.Validate([]byte(`{"text":""}`)); err == nil || !strings.Contains(err.Error(), "/text") {
		t.Fatalf("the refusal does not say where: %v", err)
	}
}

// BenchmarkValidateClaim validates one claim's payload bytes, as a bundle
// import does for every put: with the Fast check first, and with the
// library alone.
func BenchmarkValidateClaim(b *testing.B) {
	s, err := Compile("claim", []byte(`{"type":"object","required":["text"],"properties":{"text":{"type":"string","minLength":1},"value":true}}`))
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"text":"the market grew 4% in 2025","value":4}`)
	for _, tc := range []struct {
		name string
		s    *Schema
	}{{"fast", s}, {"library", &Schema{s: s.s}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.s.Validate(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
