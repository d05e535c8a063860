package graph

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// auditedAt is one artifact of an audit's report as the order oracle
// sees it: its id and its depth.
type auditedAt struct {
	id    string
	depth int
}

// auditOrderOracle returns the artifacts and edges an audit of answerID
// reports, in the report's order, as Audit found them before its depths
// moved into a slice beside its walk: depths in a map by id, then one
// sort of the whole order by (depth, id).
func auditOrderOracle(s *State, answerID string) ([]auditedAt, []*Edge) {
	depth := map[string]int{answerID: 0}
	seen := map[string]bool{answerID: true}
	order := []string{answerID}
	edges := []*Edge{}
	for i := 0; i < len(order); i++ {
		for k, e := range s.outOf(order[i]).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			edges = append(edges, e)
			if !seen[k.To] {
				depth[k.To] = depth[order[i]] + 1
				seen[k.To] = true
				order = append(order, k.To)
			}
		}
	}
	SortEdges(edges)
	slices.SortFunc(order, func(a, b string) int {
		if depth[a] != depth[b] {
			return depth[a] - depth[b]
		}
		return strings.Compare(a, b)
	})
	out := make([]auditedAt, len(order))
	for i, id := range order {
		out[i] = auditedAt{id, depth[id]}
	}
	return out, edges
}

// sameAuditOrder fails t unless Audit's report of id lists the oracle's
// artifacts, depths and edges, in its order; an id the state lacks is
// ErrNotFound.
func sameAuditOrder(t *testing.T, what string, s *State, id string) {
	t.Helper()
	rep, err := Audit(s, id, nil, nil, AuditMeta{})
	if s.art(id) == nil {
		if err == nil {
			t.Fatalf("%s: audit of absent %s: no error", what, id)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: audit %s: %v", what, id, err)
	}
	got := make([]auditedAt, len(rep.Artifacts))
	for i, a := range rep.Artifacts {
		got[i] = auditedAt{a.ID, a.Depth}
	}
	want, edges := auditOrderOracle(s, id)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: audit %s reports\n %v\nthe oracle\n %v", what, id, got, want)
	}
	if !reflect.DeepEqual(rep.Edges, edges) {
		t.Fatalf("%s: audit %s: edges differ from the oracle's", what, id)
	}
}

// TestAuditMatchesDepthMapOracle: on random DAGs — several relations
// (dependencies and not) between one pair, diamonds, artifacts reached
// at one depth from different parents, ids whose order is not the
// walk's — and on the fork generator's states, whole and over a source,
// Audit reports the artifacts, depths and edges of the algorithm it
// replaced (auditOrderOracle), in its order.
func TestAuditMatchesDepthMapOracle(t *testing.T) {
	rels := []string{"derived_from", "supported_by", "uses", "quotes", "mentions", "cites", "contradicts"}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 11))
		n := 2 + r.IntN(60)
		perm := r.Perm(n) // ids not in the walk's order
		name := func(i int) string { return fmt.Sprintf("a%03d", perm[i]) }
		s := NewState(nil)
		var ops []Op
		for i := range n {
			ops = append(ops, tqPutData(name(i), "claim", map[string]any{"url": "u" + strconv.Itoa(r.IntN(5))}))
		}
		for i := range n {
			for range r.IntN(4) {
				j := i + 1 + r.IntN(max(1, min(n-i-1, 1+r.IntN(8))))
				if j >= n {
					continue
				}
				for range 1 + r.IntN(3) {
					ops = append(ops, tqLink(name(i), rels[r.IntN(len(rels))], name(j)))
				}
			}
		}
		if _, err := s.ApplyOps(ops); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		what := "dag seed " + strconv.FormatUint(seed, 10)
		for i := range n {
			sameAuditOrder(t, what, s, name(i))
		}
		sameAuditOrder(t, what, s, "absent")
	}
	for seed := range uint64(40) {
		s, lz, _ := forkGenState(t, seed)
		for i := range forkGenIDs + 1 {
			id := "n" + strconv.Itoa(i)
			sameAuditOrder(t, "fork", s, id)
			sameAuditOrder(t, "fork over a source", lz, id)
		}
	}
}
