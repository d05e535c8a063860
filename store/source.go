package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// Source returns a replay.Source over one context's stored chain. Objects
// are returned as stored, unchecked, so that a fold can report a mismatch
// itself.
//
// A fold asks for payloads one at a time, in artifact order, which is a
// random order of keys; a random read costs several times a read in key
// order. So the Source remembers the payloads named by the put ops it
// returned, and when one of them is asked for and many are pending, it
// reads all pending ones in key order in one pass and hands them out as
// they are asked for. A Source is safe for concurrent use.
func (s *Store) Source(ctxID string) replay.Source {
	return &ctxSource{s: s, ctx: ctxID, pending: make(map[hashing.Digest]struct{}), ready: make(map[hashing.Digest][]byte)}
}

const (
	// prefetchMin is the number of pending payloads from which a read
	// takes them all in key order.
	prefetchMin = 64
	// prefetchBytes bounds the payload bytes one read-ahead holds.
	prefetchBytes = 64 << 20
	// maxPending bounds how many payload names a Source remembers.
	maxPending = 1 << 20
)

type ctxSource struct {
	s   *Store
	ctx string

	mu sync.Mutex // guards pending and ready
	// pending holds payloads named by returned ops and not yet read.
	pending map[hashing.Digest]struct{}
	// ready holds payloads read ahead and not yet asked for.
	ready      map[hashing.Digest][]byte
	readyBytes int
}

func (c *ctxSource) GetCommit(ctx context.Context, id hashing.Digest) (*replay.Commit, error) {
	return c.s.commitRecord(c.ctx, id)
}

func (c *ctxSource) Ops(ctx context.Context, cm *replay.Commit) ([]graph.Op, error) {
	ops, err := c.s.Ops(ctx, c.ctx, cm)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range ops {
		if ops[i].Op != graph.OpPut || len(c.pending) >= maxPending {
			continue
		}
		if _, ok := c.ready[ops[i].ContentHash]; !ok {
			c.pending[ops[i].ContentHash] = struct{}{}
		}
	}
	return ops, nil
}

func (c *ctxSource) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.ready[d]; ok {
		delete(c.ready, d)
		c.readyBytes -= len(b)
		return b, nil
	}
	if _, ok := c.pending[d]; ok && len(c.pending) >= prefetchMin {
		if err := c.readAhead(d); err != nil {
			return nil, err
		}
		if b, ok := c.ready[d]; ok {
			delete(c.ready, d)
			c.readyBytes -= len(b)
			return b, nil
		}
	}
	delete(c.pending, d)
	return c.s.rawObject(d)
}

// readAhead reads the pending payloads in key order, first among them
// want, until prefetchBytes are held. It walks one iterator forward,
// stepping over a few keys it does not want rather than seeking, so that
// payloads that are dense in the key space cost a scan, not a lookup each;
// sparse ones are looked up in key order. Missing ones are left for the
// single read that reports them.
func (c *ctxSource) readAhead(want hashing.Digest) error {
	ids := make([]hashing.Digest, 0, len(c.pending))
	for d := range c.pending {
		ids = append(ids, d)
	}
	slices.SortFunc(ids, func(a, b hashing.Digest) int { return bytes.Compare(a[:], b[:]) })
	// Start at want, wrap around to the smaller ones.
	at, _ := slices.BinarySearchFunc(ids, want, func(a, b hashing.Digest) int { return bytes.Compare(a[:], b[:]) })
	return c.s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pObj)})
		defer it.Close()
		// Payloads sparse among all objects would need a seek each, which
		// costs more than a lookup: after a trial, switch to lookups.
		const trial, maxSteps = 32, 16
		seeks, lookups := 0, false
		for n, i := 0, at; n < len(ids); n, i = n+1, i+1 {
			if c.readyBytes >= prefetchBytes {
				return nil
			}
			if i == len(ids) {
				i = 0
				it.Rewind()
			}
			d := ids[i]
			delete(c.pending, d)
			key := keyObj(d)
			var item *badger.Item
			if lookups = lookups || n == trial && seeks > trial/2; lookups {
				var err error
				if item, err = txn.Get(key); errors.Is(err, badger.ErrKeyNotFound) {
					continue
				} else if err != nil {
					return err
				}
			} else {
				for steps := 0; steps < maxSteps && it.Valid() && bytes.Compare(it.Item().Key(), key) < 0; steps++ {
					it.Next()
				}
				if n == 0 || !it.Valid() || bytes.Compare(it.Item().Key(), key) < 0 {
					it.Seek(key)
					seeks++
				}
				if !it.Valid() || !bytes.Equal(it.Item().Key(), key) {
					continue
				}
				item = it.Item()
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			c.ready[d] = v
			c.readyBytes += len(v)
		}
		return nil
	})
}

// rawObject reads an object without checking its hash or caching it.
func (s *Store) rawObject(d hashing.Digest) ([]byte, error) {
	out, err := s.getCopy(keyObj(d), func() error { return fmt.Errorf("object %s: %w", d.Short(), ErrNotFound) })
	return out, err
}
