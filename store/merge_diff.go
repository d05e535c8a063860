package store

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// errHeadMoved tells Diff that a branch head moved between reading its
// commit and reading its state.
var errHeadMoved = errors.New("branch head moved")

// Diff reports what differs between the states at commits from and to of
// a context, with trust changes. It reads only the parts of the commits'
// state maps that differ (DiffStates) and computes trust for the
// artifacts whose trust may have changed only (replay.DiffTrust), against
// a state the store holds in memory:
//
//   - when from or to is a branch head, that head;
//   - otherwise main's head, through the diff from to (or from) to it
//     (replay.DiffTrustVia), unless both are larger than a quarter of the
//     state or the head's definitions are not theirs, in which case the
//     state at to is read over its state map (ReadSparse: the trust of
//     what the diff touches, read where the map keeps it), or loaded
//     whole if it already is, or its map predates format 3.
//
// One state judges both sides only when both define the same types and
// relations; when from and to do not (a type or relation defined,
// changed or dropped between them), the trust each side's own index
// keeps is compared instead, over the artifacts either lists as not
// confirmed (diffTrustBySides).
//
// Errors: ErrNotFound (context), ErrCorrupt, I/O errors, ctx's error when
// ctx ends first.
func (s *Store) Diff(ctx context.Context, ctxID string, from, to *replay.Commit) (*replay.DiffResult, error) {
	d, _, err := s.diff(ctx, ctxID, from, to, 0)
	return d, err
}

// DiffWithin is Diff for a caller that can do without a big diff (a page
// that can count its state whole instead): it reports false, and no
// diff, when more than limit artifacts and edges differ or more than
// limit artifacts may have changed trust (through main's head, those
// between the two commits; between commits whose definitions differ,
// those either lists as not confirmed), having stopped computing as soon
// as it knew. A limit below 1 is taken as 1.
func (s *Store) DiffWithin(ctx context.Context, ctxID string, from, to *replay.Commit, limit int) (*replay.DiffResult, bool, error) {
	d, ok, err := s.diff(ctx, ctxID, from, to, max(limit, 1))
	if err != nil || !ok {
		return nil, false, err
	}
	return d, true, nil
}

// diff is Diff, and DiffWithin when limit > 0.
func (s *Store) diff(ctx context.Context, ctxID string, from, to *replay.Commit, limit int) (*replay.DiffResult, bool, error) {
	if _, err := s.GetContext(ctx, ctxID); err != nil {
		return nil, false, err
	}
	d, ok, err := s.diffStates(ctx, from, to, limit, false)
	if err != nil || !ok {
		return nil, false, err
	}
	d.From, d.To, d.FromHash, d.ToHash = from.ID, to.ID, from.ContextHash, to.ContextHash
	if d.Empty() {
		return d, true, nil
	}
	if d.HasType(graph.IsDefinitionType) {
		ok, err := s.diffTrustBySides(ctx, ctxID, d, from, to, limit)
		return d, ok, err
	}
	branches, err := s.Branches(ctx, ctxID)
	if err != nil {
		return nil, false, err
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
				ok = replay.DiffTrustWithin(d, v.State, v.Trust.Status, side, v.Base(), limit)
				return nil
			})
			if !errors.Is(err, errHeadMoved) {
				return d, ok, err
			}
		}
	}
	for attempt := 0; attempt < 2; attempt++ {
		done, ok, err := s.diffTrustViaMain(ctx, ctxID, d, from, to, limit)
		if errors.Is(err, errHeadMoved) {
			continue
		}
		if err != nil || done {
			return d, ok, err
		}
		break // the diffs to main are too large, or main's definitions are not theirs
	}
	err = s.ReadSparse(ctx, ctxID, to, func(v *View) error {
		ok = replay.DiffTrustWithin(d, v.State, v.Trust.Status, replay.SideTo, v.Base(), limit)
		return nil
	})
	return d, ok, err
}

// diffTrustBySides fills d.Trust from the trust index of each side, for
// commits whose definitions differ, which no one state can judge both
// sides by: the artifacts either index lists as not confirmed, and those
// present on one side only, each with its status on each side (an
// artifact present and not listed is confirmed). It reports false, d.Trust
// empty, when those are more than limit (limit > 0).
func (s *Store) diffTrustBySides(ctx context.Context, ctxID string, d *replay.DiffResult, from, to *replay.Commit, limit int) (bool, error) {
	d.Trust = d.Trust[:0]
	listed := func(c *replay.Commit) (map[string]graph.Status, bool, error) {
		m := map[string]graph.Status{}
		over := false
		err := s.ReadSparse(ctx, ctxID, c, func(v *View) error {
			for id, st := range v.Trust.Unconfirmed() {
				if limit > 0 && len(m) >= limit {
					over = true
					break
				}
				m[id] = st
			}
			return nil
		})
		return m, !over, err
	}
	old, ok, err := listed(from)
	if err != nil || !ok {
		return false, err
	}
	cur, ok, err := listed(to)
	if err != nil || !ok {
		return false, err
	}
	added, removed := map[string]bool{}, map[string]bool{}
	for _, c := range d.Added {
		added[c.ID] = true
	}
	for _, c := range d.Removed {
		removed[c.ID] = true
	}
	ids := make([]string, 0, len(old)+len(cur)+len(added)+len(removed))
	for _, m := range []map[string]graph.Status{old, cur} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	for _, m := range []map[string]bool{added, removed} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// An artifact either lists is present on that side; one neither
	// lists is confirmed where present.
	statusOn := func(listed map[string]graph.Status, absent map[string]bool, id string) graph.Status {
		if st, ok := listed[id]; ok {
			return st
		}
		if absent[id] {
			return ""
		}
		return graph.StatusConfirmed
	}
	for _, id := range ids {
		d.AddTrust(id, statusOn(old, added, id), statusOn(cur, removed, id))
	}
	return true, nil
}

// diffTrustViaMain fills d.Trust from main's in-memory head, through
// the diff from to (or, when that is large, from from) to the head. It
// reports false (not done) when both diffs are too large to be worth it
// or the head's definitions are not those of the side it is diffed
// with, and errHeadMoved when main moved meanwhile; ok is
// DiffTrustViaWithin's.
func (s *Store) diffTrustViaMain(ctx context.Context, ctxID string, d *replay.DiffResult, from, to *replay.Commit, limit int) (done, ok bool, err error) {
	h, err := s.branchHead(ctx, ctxID, DefaultBranch)
	if err != nil {
		return false, false, err
	}
	most := (h.Artifacts + h.Edges) / 4
	side, via := replay.SideTo, (*replay.DiffResult)(nil)
	for _, c := range []*replay.Commit{to, from} {
		dh, err := s.DiffStates(ctx, c, h)
		if err != nil {
			return false, false, err
		}
		if dh.Len() <= most && !dh.HasType(graph.IsDefinitionType) {
			via = dh
			break
		}
		side = replay.SideFrom
	}
	if via == nil {
		return false, false, nil
	}
	err = s.Read(ctx, ctxID, DefaultBranch, func(v *View) error {
		if v.Commit.ID != h.ID {
			return errHeadMoved
		}
		ok = replay.DiffTrustViaWithin(d, v.State, v.Trust.Status, side, via, v.Base(), limit)
		return nil
	})
	return err == nil, ok, err
}

// DiffStates reports what differs between the states at commits from
// and to, of one context or of two, without trust: it reads only the
// parts of their state maps that differ and never loads a state. It reads
// them a window at a time (diffWindows): what it holds of the maps at
// once is bounded however big they are and however little they share,
// beside the result itself — except for maps written before format 2,
// whose differing subtrees are read whole.
func (s *Store) DiffStates(ctx context.Context, from, to *replay.Commit) (*replay.DiffResult, error) {
	d, _, err := s.diffStates(ctx, from, to, 0, false)
	return d, err
}

// DiffStatesWithin is DiffStates for a caller that can do without a big
// diff (one that can count a state whole instead): it reports false, and
// no diff, when more than limit artifacts and edges differ — before it
// reads anything when the two commits' counts of artifacts and edges
// already differ by more, else as soon as its walk has met more. A limit
// below 1 is taken as 1.
func (s *Store) DiffStatesWithin(ctx context.Context, from, to *replay.Commit, limit int) (*replay.DiffResult, bool, error) {
	return s.diffStates(ctx, from, to, max(limit, 1), false)
}

// DiffArtifactsWithin is DiffStatesWithin over the artifacts alone: the
// diff's Added, Removed and Changed, its edge lists empty, or false when
// more than limit artifacts differ. It reads only the part of the two
// maps that holds artifacts (their edges, however many differ, are not
// walked), for a caller that follows the artifacts of a state from one
// commit to another — a list of ids by type, say.
func (s *Store) DiffArtifactsWithin(ctx context.Context, from, to *replay.Commit, limit int) (*replay.DiffResult, bool, error) {
	return s.diffStates(ctx, from, to, max(limit, 1), true)
}

// errDiffPast stops the walk of a bounded diff (diffStates).
var errDiffPast = errors.New("store: the diff passed its limit")

// diffStates is DiffStates, and DiffStatesWithin when limit > 0; with
// artifacts, DiffArtifactsWithin.
func (s *Store) diffStates(ctx context.Context, from, to *replay.Commit, limit int, artifacts bool) (*replay.DiffResult, bool, error) {
	differ := abs(from.Artifacts - to.Artifacts)
	if !artifacts {
		differ += abs(from.Edges - to.Edges)
	}
	if limit > 0 && differ > limit {
		return nil, false, nil // each artifact or edge one side lacks differs
	}
	a, b := rootOf(from), rootOf(to)
	prefix := tkArtifact("")
	if artifacts {
		var err error
		if a, err = s.artifactsRoot(a); err == nil {
			b, err = s.artifactsRoot(b)
		}
		if err != nil {
			return nil, false, err
		}
	}
	var d replay.DiffBuilder
	add := addTo(ctx, &d)
	err := s.diffWindows(ctx, a, b, readerWorkers(), func(k, old, new []byte) error {
		if artifacts && !bytes.HasPrefix(k, prefix) {
			return nil // an entry the artifacts' subtree shares a leaf with
		}
		if err := add(k, old, new); err != nil {
			return err
		}
		if limit > 0 && d.Len() > limit {
			return errDiffPast
		}
		return nil
	})
	if errors.Is(err, errDiffPast) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return d.Result(), true, nil
}

// artifactsRoot returns the subtree of the state map at root that holds
// its artifacts (triePrefixRoot), or root itself for a map of format 1,
// whose hashed layout keeps no key range together.
func (s *Store) artifactsRoot(root trieChild) (trieChild, error) {
	if root.count == 0 {
		return root, nil
	}
	n, err := s.node(root.id)
	if err != nil {
		return trieChild{}, err
	}
	if n.legacy {
		return root, nil
	}
	return triePrefixRoot(s, root, tkArtifact(""))
}

func abs(n int) int { return max(n, -n) }

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
// that differs to b (an artifact's version and an edge's attrs on each
// side), which stops once ctx ends (checked every 1,024 entries).
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
