package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// A leaf checkpoint keeps the context-hash leaves of a state, so that a
// head opened over its state map (openLazy) need not walk every artifact
// and edge to hash them again. It is kept bucket by bucket
// (leafbuckets.go): a table of the 256 buckets' digests, which checks
// against the context hash it is named by, and a record per bucket, read
// when a commit first touches that bucket. Releases before kept one whole
// (a store written by them still has such checkpoints; they are read, and
// deleted when the next checkpoint of their context is written):
//
//	leaves NUL <context hash><u32 BE i> -> leaves i·leafChunk … of the state, sorted, 32 bytes each
//
// Checkpoints are derived data, written after the fact — when a head is
// opened by walking its map, when the head cache evicts a head that has
// none, and for every cached head at Close — never in a commit's path.
// Writing one deletes the context's checkpoints no head needs: all but
// those of the commits its branches and its hint are at and those cached
// heads were opened from (sweepLeafTables); on a store shared by several
// processes, whose heads it cannot see, only the one the writing head was
// opened from, unless another cached head was too. States of fewer than
// leafCheckpointMin leaves have none: walking them costs less.
//
// Beside them, each context keeps a hint of the commit whose state its
// newest checkpoint holds:
//
//	leafat NUL <context id> -> that commit's id
//
// A head opened at a commit that has no checkpoint — one made after the
// last checkpoint and before a kill -9, or dropped from the cache before
// its own was written — starts from that checkpoint and applies the diff
// of the two commits' maps (leavesSince) instead of walking its whole
// map; the diff reads only the buckets it changes. The hint is only a
// hint: what it names may be gone, or far from the commit opened, and the
// leaves it gives are used only if they hash to that commit's context
// hash.
const (
	pLeaves           = "leaves\x00"
	pLeafAt           = "leafat\x00"
	leafChunk         = 32 << 10
	leafCheckpointMin = 8 << 10
)

// keyLeafAt is the key of context ctxID's checkpoint hint.
func keyLeafAt(ctxID string) []byte { return []byte(pLeafAt + ctxID) }

func prefixLeaves(h hashing.Digest) []byte { return append([]byte(pLeaves), h[:]...) }

func keyLeaves(h hashing.Digest, i uint32) []byte {
	return binary.BigEndian.AppendUint32(prefixLeaves(h), i)
}

// wantsCheckpoint reports whether the state after commit c is big enough
// to keep a leaf checkpoint.
func wantsCheckpoint(c *replay.Commit) bool { return c.Artifacts+c.Edges >= leafCheckpointMin }

// readCheckpoint returns the accumulator held by context ctxID's leaf
// checkpoint of commit c's state, or nil when there is none, or none that
// checks: from its buckets' table (leafbuckets.go), the buckets read as
// commits touch them; else from a checkpoint kept whole by an earlier
// release (the leaves records), read and checked at once.
func (s *Store) readCheckpoint(ctx context.Context, ctxID string, c *replay.Commit) *hashing.Accumulator {
	if acc := s.readLeafTable(ctx, ctxID, c); acc != nil {
		return acc
	}
	h, n := c.ContextHash, c.Artifacts+c.Edges
	buf := make([]byte, 0, n*32)
	next := uint32(0)
	ok := true
	err := s.kv.Scan(ctx, prefixLeaves(h), nil, 0, func(k, v []byte) error {
		if len(k) != len(pLeaves)+32+4 || binary.BigEndian.Uint32(k[len(k)-4:]) != next || len(v)%32 != 0 {
			ok = false
			return errStopScan
		}
		next++
		buf = append(buf, v...)
		return nil
	})
	if next == 0 && err == nil {
		return nil // none
	}
	if err != nil && err != errStopScan || !ok || len(buf) != n*32 {
		if err != nil && err != errStopScan && ctx.Err() == nil { // a read that ended is not a bad checkpoint
			s.log.Warn("leaf checkpoint unreadable; walking the state map instead", "context_hash", h.Short(), "err", err)
		}
		return nil
	}
	acc, err := hashing.AccumulatorOfSorted(buf)
	if err != nil || acc.Root() != h {
		s.log.Warn("leaf checkpoint does not hash to its name; walking the state map instead", "context_hash", h.Short())
		return nil
	}
	return acc
}

// errStopScan ends a scan early.
var errStopScan = fmt.Errorf("store: stop scan")

// writeCheckpoint stores context ctxID's leaf checkpoint of the state
// whose leaves acc holds — the records of the buckets the context does not
// hold yet, then the table — points the context's hint at commit hint
// (nil: leaves the hint as it is) and deletes the context's checkpoints no
// head needs any more (writeCheckpointLocked). One checkpoint is written
// at a time.
func (s *Store) writeCheckpoint(ctx context.Context, ctxID string, acc *hashing.Accumulator, hint *hashing.Digest) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	return s.writeCheckpointLocked(ctx, ctxID, acc, hint, ckptBy{})
}

// ckptBy is who writes a checkpoint, for what it deletes after: the head
// it is of (nil: none), the heads evicted with it (whose checkpoints they
// will be reopened from stay), and the checkpoint the head was opened
// from, when no other head was (the zero digest otherwise; what a store
// shared by several processes deletes).
type ckptBy struct {
	head  *head
	batch []*head
	old   hashing.Digest
}

// writeCheckpointLocked is writeCheckpoint for a caller that holds
// s.ckptMu. After the new table, a store of one process deletes every
// table of the context no head needs (sweepLeafTables); a store shared
// by several processes, whose heads it does not know, deletes only
// by.old.
func (s *Store) writeCheckpointLocked(ctx context.Context, ctxID string, acc *hashing.Accumulator, hint *hashing.Digest, by ckptBy) error {
	h := acc.Root()
	if err := acc.Err(); err != nil {
		return err
	}
	// The generation is read first: a sweep after it moves it, and the
	// table's swap then fails (leafbuckets.go).
	if err := s.withLeafGen(ctx, ctxID, func() (*kv.Batch, error) {
		t, err := s.writeLeafBuckets(ctx, ctxID, acc)
		if err != nil {
			return nil, err
		}
		b := &kv.Batch{Sets: []kv.Record{{Key: keyLeafTable(ctxID, h), Value: t.encode()}}}
		if hint != nil {
			b.Sets = append(b.Sets, kv.Record{Key: keyLeafAt(ctxID), Value: bytes.Clone(hint[:])})
		}
		return b, nil
	}); err != nil {
		return err
	}
	if err := s.deleteLegacyCheckpoint(ctx, h); err != nil {
		return err
	}
	if !s.shared {
		if err := s.sweepLeafTables(ctx, ctxID, h, by); err != nil && ctx.Err() == nil {
			// The checkpoint and the hint are written: what was not
			// swept goes with the context's next checkpoint.
			s.log.Warn("leaf checkpoints not swept", "context", ctxID, "err", err)
		}
		return nil
	}
	if by.old == (hashing.Digest{}) || by.old == h {
		return nil
	}
	return s.deleteCheckpoints(ctx, ctxID, by.old)
}

// sweepLeafTables deletes context ctxID's checkpoint tables that no head
// needs — all but newest, the tables of the commits the context's
// branches and its hint are at, and those other heads than by.head were
// opened from (tablesInUse); none while a head of the context is being
// opened (Store.opening), which may have read one not cached yet — with
// the checkpoints an earlier release kept whole under their names (by.old
// among them), then the bucket records no table left names. Deleting only
// the table a head was opened from left behind one written just before a
// kill -9 (the new table and the hint, then the old one's delete) and one
// two heads shared when the second went without writing its own.
func (s *Store) sweepLeafTables(ctx context.Context, ctxID string, newest hashing.Digest, by ckptBy) error {
	keep, opening := s.tablesInUse(ctxID, by.head, by.batch)
	keep[newest] = true
	branches, err := s.Branches(ctx, ctxID)
	if err != nil {
		return err
	}
	for _, br := range branches {
		c, err := s.commitRecord(ctxID, br.Head)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
			continue // no head opens at a commit that does not read (fsck reports it)
		}
		if err != nil {
			return fmt.Errorf("keep the checkpoint of branch %q: %w", br.Name, err)
		}
		keep[c.ContextHash] = true
	}
	if c := s.hintedCommit(ctx, ctxID); c != nil {
		keep[c.ContextHash] = true
	}
	var gone []hashing.Digest
	if !opening {
		prefix := prefixLeafTables(ctxID)
		if err := kv.ScanKeys(ctx, s.kv, prefix, nil, 0, func(k []byte) error {
			if len(k) == len(prefix)+32 && !keep[hashing.Digest(k[len(prefix):])] {
				gone = append(gone, hashing.Digest(k[len(prefix):]))
			}
			return nil
		}); err != nil {
			return err
		}
		if by.old != (hashing.Digest{}) && !keep[by.old] && !slices.Contains(gone, by.old) {
			gone = append(gone, by.old) // kept whole by an earlier release: no table
		}
	}
	return s.deleteCheckpoints(ctx, ctxID, gone...)
}

// deleteCheckpoints deletes context ctxID's leaf checkpoints of context
// hashes hs — their tables and any kept whole by an earlier release under
// them — then the context's bucket records no table names any more (also
// those of a checkpoint cut short); the caller holds s.ckptMu.
func (s *Store) deleteCheckpoints(ctx context.Context, ctxID string, hs ...hashing.Digest) error {
	if len(hs) > 0 {
		dels := make([][]byte, len(hs))
		for i, h := range hs {
			dels[i] = keyLeafTable(ctxID, h)
		}
		if err := s.kv.Commit(ctx, kv.Batch{Deletes: dels}); err != nil {
			return err
		}
	}
	for _, h := range hs {
		if err := s.deleteLegacyCheckpoint(ctx, h); err != nil {
			return err
		}
	}
	return s.sweepLeafBuckets(ctx, ctxID)
}

// deleteLegacyCheckpoint deletes the records of a leaf checkpoint of
// context hash h kept whole (leaves records), if any.
func (s *Store) deleteLegacyCheckpoint(ctx context.Context, h hashing.Digest) error {
	var dels [][]byte
	if err := kv.ScanKeys(ctx, s.kv, prefixLeaves(h), nil, 0, func(k []byte) error {
		dels = append(dels, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	if len(dels) == 0 {
		return nil
	}
	return s.kv.Commit(ctx, kv.Batch{Deletes: dels})
}

// checkpointHead writes the leaf checkpoint of head h, locked by the
// caller, when its state is big enough and the checkpoint it knows is not
// of its commit. When evicted, it writes none either while that
// checkpoint is the one its context's hint names and the head's entries
// changed since are fewer than a sixteenth of its state (changedSince):
// opening the head again from that checkpoint and the diff costs little
// more than reading its own, and a big head dropped and opened in turn —
// two big contexts in use with one head budget — would otherwise write a
// checkpoint each time (the buckets its changes touched, up to all 256,
// and a table).
func (s *Store) checkpointHead(ctx context.Context, h *head, evicted bool, batch []*head) error {
	if !wantsCheckpoint(h.commit) || h.ckpt == h.commit.ContextHash || h.dropped {
		return nil
	}
	if evicted && h.ckpt != (hashing.Digest{}) && changedSince*h.changed < h.commit.Artifacts+h.commit.Edges {
		if base := s.hintedCommit(ctx, h.ctx); base != nil && base.ContextHash == h.ckpt {
			return nil
		}
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	by := ckptBy{head: h, batch: batch, old: h.ckpt}
	if s.openedFrom(h, by.old, batch) {
		by.old = hashing.Digest{} // another cached head reads its buckets
	}
	if err := s.writeCheckpointLocked(ctx, h.ctx, h.state.LeafSet(), &h.commit.ID, by); err != nil {
		return err
	}
	h.ckpt, h.changed = h.commit.ContextHash, 0
	return nil
}

// openedFrom reports whether a head other than h was opened from (or
// last wrote) h's context's checkpoint of context hash ckpt
// (tablesInUse). The caller holds s.ckptMu.
func (s *Store) openedFrom(h *head, ckpt hashing.Digest, batch []*head) bool {
	if ckpt == (hashing.Digest{}) {
		return false
	}
	inUse, _ := s.tablesInUse(h.ctx, h, batch)
	return inUse[ckpt]
}

// tablesInUse returns the checkpoints of context ctxID that heads other
// than self were opened from (or last wrote) — cached heads, heads
// evicted whose own checkpoints are still to be written (s.evicting), and
// the heads of batch, whose checkpoints are being written with self's —
// and whether a head of the context is being opened (s.opening). The
// caller holds s.ckptMu, under which a head's ckpt changes once it is
// cached.
func (s *Store) tablesInUse(ctxID string, self *head, batch []*head) (inUse map[hashing.Digest]bool, opening bool) {
	inUse = make(map[hashing.Digest]bool)
	uses := func(o *head) {
		if o != self && o.ctx == ctxID && o.ckpt != (hashing.Digest{}) {
			inUse[o.ckpt] = true
		}
	}
	for _, o := range batch {
		uses(o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.heads {
		uses(o)
	}
	for o := range s.evicting {
		uses(o)
	}
	return inUse, s.opening[ctxID] > 0
}

// openingHead notes that a head of context ctxID is being opened, until
// the returned func runs or the caller, holding s.mu, calls
// openedLocked: a checkpoint sweep meanwhile deletes none of the
// context's tables (sweepLeafTables).
func (s *Store) openingHead(ctxID string) (opened func()) {
	s.mu.Lock()
	s.opening[ctxID]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.openedLocked(ctxID)
		s.mu.Unlock()
	}
}

// openedLocked undoes openingHead; the caller holds s.mu.
func (s *Store) openedLocked(ctxID string) {
	if s.opening[ctxID]--; s.opening[ctxID] <= 0 {
		delete(s.opening, ctxID)
	}
}

// changedSince: an evicted head whose entries changed since its
// checkpoint are fewer than 1/changedSince of its state writes no new one
// (checkpointHead).
const changedSince = 16

// checkpointHeads writes the leaf checkpoints that heads lack, each under
// its lock, warning of any it could not write; evicted says the heads
// were just dropped from the cache (checkpointHead).
func (s *Store) checkpointHeads(ctx context.Context, heads []*head, evicted bool) {
	for _, h := range heads {
		h.mu.Lock()
		err := s.checkpointHead(ctx, h, evicted, heads)
		h.mu.Unlock()
		if err != nil {
			s.log.Warn("leaf checkpoint not written", "context", h.ctx, "branch", h.branch, "err", err)
		}
	}
}

// checkpointEvicted writes, in the background, the leaf checkpoints that
// the heads just evicted lack (a big head made by commits has none until
// the store closes), so that reopening one reads a checkpoint rather than
// walking its map. Close waits for it; once the store is closing, Close
// writes the checkpoints of the heads still cached and evicted ones go
// without. Until a head's checkpoint is written it is in s.evicting, so
// that a sweep for another head's checkpoint (sweepLeafTables), which may
// run first, keeps the checkpoint it was opened from. The caller holds
// s.mu.
func (s *Store) checkpointEvicted(heads []*head) {
	if len(heads) == 0 {
		return
	}
	for _, h := range heads {
		s.evicting[h] = true
	}
	written := func() {
		for _, h := range heads {
			delete(s.evicting, h)
		}
	}
	if !s.inBackground(func() {
		s.checkpointHeads(context.Background(), heads, true)
		s.mu.Lock()
		written()
		s.mu.Unlock()
	}) {
		written() // none will be: the store is closing
	}
}

// checkpointCached writes the leaf checkpoints of the cached heads that
// lack one (Close).
func (s *Store) checkpointCached(ctx context.Context) {
	s.mu.Lock()
	heads := make([]*head, 0, len(s.heads))
	for _, h := range s.heads {
		heads = append(heads, h)
	}
	s.mu.Unlock()
	s.checkpointHeads(ctx, heads, false)
}

// leafCheckpoints checks every leaf checkpoint: its records numbered from
// 0 without a gap, and their leaves, sorted, hashing to its name.
func (k *checker) leafCheckpoints(ctx context.Context) error {
	var cur hashing.Digest
	var buf []byte
	next, started := uint32(0), false
	bad := ""
	flush := func() {
		if !started {
			return
		}
		if bad == "" {
			if acc, err := hashing.AccumulatorOfSorted(buf); err != nil {
				bad = err.Error()
			} else if acc.Root() != cur {
				bad = fmt.Sprintf("its %d leaves hash to %s", acc.Len(), acc.Root())
			}
		}
		if bad != "" {
			k.add(Defect{Kind: "checkpoint", ID: cur.String(), Detail: "leaf checkpoint: " + bad + "; it is not used (delete its records, or leave them)"})
		}
		buf, next, bad = buf[:0], 0, ""
	}
	err := k.scanAll(ctx, []byte(pLeaves), func(key, v []byte) error {
		if len(key) != len(pLeaves)+36 {
			k.add(Defect{Kind: "checkpoint", ID: fmt.Sprintf("%q", key), Detail: "malformed leaf checkpoint key"})
			return nil
		}
		h := hashing.Digest(key[len(pLeaves) : len(pLeaves)+32])
		if !started || h != cur {
			flush()
			cur, started = h, true
		}
		if i := binary.BigEndian.Uint32(key[len(key)-4:]); i != next && bad == "" {
			bad = fmt.Sprintf("record %d where %d was due", i, next)
		}
		next++
		buf = append(buf, v...)
		return nil
	}, func(key []byte, why string) {
		k.add(Defect{Kind: "checkpoint", ID: fmt.Sprintf("%q", key), Detail: "leaf checkpoint unreadable: " + why})
	})
	flush()
	return err
}

// leavesSince returns the accumulator of commit c's context hash, its map
// m, built from the checkpoint its context's hint names and the diff of
// that checkpoint's commit's map to c's, with that checkpoint and the
// number of entries the diff changed; or nil when there is no hint, what
// it names is gone or far
// from c (its state less than half of c's, when walking c's map costs
// about as much as the diff), or the leaves do not hash to c's context
// hash (then logged: a hint or a checkpoint that does not check).
func (s *Store) leavesSince(m *mapSource, c *replay.Commit) (*hashing.Accumulator, leafBase) {
	base := s.hintedCommit(m.ctx, m.ctxID)
	if base == nil || base.ID == c.ID || !wantsCheckpoint(base) || !indexed(base) || 2*(base.Artifacts+base.Edges) < c.Artifacts+c.Edges {
		return nil, leafBase{}
	}
	acc := s.readCheckpoint(m.ctx, m.ctxID, base)
	if acc == nil {
		return nil, leafBase{}
	}
	d, err := s.DiffStates(m.ctx, base, c)
	if err != nil {
		return nil, leafBase{}
	}
	if !applyDiff(acc, d) || acc.Len() != c.Artifacts+c.Edges || acc.Root() != c.ContextHash || acc.Err() != nil {
		s.log.Warn("leaf checkpoint and state-map diff do not hash to the commit; walking the state map instead",
			"context", m.ctxID, "commit", c.ID.Short(), "from", base.ID.Short())
		return nil, leafBase{}
	}
	return acc, leafBase{base.ContextHash, d.Len()}
}

// hintedCommit returns the commit context ctxID's checkpoint hint names,
// or nil when there is none or it does not read.
func (s *Store) hintedCommit(ctx context.Context, ctxID string) *replay.Commit {
	v, err := s.kv.Get(ctx, keyLeafAt(ctxID))
	if err != nil || len(v) != len(hashing.Digest{}) {
		return nil
	}
	c, err := s.commitRecord(ctxID, hashing.Digest(v))
	if err != nil {
		return nil
	}
	return c
}

// applyDiff applies to acc, the leaves of a state, what d (a diff of that
// state's map to another's, without trust) changes in them, and reports
// whether every leaf removed was there and every leaf added was not.
func applyDiff(acc *hashing.Accumulator, d *replay.DiffResult) bool {
	leaf := func(id string, v *replay.ArtifactVersion) hashing.Digest {
		return hashing.ArtifactLeaf(id, v.Type, v.Version, v.ContentHash, v.ProducedBy)
	}
	edge := func(e replay.EdgeChange, attrs []byte) hashing.Digest {
		return hashing.EdgeLeaf(e.From, e.Rel, e.To, attrs)
	}
	var gone, added []hashing.Digest
	for _, l := range [][]replay.ArtifactChange{d.Added, d.Removed, d.Changed} {
		for _, c := range l {
			if c.Old != nil {
				gone = append(gone, leaf(c.ID, c.Old))
			}
			if c.New != nil {
				added = append(added, leaf(c.ID, c.New))
			}
		}
	}
	for _, e := range d.EdgesRemoved {
		gone = append(gone, edge(e, e.OldAttrs))
	}
	for _, e := range d.EdgesAdded {
		added = append(added, edge(e, e.NewAttrs))
	}
	for _, e := range d.EdgesChanged {
		gone = append(gone, edge(e, e.OldAttrs))
		added = append(added, edge(e, e.NewAttrs))
	}
	for _, l := range gone {
		if !acc.Remove(l) {
			return false
		}
	}
	return acc.AddBatch(added) == len(added)
}

// leafHints checks every context's checkpoint hint (keyLeafAt): it names,
// in 32 bytes, a commit of that context. (What the commit's checkpoint
// holds is leafCheckpoints' to check; it may be gone, which the hint
// allows.)
func (k *checker) leafHints(ctx context.Context) error {
	return k.scanAll(ctx, []byte(pLeafAt), func(key, v []byte) error {
		ctxID := string(key[len(pLeafAt):])
		if len(v) != len(hashing.Digest{}) {
			k.add(Defect{Kind: "checkpoint", Context: ctxID, ID: fmt.Sprintf("%q", key), Detail: fmt.Sprintf("checkpoint hint of %d bytes, want a 32-byte commit id; it is not used", len(v))})
			return nil
		}
		if _, err := k.s.commitRecord(ctxID, hashing.Digest(v)); err != nil {
			k.add(Defect{Kind: "checkpoint", Context: ctxID, ID: hashing.Digest(v).String(), Detail: fmt.Sprintf("checkpoint hint names a commit that does not read: %v; it is not used", err)})
		}
		return nil
	}, func(key []byte, why string) {
		k.add(Defect{Kind: "checkpoint", ID: fmt.Sprintf("%q", key), Detail: "checkpoint hint unreadable: " + why})
	})
}
