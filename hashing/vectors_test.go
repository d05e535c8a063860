package hashing

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The shared vectors are copied into the repository's testdata (see
// testdata/README.md); these tests read them from there.
const (
	jcsDir      = "../testdata/jcs"
	vectorsPath = "../testdata/hashing/vectors.json"
)

type vectors struct {
	States     []vectorState `json:"states"`
	JCSNumbers []struct {
		IEEEHex   string `json:"ieee_hex"`
		Canonical string `json:"canonical"`
	} `json:"jcs_numbers"`
	MustReject []struct {
		Why        string  `json:"why"`
		JSON       *string `json:"json"`
		JSONBase64 *string `json:"json_base64"`
	} `json:"must_reject"`
}

type vectorState struct {
	Name      string `json:"name"`
	Artifacts []struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Version    int64           `json:"version"`
		ProducedBy string          `json:"produced_by"`
		Data       json.RawMessage `json:"data"`
	} `json:"artifacts"`
	Edges []struct {
		From  string          `json:"from"`
		Rel   string          `json:"rel"`
		To    string          `json:"to"`
		Attrs json.RawMessage `json:"attrs"`
	} `json:"edges"`
	Expect struct {
		ContentHashes map[string]string `json:"content_hashes"`
		Leaves        []string          `json:"leaves"`
		ContextHash   string            `json:"context_hash"`
	} `json:"expect"`
}

func loadVectors(t testing.TB) *vectors {
	t.Helper()
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	if len(v.States) == 0 || len(v.JCSNumbers) == 0 || len(v.MustReject) == 0 {
		t.Fatalf("%s: a section is empty: %d states, %d numbers, %d rejects", vectorsPath, len(v.States), len(v.JCSNumbers), len(v.MustReject))
	}
	return &v
}

// mustRejectInput returns the bytes of one must_reject vector.
func mustRejectInput(t testing.TB, why string, js, b64 *string) []byte {
	t.Helper()
	switch {
	case js != nil:
		return []byte(*js)
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		return b
	}
	t.Fatalf("must_reject %q has neither json nor json_base64", why)
	return nil
}

// jcsFiles returns the names (without suffix) of the JCS reference vectors.
func jcsFiles(t testing.TB) []string {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join(jcsDir, "*.input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatalf("no *.input.json in %s", jcsDir)
	}
	names := make([]string, len(inputs))
	for i, in := range inputs {
		names[i] = strings.TrimSuffix(filepath.Base(in), ".input.json")
	}
	return names
}

func TestJCSReferenceFiles(t *testing.T) {
	for _, name := range jcsFiles(t) {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(jcsDir, name+".input.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(jcsDir, name+".expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(in)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Canonicalize mismatch\n got: %q\nwant: %q", got, want)
			}
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %q, %v", again, err)
			}
		})
	}
}

// stateLeaves computes the content hashes and leaves of a vector state.
func stateLeaves(t *testing.T, s *vectorState) (map[string]Digest, []Digest) {
	t.Helper()
	hashes := map[string]Digest{}
	var leaves []Digest
	for _, a := range s.Artifacts {
		data, err := CanonicalizeObject(a.Data)
		if err != nil {
			t.Fatalf("artifact %q data: %v", a.ID, err)
		}
		ch := ContentHash(data)
		hashes[a.ID] = ch
		leaves = append(leaves, ArtifactLeaf(a.ID, a.Type, a.Version, ch, a.ProducedBy))
	}
	for _, e := range s.Edges {
		var attrs []byte
		if e.Attrs != nil {
			var err error
			if attrs, err = CanonicalizeObject(e.Attrs); err != nil {
				t.Fatalf("edge %s -%s-> %s attrs: %v", e.From, e.Rel, e.To, err)
			}
		}
		leaves = append(leaves, EdgeLeaf(e.From, e.Rel, e.To, attrs))
	}
	return hashes, leaves
}

func TestVectorStates(t *testing.T) {
	v := loadVectors(t)
	for si := range v.States {
		s := &v.States[si]
		t.Run(s.Name, func(t *testing.T) {
			hashes, leaves := stateLeaves(t, s)

			if len(hashes) != len(s.Expect.ContentHashes) {
				t.Errorf("%d content hashes, want %d", len(hashes), len(s.Expect.ContentHashes))
			}
			for id, want := range s.Expect.ContentHashes {
				if got := hashes[id].String(); got != want {
					t.Errorf("content hash of %q = %s, want %s", id, got, want)
				}
			}

			want := make([]string, len(s.Expect.Leaves))
			copy(want, s.Expect.Leaves)
			acc := NewAccumulator()
			for _, i := range rand.New(rand.NewPCG(uint64(si), 1)).Perm(len(leaves)) {
				if !acc.Add(leaves[i]) {
					t.Fatalf("leaf %x added twice", leaves[i])
				}
			}
			got := acc.Leaves()
			if len(got) != len(want) {
				t.Fatalf("%d leaves, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i].Hex() != want[i] {
					t.Errorf("leaf %d = %s, want %s", i, got[i].Hex(), want[i])
				}
			}

			if got := ContextHash(leaves).String(); got != s.Expect.ContextHash {
				t.Errorf("ContextHash = %s, want %s", got, s.Expect.ContextHash)
			}
			if got := acc.Root().String(); got != s.Expect.ContextHash {
				t.Errorf("Accumulator.Root = %s, want %s", got, s.Expect.ContextHash)
			}
			// Parsing the expected hash gives the same digest.
			if d, err := ParseDigest(s.Expect.ContextHash); err != nil || d != acc.Root() {
				t.Errorf("ParseDigest(%s) = %v, %v", s.Expect.ContextHash, d, err)
			}
		})
	}
}

func TestVectorNumbers(t *testing.T) {
	v := loadVectors(t)
	for _, n := range v.JCSNumbers {
		bitsVal, err := strconv.ParseUint(n.IEEEHex, 16, 64)
		if err != nil {
			t.Fatalf("ieee_hex %q: %v", n.IEEEHex, err)
		}
		f := math.Float64frombits(bitsVal)
		got, err := FormatNumber(f)
		if err != nil {
			t.Errorf("FormatNumber(%s = %v): %v", n.IEEEHex, f, err)
			continue
		}
		if got != n.Canonical {
			t.Errorf("FormatNumber(%s = %v) = %q, want %q", n.IEEEHex, f, got, n.Canonical)
		}

		// The same number as Go writes it canonicalizes to the same form.
		in := []byte(strconv.FormatFloat(f, 'g', -1, 64))
		if out, err := Canonicalize(in); err != nil || string(out) != n.Canonical {
			t.Errorf("Canonicalize(%s) = %q, %v; want %q", in, out, err, n.Canonical)
		}
		// And the canonical form is a fixed point.
		if again, err := Canonicalize([]byte(n.Canonical)); err != nil || string(again) != n.Canonical {
			t.Errorf("Canonicalize(%s) = %q, %v; not a fixed point", n.Canonical, again, err)
		}
	}
}

// sentinelFor maps the why of a must_reject vector to the error it must get.
func sentinelFor(why string) error {
	switch {
	case strings.HasPrefix(why, "duplicate key"):
		return ErrDuplicateKey
	case strings.HasPrefix(why, "lone surrogate"):
		return ErrLoneSurrogate
	case strings.HasPrefix(why, "integer beyond 2^53"):
		return ErrUnsafeInteger
	case strings.HasPrefix(why, "not JSON"):
		return ErrSyntax
	case strings.HasPrefix(why, "invalid UTF-8"):
		return ErrInvalidUTF8
	case strings.HasPrefix(why, "nesting deeper than"):
		return ErrTooDeep
	case strings.HasPrefix(why, "not finite"), strings.HasPrefix(why, "non-finite"):
		return ErrNonFinite
	}
	return nil
}

func TestVectorMustReject(t *testing.T) {
	v := loadVectors(t)
	for _, r := range v.MustReject {
		t.Run(r.Why, func(t *testing.T) {
			want := sentinelFor(r.Why)
			if want == nil {
				t.Fatalf("no sentinel known for must_reject %q; extend sentinelFor", r.Why)
			}
			in := mustRejectInput(t, r.Why, r.JSON, r.JSONBase64)
			for name, f := range map[string]func([]byte) ([]byte, error){
				"Canonicalize":       Canonicalize,
				"CanonicalizeObject": CanonicalizeObject,
			} {
				out, err := f(in)
				if !errors.Is(err, want) {
					t.Errorf("%s(%q) = %q, %v; want %v", name, in, out, err, want)
				}
				var ce *CanonError
				if !errors.As(err, &ce) {
					t.Errorf("%s: error %T is not a *CanonError", name, err)
				} else if ce.Offset < 0 || ce.Offset > len(in) {
					t.Errorf("%s: offset %d outside the input (%d bytes)", name, ce.Offset, len(in))
				}
			}
		})
	}
}
