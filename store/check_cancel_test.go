package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// cancelOnRead is a driver that, once armed, cancels a context at the
// first point read of a key with the prefix it watches, and counts the
// point reads of such keys made after that.
type cancelOnRead struct {
	*memkv.Driver
	mu     sync.Mutex
	prefix []byte
	cancel context.CancelFunc // set: armed
	after  int                // reads of the prefix after the cancel
	fired  bool
}

func (d *cancelOnRead) arm(prefix string, cancel context.CancelFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prefix, d.cancel = []byte(prefix), cancel
}

func (d *cancelOnRead) saw(keys ...[]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		return
	}
	for _, k := range keys {
		if !bytes.HasPrefix(k, d.prefix) {
			continue
		}
		if d.fired {
			d.after++
			return
		}
		d.fired = true
		d.cancel()
		return
	}
}

func (d *cancelOnRead) readsAfter() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.after
}

func (d *cancelOnRead) Get(ctx context.Context, key []byte) ([]byte, error) {
	d.saw(key)
	return d.Driver.Get(ctx, key)
}

func (d *cancelOnRead) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	d.saw(keys...)
	return d.Driver.GetMany(ctx, keys)
}

// TestCheckStopsWhenCancelledLoadingAHead: fsck cancelled while it loads
// a branch head's state (the first read of a state-map node after the
// scans) fails with the cancellation, reads no more of the map, and
// reports no defect of the head it did not finish.
func TestCheckStopsWhenCancelledLoadingAHead(t *testing.T) {
	d := &cancelOnRead{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	// A map several levels deep, so that a load reads it in several
	// rounds (prefetch reads a level at a time).
	var ops []graph.Op
	for i := range 3000 {
		ops = append(ops, notePut(fmt.Sprintf("a%d", i), i, "x"))
	}
	mustCommit(t, s, "c", ops...)
	mustCheck(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.arm(pNode, cancel)
	rep, err := s.Check(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("check cancelled while loading a head: %v, defects %v; want context.Canceled", err, rep.Defects)
	}
	if len(rep.Defects) != 0 {
		t.Errorf("a cancelled check reported defects: %v", rep.Defects)
	}
	if n := d.readsAfter(); n != 0 {
		t.Errorf("the check read %d more batches of state-map nodes after it was cancelled", n)
	}
}

// TestCheckStopsWhenCancelledLookingUpBlobs: fsck cancelled while it
// looks up the blobs a head's gate outputs name fails with the
// cancellation, looks up no other blob, and reports none missing.
func TestCheckStopsWhenCancelledLookingUpBlobs(t *testing.T) {
	d := &cancelOnRead{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	bg := context.Background()
	var ops []graph.Op
	for i := range 3 {
		dg, err := s.PutBlob(bg, fmt.Appendf(nil, "output %d", i))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, put(fmt.Sprintf("out-%d", i), "tool_output", map[string]any{"full_blob": dg.String()}))
	}
	mustCommit(t, s, "c", ops...)
	mustCheck(t, s)

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	d.arm(pBlob, cancel)
	rep, err := s.Check(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("check cancelled while looking up blobs: %v, defects %v; want context.Canceled", err, rep.Defects)
	}
	for _, df := range rep.Defects {
		t.Errorf("a cancelled check reported a defect: %v", df)
	}
	if n := d.readsAfter(); n != 0 {
		t.Errorf("the check looked up %d more blobs after it was cancelled", n)
	}
}

// cancelAfterLoad is a driver that cancels a context at the first read of
// state-map nodes made under a context that cannot end (a walk through
// the store's own node reads) once nodes were read under one that can
// (a head's load under the check's context), and counts the node reads
// after that.
type cancelAfterLoad struct {
	*memkv.Driver
	mu     sync.Mutex
	cancel context.CancelFunc
	loaded bool // nodes were read under a context that can end
	fired  bool
	after  int
}

func (d *cancelAfterLoad) saw(ctx context.Context, keys [][]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil || len(keys) == 0 || !bytes.HasPrefix(keys[0], []byte(pNode)) {
		return
	}
	switch {
	case d.fired:
		d.after++
	case ctx.Done() != nil:
		d.loaded = true
	case d.loaded:
		d.fired = true
		d.cancel()
	}
}

func (d *cancelAfterLoad) Get(ctx context.Context, key []byte) ([]byte, error) {
	d.saw(ctx, [][]byte{key})
	return d.Driver.Get(ctx, key)
}

func (d *cancelAfterLoad) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	d.saw(ctx, keys)
	return d.Driver.GetMany(ctx, keys)
}

// TestCheckStopsWhenCancelledCheckingAHeadsIndex: fsck cancelled while it
// walks a branch head's map to check its index (after the head loaded,
// with a node cache too small to hold the map) fails with the
// cancellation and reads no more of the map.
func TestCheckStopsWhenCancelledCheckingAHeadsIndex(t *testing.T) {
	d := &cancelAfterLoad{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1, CacheBytes: MinCacheBytes})
	var ops []graph.Op
	for i := range 5000 {
		ops = append(ops, notePut(fmt.Sprintf("a%d", i), i, "x"))
	}
	mustCommit(t, s, "c", ops...)
	mustCheck(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.mu.Lock()
	d.cancel = cancel
	d.mu.Unlock()
	rep, err := s.Check(ctx)
	d.mu.Lock()
	fired, after := d.fired, d.after
	d.mu.Unlock()
	if !fired {
		t.Fatal("the check read no state-map node after the head's load: the fixture's map fits the node cache")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("check cancelled while checking a head's index: %v, defects %v; want context.Canceled", err, rep.Defects)
	}
	if len(rep.Defects) != 0 {
		t.Errorf("a cancelled check reported defects: %v", rep.Defects)
	}
	if after != 0 {
		t.Errorf("the check read %d more batches of state-map nodes after it was cancelled", after)
	}
}
