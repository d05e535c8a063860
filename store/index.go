package store

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// checkMapIndex compares the index in the state map of commit c (trust
// entries, and in a map of format 3 reverse edges; doc.go, "Key layout")
// and the sizes its record keeps with what they must be for st, the
// state at c loaded whole, and its trust index computed afresh. A map
// whose reverse edges are apart is checked against the context's reverse
// index by checkReverseIndexOf. A commit without an index passes. The
// walk of the map stops when ctx ends, failing with ctx's error.
func (s *Store) checkMapIndex(ctx context.Context, c *replay.Commit, st *graph.State) error {
	if c.Index == nil {
		return nil
	}
	trust := graph.NewTrustIndex(st, s.baseFor(st))
	revInMap := !c.Index.ReverseApart
	want := indexMutations(st, trust, revInMap)
	slices.SortFunc(want, func(a, b trieMut) int { return bytes.Compare(a.key, b.key) })
	var got []trieMut
	err := trieWalk(s, trieChild{id: c.Root, count: c.RootCount}, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
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

// checkReverseIndexOf checks that the reverse index of context ctxID
// names every edge of each of sts, states of that context loaded whole,
// in one pass over the index in key order (an artifact's records are
// together), comparing each artifact's edges in every state with those
// its records name: fsck checks the heads of a context's branches in as
// few passes as its head budget allows, not one each. errs[i] names the
// first edge of sts[i] the index lacks — in the index's key order, else,
// for edges into artifacts the index has no record of, the least by
// (to, rel, from) — or is nil. err is a failed or malformed read of the
// index; errs then holds what the pass found before it (an edge found
// lacking before a bad record is still named, as a pass that stops at
// the first lacking edge would name it).
func (s *Store) checkReverseIndexOf(ctx context.Context, ctxID string, sts []*graph.State) (errs []error, err error) {
	errs = make([]error, len(sts))
	var (
		cur   string
		named = map[graph.EdgeKey]bool{}
		seen  = map[string]bool{}
	)
	lacks := func(e *graph.Edge) error {
		return fmt.Errorf("reverse index lacks the edge %q -%s-> %q", e.From, e.Rel, e.To)
	}
	check := func() {
		if cur == "" {
			return
		}
		seen[cur] = true
		for i, st := range sts {
			if errs[i] != nil {
				continue
			}
			for _, e := range st.In(cur) {
				if !named[e.Key()] {
					errs[i] = lacks(e)
					break
				}
			}
		}
		clear(named)
	}
	err = s.kv.Scan(ctx, prefixRevs(ctxID), nil, 0, func(k, v []byte) error {
		to, err := revTarget(ctxID, k)
		if err != nil {
			return err
		}
		if to != cur {
			check()
			cur = to
		}
		return decodeRevVal(to, v, func(e graph.EdgeKey) { named[e] = true })
	})
	if err != nil {
		return errs, err
	}
	check()
	for i, st := range sts {
		if errs[i] != nil {
			continue
		}
		var least *graph.Edge // edges range in no set order: name the least
		st.RangeEdges(func(e *graph.Edge) bool {
			if !seen[e.To] && (least == nil || edgeByTarget(e.Key(), least.Key()) < 0) {
				least = e
			}
			return true
		})
		if least != nil {
			errs[i] = lacks(least)
		}
	}
	return errs, nil
}

// edgeByTarget orders edge keys by (to, rel, from), as the reverse index
// keeps them.
func edgeByTarget(a, b graph.EdgeKey) int {
	return cmp.Or(strings.Compare(a.To, b.To), compareRev(a, b))
}
