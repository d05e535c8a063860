package hashing

import (
	"testing"
	"time"
)

// The leaf and commit builders write canonical JSON by hand for speed; these
// tests compare them with the generic path, Sum(Marshal(map)).

func mustSum(t *testing.T, v any) Digest {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return Sum(b)
}

var awkwardStrings = []string{"", "plain", "ids can have \"quotes\"", "ünï/€ 😂", "\x00\x1f\x7f\u2028</script>", "back\\slash\ttab\nnl", "\uffff\U00010000", "bad\xffutf8"}

func TestArtifactLeafMatchesGeneric(t *testing.T) {
	ch := Sum([]byte("content"))
	for i, s := range awkwardStrings {
		other := awkwardStrings[(i+1)%len(awkwardStrings)]
		for _, version := range []int64{1, 2, 1 << 53} {
			got := ArtifactLeaf(s, other, version, ch, s+other)
			want := mustSum(t, map[string]any{
				"kind": "artifact", "id": s, "type": other, "version": version,
				"content_hash": ch.String(), "produced_by": s + other,
			})
			if got != want {
				t.Errorf("ArtifactLeaf(%q, %q, %d) = %s, want %s", s, other, version, got.Short(), want.Short())
			}
		}
	}
}

func TestArtifactLeafFieldsMatter(t *testing.T) {
	ch, ch2 := Sum([]byte("a")), Sum([]byte("b"))
	base := ArtifactLeaf("id", "type", 1, ch, "p")
	for name, d := range map[string]Digest{
		"id":          ArtifactLeaf("id2", "type", 1, ch, "p"),
		"type":        ArtifactLeaf("id", "type2", 1, ch, "p"),
		"version":     ArtifactLeaf("id", "type", 2, ch, "p"),
		"hash":        ArtifactLeaf("id", "type", 1, ch2, "p"),
		"produced_by": ArtifactLeaf("id", "type", 1, ch, ""),
		"edge":        EdgeLeaf("id", "type", "p", nil),
	} {
		if d == base {
			t.Errorf("changing %s did not change the leaf", name)
		}
	}
}

func TestEdgeLeafMatchesGeneric(t *testing.T) {
	for i, s := range awkwardStrings {
		o := awkwardStrings[(i+3)%len(awkwardStrings)]
		want := mustSum(t, map[string]any{"kind": "edge", "from": s, "rel": o, "to": s + o})
		for _, attrs := range [][]byte{nil, {}, []byte("{}")} {
			if got := EdgeLeaf(s, o, s+o, attrs); got != want {
				t.Errorf("EdgeLeaf(%q, %q, attrs %q) = %s, want %s", s, o, attrs, got.Short(), want.Short())
			}
		}
		attrs := map[string]any{"weight": 0.5, "locator": s, "z": []any{1, nil}}
		canon, err := Marshal(attrs)
		if err != nil {
			t.Fatal(err)
		}
		want = mustSum(t, map[string]any{"kind": "edge", "from": s, "rel": o, "to": s + o, "attrs": attrs})
		if got := EdgeLeaf(s, o, s+o, canon); got != want {
			t.Errorf("EdgeLeaf(%q, %q, %s) = %s, want %s", s, o, canon, got.Short(), want.Short())
		}
		if got := EdgeLeaf(s, o, s+o, nil); got == want {
			t.Error("attrs did not change the edge leaf")
		}
	}
}

func TestCommitIDMatchesGeneric(t *testing.T) {
	p1, p2 := Sum([]byte("p1")), Sum([]byte("p2"))
	for _, parents := range [][]Digest{nil, {}, {p1}, {p1, p2}, {p2, p1}} {
		for _, msg := range awkwardStrings {
			h := CommitHeader{
				Parents:     parents,
				ContextHash: Sum([]byte("ctx")),
				OpsHash:     OpsHash([]byte(`[{"op":"put"}]`)),
				Author:      "agent " + msg,
				Message:     msg,
				Time:        "2026-11-30T07:42:05.123456789Z",
			}
			ps := make([]string, 0, len(parents)) // [] when none, never null
			for _, p := range parents {
				ps = append(ps, p.String())
			}
			want := mustSum(t, map[string]any{
				"parents": ps, "context_hash": h.ContextHash.String(), "ops_hash": h.OpsHash.String(),
				"author": h.Author, "message": h.Message, "time": h.Time,
			})
			if got := CommitID(h); got != want {
				t.Errorf("CommitID(parents %d, message %q) = %s, want %s", len(parents), msg, got.Short(), want.Short())
			}
		}
	}
}

func TestCommitIDFieldsMatter(t *testing.T) {
	p1, p2 := Sum([]byte("p1")), Sum([]byte("p2"))
	base := CommitHeader{Parents: []Digest{p1, p2}, ContextHash: p1, OpsHash: p2, Author: "a", Message: "m", Time: "2026-01-01T00:00:00Z"}
	id := CommitID(base)
	variants := map[string]func(h *CommitHeader){
		"parent order": func(h *CommitHeader) { h.Parents = []Digest{p2, p1} },
		"no parents":   func(h *CommitHeader) { h.Parents = nil },
		"context":      func(h *CommitHeader) { h.ContextHash = p2 },
		"ops":          func(h *CommitHeader) { h.OpsHash = p1 },
		"author":       func(h *CommitHeader) { h.Author = "b" },
		"message":      func(h *CommitHeader) { h.Message = "n" },
		"time":         func(h *CommitHeader) { h.Time = "2026-01-01T00:00:01Z" },
	}
	for name, change := range variants {
		h := base
		change(&h)
		if CommitID(h) == id {
			t.Errorf("changing %s did not change the commit id", name)
		}
	}
	if CommitID(base) != id {
		t.Error("CommitID is not deterministic")
	}
}

func TestOpsAndContentHash(t *testing.T) {
	b := []byte(`[{"op":"delete","id":"x"}]`)
	if OpsHash(b) != Sum(b) || ContentHash(b) != Sum(b) {
		t.Error("OpsHash/ContentHash are not SHA-256 of their input")
	}
}

func TestFormatTime(t *testing.T) {
	zone := time.FixedZone("X", 5*3600+30*60)
	tests := []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 11, 30, 13, 12, 5, 123456789, zone), "2026-11-30T07:42:05.123456789Z"},
		{time.Date(2026, 11, 30, 7, 42, 5, 0, time.UTC), "2026-11-30T07:42:05Z"},
		{time.Date(2026, 11, 30, 7, 42, 5, 500000000, time.UTC), "2026-11-30T07:42:05.5Z"},
	}
	for _, tt := range tests {
		if got := FormatTime(tt.t); got != tt.want {
			t.Errorf("FormatTime(%v) = %s, want %s", tt.t, got, tt.want)
		}
	}
}
