package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if _, err := d.Get(ctx, []byte("k3")); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("a Commit after the failure wrote its batch (get: %v)", err)
	}
	if !strings.Contains(logged.String(), "input/output error") {
		t.Errorf("the sync failure did not reach the log: %q", logged.String())
	}
	got, err := d.Get(ctx, rec.Key)
	if err != nil || !bytes.Equal(got, rec.Value) {
		t.Fatalf("read after the failure: %d bytes, %v", len(got), err)
	}
}

// TestBadgerVersion pins the Badger version whose source badgerLog and
// checkedValue were written against (v4.9.6: value.go valueLog.write logs
// a failed value-log sync as valueLogSyncFailure and goes on; iterator.go
// yieldItemValue logs a failed value-log read and returns no value). An
// upgrade must read those two places again, then move this pin. (A test
// binary's build information lists no modules, so the module's go.mod is
// read.)
func TestBadgerVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/dgraph-io/badger/v4" {
			if f[1] != "v4.9.6" {
				t.Fatalf("Badger is %s: check how it reports a failed value-log sync and read (badgerlog.go, checkedValue), then update this test", f[1])
			}
			return
		}
	}
	t.Fatal("go.mod does not require Badger")
}

// TestBadgerLogRepeats checks that a message Badger repeats is logged once
// per logEvery, with the count of the lines dropped meanwhile, and that a
// sync failure is recorded even when its line is dropped.
func TestBadgerLogRepeats(t *testing.T) {
	var logged bytes.Buffer
	l := newBadgerLog(slog.New(slog.NewTextHandler(&logged, nil)))
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for range 5 {
		l.Warningf("While running doCompact: %v\n", errors.New("disk on fire"))
		now = now.Add(time.Second)
	}
	if n := strings.Count(logged.String(), "disk on fire"); n != 1 {
		t.Fatalf("5 repeats within %v logged %d lines, want 1:\n%s", logEvery, n, logged.String())
	}
	now = now.Add(logEvery)
	l.Warningf("While running doCompact: %v\n", errors.New("disk on fire"))
	if n := strings.Count(logged.String(), "disk on fire"); n != 2 || !strings.Contains(logged.String(), "repeated=4") {
		t.Fatalf("after %v: %d lines, want 2 with repeated=4:\n%s", logEvery, n, logged.String())
	}
	l.Errorf("Error while curlf sync: %v\n", errors.New("first"))
	l.Errorf("Error while curlf sync: %v\n", errors.New("second"))
	if err := l.failure(); err == nil || !strings.Contains(err.Error(), "first") {
		t.Fatalf("failure after two sync errors: %v, want the first", err)
	}
}

// TestLostValue checks that a value the value log cannot give back — its
// file cut short under a closed store — is corruption for Get, GetMany and
// Scan, never an empty value, while values kept in the tree read as they
// are.
func TestLostValue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := Open(ctx, Options{Dir: dir, MemTableSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("B"), 64<<10)
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: []byte("p/small"), Value: []byte("s")}, {Key: []byte("p/big"), Value: big}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	cut := false
	for _, p := range logs {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(raw, big[:1024]); i >= 0 {
			if err := os.Truncate(p, int64(i)); err != nil {
				t.Fatal(err)
			}
			cut = true
		}
	}
	if !cut {
		t.Fatalf("the 64 KiB value is in none of %v", logs)
	}
	d, err = Open(ctx, Options{Dir: dir, MemTableSize: 16 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, err := d.Get(ctx, []byte("p/small")); err != nil || string(v) != "s" {
		t.Fatalf("small value: %q, %v", v, err)
	}
	v, err := d.Get(ctx, []byte("p/big"))
	var lost *kv.UnreadableError
	if !errors.Is(err, kv.ErrCorrupt) || !errors.As(err, &lost) || string(lost.Key) != "p/big" {
		t.Errorf("Get of the lost value: %d bytes, %v, want corruption naming p/big", len(v), err)
	}
	if vs, err := d.GetMany(ctx, [][]byte{[]byte("p/small"), []byte("p/big")}); !errors.Is(err, kv.ErrCorrupt) {
		t.Errorf("GetMany with the lost value: %d values, %v, want corruption", len(vs), err)
	}
	err = d.Scan(ctx, []byte("p/"), nil, 0, func(k, v []byte) error {
		if string(k) == "p/big" {
			t.Errorf("Scan gave the lost value as %d bytes", len(v))
		}
		return nil
	})
	if !errors.Is(err, kv.ErrCorrupt) {
		t.Errorf("Scan over the lost value: %v, want corruption", err)
	}
}
