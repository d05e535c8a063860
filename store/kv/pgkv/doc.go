// Package pgkv is the PostgreSQL kv.Driver: the storage seam on one table
// of a PostgreSQL database, through github.com/jackc/pgx/v5. It is the
// only package that imports pgx.
//
// # Schema
//
// Open creates and migrates the schema itself and records each migration
// it ran in artifactd_schema_version (version, applied_at); a database
// whose version is newer than the driver's is refused; one at the
// driver's version is only read, so that a role without the right to
// create in the schema opens it. Version 1:
//
//	artifactd_kv (k bytea PRIMARY KEY, v bytea NOT NULL)
//
// bytea compares bytewise, so the primary key's order is the seam's key
// order and a prefix scan is a range scan of the index (k >= start AND k <
// PrefixEnd(prefix)). Options.Schema puts both tables in a schema of their
// own (tests use one per test).
//
// # How the contract maps onto SQL
//
//   - PutImmutable: one transaction of INSERT ... SELECT FROM
//     unnest($keys, $values) ON CONFLICT (k) DO NOTHING, in parts of at
//     most 5,000 records or 4 MiB, records sorted by key so that
//     concurrent writers take row locks in one order (BulkCopy streams
//     them with COPY through a temporary table instead).
//   - Commit: one transaction at the server's default isolation (READ
//     COMMITTED on PostgreSQL). Each swap is a conditional statement —
//     UPDATE ... WHERE k = $key AND v = $old, DELETE ... WHERE k = $key AND
//     v = $old, or INSERT ... ON CONFLICT DO NOTHING for "must be absent"
//     — and holds when it affected exactly one row. The row lock the
//     statement takes keeps the expectation true until COMMIT; a
//     concurrent writer of the same ref waits and then re-checks against
//     the committed value, so it fails. The sets (INSERT ... ON CONFLICT
//     DO UPDATE) and deletes follow in the same pipelined round trip; when
//     any swap failed, the current values are read and the transaction is
//     rolled back, so nothing of it is written. The batch's first
//     statement is SET LOCAL idle_in_transaction_session_timeout, half of
//     the 30 s wait for COMMIT's answer and at least 1 s, so that the
//     server aborts, within the wait, a transaction whose COMMIT it never
//     read on a half-open connection (it would keep its row locks until
//     TCP keepalive noticed, hours later). A commit costs three round
//     trips (BEGIN, the batch, COMMIT); COMMIT is durable under the
//     server's synchronous_commit (on by default). A context that ends
//     before COMMIT is sent rolls back; once it is sent, Commit waits for
//     the server's answer whatever the context (for at most 30 s), since
//     only the server can tell whether the batch landed. The batch's
//     round trip ends with SELECT txid_current(), so Commit knows its
//     transaction's id. When the answer is lost — the connection fails
//     after pgx sent COMMIT (its error is not pgconn.SafeToRetry, and is
//     no ERROR from the server), or 30 s pass — the broken connection
//     leaves the pool and Commit asks another connection for
//     txid_status(id), again while it is 'in progress' or the question
//     fails, for what is left of the 30 s but at least 5 s. 'committed':
//     Commit returns nil. 'aborted' (the server never read the COMMIT,
//     and ended the transaction when its connection closed): nothing was
//     written, and Commit runs the transaction again, as after a
//     serialization failure (a hold's Commit returns a *kv.ConflictError,
//     its locks being gone); when its retries are spent it returns an
//     error wrapping kv.ErrNotWritten. Otherwise — NULL (an id too old), still in
//     progress, or no answer — Commit returns kv.ErrOutcomeUnknown
//     wrapping the cause and saying what it asked; the batch is in the
//     table whole, or not at all, once the server has settled the
//     transaction. txid_status exists from PostgreSQL 10 on.
//   - Serialization failures (40001, what CockroachDB reports under
//     contention) and deadlocks (40P01) roll back and are retried. So is
//     a Commit whose connection fails before its COMMIT is sent (at
//     BEGIN, or during the batch: a connection pgx closed, a connect or
//     network error, an unexpected end of the stream), which the server
//     aborts; when its retries are spent, Commit returns an error
//     wrapping kv.ErrNotWritten and the last failure, as for a COMMIT
//     the server answers ROLLBACK.
//   - Scan and ScanReverse (ORDER BY k, or k DESC) read one snapshot.
//     A first query asks for 65 rows; a range of no more than 64 is that
//     one query. A longer one is read again from its start in a read-only
//     REPEATABLE READ transaction, in pages of LIMIT 128 rows, each next
//     twice the last up to 4,096, from just past the last key read. The
//     server sends a page whole, so a scan fn stops early after r rows
//     has had it send at most 2r+193 rows, not the whole range.
//
// Little here needs what PostgreSQL-compatible distributed SQL engines
// (CockroachDB, YugabyteDB) lack: no advisory locks, no extensions, no
// LISTEN/NOTIFY, no SELECT ... FOR UPDATE SKIP LOCKED. But every commit
// sends SET LOCAL idle_in_transaction_session_timeout and
// SELECT txid_current(), and an engine that refuses either refuses every
// commit; a lost answer to COMMIT is resolved with txid_status. The
// txid status, and the retries after a failed link, assume that every
// connection of the pool reaches the one primary that ran the
// transaction (not a DSN that fails over between hosts). Only PostgreSQL
// itself is tested (see docs/BENCHMARKS.md for the version); BulkCopy's
// temporary table needs a setting on CockroachDB, which is one reason it
// is not the default.
package pgkv
