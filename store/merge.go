package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// MergeResult is the outcome of Store.Merge.
type MergeResult struct {
	// Kind is up_to_date (nothing to do), fast_forward (ours moved to
	// theirs) or merge (a merge commit was written).
	Kind   replay.MergeKind `json:"kind"`
	Base   hashing.Digest   `json:"base"`
	Ours   hashing.Digest   `json:"ours"`
	Theirs hashing.Digest   `json:"theirs"`
	// Commit is ours' head after the merge.
	Commit *replay.Commit `json:"commit"`
	// Ops are the ops of the merge commit (none unless Kind is merge).
	Ops []graph.Op `json:"ops"`
	// Resolved lists the conflicts the resolutions settled; Unused the
	// resolution keys that matched no conflict.
	Resolved []replay.Conflict `json:"resolved"`
	Unused   []string          `json:"unused,omitempty"`
}

// Merge merges ref theirs (a branch or commit, see Resolve) into branch
// ours of a context, as replay.Merge defines it. When theirs has no change
// since the merge base nothing happens (up_to_date); when ours is the
// merge base its branch moves to theirs (fast_forward, no commit);
// otherwise the merged ops are committed on ours in one commit whose
// parents are ours' head and theirs, in the context's quarantine mode.
// author and message default to "artifactd" and "merge THEIRS into OURS".
//
// Errors: *replay.ConflictError (errors.Is replay.ErrConflict) listing
// every unresolved conflict, with nothing written; replay.ErrResolution;
// ErrStale when ours moved while the merge was computed (merge again);
// ErrNotFound; the errors of Commit (a *graph.TaintError in enforce mode).
// A fast-forward moves the branch with ResetBranchIf, so a commit on ours
// racing with it makes the merge fail with ErrStale instead of being lost.
func (s *Store) Merge(ctx context.Context, ctxID, ours, theirs string, resolutions map[string]replay.Resolution, author, message string) (*MergeResult, error) {
	if err := ValidateBranch(ours); err != nil {
		return nil, err
	}
	oursHead, err := s.branchHead(ctx, ctxID, ours)
	if err != nil {
		return nil, err
	}
	tc, err := s.Resolve(ctx, ctxID, theirs)
	if err != nil {
		return nil, err
	}
	setup, err := replay.PrepareMerge(ctx, s.Source(ctxID), oursHead.ID, tc.ID)
	if err != nil {
		return nil, err
	}
	res := &MergeResult{Kind: setup.Kind, Base: setup.Base.ID, Ours: oursHead.ID, Theirs: tc.ID,
		Commit: oursHead, Ops: []graph.Op{}, Resolved: []replay.Conflict{}}
	switch setup.Kind {
	case replay.MergeUpToDate:
		return res, nil
	case replay.MergeFastForward:
		if err := s.ResetBranchIf(ctx, ctxID, ours, tc.ID, &oursHead.ID); err != nil {
			if errors.Is(err, ErrStale) {
				return nil, fmt.Errorf("%w: branch %q moved during the merge; merge again", err, ours)
			}
			return nil, err
		}
		res.Commit = tc
		return res, nil
	}
	var plan *replay.MergePlan
	// Materialized states hold no locks, so reading three at once is safe.
	err = s.ReadCommit(ctx, ctxID, setup.Base, func(base *View) error {
		return s.ReadCommit(ctx, ctxID, oursHead, func(o *View) error {
			return s.ReadCommit(ctx, ctxID, tc, func(t *View) error {
				var err error
				plan, err = replay.Merge(base.State, o.State, t.State, resolutions)
				return err
			})
		})
	})
	if err != nil {
		return nil, err
	}
	if author == "" {
		author = "artifactd"
	}
	if message == "" {
		message = fmt.Sprintf("merge %s into %s", theirs, ours)
	}
	parent := oursHead.ID
	cr, err := s.Commit(ctx, CommitRequest{Context: ctxID, Branch: ours, Parent: &parent,
		ExtraParents: []hashing.Digest{tc.ID}, Author: author, Message: message, Ops: plan.Ops})
	if err != nil {
		return nil, err
	}
	if cr.Commit.ContextHash != plan.ContextHash {
		return nil, fmt.Errorf("%w: merge commit %s hashes to %s, the merge computed %s", ErrCorrupt, cr.Commit.ID.Short(), cr.Commit.ContextHash, plan.ContextHash)
	}
	res.Commit, res.Ops, res.Resolved, res.Unused = cr.Commit, plan.Ops, plan.Resolved, plan.Unused
	return res, nil
}

// branchHead returns the head commit of an existing branch (not a hash
// prefix that happens to look like one).
func (s *Store) branchHead(ctx context.Context, ctxID, branch string) (*replay.Commit, error) {
	branches, err := s.Branches(ctx, ctxID)
	if err != nil {
		return nil, err
	}
	for _, b := range branches {
		if b.Name == branch {
			return s.GetCommit(ctx, ctxID, b.Head)
		}
	}
	return nil, fmt.Errorf("branch %q of context %q: %w", branch, ctxID, ErrNotFound)
}
