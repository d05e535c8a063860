package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// TestCheckReportsUnreadableValues cuts the value log short under a
// closed store and checks that fsck reports each record it can no longer
// read and finishes, rather than stopping at the first: with the default
// threshold the payloads past the cut; with every value of 16 bytes or
// more in the log, also commit records, seq entries, refs and context
// records.
func TestCheckReportsUnreadableValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold int64
	}{{"default", 0}, {"everything", 16}} {
		t.Run(tc.name, func(t *testing.T) { checkUnreadable(t, tc.threshold) })
	}
}

func checkUnreadable(t *testing.T, threshold int64) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), ValueThreshold: threshold})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if i == n/2+1 { // after the cut below
			if _, err := s.CreateContext(ctx, "d", ModeObserve); err != nil {
				t.Fatal(err)
			}
		}
		mustCommit(t, s, "c", put(fmt.Sprintf("a%02d", i), "note", map[string]any{"text": fmt.Sprintf("payload-%02d-", i) + strings.Repeat("x", 4<<10)}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("value logs %v, %v: want one", logs, err)
	}
	raw, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(raw, []byte("payload-10-"))
	if cut < 0 {
		t.Fatal("payload 10 is not in the value log")
	}
	if err := os.Truncate(logs[0], int64(cut)); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, Options{Dir: dir, Clock: testClock(), ValueThreshold: threshold})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatalf("fsck stopped: %v", err)
	}
	kinds := map[string]int{}
	for _, d := range rep.Defects {
		if strings.Contains(d.Detail, "unreadable") {
			kinds[d.Kind]++
		}
	}
	if kinds["object"] < n/2 {
		t.Fatalf("fsck reports %d unreadable objects, want at least %d (the payloads past the cut); all defects: %v", kinds["object"], n/2, rep.Defects)
	}
	if threshold > 0 && (kinds["commit"] == 0 || kinds["context"] == 0) {
		t.Fatalf("with every value in the log, unreadable records by kind %v; want commits and a context too; all defects: %v", kinds, rep.Defects)
	}
}
