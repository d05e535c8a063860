package memkv

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/internal/guard"
)

// Driver is the in-memory driver. Create it with New.
type Driver struct {
	g  guard.Guard
	mu sync.Mutex
	// vals holds every record; guarded by mu. Stored slices are never
	// modified.
	vals map[string][]byte
	// sorted is the ordered key list as of the last merge and added the
	// keys created since, unordered; deleted keys stay in both until the
	// next merge drops them. Guarded by mu.
	sorted []string
	added  []string
	// locks are the keys held or waited for by Lock; guarded by lmu.
	lmu   sync.Mutex
	locks map[string]*keyLock
}

// keyLock is one key's lock: a token channel whose blocked senders the
// runtime serves in arrival order, and the number of holders and
// waiters (the entry goes when it drops to zero).
type keyLock struct {
	ch   chan struct{}
	refs int
}

// New returns an empty driver.
func New() *Driver {
	return &Driver{vals: make(map[string][]byte), locks: make(map[string]*keyLock)}
}

var (
	_ kv.Driver = (*Driver)(nil)
	_ kv.Locker = (*Driver)(nil)
)

func (d *Driver) enter(ctx context.Context) error {
	if !d.g.Enter() {
		return kv.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		d.g.Leave()
		return err
	}
	return nil
}

// set stores a copy of v under k; the caller holds mu.
func (d *Driver) set(k string, v []byte) {
	if _, ok := d.vals[k]; !ok {
		d.added = append(d.added, k)
	}
	d.vals[k] = append([]byte{}, v...)
}

// PutImmutable implements kv.Driver.
func (d *Driver) PutImmutable(ctx context.Context, recs []kv.Record) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := kv.ValidateRecords(recs); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range recs {
		if _, ok := d.vals[string(r.Key)]; !ok {
			d.set(string(r.Key), r.Value)
		}
	}
	return nil
}

// Get implements kv.Driver.
func (d *Driver) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	d.mu.Lock()
	v, ok := d.vals[string(key)]
	d.mu.Unlock()
	if !ok {
		return nil, kv.ErrNotFound
	}
	return append([]byte{}, v...), nil
}

// GetMany implements kv.Driver.
func (d *Driver) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	out := make([][]byte, len(keys))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, k := range keys {
		if v, ok := d.vals[string(k)]; ok {
			out[i] = append([]byte{}, v...)
		}
	}
	return out, nil
}

// Has implements kv.Haser.
func (d *Driver) Has(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	out := make([]bool, len(keys))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, k := range keys {
		_, out[i] = d.vals[string(k)]
	}
	return out, nil
}

// merge folds the added keys into the sorted list and drops deleted ones;
// the caller holds mu.
func (d *Driver) merge() {
	if len(d.added) == 0 && len(d.sorted) <= 2*len(d.vals) {
		return
	}
	slices.Sort(d.added)
	out := make([]string, 0, len(d.vals))
	i, j := 0, 0
	keep := func(k string) {
		if _, ok := d.vals[k]; ok && (len(out) == 0 || out[len(out)-1] != k) {
			out = append(out, k)
		}
	}
	for i < len(d.sorted) || j < len(d.added) {
		if j == len(d.added) || i < len(d.sorted) && d.sorted[i] <= d.added[j] {
			keep(d.sorted[i])
			i++
		} else {
			keep(d.added[j])
			j++
		}
	}
	d.sorted, d.added = out, nil
}

// Scan implements kv.Driver.
func (d *Driver) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	from := string(kv.ScanStart(prefix, start))
	type rec struct {
		k string
		v []byte
	}
	var snap []rec
	d.mu.Lock()
	d.merge()
	for i := sort.SearchStrings(d.sorted, from); i < len(d.sorted); i++ {
		k := d.sorted[i]
		if len(k) < len(prefix) || k[:len(prefix)] != string(prefix) {
			break
		}
		v, ok := d.vals[k]
		if !ok {
			continue // deleted since the last merge
		}
		snap = append(snap, rec{k, v})
		if limit > 0 && len(snap) == limit {
			break
		}
	}
	d.mu.Unlock()
	for _, r := range snap {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn([]byte(r.k), append([]byte{}, r.v...)); err != nil {
			return err
		}
	}
	return nil
}

// ScanReverse implements kv.Driver.
func (d *Driver) ScanReverse(ctx context.Context, prefix, end []byte, limit int, fn func(k, v []byte) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	type rec struct {
		k string
		v []byte
	}
	var snap []rec
	d.mu.Lock()
	d.merge()
	i := len(d.sorted)
	if upper := kv.ScanEnd(prefix, end); upper != nil {
		i = sort.SearchStrings(d.sorted, string(upper))
	}
	for i--; i >= 0; i-- {
		k := d.sorted[i]
		if len(k) < len(prefix) || k[:len(prefix)] != string(prefix) {
			break
		}
		v, ok := d.vals[k]
		if !ok {
			continue
		}
		snap = append(snap, rec{k, v})
		if limit > 0 && len(snap) == limit {
			break
		}
	}
	d.mu.Unlock()
	for _, r := range snap {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn([]byte(r.k), append([]byte{}, r.v...)); err != nil {
			return err
		}
	}
	return nil
}

// Commit implements kv.Driver.
func (d *Driver) Commit(ctx context.Context, b kv.Batch) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := b.Validate(); err != nil {
		return err
	}
	return d.commit(b)
}

// commit applies b, validated; the caller has entered the guard.
func (d *Driver) commit(b kv.Batch) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var conflicts []kv.Conflict
	for i := range b.Swaps {
		s := &b.Swaps[i]
		cur, ok := d.vals[string(s.Key)]
		if !s.Holds(ok, cur) {
			conflicts = append(conflicts, kv.Conflict{Key: bytes.Clone(s.Key), Exists: ok, Current: bytes.Clone(cur)})
		}
	}
	if conflicts != nil {
		return &kv.ConflictError{Conflicts: conflicts}
	}
	for _, r := range b.Sets {
		d.set(string(r.Key), r.Value)
	}
	for _, k := range b.Deletes {
		delete(d.vals, string(k))
	}
	for _, s := range b.Swaps {
		if s.Delete {
			delete(d.vals, string(s.Key))
		} else {
			d.set(string(s.Key), s.New)
		}
	}
	return nil
}

// Close implements kv.Driver. The records are dropped.
func (d *Driver) Close() error {
	if d.g.Close() {
		d.mu.Lock()
		d.vals, d.sorted, d.added = nil, nil, nil
		d.mu.Unlock()
	}
	return nil
}

// Lock implements kv.Locker: it takes the keys one by one in key order
// (so that two holds never wait for each other), each after the holds
// that asked for it before.
func (d *Driver) Lock(ctx context.Context, keys [][]byte) (kv.Hold, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	sorted, err := kv.LockKeys(keys)
	if err != nil {
		d.g.Leave()
		return nil, err
	}
	h := &hold{d: d}
	for _, kb := range sorted {
		k := string(kb)
		d.lmu.Lock()
		l := d.locks[k]
		if l == nil {
			l = &keyLock{ch: make(chan struct{}, 1)}
			d.locks[k] = l
		}
		l.refs++
		d.lmu.Unlock()
		select {
		case l.ch <- struct{}{}:
			h.keys = append(h.keys, k)
		case <-ctx.Done():
			d.unref(k, l)
			h.Release()
			return nil, ctx.Err()
		}
	}
	return h, nil
}

// unref drops a holder or waiter of key k's lock l.
func (d *Driver) unref(k string, l *keyLock) {
	d.lmu.Lock()
	if l.refs--; l.refs == 0 {
		delete(d.locks, k)
	}
	d.lmu.Unlock()
}

// hold is a kv.Hold of the in-memory driver.
type hold struct {
	d    *Driver
	mu   sync.Mutex
	keys []string // held; nil once ended
	done bool
}

// Commit implements kv.Hold.
func (h *hold) Commit(ctx context.Context, b kv.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	defer h.Release()
	if err := ctx.Err(); err != nil {
		return err
	}
	return h.d.commit(b)
}

// Release implements kv.Hold.
func (h *hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	for _, k := range h.keys {
		h.d.lmu.Lock()
		l := h.d.locks[k]
		h.d.lmu.Unlock()
		<-l.ch
		h.d.unref(k, l)
	}
	h.keys = nil
	h.d.g.Leave()
}
