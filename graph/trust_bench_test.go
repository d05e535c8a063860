package graph

import (
	"maps"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// tqBench caches one big random DAG per size across benchmark runs (the
// million-artifact one takes seconds to build), with ten fetch verdicts
// that can be switched between RETRIEVED and FAILED.
var tqBench = map[int]*tqBenchDAG{}

type tqBenchDAG struct {
	s              *State
	clean, failing []*Artifact
	// idx follows s poisoned; write benchmarks leave it as they found it.
	idx *TrustIndex
}

// tqBenchState returns a random DAG of n artifacts and 3n dependency
// edges; poisoned turns 10 fetch verdicts FAILED.
func tqBenchState(b *testing.B, n int, poisoned bool) *State {
	c := tqBench[n]
	if c == nil {
		b.StopTimer()
		// Building allocates gigabytes of small maps; collecting less
		// often while it runs saves most of the build time.
		old := debug.SetGCPercent(800)
		c = &tqBenchDAG{s: tqBigState(n, 3, 1)}
		debug.SetGCPercent(old)
		runtime.GC()
		before := maps.Clone(c.s.artifacts)
		for _, id := range tqPoison(c.s, 10, 1) {
			c.clean = append(c.clean, before[id])
			c.failing = append(c.failing, c.s.artifacts[id])
		}
		tqBench[n] = c
		b.StartTimer()
	}
	use := c.clean
	if poisoned {
		use = c.failing
	}
	for _, a := range use {
		c.s.artifacts[a.ID] = a
	}
	return c.s
}

// tqCPUTime is the CPU time of the process so far (user + system, all
// threads, so GC work counts). Benchmarks report it beside wall time
// because the machines they run on are often shared.
func tqCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var tqBenchSizes = []struct {
	name string
	n    int
}{{"100k", 100_000}, {"1M", 1_000_000}}

// BenchmarkTrustFull is the full pass (ComputeTrust) over a random DAG of
// n artifacts and 3n edges: clean, and with 10 poison roots (which, in a
// random DAG, quarantine a large part of the graph, the expensive case).
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
				cpu := tqCPUTime()
				for b.Loop() {
					rep = ComputeTrust(s, tqBase)
				}
				b.ReportMetric(float64(tqCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
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
			cpu := tqCPUTime()
			for b.Loop() {
				NewTrustIndex(s, tqBase)
			}
			b.ReportMetric(float64(tqCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTrustWrite is the per-commit cost of trust for a typical write:
// a new claim with three dependency edges to random existing artifacts of
// the poisoned DAG (about a fifth of them rest on a quarantined one). One
// op is a batch of 1000 such writes; ns/write is the cost of one.
// "check+apply" runs TaintedLinks then Apply; "applytainted" runs
// ApplyTainted, what the store runs per commit (the same judgment, one
// update); "apply" runs Apply alone. Changing the state itself is not
// measured.
func BenchmarkTrustWrite(b *testing.B) {
	const batch = 1000
	for _, size := range tqBenchSizes {
		for _, mode := range []string{"check+apply", "applytainted", "apply"} {
			check := mode != "apply"
			b.Run(size.name+"/"+mode, func(b *testing.B) {
				s := tqBenchState(b, size.n, true)
				c := tqBench[size.n]
				if c.idx == nil {
					c.idx = NewTrustIndex(s, tqBase)
				}
				idx := c.idx
				r := rand.New(rand.NewPCG(7, 7))
				writes := make([][]Change, batch)
				for i := range writes {
					writes[i] = tqRawWrite(s, "w"+strconv.Itoa(i), size.n, r)
				}
				tainted := 0
				var cpu, wall time.Duration
				for b.Loop() {
					// All writes are in the state; none rests on another,
					// so applying them in turn is what separate commits
					// would do.
					c0, w0 := tqCPUTime(), time.Now()
					for _, ch := range writes {
						switch mode {
						case "applytainted":
							if len(idx.ApplyTainted(s, ch)) > 0 {
								tainted++
							}
							continue
						case "check+apply":
							if len(TaintedLinks(s, idx, ch)) > 0 {
								tainted++
							}
						}
						idx.Apply(s, ch)
					}
					cpu += tqCPUTime() - c0
					wall += time.Since(w0)
					b.StopTimer()
					tqRawUnwrite(s, idx, writes)
					b.StartTimer()
				}
				b.StopTimer()
				tqRawUnwrite(s, idx, writes)
				for _, ch := range writes {
					tqRawRemove(s, ch[0].Next.ID)
				}
				b.ReportMetric(float64(wall)/float64(b.N*batch), "ns/write")
				b.ReportMetric(float64(cpu)/float64(b.N*batch), "cpu-ns/write")
				if check {
					b.ReportMetric(float64(tainted)/float64(b.N*batch), "tainted/write")
				}
			})
		}
	}
}

// tqRawUnwrite takes the writes out of the index (the state keeps them):
// it removes them from the state, reverts the index, and puts them back.
func tqRawUnwrite(s *State, idx *TrustIndex, writes [][]Change) {
	for i := len(writes) - 1; i >= 0; i-- {
		tqRawRemove(s, writes[i][0].Next.ID)
		idx.Revert(s, writes[i])
	}
	for _, ch := range writes {
		s.artifacts[ch[0].Next.ID] = ch[0].Next
		tqRecount(s)
		for _, c := range ch[1:] {
			tqRawEdge(s, c.NextEdge)
		}
	}
}

// tqRawWrite adds claim id resting on three random artifacts a0…a(n-1)
// directly in the state's maps and returns the changes ApplyOps would
// have returned.
func tqRawWrite(s *State, id string, n int, r *rand.Rand) []Change {
	a := &Artifact{ID: id, Type: "claim", Version: 1}
	s.artifacts[id] = a
	tqRecount(s)
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
	for k := range s.out[id].all() {
		delete(s.edges, k)
		s.in[k.To].del(k)
	}
	delete(s.out, id)
	delete(s.artifacts, id)
	tqRecount(s)
}

// BenchmarkBulkCommitTrust is the trust work of deciding one bulk commit
// into a context whose artifacts are all confirmed: 5,000 new claims,
// each derived_from a random one of the 100,000 before them (the 1M
// scenario's commit, on a smaller state), on a fork of the index as the
// store decides. "check+apply" judges the new links with TaintedLinks,
// then applies the commit (the incremental update twice); "applytainted"
// does both with ApplyTainted (once). Applying the ops to the state is
// not measured.
func BenchmarkBulkCommitTrust(b *testing.B) {
	const n, batch = 100_000, 5000
	s := NewState(nil)
	ops := []Op{tqFetch("root", "RETRIEVED", "ok")}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 1; i < n; i++ {
		id := "a" + strconv.Itoa(i)
		ops = append(ops, tqPut(id, "claim"), tqLink(id, "derived_from", "a"+strconv.Itoa(r.IntN(i))))
	}
	for i := 1; i < n; i++ { // a0 is the fetch, root
		if ops[2*i].To == "a0" {
			ops[2*i].To = "root"
		}
	}
	tqApply(b, s, ops...)
	idx := NewTrustIndex(s, tqBase)
	var commit []Op
	for i := range batch {
		id := "new" + strconv.Itoa(i)
		commit = append(commit, tqPut(id, "claim"), tqLink(id, "derived_from", "a"+strconv.Itoa(1+r.IntN(n-1))))
	}
	next := s.Fork()
	ch := tqApply(b, next, commit...)
	for _, mode := range []string{"check+apply", "applytainted"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				t := idx.Fork()
				var tainted []*TaintError
				if mode == "applytainted" {
					tainted = t.ApplyTainted(next, ch)
				} else {
					tainted = TaintedLinks(next, t, ch)
					t.Apply(next, ch)
				}
				if len(tainted) != 0 || t.Summary().Quarantined != 0 {
					b.Fatalf("%d tainted links, %d quarantined: the fixture is not all confirmed", len(tainted), t.Summary().Quarantined)
				}
			}
		})
	}
}
