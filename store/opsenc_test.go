package store

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// randString mixes plain ASCII with everything a canonical string writer
// can get wrong: quotes, backslashes, control characters, U+2028, non-BMP
// characters, HTML-sensitive bytes and invalid UTF-8.
func randString(rng *rand.Rand) string {
	pieces := []string{"a", "doc:1", "Z", " ", `"`, `\`, "\n", "\t", "\x01", "\x1f", "\x7f", "<", ">", "&",
		"é", "\u2028", "\u2029", "😀", "\ufffd", "\xff", "\xe2\x82", "/", "\u00a0", "\uffff"}
	var b strings.Builder
	for n := rng.IntN(6); n >= 0; n-- {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randOps(rng *rand.Rand, n int) []graph.Op {
	ops := make([]graph.Op, n)
	for i := range ops {
		switch rng.IntN(4) {
		case 0:
			ops[i] = graph.Op{Op: graph.OpPut, ID: randString(rng), Type: randString(rng), ProducedBy: randString(rng),
				Version: rng.Int64N(1 << 53), ContentHash: hashing.Sum([]byte(randString(rng)))}
		case 1:
			ops[i] = graph.Op{Op: graph.OpDelete, ID: randString(rng)}
		case 2:
			op := graph.Op{Op: graph.OpLink, From: randString(rng), Rel: randString(rng), To: randString(rng)}
			switch rng.IntN(4) {
			case 0:
				attrs, err := hashing.Marshal(map[string]any{"w": rng.IntN(100), randString(rng): randString(rng), "n": map[string]any{"x": []any{1.5, "y", nil}}})
				if err != nil {
					panic(err)
				}
				op.Attrs = attrs
			case 1:
				op.Attrs = json.RawMessage(`{}`)
			}
			ops[i] = op
		default:
			ops[i] = graph.Op{Op: graph.OpUnlink, From: randString(rng), Rel: randString(rng), To: randString(rng)}
		}
	}
	return ops
}

// TestEncodeOpsMatchesOpsHash is the oracle test of the commit path's op
// writer: its bytes must hash as graph.OpsHash does, be canonical, and
// decode (fast path or encoding/json) to the ops graph would read back.
func TestEncodeOpsMatchesOpsHash(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		ops := randOps(rng, rng.IntN(40))
		chunkOps := 1 + rng.IntN(len(ops)+1)
		enc, err := encodeOps(ops, chunkOps)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want, canon, err := graph.OpsHash(ops)
		if err != nil {
			t.Fatalf("seed %d: graph.OpsHash: %v", seed, err)
		}
		// The chunks joined are the canonical array graph.OpsHash hashes.
		all := []byte{'['}
		for i, c := range enc.chunks {
			if i > 0 {
				all = append(all, ',')
			}
			all = append(all, c[1:len(c)-1]...)
		}
		all = append(all, ']')
		if enc.hash != want || string(all) != string(canon) {
			t.Fatalf("seed %d: encodeOps differs from graph.OpsHash\n got %s\nwant %s", seed, all, canon)
		}
		if want := (len(ops) + chunkOps - 1) / chunkOps; len(enc.chunks) != want {
			t.Fatalf("seed %d: %d ops in chunks of %d make %d chunks, want %d", seed, len(ops), chunkOps, len(enc.chunks), want)
		}
		// Each chunk is a canonical array of its ops, read back alike by
		// the fast decoder and encoding/json.
		var back []graph.Op
		for _, c := range enc.chunks {
			if again, err := hashing.Canonicalize(c); err != nil || string(again) != string(c) {
				t.Fatalf("seed %d: chunk is not canonical: %v\n%s", seed, err, c)
			}
			fast, err := decodeOps(c)
			if err != nil {
				t.Fatalf("seed %d: decodeOps: %v", seed, err)
			}
			var slow []graph.Op
			if err := json.Unmarshal(c, &slow); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("seed %d: decodeOps differs from encoding/json\nfast %+v\nslow %+v", seed, fast, slow)
			}
			back = append(back, fast...)
		}
		if h, _, err := graph.OpsHash(back); err != nil || h != enc.hash {
			t.Fatalf("seed %d: ops read back hash to %s (%v), want %s", seed, h, err, enc.hash)
		}
	}
}

// TestDecodeOpsFallsBack feeds the decoder JSON the fast path does not
// take; it must read it exactly as encoding/json does, or fail as it does.
func TestDecodeOpsFallsBack(t *testing.T) {
	inputs := []string{
		`[]`,
		` [{"op":"delete","id":"a"}]`,
		`[{"id":"a","op":"delete"}]`,
		`[{"id":"a\"b","op":"delete"}]`,
		`[{"id":"\u00e9","op":"delete"}]`,
		`[{"id":"a","op":"delete","extra":1}]`,
		`[{"content_hash":"sha256:` + strings.Repeat("AB", 32) + `","id":"a","op":"put","produced_by":"","type":"t","version":1}]`,
		`[{"content_hash":"sha256:` + strings.Repeat("ab", 32) + `","id":"a","op":"put","produced_by":"","type":"t","version":01}]`,
		`[{"content_hash":"sha256:` + strings.Repeat("ab", 32) + `","id":"a","op":"put","produced_by":"","type":"t","version":-1}]`,
		`[{"attrs":{"a":"}"},"from":"a","op":"link","rel":"uses","to":"b"}]`,
		`[{"attrs":{"a":1},"from":"a","op":"unlink","rel":"uses","to":"b"}]`,
		`[{"attrs":{"a":1,},"from":"a","op":"link","rel":"uses","to":"b"}]`,
		`[{"from":"a","op":"link","rel":"uses","to":"b"}`,
		`[{"from":"a","op":"link","rel":"uses","to":"b"}] `,
		"[{\"id\":\"\xff\",\"op\":\"delete\"}]",
		`{}`,
		``,
	}
	for _, in := range inputs {
		fast, ferr := decodeOps([]byte(in))
		var slow []graph.Op
		serr := json.Unmarshal([]byte(in), &slow)
		if (ferr == nil) != (serr == nil) {
			t.Errorf("%s: decodeOps err %v, encoding/json err %v", in, ferr, serr)
			continue
		}
		if ferr == nil && !reflect.DeepEqual(fast, slow) && !(len(fast) == 0 && len(slow) == 0) {
			t.Errorf("%s: decodeOps %+v, encoding/json %+v", in, fast, slow)
		}
	}
}

func BenchmarkEncodeOps(b *testing.B) {
	ops := make([]graph.Op, 1000)
	for i := range ops {
		ops[i] = graph.Op{Op: graph.OpPut, ID: "doc:" + string(rune('a'+i%26)), Type: "note", ProducedBy: "bench", Version: 3, ContentHash: hashing.Sum([]byte{byte(i)})}
	}
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeOps(ops, ChunkOps); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("graph.OpsHash", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := graph.OpsHash(ops); err != nil {
				b.Fatal(err)
			}
		}
	})
}
