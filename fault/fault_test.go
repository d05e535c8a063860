package fault_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/fault"
)

// TestCodesClosed: every code is distinct and non-empty, so a door's table
// keyed by code has one row per code.
func TestCodesClosed(t *testing.T) {
	seen := map[fault.Code]bool{}
	for _, c := range fault.Codes() {
		if c == "" || seen[c] {
			t.Fatalf("code %q empty or listed twice", c)
		}
		seen[c] = true
	}
}

// TestCorruption: a sentinel made with Corruption keeps its message and
// identity and carries the one marker, also when wrapped.
func TestCorruption(t *testing.T) {
	a, b := fault.Corruption("store corruption"), fault.Corruption("store corruption")
	w := fmt.Errorf("read node: %w", a)
	switch {
	case a.Error() != "store corruption":
		t.Fatalf("message %q", a.Error())
	case !errors.Is(w, a) || errors.Is(w, b):
		t.Fatal("identity lost: a wrapped sentinel must match itself and only itself")
	case !errors.Is(w, fault.ErrCorrupt) || !fault.IsCorrupt(w):
		t.Fatal("marker lost")
	case fault.IsCorrupt(errors.New("store corruption")):
		t.Fatal("a plain error with the same text is not corruption")
	}
}

// TestFieldErrorJSON: a body error names its pointer, a parameter error
// its parameter and no pointer, without HTML escaping.
func TestFieldErrorJSON(t *testing.T) {
	for _, c := range []struct {
		in   fault.FieldError
		want string
	}{
		{fault.FieldError{Pointer: "/data/a<b", Rule: "required", Detail: "missing"}, `{"pointer":"/data/a<b","rule":"required","detail":"missing"}`},
		{fault.FieldError{Parameter: "at", Rule: "ref", Detail: "x"}, `{"parameter":"at","rule":"ref","detail":"x"}`},
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(c.in)
		if got := strings.TrimSuffix(buf.String(), "\n"); err != nil || got != c.want {
			t.Errorf("%+v: got %s (%v), want %s", c.in, buf.String(), err, c.want)
		}
	}
}

// TestError: the message, the cause and the first pointer.
func TestError(t *testing.T) {
	cause := errors.New("disk on fire")
	e := &fault.Error{Code: fault.Internal, Err: cause}
	if e.Error() != "internal: disk on fire" || !errors.Is(e, cause) {
		t.Fatalf("internal error %q", e.Error())
	}
	f := fault.Field(fault.Invalid, "/parent", "commit_id", "bad")
	if f.Error() != "validation: bad" || f.Pointer() != "/parent" {
		t.Fatalf("field error %q pointer %q", f.Error(), f.Pointer())
	}
	if got, ok := fault.As(fmt.Errorf("op 1: %w", f)); !ok || got != f {
		t.Fatal("As lost a wrapped *Error")
	}
}

// TestPointerToken: RFC 6901's escapes, "~" before "/" (so "/" never
// becomes "~01"), and a token without either unchanged.
func TestPointerToken(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", "a/b": "a~1b", "m~n": "m~0n", "~1": "~01", "/~": "~1~0", "é/": "é~1"} {
		if got := fault.PointerToken(in); got != want {
			t.Errorf("PointerToken(%q) = %q, want %q", in, got, want)
		}
	}
}
