package store

// Temporary: the blob code's storage calls over Badger until the store is
// on the kv seam; each maps to the kv.Driver verb of the same name.

import (
	"context"
	"errors"

	badger "github.com/dgraph-io/badger/v4"

	kvseam "github.com/artifactd/artifactd/store/kv"
)

func (s *Store) kvGet(_ context.Context, key []byte) ([]byte, error) {
	out, err := s.getCopy(key, func() error { return kvseam.ErrNotFound })
	return out, err
}

func (s *Store) kvPutImmutable(_ context.Context, recs []kvseam.Record) error {
	return s.db.Update(func(txn *badger.Txn) error {
		for _, r := range recs {
			if _, err := txn.Get(r.Key); err == nil {
				continue
			}
			if err := txn.Set(r.Key, r.Value); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) kvCommit(_ context.Context, b kvseam.Batch) error {
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, sw := range b.Swaps {
			_, err := txn.Get(sw.Key)
			exists := err == nil
			if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			if sw.Absent && exists {
				return &kvseam.ConflictError{Conflicts: []kvseam.Conflict{{Key: sw.Key, Exists: true}}}
			}
			if err := txn.Set(sw.Key, sw.New); err != nil {
				return err
			}
		}
		for _, r := range b.Sets {
			if err := txn.Set(r.Key, r.Value); err != nil {
				return err
			}
		}
		for _, k := range b.Deletes {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || s.noSync {
		return err
	}
	return s.db.Sync()
}

func (s *Store) kvScan(_ context.Context, prefix []byte, fn func(k, v []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(it.Item().Key(), v); err != nil {
				return err
			}
		}
		return nil
	})
}
