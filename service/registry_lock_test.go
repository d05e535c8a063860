package service

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// TestRegistryWaitsWithItsContext: a load, a refresh, and a put of a type
// or relation that wait for the registry's put lock — held by a put whose
// store I/O is slow — stop when their context ends, rather than wait for
// the lock whatever their request does.
func TestRegistryWaitsWithItsContext(t *testing.T) {
	ctx := context.Background()
	a, b := sharedServices(t, storetest.Shared{LockingDriver: memkv.New()})
	// b's stamp moves, so that b's refresh needs the lock.
	if _, _, err := a.types.Put(ctx, a.st, "moved", graph.RoleDerived, "", []byte(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.types.lockPut(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.types.unlockPut()
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Load", func(ctx context.Context) error { return b.types.Load(ctx, b.st) }},
		{"Refresh", func(ctx context.Context) error { return b.types.Refresh(ctx, b.st) }},
		{"Put", func(ctx context.Context) error {
			_, _, err := b.types.Put(ctx, b.st, "waits", graph.RoleDerived, "", []byte(`{"type":"object"}`))
			return err
		}},
		{"PutRelation", func(ctx context.Context) error {
			_, _, err := b.types.PutRelation(ctx, b.st, "waits_on", true, "")
			return err
		}},
	} {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- c.call(wctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s waiting for the put lock: %v, want its context's deadline", c.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits for the put lock 10 s after its context ended", c.name)
		}
		cancel()
	}
}

// TestRefreshesLoadOnce: writers that find the registry's stamp moved
// while a put holds the lock wait for it together, and the first to get
// it loads the registry for all of them; each no longer reads the whole
// registry in turn.
func TestRefreshesLoadOnce(t *testing.T) {
	ctx := context.Background()
	d := &scanCounter{LockingDriver: memkv.New()}
	a, b := sharedServices(t, d)
	if _, _, err := a.types.Put(ctx, a.st, "moved", graph.RoleDerived, "", []byte(`{"type":"object"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.types.lockPut(ctx); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() { errs <- b.types.Refresh(ctx, b.st) })
	}
	time.Sleep(100 * time.Millisecond) // let them all find the stamp moved
	before := d.types.Load()
	b.types.unlockPut()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := d.types.Load() - before; n != 1 {
		t.Errorf("%d refreshes read the registry %d times, want once", writers, n)
	}
	if _, ok := b.types.Get("moved"); !ok {
		t.Error("after the refreshes b does not know the type a registered")
	}
}

// sharedServices returns two services, each over its own store on driver
// d (two processes on one database), their registries loaded.
func sharedServices(t *testing.T, d storetest.LockingDriver) (*Service, *Service) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *Service {
		st, err := store.Open(ctx, store.Options{Driver: d, Logger: log, ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		reg := NewRegistry()
		if err := reg.Load(ctx, st); err != nil {
			t.Fatal(err)
		}
		return New(Options{Store: st, Types: reg, Logger: log, LeaseKey: make([]byte, 32)})
	}
	return open(), open()
}

// scanCounter is a driver other processes share (storetest.Shared) that
// counts the scans of the stored types (a registry's load).
type scanCounter struct {
	storetest.LockingDriver
	types atomic.Int64
}

// Shared implements kv.Sharer.
func (*scanCounter) Shared() bool { return true }

// Close implements kv.Driver; the wrapped driver stays open.
func (*scanCounter) Close() error { return nil }

// Scan implements kv.Driver.
func (c *scanCounter) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	if bytes.Equal(prefix, []byte("type\x00")) {
		c.types.Add(1)
	}
	return c.LockingDriver.Scan(ctx, prefix, start, limit, fn)
}

// TestPutGivesUpOnARecordThatKeepsChanging: a put of a type or relation
// whose record another writer changes between every read and write — a
// driver here whose every swap of it fails — decides again a bounded
// number of times and is then refused 409 (rule contended), rather than
// decide again for as long as the other writers go on.
func TestPutGivesUpOnARecordThatKeepsChanging(t *testing.T) {
	ctx := context.Background()
	d := &swapsFail{LockingDriver: memkv.New(), keys: []string{"type\x00busy", "reldef\x00busy_on"}}
	a, _ := sharedServices(t, d)
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Put", func(ctx context.Context) error {
			_, _, err := a.types.Put(ctx, a.st, "busy", graph.RoleDerived, "", []byte(`{"type":"object"}`))
			return err
		}},
		{"PutRelation", func(ctx context.Context) error {
			_, _, err := a.types.PutRelation(ctx, a.st, "busy_on", true, "")
			return err
		}},
	} {
		before := d.lost.Load()
		done := make(chan error, 1)
		go func() { done <- c.call(ctx) }()
		select {
		case err := <-done:
			fe, ok := fault.As(err)
			if !ok || fe.Code != fault.Conflict || len(fe.Errors) != 1 || fe.Errors[0].Rule != "contended" {
				t.Errorf("%s of a record that keeps changing: %v, want 409 conflict, rule contended", c.name, err)
			}
			if n := d.lost.Load() - before; n != registryTries {
				t.Errorf("%s lost %d swaps before it gave up, want %d", c.name, n, registryTries)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s of a record that keeps changing still decides again after 30 s", c.name)
		}
	}
}

// swapsFail is a shared driver whose commits that swap one of keys fail
// as if another writer had changed it first.
type swapsFail struct {
	storetest.LockingDriver
	keys []string
	lost atomic.Int64
}

// Shared implements kv.Sharer.
func (*swapsFail) Shared() bool { return true }

// Close implements kv.Driver; the wrapped driver stays open.
func (*swapsFail) Close() error { return nil }

// Commit implements kv.Driver.
func (d *swapsFail) Commit(ctx context.Context, b kv.Batch) error {
	for _, sw := range b.Swaps {
		if slices.Contains(d.keys, string(sw.Key)) {
			d.lost.Add(1)
			return &kv.ConflictError{Conflicts: []kv.Conflict{{Key: sw.Key}}}
		}
	}
	return d.LockingDriver.Commit(ctx, b)
}

// TestLoadNeverInstallsASnapshotOlderThanAPut: a load that has read the
// stored types and not yet installed them, and a put of a new type
// meanwhile — the put waits for the load (the registry's put lock), so the
// put's type is known afterwards, as it is stored. Were the put not to
// wait, it would install its type while the load is paused, and the load
// would then install the snapshot it read before the put's write over
// it: a type stored and registered, unknown to the registry that wrote it
// (its artifacts refused as of an unknown type) until the next load.
func TestLoadNeverInstallsASnapshotOlderThanAPut(t *testing.T) {
	ctx := context.Background()
	d := &pausedLoad{LockingDriver: memkv.New(), paused: make(chan struct{}), release: make(chan struct{})}
	a, _ := sharedServices(t, d)
	for _, c := range []struct {
		name  string
		put   func() error
		known func() bool
	}{
		{"Put", func() error {
			_, _, err := a.types.Put(ctx, a.st, "late", graph.RoleDerived, "", []byte(`{"type":"object"}`))
			return err
		}, func() bool { _, ok := a.types.Get("late"); return ok }},
		{"PutRelation", func() error {
			_, _, err := a.types.PutRelation(ctx, a.st, "late_on", true, "")
			return err
		}, func() bool { _, ok := a.types.RelationOf("late_on"); return ok }},
	} {
		t.Run(c.name, func(t *testing.T) {
			d.armed.Store(true)
			loaded := make(chan error, 1)
			go func() { loaded <- a.types.Load(ctx, a.st) }()
			<-d.paused // the load has read the stored types and relations
			put := make(chan error, 1)
			go func() { put <- c.put() }()
			select {
			case err := <-put:
				// The put did not wait: the load installs what it read.
				put <- err
			case <-time.After(200 * time.Millisecond):
				// The put waits for the load, as it must.
			}
			d.release <- struct{}{}
			if err := <-loaded; err != nil {
				t.Fatal(err)
			}
			if err := <-put; err != nil {
				t.Fatal(err)
			}
			if !c.known() {
				t.Errorf("after a put during a load, the registry does not know what the put stored")
			}
		})
	}
}

// pausedLoad is a driver whose next scan of the stored relations (a
// load's last read, after the types), once armed, reads them and then
// signals paused and waits for release before it hands them to the
// caller: a load paused between reading the registry and installing it.
type pausedLoad struct {
	storetest.LockingDriver
	armed   atomic.Bool
	paused  chan struct{}
	release chan struct{}
}

// Close implements kv.Driver; the wrapped driver stays open.
func (*pausedLoad) Close() error { return nil }

// Scan implements kv.Driver.
func (d *pausedLoad) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	if !bytes.Equal(prefix, []byte("reldef\x00")) || !d.armed.CompareAndSwap(true, false) {
		return d.LockingDriver.Scan(ctx, prefix, start, limit, fn)
	}
	var recs []kv.Record
	if err := d.LockingDriver.Scan(ctx, prefix, start, limit, func(k, v []byte) error {
		recs = append(recs, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return nil
	}); err != nil {
		return err
	}
	d.paused <- struct{}{}
	<-d.release
	for _, r := range recs {
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}
