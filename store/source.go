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

// Source returns a replay.Source over one context's stored chain. Objects
// are returned as stored, unchecked, so that a fold can report a mismatch
// itself.
func (s *Store) Source(ctxID string) replay.Source { return &ctxSource{s: s, ctx: ctxID} }

type ctxSource struct {
	s   *Store
	ctx string
}

func (c *ctxSource) GetCommit(ctx context.Context, id hashing.Digest) (*replay.Commit, error) {
	return c.s.commitRecord(c.ctx, id)
}

func (c *ctxSource) Ops(ctx context.Context, cm *replay.Commit) ([]graph.Op, error) {
	return c.s.Ops(ctx, c.ctx, cm)
}

func (c *ctxSource) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	return c.s.rawObject(d)
}

// rawObject reads an object without checking its hash or caching it.
func (s *Store) rawObject(d hashing.Digest) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(keyObj(d))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("object %s: %w", d.Short(), ErrNotFound)
		}
		if err != nil {
			return err
		}
		out, err = item.ValueCopy(nil)
		return err
	})
	return out, err
}
