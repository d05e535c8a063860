package store

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/internal/cores"
	"github.com/artifactd/artifactd/store/kv"
)

// Reading a whole state map (a head loaded cold) one node at a time costs
// a driver call per node — about 11,000 for a 100k-artifact context, each
// a lookup through Badger's levels or a round trip to PostgreSQL. A
// prefetch reads it a level at a time instead: the nodes of a level not
// already in memory in parts of prefetchPart keys, one GetMany each, up to
// prefetchWorkers at once — or, for a read on behalf of a client, up to
// readerWorkers.
const (
	prefetchPart    = 1024
	prefetchWorkers = 4
)

// readerWorkers is how many parts of a prefetch a client's read reads at
// once (a view loaded whole for an audit, the map of a view at an old
// commit): half the cores, at least one, and never more than
// prefetchWorkers (each part holds a connection of a PostgreSQL driver's
// pool, which the committer needs too). A read that took every processor
// for its node reads left another context's commit waiting to be
// scheduled: in traces of the hub scenario, the slowest one-artifact
// writes during a deep audit (24–40 ms) each fell in the audit's whole
// load, its four readers running while the committer stood runnable
// (docs/BENCHMARKS.md, "A reader's prefetch leaves the committer a
// processor"). A view at a branch head reads through the head's map,
// with prefetchWorkers.
func readerWorkers() int { return readerWorkersOf(cores.Count()) }

// readerWorkersOf is readerWorkers on n cores.
func readerWorkersOf(n int) int { return min(prefetchWorkers, max(1, n/2)) }

// prefetched is a nodeSource that serves the nodes a prefetch read and
// asks src for any other.
type prefetched struct {
	m   map[hashing.Digest]*trieNode
	src nodeSource
}

func (p *prefetched) node(id hashing.Digest) (*trieNode, error) {
	if n := p.m[id]; n != nil {
		return n, nil
	}
	return p.src.node(id)
}

// prefetchTrie reads every node of the trie at root that is not in memory
// (src's own nodes when it is a trieWriter, the node cache) a level at a
// time, up to workers parts at once, checks and decodes each, caches it,
// and returns a source serving them, for a walk of the whole trie.
func (s *Store) prefetchTrie(ctx context.Context, src nodeSource, root trieChild, workers int) (nodeSource, error) {
	return s.prefetchFrom(ctx, src, root, nil, workers)
}

// prefetchFrom is prefetchTrie for a walk of the keys not less than from
// (nil: every key; walkFrom): it reads the nodes that walk reads and
// none whose keys all sort before from.
func (s *Store) prefetchFrom(ctx context.Context, src nodeSource, root trieChild, from []byte, workers int) (nodeSource, error) {
	p := &prefetched{m: make(map[hashing.Digest]*trieNode), src: src}
	if root.count == 0 {
		return p, nil
	}
	type bound struct {
		id   hashing.Digest
		from []byte
	}
	level := []bound{{root.id, from}}
	for len(level) > 0 {
		ids := make([]hashing.Digest, len(level))
		for i, b := range level {
			ids[i] = b.id
		}
		if err := s.readLevel(ctx, p, ids, workers); err != nil {
			return nil, err
		}
		var next []bound
		for _, b := range level {
			n := p.m[b.id]
			if n.leaf {
				continue
			}
			first, from, reach := fromChild(n, b.from)
			if !reach {
				continue
			}
			for c := first; c < len(n.children); c++ {
				if ref := n.children[c]; ref.count > 0 {
					next = append(next, bound{ref.id, childFrom(c, first, from)})
				}
			}
		}
		level = next
	}
	return p, nil
}

// prefetchDiff reads, a level at a time as prefetchTrie does, the nodes
// trieDiff of the tries at a and b will read — both sides' nodes where
// they differ, nothing below a subtree they share — and returns a source
// serving them: a diff of two maps that share little (two contexts' runs)
// then costs a driver call per level and part rather than one per node.
// It follows the diff's own steps (diffStep).
func (s *Store) prefetchDiff(ctx context.Context, src nodeSource, a, b trieChild, workers int) (nodeSource, error) {
	p := &prefetched{m: make(map[hashing.Digest]*trieNode), src: src}
	if a == b {
		return p, nil // the diff reads nothing
	}
	type pair struct{ a, b trieChild }
	level := []pair{{a, b}}
	for len(level) > 0 {
		ids := make([]hashing.Digest, 0, 2*len(level))
		for _, pr := range level {
			for _, c := range []trieChild{pr.a, pr.b} {
				if c.count > 0 {
					ids = append(ids, c.id)
				}
			}
		}
		if err := s.readLevel(ctx, p, ids, workers); err != nil {
			return nil, err
		}
		var next []pair
		for _, pr := range level {
			na, nb := p.m[pr.a.id], p.m[pr.b.id]
			if pr.a.count == 0 {
				na = nil
			}
			if pr.b.count == 0 {
				nb = nil
			}
			if ca, cb, aligned := diffStep(pr.a, na, pr.b, nb); aligned {
				for i := range ca {
					if ca[i] != cb[i] {
						next = append(next, pair{ca[i], cb[i]})
					}
				}
				continue
			}
			for _, n := range []*trieNode{na, nb} { // read whole
				if n == nil || n.leaf {
					continue
				}
				for _, c := range n.children {
					if c.count > 0 {
						next = append(next, pair{a: c})
					}
				}
			}
		}
		level = next
	}
	return p, nil
}

// diffWindow is the most entries, both sides together, a diff of two
// maps reads ahead at once (diffWindows).
const diffWindow = 64 << 10

// diffWindows calls fn for every key whose value differs between the
// tries at a and b, in key order, as trieDiff does, through the store
// under ctx, up to workers parts at once — a window at a time, so that
// what it holds of the two maps is bounded whatever their size. A pair
// of subtrees of at most diffWindow entries together is read ahead
// (prefetchDiff), diffed and let go before the next. A larger pair is
// gone down child by child where the two align (diffStep); where they do
// not — one side a leaf or empty, or the sides share nothing below —
// each side is walked a window at a time (rangeWalk) and the two walks
// are merged in key order. A legacy subtree (format 1, in hash order) is
// read whole, as trieDiff reads it.
func (s *Store) diffWindows(ctx context.Context, a, b trieChild, workers int, fn func(key, old, new []byte) error) error {
	if a == b {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.count+b.count > s.diffWindow {
		na, nb, err := nodePair(s, a, b)
		if err != nil {
			return err
		}
		if ca, cb, aligned := diffStep(a, na, b, nb); aligned {
			for i := range ca {
				if err := s.diffWindows(ctx, ca[i], cb[i], workers, fn); err != nil {
					return err
				}
			}
			return nil
		}
		if (na == nil || !na.legacy) && (nb == nil || !nb.legacy) {
			return s.mergeWalks(ctx, a, b, workers, fn)
		}
	}
	src, err := s.prefetchDiff(ctx, s, a, b, workers)
	if err != nil {
		return err
	}
	return trieDiff(src, a, b, fn)
}

// mergeWalks diffs the subtrees at a and b (ordered tries) by walking
// both in key order a window at a time and merging the two walks: the
// larger side pushes its entries, the other is pulled one at a time. It
// ends at the first error — fn's, a failed read of either side, or ctx's
// once it ends — and returns it, calling fn no more after it.
func (s *Store) mergeWalks(ctx context.Context, a, b trieChild, workers int, fn func(key, old, new []byte) error) error {
	push, pull, swapped := a, b, false
	if b.count > a.count {
		push, pull, swapped = b, a, true
	}
	// emit reports a key whose entries differ: p from the pushed side, q
	// from the pulled one (nil: absent).
	emit := func(k, p, q []byte) error {
		if swapped {
			return fn(k, q, p)
		}
		return fn(k, p, q)
	}
	var pullErr error
	next, stop := iter.Pull2(s.entries(ctx, pull, workers, &pullErr))
	defer stop()
	var kq, vq []byte
	var more bool
	// advance pulls the next entry of the pulled side; a failed read
	// there ends the merge.
	advance := func() error {
		if kq, vq, more = next(); !more {
			return pullErr
		}
		return nil
	}
	err := advance()
	w := s.newRangeWalk(ctx, s, workers, nil, func(kp, vp []byte) bool {
		for err == nil && more && bytes.Compare(kq, kp) < 0 {
			if err = emit(kq, nil, vq); err == nil {
				err = advance()
			}
		}
		switch {
		case err != nil:
		case more && bytes.Equal(kq, kp):
			if !bytes.Equal(vp, vq) {
				err = emit(kp, vp, vq)
			}
			if err == nil {
				err = advance()
			}
		default:
			err = emit(kp, vp, nil)
		}
		return err == nil
	})
	var walkErr error
	if err == nil {
		_, walkErr = w.run(push, nil)
	}
	for err == nil && walkErr == nil && w.ended == nil && more {
		if err = emit(kq, nil, vq); err == nil {
			err = advance()
		}
	}
	for _, e := range []error{err, walkErr, w.ended} {
		if e != nil {
			return e
		}
	}
	return nil
}

// entries yields every entry below ref (an ordered trie), in key order,
// read a window at a time (rangeWalk). A failed read or the end of ctx
// ends it; once it has ended, *errp holds why (nil: every entry yielded,
// or the caller stopped).
func (s *Store) entries(ctx context.Context, ref trieChild, workers int, errp *error) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		if ref.count == 0 {
			return
		}
		w := s.newRangeWalk(ctx, s, workers, nil, yield)
		_, err := w.run(ref, nil)
		if err == nil {
			err = w.ended
		}
		*errp = err
	}
}

// readLevel puts into p the nodes ids names that it lacks: those in
// memory already (the unwritten nodes of p's source when it is a
// trieWriter, the node cache), the rest read in parts, up to workers at
// once.
func (s *Store) readLevel(ctx context.Context, p *prefetched, ids []hashing.Digest, workers int) error {
	tw, _ := p.src.(*trieWriter)
	var missing []hashing.Digest
	asked := make(map[hashing.Digest]bool, len(ids))
	for _, id := range ids {
		if p.m[id] != nil || asked[id] {
			continue
		}
		if tw != nil && tw.nodes[id] != nil {
			p.m[id] = tw.nodes[id]
		} else if n, ok := s.nodes.get(id); ok {
			p.m[id] = n
		} else {
			asked[id] = true
			missing = append(missing, id)
		}
	}
	return s.readNodes(ctx, missing, p.m, workers)
}

// cachedNode returns node id from the node cache, or nil.
func (s *Store) cachedNode(id hashing.Digest) *trieNode {
	n, _ := s.nodes.get(id)
	return n
}

// readNodesFunc is readNodes, up to workers parts at once, as a
// trieWriter's read for warm.
func (s *Store) readNodesFunc(ctx context.Context, workers int) func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) {
	return func(ids []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		m := make(map[hashing.Digest]*trieNode, len(ids))
		return m, s.readNodes(ctx, ids, m, workers)
	}
}

// readNodes reads ids with readMany, up to workers parts at once, and
// adds the checked, decoded nodes to m (and to the node cache). On an
// error m is unchanged.
func (s *Store) readNodes(ctx context.Context, ids []hashing.Digest, m map[hashing.Digest]*trieNode, workers int) error {
	nodes, err := readMany(ctx, s, ids, workers, keyNode, func(id hashing.Digest, raw []byte) (*trieNode, error) {
		if raw == nil {
			return nil, missingNode(id)
		}
		return checkedNode(id, raw)
	})
	if err != nil {
		return err
	}
	for i, id := range ids {
		m[id] = nodes[i]
		s.nodes.put(id, nodes[i])
	}
	return nil
}

// readMany reads the records keyOf names for ids — content-addressed
// records the store never deletes, read with kv.GetSame so that they do
// not wait behind writes in flight — in parts of s.readPart, up to
// workers parts at once, and returns what check makes of each (raw nil:
// missing), in the order of ids.
//
// One part, or one worker, is read on the caller's goroutine: a small
// read (a diff of two maps a commit apart reads a node or two a level)
// then starts no goroutine, whose stack would grow anew through the
// driver's calls each time.
func readMany[T any](ctx context.Context, s *Store, ids []hashing.Digest, workers int, keyOf func(hashing.Digest) []byte, check func(hashing.Digest, []byte) (T, error)) ([]T, error) {
	out := make([]T, len(ids))
	// readIn reads part into res under ctx.
	readIn := func(ctx context.Context, part []hashing.Digest, res []T) error {
		keys := make([][]byte, len(part))
		for i, id := range part {
			keys[i] = keyOf(id)
		}
		vals, err := kv.GetSame(ctx, s.kv, keys)
		if err != nil {
			return err
		}
		for i, id := range part {
			if res[i], err = check(id, vals[i]); err != nil {
				break
			}
		}
		if err == nil {
			return nil
		}
		// Read afresh before calling a record corrupt (sameChecked, for a
		// part).
		if vals, err = s.kv.GetMany(ctx, keys); err != nil {
			return err
		}
		for i, id := range part {
			if res[i], err = check(id, vals[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if workers <= 1 || len(ids) <= s.readPart {
		// Under a context of the read's own, as a part read by a worker
		// is: the driver sees the same.
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for start := 0; start < len(ids); start += s.readPart {
			if err := readIn(rctx, ids[start:min(start+s.readPart, len(ids))], out[start:]); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for start := 0; start < len(ids) && gctx.Err() == nil; start += s.readPart {
		part, res := ids[start:min(start+s.readPart, len(ids))], out[start:]
		g.Go(func() error { return readIn(gctx, part, res) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before every part was read
	}
	return out, nil
}

// upgradeStateMap returns the root of the ordered state map holding the
// entries of the legacy one at root (format 1), built by tw, or root
// itself when it is not legacy. The legacy trie is read a level at a time,
// as a cold head's is; its nodes stay, for the commits that name them.
func (s *Store) upgradeStateMap(tw *trieWriter, ctxID string, root trieChild) (trieChild, error) {
	legacy, err := tw.isLegacy(root)
	if err != nil || !legacy {
		return root, err
	}
	start := time.Now()
	src, err := s.prefetchTrie(context.Background(), tw, root, prefetchWorkers)
	if err != nil {
		return trieChild{}, fmt.Errorf("read legacy state map: %w", err)
	}
	next, err := tw.rebuild(root, src)
	if err != nil {
		return trieChild{}, fmt.Errorf("upgrade legacy state map: %w", err)
	}
	s.log.Info("state map rebuilt in the ordered layout", "context", ctxID, "entries", root.count,
		"legacy_root", root.id.Short(), "root", next.id.Short(), "elapsed", time.Since(start).Round(time.Millisecond))
	return next, nil
}
