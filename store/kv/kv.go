package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/artifactd/artifactd/fault"
)

// MaxKeySize is the largest key, in bytes, every driver accepts. It keeps
// keys within what a B-tree index entry may hold in SQL engines.
const MaxKeySize = 1024

// The error vocabulary of the seam. Drivers wrap these with %w; callers
// test them with errors.Is.
var (
	// ErrNotFound: the key has no value.
	ErrNotFound = errors.New("kv: not found")
	// ErrConflict: a swap's expectation failed; the error is a
	// *ConflictError.
	ErrConflict = errors.New("kv: conflict")
	// ErrInvalid: the call breaks the contract (empty or oversized key, a
	// key twice in one batch); nothing was written.
	ErrInvalid = errors.New("kv: invalid request")
	// ErrTooLarge: the batch exceeds what the engine writes atomically;
	// nothing was written.
	ErrTooLarge = errors.New("kv: batch too large for one atomic write")
	// ErrCorrupt: stored data does not have the shape the driver wrote.
	ErrCorrupt = fault.Corruption("kv: corrupt")
	// ErrClosed: the driver was closed.
	ErrClosed = errors.New("kv: closed")
	// ErrOutcomeUnknown: a Commit sent its batch to be committed, lost
	// the way to the engine's answer (the connection broke, or no answer
	// came in time), and could not learn the outcome otherwise either (a
	// driver that can asks the engine on another connection, and returns
	// nil, or runs the batch again, when the engine tells), so it cannot
	// tell whether the batch landed. It landed whole — as durable as
	// after a nil, the records put before it included — or not at all,
	// and the refs its swaps move tell which.
	// The engine may settle it after Commit returned (a server still
	// committing, or yet to notice the broken connection): a read soon
	// after may find the refs unmoved and a later one moved, but a later
	// Commit's swaps of the same refs wait for the settled value. The
	// error wraps the cause. Only drivers that reach their engine over a
	// connection return it (pgkv); the embedded ones (badgerkv, memkv)
	// learn the outcome of every write they start, and never do.
	ErrOutcomeUnknown = errors.New("kv: commit sent, outcome unknown")
	// ErrNotWritten: a Commit failed and the driver knows that nothing of
	// its batch was written — the way to the engine broke before the
	// batch was sent to be committed, or the engine reported the
	// transaction aborted — and running it again (as the driver does,
	// a bounded number of times) failed too: the engine may be
	// unreachable for now. The refs are as they were, and a later Commit
	// may succeed. A Locker's Lock whose retries were spent that way
	// returns it too (nothing is held), and so does a PutImmutable or
	// PutSame: the put did not complete — when one of its runs' COMMIT
	// went out and the answer was lost, its records may be stored,
	// whole, which a put's caller may ignore (putting them again is
	// safe). The error wraps the cause. Only drivers that reach their engine over a
	// connection return it (pgkv); the embedded ones (badgerkv, memkv)
	// never do.
	ErrNotWritten = errors.New("kv: write not made")
)

// UnreadableError is a record whose key a driver found but whose value
// its engine cannot give back: a Get, GetMany or Scan that meets one
// fails with it. It is corruption (errors.Is ErrCorrupt). Key is the key
// the read reached — for a Scan, one within its prefix and from its start
// — so that a scan may go on past it (from Key with a zero byte
// appended), as fsck does.
type UnreadableError struct {
	Key []byte
	// Why says what the engine could not do.
	Why string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("kv: the value of key %q is unreadable: %s", e.Key, e.Why)
}

// Unwrap returns ErrCorrupt.
func (e *UnreadableError) Unwrap() error { return ErrCorrupt }

// Record is one key and its value.
type Record struct {
	Key   []byte
	Value []byte
}

// Swap is a compare-and-swap of one key, typically a ref.
type Swap struct {
	// Key is the key to move.
	Key []byte
	// Absent requires Key to have no value; Old is then ignored.
	Absent bool
	// Old is the value Key must have when Absent is false (an empty Old
	// expects a present, empty value).
	Old []byte
	// Delete removes Key instead of setting New.
	Delete bool
	// New is the value Key gets when Delete is false.
	New []byte
}

// Batch is the content of one atomic Commit. A key appears at most once
// across Sets, Deletes and Swaps.
type Batch struct {
	// Sets are written unconditionally, replacing any value.
	Sets []Record
	// Deletes are removed unconditionally (a missing key is fine).
	Deletes [][]byte
	// Swaps apply only if every expectation holds.
	Swaps []Swap
}

// Empty reports whether b writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Sets) == 0 && len(b.Deletes) == 0 && len(b.Swaps) == 0
}

// Validate checks b against the contract: valid keys, none twice. The
// error wraps ErrInvalid.
func (b *Batch) Validate() error {
	seen := make(map[string]struct{}, len(b.Sets)+len(b.Deletes)+len(b.Swaps))
	check := func(what string, i int, k []byte) error {
		if err := ValidateKey(k); err != nil {
			return fmt.Errorf("%s[%d]: %w", what, i, err)
		}
		if _, dup := seen[string(k)]; dup {
			return fmt.Errorf("%w: %s[%d]: key %q appears twice in one batch", ErrInvalid, what, i, k)
		}
		seen[string(k)] = struct{}{}
		return nil
	}
	for i, r := range b.Sets {
		if err := check("sets", i, r.Key); err != nil {
			return err
		}
	}
	for i, k := range b.Deletes {
		if err := check("deletes", i, k); err != nil {
			return err
		}
	}
	for i, s := range b.Swaps {
		if err := check("swaps", i, s.Key); err != nil {
			return err
		}
	}
	return nil
}

// ValidateKey checks one key: non-empty and at most MaxKeySize bytes. The
// error wraps ErrInvalid.
func ValidateKey(k []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if len(k) > MaxKeySize {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalid, len(k), MaxKeySize)
	}
	return nil
}

// ValidateRecords checks the keys of records for PutImmutable. The error
// wraps ErrInvalid.
func ValidateRecords(recs []Record) error {
	for i, r := range recs {
		if err := ValidateKey(r.Key); err != nil {
			return fmt.Errorf("records[%d]: %w", i, err)
		}
	}
	return nil
}

// Conflict is one failed swap: its key and the value it has now.
type Conflict struct {
	Key []byte
	// Exists reports whether Key has a value; Current is that value.
	Exists  bool
	Current []byte
}

// ConflictError is the error of a Commit whose swap expectations failed:
// it names every failed key, in the order of the batch's swaps. Nothing
// was written. errors.Is(err, ErrConflict) holds.
type ConflictError struct {
	Conflicts []Conflict
	// Cause, set when Conflicts is empty, is why the engine rolled the
	// write back instead (a deadlock or serialization failure it detected
	// in a Hold's transaction, or one it aborted after the answer to its
	// commit was lost): nothing was written and a retry may succeed.
	Cause error
}

// Error lists the conflicting keys.
func (e *ConflictError) Error() string {
	var sb strings.Builder
	if len(e.Conflicts) == 0 && e.Cause != nil {
		return "kv: conflict: " + e.Cause.Error()
	}
	sb.WriteString("kv: conflict on ")
	for i, c := range e.Conflicts {
		if i > 0 {
			sb.WriteString(", ")
		}
		if c.Exists {
			fmt.Fprintf(&sb, "%q (now %x)", c.Key, c.Current)
		} else {
			fmt.Fprintf(&sb, "%q (now absent)", c.Key)
		}
	}
	return sb.String()
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Holds reports whether a key whose state is (exists, current) meets s's
// expectation.
func (s *Swap) Holds(exists bool, current []byte) bool {
	if s.Absent {
		return !exists
	}
	return exists && bytes.Equal(current, s.Old)
}

// PrefixEnd returns the smallest key greater than every key with prefix,
// or nil when there is none (an empty prefix, or one of only 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// ScanStart returns where a scan of prefix from start begins: the larger
// of the two.
func ScanStart(prefix, start []byte) []byte {
	if bytes.Compare(start, prefix) > 0 {
		return start
	}
	return prefix
}

// ScanEnd returns the exclusive upper bound of a reverse scan of prefix
// below end: the smaller of end and PrefixEnd(prefix), nil for none.
func ScanEnd(prefix, end []byte) []byte {
	pe := PrefixEnd(prefix)
	switch {
	case end == nil:
		return pe
	case pe == nil || bytes.Compare(end, pe) < 0:
		return end
	}
	return pe
}

// Driver is the storage seam. See the package documentation for the
// contract each method keeps.
type Driver interface {
	// PutImmutable writes immutable records; an existing key keeps its
	// value.
	PutImmutable(ctx context.Context, recs []Record) error
	// Get returns key's value or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// GetMany returns the values of keys in order, nil for a missing key.
	GetMany(ctx context.Context, keys [][]byte) ([][]byte, error)
	// Scan calls fn for the keys with prefix from start, in key order, at
	// most limit times (limit <= 0: all).
	Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error
	// ScanReverse calls fn for the keys with prefix below end (nil: no
	// bound), in decreasing key order, at most limit times (limit <= 0:
	// all).
	ScanReverse(ctx context.Context, prefix, end []byte, limit int, fn func(k, v []byte) error) error
	// Commit applies b atomically and durably, or returns a
	// *ConflictError and writes nothing. When ctx ends during the call
	// the result still tells the truth: nil when b landed, ctx's error
	// only when nothing was written. An error wrapping ErrOutcomeUnknown
	// says that b was sent, the engine's answer lost and the outcome not
	// to be learnt otherwise: b landed whole and durably or not at all,
	// and the refs tell which. An error wrapping ErrNotWritten says that
	// nothing of b was written and the engine may be unreachable for
	// now: a later Commit may succeed.
	Commit(ctx context.Context, b Batch) error
	// Close releases the driver.
	Close() error
}

// Sharer is implemented by drivers whose records other processes may
// change while this one runs (a database server). A store over such a
// driver reads a branch's ref before it trusts a cached head; the
// compare-and-swap of Commit keeps it correct either way.
type Sharer interface {
	// Shared reports whether other processes may write.
	Shared() bool
}

// IsShared reports whether d says other processes may write through it.
func IsShared(d Driver) bool {
	s, ok := d.(Sharer)
	return ok && s.Shared()
}

// Locker is implemented by shared drivers that let a writer hold keys
// while it decides what to write. Writers in several processes that lock
// the keys they are about to swap take turns, in the order they asked,
// instead of racing on the swaps — where the one with the least work
// between reading a ref and swapping it wins again and again, and the
// others starve. A store over a shared driver requires it.
//
// A hold is about turn-taking only, never correctness: the swaps of the
// hold's Commit are checked as Driver.Commit checks them, and a Commit
// outside any hold may or may not wait for one.
type Locker interface {
	// Lock waits until no other hold has any of keys, takes them all and
	// returns the hold; the caller must end it with Commit or Release
	// (Close waits for open holds). Only keys that have a value when Lock
	// takes them are sure to be exclusive: a hold of a missing key may or
	// may not keep others waiting (a database locks rows, and a missing
	// key has none). Lock returns ctx's error when ctx ends first. Holds
	// deadlock only if one caller holds two at a time: lock every key a
	// write needs in one call.
	Lock(ctx context.Context, keys [][]byte) (Hold, error)
}

// LockKeys checks the keys of a Lock call and returns them sorted, each
// once — the order in which a driver takes them, so that two holds never
// wait for each other. The error wraps ErrInvalid.
func LockKeys(keys [][]byte) ([][]byte, error) {
	for i, k := range keys {
		if err := ValidateKey(k); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, bytes.Compare)
	return slices.CompactFunc(sorted, bytes.Equal), nil
}

// Hold is keys held by Locker.Lock.
type Hold interface {
	// Commit applies b as Driver.Commit does, and ends the hold — unless
	// it returns ErrInvalid or ErrTooLarge, which it does having sent
	// nothing, when the hold stays for another Commit or a Release.
	Commit(ctx context.Context, b Batch) error
	// Release ends the hold without writing; after Commit it does
	// nothing.
	Release()
}

// Limiter is implemented by drivers that bound what one Commit holds.
type Limiter interface {
	// Limits returns the largest batch one Commit takes: its total size
	// in bytes (keys and values) and its number of records.
	Limits() (bytes, count int64)
}

// Default limits of LimitsOf for a driver without a Limiter: what one
// transaction of a database server takes without trouble.
const (
	DefaultLimitBytes = 64 << 20
	DefaultLimitCount = 20000
)

// LimitsOf returns d's batch limits (Limiter), or the defaults.
func LimitsOf(d Driver) (bytes, count int64) {
	if l, ok := d.(Limiter); ok {
		return l.Limits()
	}
	return DefaultLimitBytes, DefaultLimitCount
}

// SamePutter is implemented by drivers that can put records whose key
// names their value — content-addressed records, or records keyed by a
// commit id nothing refers to yet — without reading each key first: every
// put of such a key carries the same bytes, so writing it again changes
// nothing. The durability of PutImmutable applies. Callers put this way
// only records they do not delete (until a collection of unreachable
// records), so a driver may keep them where a delete does not free their
// space at once: the Badger driver writes the values of a bulk put to a
// pack file beside its tree (badgerkv's pack.go). A delete or a later
// write of such a key still works as for any other key.
type SamePutter interface {
	// PutSame writes recs; each key's value must be the one any put of
	// that key carries.
	PutSame(ctx context.Context, recs []Record) error
}

// PutSame puts recs, whose keys name their values, through d's PutSame
// when it has one and through PutImmutable otherwise.
func PutSame(ctx context.Context, d Driver, recs []Record) error {
	if p, ok := d.(SamePutter); ok {
		return p.PutSame(ctx, recs)
	}
	return d.PutImmutable(ctx, recs)
}

// Haser is implemented by drivers that can tell which keys have a value
// without reading the values: a committer that writes a large
// content-addressed record only when it is not stored yet asks this way,
// instead of reading back every such record it finds. Has sees the keys
// GetMany would: a key whose write returned before the call, none whose
// delete did; a key GetMany finds with an empty value has one. It does
// not read the values, so a key whose value the engine cannot give back
// (GetMany's *UnreadableError: corruption, which fsck reports) has one
// too.
type Haser interface {
	// Has reports, in the order of keys, whether each has a value.
	Has(ctx context.Context, keys [][]byte) ([]bool, error)
}

// Has reports whether each of keys has a value, through d's Has when it
// has one and through GetMany otherwise.
func Has(ctx context.Context, d Driver, keys [][]byte) ([]bool, error) {
	if h, ok := d.(Haser); ok {
		return h.Has(ctx, keys)
	}
	vals, err := d.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i, v := range vals {
		out[i] = v != nil
	}
	return out, nil
}

// KeyScanner is implemented by drivers that can scan keys without
// reading their values: a caller that only needs to know which keys a
// prefix holds (to delete them, to resolve an abbreviated commit id)
// then reads no value — from the Badger driver's value log and packs, or
// over the wire from PostgreSQL.
type KeyScanner interface {
	// ScanKeys calls fn with the keys Scan(ctx, prefix, start, limit)
	// would visit, in the same order and under the same contract; the key
	// is valid only during the call.
	ScanKeys(ctx context.Context, prefix, start []byte, limit int, fn func(k []byte) error) error
}

// ScanKeys calls fn with the keys Scan would visit, through d's ScanKeys
// when it has one and through Scan otherwise.
func ScanKeys(ctx context.Context, d Driver, prefix, start []byte, limit int, fn func(k []byte) error) error {
	if ks, ok := d.(KeyScanner); ok {
		return ks.ScanKeys(ctx, prefix, start, limit, fn)
	}
	return d.Scan(ctx, prefix, start, limit, func(k, _ []byte) error { return fn(k) })
}

// SameGetter is implemented by drivers that can read records whose key
// names their value — every write of the key carries the same bytes, as
// for PutSame — without waiting for writes still in flight. A read of
// such a key may be served from a view of the store taken a little
// earlier: a value found there is the key's value while the key exists,
// and a key not found there is looked for again as GetMany would. So
// GetSame finds every key whose write returned before the call, and none
// whose delete did, like GetMany; it only spares the wait behind writes
// that have not returned yet (with Badger, every new read transaction
// waits for the writes given a timestamp before it, syncs included).
type SameGetter interface {
	// GetSame returns the values of keys in order, nil for a missing key.
	GetSame(ctx context.Context, keys [][]byte) ([][]byte, error)
}

// GetSame reads keys, whose keys name their values, through d's GetSame
// when it has one and through GetMany otherwise.
func GetSame(ctx context.Context, d Driver, keys [][]byte) ([][]byte, error) {
	if g, ok := d.(SameGetter); ok {
		return g.GetSame(ctx, keys)
	}
	return d.GetMany(ctx, keys)
}
