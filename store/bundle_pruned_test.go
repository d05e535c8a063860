package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestImportDoesNotPruneAnotherContextsLostBlob: a context holds a blob
// whose bytes were lost, which fsck reports. A bundle listing that blob as
// pruned (a tool output of its own names it) must not make the loss read
// as a prune: the other context's reads would answer "pruned after its
// retention window" and fsck would stop reporting the damage.
func TestImportDoesNotPruneAnotherContextsLostBlob(t *testing.T) {
	ctx := context.Background()
	open := func() *Store {
		s, err := Open(ctx, Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	const text = "the whole output of a tool"
	// The bundle comes from a store that pruned the spill.
	src := open()
	if _, err := src.CreateContext(ctx, "run", ModeObserve); err != nil {
		t.Fatal(err)
	}
	d := spillOutput(t, src, "run", DefaultBranch, "o", "tool_output", text)
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, err := src.PruneSpills(ctx, at, at, 0); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	var buf bytes.Buffer
	if h, err := src.Export(ctx, "run", "", &buf); err != nil || h.Pruned != 1 {
		t.Fatalf("export: %v %v", h, err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Here context "other" holds the same bytes, and they are lost.
	s := open()
	if _, err := s.CreateContext(ctx, "other", ModeObserve); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutContextBlob(ctx, "other", []byte(text)); err != nil {
		t.Fatal(err)
	}
	lose(t, s, keyBlob(d))
	reported := func() bool {
		for _, def := range checkDefects(t, s) {
			if def.Kind == "blob" && def.Context == "other" && def.ID == d.String() {
				return true
			}
		}
		return false
	}
	if !reported() {
		t.Fatal("fixture: fsck does not report the lost blob")
	}
	if _, err := s.Import(ctx, b, "copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetContextBlob(ctx, "other", d); errors.Is(err, ErrPruned) {
		t.Errorf("after the import, the lost blob of context other reads as pruned: %v", err)
	}
	if !reported() {
		t.Error("after the import, fsck no longer reports the lost blob of context other")
	}
}

// prunedSpillBundle returns the export of context "run" of a store that
// spilled text as a tool output ("o") and pruned it, so that the bundle
// lists its blob as pruned; and the time the prune recorded.
func prunedSpillBundle(t *testing.T, text string) (*replay.Bundle, string) {
	t.Helper()
	ctx := context.Background()
	src, err := Open(ctx, Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.CreateContext(ctx, "run", ModeObserve); err != nil {
		t.Fatal(err)
	}
	spillOutput(t, src, "run", DefaultBranch, "o", "tool_output", text)
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, err := src.PruneSpills(ctx, at, at, 0); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	var buf bytes.Buffer
	if h, err := src.Export(ctx, "run", "", &buf); err != nil || h.Pruned != 1 {
		t.Fatalf("export: %v %v", h, err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return b, hashing.FormatTime(at)
}

// TestImportedPruneSpeaksForItsContextOnly: a bundle's pruned line says
// the blob was pruned in the bundle's source store, which is true of the
// imported context only. Here context "other" has a tool output at its
// head naming a blob that is not stored (fsck reports it); importing a
// bundle whose own tool output names that blob and lists it as pruned
// must leave that defect reported and other's reads as they were, while
// the imported context reads the blob as pruned (with the bundle's time),
// exports the pruned line again and has no defect of its own.
func TestImportedPruneSpeaksForItsContextOnly(t *testing.T) {
	const text = "the whole output of a tool"
	b, at := prunedSpillBundle(t, text)
	d := hashing.Sum([]byte(text))
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "other", ModeObserve); err != nil {
			t.Fatal(err)
		}
		// A client's own tool output naming bytes stored nowhere here.
		mustCommit(t, s, "other", put("lost", "tool_output", map[string]any{"tool": "t", "model_view": "…", "total_chars": len(text), "full_blob": d.String()}))
		others := func() (n int, copies []Defect) {
			for _, def := range checkDefects(t, s) {
				switch {
				case def.Kind == "blob" && def.Context == "other" && (def.ID == "lost" || def.ID == d.String()):
					n++
				case def.Context == "copy":
					copies = append(copies, def)
				}
			}
			return n, copies
		}
		if n, _ := others(); n != 1 {
			t.Fatalf("fixture: fsck reports the blob of context other %d times, want 1", n)
		}
		if _, err := s.Import(ctx, b, "copy"); err != nil {
			t.Fatal(err)
		}
		n, copies := others()
		if n != 1 {
			t.Errorf("after the import, fsck reports the missing blob of context other %d times, want 1", n)
		}
		if len(copies) > 0 {
			t.Errorf("after the import, fsck reports the imported context: %v", copies)
		}
		var pe *PrunedError
		if _, err := s.GetContextBlob(ctx, "copy", d); !errors.As(err, &pe) || pe.PrunedAt != at {
			t.Errorf("the imported context reads its pruned blob: %v, want pruned at %s", err, at)
		}
		if when, p := s.BlobPruned(ctx, d); p {
			t.Errorf("after the import, the store reads blob %s as pruned here (at %s)", d.Short(), when)
		}
		if err := s.StatBlob(ctx, d); !errors.Is(err, ErrNotFound) {
			t.Errorf("after the import, a read of blob %s beside the imported context: %v, want not found", d.Short(), err)
		}
		// Another context coming to hold the digest (its gate output's
		// write) reads it as it would without the import, and fsck
		// reports the bytes it holds as not stored.
		if _, err := s.AddBlobMember(ctx, "other", d); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetContextBlob(ctx, "other", d); !errors.Is(err, ErrNotFound) {
			t.Errorf("context other reads the blob the import listed as pruned: %v, want not found", err)
		}
		if n, _ := others(); n != 1 {
			t.Errorf("once other holds the blob, fsck reports it %d times, want 1", n)
		}
		var buf bytes.Buffer
		if h, err := s.Export(ctx, "copy", "", &buf); err != nil || h.Pruned != 1 {
			t.Fatalf("export of the imported context: %v %v, want one pruned line", h, err)
		}
		again, err := replay.ReadBundle(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if when, ok := again.Pruned(d); !ok || when != at {
			t.Errorf("the export of the imported context lists blob %s as pruned: %v at %q, want at %s", d.Short(), ok, when, at)
		}
	})
}

// TestImportedPruneOfAnEarlierVersionStaysStoreWide: an import of an
// earlier version recorded a bundle's pruned line as a store-wide marker,
// which nothing tells from a prune of this store; it stays one — every
// context holding the blob reads it as pruned, and fsck accepts every
// tool output naming it.
func TestImportedPruneOfAnEarlierVersionStaysStoreWide(t *testing.T) {
	const text = "the whole output of a tool"
	b, at := prunedSpillBundle(t, text)
	d := hashing.Sum([]byte(text))
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.Import(ctx, b, "copy"); err != nil {
			t.Fatal(err)
		}
		// What the earlier import wrote instead of the context's own
		// record: the store-wide marker.
		markPrunedHere(t, s, d, at)
		lose(t, s, keyImportedPruned("copy", d))
		if _, err := s.CreateContext(ctx, "other", ModeObserve); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, "other", put("o", "tool_output", map[string]any{"tool": "t", "model_view": "…", "total_chars": len(text), "full_blob": d.String()}))
		if _, err := s.AddBlobMember(ctx, "other", d); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, s)
		for _, id := range []string{"copy", "other"} {
			var pe *PrunedError
			if _, err := s.GetContextBlob(ctx, id, d); !errors.As(err, &pe) || pe.PrunedAt != at {
				t.Errorf("context %s reads the blob: %v, want pruned at %s", id, err, at)
			}
		}
	})
}

// TestCheckFindsAMalformedImportedPruneMarker: fsck reports a context's
// record of a blob its import listed as pruned whose key does not name a
// context and a digest, or whose value says no time.
func TestCheckFindsAMalformedImportedPruneMarker(t *testing.T) {
	d := hashing.Sum([]byte("some bytes"))
	for _, c := range []struct{ name, key, value string }{
		{"short key", pImportedPruned + "copy", `{"pruned_at":"2027-01-01T00:00:00Z"}`},
		{"no context", string(keyImportedPruned("", d)), `{"pruned_at":"2027-01-01T00:00:00Z"}`},
		{"not JSON", string(keyImportedPruned("copy", d)), `2027`},
		{"no time", string(keyImportedPruned("copy", d)), `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				if err := s.kv.Commit(context.Background(), kv.Batch{Sets: []kv.Record{{Key: []byte(c.key), Value: []byte(c.value)}}}); err != nil {
					t.Fatal(err)
				}
				defs := checkDefects(t, s)
				if len(defs) != 1 || defs[0].Kind != "blob" {
					t.Errorf("fsck reports %v, want one blob defect", defs)
				}
			})
		})
	}
}
