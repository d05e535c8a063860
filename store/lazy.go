package store

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// mapSource is the state map of one commit read as the stored state under
// a lazy head (graph.Source) and as its stored trust index
// (graph.TrustSource): every lookup is a walk down the trie through the
// store's node cache, every whole read a walk of one key prefix. It never
// changes; the first read that fails is kept (Err), and the read reports
// absence.
type mapSource struct {
	s     *Store
	ctxID string
	// ctx is the read's context for a view at an old commit (openAt): a
	// walk of the map stops at its next window once ctx ends, and the
	// view reports ctx's error as a failed read. A head's map reads under
	// context.Background: it outlives any one read.
	ctx context.Context
	// workers is how many parts of its nodes a read of the map reads at
	// once (prefetchWorkers; readerWorkers for a view at an old commit,
	// a client's read): its scans, read-ahead and batched lookups.
	workers int
	root    trieChild
	types   map[string]int
	// revApart is set when the map holds no reverse edges: they are in
	// the context's reverse index (format 4; In).
	revApart bool
	err      atomic.Pointer[error]
	// ahead is set while the committer decides a large request on the
	// head (readAhead); read only once stored.
	ahead atomic.Pointer[readWindow]
}

// readWindow is what the map holds for one request while it is decided:
// the nodes its lookups will need, read ahead a level at a time, and,
// when those spread over the map (memoReads), what its lookups found
// (nil: absent) — deciding a request asks for most entries more than
// once (an artifact and its trust entry by the op putting it, by the
// links naming it, by the trust update), and the map never changes.
type readWindow struct {
	nodes map[hashing.Digest]*trieNode
	seen  *lookupMemo // nil: lookups walk the map each time
	// later, when not nil, reads the nodes of the request's later ops
	// while its first ones are decided (readAhead).
	later *laterReads
}

// find returns node id if the window holds it: read before the decision
// began, or by a part of the later reads already done — or, with wait,
// by the part being read now, which it waits for (not for the parts
// after it: a lookup outside the request, another reader's or the
// decision's own, waits for one part at most). Nil when the window does
// not hold it.
func (win *readWindow) find(id hashing.Digest, wait bool) *trieNode {
	if win.later != nil {
		if n := win.later.find(id, wait); n != nil {
			return n
		}
	}
	return win.nodes[id]
}

// laterReads reads the nodes of a big request's later ops a part at a
// time, in the order of the ops, from a goroutine of its own, while the
// committer decides the first ones (mapSource.readAhead).
type laterReads struct {
	// parts[i] is what the i-th part read (nil if it failed or the
	// reads were stopped before it): every node on the paths of its
	// keys, those the parts before it read included. It is set before
	// done counts it and ready[i] is closed, and never after.
	parts []map[hashing.Digest]*trieNode
	ready []chan struct{}
	done  atomic.Int32 // the parts set so far
	stop  context.CancelFunc
	ended chan struct{} // closed when the goroutine returns
	// err is the first read that failed (not one stopped), set before
	// ended is closed.
	err  error
	once sync.Once
}

// find returns node id from the parts read, the latest first (the one
// whose keys the decision is at, most often); with wait, from the part
// being read, once it is.
func (l *laterReads) find(id hashing.Digest, wait bool) *trieNode {
	done := int(l.done.Load())
	for i := done - 1; i >= 0; i-- {
		if n := l.parts[i][id]; n != nil {
			return n
		}
	}
	if !wait || done == len(l.parts) {
		return nil
	}
	<-l.ready[done]
	return l.parts[done][id]
}

// finish stops the reads, waits for their goroutine and returns the
// first of them that failed. It may be called more than once.
func (l *laterReads) finish() error {
	l.once.Do(func() {
		l.stop()
		<-l.ended
	})
	return l.err
}

// lookupMemo is what a window of a map's lookups found, by key, up to max
// keys, first come first kept: readers of the head look up through the
// same map during the window and fill it too. It holds the values'
// nodes (their entries) until the window ends, evicted from the node
// cache or not; max bounds that. Safe for concurrent use.
type lookupMemo struct {
	mu   sync.RWMutex
	vals map[string][]byte // nil: the key is absent
	max  int
}

// memoMaxKeys is the most keys a memo keeps, whatever the request's size:
// a commit of 5,000 artifacts each with a link names about 30,000.
const memoMaxKeys = 1 << 18

// newLookupMemo returns an empty memo for the lookups of a request whose
// read-ahead names keys keys: room for them and for as many again (the
// entries a decision finds on its own, a producer's or a definition's),
// at most memoMaxKeys.
func newLookupMemo(keys int) *lookupMemo {
	room := min(2*keys+1024, memoMaxKeys)
	return &lookupMemo{vals: make(map[string][]byte, min(keys, room)), max: room}
}

// lookup returns what the memo holds for key, and whether it holds it.
func (l *lookupMemo) lookup(key []byte) ([]byte, bool) {
	l.mu.RLock()
	v, ok := l.vals[string(key)]
	l.mu.RUnlock()
	return v, ok
}

// keep records that key holds v (nil: absent).
func (l *lookupMemo) keep(key, v []byte) {
	l.mu.Lock()
	if len(l.vals) < l.max {
		l.vals[string(key)] = v
	}
	l.mu.Unlock()
}

// node reads a trie node: from the nodes read ahead, else through the
// store's node cache.
func (m *mapSource) node(id hashing.Digest) (*trieNode, error) {
	if win := m.ahead.Load(); win != nil {
		if n := win.find(id, false); n != nil {
			return n, nil
		}
		if win.later != nil {
			// Not read yet: a node the cache holds needs no wait; one the
			// later reads will bring is not read twice.
			if n := m.s.cachedNode(id); n != nil {
				return n, nil
			}
			if n := win.find(id, true); n != nil {
				return n, nil
			}
		}
	}
	return m.s.node(id)
}

// cachedNode returns node id if it was read ahead or is in the node
// cache, else nil.
func (m *mapSource) cachedNode(id hashing.Digest) *trieNode {
	if win := m.ahead.Load(); win != nil {
		if n := win.find(id, false); n != nil {
			return n
		}
	}
	return m.s.cachedNode(id)
}

// mapSource returns the state map the head's state reads through, or nil
// when the state is whole.
func (hf *headFork) mapSource() *mapSource {
	m, _ := hf.view().Source().(*mapSource)
	return m
}

// readAheadMin is the number of ops from which the committer reads a
// request's lookups ahead.
const readAheadMin = 64

// memoReads: a request's lookups are memoized (readWindow.seen) when their
// paths spread over at least one node for every memoReads keys. Walks
// that share a few nodes stay in the processor's caches and cost less
// than keeping their answers; walks spread over a big map miss them at
// every level. At a million artifacts, a commit linking 5,000 new ones to
// random earlier ones walks about 5,000 nodes for 30,000 keys and decides
// in 68–73 ms with the memo against 83–99 without; one linking each to
// the artifact at half its index walks a few hundred, and decides 2–7 ms
// faster without (BenchmarkBulkAtMillion and the commits building its
// context, docs/BENCHMARKS.md).
const memoReads = 16

// aheadPart is the most keys of a request readAhead reads before the
// decision begins; the rest it reads in parts of as many while the
// decision goes on.
const aheadPart = 4096

// readAhead reads, a level at a time, the nodes on the paths of the
// entries ops will look up (their artifacts, tombstones, trust entries
// and edges, both ways), so that deciding them reads memory rather than
// one node at a time from the database; done drops them. A commit of
// thousands of ops into a map bigger than the node cache otherwise waits
// on a read for nearly every lookup. When the paths spread over many
// nodes (memoReads), the map also keeps what its lookups find until done
// (seen): a decision asks for most entries several times — a
// 5,000-artifact commit with a link each made about 88,000 lookups for
// 30,000 keys.
//
// Only the nodes of the first aheadPart keys are read before readAhead
// returns: the decision goes through the ops in order, and the nodes of
// the later ones are read meanwhile, a part at a time, by a goroutine of
// their own (laterReads), so that the reads use the processor the
// decision leaves idle. A lookup that needs a node not read yet waits
// for the part being read rather than read the node twice — for that
// part only, so that a lookup outside the request (another reader's)
// waits for one part at most. The committer stops the reads once the
// request is decided (settleReads), and a read of them that failed
// refuses it as a failure of the first part does; done drops what they
// read.
func (m *mapSource) readAhead(ops []graph.Op) (done func(), err error) {
	keys := m.aheadKeys(ops)
	first := keys
	if part := m.s.aheadPart; len(keys) > 2*part {
		first = keys[:part]
	}
	w := newTrieWriter(m.s)
	if err := w.warm(m.root, first, m.s.cachedNode, m.s.readNodesFunc(m.ctx, m.workers)); err != nil {
		return func() {}, err
	}
	if len(w.read) == 0 {
		return func() {}, nil
	}
	win := &readWindow{nodes: w.read}
	if len(w.read)*memoReads >= len(first) {
		win.seen = newLookupMemo(len(keys))
	}
	if len(first) < len(keys) {
		win.later = m.readLater(keys[len(first):], w.read)
	}
	m.ahead.Store(win)
	return func() {
		m.ahead.Store(nil)
		if win.later != nil {
			win.later.finish()
		}
	}, nil
}

// settleReads stops the reads of the request's later keys, if any, and
// waits for them (the decision is made; what they read stays in the
// window until done), and returns the first that failed: the request is
// refused then, as when the first part fails.
func (m *mapSource) settleReads() error {
	if win := m.ahead.Load(); win != nil && win.later != nil {
		return win.later.finish()
	}
	return nil
}

// aheadKeys are the keys readAhead reads the paths of for ops, in the
// order of the ops.
func (m *mapSource) aheadKeys(ops []graph.Op) []trieMut {
	var keys []trieMut
	add := func(k []byte) { keys = append(keys, trieMut{key: k}) }
	for _, op := range ops {
		switch op.Op {
		case graph.OpPut, graph.OpDelete:
			add(tkArtifact(op.ID))
			add(tkTomb(op.ID))
			add(tkTrust(op.ID))
		case graph.OpLink, graph.OpUnlink:
			k := graph.EdgeKey{From: op.From, Rel: op.Rel, To: op.To}
			add(tkEdge(k))
			if !m.revApart {
				add(tkRev(k))
			}
			add(tkArtifact(op.To))
			add(tkTrust(op.To))
		}
	}
	return keys
}

// readLater starts reading the nodes on the paths of keys in parts of
// Store.aheadPart keys (the last one takes the rest), each a level at a
// time like readAhead's first; first is what that one read. A read that
// fails stops them (finish returns it); the lookups that needed their
// nodes read them themselves.
func (m *mapSource) readLater(keys []trieMut, first map[hashing.Digest]*trieNode) *laterReads {
	part := m.s.aheadPart
	n := max(1, len(keys)/part)
	ctx, stop := context.WithCancel(m.ctx)
	l := &laterReads{parts: make([]map[hashing.Digest]*trieNode, n), ready: make([]chan struct{}, n), stop: stop, ended: make(chan struct{})}
	for i := range l.ready {
		l.ready[i] = make(chan struct{})
	}
	read := m.s.readNodesFunc(ctx, m.workers)
	go func() {
		defer close(l.ended)
		i := 0
		defer func() {
			for ; i < n; i++ {
				close(l.ready[i]) // stopped: the parts left hold nothing
			}
		}()
		// The nodes read so far (the branches the parts share, most
		// often) are not read again.
		cached := func(id hashing.Digest) *trieNode {
			if nd := first[id]; nd != nil {
				return nd
			}
			for j := i - 1; j >= 0; j-- {
				if nd := l.parts[j][id]; nd != nil {
					return nd
				}
			}
			return m.s.cachedNode(id)
		}
		for ; i < n; i++ {
			hi := (i + 1) * part
			if i == n-1 {
				hi = len(keys)
			}
			w := newTrieWriter(m.s)
			if err := w.warm(m.root, keys[i*part:hi], cached, read); err != nil {
				if ctx.Err() == nil {
					l.err = err
				}
				return
			}
			l.parts[i] = w.read
			l.done.Add(1)
			close(l.ready[i])
		}
	}()
	return l
}

// newMapSource returns the source of the state map of commit c of
// context ctxID, whose record must carry its index (or whose map is
// empty), read under ctx (mapSource.ctx): a read's context for a view,
// context.Background for a head.
func newMapSource(ctx context.Context, s *Store, ctxID string, c *replay.Commit) *mapSource {
	m := &mapSource{s: s, ctxID: ctxID, ctx: ctx, workers: prefetchWorkers, root: trieChild{id: c.Root, count: c.RootCount}, revApart: true}
	if c.Index != nil {
		m.types = c.Index.Types
		m.revApart = c.Index.ReverseApart
	}
	return m
}

// countsOf returns the sizes of the state after commit c and of its
// trust index, from its record (zero for an empty map without an index).
func countsOf(c *replay.Commit) (graph.Counts, graph.TrustCounts) {
	x := c.Index
	if x == nil {
		return graph.Counts{}, graph.TrustCounts{}
	}
	return graph.Counts{Artifacts: c.Artifacts, Tombstones: x.Tombstones, Edges: c.Edges},
		graph.TrustCounts{Entries: c.Artifacts, Roots: x.PoisonRoots, Quarantined: x.Quarantined}
}

// indexed reports whether commit c's state map can be read lazily: it
// holds the index (format 3), or nothing at all.
func indexed(c *replay.Commit) bool { return c.Index != nil || c.RootCount == 0 }

// fail keeps the first failed read.
func (m *mapSource) fail(err error) {
	m.err.CompareAndSwap(nil, &err)
}

// Err returns the first failed read, or nil.
func (m *mapSource) Err() error {
	if p := m.err.Load(); p != nil {
		return *p
	}
	return nil
}

// get looks key up, keeping a failure.
func (m *mapSource) get(key []byte) []byte {
	var seen *lookupMemo
	if win := m.ahead.Load(); win != nil {
		seen = win.seen
	}
	if seen != nil {
		if v, ok := seen.lookup(key); ok {
			return v
		}
	}
	v, err := trieGet(m, m.root, key)
	if err != nil {
		m.fail(err)
		return nil
	}
	if seen != nil {
		seen.keep(key, v)
	}
	return v
}

// scan calls fn for every entry whose key starts with prefix, in key
// order, until fn returns false; a failure is kept (walk).
func (m *mapSource) scan(prefix []byte, fn func(k, v []byte) bool) {
	m.walk(prefix, prefix, fn)
}

// walk calls fn for the entries whose keys start with prefix and sort at
// or after from, in key order, until fn returns false; a failure is
// kept. It is the one walk of a key range: a page from a cursor, an
// artifact's edges, every artifact. It descends to from's place
// (skipping, unread, what sorts before it) and goes on a window at a
// time: a subtree of at most scanDirect entries is walked through the
// node cache, a larger one is read ahead first, a level at a time
// (prefetchFrom). Windows start at scanDirect entries and double, up to
// scanWindow, so a page that fills within its first entries reads about
// what it yields, and a long walk (a filter that matches little, a whole
// list) reads in batches — the next sibling's while this one's entries
// are yielded, so that its reads and its caller's work overlap (the ids
// of a million artifacts: 1.40–1.58 s → 1.29–1.32 s). It stops once
// m.ctx ends, checked at every window and every afterCheck entries.
func (m *mapSource) walk(prefix, from []byte, fn func(k, v []byte) bool) {
	if bytes.Compare(from, prefix) < 0 {
		from = prefix // the least key that starts with prefix
	}
	w := m.s.newRangeWalk(m.ctx, m, m.workers, prefix, fn)
	sub, err := triePrefixRoot(m, m.root, prefix)
	if err == nil && sub.count > 0 {
		_, err = w.run(sub, from)
	}
	if err == nil {
		err = w.ended
	}
	if err != nil {
		m.fail(err)
	}
}

// scanWindow is the most entries a walk reads ahead at once; a part of at
// most scanDirect entries (an artifact's edges, most often, or the first
// part of a page) is walked through the node cache without reading ahead.
const (
	scanWindow = 32 << 10
	scanDirect = 256
)

// afterCheck is how many entries a walk yields, or a diff finds, between
// two looks at its context (everyCheck): a filtered page whose filter
// matches little may walk far within one window.
const afterCheck = 1024

// rangeWalk is one walk of a key range under way (mapSource.walk, a
// side of a diff): it reads through src, and ahead through the store,
// under ctx, up to workers parts at once.
type rangeWalk struct {
	s       *Store
	src     nodeSource
	ctx     context.Context
	workers int
	prefix  []byte
	fn      func(k, v []byte) bool
	// window is the most entries the walk's next read ahead covers.
	window int
	// check looks at ctx every afterCheck entries; ended is ctx's error
	// once it found it ended.
	check func() error
	ended error
	// next is the sibling walked after the subtree being walked (zero:
	// none), and ahead the read of its nodes under way while this one's
	// entries are yielded (nil: none).
	next  trieChild
	ahead *partRead
	// readAhead counts the parts whose nodes were read while the part
	// before them was yielded. Only a test reads it: what a driver sees
	// of the overlap depends on when the read's goroutine is scheduled
	// (a test counting the reads under way while entries were yielded
	// saw 0 to 5 of them over six runs of one walk), the count does not.
	readAhead int
}

// partRead is the read ahead of the nodes of one part of a walk
// (prefetchFrom), made while the walk yields the part before it.
type partRead struct {
	ref  trieChild
	done chan struct{}
	src  nodeSource
	err  error
}

// readPart starts reading the nodes of ref, a part the walk reaches next.
func (w *rangeWalk) readPart(ref trieChild) {
	r := &partRead{ref: ref, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.src, r.err = w.s.prefetchFrom(w.ctx, w.src, ref, nil, w.workers)
	}()
	w.ahead = r
}

// takePart returns the nodes of ref read ahead, or false when no read of
// them was made; a read of another part (none is) is waited for and
// dropped.
func (w *rangeWalk) takePart(ref trieChild, from []byte) (nodeSource, bool, error) {
	r := w.ahead
	if r == nil {
		return nil, false, nil
	}
	w.ahead = nil
	<-r.done
	if r.ref != ref || from != nil {
		return nil, false, nil
	}
	return r.src, true, r.err
}

// run walks the entries below ref not less than from (walk), then waits
// for a read ahead still under way, so that none outlives the walk.
func (w *rangeWalk) run(ref trieChild, from []byte) (bool, error) {
	more, err := w.walk(ref, from)
	if r := w.ahead; r != nil {
		w.ahead = nil
		<-r.done
	}
	return more, err
}

// newRangeWalk returns a walk of the keys under prefix through src that
// calls fn, its first window scanDirect entries.
func (s *Store) newRangeWalk(ctx context.Context, src nodeSource, workers int, prefix []byte, fn func(k, v []byte) bool) *rangeWalk {
	return &rangeWalk{s: s, src: src, ctx: ctx, workers: workers, prefix: prefix, fn: fn, window: scanDirect, check: everyCheck(ctx)}
}

// walk walks the entries below ref not less than from (nil: all), as
// mapSource.walk does; it reports false once the walk is over (fn said
// so, a key passed the prefix, or the context ended).
func (w *rangeWalk) walk(ref trieChild, from []byte) (bool, error) {
	if err := w.ctx.Err(); err != nil {
		return false, err
	}
	if ref.count > w.window { // a branch (a leaf holds at most maxLeaf): go down
		n, err := w.src.node(ref.id)
		if err != nil {
			return false, err
		}
		if !n.leaf {
			first, from, reach := fromChild(n, from)
			if !reach {
				return true, nil
			}
			for c := first; c < len(n.children); c++ {
				if n.children[c].count == 0 {
					continue
				}
				w.next = trieChild{}
				for d := c + 1; d < len(n.children); d++ {
					if n.children[d].count > 0 {
						w.next = n.children[d]
						break
					}
				}
				if more, err := w.walk(n.children[c], childFrom(c, first, from)); !more || err != nil {
					return more, err
				}
			}
			return true, nil
		}
	}
	src := w.src
	window := min(2*w.window, scanWindow)
	if ref.count > scanDirect {
		var err error
		var ok bool
		if src, ok, err = w.takePart(ref, from); ok {
			w.readAhead++
		} else {
			src, err = w.s.prefetchFrom(w.ctx, w.src, ref, from, w.workers)
		}
		if err != nil {
			return false, err
		}
		// While this part's entries are yielded, the next sibling's
		// nodes are read when the walk will read it whole as one part
		// too: the reads of a long walk then overlap its yields.
		if next := w.next; next.count > scanDirect && next.count <= window {
			w.readPart(next)
		}
	}
	n, err := src.node(ref.id)
	if err != nil {
		return false, err
	}
	w.window = window
	return walkFrom(src, n, w.prefix, from, w.each)
}

// each yields one entry, looking at the context every afterCheck.
func (w *rangeWalk) each(k, v []byte) bool {
	if w.ended = w.check(); w.ended != nil {
		return false
	}
	return w.fn(k, v)
}

// Artifact returns id's metadata (no Data), or nil.
func (m *mapSource) Artifact(id string) *graph.Artifact {
	v := m.get(tkArtifact(id))
	if v == nil {
		return nil
	}
	av, err := decodeArtifactVal(v)
	if err != nil {
		m.fail(fmt.Errorf("artifact %q: %w", id, err))
		return nil
	}
	return av.artifact(id)
}

// Tombstone returns the last version of deleted id, or 0.
func (m *mapSource) Tombstone(id string) int64 {
	v := m.get(tkTomb(id))
	if v == nil {
		return 0
	}
	ver, err := decodeTombVal(v)
	if err != nil {
		m.fail(fmt.Errorf("tombstone %q: %w", id, err))
		return 0
	}
	return ver
}

// Edge returns the edge of key k, or nil.
func (m *mapSource) Edge(k graph.EdgeKey) *graph.Edge {
	v := m.get(tkEdge(k))
	if v == nil {
		return nil
	}
	return edgeOf(k, v)
}

// edgeOf returns the edge of key k whose stored value is v.
func edgeOf(k graph.EdgeKey, v []byte) *graph.Edge {
	return &graph.Edge{From: k.From, Rel: k.Rel, To: k.To, Attrs: bytes.Clone(decodeEdgeVal(v))}
}

// Out returns the edges leaving id.
func (m *mapSource) Out(id string) []*graph.Edge {
	return m.edgesUnder(append(append([]byte{'e'}, id...), 0), splitEdgeKey)
}

// In returns the edges arriving at id: in a map of format 3 read from
// their 'r' entries; otherwise the context's reverse index names every
// edge that ever arrived at id, on any branch, and those the map holds
// are id's (looked up together, by relation and source: trieGetMany). An id the map
// holds no artifact of has none (a state has no dangling edge), and is
// answered without reading the index: a commit's cycle check asks for
// the dependents of each new artifact it links.
func (m *mapSource) In(id string) []*graph.Edge {
	if !m.revApart {
		return m.edgesUnder(append(append([]byte{'r'}, id...), 0), splitRevKey)
	}
	if m.get(tkArtifact(id)) == nil {
		return nil
	}
	prefix := prefixRev(m.ctxID, id)
	var keys []graph.EdgeKey
	err := m.s.kv.Scan(m.ctx, prefix, nil, 0, func(k, v []byte) error {
		if _, err := revTarget(m.ctxID, k); err != nil {
			return err
		}
		return decodeRevVal(id, v, func(e graph.EdgeKey) { keys = append(keys, e) })
	})
	if err != nil {
		m.fail(fmt.Errorf("read the reverse index of %q: %w", id, err))
		return nil
	}
	// Records of several commits (branches, an edge linked again after
	// an unlink) may name an edge twice.
	slices.SortFunc(keys, compareRev)
	keys = slices.Compact(keys)
	tks := make([][]byte, len(keys))
	for i, k := range keys {
		tks[i] = tkEdge(k)
	}
	// A hub's edges are thousands of lookups: one descent for all of
	// them, each level's uncached nodes read in one batch.
	vals := make([][]byte, len(keys))
	if err := trieGetMany(m.root, tks, m.cachedNode, m.s.readNodesFunc(m.ctx, m.workers), func(i int, v []byte) { vals[i] = v }); err != nil {
		m.fail(fmt.Errorf("read the edges into %q: %w", id, err))
		return nil
	}
	var out []*graph.Edge
	for i, k := range keys {
		if vals[i] != nil {
			out = append(out, edgeOf(k, vals[i]))
		}
	}
	return out
}

// edgesUnder returns the edges whose keys (split by split) start with
// prefix.
func (m *mapSource) edgesUnder(prefix []byte, split func([]byte) (graph.EdgeKey, error)) []*graph.Edge {
	var out []*graph.Edge
	m.scan(prefix, func(k, v []byte) bool {
		ek, err := split(k)
		if err != nil {
			m.fail(err)
			return false
		}
		out = append(out, edgeOf(ek, v))
		return true
	})
	return out
}

// TypeCount returns the live artifacts of type typ, from the commit's
// record.
func (m *mapSource) TypeCount(typ string) int { return m.types[typ] }

// TypeNames implements graph.TypeLister: the types the map's index
// counts.
func (m *mapSource) TypeNames() []string { return slices.Collect(maps.Keys(m.types)) }

// Artifacts yields every artifact's metadata, in id order.
func (m *mapSource) Artifacts() iter.Seq[*graph.Artifact] { return m.artifactsUnder("") }

// artifactsUnder yields the artifacts whose ids start with prefix, in id
// order.
func (m *mapSource) artifactsUnder(prefix string) iter.Seq[*graph.Artifact] {
	return func(yield func(*graph.Artifact) bool) {
		m.scan(tkArtifact(prefix), func(k, v []byte) bool {
			av, err := decodeArtifactVal(v)
			if err != nil {
				m.fail(fmt.Errorf("artifact %q: %w", k[1:], err))
				return false
			}
			return yield(av.artifact(string(k[1:])))
		})
	}
}

// ArtifactsFrom implements graph.Ranger: the artifacts whose ids sort at
// or after from, in id order, read from from's place in the map
// (walk) rather than from its first artifact.
func (m *mapSource) ArtifactsFrom(from string) iter.Seq[*graph.Artifact] {
	return func(yield func(*graph.Artifact) bool) {
		m.walk([]byte{'a'}, tkArtifact(from), func(k, v []byte) bool {
			av, err := decodeArtifactVal(v)
			if err != nil {
				m.fail(fmt.Errorf("artifact %q: %w", k[1:], err))
				return false
			}
			return yield(av.artifact(string(k[1:])))
		})
	}
}

// splitMin is the fewest entries of the map's artifacts' part that
// MiddleArtifact splits: below it a pass over them is short enough for
// one worker.
const splitMin = 8192

// MiddleArtifact implements graph.Splitter: the id of the artifact at
// the middle of the map's artifacts, found down one path of the trie by
// the counts its branches keep (a node or two read, the branches above
// them most often cached).
func (m *mapSource) MiddleArtifact() (string, bool) {
	prefix := tkArtifact("")
	ref, err := triePrefixRoot(m, m.root, prefix)
	if err != nil {
		m.fail(err)
		return "", false
	}
	if ref.count < splitMin {
		return "", false
	}
	// A branch that holds every artifact holds nothing else (its entries
	// share the prefix), so its middle entry is the middle artifact.
	want := ref.count / 2
	for {
		n, err := m.node(ref.id)
		if err != nil {
			m.fail(err)
			return "", false
		}
		if n.leaf {
			if want >= len(n.entries) {
				return "", false // the counts do not add up: let the walk find out
			}
			k := n.entries[want].key
			if !bytes.HasPrefix(k, prefix) {
				return "", false
			}
			return string(k[1:]), true
		}
		next := false
		for _, c := range n.children {
			if want < c.count {
				ref, next = c, true
				break
			}
			want -= c.count
		}
		if !next {
			return "", false
		}
	}
}

// The map is split for a pass over its artifacts by two workers.
var _ graph.Splitter = (*mapSource)(nil)

// EdgesFrom implements graph.Ranger: the edges whose keys sort at or
// after from's, in key order (the map's order of edge keys is (From,
// Rel, To): their parts hold no zero byte), read from from's place.
func (m *mapSource) EdgesFrom(from graph.EdgeKey) iter.Seq[*graph.Edge] {
	return func(yield func(*graph.Edge) bool) {
		m.walk([]byte{'e'}, tkEdge(from), func(k, v []byte) bool {
			ek, err := splitEdgeKey(k)
			if err != nil {
				m.fail(err)
				return false
			}
			return yield(edgeOf(ek, v))
		})
	}
}

// Tombstones yields every tombstone, in id order.
func (m *mapSource) Tombstones() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		m.scan([]byte{'t'}, func(k, v []byte) bool {
			ver, err := decodeTombVal(v)
			if err != nil {
				m.fail(fmt.Errorf("tombstone %q: %w", k[1:], err))
				return false
			}
			return yield(string(k[1:]), ver)
		})
	}
}

// Edges yields every edge, in key order.
func (m *mapSource) Edges() iter.Seq[*graph.Edge] {
	return func(yield func(*graph.Edge) bool) {
		m.scan([]byte{'e'}, func(k, v []byte) bool {
			ek, err := splitEdgeKey(k)
			if err != nil {
				m.fail(err)
				return false
			}
			return yield(edgeOf(ek, v))
		})
	}
}

// confirmed is the trust entry of every artifact without a 'q' entry.
var confirmed = graph.TrustEntry{Base: true, Conf: true}

// Trust returns id's trust entry: its 'q' entry, or confirmed when id is
// a live artifact without one.
func (m *mapSource) Trust(id string) (graph.TrustEntry, bool) {
	if v := m.get(tkTrust(id)); v != nil {
		e, _, err := decodeTrustVal(v)
		if err != nil {
			m.fail(fmt.Errorf("trust entry %q: %w", id, err))
			return graph.TrustEntry{}, false
		}
		return e, true
	}
	if m.get(tkArtifact(id)) == nil {
		return graph.TrustEntry{}, false
	}
	return confirmed, true
}

// Root returns why id is a poison root, if it is one.
func (m *mapSource) Root(id string) (string, bool) {
	v := m.get(tkTrust(id))
	if v == nil {
		return "", false
	}
	e, reason, err := decodeTrustVal(v)
	if err != nil {
		m.fail(fmt.Errorf("trust entry %q: %w", id, err))
		return "", false
	}
	return reason, !e.Base
}

// trustEntries calls fn with every 'q' entry, in id order, until fn
// returns false.
func (m *mapSource) trustEntries(fn func(id string, e graph.TrustEntry, reason string) bool) {
	m.scan([]byte{'q'}, func(k, v []byte) bool {
		e, reason, err := decodeTrustVal(v)
		if err != nil {
			m.fail(fmt.Errorf("trust entry %q: %w", k[1:], err))
			return false
		}
		return fn(string(k[1:]), e, reason)
	})
}

// Unconfirmed yields the trust entry of every unconfirmed artifact (its
// 'q' entry), in id order.
func (m *mapSource) Unconfirmed() iter.Seq2[string, graph.TrustEntry] {
	return func(yield func(string, graph.TrustEntry) bool) {
		m.trustEntries(func(id string, e graph.TrustEntry, _ string) bool { return yield(id, e) })
	}
}

// TrustEntries yields every artifact's trust entry, in id order.
func (m *mapSource) TrustEntries() iter.Seq2[string, graph.TrustEntry] {
	return func(yield func(string, graph.TrustEntry) bool) {
		q := map[string]graph.TrustEntry{}
		for id, e := range m.Unconfirmed() {
			q[id] = e
		}
		m.scan([]byte{'a'}, func(k, _ []byte) bool {
			id := string(k[1:])
			e, ok := q[id]
			if !ok {
				e = confirmed
			}
			return yield(id, e)
		})
	}
}

// Roots yields every poison root with its reason, in id order.
func (m *mapSource) Roots() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		m.trustEntries(func(id string, e graph.TrustEntry, reason string) bool {
			return e.Base || yield(id, reason)
		})
	}
}

// openLazy opens the state and trust index of commit c of context info
// over its state map (indexed(c) must hold): the accumulator of its
// context hash is built from its leaves and checked against the commit,
// the definitions are read with their payloads, and nothing else is
// loaded — lookups read the map as they come.
func (s *Store) openLazy(info ContextInfo, c *replay.Commit) (*graph.State, *graph.TrustIndex, leafBase, error) {
	var base leafBase
	st, trust, err := s.openOver(context.Background(), info, c, func(m *mapSource, rs *graph.Ruleset, n graph.Counts, defs []*graph.Artifact) (*graph.State, error) {
		acc, from, err := s.leavesAt(m, c)
		if err != nil {
			return nil, err
		}
		base = from
		if from.ckpt == (hashing.Digest{}) && wantsCheckpoint(c) && s.checkpointLater(c, info.ID, acc.Clone()) {
			base = leafBase{ckpt: c.ContextHash}
		}
		return openedState(c)(graph.NewStateOver(rs, m, n, defs, acc))
	})
	return st, trust, base, err
}

// leafBase is the leaf checkpoint a head was opened from (the zero digest:
// none) and how many entries changed between its state and the head's.
type leafBase struct {
	ckpt    hashing.Digest
	changed int
}

// openOver opens the state and trust index of commit c of context info
// over its state map, read under ctx (mapSource.ctx): it reads the
// ruleset and the definitions with their payloads, has newState make the
// state, and makes the trust index over the map.
func (s *Store) openOver(ctx context.Context, info ContextInfo, c *replay.Commit, newState func(m *mapSource, rs *graph.Ruleset, n graph.Counts, defs []*graph.Artifact) (*graph.State, error)) (*graph.State, *graph.TrustIndex, error) {
	rs, err := info.ruleset()
	if err != nil {
		return nil, nil, err
	}
	m := newMapSource(ctx, s, info.ID, c)
	defs, err := s.definitionsIn(m, c)
	if err != nil {
		return nil, nil, err
	}
	n, tn := countsOf(c)
	st, err := newState(m, rs, n, defs)
	if err != nil {
		return nil, nil, err
	}
	return st, graph.NewTrustIndexOver(m, tn, s.baseFor), nil
}

// openedState passes on a state graph made over commit c's map, its
// error marked as corruption: the map's definitions do not load.
func openedState(c *replay.Commit) func(*graph.State, error) (*graph.State, error) {
	return func(st *graph.State, err error) (*graph.State, error) {
		if err != nil {
			return nil, fmt.Errorf("%w: open state of commit %s: %w", ErrCorrupt, c.ID.Short(), err)
		}
		return st, nil
	}
}

// leavesAt returns the accumulator of commit c's context hash, its map m,
// and the leaf checkpoint it started from: c's own when it has one; else
// the one its context's hint names, with the diff from that commit's map
// to c's applied (leavesSince); else none (the zero leafBase), the
// accumulator built from a walk of m and checked against c.
func (s *Store) leavesAt(m *mapSource, c *replay.Commit) (*hashing.Accumulator, leafBase, error) {
	if wantsCheckpoint(c) {
		if acc := s.readCheckpoint(m.ctx, m.ctxID, c); acc != nil {
			return acc, leafBase{ckpt: c.ContextHash}, nil
		}
		if acc, from := s.leavesSince(m, c); acc != nil {
			return acc, from, nil
		}
	}
	acc, err := s.leavesOf(m, c)
	return acc, leafBase{}, err
}

// definitionsIn returns the definition artifacts of the state map m of
// commit c, with their payloads.
func (s *Store) definitionsIn(m *mapSource, c *replay.Commit) ([]*graph.Artifact, error) {
	var defs []*graph.Artifact
	for a := range m.artifactsUnder(graph.ReservedIDPrefix) {
		if graph.IsDefinitionType(a.Type) {
			defs = append(defs, a)
		}
	}
	if err := m.Err(); err != nil {
		return nil, fmt.Errorf("open state of commit %s: %w", c.ID.Short(), err)
	}
	for _, a := range defs {
		var err error
		if a.Data, err = s.object(a.ContentHash); err != nil {
			return nil, fmt.Errorf("definition %q: %w", a.ID, err)
		}
	}
	return defs, nil
}

// openAt opens the state and trust index of commit c of context info,
// whose map holds its index, for a read: over its state map, as a head
// is, but with the context hash's leaves read only if the reader needs
// them (graph.NewStateOverHashLater: the hash, a fork, a clone) — from
// c's leaf checkpoint, else a walk of the map (not kept as a checkpoint:
// a read at an old commit rarely asks). The map is read under ctx: once
// it ends, a walk (the leaves, a whole read) stops at its next window and
// the view reports ctx's error as its failed read. A read of a
// few entries of an old commit then costs a few lookups, whatever the
// size of its state. Its nodes are checked against their ids as they are
// read; that the map as a whole hashes to c's context hash is checked
// only when the leaves are built (and by fsck), not on every read as a
// whole load does.
func (s *Store) openAt(ctx context.Context, info ContextInfo, c *replay.Commit) (*graph.State, *graph.TrustIndex, error) {
	return s.openOver(ctx, info, c, func(m *mapSource, rs *graph.Ruleset, n graph.Counts, defs []*graph.Artifact) (*graph.State, error) {
		m.workers = readerWorkers() // a client's read
		leaves := func() *hashing.Accumulator {
			acc, _, err := s.leavesAt(m, c)
			if err != nil {
				// The state's Err reports it, and the read fails.
				m.fail(err)
				return hashing.NewAccumulator()
			}
			return acc
		}
		return openedState(c)(graph.NewStateOverHashLater(rs, m, n, defs, leaves))
	})
}

// checkpointLater writes the leaf checkpoint of commit c of context ctxID,
// whose leaves acc holds (a copy no one else changes), in the background
// (Close waits for it), and reports whether it will; not once the store
// is closing.
func (s *Store) checkpointLater(c *replay.Commit, ctxID string, acc *hashing.Accumulator) bool {
	return s.inBackground(func() {
		if err := s.writeCheckpoint(context.Background(), ctxID, acc, &c.ID); err != nil {
			s.log.Warn("leaf checkpoint not written", "context_hash", c.ContextHash.Short(), "err", err)
		}
	})
}

// inBackground runs fn in a goroutine that Close waits for, and reports
// whether it does: not once the store is closing.
func (s *Store) inBackground(fn func()) bool {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return false
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		fn()
	}()
	return true
}

// leavesOf returns the accumulator of the context hash of commit c's
// state, whose map m is, built from every artifact and edge, and checks
// it against the commit.
func (s *Store) leavesOf(m *mapSource, c *replay.Commit) (*hashing.Accumulator, error) {
	arts := make([]*graph.Artifact, 0, c.Artifacts)
	for a := range m.Artifacts() {
		arts = append(arts, a)
	}
	edges := make([]*graph.Edge, 0, c.Edges)
	for e := range m.Edges() {
		edges = append(edges, e)
	}
	if err := m.Err(); err != nil {
		return nil, fmt.Errorf("open state of commit %s: %w", c.ID.Short(), err)
	}
	acc := hashing.NewAccumulator()
	acc.AddBatch(graph.LeavesOf(arts, edges))
	if got := acc.Root(); got != c.ContextHash {
		return nil, fmt.Errorf("%w: state map of commit %s hashes to %s, the commit records %s", ErrCorrupt, c.ID.Short(), got, c.ContextHash)
	}
	return acc, nil
}

// openHead returns the state and trust index of commit c of context info
// for a branch head: over its state map (openLazy) when lazy is set and
// the map holds its index, else loaded whole through src (a map written
// before format 3, or one whose nodes only src holds yet).
func (s *Store) openHead(src nodeSource, info ContextInfo, c *replay.Commit, lazy bool) (*graph.State, *graph.TrustIndex, leafBase, error) {
	if lazy && indexed(c) {
		return s.openLazy(info, c)
	}
	st, err := s.loadState(context.Background(), src, info, c, prefetchWorkers)
	if err != nil {
		return nil, nil, leafBase{}, err
	}
	return st, graph.NewTrustIndexFor(st, s.baseFor), leafBase{}, nil
}

// readErr returns the first failed read of the stored state under the
// group's view of the head, or nil.
func (hf *headFork) readErr() error { return readErrOf(hf.view(), hf.trust) }

// Err returns the first failed read of the stored state under the view,
// or nil: a read that fails (a node gone, or the read's context ended
// while it walked a map) looks like an absent entry to what read it, so
// anything built from the view — a summary kept for later, a decision —
// is sound only while Err is nil. Read, ReadAt and ReadSparse return it
// when fn returns; a caller that keeps what it built checks it first.
func (v *View) Err() error { return readErrOf(v.State, v.Trust) }

// readErrOf returns the first failed read of the stored state under st,
// else under its trust index tr, or nil.
func readErrOf(st *graph.State, tr *graph.TrustIndex) error {
	if err := st.Err(); err != nil {
		return err
	}
	return tr.Err()
}

// rebaseAt is how many changes a head over its state map holds before it
// is opened again over its newest commit (head.rebase): enough that a
// run of small commits reads its own recent writes from memory, few
// enough that a head's memory stays bounded whatever it commits.
const rebaseAt = 4096

// rebase opens h, locked by the caller, over the state map of its commit
// when its state over an older one holds more than rebaseAt changes and
// no reader has it pinned: the changes are in that map, and the head drops
// them. Its accumulator and definitions carry over.
func (h *head) rebase() {
	if len(h.layers) > 0 || h.pins.Load() != 0 || h.state.OwnEntries() <= rebaseAt || !indexed(h.commit) {
		return
	}
	h.overMap(h.commit, h.state.Rebase)
}

// reopen makes h, locked by the caller, a state over the map of commit c
// (durable) showing what state, a fork of h's state that readers may
// still hold, shows, and a trust index over the same map: for a head
// that reads through its map and must drop its layers, the way rebase
// does without waiting for its readers. It reports false, changing
// nothing, when state does not read through a map or c's map does not
// hold its index.
func (h *head) reopen(state *graph.State, c *replay.Commit) bool {
	return indexed(c) && h.overMap(c, state.Reopen)
}

// overMap makes h, locked by the caller, the state open makes over the
// map of commit c (graph.State.Rebase or Reopen), with a trust index over
// the same map, and reports whether open made one.
func (h *head) overMap(c *replay.Commit, open func(graph.Source, graph.Counts) (*graph.State, bool)) bool {
	m := newMapSource(context.Background(), h.store, h.ctx, c)
	n, tn := countsOf(c)
	st, ok := open(m, n)
	if ok {
		h.state, h.trust = st, graph.NewTrustIndexOver(m, tn, h.store.baseFor)
	}
	return ok
}

// Whole returns a view of the same commit whose state is loaded whole,
// for a read that walks a large part of the graph one artifact at a time
// (an audit's provenance walk): through the state map each step is a few
// trie lookups, which a long walk pays over and over. It returns v itself
// when its state is already whole, or too big to load within the head
// budget (the walk then reads through the map). The loaded state is the
// caller's, for the read only.
func (v *View) Whole(ctx context.Context) (*View, error) {
	if !v.loadsWhole() {
		return v, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, err := v.store.ctxState(v.ctxID)
	if err != nil {
		return nil, err
	}
	whole, err := v.store.loadState(ctx, v.store, cs.info, v.Commit, readerWorkers())
	if err != nil {
		return nil, err
	}
	w := *v
	w.State, w.Trust = whole, graph.NewTrustIndexFor(whole, v.store.baseFor)
	return &w, nil
}

// loadsWhole reports whether Whole loads the view's state: it is read
// through its map, and fits the head budget.
func (v *View) loadsWhole() bool {
	return v.State.IsLazy() && stateCost(v.State) <= v.store.headBudget
}

// auditLazyShare sets how big a provenance an audit walks through the
// state map: up to 1/auditLazyShare of the state's artifacts (at least
// auditLazyMin). Through the map a step of the walk costs some tens of
// microseconds when its nodes are not cached; loading the state whole
// costs a few microseconds per artifact of the state, however few the
// audit reads. So a walk of a small share costs less than the load, and
// a state of a million artifacts is not loaded for an audit of ten.
const (
	auditLazyShare = 64
	auditLazyMin   = 64
)

// Audit audits artifact id at the view's commit (graph.Audit, with the
// trust the index explains and the payloads read in batches); the report
// names the view's context, commit and context hash. A view over a state
// map is audited through the map when id's provenance is small against
// the state (auditLazyShare; counted by a walk that stops past the
// bound), and otherwise on the state loaded whole when it fits (Whole).
// It returns the view it audited, for further reads of the same
// artifacts.
func (v *View) Audit(ctx context.Context, id string) (*graph.AuditReport, *View, error) {
	w := v
	if st := v.State; v.loadsWhole() && !st.ProvenanceWithin(id, max(auditLazyMin, st.NumArtifacts()/auditLazyShare)) {
		var err error
		if w, err = v.Whole(ctx); err != nil {
			return nil, nil, err
		}
	}
	meta := graph.AuditMeta{Context: v.ctxID, Commit: v.Commit.ID.String(), ContextHash: v.Commit.ContextHash.String()}
	rep, err := graph.Audit(w.State, id, w.Trust.Explainer(w.State), w.DataOf(ctx), meta)
	return rep, w, err
}
