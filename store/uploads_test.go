package store

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestOpenRemovesLeftUploads: the temporary files of blob uploads that a
// crash left in the data directory (WriteBlob's, up to a whole upload
// each, counted against the free-space reserve) are removed when the
// store opens its directory, and logged with their count and bytes;
// other files, and a directory of that name, stay. A store over a driver
// of its own (no data directory) removes nothing from the system's
// temporary directory, where its uploads go: another process may be
// writing one there.
func TestOpenRemovesLeftUploads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(dir, name string, n int) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	left := []string{write(dir, ".blob-upload-123", 1000), write(dir, ".blob-upload-456", 24)}
	kept := []string{write(dir, "notes.txt", 5), write(dir, ".blob-uploads", 5), write(dir, "x.blob-upload-1", 5)}
	sub := filepath.Join(dir, ".blob-upload-dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, sub)
	var logs bytes.Buffer
	s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left by a crashed upload is still there after open (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone after open: %v", filepath.Base(p), err)
		}
	}
	if got := logs.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, "files=2") || !strings.Contains(got, "bytes=1024") {
		t.Errorf("open logged %q, want an info line with files=2 bytes=1024", got)
	}

	// Uploads through a driver of its own go to the system's temporary
	// directory: opening such a store leaves them.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	other := write(tmp, ".blob-upload-789", 10)
	m, err := Open(ctx, Options{Driver: memkv.New(), Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(other); err != nil {
		t.Errorf("opening a store without a data directory removed %s from the temporary directory: %v", other, err)
	}
}
