package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/artifactd/artifactd/replay"
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
