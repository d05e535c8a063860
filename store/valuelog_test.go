package store

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/store/kv/kvtest"
)

// TestValueThresholdReachesBadger: Options.ValueThreshold decides where
// the embedded database keeps a 4 KiB payload — in its value log by
// default, in its tree with a negative threshold — and the store reads
// it back either way.
func TestValueThresholdReachesBadger(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		threshold int64
		inLog     bool
	}{
		{"default", 0, true},
		{"tree", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), ValueThreshold: tc.threshold})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
				t.Fatal(err)
			}
			marker := "marker-" + tc.name + "-"
			text := marker + strings.Repeat("x", 4<<10)
			c := mustCommit(t, s, "c", put("big", "note", map[string]any{"text": text}))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := kvtest.FilesHold(t, filepath.Join(dir, "*.vlog"), []byte(marker)); got != tc.inLog {
				t.Fatalf("the value log holds the payload: %v, want %v", got, tc.inLog)
			}
			s = openTest(t, dir)
			defer s.Close()
			a, _, err := s.ArtifactAt(ctx, "c", c, "big")
			if err != nil || !bytes.Contains(a.Data, []byte(marker)) {
				t.Fatalf("read back: %v", err)
			}
		})
	}
}
