package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

// BenchmarkAuditChainHead audits the tip of a 20,000-deep derivation
// chain at a branch head (the provenance walk, each artifact's trust, its
// payload), the head opened over its state map after a restart: the cost
// of a long read on a head that is not a copy of the state.
func BenchmarkAuditChainHead(b *testing.B) {
	const depth = 20_000
	ctx := context.Background()
	dir := b.TempDir()
	s := benchOpen(b, dir, true)
	if _, err := s.CreateContext(ctx, "chain", ModeObserve); err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < depth; lo += 2000 {
		var ops []graph.Op
		for i := lo; i < lo+2000; i++ {
			ops = append(ops, notePut(fmt.Sprintf("step-%06d", i), i, "step"))
			if i > 0 {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("step-%06d", i), Rel: "derived_from", To: fmt.Sprintf("step-%06d", i-1)})
			}
		}
		benchCommit(b, s, "chain", ops...)
	}
	s.Close()
	s = benchOpen(b, dir, true)
	defer s.Close()
	tip := fmt.Sprintf("step-%06d", depth-1)
	b.ResetTimer()
	for b.Loop() {
		if err := s.Read(ctx, "chain", "", func(v *View) error {
			rep, err := graph.Audit(v.State, tip, v.Trust.Explainer(v.State), v.DataOf(ctx), graph.AuditMeta{})
			if err == nil && len(rep.Artifacts) != depth {
				err = fmt.Errorf("audit reached %d artifacts", len(rep.Artifacts))
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}
