package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// slowOpsCanon is the oracle: encoding/json of the recorded ops, then the
// RFC 8785 canonicalizer.
func slowOpsCanon(t *testing.T, ops []Op) []byte {
	t.Helper()
	if ops == nil {
		ops = []Op{}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := hashing.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return canon
}

// TestAppendCanonicalOpMatchesSlowPath checks the fast canonical writer
// against the oracle on random ops with hostile strings: quotes,
// backslashes, control characters, invalid UTF-8, U+2028, astral runes.
func TestAppendCanonicalOpMatchesSlowPath(t *testing.T) {
	pieces := []string{"a", "\"", "\\", "\n", "\x01", "\x7f", "\xff", "\u2028", "é", "😀", "<", "/", " ", "\t", "\xe2\x82"}
	rng := rand.New(rand.NewPCG(7, 7))
	str := func() string {
		var b bytes.Buffer
		for i := 0; i < rng.IntN(8); i++ {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	for round := 0; round < 300; round++ {
		var ops []Op
		for i := 0; i < rng.IntN(6); i++ {
			switch rng.IntN(4) {
			case 0:
				ops = append(ops, Op{Op: OpPut, ID: str(), Type: str(), Version: int64(rng.IntN(1 << 20)), ContentHash: hashing.Sum([]byte(str())), ProducedBy: str()})
			case 1:
				ops = append(ops, Op{Op: OpDelete, ID: str()})
			case 2:
				var attrs json.RawMessage
				if rng.IntN(2) == 0 {
					attrs, _ = hashing.Marshal(map[string]any{"w": rng.Float64(), "k": str()})
				}
				ops = append(ops, Op{Op: OpLink, From: str(), Rel: str(), To: str(), Attrs: attrs})
			default:
				ops = append(ops, Op{Op: OpUnlink, From: str(), Rel: str(), To: str()})
			}
		}
		want := slowOpsCanon(t, ops)
		d, got, err := OpsHash(ops)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: fast canonical ops differ\n got %s\nwant %s", round, got, want)
		}
		if d != hashing.OpsHash(want) {
			t.Fatalf("round %d: ops hash differs", round)
		}
	}
}

func TestOpsHashRefusesUnknownOp(t *testing.T) {
	if _, _, err := OpsHash([]Op{{Op: "rename"}}); err == nil {
		t.Fatal("an unknown op kind was hashed")
	}
	if _, canon, _ := OpsHash(nil); string(canon) != "[]" {
		t.Fatalf("no ops canonicalize to %s, want []", canon)
	}
}

func ExampleOpsHash() {
	d, canon, _ := OpsHash([]Op{{Op: OpDelete, ID: "s1"}})
	fmt.Println(string(canon))
	fmt.Println(d == hashing.OpsHash([]byte(`[{"id":"s1","op":"delete"}]`)))
	// Output:
	// [{"id":"s1","op":"delete"}]
	// true
}
