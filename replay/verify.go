package replay

import (
	"context"
	"fmt"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
)

// Verification is the outcome of VerifyHash: the fold's result and
// whether the context hash it rebuilt at the target matches the one
// expected.
type Verification struct {
	*Result
	// Expected is the hash (or prefix) that was asked for.
	Expected string
	// Match reports whether the replayed context hash at the target
	// starts with Expected.
	Match bool
	// MatchesCommit, when Match is false, is the newest commit on the
	// target's first-parent line whose replayed context hash matches
	// Expected: the hash belongs to an older state of the same history.
	MatchesCommit *Commit
}

// VerifyHash folds the chain up to target from src (as Fold does, so
// every commit id, ops hash and context hash on the way is recomputed) and
// compares the rebuilt context hash with want: "sha256:<hex>", bare hex, or
// a prefix of at least 8 hex digits (HASHING.md §6). A malformed want is an
// error before anything is read. A broken chain is a *ChainError, never a
// mismatch.
func VerifyHash(ctx context.Context, src Source, target hashing.Digest, want string, opts Options) (*Verification, error) {
	if _, err := hashing.HexPrefix(want); err != nil {
		return nil, fmt.Errorf("expected hash: %w", err)
	}
	commits, err := ancestors(ctx, src, target)
	if err != nil {
		return nil, err
	}
	// The first-parent line of target, to name an older match.
	line := map[hashing.Digest]bool{}
	byID := make(map[hashing.Digest]*Commit, len(commits))
	for _, c := range commits {
		byID[c.ID] = c
	}
	for c := byID[target]; c != nil; {
		line[c.ID] = true
		if len(c.Parents) == 0 {
			break
		}
		c = byID[c.Parents[0]]
	}
	v := &Verification{Expected: want}
	res, err := FoldCommits(ctx, src, commits, opts, func(c *Commit, st *graph.State) error {
		if ok, _ := MatchHash(st.Hash(), want); ok && line[c.ID] {
			v.MatchesCommit = c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v.Result = res
	v.Match, _ = MatchHash(res.State.Hash(), want)
	if v.Match {
		v.MatchesCommit = nil
	}
	return v, nil
}
