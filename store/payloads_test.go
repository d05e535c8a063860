package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// writesRecorder counts the writes of each key that reach a memory
// driver, through any of its calls; with failHas, its Has fails.
type writesRecorder struct {
	*memkv.Driver
	failHas bool
	mu      sync.Mutex
	writes  map[string]int
}

func (d *writesRecorder) note(recs []kv.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range recs {
		d.writes[string(r.Key)]++
	}
}

func (d *writesRecorder) written(key []byte) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes[string(key)]
}

func (d *writesRecorder) PutImmutable(ctx context.Context, recs []kv.Record) error {
	d.note(recs)
	return d.Driver.PutImmutable(ctx, recs)
}

func (d *writesRecorder) Commit(ctx context.Context, b kv.Batch) error {
	d.note(b.Sets)
	return d.Driver.Commit(ctx, b)
}

func (d *writesRecorder) Has(ctx context.Context, keys [][]byte) ([]bool, error) {
	if d.failHas {
		return nil, errors.New("has: injected failure")
	}
	return d.Driver.Has(ctx, keys)
}

// TestStoredPayloadsNotWrittenAgain commits, into a second context,
// artifacts whose payloads the first stored and new ones: a large payload
// found stored is not written again, a new one is written once however
// many artifacts carry it, and every payload reads back. When the driver
// cannot tell what is stored, every payload is written (the same bytes
// under the same key) and still reads back.
func TestStoredPayloadsNotWrittenAgain(t *testing.T) {
	ctx := context.Background()
	d := &writesRecorder{Driver: memkv.New(), writes: make(map[string]int)}
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []string{"a", "b", "c"} {
		if _, err := s.CreateContext(ctx, c, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	large := func(tag string) graph.Op {
		return put("doc-"+tag, "note", map[string]any{"text": strings.Repeat(tag+" ", objCheckMin)})
	}
	small := put("small", "note", map[string]any{"n": 1})
	stored, fresh := large("stored"), large("fresh")
	mustCommit(t, s, "a", stored, small)
	keyOf := func(op graph.Op) []byte { return keyObj(hashing.Sum(op.Data)) }
	if len(stored.Data) < objCheckMin || len(small.Data) >= objCheckMin {
		t.Fatalf("payload sizes %d and %d do not straddle objCheckMin", len(stored.Data), len(small.Data))
	}
	if n := d.written(keyOf(stored)); n != 1 {
		t.Fatalf("a new payload was written %d times, want 1", n)
	}

	again := func(op graph.Op, id string) graph.Op { op.ID = id; return op }
	// The small payload first, so that the large ones are not the first
	// of the commit's payloads: a mix-up of their places shows.
	mustCommit(t, s, "b", again(small, "b4"), again(stored, "b1"), again(fresh, "b2"), again(fresh, "b3"))
	if n := d.written(keyOf(stored)); n != 1 {
		t.Errorf("a stored payload was written again: %d writes, want 1", n)
	}
	if n := d.written(keyOf(fresh)); n != 1 {
		t.Errorf("a new payload carried by two artifacts was written %d times, want 1", n)
	}

	d.failHas = true
	other := large("other")
	mustCommit(t, s, "c", again(stored, "c1"), again(other, "c2"))
	if n := d.written(keyOf(stored)); n != 2 {
		t.Errorf("with Has failing, a stored payload was written %d times in all, want 2 (written again)", n)
	}
	if n := d.written(keyOf(other)); n != 1 {
		t.Errorf("with Has failing, a new payload was written %d times, want 1", n)
	}
	for _, op := range []graph.Op{stored, fresh, small, other} {
		got, err := s.Object(ctx, hashing.Sum(op.Data))
		if err != nil || !bytes.Equal(got, op.Data) {
			t.Errorf("payload of %s: %d bytes, %v; want its %d bytes", op.ID, len(got), err, len(op.Data))
		}
	}
	mustCheck(t, s)
}
