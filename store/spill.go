package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv"
)

// Spilled outputs: the full text of a tool output or error that its model
// view cut is kept as a blob for people; an operator may keep those bytes
// for a window only (serve --spill-retention). Pruning deletes the bytes
// and leaves a marker: the artifact keeps its digest (its content hash,
// and so every context hash, stays verifiable), reads of the blob say
// when it was pruned, and fsck and import accept a gate output whose blob
// was pruned.
//
//	spill NUL <unix nanoseconds BE> NUL <digest> -> ""  (the spill index)
//	pruned NUL <digest>                          -> {"pruned_at": RFC 3339}

const (
	pSpill  = "spill\x00"
	pPruned = "pruned\x00"
)

// ErrPruned: the blob's bytes were pruned after its retention window.
// The error is a *PrunedError.
var ErrPruned = errors.New("blob pruned")

// PrunedError says when a blob's bytes were pruned.
type PrunedError struct {
	Digest   hashing.Digest
	PrunedAt string
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("blob %s was pruned at %s after its retention window", e.Digest, e.PrunedAt)
}

// Unwrap returns ErrPruned.
func (e *PrunedError) Unwrap() error { return ErrPruned }

func keySpill(at time.Time, d hashing.Digest) []byte {
	k := append([]byte(pSpill), make([]byte, 8)...)
	binary.BigEndian.PutUint64(k[len(pSpill):], uint64(at.UnixNano()))
	k = append(k, 0)
	return append(k, d[:]...)
}

func keyPruned(d hashing.Digest) []byte { return append([]byte(pPruned), d[:]...) }

// PruneSpills prunes the bytes of every spilled output noted before
// cutoff (oldest first, at most limit; limit ≤ 0 means all) and returns how
// many it pruned. A blob that is also stored for another reason is pruned
// all the same: a spill's digest names only its own bytes. at is the time
// recorded as pruned_at.
func (s *Store) PruneSpills(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	var due [][]byte
	err := kv.ScanKeys(ctx, s.kv, []byte(pSpill), nil, 0, func(k []byte) error {
		if len(k) != len(pSpill)+8+1+32 {
			return nil
		}
		if int64(binary.BigEndian.Uint64(k[len(pSpill):])) >= cutoff.UnixNano() || (limit > 0 && len(due) >= limit) {
			return errEnough
		}
		due = append(due, bytes.Clone(k))
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune spills: %w", err)
	}
	marker, _ := json.Marshal(map[string]string{"pruned_at": hashing.FormatTime(at)})
	n := 0
	for _, k := range due {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		var d hashing.Digest
		copy(d[:], k[len(k)-32:])
		keys, err := s.blobRecordKeys(ctx, d)
		if err != nil {
			return n, fmt.Errorf("prune blob %s: %w", d, err)
		}
		b := kv.Batch{Deletes: append(keys, k), Sets: []kv.Record{{Key: keyPruned(d), Value: marker}}}
		if err := s.kv.Commit(ctx, b); err != nil {
			return n, fmt.Errorf("prune blob %s: %w", d, err)
		}
		n++
	}
	return n, nil
}

// markPruned records that blob d's bytes were pruned at at (an import of a
// bundle that says so); bytes stored under d, if any, stay.
func (s *Store) markPruned(d hashing.Digest, at string) error {
	marker, _ := json.Marshal(map[string]string{"pruned_at": at})
	if err := s.kv.Commit(context.Background(), kv.Batch{Sets: []kv.Record{{Key: keyPruned(d), Value: marker}}}); err != nil {
		return fmt.Errorf("mark blob %s pruned: %w", d, err)
	}
	return nil
}

// pruned returns the PrunedError of a pruned blob, or nil.
func (s *Store) pruned(d hashing.Digest) error {
	v, err := s.getCopy(context.Background(), keyPruned(d), func() error { return ErrNotFound })
	if err != nil {
		return nil
	}
	var m struct {
		PrunedAt string `json:"pruned_at"`
	}
	_ = json.Unmarshal(v, &m)
	return &PrunedError{Digest: d, PrunedAt: m.PrunedAt}
}

// BlobPruned reports whether blob d was pruned (and when).
func (s *Store) BlobPruned(ctx context.Context, d hashing.Digest) (string, bool) {
	var pe *PrunedError
	if errors.As(s.pruned(d), &pe) {
		return pe.PrunedAt, true
	}
	return "", false
}
