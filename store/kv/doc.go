// Package kv is the storage seam under the store: the few operations every
// storage driver (Badger, PostgreSQL, in memory) implements, with one
// contract and one error vocabulary.
//
// The store keeps two kinds of records, and the seam has one verb for
// each:
//
//   - Immutable records: content-addressed objects, blobs and state-map
//     nodes, and op chunks keyed by a commit id that nothing refers to yet.
//     Driver.PutImmutable writes any number of them, idempotently; they may
//     be visible before the commit that refers to them and, after a crash,
//     may survive without one (unreachable, for a later GC).
//   - Visible records: commit records, seq entries, context records and
//     refs. Driver.Commit writes a few of them in one atomic, durable step,
//     together with a compare-and-swap of the refs it moves.
//
// A commit of any size is therefore: PutImmutable of its records (in
// parts, if the caller wants), then one Commit whose swaps move its refs.
// When Commit returns nil, everything the caller put before it is durable
// too.
//
// # Glossary
//
//   - key: a non-empty byte string of at most MaxKeySize bytes; any bytes,
//     NUL and 0xff included. Keys order bytewise (bytes.Compare).
//   - value: any byte string, empty included. A missing key has no value;
//     GetMany reports it as nil and a present empty value as a non-nil empty
//     slice.
//   - record: a key and its value.
//   - batch: the sets, deletes and swaps of one Commit.
//   - swap: a compare-and-swap of one key (a ref): it applies only when the
//     key has the expected value (or, with Absent, no value).
//
// # Contract
//
// Every method is safe for concurrent use. Slices passed in are not
// retained after a method returns; slices returned belong to the caller.
// In Scan, the key and value handed to fn are valid only during that call.
//
// PutImmutable(ctx, recs): writes recs. A key that already has a value
// keeps it (the put of that record is a no-op), so a put may be repeated
// and raced. The driver splits a large call into parts as its engine
// needs; a call may be partly applied when it fails. Records are durable at
// the latest when a Commit that starts after PutImmutable returned has
// returned nil. Several records of one call with the same key must carry
// the same value.
//
// Get(ctx, key): the value, or an error satisfying errors.Is(err,
// ErrNotFound). GetMany(ctx, keys): the values in the order of keys, nil
// for a missing key. A driver may also read keys that name their values
// with GetSame (SameGetter): what GetMany returns, without waiting behind
// writes still in flight; and may tell which keys have a value without
// reading the values (Haser, through the function Has, which falls back
// on GetMany): the committer asks so before writing a large payload.
//
// Scan(ctx, prefix, start, limit, fn): calls fn for each key that has
// prefix and is not less than start, in increasing key order, stopping
// after limit calls (limit <= 0: no limit). A nil or empty prefix is every
// key; a start below the prefix starts at the prefix. Scan reads one
// consistent snapshot: records committed after it began are not seen, and
// no record is seen twice. It checks ctx before each call of fn. An error
// from fn stops the scan and is returned as is.
//
// A driver may also scan the keys alone (KeyScanner, through the
// function ScanKeys, which falls back on Scan): the same keys in the same
// order, no value read — a caller that deletes a prefix's records or
// resolves an abbreviated commit id needs no more.
//
// ScanReverse(ctx, prefix, end, limit, fn): the same, for the keys with
// prefix that are less than end (a nil end: no bound), in decreasing key
// order — the newest seq entry of a context, a log newest first.
//
// Commit(ctx, b): applies b atomically and durably. Every swap's
// expectation is checked first; when any fails, nothing is written and the
// error is a *ConflictError naming every failed swap's key with its
// current value (errors.Is(err, ErrConflict)). Otherwise the sets,
// deletes and swaps are all applied, and durable when Commit returns nil.
// A key may appear at most once in a batch (ErrInvalid otherwise). A batch
// larger than the engine can write atomically fails with ErrTooLarge,
// having written nothing; drivers take at least a few thousand small
// records. An empty batch writes nothing and still makes earlier
// PutImmutable calls durable. When Commit returns *ConflictError, ErrInvalid, ErrTooLarge,
// ErrClosed or the context's error before it started writing, nothing was
// written; after any other error (I/O, a context that ended while the
// write was in flight) the batch is either wholly applied or not at all,
// and the caller must read the refs to learn which. ErrOutcomeUnknown is
// the one such error that says no more went wrong than the way to the
// engine's answer, and that the driver could not learn the outcome
// otherwise (pgkv asks the server on another connection first): the
// batch was sent whole, and if it landed it is as
// durable as after a nil, so the caller may read the refs and go on
// writing — whereas after an engine's own I/O error a batch may be
// visible and yet not survive a restart. Only drivers that talk to a
// server return it (pgkv), never an embedded engine (badgerkv, memkv).
// ErrNotWritten is the error that says the opposite: the driver knows
// nothing of the batch was written (pgkv: the connection broke before the
// COMMIT was sent, or the server aborted the transaction, and running it
// again on a fresh connection failed too), so the refs are as they were
// and a later Commit may succeed once the server is reachable; a Lock
// and a put of immutable records return it when their retries were spent
// that way (pgkv runs a put whose connection failed again, COMMIT sent or
// not: it stores the same bytes under the same keys; so a put's
// ErrNotWritten says it did not complete — its records may be stored,
// whole, when a run's COMMIT went out and the answer was lost — and
// putting them again is safe); badgerkv and memkv never return it
// either.
// Readers may see a
// Commit's records before it returns (Badger makes them visible before its
// sync); nothing is acknowledged to the Commit's caller before it is
// durable.
//
// Close(): waits for the calls in flight and releases the engine; every
// later call returns ErrClosed. A second Close returns nil.
//
// Lock(ctx, keys), of the drivers that other processes share (Locker):
// waits for the other holds of keys that have values, in the order they
// asked, and returns a Hold; Hold.Commit(ctx, b) is Commit and ends the
// hold (except after ErrInvalid or ErrTooLarge, when nothing was sent),
// Hold.Release ends it without writing. Holds decide who goes next, never
// what is written: the swaps are checked as always. A Hold.Commit that
// the engine rolled back (a deadlock it detected, a hold it ended for
// silence) returns a *ConflictError with the Cause: nothing was written.
//
// # Errors
//
// Drivers return the sentinels below, wrapped with %w where they add
// context, the context's error when ctx ends (errors.Is(err,
// context.Canceled) or context.DeadlineExceeded), and wrapped engine
// errors for I/O failures. Test them with errors.Is.
//
// The conformance suite every driver must pass is package kvtest.
package kv
