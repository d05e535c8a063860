package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// keyShapes generate keys that stress the ordered layout: keys that are
// prefixes of others, long shared prefixes (a node each would make the
// trie as deep as the key), dense neighbours, and the store's real key
// shapes.
var keyShapes = []struct {
	name string
	key  func(rng *rand.Rand) string
}{
	{"prefixes", func(rng *rand.Rand) string {
		// "a", "ab", "abb", …: many keys are prefixes of others.
		return strings.Repeat("ab", 30)[:rng.IntN(60)]
	}},
	{"long-shared-prefix", func(rng *rand.Rand) string {
		return strings.Repeat("p", 250) + fmt.Sprintf("%x", rng.IntN(4000))
	}},
	{"neighbours", func(rng *rand.Rand) string { return fmt.Sprintf("step-%06d", rng.IntN(3000)) }},
	{"decimal", func(rng *rand.Rand) string { return fmt.Sprintf("k%d", rng.IntN(3000)) }},
	{"binary", func(rng *rand.Rand) string {
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = byte(1 + rng.IntN(255)) // any byte but zero
		}
		return string(b)
	}},
	{"store-keys", func(rng *rand.Rand) string {
		id := func() string { return fmt.Sprintf("a%d", rng.IntN(300)) }
		switch rng.IntN(3) {
		case 0:
			return string(tkArtifact(id()))
		case 1:
			return string(tkTomb(id()))
		}
		return string(tkEdge(graph.EdgeKey{From: id(), Rel: []string{"derived_from", "supports", "cites"}[rng.IntN(3)], To: id()}))
	}},
}

// TestOrderedTrieAgainstMap applies random batches of sets and deletes for
// every key shape and checks, after each, that the trie agrees with a
// plain map (the oracle): count, lookups, absent keys, a walk in key
// order, the shape (checkOrderedShape), the root of a build from scratch,
// and the exact diff against every earlier root kept.
func TestOrderedTrieAgainstMap(t *testing.T) {
	for _, shape := range keyShapes {
		t.Run(shape.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 2; seed++ {
				rng := rand.New(rand.NewPCG(seed, 99))
				nodes := memNodes{}
				oracle := map[string]string{}
				var root trieChild
				type kept struct {
					root trieChild
					m    map[string]string
				}
				var history []kept
				for batch := range 40 {
					var muts []trieMut
					n := 1 + rng.IntN(120)
					if batch%10 == 9 {
						n = 400 // big batches split and merge many nodes at once
					}
					for range n {
						k := shape.key(rng)
						if rng.IntN(3) == 0 {
							muts = append(muts, mutFor([]byte(k), nil))
							delete(oracle, k)
						} else {
							v := fmt.Sprintf("v%d", rng.IntN(1000))
							muts = append(muts, mutFor([]byte(k), []byte(v)))
							oracle[k] = v
						}
					}
					w := newTrieWriter(nodes)
					next, err := w.apply(root, muts)
					if err != nil {
						t.Fatal(err)
					}
					nodes.absorb(w)
					root = next
					where := fmt.Sprintf("seed %d batch %d", seed, batch)
					checkAgainstOracle(t, where, nodes, root, oracle)
					checkOrderedShape(t, nodes, root, 0, nil)
					if batch%8 == 7 {
						checkWalkFrom(t, where, nodes, root, oracle)
					}
					if scratch := buildFrom(t, nodes, oracle); scratch != root {
						t.Fatalf("%s: incremental root %s/%d, from scratch %s/%d", where, root.id.Short(), root.count, scratch.id.Short(), scratch.count)
					}
					for i, h := range history {
						if (batch+i)%3 == 0 {
							checkDiff(t, where, nodes, h.root, root, h.m, oracle)
							checkDiff(t, where+" (reversed)", nodes, root, h.root, oracle, h.m)
						}
					}
					if batch%4 == 0 {
						// The roots of the last few checkpoints, the oldest
						// from 16 batches back.
						history = append(history[max(0, len(history)-3):], kept{root, maps.Clone(oracle)})
					}
				}
			}
		})
	}
}

// checkAgainstOracle checks count, lookups, an absent key and a walk (in
// key order unless the trie is legacy).
func checkAgainstOracle(t *testing.T, where string, src nodeSource, root trieChild, oracle map[string]string) {
	t.Helper()
	if root.count != len(oracle) {
		t.Fatalf("%s: count %d, want %d", where, root.count, len(oracle))
	}
	for k, v := range oracle {
		got, err := trieGet(src, root, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("%s: get %q = %q, %v; want %q", where, k, got, err, v)
		}
		if got, err := trieGet(src, root, []byte(k+"\x01")); err != nil || (got != nil && oracle[k+"\x01"] == "") {
			t.Fatalf("%s: get of absent %q = %q, %v", where, k+"\x01", got, err)
		}
		// A key that leaves k's path early, at a high or a low nibble:
		// it is off some branch's prefix unless the map holds it.
		for _, off := range offPathKeys(k) {
			got, err := trieGet(src, root, []byte(off))
			if v, ok := oracle[off]; err != nil || string(got) != v || (got == nil) == ok {
				t.Fatalf("%s: get %q (off %q's path) = %q, %v; want %q", where, off, k, got, err, v)
			}
		}
	}
	checkGetMany(t, where, src, root, oracle)
	probed := 0
	for k := range oracle {
		if probed++; probed > 4 {
			break
		}
		checkLookupsStop(t, where, src, root, k, oracle)
	}
	var walked []string
	if err := trieWalk(src, root, func(k, v []byte) error {
		if oracle[string(k)] != string(v) {
			t.Fatalf("%s: walk gave %q=%q, oracle %q", where, k, v, oracle[string(k)])
		}
		walked = append(walked, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	legacy := false
	if root.count > 0 {
		n, err := src.node(root.id)
		if err != nil {
			t.Fatal(err)
		}
		legacy = n.legacy
	}
	if legacy {
		slices.Sort(walked)
	}
	if want := slices.Sorted(maps.Keys(oracle)); !slices.Equal(walked, want) {
		t.Fatalf("%s: walk is not the oracle's keys in order (%d keys, want %d)", where, len(walked), len(want))
	}
}

// checkLookupsStop looks up, in an ordered trie, k with one nibble
// changed — at each place in turn — and checks where each lookup stops:
// every node it reads but the last is a branch whose entries' shared
// nibbles (those before its split, as its prefix holds them) the key
// has, so that a key that leaves the map's paths stops at the first
// branch it is not under, whichever nibble it leaves them at. The answer
// must be the oracle's. trieGetMany, asked for all those keys at once,
// must read no node that none of their lookups read.
func checkLookupsStop(t *testing.T, where string, src nodeSource, root trieChild, k string, oracle map[string]string) {
	t.Helper()
	if !orderedRoot(src, root) {
		return // a legacy trie's paths are its keys' hashes
	}
	var offs [][]byte
	onPaths := map[hashing.Digest]bool{}
	for j := range 2 * len(k) {
		off := []byte(k)
		off[j/2] ^= 0x10 >> (4 * (j % 2)) // nibble j changed
		offs = append(offs, off)
		rec := &pathNodes{nodeSource: src}
		got, err := trieGet(rec, root, off)
		if v, ok := oracle[string(off)]; err != nil || string(got) != v || (got == nil) == ok {
			t.Fatalf("%s: get %q = %q, %v; want %q", where, off, got, err, v)
		}
		for _, id := range rec.ids {
			onPaths[id] = true
		}
		for i, n := range rec.nodes[:len(rec.nodes)-1] {
			if n.leaf {
				t.Fatalf("%s: the lookup of %q read on past a leaf", where, off)
			}
			for d := range n.depth {
				if keyNibble(off, d) != keyNibble(n.prefix, d) {
					t.Fatalf("%s: the lookup of %q (%q with nibble %d changed) went on past node %d of its path, a branch at nibble %d whose entries it leaves at nibble %d", where, off, k, j, i, n.depth, d)
				}
			}
		}
	}
	fromSrc := readFrom(src)
	read := func(ids []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		for _, id := range ids {
			if !onPaths[id] {
				t.Fatalf("%s: trieGetMany of %q with each nibble changed read node %s, which no lookup of those keys reads", where, k, id.Short())
			}
		}
		return fromSrc(ids)
	}
	found := func(i int, v []byte) {
		if want, ok := oracle[string(offs[i])]; !ok || string(v) != want {
			t.Fatalf("%s: trieGetMany found %q = %q; the oracle has %q (%v)", where, offs[i], v, want, ok)
		}
	}
	if err := trieGetMany(root, offs, nil, read, found); err != nil {
		t.Fatalf("%s: trieGetMany: %v", where, err)
	}
}

// offPathKeys returns k with its middle byte's high nibble changed and
// with its first byte's low nibble changed: keys whose paths leave k's
// early (the second is how a trust entry 'q' sits beside an artifact's
// 'a').
func offPathKeys(k string) []string {
	if k == "" {
		return nil
	}
	hi, lo := []byte(k), []byte(k)
	hi[len(hi)/2] ^= 0x10
	lo[0] ^= 0x01
	return []string{string(hi), string(lo)}
}

// checkWalkFrom checks trieWalkFrom on an ordered trie against the
// oracle's keys in order: for prefixes of none, one and two bytes and
// from keys the map holds, keys just past them, keys off their paths,
// keys before, between and after every key, the entries yielded are
// exactly the oracle's that start with the prefix and are not less than
// from, in order; one stopped after two yields exactly those, having
// read about the nodes on from's path and on the paths of those two.
func checkWalkFrom(t *testing.T, where string, src nodeSource, root trieChild, oracle map[string]string) {
	t.Helper()
	if !orderedRoot(src, root) {
		return
	}
	height := trieHeight(t, src, root)
	sorted := slices.Sorted(maps.Keys(oracle))
	froms := []string{"", "\x00", "\xff", "\xff\xff"}
	prefixes := []string{""}
	// About a dozen keys, spread over the map.
	step := max(1, len(sorted)/12)
	for i, k := range sorted {
		if i%step != 0 {
			continue
		}
		froms = append(froms, k, k+"\x00", k+"\x01")
		froms = append(froms, offPathKeys(k)...)
		if len(k) > 1 {
			froms = append(froms, k[:len(k)-1], k[:len(k)/2])
		}
		if len(prefixes) < 5 && len(k) > 0 {
			prefixes = append(prefixes, k[:1])
			if len(k) > 1 {
				prefixes = append(prefixes, k[:2])
			}
		}
	}
	for _, prefix := range prefixes {
		for _, from := range froms {
			var want []string
			for _, k := range sorted {
				if strings.HasPrefix(k, prefix) && k >= from {
					want = append(want, k)
				}
			}
			for _, stop := range []int{-1, 2} {
				var got []string
				rec := &countingNodes{nodeSource: src}
				err := trieWalkFrom(rec, root, []byte(prefix), []byte(from), func(k, v []byte) bool {
					if oracle[string(k)] != string(v) {
						t.Fatalf("%s: walk from %q under %q gave %q=%q, oracle %q", where, from, prefix, k, v, oracle[string(k)])
					}
					got = append(got, string(k))
					return len(got) != stop
				})
				if err != nil {
					t.Fatalf("%s: walk from %q under %q: %v", where, from, prefix, err)
				}
				w := want
				if stop > 0 && len(w) > stop {
					w = w[:stop]
				}
				if !slices.Equal(got, w) {
					t.Fatalf("%s: walk from %q under %q (stopping after %d) gave %d keys %q…, want %d %q…", where, from, prefix, stop, len(got), firstKeys(got), len(w), firstKeys(w))
				}
				// Down from's path, then up and down once a key.
				if limit := 2 * height * (2 + stop); stop > 0 && rec.reads > limit {
					t.Fatalf("%s: walk from %q under %q, stopped after %d keys, read %d nodes; a trie %d high allows %d", where, from, prefix, stop, rec.reads, height, limit)
				}
			}
		}
	}
}

// firstKeys returns the first few of keys, for a failure's message.
func firstKeys(keys []string) []string { return keys[:min(len(keys), 3)] }

// checkGetMany checks trieGetMany against the oracle: every key present,
// absent keys, a key asked twice, in a shuffled order, each found key
// reported once with its value; and that it asks read for each node once
// at most, a level at a time, and reads nothing that cached holds.
func checkGetMany(t *testing.T, where string, src nodeSource, root trieChild, oracle map[string]string) {
	t.Helper()
	var keys [][]byte
	for k := range oracle {
		keys = append(keys, []byte(k), []byte(k+"\x01"))
		for _, off := range offPathKeys(k) {
			keys = append(keys, []byte(off))
		}
	}
	keys = append(keys, []byte("\xff absent"), []byte(nil))
	if len(keys) > 2 {
		keys = append(keys, keys[0])
	}
	rng := rand.New(rand.NewPCG(uint64(len(keys)), 9))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	read := map[hashing.Digest]int{}
	batches := 0
	readFn := func(ids []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		batches++
		for _, id := range ids {
			read[id]++
		}
		return readFrom(src)(ids)
	}
	// The root is "cached": it must not be read.
	var rootNode *trieNode
	if root.count > 0 {
		var err error
		if rootNode, err = src.node(root.id); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(id hashing.Digest) *trieNode {
		if id == root.id {
			return rootNode
		}
		return nil
	}
	vals := make([][]byte, len(keys))
	calls := make([]int, len(keys))
	if err := trieGetMany(root, keys, cached, readFn, func(i int, v []byte) { vals[i] = v; calls[i]++ }); err != nil {
		t.Fatalf("%s: trieGetMany: %v", where, err)
	}
	for i, k := range keys {
		v, ok := oracle[string(k)]
		if ok != (calls[i] == 1) || calls[i] > 1 || string(vals[i]) != v {
			t.Fatalf("%s: trieGetMany of %q: %q in %d calls; the oracle has %q (%v)", where, k, vals[i], calls[i], v, ok)
		}
	}
	for id, n := range read {
		if n > 1 || id == root.id {
			t.Fatalf("%s: trieGetMany read node %s %d times (root %v)", where, id.Short(), n, id == root.id)
		}
	}
	if h := trieHeight(t, src, root); batches > h {
		t.Fatalf("%s: %d batches of reads for a trie %d levels high", where, batches, h)
	}
	// Everything cached: nothing is read, the same values come back.
	all := func(id hashing.Digest) *trieNode {
		n, err := src.node(id)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	never := func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		t.Fatalf("%s: trieGetMany read a node the cache holds", where)
		return nil, nil
	}
	n := 0
	if err := trieGetMany(root, keys, all, never, func(i int, v []byte) {
		n++
		if string(v) != string(vals[i]) {
			t.Fatalf("%s: %q cached gives %q, read %q", where, keys[i], v, vals[i])
		}
	}); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	found := 0
	for _, c := range calls {
		found += c
	}
	if n != found {
		t.Fatalf("%s: cached, %d keys found; read, %d", where, n, found)
	}
	// A read that fails is the call's error.
	boom := errors.New("boom")
	failing := func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) { return nil, boom }
	err := trieGetMany(root, keys, cached, failing, func(int, []byte) {})
	if len(read) > 0 && !errors.Is(err, boom) || len(read) == 0 && err != nil {
		t.Fatalf("%s: a failing read gave %v (%d nodes to read)", where, err, len(read))
	}
	checkWarmReadsPaths(t, where, src, root, keys)
}

// readFrom returns a trie writer's or trieGetMany's read of a level of
// nodes, from src.
func readFrom(src nodeSource) func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) {
	return func(ids []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		got := make(map[hashing.Digest]*trieNode, len(ids))
		for _, id := range ids {
			n, err := src.node(id)
			if err != nil {
				return nil, err
			}
			got[id] = n
		}
		return got, nil
	}
}

// pathNodes is a nodeSource that records the nodes it gives out, and
// their ids, in the order asked for.
type pathNodes struct {
	nodeSource
	ids   []hashing.Digest
	nodes []*trieNode
}

func (p *pathNodes) node(id hashing.Digest) (*trieNode, error) {
	n, err := p.nodeSource.node(id)
	if err == nil {
		p.ids = append(p.ids, id)
		p.nodes = append(p.nodes, n)
	}
	return n, err
}

// orderedRoot reports whether root is a trie in src of the ordered
// layout, not empty and not legacy (hashed).
func orderedRoot(src nodeSource, root trieChild) bool {
	if root.count == 0 {
		return false
	}
	n, err := src.node(root.id)
	return err == nil && !n.legacy
}

// checkWarmReadsPaths checks that a trie writer's warm holds exactly the
// nodes a lookup of its key walks (trieGet): every node on the key's
// path, none below where the key leaves the map — for some of keys, one
// at a time (warm given a key as its mutations, as often as warm needs to
// act). A legacy (hashed) map is rebuilt whole, not warmed.
func checkWarmReadsPaths(t *testing.T, where string, src nodeSource, root trieChild, keys [][]byte) {
	t.Helper()
	if !orderedRoot(src, root) {
		return
	}
	read := readFrom(src)
	none := func(hashing.Digest) *trieNode { return nil }
	for _, k := range keys[:min(len(keys), 48)] {
		walked := &pathNodes{nodeSource: src}
		if _, err := trieGet(walked, root, k); err != nil {
			t.Fatalf("%s: get %q: %v", where, k, err)
		}
		asked := make(map[hashing.Digest]bool, len(walked.ids))
		for _, id := range walked.ids {
			asked[id] = true
		}
		muts := make([]trieMut, warmMin)
		for i := range muts {
			muts[i] = trieMut{key: k}
		}
		w := newTrieWriter(src)
		if err := w.warm(root, muts, none, read); err != nil {
			t.Fatalf("%s: warm %q: %v", where, k, err)
		}
		for id := range w.read {
			if !asked[id] {
				t.Fatalf("%s: warm for %q read node %s, below where its lookup stops", where, k, id.Short())
			}
		}
		if len(w.read) != len(asked) {
			t.Fatalf("%s: warm for %q read %d nodes, its lookup walks %d", where, k, len(w.read), len(asked))
		}
	}
}

// checkDiff checks that trieDiff(a, b) reports exactly the keys whose
// values differ between ma and mb, each once, with both values.
func checkDiff(t *testing.T, where string, src nodeSource, a, b trieChild, ma, mb map[string]string) {
	t.Helper()
	want := map[string]string{}
	for k, v := range ma {
		if w, ok := mb[k]; !ok || w != v {
			want[k] = v + ">" + mb[k]
		}
	}
	for k, v := range mb {
		if _, ok := ma[k]; !ok {
			want[k] = ">" + v
		}
	}
	got := map[string]string{}
	if err := trieDiff(src, a, b, func(k, o, n []byte) error {
		if _, dup := got[string(k)]; dup {
			t.Fatalf("%s: diff reported %q twice", where, k)
		}
		got[string(k)] = string(o) + ">" + string(n)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: diff reported %d changes, want %d", where, len(got), len(want))
	}
}

// buildFrom builds the oracle's entries into an ordered trie from scratch.
func buildFrom(t *testing.T, nodes memNodes, oracle map[string]string) trieChild {
	t.Helper()
	var all []trieMut
	for _, k := range slices.Sorted(maps.Keys(oracle)) {
		all = append(all, mutFor([]byte(k), []byte(oracle[k])))
	}
	w := newTrieWriter(nodes)
	root, err := w.apply(trieChild{}, all)
	if err != nil {
		t.Fatal(err)
	}
	nodes.absorb(w)
	return root
}

// checkOrderedShape checks the canonical shape below ref: every entry
// shares the nibbles the path to it fixed (want, from depth on), leaves
// hold at most maxLeaf entries, and a branch splits at the first nibble
// its entries do not all share, with its prefix, more than maxLeaf
// entries and two children or more (decodeNode checks the last two).
// It returns the entries below ref.
func checkOrderedShape(t *testing.T, src nodeSource, ref trieChild, depth int, want []byte) []trieEntry {
	t.Helper()
	if ref.count == 0 {
		return nil
	}
	n, err := src.node(ref.id)
	if err != nil {
		t.Fatal(err)
	}
	if n.legacy {
		t.Fatalf("legacy node %s in an ordered trie", ref.id.Short())
	}
	var entries []trieEntry
	if n.leaf {
		if len(n.entries) > maxLeaf {
			t.Fatalf("leaf %s holds %d entries", ref.id.Short(), len(n.entries))
		}
		entries = n.entries
	} else {
		if n.depth < depth {
			t.Fatalf("branch %s splits at %d, above its parent's %d", ref.id.Short(), n.depth, depth)
		}
		for nib, c := range n.children {
			path := packPrefix(n.prefix, n.depth+1)
			if n.depth%2 == 0 {
				path[n.depth/2] |= byte(nib) << 4
			} else {
				path[n.depth/2] |= byte(nib)
			}
			sub := checkOrderedShape(t, src, c, n.depth+1, path)
			for _, e := range sub {
				if keyNibble(e.key, n.depth) != nib {
					t.Fatalf("entry %q under child %d of a split at %d", e.key, nib, n.depth)
				}
			}
			entries = append(entries, sub...)
		}
		first, last := entries[0].key, entries[len(entries)-1].key
		if got := divergence(first, last, 0, max(pathEnd(first), pathEnd(last))); got != n.depth {
			t.Fatalf("branch %s splits at %d; its entries part at %d", ref.id.Short(), n.depth, got)
		}
		if !bytes.Equal(n.prefix, packPrefix(first, n.depth)) {
			t.Fatalf("branch %s prefix %x, entries share %x", ref.id.Short(), n.prefix, packPrefix(first, n.depth))
		}
	}
	if len(entries) != ref.count {
		t.Fatalf("node %s counts %d, holds %d", ref.id.Short(), ref.count, len(entries))
	}
	for _, e := range entries {
		if divergence(e.key, want, 0, depth) < depth {
			t.Fatalf("entry %q is off the path to its node (depth %d)", e.key, depth)
		}
	}
	return entries
}

// TestOrderedTrieLocality is what the layout is for: a batch of
// neighbouring keys added to a big map writes a few nodes, where the
// hashed layout rewrote a leaf for nearly every key.
func TestOrderedTrieLocality(t *testing.T) {
	nodes := memNodes{}
	var muts []trieMut
	for i := range 100000 {
		muts = append(muts, mutFor(fmt.Appendf(nil, "astep-%06d", i), []byte("v")))
	}
	w := newTrieWriter(nodes)
	root, err := w.apply(trieChild{}, muts)
	if err != nil {
		t.Fatal(err)
	}
	nodes.absorb(w)
	muts = muts[:0]
	for i := 100000; i < 102000; i++ {
		muts = append(muts, mutFor(fmt.Appendf(nil, "astep-%06d", i), []byte("v")))
	}
	w = newTrieWriter(nodes)
	if _, err := w.apply(root, muts); err != nil {
		t.Fatal(err)
	}
	// Decimal ids split by digit, ten entries a leaf: 2,000 new entries
	// fill about 200 leaves, and the branches above them and the path to
	// the root are a few more. The hashed layout rewrote about 1,900 of
	// its 2,600-odd leaves for the same commit.
	if len(w.written) > 300 {
		t.Fatalf("adding 2,000 neighbouring keys to 100,000 wrote %d nodes", len(w.written))
	}
	t.Logf("2,000 neighbouring keys onto 100,000: %d nodes written", len(w.written))
}

func TestDecodeOrderedNodeRejectsNonCanonical(t *testing.T) {
	leaf := func(keys ...string) []byte {
		n := &trieNode{leaf: true}
		for _, k := range keys {
			n.entries = append(n.entries, trieEntry{key: []byte(k), val: []byte("v")})
		}
		n.total = len(n.entries)
		return n.encode()
	}
	branch := func(depth int, prefix []byte, counts ...int) []byte {
		n := &trieNode{depth: depth, prefix: prefix, children: new([16]trieChild)}
		for i, c := range counts {
			n.children[i] = trieChild{id: hashing.Sum([]byte{byte(i)}), count: c}
			n.total += c
		}
		return n.encode()
	}
	if _, err := decodeNode(leaf("a", "b")); err != nil {
		t.Fatalf("a sound leaf: %v", err)
	}
	if _, err := decodeNode(branch(3, []byte{0x61, 0x70}, 20, 20)); err != nil {
		t.Fatalf("a sound branch: %v", err)
	}
	for name, b := range map[string][]byte{
		"keys out of order":    leaf("b", "a"),
		"a key twice":          leaf("a", "a"),
		"one child":            branch(2, []byte{0x61}, 40),
		"too few entries":      branch(2, []byte{0x61}, 10, 10),
		"bits past the prefix": branch(3, []byte{0x61, 0x71}, 20, 20),
		"depth past the bound": branch(maxNodeDepth+2, make([]byte, maxNodeDepth/2+1), 20, 20),
	} {
		if _, err := decodeNode(b); err == nil {
			t.Errorf("decodeNode accepted a node with %s", name)
		}
	}
	// Every truncation of sound nodes is refused, without a panic.
	for _, full := range [][]byte{branch(5, []byte{0x61, 0x62, 0x60}, 20, 20), branch(0, nil, 17, 18), leaf("abc", "abd")} {
		for i := range full {
			if _, err := decodeNode(full[:i]); err == nil {
				t.Errorf("decodeNode accepted %x, cut from %x", full[:i], full)
			}
		}
	}
}

// ---- the legacy (format 1) layout ----

// legacyPath is an entry's path in the hashed layout.
func legacyPath(key []byte) hashing.Digest { return sha256.Sum256(key) }

// legacyBuild writes entries as a trie of the hashed layout of format 1,
// as its writer did, to make the stores of that format in tests.
func legacyBuild(w *trieWriter, entries []trieEntry) trieChild {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b trieEntry) int {
		pa, pb := legacyPath(a.key), legacyPath(b.key)
		if c := bytes.Compare(pa[:], pb[:]); c != 0 {
			return c
		}
		return bytes.Compare(a.key, b.key)
	})
	var build func(es []trieEntry, depth int) trieChild
	build = func(es []trieEntry, depth int) trieChild {
		if len(es) <= maxLeaf || depth >= legacyMaxDepth {
			return w.store(&trieNode{leaf: true, legacy: true, entries: es, total: len(es)})
		}
		node := &trieNode{legacy: true, total: len(es), children: new([16]trieChild)}
		for i := 0; i < len(es); {
			nib := legacyNibble(legacyPath(es[i].key), depth)
			j := i + 1
			for j < len(es) && legacyNibble(legacyPath(es[j].key), depth) == nib {
				j++
			}
			node.children[nib] = build(es[i:j:j], depth+1)
			i = j
		}
		return w.store(node)
	}
	return build(sorted, 0)
}

func oracleEntries(m map[string]string) []trieEntry {
	var es []trieEntry
	for _, k := range slices.Sorted(maps.Keys(m)) {
		es = append(es, trieEntry{key: []byte(k), val: []byte(m[k])})
	}
	return es
}

// TestLegacyTrie: a trie of the hashed layout reads as before (lookups,
// walks, diffs against legacy and ordered tries), and a write onto it
// first rebuilds it in the ordered layout: the result is the ordered trie
// a build from scratch gives.
func TestLegacyTrie(t *testing.T) {
	for _, shape := range keyShapes {
		t.Run(shape.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 5))
			nodes := memNodes{}
			m1, m2 := map[string]string{}, map[string]string{}
			for range 1500 {
				k := shape.key(rng)
				m1[k] = fmt.Sprint(rng.IntN(9))
			}
			maps.Copy(m2, m1)
			for range 200 {
				k := shape.key(rng)
				if rng.IntN(2) == 0 {
					delete(m2, k)
				} else {
					m2[k] = "changed"
				}
			}
			w := newTrieWriter(nodes)
			l1, l2 := legacyBuild(w, oracleEntries(m1)), legacyBuild(w, oracleEntries(m2))
			nodes.absorb(w)
			checkAgainstOracle(t, "legacy 1", nodes, l1, m1)
			checkAgainstOracle(t, "legacy 2", nodes, l2, m2)
			checkDiff(t, "legacy to legacy", nodes, l1, l2, m1, m2)
			o1, o2 := buildFrom(t, nodes, m1), buildFrom(t, nodes, m2)
			checkDiff(t, "legacy to ordered", nodes, l1, o2, m1, m2)
			checkDiff(t, "ordered to legacy", nodes, o1, l2, m1, m2)

			up := newTrieWriter(nodes)
			got, err := up.upgrade(l1, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if got != o1 {
				t.Fatalf("upgrade gave %s/%d, an ordered build %s/%d", got.id.Short(), got.count, o1.id.Short(), o1.count)
			}
			// apply onto a legacy root upgrades it first.
			var muts []trieMut
			for k, v := range m2 {
				if m1[k] != v {
					muts = append(muts, mutFor([]byte(k), []byte(v)))
				}
			}
			for k := range m1 {
				if _, ok := m2[k]; !ok {
					muts = append(muts, mutFor([]byte(k), nil))
				}
			}
			aw := newTrieWriter(nodes)
			applied, err := aw.apply(l1, muts)
			if err != nil {
				t.Fatal(err)
			}
			if applied != o2 {
				t.Fatalf("apply onto a legacy root gave %s/%d, want the ordered %s/%d", applied.id.Short(), applied.count, o2.id.Short(), o2.count)
			}
		})
	}
}

// TestOrderedDiffReadsWhatDiffers: a diff between a big map and a small
// change of it reads about the nodes the change wrote, on both sides —
// also when the change makes a split above the old root (a key off the
// common prefix) or removes one — never the whole map.
func TestOrderedDiffReadsWhatDiffers(t *testing.T) {
	nodes := memNodes{}
	var muts []trieMut
	for i := range 20000 {
		muts = append(muts, mutFor(fmt.Appendf(nil, "astep-%06d", i), []byte("v")))
	}
	w := newTrieWriter(nodes)
	base, err := w.apply(trieChild{}, muts)
	if err != nil {
		t.Fatal(err)
	}
	nodes.absorb(w)
	for _, tc := range []struct {
		name string
		muts []trieMut
	}{
		{"update three", []trieMut{mutFor([]byte("astep-000007"), []byte("w")), mutFor([]byte("astep-012345"), []byte("w")), mutFor([]byte("astep-019999"), []byte("w"))}},
		{"delete one", []trieMut{mutFor([]byte("astep-004321"), nil)}},
		{"split above the root", []trieMut{mutFor([]byte("b"), []byte("w")), mutFor([]byte("ezz"), []byte("w"))}},
		{"split inside the prefix", []trieMut{mutFor([]byte("astep"), []byte("w")), mutFor([]byte("astex"), []byte("w"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTrieWriter(nodes)
			next, err := w.apply(base, tc.muts)
			if err != nil {
				t.Fatal(err)
			}
			nodes.absorb(w)
			for _, dir := range [][2]trieChild{{base, next}, {next, base}} {
				src := &countingNodes{nodeSource: nodes}
				changes := 0
				if err := trieDiff(src, dir[0], dir[1], func(k, o, n []byte) error { changes++; return nil }); err != nil {
					t.Fatal(err)
				}
				if changes != len(tc.muts) {
					t.Fatalf("diff reported %d changes, want %d", changes, len(tc.muts))
				}
				if limit := 2*len(w.written) + 4; src.reads > limit {
					t.Fatalf("diff read %d nodes; the change wrote %d (limit %d)", src.reads, len(w.written), limit)
				}
			}
		})
	}
}

// legacyFixtureEntries are the entries of testdata/legacy-state-map.txt:
// the nodes the format-1 writer (as of commit f874cb1) made of them, with
// their root on the first line. Edges have empty values.
func legacyFixtureEntries() map[string]string {
	m := map[string]string{}
	for i := range 300 {
		id := fmt.Sprintf("a%d", i)
		m[string(tkArtifact(id))] = fmt.Sprintf("artifact %d", i)
		if i > 0 {
			m[string(tkEdge(graph.EdgeKey{From: id, Rel: "derived_from", To: fmt.Sprintf("a%d", i/2)}))] = ""
		}
		if i%7 == 0 {
			m[string(tkTomb(fmt.Sprintf("gone-%d", i)))] = fmt.Sprint(i%5 + 1)
		}
	}
	return m
}

// TestLegacyFixture reads a state map written by the format-1 writer
// itself, not by legacyBuild: lookups, the walk and diffs agree with its
// entries, legacyBuild makes the same root (so the other legacy tests
// build what that writer built), and the upgrade is the ordered build.
func TestLegacyFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/legacy-state-map.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var root trieChild
	var rootHex string
	if _, err := fmt.Sscanf(lines[0], "root %s %d", &rootHex, &root.count); err != nil {
		t.Fatalf("first line %q: %v", lines[0], err)
	}
	if _, err := hex.Decode(root.id[:], []byte(rootHex)); err != nil {
		t.Fatal(err)
	}
	nodes := memNodes{}
	for _, line := range lines[1:] {
		idHex, encHex, _ := strings.Cut(line, " ")
		var id hashing.Digest
		enc, err := hex.DecodeString(encHex)
		if _, err2 := hex.Decode(id[:], []byte(idHex)); err != nil || err2 != nil || hashing.Sum(enc) != id {
			t.Fatalf("fixture line %.40q: bad (%v, %v)", line, err, err2)
		}
		nodes[id] = enc
	}
	oracle := legacyFixtureEntries()
	checkAgainstOracle(t, "format-1 fixture", nodes, root, oracle)
	w := newTrieWriter(nodes)
	if again := legacyBuild(w, oracleEntries(oracle)); again != root {
		t.Fatalf("legacyBuild gave %s/%d, the format-1 writer %s/%d", again.id.Short(), again.count, root.id.Short(), root.count)
	}
	ordered := buildFrom(t, nodes, oracle)
	up, err := newTrieWriter(nodes).upgrade(root, nodes)
	if err != nil || up != ordered {
		t.Fatalf("upgrade gave %v, %v; want the ordered build %v", up, err, ordered)
	}
	changed := maps.Clone(oracle)
	delete(changed, string(tkArtifact("a17")))
	changed[string(tkArtifact("a18"))] = "changed"
	changed[string(tkArtifact("new"))] = "added"
	checkDiff(t, "format 1 to 2", nodes, root, buildFrom(t, nodes, changed), oracle, changed)
}

// BenchmarkTrieApplyOne is a one-artifact commit's state-map update: one
// new key into a map of 20,000 keys of 16 writers (ids c<writer>-<n>, as
// `artifactd bench --clients 16` writes them), nodes in memory.
func BenchmarkTrieApplyOne(b *testing.B) {
	val := []byte("value of some fifty bytes, like an artifact's meta")
	var muts []trieMut
	for i := range 1250 {
		for c := range 16 {
			muts = append(muts, mutFor(fmt.Appendf(nil, "ac%d-%d", c, i), val))
		}
	}
	root, src := decodedTrie(b, muts)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := newTrieWriter(src)
		if _, err := w.apply(root, []trieMut{mutFor(fmt.Appendf(nil, "ac%d-%d", i%16, 1250+i/16), val)}); err != nil {
			b.Fatal(err)
		}
	}
}

// decodedTrie builds the trie of muts in memory and returns its root and
// its nodes, served decoded.
func decodedTrie(b *testing.B, muts []trieMut) (trieChild, *decodedNodes) {
	b.Helper()
	nodes := memNodes{}
	w := newTrieWriter(nodes)
	root, err := w.apply(trieChild{}, muts)
	if err != nil {
		b.Fatal(err)
	}
	nodes.absorb(w)
	return root, &decodedNodes{raw: nodes, m: map[hashing.Digest]*trieNode{}}
}

// decodedNodes serves memNodes decoded once, as the node cache does.
type decodedNodes struct {
	raw memNodes
	m   map[hashing.Digest]*trieNode
}

func (d *decodedNodes) node(id hashing.Digest) (*trieNode, error) {
	if n := d.m[id]; n != nil {
		return n, nil
	}
	n, err := d.raw.node(id)
	if err == nil {
		d.m[id] = n
	}
	return n, err
}

// TestTriePrefixWalk: for every key shape, a walk of any prefix — of a
// stored key, of an absent one, empty, one byte — yields exactly the
// entries of the oracle that start with it, in key order, stops when told
// to, and reads about the trie's depth plus the nodes that hold them.
func TestTriePrefixWalk(t *testing.T) {
	for _, shape := range keyShapes {
		t.Run(shape.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(len(shape.name))))
			oracle := map[string]string{}
			for range 2500 {
				oracle[shape.key(rng)] = fmt.Sprint(rng.IntN(1000))
			}
			delete(oracle, "")
			nodes := memNodes{}
			root := buildFrom(t, nodes, oracle)
			keys := slices.Sorted(maps.Keys(oracle))
			prefixes := []string{"", "a", "e", "r", "zz", "\x00"}
			for range 200 {
				k := keys[rng.IntN(len(keys))]
				prefixes = append(prefixes, k, k[:rng.IntN(len(k)+1)], k+"\x00", k[:len(k)-1]+"\xff")
			}
			for _, p := range prefixes {
				var want []string
				for _, k := range keys {
					if strings.HasPrefix(k, p) {
						want = append(want, k+"="+oracle[k])
					}
				}
				src := &countingNodes{nodeSource: nodes}
				var got []string
				if err := trieWalkFrom(src, root, []byte(p), []byte(p), func(k, v []byte) bool {
					got = append(got, string(k)+"="+string(v))
					return true
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("prefix %q: walked %d entries, want %d\n%q\n%q", p, len(got), len(want), got, want)
				}
				if len(want) <= 2 && p != "" && src.reads > 2*trieHeight(t, nodes, root)+4 {
					t.Fatalf("prefix %q: %d node reads for %d entries (height %d)", p, src.reads, len(want), trieHeight(t, nodes, root))
				}
				if len(want) > 1 {
					n := 0
					if err := trieWalkFrom(nodes, root, []byte(p), []byte(p), func(k, v []byte) bool { n++; return n < 2 }); err != nil || n != 2 {
						t.Fatalf("prefix %q: a walk told to stop after 2 yielded %d (%v)", p, n, err)
					}
				}
			}
		})
	}
}

// BenchmarkTrieGetTrust looks up the trust entries of random artifacts of
// a map of 200,000 confirmed artifacts and their edges — a map with no
// trust entry, as a context whose every artifact is confirmed has —
// nodes in memory: what deciding a commit asks once for each artifact
// its links point at.
func BenchmarkTrieGetTrust(b *testing.B) {
	val := []byte("value of some fifty bytes, like an artifact's meta")
	var muts []trieMut
	for i := range 200000 {
		muts = append(muts, mutFor(tkArtifact(fmt.Sprintf("a%d", i)), val),
			mutFor(tkEdge(graph.EdgeKey{From: fmt.Sprintf("a%d", i), Rel: "derived_from", To: fmt.Sprintf("a%d", i/2)}), []byte{}))
	}
	root, src := decodedTrie(b, muts)
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		if v, err := trieGet(src, root, tkTrust(fmt.Sprintf("a%d", rng.IntN(200000)))); err != nil || v != nil {
			b.Fatal(v, err)
		}
	}
}

// trieWalkFrom calls fn for every entry below root (an ordered trie)
// whose key starts with prefix and is not less than from, in key order,
// until fn returns false: mapSource.walk without its windows, for the
// tests of walkFrom. It follows prefix's nibbles down to the subtree that
// holds every such key (triePrefixRoot), then descends along from's path,
// skipping every subtree whose keys all sort before from without reading
// it.
func trieWalkFrom(src nodeSource, root trieChild, prefix, from []byte, fn func(key, val []byte) bool) error {
	sub, err := triePrefixRoot(src, root, prefix)
	if err != nil || sub.count == 0 {
		return err
	}
	if bytes.Compare(from, prefix) < 0 {
		from = prefix // the least key that starts with prefix
	}
	n, err := src.node(sub.id)
	if err != nil {
		return err
	}
	_, err = walkFrom(src, n, prefix, from, fn)
	return err
}
