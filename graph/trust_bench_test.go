package graph

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// tqBenchStates caches the big random DAGs across benchmark runs (each is
// built once per process; building the million-artifact one takes seconds).
var tqBenchStates = map[string]*State{}

// tqBenchState returns a random DAG of n artifacts and 3n dependency
// edges; poisoned turns 10 fetch verdicts FAILED.
func tqBenchState(b *testing.B, n int, poisoned bool) *State {
	key := fmt.Sprint(n, poisoned)
	if s := tqBenchStates[key]; s != nil {
		return s
	}
	b.StopTimer()
	s := tqBigState(n, 3, 1)
	if poisoned {
		tqPoison(s, 10, 1)
	}
	tqBenchStates[key] = s
	b.StartTimer()
	return s
}

var tqBenchSizes = []struct {
	name string
	n    int
}{{"100k", 100_000}, {"1M", 1_000_000}}

// BenchmarkTrustFull is the full pass (ComputeTrust) over a random DAG of
// n artifacts and 3n edges: clean, and with 10 poison roots (which, in a
// random DAG, quarantine most of the graph: the worst case for the pass).
func BenchmarkTrustFull(b *testing.B) {
	for _, size := range tqBenchSizes {
		for _, poisoned := range []bool{false, true} {
			name := size.name + "/clean"
			if poisoned {
				name = size.name + "/poisoned"
			}
			b.Run(name, func(b *testing.B) {
				s := tqBenchState(b, size.n, poisoned)
				var rep *TrustReport
				for b.Loop() {
					rep = ComputeTrust(s, tqBase)
				}
				b.ReportMetric(float64(rep.BlastRadius), "quarantined")
				b.ReportMetric(float64(s.NumEdges()), "edges")
			})
		}
	}
}

// BenchmarkTrustIndexBuild is NewTrustIndex on the poisoned DAGs: what a
// store pays once when it loads a head.
func BenchmarkTrustIndexBuild(b *testing.B) {
	for _, size := range tqBenchSizes {
		b.Run(size.name, func(b *testing.B) {
			s := tqBenchState(b, size.n, true)
			for b.Loop() {
				NewTrustIndex(s, tqBase)
			}
		})
	}
}

// BenchmarkTrustWrite is the per-commit cost of trust for a typical write:
// one new claim with three dependency edges to random existing artifacts
// of the poisoned DAG (so about as often as not it rests on a quarantined
// one). "check+apply" is TaintedLinks then Apply, what a store runs per
// commit; "apply" is Apply alone. The state itself is changed outside the
// measurement.
func BenchmarkTrustWrite(b *testing.B) {
	for _, size := range tqBenchSizes {
		for _, check := range []bool{true, false} {
			name := size.name + "/apply"
			if check {
				name = size.name + "/check+apply"
			}
			b.Run(name, func(b *testing.B) {
				s := tqBenchState(b, size.n, true)
				idx := NewTrustIndex(s, tqBase)
				r := rand.New(rand.NewPCG(7, 7))
				var added []string
				tainted := 0
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					id := "w" + strconv.Itoa(i)
					ch := tqRawWrite(s, id, size.n, r)
					added = append(added, id)
					b.StartTimer()
					if check && len(TaintedLinks(s, idx, ch)) > 0 {
						tainted++
					}
					idx.Apply(s, ch)
				}
				b.StopTimer()
				if check {
					b.ReportMetric(float64(tainted)/float64(len(added)), "tainted/op")
				}
				for _, id := range added {
					tqRawRemove(s, id)
				}
			})
		}
	}
}

// tqRawWrite adds claim id resting on three random artifacts a0…a(n-1)
// directly in the state's maps and returns the changes ApplyOps would
// have returned.
func tqRawWrite(s *State, id string, n int, r *rand.Rand) []Change {
	a := &Artifact{ID: id, Type: "claim", Version: 1}
	s.artifacts[id] = a
	ch := []Change{{Op: Op{Op: OpPut, ID: id, Type: "claim", Version: 1}, Next: a}}
	for range 3 {
		e := &Edge{From: id, Rel: "derived_from", To: "a" + strconv.Itoa(r.IntN(n))}
		if s.edges[e.Key()] != nil {
			continue
		}
		tqRawEdge(s, e)
		ch = append(ch, Change{Op: Op{Op: OpLink, From: e.From, Rel: e.Rel, To: e.To}, NextEdge: e})
	}
	return ch
}

// tqRawRemove deletes an artifact with no dependents and its out edges.
func tqRawRemove(s *State, id string) {
	for k := range s.out[id] {
		delete(s.edges, k)
		delete(s.in[k.To], k)
	}
	delete(s.out, id)
	delete(s.artifacts, id)
}
