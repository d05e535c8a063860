package service

import (
	"context"
	"slices"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// EvalReport is GET .../eval and `artifactd eval --json`: the structural
// evaluation of the state at one commit (graph.Evaluate).
type EvalReport struct {
	Context     string `json:"context"`
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
	graph.Evaluation
}

// EvalOf evaluates a view with the definitions in force at its commit,
// judged by its trust index (graph.EvaluateIndexed): one pass over the
// artifacts and one over the edges.
func EvalOf(ctxID string, v *store.View) EvalReport {
	return reportOf(ctxID, v, graph.EvaluateIndexed(v.State, v.Trust))
}

func reportOf(ctxID string, v *store.View, ev graph.Evaluation) EvalReport {
	return EvalReport{Context: ctxID, Commit: v.Commit.ID.String(), ContextHash: v.Commit.ContextHash.String(), Evaluation: ev}
}

// The evaluation of a context being written to is asked again and again
// (an agent's dashboard polls it; each commit moves the head), and
// evaluating a big state whole passes over all of it: 4 s at a million
// artifacts. So the service keeps, per context, the evaluation it made
// last, and evaluates another commit of the context from it and what
// differs between the two commits' states (Store.DiffStates, which reads
// only what differs): the claims and answers among the artifacts that
// differ, or whose edges do, are judged again, and every answer's sources
// are walked again (graph.EvaluateAfter), also when a type was defined
// between the two. The evaluation is made whole when there is none kept,
// when the two differ by more than 1/evalDeriveShare of the state's
// artifacts, or when a relation's definition differs between them (on
// two branches, or a branch reset and written again, one name may carry
// another dependency, which moves claims the diff does not name).
const (
	evalDeriveShare = 16
	// maxEvalBytes bounds what the kept evaluations cost in all; one
	// costing more than a quarter of it is not kept.
	maxEvalBytes = 8 << 20
)

// keptEval is the evaluation of the state at commit.
type keptEval struct {
	commit *replay.Commit
	ev     graph.Evaluation
}

// evalCost is what a kept evaluation costs, roughly: its lists' strings
// and headers.
func evalCost(k *keptEval) int64 {
	n := int64(256)
	for _, a := range k.ev.Answers {
		n += 80 + int64(len(a.ID))
	}
	for _, l := range [][]string{k.ev.UnsupportedAnswers, k.ev.DanglingClaims} {
		for _, id := range l {
			n += 16 + int64(len(id))
		}
	}
	return n
}

// Eval evaluates v, a view of context ctxID, as EvalOf does: derived from
// the evaluation kept for another commit of the context when the two
// differ little, else whole; the result is then kept for the next. A
// view whose reads failed is evaluated whole and not kept; the read's
// error reaches the caller through the store's Read.
func (s *Service) Eval(ctx context.Context, ctxID string, v *store.View) EvalReport {
	kept, ok := s.evals.Get(ctxID)
	if ok && kept.commit.ID == v.Commit.ID {
		return reportOf(ctxID, v, cloneEval(kept.ev))
	}
	var ev graph.Evaluation
	if ok {
		ev, ok = s.derivedEval(ctx, v, kept)
	}
	if !ok {
		ev = graph.EvaluateIndexed(v.State, v.Trust)
	}
	if v.Err() == nil {
		if k := (&keptEval{commit: v.Commit, ev: ev}); evalCost(k) <= maxEvalBytes/4 {
			s.evals.Put(ctxID, k)
		}
	}
	// What is kept is never handed out: the caller may change its report.
	return reportOf(ctxID, v, cloneEval(ev))
}

// cloneEval returns ev with lists of its own.
func cloneEval(ev graph.Evaluation) graph.Evaluation {
	ev.Answers = slices.Clone(ev.Answers)
	ev.UnsupportedAnswers = slices.Clone(ev.UnsupportedAnswers)
	ev.DanglingClaims = slices.Clone(ev.DanglingClaims)
	return ev
}

// derivedEval returns the evaluation of v from kept, the one kept for
// another commit of v's context, when it can be derived (see
// evalDeriveShare).
func (s *Service) derivedEval(ctx context.Context, v *store.View, kept *keptEval) (graph.Evaluation, bool) {
	most := max(v.Commit.Artifacts, kept.commit.Artifacts) / evalDeriveShare
	d, ok, err := s.st.DiffStatesWithin(ctx, kept.commit, v.Commit, most)
	if err != nil {
		// The whole evaluation then reads the state again and fails
		// where it must; corruption met here is noted all the same.
		s.st.NoteCorruption(err)
		return graph.Evaluation{}, false
	}
	// graph.EvaluateAfter does not carry an evaluation across another
	// definition of a relation.
	if !ok || d.HasType(func(typ string) bool { return typ == graph.TypeRelationDef }) {
		return graph.Evaluation{}, false
	}
	var touched []string
	for _, l := range [][]replay.ArtifactChange{d.Added, d.Removed, d.Changed} {
		for _, c := range l {
			touched = append(touched, c.ID)
		}
	}
	for _, l := range [][]replay.EdgeChange{d.EdgesAdded, d.EdgesRemoved, d.EdgesChanged} {
		for _, e := range l {
			touched = append(touched, e.From)
		}
	}
	ev := graph.EvaluateAfter(kept.ev, v.State, v.Trust, touched)
	s.evalDerivations.Add(1)
	return ev, true
}
