package graph

import (
	"fmt"
	"reflect"
	"testing"
)

// TestExplainerMatchesExplain is an oracle: on random graphs with several
// poison roots, and on a chain longer than MaxTrustPath, the memoising
// explainer gives every artifact exactly the Trust that Explain gives it,
// whatever order the artifacts are asked in.
func TestExplainerMatchesExplain(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		s := tqBigState(3000, 2, seed)
		tqPoison(s, 8, seed)
		idx := NewTrustIndex(s, tqBase)
		ids := s.ArtifactIDs()
		ex := idx.Explainer(s)
		// Ask the deepest first, then the rest in reverse id order.
		for i := len(ids) - 1; i >= 0; i-- {
			id := ids[i]
			if got, want := ex(id), idx.Explain(s, id); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, %s:\n got %s\nwant %s", seed, id, tqDescribe(got), tqDescribe(want))
			}
		}
		if idx.Summary().Quarantined == 0 {
			t.Fatalf("seed %d: the fixture quarantines nothing", seed)
		}
	}
	s := NewState(nil)
	ops := []Op{tqFetch("c0000", "FAILED", "http.500")}
	for i := 1; i < 500; i++ {
		ops = append(ops, tqPut(fmt.Sprintf("c%04d", i), "claim"), tqLink(fmt.Sprintf("c%04d", i), "derived_from", fmt.Sprintf("c%04d", i-1)))
	}
	tqApply(t, s, ops...)
	idx := NewTrustIndex(s, tqBase)
	ex := idx.Explainer(s)
	for _, id := range []string{"c0499", "c0064", "c0063", "c0001", "c0000"} {
		if got, want := ex(id), idx.Explain(s, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("chain %s:\n got %s\nwant %s", id, tqDescribe(got), tqDescribe(want))
		}
	}
}

// BenchmarkAuditDeepChain audits the tip of a quarantined chain: with the
// explainer it is linear in the chain, with Explain per artifact it was
// quadratic.
func BenchmarkAuditDeepChain(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		s := NewState(nil)
		ops := []Op{tqFetch("c0", "FAILED", "http.500")}
		for i := 1; i < n; i++ {
			ops = append(ops, tqPut(fmt.Sprintf("c%d", i), "claim"), tqLink(fmt.Sprintf("c%d", i), "derived_from", fmt.Sprintf("c%d", i-1)))
		}
		tqApply(b, s, ops...)
		idx := NewTrustIndex(s, tqBase)
		tip := fmt.Sprintf("c%d", n-1)
		b.Run(fmt.Sprintf("explainer/depth=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Audit(s, tip, idx.Explainer(s), nil, AuditMeta{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if n > 2000 {
			continue // one Explain per artifact is quadratic: minutes at 20k
		}
		b.Run(fmt.Sprintf("explain-each/depth=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Audit(s, tip, func(id string) Trust { return idx.Explain(s, id) }, nil, AuditMeta{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExplainReadsNoHubDependents: explaining an artifact that rests on a
// quarantined hub walks up from it, never down the hub's thousands of
// dependents — the UI explains every node it draws around a hub, and a
// walk of the hub's in-edges for each took seconds. The explanation is
// the whole state's.
func TestExplainReadsNoHubDependents(t *testing.T) {
	const dependents = 5000
	s := NewState(nil)
	ops := []Op{tqFetch("poison", "FAILED", "transport.empty_body"), tqPut("hub", "claim"), tqLink("hub", "derived_from", "poison")}
	for i := range dependents {
		id := fmt.Sprintf("d%04d", i)
		ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "hub"))
	}
	tqApply(t, s, ops...)
	idx := NewTrustIndex(s, tqBase)
	src := newStateSource(wholeCopy(s))
	lz, err := NewStateOver(s.ruleset, src, Counts{s.nArt, s.nTomb, s.nEdge}, definitionsOf(s), s.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d0042", "d4999", "hub"} {
		before := src.edgesRead.Load()
		got := idx.Explain(lz, id)
		if read := src.edgesRead.Load() - before; read > 10 {
			t.Errorf("explaining %s read %d edges of the source", id, read)
		}
		if want := idx.Explain(s, id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s over a source:\n got %s\nwant %s", id, tqDescribe(got), tqDescribe(want))
		}
		if got.Status != StatusQuarantined || !reflect.DeepEqual(got.Roots, []string{"poison"}) {
			t.Errorf("%s: %s", id, tqDescribe(got))
		}
	}
}
