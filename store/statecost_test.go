package store

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// TestStateCostEstimate builds heads of four shapes — a derivation chain,
// a hub every artifact derives from, artifacts without edges, and many
// small heads like agent runs' — measures the heap they hold (states and
// trust indexes, payloads dropped as a head drops them) and checks that
// stateCost, which the head budget counts, neither underestimates them
// nor overestimates them more than twice.
func TestStateCostEstimate(t *testing.T) {
	data := json.RawMessage(`{"text":"x"}`)
	sum := hashing.Sum(data)
	for _, shape := range []struct {
		name     string
		heads, n int
		to       func(i int) string // what artifact i derives from ("": nothing)
	}{
		{"chain", 1, 50000, func(i int) string { return fmt.Sprintf("a%06d", i-1) }},
		{"hub", 1, 50000, func(i int) string { return "a000000" }},
		{"no edges", 1, 50000, func(int) string { return "" }},
		{"runs", 400, 101, func(i int) string { return fmt.Sprintf("a%06d", i-1) }},
	} {
		t.Run(shape.name, func(t *testing.T) {
			var ops [][]graph.Op
			for range shape.heads {
				var o []graph.Op
				for i := range shape.n {
					id := fmt.Sprintf("a%06d", i)
					o = append(o, graph.Op{Op: graph.OpPut, ID: id, Type: "note", ContentHash: sum, Data: data})
					if to := shape.to(i); i > 0 && to != "" {
						o = append(o, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: to})
					}
				}
				ops = append(ops, o)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var heads []*graph.State
			var idx []*graph.TrustIndex
			var est int64
			for _, o := range ops {
				st := graph.NewState(nil)
				changes, err := st.ApplyOps(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, ch := range changes {
					if ch.Next != nil {
						ch.Next.Data = nil
					}
				}
				heads = append(heads, st)
				idx = append(idx, graph.NewTrustIndex(st, st.Base(nil)))
				est += stateCost(st)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			measured := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("%s: %d heads of %d artifacts: measured %.2f MB, estimated %.2f MB (%.2f×)", shape.name, shape.heads, shape.n, float64(measured)/1e6, float64(est)/1e6, float64(est)/float64(measured))
			if est < measured || est > 2*measured {
				t.Errorf("stateCost %d bytes for heads that hold %d: want within [1×, 2×]", est, measured)
			}
			runtime.KeepAlive(heads)
			runtime.KeepAlive(idx)
			runtime.KeepAlive(ops) // allocated before the measure: its ids are the states'
		})
	}
}
