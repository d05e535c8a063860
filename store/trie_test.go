package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// memNodes is an in-memory node source for trie tests.
type memNodes map[hashing.Digest][]byte

func (m memNodes) node(id hashing.Digest) (*trieNode, error) {
	raw, ok := m[id]
	if !ok {
		return nil, errNodeMissing
	}
	return decodeNode(raw)
}

func (m memNodes) absorb(w *trieWriter) {
	for id, enc := range w.written {
		m[id] = enc
	}
}

func TestTrieDiffCountsChanges(t *testing.T) {
	nodes := memNodes{}
	w := newTrieWriter(nodes)
	var muts []trieMut
	for i := 0; i < 5000; i++ {
		muts = append(muts, mutFor([]byte(fmt.Sprintf("a%d", i)), []byte("x")))
	}
	a, _ := w.apply(trieChild{}, muts)
	nodes.absorb(w)
	w = newTrieWriter(nodes)
	b, _ := w.apply(a, []trieMut{
		mutFor([]byte("a1"), []byte("y")),  // changed
		mutFor([]byte("a2"), nil),          // removed
		mutFor([]byte("new"), []byte("z")), // added
		mutFor([]byte("a3"), []byte("x")),  // unchanged
	})
	nodes.absorb(w)
	var got []string
	if err := trieDiff(nodes, a, b, func(k, o, n []byte) error {
		got = append(got, fmt.Sprintf("%s:%s>%s", k, o, n))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := []string{"a1:x>y", "a2:x>", "new:>z"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff = %v, want %v", got, want)
	}
}

func TestDecodeNodeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {'X'}, {'L', 5}, {'B', 3, 0, 1}, append([]byte{'L', 1, 1, 'k', 1, 'v'}, 9)} {
		if _, err := decodeNode(b); err == nil {
			t.Errorf("decodeNode(%q) accepted garbage", b)
		}
	}
}

// countingNodes is a node source that counts its point reads.
type countingNodes struct {
	nodeSource
	reads int
}

func (c *countingNodes) node(id hashing.Digest) (*trieNode, error) {
	c.reads++
	return c.nodeSource.node(id)
}

// TestTrieGetStopsOffABranch checks that a lookup of a key off a branch's
// prefix ends at that branch: a trust entry ('q' id) looked up in a map
// of artifacts ('a' id) reads the root and nothing below, although 'q'
// and 'a' share the nibble the root splits on, and trieGetMany reads no
// level below a cached root for such keys.
func TestTrieGetStopsOffABranch(t *testing.T) {
	base := memNodes{}
	w := newTrieWriter(base)
	var muts []trieMut
	for i := range 5000 {
		muts = append(muts, mutFor(fmt.Appendf(nil, "a%d", i), []byte("v")), mutFor(fmt.Appendf(nil, "e%d", i), []byte("v")))
	}
	root, err := w.apply(trieChild{}, muts)
	if err != nil {
		t.Fatal(err)
	}
	base.absorb(w)
	rootNode, err := base.node(root.id)
	if err != nil {
		t.Fatal(err)
	}
	if rootNode.leaf || rootNode.depth != 1 || keyNibble([]byte("q"), 1) != keyNibble([]byte("a"), 1) {
		t.Fatalf("fixture: root leaf=%v depth %d; want a branch on the low nibble of the first byte", rootNode.leaf, rootNode.depth)
	}
	src := &countingNodes{nodeSource: base}
	var keys [][]byte
	for i := range 200 {
		k := fmt.Appendf(nil, "q%d", i*25)
		src.reads = 0
		v, err := trieGet(src, root, k)
		if err != nil || v != nil {
			t.Fatalf("get %q = %q, %v; want absent", k, v, err)
		}
		if src.reads != 1 {
			t.Fatalf("get %q read %d nodes; want the root alone", k, src.reads)
		}
		keys = append(keys, k)
		// The artifact beside it is there, and its lookup descends.
		src.reads = 0
		a := fmt.Appendf(nil, "a%d", i*25)
		if v, err := trieGet(src, root, a); err != nil || string(v) != "v" {
			t.Fatalf("get %q = %q, %v", a, v, err)
		}
		if src.reads < 3 {
			t.Fatalf("get %q read %d nodes; want its path down to a leaf", a, src.reads)
		}
	}
	cached := func(id hashing.Digest) *trieNode {
		if id == root.id {
			return rootNode
		}
		return nil
	}
	read := func(ids []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		return nil, fmt.Errorf("read %d nodes below the root", len(ids))
	}
	if err := trieGetMany(root, keys, cached, read, func(i int, _ []byte) {
		t.Errorf("found %q", keys[i])
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTrieWarm checks that warm reads ahead, one call per level, every
// stored node a batch of sets descends into — apply then makes no point
// read — and that a warmed apply gives the root an unwarmed one gives,
// for batches of sets, deletes and both.
func TestTrieWarm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	base := memNodes{}
	w := newTrieWriter(base)
	var initial []trieMut
	for i := range 20000 {
		initial = append(initial, mutFor(fmt.Appendf(nil, "k%d", i), []byte("v")))
	}
	root, err := w.apply(trieChild{}, initial)
	if err != nil {
		t.Fatal(err)
	}
	base.absorb(w)
	height := trieHeight(t, base, root)
	for _, tc := range []struct {
		name    string
		deletes int // in 100
		reads   bool
	}{{"sets", 0, true}, {"mixed", 30, false}, {"deletes", 100, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var muts []trieMut
			for range 3000 {
				k := fmt.Appendf(nil, "k%d", rng.IntN(30000))
				if rng.IntN(100) < tc.deletes {
					muts = append(muts, mutFor(k, nil))
				} else {
					muts = append(muts, mutFor(k, fmt.Appendf(nil, "w%d", rng.IntN(9))))
				}
			}
			plain, err := newTrieWriter(base).apply(root, muts)
			if err != nil {
				t.Fatal(err)
			}
			src := &countingNodes{nodeSource: base}
			warmed := newTrieWriter(src)
			calls, ids := 0, 0
			read := func(want []hashing.Digest) (map[hashing.Digest]*trieNode, error) {
				calls++
				ids += len(want)
				return readFrom(base)(want)
			}
			if err := warmed.warm(root, muts, nil, read); err != nil {
				t.Fatal(err)
			}
			if calls == 0 || calls > height || ids < 100 {
				t.Fatalf("warm read %d nodes in %d calls; want the touched leaves in one call per level", ids, calls)
			}
			got, err := warmed.apply(root, muts)
			if err != nil {
				t.Fatal(err)
			}
			if got != plain {
				t.Fatalf("warmed root %v, plain %v", got, plain)
			}
			if tc.reads && src.reads != 0 {
				t.Fatalf("apply made %d point reads after warm", src.reads)
			}
			if warmed.read != nil {
				t.Fatal("apply kept the warmed nodes")
			}
		})
	}
}

// TestTrieWarmErrors: a failed read or a node the read does not return
// fails warm and leaves nothing read ahead; nodes the cache has are not
// read at all.
func TestTrieWarmErrors(t *testing.T) {
	base := memNodes{}
	w := newTrieWriter(base)
	var muts []trieMut
	for i := range 5000 {
		muts = append(muts, mutFor(fmt.Appendf(nil, "k%d", i), []byte("v")))
	}
	root, err := w.apply(trieChild{}, muts)
	if err != nil {
		t.Fatal(err)
	}
	base.absorb(w)
	failing := func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) { return nil, errNodeMissing }
	empty := func([]hashing.Digest) (map[hashing.Digest]*trieNode, error) {
		return map[hashing.Digest]*trieNode{}, nil
	}
	for name, read := range map[string]func([]hashing.Digest) (map[hashing.Digest]*trieNode, error){"failing": failing, "empty": empty} {
		tw := newTrieWriter(base)
		if err := tw.warm(root, muts, nil, read); !errors.Is(err, errNodeMissing) {
			t.Fatalf("%s read: warm gave %v", name, err)
		}
		if tw.read != nil {
			t.Fatalf("%s read: warm kept %d nodes", name, len(tw.read))
		}
	}
	cached := func(id hashing.Digest) *trieNode {
		n, err := base.node(id)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tw := newTrieWriter(base)
	if err := tw.warm(root, muts, cached, failing); err != nil {
		t.Fatalf("warm read with every node cached: %v", err)
	}
	if len(tw.read) == 0 {
		t.Fatal("warm kept none of the cached nodes")
	}
}

// trieHeight returns the number of nodes on the longest path from root
// to a leaf.
func trieHeight(t *testing.T, src nodeSource, root trieChild) int {
	t.Helper()
	if root.count == 0 {
		return 0
	}
	n, err := src.node(root.id)
	if err != nil {
		t.Fatal(err)
	}
	h := 0
	if !n.leaf {
		for _, c := range n.children {
			h = max(h, trieHeight(t, src, c))
		}
	}
	return h + 1
}
