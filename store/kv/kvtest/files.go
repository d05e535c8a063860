package kvtest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FilesHold says whether the first 16 MiB of any file matching pattern
// (filepath.Glob) contain b: where an embedded driver put a value, for
// tests that check which of its files holds it (Badger sizes its logs at
// 2 GiB, sparse, and appends, so the head of each is enough).
func FilesHold(t testing.TB, pattern string, b []byte) bool {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(io.LimitReader(f, 16<<20))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, b) {
			return true
		}
	}
	return false
}
