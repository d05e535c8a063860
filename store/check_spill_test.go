package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv"
)

// spillIndex returns the spill index's records, in key order.
func spillIndex(t *testing.T, s *Store) []kv.Record {
	t.Helper()
	var recs []kv.Record
	err := s.kv.Scan(context.Background(), []byte(pSpill), nil, 0, func(k, v []byte) error {
		recs = append(recs, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// rewrite sets records through the driver, as a store written by
// another version (or a damaged one) holds them.
func rewrite(t *testing.T, s *Store, recs ...kv.Record) {
	t.Helper()
	if err := s.kv.Commit(context.Background(), kv.Batch{Sets: recs}); err != nil {
		t.Fatal(err)
	}
	forgetHeads(s)
}

// TestSpillIndexNamesItsContext: the spill index notes which context
// spilled an output, so that fsck can expect that context to hold it.
func TestSpillIndexNamesItsContext(t *testing.T) {
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(context.Background(), "run", ModeObserve); err != nil {
		t.Fatal(err)
	}
	d := spillOutput(t, s, "run", DefaultBranch, "o", "tool_output", "the whole output of a tool")
	recs := spillIndex(t, s)
	if len(recs) != 1 || !bytes.HasSuffix(recs[0].Key, d[:]) || string(recs[0].Value) != "run" {
		t.Fatalf("spill index %q; want one record of %s naming run", recs, d.Short())
	}
}

// TestCheckFindsALostSpilledOutput: a spilled output's context holds its
// full text from the output's commit on, and the spill index says which
// context that is; fsck reports a context that no longer holds it (the
// record was lost: the context can no longer read its output's full
// text), and a spilled output whose bytes are neither stored nor pruned,
// each once. A spill noted before the index named contexts is expected
// held by no one, and a spill whose bytes were pruned through another
// spill of the same text is healthy.
func TestCheckFindsALostSpilledOutput(t *testing.T) {
	ctx := context.Background()
	const text = "the whole output of a tool"
	type shape struct {
		d    hashing.Digest
		spil []kv.Record
	}
	build := func(t *testing.T, s *Store) shape {
		t.Helper()
		if _, err := s.CreateContext(ctx, "run", ModeObserve); err != nil {
			t.Fatal(err)
		}
		d := spillOutput(t, s, "run", DefaultBranch, "o", "tool_error", text)
		mustCheck(t, s)
		return shape{d, spillIndex(t, s)}
	}
	for _, c := range []struct {
		name string
		harm func(t *testing.T, s *Store, sh shape)
		// want are the details the defects hold, one each, all naming the
		// blob; a want of several facts separates them with "; ".
		want []string
	}{
		{"membership lost", func(t *testing.T, s *Store, sh shape) {
			lose(t, s, keyBlobMember("run", sh.d))
		}, []string{`context "run" spilled a tool output's full text`}},
		{"bytes lost", func(t *testing.T, s *Store, sh shape) {
			lose(t, s, keyBlob(sh.d))
		}, []string{"not stored"}},
		{"bytes and membership lost", func(t *testing.T, s *Store, sh shape) {
			lose(t, s, keyBlob(sh.d), keyBlobMember("run", sh.d))
		}, []string{`context "run" spilled a tool output's full text; neither stored nor pruned`}},
		{"noted before the index named contexts, membership lost", func(t *testing.T, s *Store, sh shape) {
			rewrite(t, s, kv.Record{Key: sh.spil[0].Key, Value: []byte{}})
			lose(t, s, keyBlobMember("run", sh.d))
		}, nil},
		{"noted before the index named contexts, bytes and membership lost", func(t *testing.T, s *Store, sh shape) {
			rewrite(t, s, kv.Record{Key: sh.spil[0].Key, Value: []byte{}})
			lose(t, s, keyBlob(sh.d), keyBlobMember("run", sh.d))
		}, []string{"neither stored nor pruned"}},
		{"an index record naming no valid context", func(t *testing.T, s *Store, sh shape) {
			rewrite(t, s, kv.Record{Key: sh.spil[0].Key, Value: []byte("run\x00")})
		}, []string{"names no valid context"}},
		{"a malformed index key", func(t *testing.T, s *Store, sh shape) {
			rewrite(t, s, kv.Record{Key: append([]byte(pSpill), "short"...), Value: []byte("run")})
		}, []string{"malformed spill index key"}},
		{"pruned through another spill of the same text", func(t *testing.T, s *Store, sh shape) {
			if _, err := s.CreateContext(ctx, "later", ModeObserve); err != nil {
				t.Fatal(err)
			}
			// The clock moves on: the second spill is noted after the first.
			spillOutput(t, s, "later", DefaultBranch, "o", "tool_output", text)
			recs := spillIndex(t, s)
			if len(recs) != 2 {
				t.Fatalf("spill index %q; want two records", recs)
			}
			cutoff := time.Unix(0, int64(binary.BigEndian.Uint64(recs[1].Key[len(pSpill):])))
			if n, err := s.PruneSpills(ctx, cutoff, cutoff, 0); n != 1 || err != nil {
				t.Fatalf("prune: %d %v", n, err)
			}
			if recs := spillIndex(t, s); len(recs) != 1 || string(recs[0].Value) != "later" {
				t.Fatalf("spill index after the prune %q; want later's record", recs)
			}
			unheldAs(t, s, "nobody", sh.d, false, true)
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				sh := build(t, s)
				c.harm(t, s, sh)
				defects := checkDefects(t, s)
				if len(defects) != len(c.want) {
					t.Fatalf("%d defects, want %d: %v", len(defects), len(c.want), defects)
				}
				for i, d := range defects {
					for _, fact := range strings.Split(c.want[i], "; ") {
						if d.Kind != "blob" || !strings.Contains(d.Detail, fact) {
							t.Errorf("defect %v; want a blob defect saying %q", d, fact)
						}
					}
					if c.name != "a malformed index key" && d.ID != sh.d.String() {
						t.Errorf("defect %v; want it to name blob %s", d, sh.d)
					}
				}
			})
		})
	}
}
