package store

import (
	"context"
	"io"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// Export writes a context as a self-contained bundle (replay.BundleFormat)
// to w and returns its header. With at empty the bundle holds every commit
// of the context and every branch; with at set (see Resolve) it holds that
// commit and its ancestors, and one branch, main, at that commit. Every
// object is checked against its content hash on the way out, so a corrupt
// store fails the export (ErrCorrupt or replay.ErrBroken) instead of
// producing a bundle that does not verify. The bundle carries the blobs
// its objects name that the context holds (its membership records, or in
// a store not backfilled yet what its gate outputs name), never another
// context's. Errors: ErrNotFound,
// ErrAmbiguous, ErrCorrupt, replay.ErrBroken, write errors of w.
func (s *Store) Export(ctx context.Context, ctxID, at string, w io.Writer) (*replay.BundleHeader, error) {
	info, err := s.GetContext(ctx, ctxID)
	if err != nil {
		return nil, err
	}
	h := replay.BundleHeader{Format: replay.BundleFormat, Context: ctxID,
		Settings: replay.BundleSettings{Quarantine: info.Quarantine, Created: info.Created}}
	var commits []*replay.Commit
	if at == "" {
		if err := s.Commits(ctx, ctxID, 0, func(c *replay.Commit) error {
			commits = append(commits, c)
			return nil
		}); err != nil {
			return nil, err
		}
		branches, err := s.Branches(ctx, ctxID)
		if err != nil {
			return nil, err
		}
		for _, b := range branches {
			h.Branches = append(h.Branches, replay.BundleBranch{Name: b.Name, Head: b.Head})
		}
	} else {
		c, err := s.Resolve(ctx, ctxID, at)
		if err != nil {
			return nil, err
		}
		if commits, err = replay.Ancestors(ctx, s.Source(ctxID), c.ID); err != nil {
			return nil, err
		}
		h.Branches = []replay.BundleBranch{{Name: DefaultBranch, Head: c.ID}}
	}
	blobs := contextBlobs{s: s, ctxID: ctxID}
	recorded, err := s.blobMembersRecorded(ctx)
	if err != nil {
		return nil, err
	}
	if !recorded {
		// A store written before contexts held blobs, not backfilled yet
		// (BackfillBlobMembers): what its gate outputs name is the
		// context's. Once memberships are recorded only they count — a
		// client may put a tool output naming any digest, which must not
		// make another context's bytes leave with this one's bundle.
		blobs.named = map[hashing.Digest]bool{}
		if err := s.gateBlobRefs(ctx, ctxID, commits, func(d hashing.Digest) error {
			blobs.named[d] = true
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return replay.ExportBundle(ctx, w, h, s.Source(ctxID), commits, blobs)
}
