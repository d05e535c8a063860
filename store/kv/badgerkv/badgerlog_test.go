package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
)

// TestValueLogSyncFailure checks that a value-log sync failure Badger
// reports only to its logger stops the driver's writes — Commit, PutSame
// and PutImmutable fail, saying so — while reads go on, and that
// Badger's other lines reach the driver's logger or not as badgerLog says.
func TestValueLogSyncFailure(t *testing.T) {
	ctx := context.Background()
	var logged bytes.Buffer
	d, err := Open(ctx, Options{Dir: t.TempDir(), MemTableSize: 16 << 20, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rec := kv.Record{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 4<<10)}
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{rec}}); err != nil {
		t.Fatal(err)
	}

	// Badger's own calls (value.go, cache monitor, compaction), verbatim.
	d.blog.Warningf("%s might be too small. Metrics: %s\n", "Block cache", "hit: 1 miss: 9")
	d.blog.Warningf("Cache life expectancy (in seconds): %+v\n", "-- histogram --")
	d.blog.Infof("Got compaction priority: %+v", "L0")
	if logged.Len() != 0 {
		t.Fatalf("cache advice or info reached the log: %s", logged.String())
	}
	d.blog.Warningf("While running doCompact: %v\n", errors.New("disk on fire"))
	if !strings.Contains(logged.String(), "disk on fire") {
		t.Fatalf("a compaction warning did not reach the log: %q", logged.String())
	}
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k2"), Value: []byte("x")}}}); err != nil {
		t.Fatalf("a warning stopped the writes: %v", err)
	}

	d.blog.Errorf("Error while curlf sync: %v\n", errors.New("input/output error"))
	for name, write := range map[string]func() error{
		"Commit": func() error {
			return d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("k3"), Value: []byte("x")}}})
		},
		"empty Commit": func() error { return d.Commit(ctx, kv.Batch{}) },
		"PutSame":      func() error { return d.PutSame(ctx, []kv.Record{{Key: []byte("k4"), Value: []byte("x")}}) },
		"PutImmutable": func() error { return d.PutImmutable(ctx, []kv.Record{{Key: []byte("k5"), Value: []byte("x")}}) },
	} {
		err := write()
		if err == nil || !strings.Contains(err.Error(), "value-log sync failed") || !strings.Contains(err.Error(), "input/output error") {
			t.Errorf("%s after a failed value-log sync: %v, want the failure", name, err)
		}
	}
	if !strings.Contains(logged.String(), "input/output error") {
		t.Errorf("the sync failure did not reach the log: %q", logged.String())
	}
	got, err := d.Get(ctx, rec.Key)
	if err != nil || !bytes.Equal(got, rec.Value) {
		t.Fatalf("read after the failure: %d bytes, %v", len(got), err)
	}
}

// TestBadgerSyncMessage checks, in the Badger module this build uses,
// that the value-log sync failure is still logged as badgerLog expects:
// an upgrade that changes the message (or returns the error at last)
// must revisit badgerLog.
func TestBadgerSyncMessage(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/dgraph-io/badger/v4").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("go list of the Badger module: %v", err)
		}
		t.Skipf("go list of the Badger module: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "value.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(`vlog.opt.Errorf("`+valueLogSyncFailure+`: %v\n", err)`)) {
		t.Fatalf("Badger's value.go no longer logs %q: check how this version reports a failed value-log sync", valueLogSyncFailure)
	}
}
