package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

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
	return &ctxSource{s: s, ctx: ctxID, ahead: true, pending: make(map[hashing.Digest]struct{}), ready: make(map[hashing.Digest][]byte)}
}

// plainSource is Source without the read-ahead, for a caller that applies
// a few commits and reads only the definitions' payloads (catchUp).
func (s *Store) plainSource(ctxID string) replay.Source {
	return &ctxSource{s: s, ctx: ctxID} // pending and ready stay empty: nothing is read ahead
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
	// ahead says whether Ops remembers the payloads it names for a
	// read-ahead.
	ahead bool

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
	if err != nil || !c.ahead {
		return ops, err
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
// want, until prefetchBytes are held, asking the driver for many at once
// (GetMany). Missing ones are left for the single read that reports
// them.
func (c *ctxSource) readAhead(want hashing.Digest) error {
	ids := make([]hashing.Digest, 0, len(c.pending))
	for d := range c.pending {
		ids = append(ids, d)
	}
	slices.SortFunc(ids, func(a, b hashing.Digest) int { return bytes.Compare(a[:], b[:]) })
	// Start at want, wrap around to the smaller ones.
	at, _ := slices.BinarySearchFunc(ids, want, func(a, b hashing.Digest) int { return bytes.Compare(a[:], b[:]) })
	// Read them in key order, from want on, in parts of readAheadPart
	// lookups, until prefetchBytes are ready.
	order := append(ids[at:len(ids):len(ids)], ids[:at]...)
	for len(order) > 0 && c.readyBytes < prefetchBytes {
		n := min(len(order), readAheadPart)
		keys := make([][]byte, n)
		for i, d := range order[:n] {
			keys[i] = keyObj(d)
			delete(c.pending, d)
		}
		vals, err := c.s.kv.GetMany(context.Background(), keys)
		if err != nil {
			return err
		}
		for i, v := range vals {
			if v == nil {
				continue // left for the single read that reports it
			}
			c.ready[order[i]] = v
			c.readyBytes += len(v)
		}
		order = order[n:]
	}
	return nil
}

// readAheadPart is how many payloads one read ahead asks the driver for
// at once.
const readAheadPart = 256

// rawObject reads an object without checking its hash or caching it.
func (s *Store) rawObject(d hashing.Digest) ([]byte, error) {
	out, err := s.getCopy(context.Background(), keyObj(d), func() error { return fmt.Errorf("object %s: %w", d.Short(), ErrNotFound) })
	return out, err
}
