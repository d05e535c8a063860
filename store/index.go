package store

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// checkIndex compares the index in the state map of commit c (format 3:
// reverse edges and trust entries; doc.go, "Key layout") and the
// sizes its record keeps with what they must be for st, the state at c
// loaded whole, and its trust index computed afresh. A commit without an
// index passes.
func (s *Store) checkIndex(c *replay.Commit, st *graph.State) error {
	if c.Index == nil {
		return nil
	}
	trust := graph.NewTrustIndex(st, s.baseFor(st))
	want := indexMutations(st, trust)
	slices.SortFunc(want, func(a, b trieMut) int { return bytes.Compare(a.key, b.key) })
	var got []trieMut
	err := trieWalk(s, trieChild{id: c.Root, count: c.RootCount}, func(k, v []byte) error {
		switch k[0] {
		case 'r':
			if _, err := splitRevKey(k); err != nil {
				return fmt.Errorf("reverse edge %q: %w", k, err)
			}
		case 'q':
			if _, _, err := decodeTrustVal(v); err != nil {
				return fmt.Errorf("trust entry %q: %w", k, err)
			}
		default:
			return nil
		}
		got = append(got, trieMut{key: bytes.Clone(k), val: bytes.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	// A format-1 map walks in hash order.
	slices.SortFunc(got, func(a, b trieMut) int { return bytes.Compare(a.key, b.key) })
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Errorf("state map index lacks %q", want[i].key)
		case i >= len(want):
			return fmt.Errorf("state map index holds %q, which the state does not have", got[i].key)
		case !bytes.Equal(got[i].key, want[i].key):
			return fmt.Errorf("state map index holds %q where the state has %q", got[i].key, want[i].key)
		case !bytes.Equal(got[i].val, want[i].val):
			return fmt.Errorf("state map index entry %q is %x, the state gives %x", got[i].key, got[i].val, want[i].val)
		}
	}
	if want := st.TypeCounts(); !maps.Equal(c.Index.Types, want) {
		return fmt.Errorf("records type counts %v, the state has %v", c.Index.Types, want)
	}
	if c.Index.Tombstones != st.NumTombstones() {
		return fmt.Errorf("records %d tombstones, the state has %d", c.Index.Tombstones, st.NumTombstones())
	}
	sum := trust.Summary()
	if c.Index.PoisonRoots != sum.PoisonRoots || c.Index.Quarantined != sum.Quarantined {
		return fmt.Errorf("records %d poison roots and %d quarantined, the state has %d and %d", c.Index.PoisonRoots, c.Index.Quarantined, sum.PoisonRoots, sum.Quarantined)
	}
	return nil
}
