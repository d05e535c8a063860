package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/kvtest"
)

// TestBulkCommitIsPacked: a bulk commit's payloads, state-map nodes and
// op chunks go to the Badger driver's pack (bulkGroupBytes, PutSame)
// while a one-artifact commit writes none; the store reads both back after a
// reopen and fsck finds nothing. A byte changed in the pack is then
// corruption that fsck reports, by record, and that a read of the damaged
// payload refuses.
func TestBulkCommitIsPacked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 6000
	ops := make([]graph.Op, 0, 2*n)
	payloads := 0
	for i := range n {
		op := put(fmt.Sprintf("a%05d", i), "note", map[string]any{"text": fmt.Sprintf("payload-%05d-", i) + strings.Repeat("x", 200)})
		payloads += len(op.Data)
		ops = append(ops, op)
		if i > 0 {
			ops = append(ops, link(fmt.Sprintf("a%05d", i), "derived_from", fmt.Sprintf("a%05d", i/2)))
		}
	}
	bulk := mustCommit(t, s, "c", ops...)
	packs := filepath.Join(dir, "packs", "*.pack")
	size := func() int64 {
		t.Helper()
		paths, err := filepath.Glob(packs)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, p := range paths {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			total += info.Size()
		}
		return total
	}
	packed := size()
	if packed <= int64(payloads)+n*50 {
		t.Fatalf("packs hold %d bytes after a bulk commit of %d bytes of payloads: not its nodes and op chunks too", packed, payloads)
	}
	one := mustCommit(t, s, "c", put("one", "note", map[string]any{"text": "payload-one-" + strings.Repeat("y", 300)}), link("one", "derived_from", "a00007"))
	if got := size(); got != packed {
		t.Fatalf("a one-artifact commit wrote %d bytes to packs", got-packed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !kvtest.FilesHold(t, packs, []byte("payload-01234-")) || kvtest.FilesHold(t, packs, []byte("payload-one-")) {
		t.Fatal("the packs do not hold the bulk commit's payloads, or hold the one-artifact commit's")
	}

	s = openTest(t, dir)
	mustCheck(t, s)
	for _, id := range []string{"a01234", "one"} {
		a, _, err := s.ArtifactAt(ctx, "c", one, id)
		if err != nil || !bytes.Contains(a.Data, []byte("payload-")) {
			t.Fatalf("read %s back: %v", id, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Change one byte of payload 1234 where the pack holds it.
	paths, err := filepath.Glob(packs)
	if err != nil {
		t.Fatal(err)
	}
	damaged := false
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(raw, []byte("payload-01234-")); i >= 0 {
			raw[i+len("payload-01234-")] ^= 0x01
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("payload 1234 is in no pack")
	}
	s = openTest(t, dir)
	defer s.Close()
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("fsck stopped: %v", err)
	}
	found := false
	for _, d := range rep.Defects {
		found = found || d.Kind == "object" && strings.Contains(d.Detail, "unreadable")
	}
	if !found {
		t.Fatalf("fsck does not report the damaged payload as unreadable: %+v", rep.Defects)
	}
	if _, _, err := s.ArtifactAt(ctx, "c", bulk, "a01234"); !errors.Is(err, kv.ErrCorrupt) {
		t.Fatalf("read of the damaged payload: %v, want kv.ErrCorrupt", err)
	}
	if a, _, err := s.ArtifactAt(ctx, "c", bulk, "a01235"); err != nil || !bytes.Contains(a.Data, []byte("payload-01235-")) {
		t.Fatalf("read of an undamaged payload: %v", err)
	}
}
