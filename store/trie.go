package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/artifactd/artifactd/hashing"
)

// The state map is a persistent, content-addressed trie: every commit
// records the root of a trie holding its whole state, and a commit writes
// only the nodes on the paths it changed. It gives a point lookup at any
// commit in O(depth) node reads, a diff that skips shared subtrees, and
// structural sharing between commits and branches.
//
// An entry's path is its key's bytes read as nibbles, then zeros: the
// zero byte sorts first, so paths order entries as their keys do (a key
// that is a prefix of another comes first in both orders). Only keys that
// differ by trailing zero bytes alone would share a path, and no key ends
// in one (ids hold no zero byte, and an edge key ends with an id); build
// keeps such keys in one leaf rather than split them forever. A subtree with at
// most maxLeaf entries is a leaf node (entries sorted by key); a larger
// one is a branch node at the first nibble its entries do not all share,
// with a child per value of that nibble. The nibbles the entries share
// before it (the prefix) are stored in the branch and skipped, so a long
// common prefix costs one node, not a node a nibble; a lookup compares
// them, so a key that is not there ends at the first branch whose prefix
// it does not have. The shape is
// therefore a pure function of the entry set: the same state has the same
// root whatever the history that built it, and a node's encoding does not
// depend on where it hangs.
//
// Keys in order keep together what is written together: a commit of
// artifacts with neighbouring ids (the steps of an agent run) rewrites a
// few leaves, not one leaf per entry, so the work of a commit stays
// bounded by what it touches as the context grows (docs/BENCHMARKS.md,
// "An ordered state map"). Random ids (UUIDs) scatter as they did.
//
// Node encodings (the node's id is SHA-256 of its encoding):
//
//	leaf:   'l' uvarint(n) { uvarint(len k) k uvarint(len v) v }*n        (ascending keys)
//	branch: 'b' uvarint(total) uvarint(depth) prefix[(depth+1)/2] uint16(bitmap)
//	            { child id [32] uvarint(count) }*                          (ascending nibble)
//
// where depth is the nibble the branch splits on and prefix packs the
// depth nibbles before it (an odd depth leaves the last low nibble zero).
//
// Stores of format 1 hold tries of an earlier, hashed layout: an entry's
// path was SHA-256 of its key, and a node split at its depth in the trie
// ('L' and 'B' nodes: as above, without depth and prefix, leaves sorted by
// path). Those are read as they are (lookups, walks, diffs and the
// check), never extended: the first commit onto a legacy root rebuilds
// its entries in the ordered layout (Store.upgradeStateMap), and commits
// after it share the new map.
const (
	maxLeaf = 32
	// legacyMaxDepth is the nibbles of a SHA-256, where the hashed layout
	// stopped splitting.
	legacyMaxDepth = 64
	// maxNodeDepth bounds a branch's depth in the ordered layout: twice
	// the longest key a state map can hold (an edge between two ids of
	// graph.MaxIDBytes and a relation name), with room to spare. A node
	// deeper than it is corrupt.
	maxNodeDepth = 4096
)

// nodeSource reads trie nodes by id.
type nodeSource interface {
	node(id hashing.Digest) (*trieNode, error)
}

// errNodeMissing marks a trie node that is referenced but not stored.
var errNodeMissing = errors.New("trie node missing")

type trieEntry struct {
	key []byte
	val []byte
}

type trieChild struct {
	id    hashing.Digest
	count int
}

// trieNode is a decoded node. Leaves have entries; branches have children.
type trieNode struct {
	leaf bool
	// legacy marks a node of the hashed layout of format 1.
	legacy   bool
	entries  []trieEntry
	children *[16]trieChild // nil in a leaf
	total    int
	// depth is the nibble an ordered branch splits on, and prefix packs
	// the depth nibbles its entries share before it.
	depth  int
	prefix []byte
}

// newBranch returns an empty branch node, its children in the same
// allocation.
func newBranch() *trieNode {
	b := new(struct {
		n trieNode
		c [16]trieChild
	})
	b.n.children = &b.c
	return &b.n
}

// keyNibble returns nibble d of key's path: its bytes, then zeros.
func keyNibble(key []byte, d int) int {
	i := d / 2
	if i >= len(key) {
		return 0
	}
	if d%2 == 0 {
		return int(key[i] >> 4)
	}
	return int(key[i] & 0x0f)
}

// pathEnd is the nibble just past key's terminating zero byte: two keys
// whose paths agree up to the larger of their ends agree everywhere.
func pathEnd(key []byte) int { return 2*len(key) + 2 }

// divergence returns the first nibble in [from, limit) at which the paths
// of a and b differ, or limit.
func divergence(a, b []byte, from, limit int) int {
	d := from
	if d%2 == 1 && d < limit {
		if keyNibble(a, d) != keyNibble(b, d) {
			return d
		}
		d++
	}
	for d < limit {
		i := d / 2
		var x, y byte
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x>>4 == y>>4 {
				d++
			}
			return min(d, limit)
		}
		if i >= len(a) && i >= len(b) {
			return limit
		}
		d += 2
	}
	return limit
}

// packPrefix returns the first depth nibbles of key's path, packed.
func packPrefix(key []byte, depth int) []byte {
	p := make([]byte, (depth+1)/2)
	copy(p, key)
	if depth%2 == 1 {
		p[len(p)-1] &= 0xf0
	}
	return p
}

// legacyNibble returns nibble depth of a legacy path (a SHA-256).
func legacyNibble(p hashing.Digest, depth int) int {
	b := p[depth/2]
	if depth%2 == 0 {
		return int(b >> 4)
	}
	return int(b & 0x0f)
}

func (n *trieNode) encode() []byte {
	var buf []byte
	if n.leaf {
		size := 1 + binary.MaxVarintLen64
		for i := range n.entries {
			size += 2*binary.MaxVarintLen32 + len(n.entries[i].key) + len(n.entries[i].val)
		}
		buf = make([]byte, 0, size)
		tag := byte('l')
		if n.legacy {
			tag = 'L'
		}
		buf = append(buf, tag)
		buf = binary.AppendUvarint(buf, uint64(len(n.entries)))
		for _, e := range n.entries {
			buf = binary.AppendUvarint(buf, uint64(len(e.key)))
			buf = append(buf, e.key...)
			buf = binary.AppendUvarint(buf, uint64(len(e.val)))
			buf = append(buf, e.val...)
		}
		return buf
	}
	buf = make([]byte, 0, 1+3*binary.MaxVarintLen64+len(n.prefix)+2+16*(32+binary.MaxVarintLen64))
	if n.legacy {
		buf = append(buf, 'B')
		buf = binary.AppendUvarint(buf, uint64(n.total))
	} else {
		buf = append(buf, 'b')
		buf = binary.AppendUvarint(buf, uint64(n.total))
		buf = binary.AppendUvarint(buf, uint64(n.depth))
		buf = append(buf, n.prefix...)
	}
	var bitmap uint16
	for i, c := range n.children {
		if c.count > 0 {
			bitmap |= 1 << i
		}
	}
	buf = binary.BigEndian.AppendUint16(buf, bitmap)
	for _, c := range n.children {
		if c.count > 0 {
			buf = append(buf, c.id[:]...)
			buf = binary.AppendUvarint(buf, uint64(c.count))
		}
	}
	return buf
}

// decodeNode decodes a node of either layout. An ordered node must be
// canonical as far as it alone can show: leaf keys strictly ascending, a
// branch with two children or more, more than maxLeaf entries and no bits
// past its prefix.
func decodeNode(b []byte) (*trieNode, error) {
	bad := func(what string) (*trieNode, error) {
		return nil, fmt.Errorf("%w: trie node: %s", ErrCorrupt, what)
	}
	if len(b) == 0 {
		return bad("empty")
	}
	r := b[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	switch b[0] {
	case 'L', 'l':
		n, ok := uv()
		if !ok || n > uint64(len(r)) {
			return bad("leaf count")
		}
		node := &trieNode{leaf: true, legacy: b[0] == 'L', entries: make([]trieEntry, 0, n)}
		for i := uint64(0); i < n; i++ {
			kl, ok := uv()
			if !ok || kl > uint64(len(r)) {
				return bad("key length")
			}
			k := r[:kl:kl]
			r = r[kl:]
			vl, ok := uv()
			if !ok || vl > uint64(len(r)) {
				return bad("value length")
			}
			v := r[:vl:vl]
			r = r[vl:]
			if !node.legacy && i > 0 && bytes.Compare(node.entries[i-1].key, k) >= 0 {
				return bad("leaf keys out of order")
			}
			node.entries = append(node.entries, trieEntry{key: k, val: v})
		}
		if len(r) != 0 {
			return bad("trailing bytes")
		}
		node.total = len(node.entries)
		return node, nil
	case 'B', 'b':
		total, ok := uv()
		if !ok {
			return bad("branch header")
		}
		node := newBranch()
		node.total, node.legacy = int(total), b[0] == 'B'
		if !node.legacy {
			depth, ok := uv()
			if !ok || depth > maxNodeDepth || uint64(len(r)) < (depth+1)/2 {
				return bad("branch depth")
			}
			node.depth = int(depth)
			node.prefix = r[: (depth+1)/2 : (depth+1)/2]
			r = r[(depth+1)/2:]
			if depth%2 == 1 && node.prefix[len(node.prefix)-1]&0x0f != 0 {
				return bad("bits past the branch prefix")
			}
		}
		if len(r) < 2 {
			return bad("branch header")
		}
		bitmap := binary.BigEndian.Uint16(r)
		r = r[2:]
		sum, live := 0, 0
		for i := 0; i < 16; i++ {
			if bitmap&(1<<i) == 0 {
				continue
			}
			if len(r) < 32 {
				return bad("child id")
			}
			copy(node.children[i].id[:], r[:32])
			r = r[32:]
			c, ok := uv()
			if !ok || c == 0 {
				return bad("child count")
			}
			node.children[i].count = int(c)
			sum += int(c)
			live++
		}
		if len(r) != 0 || sum != node.total {
			return bad("branch counts")
		}
		if !node.legacy && (live < 2 || node.total <= maxLeaf) {
			return bad("branch not canonical")
		}
		return node, nil
	}
	return bad("unknown kind")
}

// trieMut is one change to the trie: val nil deletes key.
type trieMut struct {
	key []byte
	val []byte
}

// mutFor returns the mutation setting key to val (nil: deleting it).
func mutFor(key, val []byte) trieMut { return trieMut{key: key, val: val} }

// trieWriter applies batches of mutations, collecting the new nodes. It is
// itself a nodeSource that sees the nodes it made.
type trieWriter struct {
	src nodeSource
	// written holds the encodings of new nodes not yet handed to the
	// database, size their record sizes (see recordSize).
	written map[hashing.Digest][]byte
	size    int64
	// nodes holds every node made, decoded.
	nodes map[hashing.Digest]*trieNode
	// read holds the stored nodes warm read for the next apply, which
	// drops them.
	read map[hashing.Digest]*trieNode
}

func newTrieWriter(src nodeSource) *trieWriter {
	return &trieWriter{src: src, written: make(map[hashing.Digest][]byte), nodes: make(map[hashing.Digest]*trieNode)}
}

func (w *trieWriter) node(id hashing.Digest) (*trieNode, error) { return w.load(id) }

func (w *trieWriter) load(id hashing.Digest) (*trieNode, error) {
	if n := w.nodes[id]; n != nil {
		return n, nil
	}
	if n := w.read[id]; n != nil {
		return n, nil
	}
	return w.src.node(id)
}

// warmMin is the smallest batch of mutations warm reads ahead for: below
// it, apply's reads one node at a time cost no more than a level's batch.
const warmMin = 64

// warm reads ahead the stored nodes that muts (a batch for apply at root)
// descend into, a level at a time: each level's nodes that are neither
// made by w nor in cached (nil: none is) in one call of read. A bulk
// commit into a big state map touches many of its leaves, and reading
// them one lookup each costs more than the rest of the update. apply then
// finds them in memory, and drops them when it returns; until then they
// are held outside the node cache's budget. Nodes a deletion merges back
// into a leaf are not read ahead; apply reads those itself. read reports
// a node it cannot find as corruption (Store.readNodes does). A legacy
// trie is not read ahead: the commit onto it reads it whole.
func (w *trieWriter) warm(root trieChild, muts []trieMut, cached func(hashing.Digest) *trieNode, read func([]hashing.Digest) (map[hashing.Digest]*trieNode, error)) error {
	if root.count == 0 || len(muts) < warmMin {
		return nil
	}
	if w.read == nil {
		w.read = make(map[hashing.Digest]*trieNode)
	}
	// at[i] is the stored subtree mutation i descends into next, and
	// from[i] the first nibble of its key not yet compared with a
	// branch's (onBranch).
	at := make([]trieChild, len(muts))
	from := make([]int, len(muts))
	for i := range at {
		at[i] = root
	}
	for more := true; more; {
		var ids []hashing.Digest
		seen := make(map[hashing.Digest]bool)
		for _, ref := range at {
			if ref.count == 0 || seen[ref.id] || w.nodes[ref.id] != nil || w.read[ref.id] != nil {
				continue
			}
			seen[ref.id] = true
			ids = append(ids, ref.id)
		}
		nodes, err := readLevel(ids, cached, read)
		if err != nil {
			w.read = nil
			return err
		}
		for i, id := range ids {
			w.read[id] = nodes[i]
		}
		more = false
		for i, ref := range at {
			if ref.count == 0 {
				continue
			}
			n := w.nodes[ref.id]
			if n == nil {
				n = w.read[ref.id]
			}
			c := -1
			if !n.leaf && !n.legacy {
				c, _ = childOnPath(n, muts[i].key, from[i], 0, nil) // an ordered branch: no error
			}
			if c < 0 {
				// A key off the branch's prefix makes a new split above
				// it: update reads nothing below.
				at[i] = trieChild{}
				continue
			}
			at[i], from[i] = n.children[c], n.fromBelow(from[i])
			more = more || at[i].count > 0
		}
	}
	return nil
}

func (w *trieWriter) store(n *trieNode) trieChild {
	if n.total == 0 {
		return trieChild{}
	}
	enc := n.encode()
	id := hashing.Sum(enc)
	if w.nodes[id] == nil {
		w.written[id] = enc
		w.size += int64(len(pNode)+len(id)+len(enc)) + 12
		w.nodes[id] = n
	}
	return trieChild{id: id, count: n.total}
}

// clearWritten forgets the encodings handed to the database.
func (w *trieWriter) clearWritten() {
	clear(w.written)
	w.size = 0
}

// isLegacy reports whether the trie at root is of the hashed layout.
func (w *trieWriter) isLegacy(root trieChild) (bool, error) {
	if root.count == 0 {
		return false, nil
	}
	n, err := w.load(root.id)
	if err != nil {
		return false, err
	}
	return n.legacy, nil
}

// upgrade returns the root of the ordered trie holding the entries of the
// trie at root, read through src: root itself unless it is of the legacy
// layout.
func (w *trieWriter) upgrade(root trieChild, src nodeSource) (trieChild, error) {
	legacy, err := w.isLegacy(root)
	if err != nil || !legacy {
		return root, err
	}
	return w.rebuild(root, src)
}

// rebuild returns the root of the ordered trie holding the entries of the
// legacy trie at root (not empty), read through src.
func (w *trieWriter) rebuild(root trieChild, src nodeSource) (trieChild, error) {
	n, err := src.node(root.id)
	if err != nil {
		return trieChild{}, err
	}
	entries, err := sortedEntries(src, n)
	if err != nil {
		return trieChild{}, err
	}
	for i := 1; i < len(entries); i++ {
		if bytes.Equal(entries[i-1].key, entries[i].key) {
			return trieChild{}, fmt.Errorf("%w: state map %s holds key %q twice", ErrCorrupt, root.id.Short(), entries[i].key)
		}
	}
	if len(entries) != root.count {
		return trieChild{}, fmt.Errorf("%w: state map %s holds %d entries, its root counts %d", ErrCorrupt, root.id.Short(), len(entries), root.count)
	}
	return w.build(entries, 0), nil
}

// apply returns the root after applying muts (any order; a later mutation
// of the same key wins) to root (zero = empty trie). A legacy root is
// upgraded first.
func (w *trieWriter) apply(root trieChild, muts []trieMut) (trieChild, error) {
	defer func() { w.read = nil }()
	if len(muts) == 0 {
		return root, nil
	}
	root, err := w.upgrade(root, w)
	if err != nil {
		return trieChild{}, err
	}
	// Sort by key (stably, so that mutations of one key keep their
	// order), then keep the last mutation of each key.
	sorted := slices.Clone(muts)
	slices.SortStableFunc(sorted, func(a, b trieMut) int { return bytes.Compare(a.key, b.key) })
	uniq := sorted[:0]
	for i := range sorted {
		if i+1 < len(sorted) && bytes.Equal(sorted[i].key, sorted[i+1].key) {
			continue
		}
		uniq = append(uniq, sorted[i])
	}
	return w.update(root, 0, uniq)
}

// update returns the subtree holding the entries of ref with muts (sorted
// by key, one per key) applied. Every entry of ref and every mutation
// shares the first depth nibbles.
func (w *trieWriter) update(ref trieChild, depth int, muts []trieMut) (trieChild, error) {
	if ref.count == 0 {
		return w.build(mergeEntries(nil, muts), depth), nil
	}
	node, err := w.load(ref.id)
	if err != nil {
		return trieChild{}, err
	}
	if node.legacy {
		return trieChild{}, fmt.Errorf("%w: legacy node %s below an ordered one", ErrCorrupt, ref.id.Short())
	}
	if node.leaf {
		return w.build(mergeEntries(node.entries, muts), depth), nil
	}
	// Where do the mutations leave the node's prefix? Sorted keys that
	// agree with it at both ends agree with it in between.
	at := min(divergence(node.prefix, muts[0].key, depth, node.depth),
		divergence(node.prefix, muts[len(muts)-1].key, depth, node.depth))
	if at == node.depth {
		children := *node.children
		for nib, group := range byNibble(muts, mutKey, at) {
			c, err := w.update(node.children[nib], at+1, group)
			if err != nil {
				return trieChild{}, err
			}
			children[nib] = c
		}
		return w.assemble(node.depth, node.prefix, children)
	}
	// Some keys leave the prefix at nibble at: the node becomes the child
	// of a new split there (or of nothing, if only deletions of absent
	// keys leave it).
	var children [16]trieChild
	own := keyNibble(node.prefix, at)
	children[own] = ref
	for nib, group := range byNibble(muts, mutKey, at) {
		var c trieChild
		if nib == own {
			c, err = w.update(ref, at+1, group)
			if err != nil {
				return trieChild{}, err
			}
		} else {
			c = w.build(mergeEntries(nil, group), at+1)
		}
		children[nib] = c
	}
	return w.assemble(at, packPrefix(node.prefix, at), children)
}

// byNibble yields the runs of xs (sorted by key) whose keys share nibble
// d, with that nibble; each run's capacity ends with it.
func byNibble[T any](xs []T, key func(*T) []byte, d int) func(func(int, []T) bool) {
	return func(yield func(int, []T) bool) {
		for i := 0; i < len(xs); {
			nib := keyNibble(key(&xs[i]), d)
			j := i + 1
			for j < len(xs) && keyNibble(key(&xs[j]), d) == nib {
				j++
			}
			if !yield(nib, xs[i:j:j]) {
				return
			}
			i = j
		}
	}
}

func mutKey(m *trieMut) []byte     { return m.key }
func entryKey(e *trieEntry) []byte { return e.key }

// assemble stores the canonical subtree over children, the split at depth
// of entries sharing prefix: nothing, a leaf when they fit in one, the one
// child that holds them all, or a branch.
func (w *trieWriter) assemble(depth int, prefix []byte, children [16]trieChild) (trieChild, error) {
	total, live, only := 0, 0, trieChild{}
	for _, c := range children {
		if c.count > 0 {
			total += c.count
			live++
			only = c
		}
	}
	switch {
	case total == 0:
		return trieChild{}, nil
	case total <= maxLeaf:
		entries, err := collectEntries(w, &trieNode{children: &children, total: total}, nil)
		if err != nil {
			return trieChild{}, err
		}
		return w.store(&trieNode{leaf: true, entries: entries, total: len(entries)}), nil
	case live == 1:
		return only, nil
	}
	node := newBranch()
	node.depth, node.prefix, *node.children, node.total = depth, prefix, children, total
	return w.store(node), nil
}

// build stores entries (sorted by key, distinct, sharing the first depth
// nibbles) as their canonical subtree.
func (w *trieWriter) build(entries []trieEntry, depth int) trieChild {
	if len(entries) <= maxLeaf {
		return w.store(&trieNode{leaf: true, entries: entries, total: len(entries)})
	}
	first, last := entries[0].key, entries[len(entries)-1].key
	limit := max(pathEnd(first), pathEnd(last))
	split := divergence(first, last, depth, limit)
	if split >= limit || split > maxNodeDepth {
		// Keys that differ only by trailing zero bytes, which no valid
		// key holds: keep them in one leaf rather than split forever.
		return w.store(&trieNode{leaf: true, entries: entries, total: len(entries)})
	}
	node := newBranch()
	node.depth, node.prefix, node.total = split, packPrefix(first, split), len(entries)
	for nib, run := range byNibble(entries, entryKey, split) {
		node.children[nib] = w.build(run, split+1)
	}
	return w.store(node)
}

// collectEntries appends every entry below node, read through src, in
// the order of its layout.
func collectEntries(src nodeSource, node *trieNode, out []trieEntry) ([]trieEntry, error) {
	if node.leaf {
		return append(out, node.entries...), nil
	}
	for _, c := range node.children {
		if c.count == 0 {
			continue
		}
		child, err := src.node(c.id)
		if err != nil {
			return nil, err
		}
		if out, err = collectEntries(src, child, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mergeStep says which side a merge of two sorted runs (at i of n and j
// of m) takes next: negative the first, positive the second, zero both
// (equal keys, by cmp when both have one left).
func mergeStep(i, n, j, m int, cmp func() int) int {
	switch {
	case j == m:
		return -1
	case i == n:
		return 1
	}
	return cmp()
}

// mergeEntries returns old (sorted by key) with muts (sorted by key, one
// per key) applied.
func mergeEntries(old []trieEntry, muts []trieMut) []trieEntry {
	out := make([]trieEntry, 0, len(old)+len(muts))
	i, j := 0, 0
	for i < len(old) || j < len(muts) {
		c := mergeStep(i, len(old), j, len(muts), func() int { return bytes.Compare(old[i].key, muts[j].key) })
		if c < 0 {
			out = append(out, old[i])
			i++
			continue
		}
		if muts[j].val != nil {
			out = append(out, trieEntry{key: muts[j].key, val: muts[j].val})
		}
		if c == 0 {
			i++
		}
		j++
	}
	return out
}

// trieGet looks key up in the trie at root. It returns nil when absent.
func trieGet(src nodeSource, root trieChild, key []byte) ([]byte, error) {
	if root.count == 0 {
		return nil, nil
	}
	var legacyPath *hashing.Digest
	id := root.id
	// from is the first nibble of key not yet compared with a branch's:
	// those before it led here.
	from := 0
	for depth := 0; ; depth++ {
		n, err := src.node(id)
		if err != nil {
			return nil, err
		}
		if n.leaf {
			v, _ := leafGet(n, key)
			return v, nil
		}
		c, err := childOnPath(n, key, from, depth, &legacyPath)
		if err != nil || c < 0 || n.children[c].count == 0 {
			return nil, err
		}
		id, from = n.children[c].id, n.fromBelow(from)
	}
}

// childOnPath returns which child of branch n key's path runs through,
// or -1 when no entry below n can have key; the branches below compare
// key from n.fromBelow(from). depth is n's level in the descent and from
// the first nibble of key not compared with a branch's before n
// (onBranch). A legacy (hashed) branch picks the child by key's SHA-256,
// which *path holds once a legacy branch needed it (computed then).
func childOnPath(n *trieNode, key []byte, from, depth int, path **hashing.Digest) (int, error) {
	if n.legacy {
		if depth >= legacyMaxDepth {
			return -1, fmt.Errorf("%w: legacy state map deeper than a hash", ErrCorrupt)
		}
		if *path == nil {
			p := hashing.Digest(sha256.Sum256(key))
			*path = &p
		}
		return legacyNibble(**path, depth), nil
	}
	if !onBranch(n, key, from) {
		return -1, nil
	}
	return keyNibble(key, n.depth), nil
}

// fromBelow returns the first nibble of a key whose path runs through
// branch n that the branches below n have not compared, when its nibbles
// before from were compared above n: the one after n's split nibble for
// an ordered branch, from itself for a legacy branch (which compares a
// hash, not the key). It is the same for every key below n.
func (n *trieNode) fromBelow(from int) int {
	if n.legacy {
		return from
	}
	return n.depth + 1
}

// onBranch reports whether key's path runs through the ordered branch n:
// whether it has the nibbles every entry below n shares before the one n
// splits on. A key off them is not below n (an absent key stops there
// rather than descend to a leaf through the child its next nibble names:
// 'q' and 'a' share a low nibble, so without it a trust entry that is not
// there was looked for in the leaf of an artifact's metadata). The
// nibbles before from are known to match: they led to n.
func onBranch(n *trieNode, key []byte, from int) bool {
	return divergence(n.prefix, key, from, n.depth) == n.depth
}

// trieGetMany looks keys up in the trie at root and calls found with the
// index and value of each key present (in no particular order; val is
// the node's, not a copy). It descends a level at a time with the keys
// grouped by the node they reach, so each node on their paths is visited
// once however many keys pass through it, and a level's nodes that
// cached (nil: none is) does not hold are read in one call of read. A
// read of thousands of entries spread over a map bigger than the node
// cache — the edges into a hub — otherwise walks from the root once per
// entry and reads its nodes one at a time.
func trieGetMany(root trieChild, keys [][]byte, cached func(hashing.Digest) *trieNode, read func([]hashing.Digest) (map[hashing.Digest]*trieNode, error), found func(i int, val []byte)) error {
	if root.count == 0 || len(keys) == 0 {
		return nil
	}
	type group struct {
		ref  trieChild
		keys []int // indexes into keys
		from int   // the keys' first nibble not yet compared with a branch's
	}
	all := make([]int, len(keys))
	for i := range all {
		all[i] = i
	}
	level := []group{{ref: root, keys: all}}
	// paths holds each key's hashed path once a legacy node needs it.
	var paths []*hashing.Digest
	for depth := 0; len(level) > 0; depth++ {
		if depth > maxNodeDepth {
			return fmt.Errorf("%w: state map deeper than %d levels", ErrCorrupt, maxNodeDepth)
		}
		ids := make([]hashing.Digest, len(level))
		for gi, g := range level {
			ids[gi] = g.ref.id
		}
		nodes, err := readLevel(ids, cached, read)
		if err != nil {
			return err
		}
		var next []group
		for gi, g := range level {
			n := nodes[gi]
			if n.leaf {
				for _, i := range g.keys {
					if v, ok := leafGet(n, keys[i]); ok {
						found(i, v)
					}
				}
				continue
			}
			if n.legacy && paths == nil {
				paths = make([]*hashing.Digest, len(keys))
			}
			var parts [16][]int
			for _, i := range g.keys {
				var path **hashing.Digest
				if n.legacy {
					path = &paths[i]
				}
				c, err := childOnPath(n, keys[i], g.from, depth, path)
				if err != nil {
					return err
				}
				if c >= 0 && n.children[c].count > 0 {
					parts[c] = append(parts[c], i)
				}
			}
			below := n.fromBelow(g.from)
			for c, ks := range parts {
				if len(ks) > 0 {
					next = append(next, group{ref: n.children[c], keys: ks, from: below})
				}
			}
		}
		level = next
	}
	return nil
}

// readLevel returns the nodes ids, in their order: those cached (nil:
// none is) holds from it, the others in one call of read — the nodes of
// one level of a descent, read together. A node read does not return is
// corruption.
func readLevel(ids []hashing.Digest, cached func(hashing.Digest) *trieNode, read func([]hashing.Digest) (map[hashing.Digest]*trieNode, error)) ([]*trieNode, error) {
	nodes := make([]*trieNode, len(ids))
	var missing []hashing.Digest
	for i, id := range ids {
		if cached != nil {
			nodes[i] = cached(id)
		}
		if nodes[i] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nodes, nil
	}
	got, err := read(missing)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if nodes[i] == nil {
			if nodes[i] = got[id]; nodes[i] == nil {
				return nil, missingNode(id)
			}
		}
	}
	return nodes, nil
}

// leafGet looks key up among a leaf's entries: a binary search in an
// ordered leaf, a scan in a legacy one.
func leafGet(n *trieNode, key []byte) ([]byte, bool) {
	if n.legacy {
		for _, e := range n.entries {
			if bytes.Equal(e.key, key) {
				return e.val, true
			}
		}
		return nil, false
	}
	i, found := slices.BinarySearchFunc(n.entries, key, func(e trieEntry, k []byte) int { return bytes.Compare(e.key, k) })
	if !found {
		return nil, false
	}
	return n.entries[i].val, true
}

// trieWalk calls fn for every entry below root, in the order of its
// layout (key order for the ordered one). fn must not retain key or val
// beyond the call unless it copies them.
func trieWalk(src nodeSource, root trieChild, fn func(key, val []byte) error) error {
	if root.count == 0 {
		return nil
	}
	n, err := src.node(root.id)
	if err != nil {
		return err
	}
	if n.leaf {
		for _, e := range n.entries {
			if err := fn(e.key, e.val); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range n.children {
		if err := trieWalk(src, c, fn); err != nil {
			return err
		}
	}
	return nil
}

// triePrefixRoot returns the smallest subtree below root (an ordered
// trie) that holds every entry whose key starts with prefix — those below
// it that do not are passed over by walkFrom — or the empty one when no
// key can.
func triePrefixRoot(src nodeSource, root trieChild, prefix []byte) (trieChild, error) {
	ref := root
	for ref.count > 0 {
		n, err := src.node(ref.id)
		if err != nil {
			return trieChild{}, err
		}
		if n.legacy {
			return trieChild{}, fmt.Errorf("%w: a prefix walk of a format-1 state map", ErrCorrupt)
		}
		if n.leaf {
			return ref, nil
		}
		if lim := min(n.depth, 2*len(prefix)); divergence(n.prefix, prefix, 0, lim) < lim {
			return trieChild{}, nil // the branch's entries share nibbles that prefix does not have
		}
		if n.depth >= 2*len(prefix) {
			return ref, nil
		}
		ref = n.children[keyNibble(prefix, n.depth)]
	}
	return trieChild{}, nil
}

// walkFrom calls fn for the entries below n that start with prefix and
// are not less than from (nil: every entry), in order; it reports false
// once fn did or once it met a key past those that start with prefix
// (the keys are in order, so none after it does either). from is at
// least prefix.
func walkFrom(src nodeSource, n *trieNode, prefix, from []byte, fn func(key, val []byte) bool) (bool, error) {
	if n.leaf {
		i := 0
		if from != nil {
			i, _ = slices.BinarySearchFunc(n.entries, from, func(e trieEntry, k []byte) int { return bytes.Compare(e.key, k) })
		}
		for _, e := range n.entries[i:] {
			if !bytes.HasPrefix(e.key, prefix) || !fn(e.key, e.val) {
				return false, nil
			}
		}
		return true, nil
	}
	first, from, reach := fromChild(n, from)
	if !reach {
		return true, nil
	}
	for c := first; c < len(n.children); c++ {
		ref := n.children[c]
		if ref.count == 0 {
			continue
		}
		child, err := src.node(ref.id)
		if err != nil {
			return false, err
		}
		if more, err := walkFrom(src, child, prefix, childFrom(c, first, from), fn); !more || err != nil {
			return more, err
		}
	}
	return true, nil
}

// fromChild says where a walk of the keys not less than from (nil: every
// key) goes on below branch n: reach is false when every entry below n
// sorts before from; otherwise from child first on, bounded by next
// there (nil when every key below n sorts at or after from).
func fromChild(n *trieNode, from []byte) (first int, next []byte, reach bool) {
	if from == nil {
		return 0, nil, true
	}
	// Every entry below n has the first n.depth nibbles of n.prefix.
	// Where from's path leaves them, either all those entries sort after
	// from or none does.
	if d := divergence(n.prefix, from, 0, n.depth); d < n.depth {
		if keyNibble(from, d) > keyNibble(n.prefix, d) {
			return 0, nil, false
		}
		return 0, nil, true
	}
	return keyNibble(from, n.depth), from, true
}

// childFrom is the bound of a walk from next (fromChild) in child c of a
// branch it goes on in from child first: past from's nibble every key
// sorts after from.
func childFrom(c, first int, next []byte) []byte {
	if c > first {
		return nil
	}
	return next
}

// trieDiff calls fn for every key whose value differs between the tries at
// a and b (old nil = added, new nil = removed). Shared subtrees are skipped
// without being read; the rest costs about what differs (a diff across a
// layout upgrade reads both sides whole).
func trieDiff(src nodeSource, a, b trieChild, fn func(key, old, new []byte) error) error {
	if a == b {
		return nil
	}
	na, nb, err := nodePair(src, a, b)
	if err != nil {
		return err
	}
	if ca, cb, aligned := diffStep(a, na, b, nb); aligned {
		return diffChildren(src, ca, cb, fn)
	}
	return diffSorted(src, na, nb, fn)
}

// nodePair reads the nodes of a and b through src, nil for an empty side.
func nodePair(src nodeSource, a, b trieChild) (na, nb *trieNode, err error) {
	if a.count > 0 {
		if na, err = src.node(a.id); err != nil {
			return nil, nil, err
		}
	}
	if b.count > 0 {
		if nb, err = src.node(b.id); err != nil {
			return nil, nil, err
		}
	}
	return na, nb, nil
}

// diffStep says how trieDiff goes on below a and b, whose nodes are na
// and nb (nil: an empty side): child by child, ca[i] against cb[i]
// (aligned), or else by reading both subtrees whole (diffSorted). Two
// branches of one layout align: legacy nodes split at their depth in the
// trie; ordered ones split at one nibble align child by child, and
// otherwise the shallower split's child on the deeper one's prefix is
// diffed against the deeper branch and its other children hold what only
// its side has — unless the prefixes part before both splits, and the
// two sides share nothing.
func diffStep(a trieChild, na *trieNode, b trieChild, nb *trieNode) (ca, cb [16]trieChild, aligned bool) {
	if na == nil || nb == nil || na.leaf || nb.leaf || na.legacy != nb.legacy {
		return ca, cb, false
	}
	if na.legacy {
		return *na.children, *nb.children, true
	}
	shallow := min(na.depth, nb.depth)
	if divergence(na.prefix, nb.prefix, 0, shallow) < shallow {
		return ca, cb, false
	}
	switch {
	case na.depth == nb.depth:
		return *na.children, *nb.children, true
	case na.depth < nb.depth:
		ca = *na.children
		cb[keyNibble(nb.prefix, na.depth)] = b
	default:
		cb = *nb.children
		ca[keyNibble(na.prefix, nb.depth)] = a
	}
	return ca, cb, true
}

// diffChildren diffs two branches child by child.
func diffChildren(src nodeSource, ca, cb [16]trieChild, fn func(key, old, new []byte) error) error {
	for i := range ca {
		if err := trieDiff(src, ca[i], cb[i], fn); err != nil {
			return err
		}
	}
	return nil
}

// sortedEntries returns every entry below n (nil: none), read through
// src, in key order (a legacy subtree's are sorted).
func sortedEntries(src nodeSource, n *trieNode) ([]trieEntry, error) {
	if n == nil {
		return nil, nil
	}
	size := len(n.entries)
	if !n.leaf {
		size = n.total
	}
	entries, err := collectEntries(src, n, make([]trieEntry, 0, size))
	if err == nil && n.legacy {
		slices.SortFunc(entries, func(x, y trieEntry) int { return bytes.Compare(x.key, y.key) })
	}
	return entries, err
}

// diffSorted diffs two subtrees (nil: empty) by reading both whole and
// merging their entries in key order.
func diffSorted(src nodeSource, na, nb *trieNode, fn func(key, old, new []byte) error) error {
	ea, err := sortedEntries(src, na)
	if err != nil {
		return err
	}
	eb, err := sortedEntries(src, nb)
	if err != nil {
		return err
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		c := mergeStep(i, len(ea), j, len(eb), func() int { return bytes.Compare(ea[i].key, eb[j].key) })
		switch {
		case c < 0:
			if err := fn(ea[i].key, ea[i].val, nil); err != nil {
				return err
			}
			i++
		case c > 0:
			if err := fn(eb[j].key, nil, eb[j].val); err != nil {
				return err
			}
			j++
		default:
			if !bytes.Equal(ea[i].val, eb[j].val) {
				if err := fn(ea[i].key, ea[i].val, eb[j].val); err != nil {
					return err
				}
			}
			i++
			j++
		}
	}
	return nil
}

// cost estimates the heap a decoded node holds, for the node cache.
func (n *trieNode) cost() int64 {
	c := int64(96) + int64(len(n.prefix))
	if n.children != nil {
		c += 16 * (32 + 8)
	}
	for i := range n.entries {
		e := &n.entries[i]
		c += 48 + int64(len(e.key)+len(e.val))
	}
	return c
}
