package store

import (
	"context"
	"fmt"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// decision is a commit request decided on a branch head: the ops it
// records and what they change. The head's state already holds the
// changes (graph.State.ApplyOps), its trust index not yet; undo takes the
// changes back when the commit is not staged after all.
type decision struct {
	h *head
	// changes are the definitions' changes, then the request's
	// (reqChanges), in the order they were applied.
	changes, reqChanges []graph.Change
	// defs is how many definition puts are recorded before the request's
	// ops; recorded are the ops the commit records (no no-ops).
	defs     int
	recorded []graph.Op
	// mode is the quarantine mode the commit was judged in, and tainted
	// the new dependency edges resting on unconfirmed artifacts (refused
	// in enforce mode, so set only in observe mode).
	mode    string
	tainted []*graph.TaintError
}

// undo takes d's changes back from the head's state.
func (d *decision) undo() { d.h.state.Undo(d.changes) }

// decide applies request r to head h and judges the result: the parent
// the request expects, the definitions its ops use (recorded first where
// the head lacks them), the ops themselves (validation and cycles), the
// request's own check and, in enforce mode, quarantine. It stages nothing.
// A refused request leaves the head as it was and gets the refusal.
func (g *group) decide(h *head, cs *ctxState, r *writeReq) (*decision, error) {
	req := r.commit
	if req.Parent != nil && *req.Parent != h.commit.ID {
		return nil, fmt.Errorf("%w: parent %s is not the head of %q (head is %s)", ErrStale, req.Parent.Short(), req.Branch, h.commit.ID.Short())
	}
	ops := req.Ops
	if req.OpsFrom != nil {
		lookup := func(id hashing.Digest) (*replay.Commit, error) { return g.commitRecord(req.Context, id) }
		var err error
		if ops, err = req.OpsFrom(h.state, h.commit, lookup); err != nil {
			return nil, err
		}
	}
	// Definitions the request's ops use, recorded first where the head
	// does not hold them as they are (graph.DefinitionOps).
	defOps, err := graph.DefinitionOps(h.state, req.Types, req.Relations)
	if err != nil {
		return nil, err
	}
	ops, err = replay.WithDefinitionData(context.Background(), g.s.Source(req.Context), ops)
	if err != nil {
		return nil, err
	}
	d := &decision{h: h, defs: len(defOps)}
	if d.changes, err = h.state.ApplyOps(defOps); err != nil {
		return nil, fmt.Errorf("record definitions: %w", err)
	}
	if d.reqChanges, err = h.state.ApplyOps(ops); err != nil {
		d.undo()
		return nil, err
	}
	d.changes = append(d.changes, d.reqChanges...)
	if req.Check != nil {
		if err := req.Check(h.state, d.reqChanges); err != nil {
			d.undo()
			return nil, err
		}
	}
	d.mode = req.Mode
	if d.mode == "" {
		d.mode = cs.info.Quarantine
	}
	d.tainted = graph.TaintedLinks(h.state, h.trust, d.changes)
	if d.mode == ModeEnforce && len(d.tainted) > 0 {
		d.undo()
		return nil, d.tainted[0]
	}
	d.recorded = graph.RecordedOps(d.changes)
	return d, nil
}

// trieMutations are the state-map mutations of changes made by commit:
// the final value of every key they touched (nil: removed).
func trieMutations(changes []graph.Change, commit hashing.Digest) []trieMut {
	muts := make([]trieMut, 0, len(changes)+1)
	for _, ch := range changes {
		if ch.Noop {
			continue
		}
		switch ch.Op.Op {
		case graph.OpPut:
			muts = append(muts, mutFor(tkArtifact(ch.Next.ID), encodeArtifactVal(ch.Next, commit)))
			if ch.PrevTombstone != 0 {
				muts = append(muts, mutFor(tkTomb(ch.Next.ID), nil))
			}
		case graph.OpDelete:
			muts = append(muts, mutFor(tkArtifact(ch.Prev.ID), nil), mutFor(tkTomb(ch.Prev.ID), encodeTombVal(ch.Prev.Version)))
		case graph.OpLink:
			muts = append(muts, mutFor(tkEdge(ch.NextEdge.Key()), encodeEdgeVal(ch.NextEdge.Attrs)))
		case graph.OpUnlink:
			muts = append(muts, mutFor(tkEdge(ch.PrevEdge.Key()), nil))
		}
	}
	return muts
}
