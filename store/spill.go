package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/artifactd/artifactd/fault"
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
// A bundle's pruned line says the blob was pruned in the bundle's source
// store, which speaks for the imported context only: the import records
// it under that context (keyImportedPruned), so that the context reads
// the blob as pruned, exports the line again and passes fsck, while any
// other context's reads and checks of the digest stay as they were. A
// store-wide marker is left by a prune here — and by an import of an
// earlier version, which nothing tells from a prune, so it stays
// store-wide.
//
//	spill NUL <unix nanoseconds BE> NUL <digest> -> context id (the spill index)
//
// The spill index's value names the context whose commit spilled the
// output and came to hold its bytes (empty in a store written before it
// did): fsck expects that context to hold them until they are pruned.
//	pruned NUL <digest>                          -> {"pruned_at": RFC 3339}
//	cpruned NUL <context> NUL <digest>           -> {"pruned_at": the bundle's time} (the context's import listed it as pruned)

const (
	pSpill          = "spill\x00"
	pPruned         = "pruned\x00"
	pImportedPruned = "cpruned\x00"
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

// spillKeyLen is the length of a keySpill key.
const spillKeyLen = len(pSpill) + 8 + 1 + 32

// parseSpillKey reads a key keySpill wrote: the unix nanoseconds and the
// digest; false when its length is not a spill key's (its NUL is not
// checked).
func parseSpillKey(k []byte) (nanos int64, d hashing.Digest, ok bool) {
	if len(k) != spillKeyLen {
		return 0, d, false
	}
	copy(d[:], k[len(k)-32:])
	return int64(binary.BigEndian.Uint64(k[len(pSpill):])), d, true
}

func keyPruned(d hashing.Digest) []byte { return append([]byte(pPruned), d[:]...) }

func keyImportedPruned(ctxID string, d hashing.Digest) []byte {
	return append([]byte(pImportedPruned+ctxID+"\x00"), d[:]...)
}

// PruneSpills prunes the bytes of every spilled output noted before
// cutoff (oldest first, at most limit; limit ≤ 0 means all) and returns how
// many it pruned. A blob that is also stored for another reason is pruned
// all the same: a spill's digest names only its own bytes. at is the time
// recorded as pruned_at.
func (s *Store) PruneSpills(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	type spill struct {
		key []byte
		d   hashing.Digest
	}
	var due []spill
	err := kv.ScanKeys(ctx, s.kv, []byte(pSpill), nil, 0, func(k []byte) error {
		nanos, d, ok := parseSpillKey(k)
		if !ok {
			return nil
		}
		if nanos >= cutoff.UnixNano() || (limit > 0 && len(due) >= limit) {
			return errEnough
		}
		due = append(due, spill{bytes.Clone(k), d})
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune spills: %w", err)
	}
	marker := prunedMarker(hashing.FormatTime(at))
	n := 0
	for _, sp := range due {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, d := sp.key, sp.d
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

// markImportedPruned records, in one write, that context ctxID holds blob
// d and that the bundle it was imported from lists d as pruned at at: the
// context's own record, which no other context's reads or checks see.
// Bytes stored under d, if any, stay.
func (s *Store) markImportedPruned(ctx context.Context, ctxID string, d hashing.Digest, at string) error {
	b := kv.Batch{Sets: []kv.Record{{Key: keyImportedPruned(ctxID, d), Value: prunedMarker(at)}, {Key: keyBlobMember(ctxID, d), Value: []byte{}}}}
	if err := s.kv.Commit(ctx, b); err != nil {
		return fmt.Errorf("record blob %s of context %q as pruned: %w", d, ctxID, err)
	}
	return nil
}

// pruned returns the PrunedError of a blob pruned in this store (the
// store-wide marker), or nil.
func (s *Store) pruned(d hashing.Digest) error {
	return s.prunedAt(context.Background(), keyPruned(d), d)
}

// importedPruned returns the PrunedError of blob d when the bundle context
// ctxID was imported from lists it as pruned (ctxID's own record), or nil.
func (s *Store) importedPruned(ctx context.Context, ctxID string, d hashing.Digest) error {
	if ValidateContextID(ctxID) != nil {
		return nil
	}
	return s.prunedAt(ctx, keyImportedPruned(ctxID, d), d)
}

// prunedAt returns the PrunedError the marker under key says, or nil when
// there is none (or it cannot be read).
func (s *Store) prunedAt(ctx context.Context, key []byte, d hashing.Digest) error {
	v, err := s.getCopy(ctx, key, func() error { return ErrNotFound })
	if err != nil {
		return nil
	}
	at, _ := prunedMarkerAt(v)
	return &PrunedError{Digest: d, PrunedAt: at}
}

// prunedMarker is the value of a prune marker (keyPruned,
// keyImportedPruned) saying pruned at at.
func prunedMarker(at string) []byte {
	v, _ := json.Marshal(map[string]string{"pruned_at": at})
	return v
}

// prunedMarkerAt reads a prunedMarker value: the time it holds ("" when
// none), and false when it is not one (not a JSON object with a
// pruned_at string).
func prunedMarkerAt(v []byte) (string, bool) {
	var m struct {
		PrunedAt *string `json:"pruned_at"`
	}
	err := json.Unmarshal(v, &m)
	if m.PrunedAt == nil {
		return "", false
	}
	return *m.PrunedAt, err == nil
}

// BlobPruned reports whether blob d was pruned in this store (and when):
// by PruneSpills, or by an import of an earlier version, which recorded a
// bundle's pruned line so. A blob that only an imported context's bundle
// lists as pruned is not (see OpenContextBlob).
func (s *Store) BlobPruned(ctx context.Context, d hashing.Digest) (string, bool) {
	var pe *PrunedError
	if errors.As(s.pruned(d), &pe) {
		return pe.PrunedAt, true
	}
	return "", false
}

// blobPrunedIn reports whether blob d reads as pruned through context
// ctxID (and since when): pruned in this store (BlobPruned), or listed as
// pruned by the bundle ctxID was imported from. It does not check that
// ctxID holds d.
func (s *Store) blobPrunedIn(ctx context.Context, ctxID string, d hashing.Digest) (string, bool) {
	if at, ok := s.BlobPruned(ctx, d); ok {
		return at, true
	}
	var pe *PrunedError
	if errors.As(s.importedPruned(ctx, ctxID, d), &pe) {
		return pe.PrunedAt, true
	}
	return "", false
}

// ---- fsck ----

// spills checks the spill index. A spill's commit made its context hold
// the output's bytes (CommitRequest.Blobs and Spills land together), and
// only a prune deletes its index record (with the bytes, leaving a
// marker), so while the record is there its context must hold the blob
// and the bytes must be stored — or pruned through another spill of the
// same text. It reports a malformed record, a context that no longer
// holds its spilled output (the membership was lost: the context can no
// longer read the output's full text), and bytes neither stored nor
// pruned once: not again on a membership checkBlobs reported, nor, later,
// on the gate outputs that name them (lostHeld, lostBytes). A record
// written before the index named contexts is checked for its bytes only.
func (k *checker) spills(ctx context.Context) error {
	s := k.s
	type spill struct {
		at    time.Time
		d     hashing.Digest
		ctxID string
	}
	var found []spill
	lost := func(key []byte, why string) {
		k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%q", key), Detail: "spill index record unreadable: " + why})
	}
	if err := k.scanAll(ctx, []byte(pSpill), func(key, v []byte) error {
		nanos, d, ok := parseSpillKey(key)
		if !ok || key[len(pSpill)+8] != 0 {
			k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%q", key), Detail: "malformed spill index key"})
			return nil
		}
		sp := spill{at: time.Unix(0, nanos).UTC(), d: d, ctxID: string(v)}
		if sp.ctxID != "" && ValidateContextID(sp.ctxID) != nil {
			k.add(Defect{Kind: "blob", ID: sp.d.String(),
				Detail: fmt.Sprintf("the spill index record of %s names no valid context (%q)", hashing.FormatTime(sp.at), v)})
			return nil
		}
		found = append(found, sp)
		return nil
	}, lost); err != nil {
		return err
	}
	reported := map[hashing.Digest]bool{}
	for m := range k.lostHeld {
		reported[m.d] = true
	}
	for _, sp := range found {
		stored, err := k.hasBlob(ctx, sp.d)
		if err != nil && !fault.IsCorrupt(err) {
			return fmt.Errorf("look up spilled blob %s: %w", sp.d, err)
		}
		gone := false // and not reported yet
		if !stored && err == nil && !reported[sp.d] {
			_, pruned := s.BlobPruned(ctx, sp.d)
			gone = !pruned
		}
		held := true
		if sp.ctxID != "" {
			if held, err = s.BlobMember(ctx, sp.ctxID, sp.d); err != nil && !fault.IsCorrupt(err) {
				return fmt.Errorf("look up spilled blob %s of %q: %w", sp.d, sp.ctxID, err)
			}
			held = held || err != nil // an unreadable record is reported with the memberships
		}
		if gone { // reported here, once
			reported[sp.d] = true
			k.lostBytes[sp.d] = true
		}
		switch {
		case !held:
			detail := fmt.Sprintf("context %q spilled a tool output's full text (blob %s) at %s and no longer holds it: its record was lost, and the context cannot read the text", sp.ctxID, sp.d, hashing.FormatTime(sp.at))
			if gone {
				detail += "; its bytes are neither stored nor pruned"
			}
			k.add(Defect{Kind: "blob", Context: sp.ctxID, ID: sp.d.String(), Detail: detail})
		case gone:
			k.add(Defect{Kind: "blob", Context: sp.ctxID, ID: sp.d.String(),
				Detail: fmt.Sprintf("the tool output's full text spilled at %s (blob %s) is neither stored nor pruned", hashing.FormatTime(sp.at), sp.d)})
		}
	}
	return nil
}

// importedPrunes checks the records of blobs that a context's import
// listed as pruned (keyImportedPruned): each key must name a valid
// context and a digest, and each value must be a JSON object with the
// time the bundle gave (pruned_at, a string).
func (k *checker) importedPrunes(ctx context.Context) error {
	lost := func(key []byte, why string) {
		k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%q", key), Detail: "imported prune record unreadable: " + why})
	}
	return k.scanAll(ctx, []byte(pImportedPruned), func(key, v []byte) error {
		m, ok := parseCtxDigest(key, pImportedPruned)
		if !ok || ValidateContextID(m.ctxID) != nil {
			k.add(Defect{Kind: "blob", ID: fmt.Sprintf("%q", key), Detail: "malformed imported prune record key"})
			return nil
		}
		if _, ok := prunedMarkerAt(v); !ok {
			k.add(Defect{Kind: "blob", Context: m.ctxID, ID: m.d.String(),
				Detail: fmt.Sprintf("the record that context %q imported blob %s as pruned holds no pruned_at time: %q", m.ctxID, m.d, v)})
		}
		return nil
	}, lost)
}
