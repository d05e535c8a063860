package graph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// naiveCycle is the oracle for checkCycles: every new dependency edge that
// stands after the commit, searched over the whole graph.
func naiveCycle(s *State, changes []Change) *CycleError {
	for i, c := range changes {
		if c.Noop || c.Op.Op != OpLink || !s.rels.Depends(c.Op.Rel) {
			continue
		}
		k := c.NextEdge.Key()
		if s.edges[k] != c.NextEdge {
			continue
		}
		if path := ShortestPath(k.To, k.From, s.DependsOn); path != nil {
			return &CycleError{Index: i, Edge: k, Cycle: append([]string{k.From}, path...)}
		}
	}
	return nil
}

// TestCycleCheckMatchesNaive: on random commits over a random graph the
// bounded cycle check refuses exactly the commits the whole-graph search
// refuses, naming the same op and the same cycle.
func TestCycleCheckMatchesNaive(t *testing.T) {
	rels := []string{"derived_from", "supported_by", "mentions"}
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := NewState(nil)
		n := 0
		refused := 0
		for commit := 0; commit < 150; commit++ {
			var ops []Op
			for range 1 + r.IntN(6) {
				switch x := r.IntN(10); {
				case x < 4 || n < 3:
					ops = append(ops, tqPut(fmt.Sprintf("n%d", n), "claim"))
					n++
				default:
					from, to := fmt.Sprintf("n%d", r.IntN(n)), fmt.Sprintf("n%d", r.IntN(n))
					if from != to {
						ops = append(ops, tqLink(from, rels[r.IntN(len(rels))], to))
					}
				}
			}
			changes := make([]Change, 0, len(ops))
			var err error
			for i := range ops {
				var ch Change
				if ch, err = s.apply(ops[i]); err != nil {
					break
				}
				changes = append(changes, ch)
			}
			if err != nil {
				s.Undo(changes)
				n -= countPuts(ops[:len(changes)+1])
				continue
			}
			want := naiveCycle(s, changes)
			got := s.checkCycles(changes)
			var ce *CycleError
			switch {
			case want == nil && got != nil:
				t.Fatalf("seed %d commit %d: refused %v, the oracle accepts", seed, commit, got)
			case want != nil && (!errors.As(got, &ce) || !reflect.DeepEqual(ce, want)):
				t.Fatalf("seed %d commit %d: got %v, want %v", seed, commit, got, want)
			}
			if want != nil {
				refused++
				s.Undo(changes)
				n -= countPuts(ops)
			}
		}
		if refused == 0 {
			t.Fatalf("seed %d: no commit closed a cycle; the test proves nothing", seed)
		}
	}
}

func countPuts(ops []Op) int {
	n := 0
	for _, o := range ops {
		if o.Op == OpPut {
			n++
		}
	}
	return n
}

// BenchmarkChainCommit extends a derivation chain by a commit of 2,000
// steps, each derived from the one before: the cycle check costs what the
// commit adds, however deep the chain below it is.
func BenchmarkChainCommit(b *testing.B) {
	for _, depth := range []int{2000, 20000} {
		s := NewState(nil)
		var ops []Op
		ops = append(ops, tqPut("c0", "claim"))
		for i := 1; i < depth; i++ {
			ops = append(ops, tqPut(fmt.Sprintf("c%d", i), "claim"), tqLink(fmt.Sprintf("c%d", i), "derived_from", fmt.Sprintf("c%d", i-1)))
		}
		tqApply(b, s, ops...)
		b.Run(fmt.Sprintf("below=%d", depth), func(b *testing.B) {
			next := depth
			for b.Loop() {
				ops = ops[:0]
				for range 2000 {
					ops = append(ops, tqPut(fmt.Sprintf("c%d", next), "claim"), tqLink(fmt.Sprintf("c%d", next), "derived_from", fmt.Sprintf("c%d", next-1)))
					next++
				}
				tqApply(b, s, ops...)
			}
		})
	}
}
