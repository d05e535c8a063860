package store

import (
	"bytes"
	"context"
	"errors"

	"github.com/artifactd/artifactd/replay"
)

// errHeadMoved tells Diff that a branch head moved between reading its
// commit and reading its state.
var errHeadMoved = errors.New("branch head moved")

// Diff reports what differs between the states at commits from and to of
// a context, with trust changes. It reads only the parts of the commits'
// state maps that differ (DiffCommits) and computes trust for the
// artifacts whose trust may have changed only (replay.DiffTrust), against
// a state the store holds in memory:
//
//   - when from or to is a branch head, that head;
//   - otherwise main's head, through the diff from to (or from) to it
//     (replay.DiffTrustVia), unless both are larger than a quarter of the
//     state, in which case the state at to is read over its state map
//     (ReadSparse: the trust of what the diff touches, read where the map
//     keeps it), or loaded whole if it already is, or its map predates
//     format 3.
//
// Errors: ErrNotFound (context), ErrCorrupt, I/O errors, ctx's error when
// ctx ends first.
func (s *Store) Diff(ctx context.Context, ctxID string, from, to *replay.Commit) (*replay.DiffResult, error) {
	if _, err := s.GetContext(ctx, ctxID); err != nil {
		return nil, err
	}
	d, err := s.DiffStates(ctx, from, to)
	if err != nil {
		return nil, err
	}
	d.From, d.To, d.FromHash, d.ToHash = from.ID, to.ID, from.ContextHash, to.ContextHash
	if d.Empty() {
		return d, nil
	}
	branches, err := s.Branches(ctx, ctxID)
	if err != nil {
		return nil, err
	}
	for _, side := range []replay.Side{replay.SideTo, replay.SideFrom} {
		want := to
		if side == replay.SideFrom {
			want = from
		}
		for _, b := range branches {
			if b.Head != want.ID {
				continue
			}
			err := s.Read(ctx, ctxID, b.Name, func(v *View) error {
				if v.Commit.ID != want.ID {
					return errHeadMoved
				}
				replay.DiffTrust(d, v.State, v.Trust.Status, side, v.Base())
				return nil
			})
			if !errors.Is(err, errHeadMoved) {
				return d, err
			}
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		done, err := s.diffTrustViaMain(ctx, ctxID, d, from, to)
		if errors.Is(err, errHeadMoved) {
			continue
		}
		if err != nil || done {
			return d, err
		}
		break // the diffs to main are too large
	}
	err = s.ReadSparse(ctx, ctxID, to, func(v *View) error {
		replay.DiffTrust(d, v.State, v.Trust.Status, replay.SideTo, v.Base())
		return nil
	})
	return d, err
}

// diffTrustViaMain fills d.Trust from main's in-memory head, through
// the diff from to (or, when that is large, from from) to the head. It
// reports false when both diffs are too large to be worth it, and
// errHeadMoved when main moved meanwhile.
func (s *Store) diffTrustViaMain(ctx context.Context, ctxID string, d *replay.DiffResult, from, to *replay.Commit) (bool, error) {
	h, err := s.branchHead(ctx, ctxID, DefaultBranch)
	if err != nil {
		return false, err
	}
	limit := (h.Artifacts + h.Edges) / 4
	side, via := replay.SideTo, (*replay.DiffResult)(nil)
	for _, c := range []*replay.Commit{to, from} {
		dh, err := s.DiffStates(ctx, c, h)
		if err != nil {
			return false, err
		}
		if diffSize(dh) <= limit {
			via = dh
			break
		}
		side = replay.SideFrom
	}
	if via == nil {
		return false, nil
	}
	err = s.Read(ctx, ctxID, DefaultBranch, func(v *View) error {
		if v.Commit.ID != h.ID {
			return errHeadMoved
		}
		replay.DiffTrustVia(d, v.State, v.Trust.Status, side, via, v.Base())
		return nil
	})
	return err == nil, err
}

func diffSize(d *replay.DiffResult) int {
	return len(d.Added) + len(d.Removed) + len(d.Changed) + len(d.EdgesAdded) + len(d.EdgesRemoved) + len(d.EdgesChanged)
}

// DiffStates reports what differs between the states at commits from
// and to, of one context or of two, without trust (DiffCommits as a
// replay.DiffResult): it reads only the parts of their state maps that
// differ and never loads a state. It reads them a window at a time
// (diffWindows): what it holds of the maps at once is bounded however
// big they are and however little they share, beside the result itself
// — except for maps written before format 2, whose differing subtrees
// are read whole.
func (s *Store) DiffStates(ctx context.Context, from, to *replay.Commit) (*replay.DiffResult, error) {
	var b replay.DiffBuilder
	if err := s.diffWindows(ctx, rootOf(from), rootOf(to), readerWorkers(), addTo(ctx, &b)); err != nil {
		return nil, err
	}
	return b.Result(), nil
}

// rawDiffOver is DiffStates reading nodes from src as they are needed: a
// source that holds them (the committer's trie writer).
func rawDiffOver(ctx context.Context, src nodeSource, from, to *replay.Commit) (*replay.DiffResult, error) {
	var b replay.DiffBuilder
	if err := trieDiff(src, rootOf(from), rootOf(to), addTo(ctx, &b)); err != nil {
		return nil, err
	}
	return b.Result(), nil
}

// rootOf is the root of commit c's state map.
func rootOf(c *replay.Commit) trieChild { return trieChild{id: c.Root, count: c.RootCount} }

// addTo returns a trieDiff callback adding each artifact and edge entry
// that differs to b, as changeOf reads it, which stops once ctx ends
// (checked every 1,024 entries).
func addTo(ctx context.Context, b *replay.DiffBuilder) func(k, old, new []byte) error {
	check := everyCheck(ctx)
	return func(k, old, new []byte) error {
		if err := check(); err != nil {
			return err
		}
		switch k[0] {
		case 'a':
			ov, err := versionOfVal(old)
			if err != nil {
				return err
			}
			nv, err := versionOfVal(new)
			if err != nil {
				return err
			}
			b.AddVersions(string(k[1:]), ov, nv)
		case 'e':
			ek, err := splitEdgeKey(k)
			if err != nil {
				return err
			}
			b.AddEdge(replay.EdgeDelta{Key: ek, OldPresent: old != nil, NewPresent: new != nil,
				OldAttrs: nilIfEmpty(decodeEdgeVal(old)), NewAttrs: nilIfEmpty(decodeEdgeVal(new))})
		}
		return nil
	}
}

// versionOfVal returns the version an artifact entry's value (nil:
// absent) holds, or nil.
func versionOfVal(v []byte) (*replay.ArtifactVersion, error) {
	if v == nil {
		return nil, nil
	}
	av, err := decodeArtifactVal(v)
	if err != nil {
		return nil, err
	}
	return &replay.ArtifactVersion{Type: av.typ, Version: av.version, ContentHash: av.contentHash, ProducedBy: av.producedBy}, nil
}

// nilIfEmpty returns a copy of b, or nil when b is empty: an edge's attrs
// as a diff lists them, which must not keep the node they were read from.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}
