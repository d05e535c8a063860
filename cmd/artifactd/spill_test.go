package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpillRetention: the full text of a long tool output is a blob that
// PruneSpills prunes once it is older than the window (not before); the
// blob then answers 410 Gone with pruned_at, the artifact keeps its digest
// (the context hash is unchanged and replays), fsck stays clean, and an
// export carries the fact so that the import of it is accepted.
func TestSpillRetention(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "c"})
	long := strings.Repeat("line of tool output\n", 3000)
	code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/tool-results", map[string]any{"id": "out", "tool": "ls", "ok": true, "output": long})
	if code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	var w struct {
		Artifact struct {
			Data struct {
				FullBlob string `json:"full_blob"`
			} `json:"data"`
		} `json:"artifact"`
		ContextHash string `json:"context_hash"`
	}
	if err := json.Unmarshal(b, &w); err != nil || w.Artifact.Data.FullBlob == "" {
		t.Fatalf("no full blob: %v %s", err, b)
	}
	blobURL := ts.URL + "/v1/contexts/c/blobs/" + w.Artifact.Data.FullBlob
	now := time.Now()
	if n, err := st.PruneSpills(ctx, now.Add(-time.Hour), now, 0); err != nil || n != 0 {
		t.Fatalf("a spill younger than the window was pruned: %d %v", n, err)
	}
	if code, _ := httpDo(t, "GET", blobURL, nil); code != 200 {
		t.Fatalf("blob before pruning: %d", code)
	}
	if n, err := st.PruneSpills(ctx, now.Add(time.Minute), now, 0); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	code, b = httpDo(t, "GET", blobURL, nil)
	if code != 410 || !strings.Contains(string(b), `"pruned_at"`) || !strings.Contains(string(b), "blob-pruned") {
		t.Fatalf("blob after pruning: %d %s", code, b)
	}
	_, h := httpDo(t, "GET", ts.URL+"/v1/contexts/c/hash", nil)
	if !strings.Contains(string(h), w.ContextHash) {
		t.Fatalf("pruning changed the context hash: %s", h)
	}
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runArtifactd(t, "fsck", "--data", dir); code != 0 {
		t.Fatalf("fsck after pruning: %d %s %s", code, out, stderr)
	}
	if code, _, stderr := runArtifactd(t, "replay", "--data", dir, "--context", "c", "--verify", w.ContextHash); code != 0 {
		t.Fatalf("replay after pruning: %d %s", code, stderr)
	}
	bundle := filepath.Join(t.TempDir(), "c.jsonl")
	if code, _, stderr := runArtifactd(t, "export", "--data", dir, "--context", "c", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	fresh := t.TempDir()
	if code, _, stderr := runArtifactd(t, "import", "--data", fresh, bundle); code != 0 {
		t.Fatalf("import of a bundle with a pruned spill: %d %s", code, stderr)
	}
	if code, out, stderr := runArtifactd(t, "fsck", "--data", fresh); code != 0 {
		t.Fatalf("fsck of the import: %d %s %s", code, out, stderr)
	}
}
