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

// The state map is a persistent, content-addressed hash trie: every commit
// records the root of a trie holding its whole state, and a commit writes
// only the nodes on the paths it changed. It gives a point lookup at any
// commit in O(depth) node reads, a diff that skips shared subtrees, and
// structural sharing between commits and branches.
//
// An entry's path is the nibble sequence of SHA-256(key). A subtree with at
// most maxLeaf entries is always a leaf node (sorted entries); a larger one
// is a branch node with up to 16 children. The shape is therefore a pure
// function of the entry set: the same state has the same root whatever the
// history that built it.
//
// Node encodings (the node's id is SHA-256 of its encoding):
//
//	leaf:   'L' uvarint(n) { uvarint(len k) k uvarint(len v) v }*n   (sorted by path, then key)
//	branch: 'B' uvarint(total) uint16(bitmap) { child id [32] uvarint(count) }* (ascending nibble)
const (
	maxLeaf  = 32
	maxDepth = 64 // nibbles in a SHA-256
)

// nodeSource reads trie nodes by id.
type nodeSource interface {
	node(id hashing.Digest) (*trieNode, error)
}

// errNodeMissing marks a trie node that is referenced but not stored.
var errNodeMissing = errors.New("trie node missing")

type trieEntry struct {
	path hashing.Digest
	key  []byte
	val  []byte
}

type trieChild struct {
	id    hashing.Digest
	count int
}

// trieNode is a decoded node. Leaves have entries; branches have children.
type trieNode struct {
	leaf     bool
	entries  []trieEntry
	children [16]trieChild
	total    int
}

func entryLess(a, b *trieEntry) bool {
	if c := bytes.Compare(a.path[:], b.path[:]); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.key, b.key) < 0
}

func nibble(p hashing.Digest, depth int) int {
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
		buf = append(buf, 'L')
		buf = binary.AppendUvarint(buf, uint64(len(n.entries)))
		for _, e := range n.entries {
			buf = binary.AppendUvarint(buf, uint64(len(e.key)))
			buf = append(buf, e.key...)
			buf = binary.AppendUvarint(buf, uint64(len(e.val)))
			buf = append(buf, e.val...)
		}
		return buf
	}
	buf = make([]byte, 0, 1+binary.MaxVarintLen64+2+16*(32+binary.MaxVarintLen64))
	buf = append(buf, 'B')
	buf = binary.AppendUvarint(buf, uint64(n.total))
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
	case 'L':
		n, ok := uv()
		if !ok || n > uint64(len(r)) {
			return bad("leaf count")
		}
		node := &trieNode{leaf: true, entries: make([]trieEntry, 0, n)}
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
			node.entries = append(node.entries, trieEntry{path: sha256.Sum256(k), key: k, val: v})
		}
		if len(r) != 0 {
			return bad("trailing bytes")
		}
		node.total = len(node.entries)
		return node, nil
	case 'B':
		total, ok := uv()
		if !ok || len(r) < 2 {
			return bad("branch header")
		}
		bitmap := binary.BigEndian.Uint16(r)
		r = r[2:]
		node := &trieNode{total: int(total)}
		sum := 0
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
		}
		if len(r) != 0 || sum != node.total {
			return bad("branch counts")
		}
		return node, nil
	}
	return bad("unknown kind")
}

// trieMut is one change to the trie: val nil deletes key.
type trieMut struct {
	path hashing.Digest
	key  []byte
	val  []byte
}

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
// commit into a big state map touches most of its leaves, and reading
// them one lookup each costs more than the rest of the update. apply then
// finds them in memory, and drops them when it returns; until then they
// are held outside the node cache's budget (for a bulk commit into a big
// context, most of its trie). Nodes a deletion merges back into a leaf
// are not read ahead; apply reads those itself. read reports a node it
// cannot find as corruption (Store.readNodes does).
func (w *trieWriter) warm(root trieChild, muts []trieMut, cached func(hashing.Digest) *trieNode, read func([]hashing.Digest) (map[hashing.Digest]*trieNode, error)) error {
	if root.count == 0 || len(muts) < warmMin {
		return nil
	}
	if w.read == nil {
		w.read = make(map[hashing.Digest]*trieNode)
	}
	// at[i] is the stored subtree mutation i descends into next.
	at := make([]trieChild, len(muts))
	for i := range at {
		at[i] = root
	}
	for depth := 0; depth < maxDepth; depth++ {
		var missing []hashing.Digest
		seen := make(map[hashing.Digest]bool)
		for _, ref := range at {
			if ref.count == 0 || seen[ref.id] || w.nodes[ref.id] != nil || w.read[ref.id] != nil {
				continue
			}
			seen[ref.id] = true
			if cached != nil {
				if n := cached(ref.id); n != nil {
					w.read[ref.id] = n
					continue
				}
			}
			missing = append(missing, ref.id)
		}
		if len(missing) > 0 {
			got, err := read(missing)
			if err != nil {
				w.read = nil
				return err
			}
			for _, id := range missing {
				if got[id] == nil {
					w.read = nil
					return fmt.Errorf("%w %s", errNodeMissing, id)
				}
				w.read[id] = got[id]
			}
		}
		more := false
		for i, ref := range at {
			if ref.count == 0 {
				continue
			}
			n := w.nodes[ref.id]
			if n == nil {
				n = w.read[ref.id]
			}
			if n.leaf {
				at[i] = trieChild{}
				continue
			}
			at[i] = n.children[nibble(muts[i].path, depth)]
			more = more || at[i].count > 0
		}
		if !more {
			break
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

// apply returns the root after applying muts (any order; a later mutation
// of the same key wins) to root (zero = empty trie).
func (w *trieWriter) apply(root trieChild, muts []trieMut) (trieChild, error) {
	defer func() { w.read = nil }()
	if len(muts) == 0 {
		return root, nil
	}
	// Sort by path (stably, so that mutations of one key keep their
	// order), then keep the last mutation of each key.
	sorted := slices.Clone(muts)
	slices.SortStableFunc(sorted, func(a, b trieMut) int {
		if c := bytes.Compare(a.path[:], b.path[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.key, b.key)
	})
	uniq := sorted[:0]
	for i := range sorted {
		if i+1 < len(sorted) && sorted[i].path == sorted[i+1].path && bytes.Equal(sorted[i].key, sorted[i+1].key) {
			continue
		}
		uniq = append(uniq, sorted[i])
	}
	return w.update(root, 0, uniq)
}

func (w *trieWriter) update(ref trieChild, depth int, muts []trieMut) (trieChild, error) {
	var node *trieNode
	if ref.count == 0 {
		node = &trieNode{leaf: true}
	} else {
		n, err := w.load(ref.id)
		if err != nil {
			return trieChild{}, err
		}
		node = n
	}
	if node.leaf {
		entries := mergeEntries(node.entries, muts)
		return w.build(entries, depth), nil
	}
	next := *node
	next.total = 0
	i := 0
	for i < len(muts) {
		nib := nibble(muts[i].path, depth)
		j := i
		for j < len(muts) && nibble(muts[j].path, depth) == nib {
			j++
		}
		c, err := w.update(node.children[nib], depth+1, muts[i:j])
		if err != nil {
			return trieChild{}, err
		}
		next.children[nib] = c
		i = j
	}
	for _, c := range next.children {
		next.total += c.count
	}
	if next.total <= maxLeaf {
		entries, err := w.collect(&next, nil)
		if err != nil {
			return trieChild{}, err
		}
		return w.store(&trieNode{leaf: true, entries: entries, total: len(entries)}), nil
	}
	return w.store(&next), nil
}

// build stores entries (sorted) as the canonical subtree at depth.
func (w *trieWriter) build(entries []trieEntry, depth int) trieChild {
	if len(entries) <= maxLeaf || depth >= maxDepth {
		return w.store(&trieNode{leaf: true, entries: entries, total: len(entries)})
	}
	node := &trieNode{total: len(entries)}
	i := 0
	for i < len(entries) {
		nib := nibble(entries[i].path, depth)
		j := i
		for j < len(entries) && nibble(entries[j].path, depth) == nib {
			j++
		}
		node.children[nib] = w.build(entries[i:j:j], depth+1)
		i = j
	}
	return w.store(node)
}

// collect appends every entry below node, in order.
func (w *trieWriter) collect(node *trieNode, out []trieEntry) ([]trieEntry, error) {
	if node.leaf {
		return append(out, node.entries...), nil
	}
	for _, c := range node.children {
		if c.count == 0 {
			continue
		}
		child, err := w.load(c.id)
		if err != nil {
			return nil, err
		}
		if out, err = w.collect(child, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func mergeEntries(old []trieEntry, muts []trieMut) []trieEntry {
	out := make([]trieEntry, 0, len(old)+len(muts))
	i, j := 0, 0
	for i < len(old) || j < len(muts) {
		switch {
		case j == len(muts):
			out = append(out, old[i])
			i++
		case i == len(old):
			if muts[j].val != nil {
				out = append(out, trieEntry{path: muts[j].path, key: muts[j].key, val: muts[j].val})
			}
			j++
		default:
			m := trieEntry{path: muts[j].path, key: muts[j].key}
			switch {
			case entryLess(&old[i], &m):
				out = append(out, old[i])
				i++
			case entryLess(&m, &old[i]):
				if muts[j].val != nil {
					out = append(out, trieEntry{path: m.path, key: m.key, val: muts[j].val})
				}
				j++
			default: // same key
				if muts[j].val != nil {
					out = append(out, trieEntry{path: m.path, key: m.key, val: muts[j].val})
				}
				i++
				j++
			}
		}
	}
	return out
}

// trieGet looks key up in the trie at root. It returns nil when absent.
func trieGet(src nodeSource, root trieChild, key []byte) ([]byte, error) {
	if root.count == 0 {
		return nil, nil
	}
	path := hashing.Digest(sha256.Sum256(key))
	id := root.id
	for depth := 0; ; depth++ {
		n, err := src.node(id)
		if err != nil {
			return nil, err
		}
		if n.leaf {
			for _, e := range n.entries {
				if bytes.Equal(e.key, key) {
					return e.val, nil
				}
			}
			return nil, nil
		}
		c := n.children[nibble(path, depth)]
		if c.count == 0 {
			return nil, nil
		}
		id = c.id
	}
}

// trieWalk calls fn for every entry below root, in path order. fn must not
// retain key or val beyond the call unless it copies them.
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

// trieDiff calls fn for every key whose value differs between the tries at
// a and b (old nil = added, new nil = removed). Shared subtrees are skipped
// without being read.
func trieDiff(src nodeSource, a, b trieChild, fn func(key, old, new []byte) error) error {
	if a.id == b.id && a.count == b.count {
		return nil
	}
	var na, nb *trieNode
	var err error
	if a.count > 0 {
		if na, err = src.node(a.id); err != nil {
			return err
		}
	}
	if b.count > 0 {
		if nb, err = src.node(b.id); err != nil {
			return err
		}
	}
	if na != nil && nb != nil && !na.leaf && !nb.leaf {
		for i := 0; i < 16; i++ {
			if err := trieDiff(src, na.children[i], nb.children[i], fn); err != nil {
				return err
			}
		}
		return nil
	}
	w := &trieWriter{src: src}
	var ea, eb []trieEntry
	if na != nil {
		if ea, err = w.collect(na, nil); err != nil {
			return err
		}
	}
	if nb != nil {
		if eb, err = w.collect(nb, nil); err != nil {
			return err
		}
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j == len(eb) || (i < len(ea) && entryLess(&ea[i], &eb[j])):
			if err := fn(ea[i].key, ea[i].val, nil); err != nil {
				return err
			}
			i++
		case i == len(ea) || entryLess(&eb[j], &ea[i]):
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
	c := int64(16*(32+8) + 64)
	for i := range n.entries {
		e := &n.entries[i]
		c += 32 + 48 + int64(len(e.key)+len(e.val))
	}
	return c
}
