package service

import (
	"context"

	"github.com/artifactd/artifactd/fault"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// VerifyInput is the body of POST /v1/contexts/{ctx}/verify: the expected
// context hash (sha256:<hex>, bare hex or a prefix of 8+ hex digits) and
// the commit or branch to replay to (default main).
type VerifyInput struct {
	Hash string `json:"hash"`
	At   string `json:"at,omitempty"`
}

// VerifyResult is the answer of POST .../verify: whether the context hash
// rebuilt by replaying the stored chain matches, what it is, at which
// commit, and how much was replayed. MatchesCommit names, on a mismatch,
// the newest older commit of the same first-parent line whose state has
// the expected hash.
type VerifyResult struct {
	Match         bool            `json:"match"`
	ContextHash   hashing.Digest  `json:"context_hash"`
	Commit        hashing.Digest  `json:"commit"`
	Commits       int             `json:"commits"`
	Ops           int             `json:"ops"`
	Expected      string          `json:"expected"`
	MatchesCommit *hashing.Digest `json:"matches_commit,omitempty"`
}

// Verify replays the stored chain of ctxID up to in.At from the commit
// records and op chunks on disk, never from the in-memory head, while the
// server keeps serving: every commit id, ops hash and context hash on the
// way is recomputed and the final state's payloads are re-hashed. A chain
// that does not verify is a 500 store-corrupt problem, never a mismatch.
func (s *Service) Verify(ctx context.Context, ctxID string, in VerifyInput) (*VerifyResult, error) {
	if _, err := hashing.HexPrefix(in.Hash); err != nil {
		return nil, &fault.Error{Code: fault.Invalid, Detail: "hash: " + err.Error(),
			Errors: []fault.FieldError{{Pointer: "/hash", Rule: "hash", Detail: "want sha256:<64 hex>, bare hex or a prefix of at least 8 hex digits"}}}
	}
	c, err := s.ResolveRef(ctx, ctxID, in.At, "at")
	if err != nil {
		return nil, err
	}
	v, err := replay.VerifyHash(ctx, s.st.Source(ctxID), c.ID, in.Hash, replay.Options{Objects: replay.ObjectsFinal})
	if err != nil {
		return nil, err
	}
	out := &VerifyResult{Match: v.Match, ContextHash: v.State.Hash(), Commit: v.Commit.ID,
		Commits: v.Commits, Ops: v.Ops, Expected: in.Hash}
	if v.MatchesCommit != nil {
		id := v.MatchesCommit.ID
		out.MatchesCommit = &id
	}
	return out, nil
}
