package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// BenchmarkEvalAfterCommit is GET …/eval of a context of 100,000 claims
// (each derived_from an earlier one, 200 of them answers supported by a
// question) as an agent's dashboard asks it: after each one-artifact
// commit. "derived" is Service.Eval, which evaluates from the evaluation
// of the commit before; "whole" is EvalOf, one pass over the artifacts
// and one over the edges each time. The store is reopened first, so the
// head is read through its state map as a restarted server reads it.
func BenchmarkEvalAfterCommit(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *store.Store {
		st, err := store.Open(ctx, store.Options{Dir: dir, NoSync: true, Logger: log})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	const n = 100_000
	st := open()
	if _, err := st.CreateContext(ctx, "e", store.ModeObserve); err != nil {
		b.Fatal(err)
	}
	claim := func(id string) graph.Op {
		return graph.Op{Op: graph.OpPut, ID: id, Type: "claim", Data: []byte(`{"text":"` + id + `"}`)}
	}
	for lo := 0; lo < n; lo += 5000 {
		var ops []graph.Op
		for i := lo; i < lo+5000; i++ {
			id := fmt.Sprintf("c%06d", i)
			switch {
			case i == 0:
				ops = append(ops, graph.Op{Op: graph.OpPut, ID: id, Type: "question", Data: []byte(`{"text":"q"}`)})
			case i%500 == 0:
				ops = append(ops, graph.Op{Op: graph.OpPut, ID: id, Type: "answer", Data: []byte(`{"text":"a"}`)},
					graph.Op{Op: graph.OpLink, From: id, Rel: "supported_by", To: "c000000"})
			default:
				ops = append(ops, claim(id), graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("c%06d", i/2)})
			}
		}
		if _, err := st.Commit(ctx, store.CommitRequest{Context: "e", Author: "bench", Message: "m", Ops: ops}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	st = open()
	defer st.Close()
	svc := New(Options{Store: st, Logger: log, LeaseKey: make([]byte, 32)})
	k := 0
	for _, mode := range []string{"derived", "whole"} {
		b.Run(mode, func(b *testing.B) {
			eval := func() EvalReport {
				var rep EvalReport
				err := st.Read(ctx, "e", "", func(v *store.View) error {
					if mode == "derived" {
						rep = svc.Eval(ctx, "e", v)
					} else {
						rep = EvalOf("e", v)
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				return rep
			}
			eval() // the first: whole either way
			for b.Loop() {
				k++
				id := fmt.Sprintf("more%06d", k)
				if _, err := st.Commit(ctx, store.CommitRequest{Context: "e", Author: "bench", Message: "m",
					Ops: []graph.Op{claim(id), {Op: graph.OpLink, From: id, Rel: "derived_from", To: "c000001"}}}); err != nil {
					b.Fatal(err)
				}
				if rep := eval(); len(rep.Answers) != n/500-1 || len(rep.DanglingClaims) != 0 {
					b.Fatalf("%d answers, %d dangling claims", len(rep.Answers), len(rep.DanglingClaims))
				}
			}
		})
	}
}
