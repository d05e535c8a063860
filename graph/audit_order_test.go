package graph

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// auditByDepthMap is an oracle for Audit's order: the algorithm Audit
// used before its depths moved into a slice beside the walk — depths in
// a map by id, then one sort of the whole order by (depth, id) — with the
// payloads read in one call.
func auditByDepthMap(s *State, answerID string, meta AuditMeta) (*AuditReport, error) {
	if s.art(answerID) == nil {
		return nil, fmt.Errorf("graph: audit %q: %w", answerID, ErrNotFound)
	}
	trust := ComputeTrust(s, s.Base(nil)).Trust
	r := &AuditReport{AuditMeta: meta, Answer: answerID, Edges: []*Edge{}, Sources: []AuditSource{}}
	depth := map[string]int{answerID: 0}
	seen := map[string]bool{answerID: true}
	order := []string{answerID}
	for i := 0; i < len(order); i++ {
		for k, e := range s.outOf(order[i]).all() {
			if !s.rels.Depends(k.Rel) {
				continue
			}
			r.Edges = append(r.Edges, e)
			if !seen[k.To] {
				depth[e.To] = depth[order[i]] + 1
				seen[k.To] = true
				order = append(order, k.To)
			}
		}
	}
	SortEdges(r.Edges)
	slices.SortFunc(order, func(a, b string) int {
		if depth[a] != depth[b] {
			return depth[a] - depth[b]
		}
		return strings.Compare(a, b)
	})
	sources := map[string][]string{}
	for _, id := range order {
		a := s.art(id)
		tr := trust(id)
		r.Artifacts = append(r.Artifacts, AuditArtifact{ID: id, Type: a.Type, Version: a.Version,
			ContentHash: a.ContentHash, ProducedBy: a.ProducedBy, Depth: depth[id], Trust: tr})
		switch tr.Status {
		case StatusConfirmed:
			r.Summary.Confirmed++
		case StatusQuarantined:
			r.Summary.Quarantined++
		case StatusPoisonRoot:
			r.Summary.PoisonRoots++
		}
		for _, loc := range locators(a.Data) {
			if l := sources[loc]; len(l) == 0 || l[len(l)-1] != id {
				sources[loc] = append(l, id)
			}
		}
	}
	r.Trust = r.Artifacts[0].Trust
	for loc, ids := range sources {
		slices.Sort(ids)
		r.Sources = append(r.Sources, AuditSource{Locator: loc, Artifacts: ids})
	}
	slices.SortFunc(r.Sources, func(a, b AuditSource) int { return strings.Compare(a.Locator, b.Locator) })
	return r, nil
}

// sameAudit fails t unless Audit's report of id equals the oracle's,
// field for field and byte for byte as JSON, and is ordered by depth,
// then id.
func sameAudit(t *testing.T, what string, s *State, id string) {
	t.Helper()
	got, gerr := Audit(s, id, nil, nil, AuditMeta{Context: "c"})
	want, werr := auditByDepthMap(s, id, AuditMeta{Context: "c"})
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%s: audit %s: err %v, oracle %v", what, id, gerr, werr)
	}
	if gerr != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: audit %s differs from the oracle\n got %+v\nwant %+v", what, id, got.Artifacts, want.Artifacts)
	}
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(gb) != string(wb) {
		t.Fatalf("%s: audit %s: JSON differs from the oracle's", what, id)
	}
	for i := 1; i < len(got.Artifacts); i++ {
		a, b := got.Artifacts[i-1], got.Artifacts[i]
		if a.Depth > b.Depth || a.Depth == b.Depth && a.ID >= b.ID {
			t.Fatalf("%s: audit %s not ordered by depth, then id, at %d", what, id, i)
		}
	}
}

// TestAuditMatchesDepthMapOracle: on random DAGs — several relations
// (dependencies and not) between one pair, diamonds, artifacts reached
// at one depth from different parents, ids whose order is not the
// walk's — and on the fork generator's states, whole and over a source,
// Audit's report equals the oracle's (auditByDepthMap).
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
			sameAudit(t, what, s, name(i))
		}
		sameAudit(t, what, s, "absent")
	}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		const nids = 24
		s := NewState(nil)
		for range 30 {
			f := s.Fork()
			if _, err := f.ApplyOps(forkOps(r, s, nids, seed%2 == 0)); err == nil {
				if err := s.Absorb(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		snap := wholeCopy(s)
		lz, err := NewStateOver(s.ruleset, newStateSource(snap), Counts{s.nArt, s.nTomb, s.nEdge}, definitionsOf(snap), s.acc.Clone())
		if err != nil {
			t.Fatal(err)
		}
		for i := range nids + 1 {
			id := "n" + strconv.Itoa(i)
			sameAudit(t, "fork", s, id)
			sameAudit(t, "fork over a source", lz, id)
		}
	}
}
