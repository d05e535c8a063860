package store

import (
	"context"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// Defect is one problem found by Check.
type Defect struct {
	// Kind is "object", "blob", "node", "commit", "ref" or "state".
	Kind    string `json:"kind"`
	Context string `json:"context,omitempty"`
	// ID names the record: a digest, a branch or a commit.
	ID     string `json:"id"`
	Detail string `json:"detail"`
}

func (d Defect) String() string {
	if d.Context != "" {
		return fmt.Sprintf("%s %s in context %q: %s", d.Kind, d.ID, d.Context, d.Detail)
	}
	return fmt.Sprintf("%s %s: %s", d.Kind, d.ID, d.Detail)
}

// CheckReport is what Check read and found.
type CheckReport struct {
	Contexts int      `json:"contexts"`
	Commits  int      `json:"commits"`
	Ops      int      `json:"ops"`
	Objects  int      `json:"objects"`
	Blobs    int      `json:"blobs"`
	Nodes    int      `json:"nodes"`
	Defects  []Defect `json:"defects"`
}

// Check verifies the whole store and collects every defect rather than
// stopping at the first: every object, blob and state-map node is
// re-hashed against its key; every context's commits are replayed from
// their first commit (ids, ops hashes and context hashes recomputed); every
// branch head's state map is loaded and hashed; every ref points at a
// commit. A value that fails its hash is read again once, to tell a flaky
// read from real corruption. The error is non-nil only when the check
// itself could not run.
func (s *Store) Check(ctx context.Context) (*CheckReport, error) {
	rep := &CheckReport{}
	add := func(d Defect) { rep.Defects = append(rep.Defects, d) }
	scan := func(prefix, kind string, verify func(d hashing.Digest, v []byte) error, count *int) error {
		return s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: true})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				k := it.Item().Key()
				*count++
				if len(k) != len(prefix)+32 {
					add(Defect{Kind: kind, ID: fmt.Sprintf("%q", k), Detail: "malformed key"})
					continue
				}
				var d hashing.Digest
				copy(d[:], k[len(prefix):])
				v, err := it.Item().ValueCopy(nil)
				if err == nil {
					err = verify(d, v)
				}
				if err != nil {
					// Read once more before calling it corruption.
					item, gerr := txn.Get(it.Item().KeyCopy(nil))
					if gerr == nil {
						if v2, verr := item.ValueCopy(nil); verr == nil && verify(d, v2) == nil {
							continue
						}
					}
					add(Defect{Kind: kind, ID: d.String(), Detail: err.Error()})
				}
			}
			return nil
		})
	}
	if err := scan(pObj, "object", func(d hashing.Digest, v []byte) error {
		if _, err := hashing.CanonicalizeObject(v); err != nil {
			return fmt.Errorf("not canonical JSON: %w", err)
		}
		if hashing.ContentHash(v) != d {
			return errors.New("bytes do not match the content hash")
		}
		return nil
	}, &rep.Objects); err != nil {
		return rep, err
	}
	if err := scan(pBlob, "blob", func(d hashing.Digest, v []byte) error {
		if hashing.Sum(v) != d {
			return errors.New("bytes do not match the digest")
		}
		return nil
	}, &rep.Blobs); err != nil {
		return rep, err
	}
	if err := scan(pNode, "node", func(d hashing.Digest, v []byte) error {
		if hashing.Sum(v) != d {
			return errors.New("bytes do not match the node id")
		}
		_, err := decodeNode(v)
		return err
	}, &rep.Nodes); err != nil {
		return rep, err
	}
	// Drop caches so that the chain checks read from disk.
	s.nodes = newLRU[hashing.Digest, *trieNode](s.nodes.max)
	s.objects = newLRU[hashing.Digest, []byte](s.objects.max)
	s.states = newLRU[string, *materialized](s.states.max)

	ctxs, err := s.ListContexts(ctx)
	if err != nil {
		return rep, err
	}
	for _, info := range ctxs {
		rep.Contexts++
		if err := s.checkContext(ctx, info.ID, rep, add); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (s *Store) checkContext(ctx context.Context, ctxID string, rep *CheckReport, add func(Defect)) error {
	var commits []*replay.Commit
	err := s.Commits(ctx, ctxID, 0, func(c *replay.Commit) error {
		commits = append(commits, c)
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			add(Defect{Kind: "commit", Context: ctxID, ID: "chain", Detail: err.Error()})
			return nil
		}
		return err
	}
	rep.Commits += len(commits)
	if len(commits) > 0 {
		res, err := replay.FoldCommits(ctx, s.Source(ctxID), commits, replay.Options{Objects: replay.ObjectsAll},
			func(c *replay.Commit, st *graph.State) error {
				if c.RootCount != st.NumArtifacts()+st.NumEdges()+len(st.Tombstones()) {
					add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(),
						Detail: fmt.Sprintf("state map holds %d entries, the replayed state %d", c.RootCount, st.NumArtifacts()+st.NumEdges()+len(st.Tombstones()))})
				}
				return nil
			})
		if err != nil {
			var ce *replay.ChainError
			if !errors.As(err, &ce) {
				return err
			}
			add(Defect{Kind: "commit", Context: ctxID, ID: ce.Commit.String(), Detail: ce.Reason})
		} else {
			rep.Ops += res.Ops
		}
	}
	branches, err := s.Branches(ctx, ctxID)
	if err != nil {
		add(Defect{Kind: "ref", Context: ctxID, ID: "*", Detail: err.Error()})
		return nil
	}
	for _, b := range branches {
		c, err := s.commitRecord(ctxID, b.Head)
		if err != nil {
			add(Defect{Kind: "ref", Context: ctxID, ID: b.Name, Detail: err.Error()})
			continue
		}
		if _, err := s.loadState(c); err != nil {
			add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(), Detail: err.Error()})
		}
	}
	return nil
}
