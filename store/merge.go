package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// MergeResult is the outcome of Store.Merge.
type MergeResult struct {
	// Kind is up_to_date (nothing to do), fast_forward (ours moved to
	// theirs) or merge (a merge commit was written).
	Kind replay.MergeKind `json:"kind"`
	// Base is the merge base: of the best common ancestors of ours and
	// theirs, the one with the highest seq (replay.MergeBase).
	Base hashing.Digest `json:"base"`
	// Bases lists every best common ancestor, Base first, when there are
	// several (after a criss-cross; replay.MergeBases): the merge was
	// made against them all (replay.MergeOver). Empty when there is one.
	Bases []hashing.Digest `json:"bases,omitempty"`
	// BasesAncestor is the merge base of Bases, when there are several
	// and they have one (replay.MergeBasesOf): what the bases disagree on
	// was merged against their virtual base, merged from them against it.
	BasesAncestor *hashing.Digest `json:"bases_ancestor,omitempty"`
	Ours          hashing.Digest  `json:"ours"`
	Theirs        hashing.Digest  `json:"theirs"`
	// Commit is ours' head after the merge.
	Commit *replay.Commit `json:"commit"`
	// Ops are the ops of the merge commit (none unless Kind is merge).
	Ops []graph.Op `json:"ops"`
	// Resolved lists the conflicts the resolutions settled; Unused the
	// resolution keys that matched no conflict (every key, sorted, when
	// Kind is up_to_date or fast_forward).
	Resolved []replay.Conflict `json:"resolved"`
	Unused   []string          `json:"unused,omitempty"`
}

// Merge merges ref theirs (a branch or commit, see Resolve) into branch
// ours of a context, as replay.Merge defines it — replay.MergeOver when
// they have several best common ancestors (a criss-cross), which merges
// against them all, whatever their order. When theirs has no change
// since the merge base nothing happens (up_to_date); when ours is the
// merge base its branch moves to theirs (fast_forward, no commit);
// otherwise the merged ops are committed on ours in one commit whose
// parents are ours' head and theirs, in the context's quarantine mode.
// author and message default to "artifactd" and "merge THEIRS into OURS".
//
// The merge is planned in the committer against the head it lands on:
// plain commits landing on ours meanwhile are merged too, never a reason
// to fail. Errors: *replay.ConflictError (errors.Is replay.ErrConflict)
// listing every unresolved conflict, with nothing written;
// replay.ErrResolution; ErrStale when ours kept moving in ways that change
// the merge base (merges landing on it) through several attempts;
// ErrNotFound; the errors of Commit (a *graph.TaintError in enforce mode);
// ctx's error, with nothing written, when ctx ends before the committer
// decides the merge commit or while its plan walks a part of base or
// theirs (a point lookup does not stop for it).
// A fast-forward moves the branch with ResetBranchIf, so a commit on ours
// racing with it makes the merge fail with ErrStale instead of being lost.
func (s *Store) Merge(ctx context.Context, ctxID, ours, theirs string, resolutions map[string]replay.Resolution, author, message string) (*MergeResult, error) {
	if err := ValidateBranch(ours); err != nil {
		return nil, err
	}
	tc, err := s.Resolve(ctx, ctxID, theirs)
	if err != nil {
		return nil, err
	}
	return s.MergeWith(ctx, MergeRequest{Context: ctxID, Ours: ours, Theirs: tc, TheirsName: theirs,
		Resolutions: resolutions, Author: author, Message: message})
}

// MergeRequest is a merge for MergeWith: Merge's arguments, with theirs
// already resolved and a check of the merge commit.
type MergeRequest struct {
	Context, Ours string
	// Theirs is the commit merged in, which the caller resolved: the
	// merge takes that commit whatever its branch does meanwhile.
	Theirs *replay.Commit
	// TheirsName is the ref Theirs was resolved from, for the default
	// message ("" names the commit).
	TheirsName  string
	Resolutions map[string]replay.Resolution
	// Author and Message default as Merge's do.
	Author, Message string
	// Check, when not nil, runs in the committer on the merge commit as
	// CommitRequest.Check does: on the state the merge lands on and the
	// changes of its ops, so a rule about what the merge replaces holds
	// against commits that landed on ours after the caller looked. A
	// fast-forward writes no commit and runs no check.
	Check func(*graph.State, []graph.Change) error
	// Parent, when set, must be ours' head when the merge is prepared
	// and when it lands (as CommitRequest.Parent): otherwise ErrStale,
	// and nothing is written.
	Parent *hashing.Digest
}

// MergeWith is Merge of a request whose theirs is resolved (Merge's
// errors, but the ones of resolving theirs).
func (s *Store) MergeWith(ctx context.Context, req MergeRequest) (*MergeResult, error) {
	if err := ValidateBranch(req.Ours); err != nil {
		return nil, err
	}
	if req.Theirs == nil {
		return nil, errors.New("store: MergeWith without theirs")
	}
	if req.Author == "" {
		req.Author = "artifactd"
	}
	if req.Message == "" {
		name := req.TheirsName
		if name == "" {
			name = req.Theirs.ID.String()
		}
		req.Message = fmt.Sprintf("merge %s into %s", name, req.Ours)
	}
	// A fast-forward that finds ours moved is a merge now: once more.
	for attempt := 0; ; attempt++ {
		res, err := s.merge(ctx, &req)
		if errors.Is(err, errMergeAgain) && attempt < maxMergeAttempts {
			continue
		}
		if errors.Is(err, errMergeAgain) {
			return nil, fmt.Errorf("%w: branch %q kept moving during the merge; merge again", ErrStale, req.Ours)
		}
		return res, err
	}
}

// maxMergeAttempts bounds how often Merge starts over because ours moved
// in a way the committer cannot plan the merge against (a fast-forward
// overtaken, or a merge landing on ours).
const maxMergeAttempts = 8

// errMergeAgain tells Merge to start over: ours moved so that the merge
// base may have changed.
var errMergeAgain = errors.New("merge again")

// maxMergeFollow bounds how many commits that landed on ours since the
// merge was prepared the committer walks to check they keep its base.
const maxMergeFollow = 4096

func (s *Store) merge(ctx context.Context, req *MergeRequest) (*MergeResult, error) {
	ctxID, ours, tc := req.Context, req.Ours, req.Theirs
	oursHead, err := s.branchHead(ctx, ctxID, ours)
	if err != nil {
		return nil, err
	}
	if req.Parent != nil && *req.Parent != oursHead.ID {
		return nil, fmt.Errorf("%w: parent %s is not the head of %q (head is %s)", ErrStale, req.Parent.Short(), ours, oursHead.ID.Short())
	}
	setup, err := replay.PrepareMerge(ctx, s.Source(ctxID), oursHead.ID, tc.ID)
	if err != nil {
		return nil, err
	}
	res := &MergeResult{Kind: setup.Kind, Base: setup.Base.ID, Ours: oursHead.ID, Theirs: tc.ID,
		Commit: oursHead, Ops: []graph.Op{}, Resolved: []replay.Conflict{}}
	if len(setup.Bases) > 1 {
		for _, b := range setup.Bases {
			res.Bases = append(res.Bases, b.ID)
		}
	}
	if setup.Ancestor != nil {
		id := setup.Ancestor.ID
		res.BasesAncestor = &id
	}
	if setup.Kind != replay.MergeThreeWay && len(req.Resolutions) > 0 {
		// No conflict to settle: every resolution went unused.
		res.Unused = slices.Sorted(maps.Keys(req.Resolutions))
	}
	switch setup.Kind {
	case replay.MergeUpToDate:
		return res, nil
	case replay.MergeFastForward:
		if err := s.ResetBranchIf(ctx, ctxID, ours, tc.ID, &oursHead.ID); err != nil {
			if errors.Is(err, ErrStale) {
				return nil, errMergeAgain
			}
			return nil, err
		}
		res.Commit = tc
		return res, nil
	}
	// The merge is planned in the committer, against the head it lands
	// on: plain commits that landed on ours since it was prepared keep its
	// merge base, so they are merged too instead of making it stale. It
	// looks only at what changed on either side since the base (the diffs
	// of their state maps: replay.MergeWithin), and reads base and theirs
	// through their maps: a merge costs what the two sides changed, not
	// what the context holds. Neither state holds a lock or is changed.
	// Over several merge bases (a criss-cross) it reads the others too,
	// and looks also at what differs between the first and each other;
	// and their own merge base, when they have one, over its map too, of
	// which the merge looks up only what the bases disagree on.
	theirsDiff, err := s.DiffStates(ctx, setup.Base, tc)
	if err != nil {
		return nil, err
	}
	diffs := []*replay.DiffResult{nil, theirsDiff} // ours' first, once planned
	for _, b := range setup.Bases[1:] {
		d, err := s.DiffStates(ctx, setup.Base, b)
		if err != nil {
			return nil, err
		}
		diffs = append(diffs, d)
	}
	var plan *replay.MergePlan
	var oursAt hashing.Digest
	read := append([]*replay.Commit{setup.Base, tc}, setup.Bases[1:]...)
	if setup.Ancestor != nil {
		read = append(read, setup.Ancestor)
	}
	err = s.readSparseAll(ctx, ctxID, read, func(views []*View) error {
		t, bases := views[1], []*graph.State{views[0].State}
		for _, v := range views[2 : len(setup.Bases)+1] {
			bases = append(bases, v.State)
		}
		var ancestor *graph.State
		if setup.Ancestor != nil {
			ancestor = views[len(views)-1].State
		}
		cr, err := s.Commit(ctx, CommitRequest{Context: ctxID, Branch: ours, Parent: req.Parent,
			ExtraParents: []hashing.Digest{tc.ID}, Author: req.Author, Message: req.Message, Check: req.Check,
			OpsFrom: func(st *graph.State, at Planning) ([]graph.Op, error) {
				if err := keepsBase(at.Head, oursHead.ID, at.Commit); err != nil {
					return nil, err
				}
				oursDiff, err := at.DiffFrom(setup.Base)
				if err != nil {
					return nil, err
				}
				diffs[0] = oursDiff
				p, err := replay.MergeOverWithinData(bases, ancestor, st, t.State, replay.ScopeOf(diffs...), req.Resolutions,
					func(arts []*graph.Artifact) ([]json.RawMessage, error) { return t.DataMany(ctx, arts) })
				// A read of a base or theirs that failed looked like an
				// absent entry: refuse the plan made on it (the views
				// report the error when the read ends).
				var rerr error
				for _, v := range views {
					rerr = errors.Join(rerr, v.Err())
				}
				if rerr != nil {
					return nil, rerr
				}
				if err != nil {
					return nil, err
				}
				plan, oursAt = p, at.Head.ID
				return p.Ops, nil
			}})
		if err != nil {
			return err
		}
		res.Commit = cr.Commit
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Commit.ContextHash != plan.ContextHash {
		return nil, fmt.Errorf("%w: merge commit %s hashes to %s, the merge computed %s", ErrCorrupt, res.Commit.ID.Short(), res.Commit.ContextHash, plan.ContextHash)
	}
	res.Ours, res.Ops, res.Resolved, res.Unused = oursAt, plan.Ops, plan.Resolved, plan.Unused
	return res, nil
}

// readSparseAll reads each of commits over its map (ReadSparse), one
// read within the other, and calls fn with their views, in the order of
// commits, while all are open.
func (s *Store) readSparseAll(ctx context.Context, ctxID string, commits []*replay.Commit, fn func([]*View) error) error {
	views := make([]*View, 0, len(commits))
	var next func(i int) error
	next = func(i int) error {
		if i == len(commits) {
			return fn(views)
		}
		return s.ReadSparse(ctx, ctxID, commits[i], func(v *View) error {
			views = append(views, v)
			return next(i + 1)
		})
	}
	return next(0)
}

// keepsBase checks that head is prepared, or descends from it by plain
// (one-parent) commits only, so the merge base found from prepared still
// holds; otherwise it returns errMergeAgain.
func keepsBase(head *replay.Commit, prepared hashing.Digest, commit func(hashing.Digest) (*replay.Commit, error)) error {
	c := head
	for range maxMergeFollow {
		if c.ID == prepared {
			return nil
		}
		if len(c.Parents) != 1 {
			return errMergeAgain
		}
		next, err := commit(c.Parents[0])
		if err != nil {
			return err
		}
		c = next
	}
	return errMergeAgain
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
