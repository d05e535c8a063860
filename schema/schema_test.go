package schema

import (
	"errors"
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
