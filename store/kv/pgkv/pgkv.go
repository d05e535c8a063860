package pgkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/internal/guard"
)

// BulkMethod is how PutImmutable sends its records.
type BulkMethod int

const (
	// BulkUnnest inserts each part with one INSERT ... SELECT FROM
	// unnest($keys, $values) ON CONFLICT DO NOTHING. The default: as fast
	// as BulkCopy for the store's records (docs/BENCHMARKS.md) and plain
	// SQL that PostgreSQL-compatible engines share.
	BulkUnnest BulkMethod = iota
	// BulkCopy streams the records with COPY into a temporary table and
	// inserts from it with ON CONFLICT DO NOTHING.
	BulkCopy
)

// Options configure Open.
type Options struct {
	// DSN is the connection string (postgres://... or key=value).
	DSN string
	// Schema, when set, is the PostgreSQL schema (namespace) holding the
	// driver's tables; it is created if missing. Empty: the connection's
	// default schema.
	Schema string
	// MaxConns bounds the connection pool (0: the DSN's pool_max_conns,
	// or DefaultMaxConns). Scan holds one connection while it runs; a fn
	// that calls the driver needs another. Half the pool may be holds
	// (Lock); a Lock beyond that waits for one to end before it asks the
	// server. Open refuses a pool of fewer than 2 (ErrInvalid): a holder
	// reads while its hold keeps a connection.
	MaxConns int32
	// Bulk selects how PutImmutable sends records.
	Bulk BulkMethod
	// ConnectTimeout bounds each new connection's connect and startup
	// (pgx's ConnectTimeout; with several hosts, each host's). 0: the
	// DSN's connect_timeout (or PGCONNECT_TIMEOUT, or a service file's)
	// when it sets one — connect_timeout=0 in the DSN or the environment
	// keeps connects unbounded, in a service file it does not — else
	// DefaultConnectTimeout.
	// Without a bound a server that takes the connection and never
	// answers — frozen, or behind a path that drops its packets — would
	// keep a write waiting for ever.
	ConnectTimeout time.Duration
	// HoldIdleTimeout ends a hold (Lock) whose holder sends nothing for
	// this long — a process frozen rather than killed; a killed one's
	// connection closes and its locks go at once — so that the other
	// processes' writes go on. 0: DefaultHoldIdleTimeout; at most about
	// 24.8 days (PostgreSQL's 2^31-1 ms), longer is taken as that.
	HoldIdleTimeout time.Duration
}

// DefaultMaxConns is the pool size without Options.MaxConns or a
// pool_max_conns in the DSN: room for the holds of a store's commit
// groups — up to four small ones and four big ones at once, eight holds,
// half the pool — and their reads (pgxpool's own default, the number of
// CPUs but at least 4, leaves two holds on a small machine). A smaller
// pool makes groups wait for a hold slot.
const DefaultMaxConns = 16

// DefaultConnectTimeout is the default of Options.ConnectTimeout, for a
// DSN that sets no connect_timeout: a connection to a reachable server
// takes milliseconds, and a run of a transaction that cannot connect
// within it is run again (a bounded number of times, within retryWindow).
const DefaultConnectTimeout = 10 * time.Second

// DefaultHoldIdleTimeout is the default of Options.HoldIdleTimeout: far
// above what a commit group decides in (milliseconds; seconds for a
// commit of 100k artifacts).
const DefaultHoldIdleTimeout = time.Minute

// Driver is the PostgreSQL driver. Create it with Open.
type Driver struct {
	pool *pgxpool.Pool
	g    guard.Guard
	bulk BulkMethod
	// kvT and verT are the quoted, schema-qualified table names.
	kvT, verT string
	// holds bounds the open holds (Lock) to half the pool, so that the
	// holders' reads always find a connection.
	holds chan struct{}
	// holdIdle is the SET LOCAL that arms a hold's idle timeout, and
	// keepEvery how often a hold's holder shows it is alive (0: never).
	holdIdle  string
	keepEvery time.Duration
	// commitWait bounds the wait for the answer to a COMMIT sent (settle),
	// and resolveFloor is the least time resolve asks for the outcome of
	// one whose answer was lost, however little of commitWait is left.
	commitWait, resolveFloor time.Duration
	// retryWindow bounds the time retry runs a transaction again in.
	retryWindow time.Duration
	// commitIdle, when positive, is the idle timeout a Commit's
	// transaction arms (idleTimeout); 0: half of commitWait, at least
	// minCommitIdle.
	commitIdle time.Duration
}

var (
	_ kv.Driver = (*Driver)(nil)
	_ kv.Locker = (*Driver)(nil)
)

// Open connects, creates or migrates the schema, and returns the driver.
func Open(ctx context.Context, opts Options) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w: pgkv: DSN: %w", kv.ErrInvalid, err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !dsnSets(opts.DSN, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	connect := opts.ConnectTimeout
	if connect <= 0 && cfg.ConnConfig.ConnectTimeout == 0 && !dsnSets(opts.DSN, "connect_timeout") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		connect = DefaultConnectTimeout
	}
	if connect > 0 {
		// The dial too, as pgconn bounds it by the DSN's connect_timeout.
		cfg.ConnConfig.ConnectTimeout = connect
		cfg.ConnConfig.DialFunc = (&net.Dialer{Timeout: connect}).DialContext
	}
	if cfg.MaxConns < 2 {
		// A hold keeps its connection while its holder reads: with one
		// connection the holder's reads would wait for ever.
		return nil, fmt.Errorf("%w: pgkv: a pool of %d connection cannot serve a hold and its holder's reads; give at least 2 (MaxConns or pool_max_conns)", kv.ErrInvalid, cfg.MaxConns)
	}
	idle := opts.HoldIdleTimeout
	if idle <= 0 {
		idle = DefaultHoldIdleTimeout
	}
	// PostgreSQL takes the timeout in milliseconds as a 32-bit integer.
	idle = min(idle, math.MaxInt32*time.Millisecond)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgkv: connect: %w", err)
	}
	d := &Driver{
		pool:         pool,
		bulk:         opts.Bulk,
		holds:        make(chan struct{}, max(1, cfg.MaxConns/2)),
		holdIdle:     fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", max(1, idle.Milliseconds())),
		keepEvery:    idle / 3,
		commitWait:   commitWait,
		resolveFloor: resolveFloor,
		retryWindow:  retryWindow,
	}
	qual := func(name string) string {
		if opts.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{opts.Schema, name}.Sanitize()
	}
	d.kvT, d.verT = qual(tableKV), qual(tableVersion)
	if err := d.retry(ctx, func() error { return d.migrate(ctx, opts.Schema) }); err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// dsnSets reports whether dsn, a URL (postgres:// or postgresql://) or
// a list of keyword=value pairs, names the setting key.
func dsnSets(dsn, key string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		// The query alone: pgconn parses the rest (several hosts, say)
		// in ways net/url does not.
		_, query, ok := strings.Cut(dsn, "?")
		if !ok {
			return false
		}
		vals, _ := url.ParseQuery(query) // as pgconn, skipping pairs it cannot read
		return vals.Has(key)
	}
	for i := 0; i < len(dsn); {
		i = skipSpace(dsn, i)
		start := i
		for i < len(dsn) && dsn[i] != '=' && !dsnSpace(dsn[i]) {
			i++
		}
		name := dsn[start:i]
		i = skipSpace(dsn, i)
		if i >= len(dsn) || dsn[i] != '=' {
			return false // not a keyword=value list pgconn would take
		}
		if name == key {
			return true
		}
		i = skipSpace(dsn, i+1)
		// The value: quoted (backslash escapes inside), or up to a space.
		quoted := i < len(dsn) && dsn[i] == '\''
		if quoted {
			i++
		}
		for i < len(dsn) {
			c := dsn[i]
			if c == '\\' {
				i += 2
				continue
			}
			if quoted && c == '\'' || !quoted && dsnSpace(c) {
				break
			}
			i++
		}
		i++
	}
	return false
}

// dsnSpace reports whether c separates a keyword=value DSN's pairs, as
// pgconn reads them: ASCII white space only.
func dsnSpace(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 }

// skipSpace returns the index of the first byte of dsn from i on that is
// not dsnSpace, or len(dsn).
func skipSpace(dsn string, i int) int {
	for i < len(dsn) && dsnSpace(dsn[i]) {
		i++
	}
	return i
}

// Table names. The key-value table is the whole store; the version table
// records which migrations ran.
const (
	tableKV      = "artifactd_kv"
	tableVersion = "artifactd_schema_version"
)

// migrations are the schema steps, in order; migration i+1 is
// migrations[i]. %[1]s is the key-value table. Append, never edit.
var migrations = []string{
	// 1: the store. bytea compares bytewise, so the primary key's order is
	// the seam's key order.
	`CREATE TABLE IF NOT EXISTS %[1]s (k bytea PRIMARY KEY, v bytea NOT NULL)`,
}

// SchemaVersion is the schema version this driver creates and expects.
func SchemaVersion() int { return len(migrations) }

// migrate brings the schema to SchemaVersion. Processes that start
// together may race here; the loser's statement fails with a uniqueness
// error and retry runs it again, when it finds the work done. A database
// already at SchemaVersion is only read, so that a role that may read and
// write the tables but not create in the schema or the database opens it.
func (d *Driver) migrate(ctx context.Context, schema string) error {
	var exists bool
	if err := d.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", d.verT).Scan(&exists); err != nil {
		return fmt.Errorf("pgkv: look for the version table: %w", err)
	}
	if exists {
		var cur int
		if err := d.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+d.verT).Scan(&cur); err != nil {
			return fmt.Errorf("pgkv: read schema version: %w", err)
		}
		if cur >= len(migrations) {
			return newerSchema(cur)
		}
	}
	if schema != "" {
		if _, err := d.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("pgkv: create schema: %w", err)
		}
	}
	_, err := d.pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+d.verT+
		" (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
	if err != nil {
		return fmt.Errorf("pgkv: create version table: %w", err)
	}
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var cur int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+d.verT).Scan(&cur); err != nil {
			return fmt.Errorf("pgkv: read schema version: %w", err)
		}
		if err := newerSchema(cur); err != nil {
			return err
		}
		for v := cur + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[v-1], d.kvT)); err != nil {
				return fmt.Errorf("pgkv: migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+d.verT+" (version) VALUES ($1)", v); err != nil {
				return fmt.Errorf("pgkv: record migration %d: %w", v, err)
			}
		}
		return nil
	})
}

// newerSchema refuses a database whose schema version cur is newer than
// the driver's (nil when it is not).
func newerSchema(cur int) error {
	if cur > len(migrations) {
		return fmt.Errorf("pgkv: the database has schema version %d, newer than this artifactd knows (%d): run a newer artifactd", cur, len(migrations))
	}
	return nil
}

// retryable reports errors after which the transaction was rolled back
// and may simply run again: serialization failures (what CockroachDB
// returns for contention), deadlocks, the uniqueness races of concurrent
// DDL, a transaction whose answer to COMMIT was lost and which the
// server then aborted (errAborted), one whose connection failed before
// its COMMIT was sent (errLinkFailed), and one the idle timeout ended
// before the server read its COMMIT (rolledBack) — never a Commit whose
// outcome is unknown — and a put of immutable records or a point read
// whose connection failed at any point (errRerunLinkFailed: running it
// again is safe whatever became of it).
func retryable(err error) bool {
	if errors.Is(err, errAborted) || errors.Is(err, errLinkFailed) || errors.Is(err, errRerunLinkFailed) || rolledBack(err) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || errors.Is(err, kv.ErrOutcomeUnknown) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505", "42P07", "42P06":
		return true
	}
	return false
}

// retryWindow is how long retry starts runs of a transaction again
// after its first: with the connect timeout, it bounds how long a write
// to a server that cannot be reached waits before it is refused.
const retryWindow = 30 * time.Second

// retry runs fn until it succeeds, fails for good, or ctx ends — and
// runs it again after a retryable failure at most 20 times, none later
// than d.retryWindow after the first run began.
func (d *Driver) retry(ctx context.Context, fn func() error) error {
	backoff := time.Millisecond
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt == 20 || !retryable(err) || time.Since(start)+backoff > d.retryWindow {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (d *Driver) enter(ctx context.Context) error {
	if !d.g.Enter() {
		return kv.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		d.g.Leave()
		return err
	}
	return nil
}

// ctxErr returns ctx's error when it ended, else err: a query cut short by
// a canceled context reports the cancellation.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil {
		return cerr
	}
	return err
}

// Parts of a bulk write: at most partRows records or about partBytes.
const (
	partRows  = 5000
	partBytes = 4 << 20
)

// parts splits sorted records into parts of bounded size.
func parts(recs []kv.Record, fn func([]kv.Record) error) error {
	for start := 0; start < len(recs); {
		end, size := start, 0
		for end < len(recs) && end-start < partRows && (size < partBytes || end == start) {
			size += len(recs[end].Key) + len(recs[end].Value)
			end++
		}
		if err := fn(recs[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func columns(recs []kv.Record) (keys, vals [][]byte) {
	keys, vals = make([][]byte, len(recs)), make([][]byte, len(recs))
	for i, r := range recs {
		keys[i], vals[i] = r.Key, nonNil(r.Value)
	}
	return keys, vals
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// sortedRecords returns recs ordered by key, so that concurrent writers
// lock rows in one order (no deadlocks between them).
func sortedRecords(recs []kv.Record) []kv.Record {
	s := slices.Clone(recs)
	slices.SortStableFunc(s, func(a, b kv.Record) int { return bytes.Compare(a.Key, b.Key) })
	return s
}

// PutImmutable implements kv.Driver: one transaction, the records in
// parts, existing keys left as they are.
//
// Its records are immutable and the insert skips keys already stored, so
// a put whose connection fails — at BEGIN, in the middle of its records,
// or after its COMMIT went out, whatever became of that transaction, or
// whose COMMIT gets no answer within putCommitWait — runs again on
// another pool connection, as after a serialization failure: what the
// first run stored, if anything, is the same bytes under the same keys.
// Its transaction arms the idle timeout a Commit's does first
// (idleTimeout), so that a run whose COMMIT never reached a server that
// still holds its connection ends within that wait, and the next run
// does not wait on its row locks. When the retries are spent on such
// failures the error wraps kv.ErrNotWritten and the last failure: the
// put did not complete, the server may be unreachable for now, and a
// later put may succeed. When a run's COMMIT went out and its answer was
// lost the error says so: the records may then be stored, whole.
func (d *Driver) PutImmutable(ctx context.Context, recs []kv.Record) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := kv.ValidateRecords(recs); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	sorted := sortedRecords(recs)
	var sent bool // a run's COMMIT may have reached the server, its answer lost
	err := d.retry(ctx, func() error {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return markLink(ctx, nil, err, errRerunLinkFailed)
		}
		if err := d.put(ctx, tx, sorted); err != nil {
			err = markLink(ctx, tx.Conn(), err, errRerunLinkFailed)
			rollback(ctx, tx)
			return err
		}
		// A COMMIT that gets no answer within the wait is taken for a
		// failed link: the run is repeated, and if the server still holds
		// its transaction, the idle timeout armed first ends it within
		// the wait, so that the next run does not wait on its row locks.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.putCommitWait())
		err = tx.Commit(cctx)
		cancel()
		// The pool has its connection back once Commit returns (another
		// caller may be using it): the error alone tells.
		if err != nil && isLinkFailure(nil, err) && !pgconn.SafeToRetry(err) {
			sent = true
		}
		return markLink(ctx, nil, err, errRerunLinkFailed)
	})
	if errors.Is(err, errRerunLinkFailed) {
		// Every run lost its connection: the server may be unreachable.
		// Each run puts every record in one transaction, so the records
		// are stored whole or not at all — and putting them again is
		// safe either way.
		if sent {
			return fmt.Errorf("pgkv: put immutable: %w (a run's COMMIT went out and its answer was lost: the records may be stored, whole): %w", kv.ErrNotWritten, err)
		}
		return fmt.Errorf("pgkv: put immutable: %w: %w", kv.ErrNotWritten, err)
	}
	if err != nil {
		return fmt.Errorf("pgkv: put immutable: %w", ctxErr(ctx, err))
	}
	return nil
}

// putCommitWait is how long a put waits for the answer to its COMMIT:
// the idle timeout its transaction arms (idle), so that a run whose
// COMMIT never reached the server has been ended by then, and within the
// retry window, so that the put runs again.
func (d *Driver) putCommitWait() time.Duration { return d.idle() }

// put arms tx's idle timeout (idleTimeout) and inserts sorted records in
// tx, by the driver's bulk method; the timeout travels with the first
// statement (armed), in its round trip.
func (d *Driver) put(ctx context.Context, tx pgx.Tx, sorted []kv.Record) error {
	if d.bulk == BulkCopy {
		return d.putCopy(ctx, tx, sorted)
	}
	first := true
	return parts(sorted, func(p []kv.Record) error {
		keys, vals := columns(p)
		q := "INSERT INTO " + d.kvT + " (k, v) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS t(k, v) ON CONFLICT (k) DO NOTHING"
		if first {
			first = false
			return d.armed(ctx, tx, q, keys, vals)
		}
		_, err := tx.Exec(ctx, q, keys, vals)
		return err
	})
}

// armed sends tx's idle timeout (idleTimeout) and then statement q with
// args, in one round trip.
func (d *Driver) armed(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
	var b pgx.Batch
	b.Queue(d.idleTimeout())
	b.Queue(q, args...)
	return tx.SendBatch(ctx, &b).Close()
}

// errRerunLinkFailed marks the error of a request that may simply run
// again after its connection failed (markLink; retryable): a PutImmutable
// transaction, its COMMIT sent or not, since running it again stores the
// same bytes under the same keys, and a point read.
var errRerunLinkFailed = errors.New("the connection failed")

// putCopy streams sorted records into a temporary table with COPY and
// inserts them from there.
func (d *Driver) putCopy(ctx context.Context, tx pgx.Tx, sorted []kv.Record) error {
	if err := d.armed(ctx, tx, "CREATE TEMPORARY TABLE artifactd_kv_in (k bytea NOT NULL, v bytea NOT NULL) ON COMMIT DROP"); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"artifactd_kv_in"}, []string{"k", "v"},
		pgx.CopyFromSlice(len(sorted), func(i int) ([]any, error) {
			return []any{sorted[i].Key, nonNil(sorted[i].Value)}, nil
		}))
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, "INSERT INTO "+d.kvT+" (k, v) SELECT k, v FROM artifactd_kv_in ORDER BY k ON CONFLICT (k) DO NOTHING")
	return err
}

// Get implements kv.Driver.
func (d *Driver) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	var v []byte
	err := d.retry(ctx, func() error {
		return markLink(ctx, nil, d.pool.QueryRow(ctx, "SELECT v FROM "+d.kvT+" WHERE k = $1", key).Scan(&v), errRerunLinkFailed)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, kv.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgkv: get: %w", ctxErr(ctx, err))
	}
	return nonNil(v), nil
}

// getManyPart is how many keys one GetMany or Has query asks for.
const getManyPart = 2000

// GetMany implements kv.Driver.
func (d *Driver) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	err := d.lookUp(ctx, "get many", keys, true, func(i int, v []byte) { out[i] = nonNil(v) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Has implements kv.Haser with a query for the keys alone.
func (d *Driver) Has(ctx context.Context, keys [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	if err := d.lookUp(ctx, "has", keys, false, func(i int, _ []byte) { out[i] = true }); err != nil {
		return nil, err
	}
	return out, nil
}

// lookUp asks for keys, getManyPart at a time, and calls found with the
// index in keys of each one stored (every index, for a key asked twice,
// each with a copy of its own) and, with values, its value. what names
// the call in errors.
func (d *Driver) lookUp(ctx context.Context, what string, keys [][]byte, values bool, found func(i int, v []byte)) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	for start := 0; start < len(keys); start += getManyPart {
		part := keys[start:min(start+getManyPart, len(keys))]
		at := make(map[string][]int, len(part))
		for i, k := range part {
			at[string(k)] = append(at[string(k)], start+i)
		}
		// A part read again after a failed link hands found the same
		// values for the same indexes.
		err := d.retry(ctx, func() error {
			rows, err := d.pool.Query(ctx, "SELECT "+selected(values)+" FROM "+d.kvT+" WHERE k = ANY($1::bytea[])", part)
			if err != nil {
				return markLink(ctx, nil, err, errRerunLinkFailed)
			}
			for rows.Next() {
				var k, v []byte
				if err := rows.Scan(&k, &v); err != nil {
					rows.Close()
					return err
				}
				for j, i := range at[string(k)] {
					if j > 0 {
						v = bytes.Clone(v) // each index of a key asked twice owns its value
					}
					found(i, v)
				}
			}
			return markLink(ctx, nil, rows.Err(), errRerunLinkFailed)
		})
		if err != nil {
			return fmt.Errorf("pgkv: %s: %w", what, ctxErr(ctx, err))
		}
	}
	return nil
}

// selected is what a query of records selects: the key and the value,
// or without values the key and a NULL in the value's place (scanned as
// a nil value), so that the server sends no value.
func selected(values bool) string {
	if values {
		return "k, v"
	}
	return "k, NULL::bytea"
}

// Scan implements kv.Driver: one snapshot whose rows stream to fn, read
// in pages (see scanProbe); it holds a pool connection until it returns.
func (d *Driver) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	return d.scan(ctx, kv.ScanStart(prefix, start), kv.PrefixEnd(prefix), false, limit, true, fn)
}

// ScanKeys implements kv.KeyScanner like Scan, with queries for the keys
// alone.
func (d *Driver) ScanKeys(ctx context.Context, prefix, start []byte, limit int, fn func(k []byte) error) error {
	return d.scan(ctx, kv.ScanStart(prefix, start), kv.PrefixEnd(prefix), false, limit, false, func(k, _ []byte) error { return fn(k) })
}

// ScanReverse implements kv.Driver like Scan, in decreasing key order.
func (d *Driver) ScanReverse(ctx context.Context, prefix, end []byte, limit int, fn func(k, v []byte) error) error {
	return d.scan(ctx, prefix, kv.ScanEnd(prefix, end), true, limit, true, fn)
}

// The pages of a scan. A scan first asks for scanProbe rows and one
// more: with no more than scanProbe, that one query is the scan. A
// longer scan reads from the start again in a read-only REPEATABLE READ
// transaction, one snapshot, in pages of 2*scanProbe rows, each next
// twice the last up to scanPageMax. The server sends a page whole, also
// to a scan that fn stops early (pgx reads a result to its end): a scan
// stopped after r rows has had it send at most 2r+3*scanProbe+1, not
// the whole range; a long scan costs a round trip per scanPageMax rows.
const (
	scanProbe   = 64
	scanPageMax = 4096
)

// scan streams the rows with from <= k < to (a nil to: no bound) to fn;
// without values it asks the server for the keys alone and hands fn a
// nil value.
func (d *Driver) scan(ctx context.Context, from, to []byte, reverse bool, limit int, values bool, fn func(k, v []byte) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	call := func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(k, v)
	}
	probe := scanProbe + 1
	if limit > 0 {
		probe = min(probe, limit)
	}
	var first []kv.Record
	err := d.page(ctx, d.pool, from, to, reverse, probe, values, func(k, v []byte) error {
		first = append(first, kv.Record{Key: k, Value: v})
		return nil
	})
	if err != nil {
		return err
	}
	if len(first) < probe || probe == limit {
		for _, r := range first {
			if err := call(r.Key, r.Value); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgkv: scan: %w", ctxErr(ctx, err))
	}
	defer rollback(ctx, tx)
	var last []byte // the last key of the page, a copy: fn owns k
	for n, left := 2*scanProbe, limit; ; n = min(2*n, scanPageMax) {
		want := n
		if limit > 0 {
			want = min(n, left)
		}
		got := 0
		err := d.page(ctx, tx, from, to, reverse, want, values, func(k, v []byte) error {
			got++
			last = append(last[:0], k...)
			return call(k, v)
		})
		if err != nil {
			return err
		}
		left -= got
		if got < want || (limit > 0 && left == 0) {
			return nil
		}
		if reverse {
			to = bytes.Clone(last)
		} else {
			from = append(bytes.Clone(last), 0) // the key right after last
		}
	}
}

// page streams to fn the rows of one query: at most n with from <= k <
// to (a nil to: no bound), in the scan's order. fn's error is returned as
// it is.
func (d *Driver) page(ctx context.Context, q querier, from, to []byte, reverse bool, n int, values bool, fn func(k, v []byte) error) error {
	sql := "SELECT " + selected(values) + " FROM " + d.kvT + " WHERE k >= $1"
	args := []any{nonNil(from)}
	if to != nil {
		sql += " AND k < $2"
		args = append(args, to)
	}
	sql += " ORDER BY k"
	if reverse {
		sql += " DESC"
	}
	sql += fmt.Sprintf(" LIMIT %d", n)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("pgkv: scan: %w", ctxErr(ctx, err))
	}
	defer rows.Close()
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return fmt.Errorf("pgkv: scan: %w", err)
		}
		if values {
			v = nonNil(v)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgkv: scan: %w", ctxErr(ctx, err))
	}
	return nil
}

// Lock implements kv.Locker with a transaction that takes the keys' row
// locks (SELECT ... FOR UPDATE, in key order). PostgreSQL queues the
// waiters of a row lock in arrival order. A key without a row locks
// nothing: the swaps of the hold's Commit still decide. The transaction
// stays open, holding one pool connection, until Commit or Release. A
// Lock whose connection fails before the locks are taken (a pooled
// connection whose server end went away, a server that refuses or does
// not answer new ones) runs again on another, as Commit does; when every
// run fails so, or ctx ends after such a failure while connecting, the
// error wraps kv.ErrNotWritten: nothing is held and the server may be
// unreachable for now. A run whose link failed after its batch went out
// may have left its transaction, with the locks, open on the server until
// the hold's idle timeout ends it; the next run waits for those locks
// meanwhile, and when ctx ends in that wait the error wraps
// kv.ErrNotWritten too (the driver cannot tell that transaction from
// another writer's).
func (d *Driver) Lock(ctx context.Context, keys [][]byte) (kv.Hold, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	sorted, err := kv.LockKeys(keys)
	if err != nil {
		d.g.Leave()
		return nil, err
	}
	select {
	case d.holds <- struct{}{}:
	case <-ctx.Done():
		d.g.Leave()
		return nil, ctx.Err()
	}
	h := &hold{d: d}
	// lastLink is the last run's failed link, if any; orphan, that a run's
	// batch may have reached the server before its link failed (its
	// transaction, with the locks, may stay open until its idle timeout);
	// locking, that the run in progress sent its batch.
	var lastLink error
	var orphan, locking bool
	noteLink := func(err error) error {
		if errors.Is(err, errLinkFailed) {
			lastLink = err
			orphan = orphan || locking && !pgconn.SafeToRetry(err)
		}
		return err
	}
	err = d.retry(ctx, func() error {
		locking = false
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			return noteLink(linkFailed(ctx, nil, err))
		}
		locking = true
		// One round trip: the transaction's BEGIN travels with its locks.
		var batch pgx.Batch
		batch.Queue("BEGIN")
		batch.Queue(d.holdIdle)
		for _, k := range sorted {
			batch.Queue("SELECT 1 FROM "+d.kvT+" WHERE k = $1 FOR UPDATE", k)
		}
		if err := conn.SendBatch(ctx, &batch).Close(); err != nil {
			// A failed link ends the transaction and its locks with it
			// (the server aborts it, or its idle timeout does): it may
			// run again.
			err = noteLink(linkFailed(ctx, conn.Conn(), err))
			endConn(conn)
			return err
		}
		h.conn = conn
		return nil
	})
	if err != nil && ctx.Err() != nil && lastLink != nil && (!locking || orphan) {
		// The caller's time ran out after a failed link, while connecting
		// to a server that does not answer — or waiting for locks after a
		// run whose batch may have reached the server, on that run's
		// transaction perhaps (its idle timeout ends it; the driver
		// cannot tell it from another writer's): the server's trouble,
		// not a writer's turn.
		err = fmt.Errorf("%w (and then the wait ended: %v)", lastLink, ctx.Err())
	}
	if err != nil {
		<-d.holds
		d.g.Leave()
		if errors.Is(err, errLinkFailed) {
			return nil, fmt.Errorf("pgkv: lock: %w: %w", kv.ErrNotWritten, err)
		}
		return nil, fmt.Errorf("pgkv: lock: %w", ctxErr(ctx, err))
	}
	if d.keepEvery > 0 {
		h.stop = make(chan struct{})
		go h.keepAlive(d.keepEvery)
	}
	return h, nil
}

// keepAlive sends a statement on the hold's transaction every `every`
// until the hold ends, so that the idle timeout ends only the holds of a
// process that stopped running (this goroutine stops with it), not one
// that takes long to decide.
func (h *hold) keepAlive(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		if h.done {
			h.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		_, err := h.conn.Exec(ctx, "SELECT 1")
		cancel()
		// On an error the transaction is gone with its connection (the
		// server ended it for silence, or the link broke): the Commit that
		// follows writes nothing and says so.
		h.lost = err
		h.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// querier is what write and conflicts send their statements through: a
// transaction (pgx.Tx) or a hold's connection, inside its transaction.
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// hold is a kv.Hold of the PostgreSQL driver: an open transaction.
type hold struct {
	d  *Driver
	mu sync.Mutex // serialises the connection's users (Commit, keepAlive)
	// conn is the pool connection whose transaction holds the locks.
	conn *pgxpool.Conn
	// stop ends keepAlive (nil without one).
	stop      chan struct{}
	done      bool
	committed bool // COMMIT went through: nothing to roll back
	// lost is the error of a keep-alive that failed: the transaction is
	// gone, and Commit is a conflict without sending anything.
	lost error
}

// Commit implements kv.Hold: the batch is written in the hold's
// transaction, which then commits. A deadlock or serialization failure
// the server reports rolls it back and returns a *kv.ConflictError with
// the cause: nothing was written and the caller decides again. ctx
// ending before COMMIT is sent rolls back; after, Commit waits for the
// answer (settle). When the answer is lost, Commit asks the server what
// became of the transaction (resolve): nil when it committed, a
// *kv.ConflictError when the server aborted it (nothing was written, and
// the hold's locks went with its transaction, so the caller decides
// again), and kv.ErrOutcomeUnknown only when the server could not tell.
func (h *hold) Commit(ctx context.Context, b kv.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return fmt.Errorf("%w: pgkv: commit of a hold that ended", kv.ErrInvalid)
	}
	defer h.end()
	if h.lost != nil {
		return &kv.ConflictError{Cause: fmt.Errorf("pgkv: the hold's transaction ended before its commit: %w", h.lost)}
	}
	d := h.d
	order, sets := commitOrder(b)
	conflict, xid, err := d.apply(ctx, h.conn, &b, order, sets, "")
	if err == nil && conflict != nil {
		return conflict
	}
	if err == nil {
		err = ctx.Err() // canceled before COMMIT: rolled back
	}
	if err == nil {
		var tag pgconn.CommandTag
		err = d.settle(ctx, xid, func(ctx context.Context) (err error) {
			tag, err = h.conn.Exec(ctx, "COMMIT")
			return err
		})
		if err == nil {
			h.committed = true
			if tag.String() != "ROLLBACK" {
				return nil
			}
			// COMMIT of a transaction that had failed rolls it back.
			return &kv.ConflictError{Cause: errors.New("pgkv: the server rolled the hold's transaction back")}
		}
		if errors.Is(err, kv.ErrOutcomeUnknown) {
			return fmt.Errorf("pgkv: commit: %w", err)
		}
		if errors.Is(err, errLinkFailed) {
			// Nothing of the COMMIT went out, and the hold's locks ended
			// with its connection: nothing was written.
			return fmt.Errorf("pgkv: commit: %w: %w", kv.ErrNotWritten, err)
		}
		if retryable(err) { // rolled back, nothing written
			return &kv.ConflictError{Cause: err}
		}
		return fmt.Errorf("pgkv: commit: %w", err)
	}
	if retryable(err) { // rolled back, nothing written
		return &kv.ConflictError{Cause: err}
	}
	if lf := linkFailed(ctx, h.conn.Conn(), err); errors.Is(lf, errLinkFailed) {
		// The connection failed before COMMIT was sent: the server
		// aborts the transaction, and its locks go with it, so the hold
		// cannot run it again; nothing was written.
		return fmt.Errorf("pgkv: commit: %w: %w", kv.ErrNotWritten, lf)
	}
	return fmt.Errorf("pgkv: commit: %w", ctxErr(ctx, err))
}

// commitWait bounds how long a Commit waits for the server's answer to
// the COMMIT it sent, whether or not its context ends meanwhile.
const commitWait = 30 * time.Second

// resolveFloor is the least time resolve asks for a transaction's
// outcome: a COMMIT whose answer did not come within commitWait still
// gets a few seconds of questions on another connection.
const resolveFloor = 5 * time.Second

// errAborted marks the error of a transaction whose answer to COMMIT was
// lost and which the server then reported aborted (resolve): nothing of
// it was written, so it may run again (retryable).
var errAborted = errors.New("the server aborted the transaction whose answer to COMMIT was lost; nothing was written")

// settle runs commit — the sending of the COMMIT of transaction xid and
// the reading of its answer — with a context that ctx's cancellation and
// deadline do not end, bounded by d.commitWait: once COMMIT is sent, the
// server may have committed, and only the server can tell; an error for
// a cancellation would report as failed a batch that landed. When the
// answer is lost — the connection failed after COMMIT was sent, or no
// answer came within the wait — settle asks the server what became of
// the transaction (resolve) for what is left of the wait, at least
// d.resolveFloor, and returns what resolve does: nil when it committed,
// an error wrapping errAborted when the server aborted it, and one
// wrapping kv.ErrOutcomeUnknown and the cause when no answer told.
func (d *Driver) settle(ctx context.Context, xid int64, commit func(context.Context) error) error {
	start := time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.commitWait)
	defer cancel()
	err := commit(cctx)
	if err != nil && pgconn.SafeToRetry(err) {
		// pgx sent nothing of the COMMIT: the connection had failed
		// already, and the server aborts the transaction with it.
		return fmt.Errorf("%w: %w", errLinkFailed, err)
	}
	if err == nil || !answerLost(err) {
		return err
	}
	lost := fmt.Errorf("the connection failed before the answer to COMMIT came: %w", err)
	if cctx.Err() != nil {
		lost = fmt.Errorf("no answer to COMMIT within %s: %w", d.commitWait, err)
	}
	return d.resolve(ctx, xid, max(d.commitWait-time.Since(start), d.resolveFloor), lost)
}

// resolve learns the outcome of transaction xid, whose answer to COMMIT
// was lost as lost says, from txid_status asked on another connection of
// the pool (the one that carried the COMMIT failed, and pgx closed it).
// It asks again while the answer is 'in progress' — the server still
// committing, or its session yet to notice that its connection is gone
// and abort — or the question fails, for at most wait, whatever ctx's
// cancellation (as settle). 'committed': nil, the batch landed.
// 'aborted': an error wrapping errAborted and lost. NULL (the server no
// longer keeps the id's status), still 'in progress' when wait is over,
// or no answer in that time (the server unreachable): an error wrapping
// kv.ErrOutcomeUnknown and lost, saying what was asked and the last
// answer or error.
func (d *Driver) resolve(ctx context.Context, xid int64, wait time.Duration, lost error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	pause := 10 * time.Millisecond
	// last is the last answer, or failed the last error of a question
	// that rctx did not cut short.
	var last string
	var failed error
	for {
		var status *string
		err := d.pool.QueryRow(rctx, "SELECT txid_status($1)", xid).Scan(&status)
		switch {
		case answerFinal(err):
			return fmt.Errorf("%w: %w; asking another connection for txid_status(%d) was refused: %w", kv.ErrOutcomeUnknown, lost, xid, err)
		case err != nil:
			if rctx.Err() == nil || failed == nil && last == "" {
				last, failed = "", err
			}
		case status == nil:
			return fmt.Errorf("%w: %w; txid_status(%d), asked on another connection, is NULL: the server no longer keeps the transaction's status", kv.ErrOutcomeUnknown, lost, xid)
		case *status == "committed":
			return nil
		case *status == "aborted":
			return fmt.Errorf("%w (transaction %d: %w)", errAborted, xid, lost)
		default: // "in progress"
			last, failed = *status, nil
		}
		select {
		case <-rctx.Done():
			if failed != nil {
				return fmt.Errorf("%w: %w; asking another connection for txid_status(%d) failed for %s: %w", kv.ErrOutcomeUnknown, lost, xid, wait, failed)
			}
			return fmt.Errorf("%w: %w; txid_status(%d), asked on another connection for %s, was still %q", kv.ErrOutcomeUnknown, lost, xid, wait, last)
		case <-time.After(pause):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// answerFinal reports whether err, the error of asking txid_status, is
// an answer that asking again cannot change: no such function (an engine
// without txid_status, class 42), or an id the server refuses (class 22:
// one "in the future", on a server other than the one that ran the
// transaction).
func answerFinal(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "42") || strings.HasPrefix(pe.Code, "22"))
}

// answerLost reports whether err, the error of sending a COMMIT and
// reading its answer, leaves the transaction's outcome unknown. It does
// not when pgx sent nothing (pgconn.SafeToRetry: the connection was
// already closed, which ended the transaction), nor when the server
// answered: an ERROR rolled the transaction back, a COMMIT of a failed
// transaction answers ROLLBACK (pgx.ErrTxCommitRollback), and the idle
// timeout (25P03) ended it before the COMMIT was read. Anything else —
// the connection closed or reset while the answer was awaited, a write
// that failed part way, a deadline, a FATAL or PANIC that ended the
// session at a moment the client cannot place — does.
func answerLost(err error) bool {
	if pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		severity := pe.SeverityUnlocalized
		if severity == "" {
			severity = pe.Severity
		}
		return (severity == "FATAL" || severity == "PANIC") && !rolledBack(err)
	}
	return true
}

// rolledBack reports errors that say the server ended a hold's
// transaction before its commit (its idle timeout): nothing was written.
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "25P03"
}

// Release implements kv.Hold.
func (h *hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.end()
	}
}

// end rolls back what is still open (nothing after a commit), frees the
// connection and the hold's place; the caller holds mu.
func (h *hold) end() {
	h.done = true
	if h.stop != nil {
		close(h.stop)
	}
	if h.committed {
		h.conn.Release()
	} else {
		endConn(h.conn)
	}
	<-h.d.holds
	h.d.g.Leave()
}

// endConn rolls back the transaction a hold's connection may have open
// and returns the connection to the pool, which closes it rather than
// reuse it if it is still in a transaction or broken.
func endConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _ = conn.Exec(ctx, "ROLLBACK")
	cancel()
	conn.Release()
}

// commitOrder returns the order in which a batch's swaps are sent (by
// key) and its sets sorted by key: writers that lock rows in one order
// do not deadlock.
func commitOrder(b kv.Batch) (order []int, sets []kv.Record) {
	order = make([]int, len(b.Swaps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return bytes.Compare(b.Swaps[x].Key, b.Swaps[y].Key) })
	return order, sortedRecords(b.Sets)
}

// Commit implements kv.Driver in one transaction: the swaps as
// conditional statements whose row counts are checked, then the sets and
// deletes. A transaction that loses a serialization race or a deadlock is
// retried; one whose swaps fail, or whose ctx ends before its COMMIT is
// sent, is rolled back; once COMMIT is sent, its answer is the result
// (settle). When the answer is lost, the server's word on the
// transaction is (resolve): committed, Commit returns nil; aborted,
// nothing was written and the transaction runs again as after a
// serialization failure — its swaps see the refs as they were — and when
// the retries are spent Commit returns an error wrapping kv.ErrNotWritten;
// no word, kv.ErrOutcomeUnknown. A transaction whose connection fails
// before its COMMIT is sent — at BEGIN, or during the batch — wrote
// nothing (the server aborts a transaction whose connection is gone): it
// runs again, on another pool connection, as after a serialization
// failure, and when the retries are spent Commit returns an error
// wrapping kv.ErrNotWritten and the last failure (the server may be
// unreachable). So does a COMMIT the server answers with ROLLBACK
// (pgx.ErrTxCommitRollback), or refuses because the transaction's idle
// timeout ended it (25P03).
//
// The transaction's first statement, in the batch's round trip, arms its
// idle_in_transaction_session_timeout at half of the commit wait, at
// least a second (idleTimeout). A transaction whose COMMIT never reached
// the server while the server still believes its connection open (a
// half-open link) would otherwise keep its row locks, and every later
// write of the same keys would wait, until the server noticed the dead
// connection (TCP keepalive: two hours by default); with it the server
// aborts the orphan within the wait, the txid_status settle then asks is
// answered 'aborted' rather than 'in progress', and the transaction runs
// again.
func (d *Driver) Commit(ctx context.Context, b kv.Batch) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := b.Validate(); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	order, sets := commitOrder(b)
	var conflict *kv.ConflictError
	var sent bool // COMMIT was sent: its answer is the outcome
	err := d.retry(ctx, func() error {
		conflict, sent = nil, false
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return linkFailed(ctx, nil, err)
		}
		var xid int64
		conflict, xid, err = d.apply(ctx, tx, &b, order, sets, d.idleTimeout())
		if err == nil && conflict == nil {
			err = ctx.Err() // canceled before COMMIT: rolled back
		}
		if err != nil || conflict != nil {
			err = linkFailed(ctx, tx.Conn(), err)
			rollback(ctx, tx)
			if err != nil {
				return err
			}
			return conflict
		}
		sent = true
		return d.settle(ctx, xid, tx.Commit)
	})
	if conflict != nil && errors.Is(err, kv.ErrConflict) {
		return conflict
	}
	if retryable(err) || errors.Is(err, pgx.ErrTxCommitRollback) {
		// Nothing was written, however often it ran: every run ended
		// rolled back (a serialization failure or deadlock each time
		// too, once the retries are spent).
		return fmt.Errorf("pgkv: commit: %w: %w", kv.ErrNotWritten, err)
	}
	if err != nil && sent {
		return fmt.Errorf("pgkv: commit: %w", err)
	}
	if err != nil {
		return fmt.Errorf("pgkv: commit: %w", ctxErr(ctx, err))
	}
	return nil
}

// errLinkFailed marks the error of a transaction whose connection failed
// before its COMMIT was sent (linkFailed): the server aborts a
// transaction whose connection is gone, so nothing was written and it may
// run again (retryable).
var errLinkFailed = errors.New("the connection failed before COMMIT was sent; nothing was written")

// linkFailed returns err, the error of a transaction's BEGIN (conn nil)
// or of a statement before its COMMIT was sent (conn the transaction's
// connection), wrapped with errLinkFailed when it is the failure of the
// connection rather than the server's answer to a statement: pgx sent
// nothing (pgconn.SafeToRetry), could not connect (*pgconn.ConnectError),
// the connection is closed (pgx closes it on a network error, and on a
// FATAL the server sent before it ended the session), or the error is a
// network error or an unexpected end of the stream. It returns err as it
// is when ctx ended (the caller reports the cancellation) or err is nil.
func linkFailed(ctx context.Context, conn *pgx.Conn, err error) error {
	return markLink(ctx, conn, err, errLinkFailed)
}

// markLink returns err wrapped with marker (errLinkFailed or
// errRerunLinkFailed) when it is a failure of the connection
// (isLinkFailure; conn nil when the connection is not at hand, or no
// longer the caller's), and as it is when it is not, when ctx ended or
// err is nil.
func markLink(ctx context.Context, conn *pgx.Conn, err, marker error) error {
	if err == nil || ctx.Err() != nil || !isLinkFailure(conn, err) {
		return err
	}
	return fmt.Errorf("%w: %w", marker, err)
}

// isLinkFailure reports whether err, met on conn (nil: none yet), is the
// failure of the connection rather than the server's answer to a
// statement: pgx sent nothing (pgconn.SafeToRetry), could not connect
// (*pgconn.ConnectError), the connection is closed (pgx closes it on a
// network error, and on a FATAL the server sent before it ended the
// session; pgconn.ErrConnClosed says so when the connection is not at
// hand, as for a pool's BEGIN on a connection whose server end went away
// while it was idle), or err is a network error or an unexpected end of
// the stream.
func isLinkFailure(conn *pgx.Conn, err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return (conn != nil && conn.IsClosed()) || pgconn.SafeToRetry(err) || errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// minCommitIdle is the least idle timeout a Commit's transaction arms.
const minCommitIdle = time.Second

// idle is the idle_in_transaction_session_timeout a Commit's or a put's
// transaction arms: commitIdle, or half of commitWait but at least
// minCommitIdle, so that the server aborts a transaction whose COMMIT it
// never read within the wait for the answer; at most what PostgreSQL
// takes (2^31-1 ms).
func (d *Driver) idle() time.Duration {
	idle := d.commitIdle
	if idle <= 0 {
		idle = max(d.commitWait/2, minCommitIdle)
	}
	return min(idle, math.MaxInt32*time.Millisecond)
}

// idleTimeout returns the SET LOCAL that arms idle, which a Commit's or a
// put's transaction sends first.
func (d *Driver) idleTimeout() string {
	return fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", d.idle().Milliseconds())
}

// rollback ends tx without writing. With ctx ended it still sends the
// ROLLBACK, so that the connection goes back to the pool; pgx closes a
// connection whose ROLLBACK fails, which ends the transaction too.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// apply writes b in the transaction q is in and reports the swaps that
// failed as a *kv.ConflictError (nil: all held), and the transaction's
// id (write); first, when not empty, is a statement sent before the
// batch's, in its round trip. The caller commits, or rolls back on a
// conflict or an error.
func (d *Driver) apply(ctx context.Context, q querier, b *kv.Batch, order []int, sets []kv.Record, first string) (*kv.ConflictError, int64, error) {
	failed, xid, err := d.write(ctx, q, b, order, sets, first)
	if err != nil || len(failed) == 0 {
		return nil, xid, err
	}
	conflict, err := d.conflicts(ctx, q, b.Swaps, failed)
	return conflict, xid, err
}

// write sends the whole batch in one pipelined round trip — first (when
// not empty), the swaps in key order, then the sets and the deletes,
// then txid_current() —
// and returns the indexes of the swaps whose expectation failed (the
// caller then rolls back) and the transaction's id, which tells its
// outcome when the answer to its COMMIT is lost (resolve). txid_current
// assigns the transaction an id if it has none yet (one that wrote
// nothing), and exists in every PostgreSQL version with txid_status
// (10 on); its successor pg_current_xact_id came in 13.
func (d *Driver) write(ctx context.Context, tx querier, b *kv.Batch, order []int, sets []kv.Record, first string) ([]int, int64, error) {
	var batch pgx.Batch
	if first != "" {
		batch.Queue(first)
	}
	skip := batch.Len()
	var placeholders [][]byte
	for _, i := range order {
		s := &b.Swaps[i]
		switch {
		case s.Absent && s.Delete:
			// "Absent, and stays absent": a placeholder insert takes the
			// key's lock and fails when the key exists. It is deleted
			// after the results are read, and only when every swap held:
			// a delete in this round trip would also remove the key that
			// exists, so that the conflict could not name its value.
			batch.Queue("INSERT INTO "+d.kvT+" (k, v) VALUES ($1, ''::bytea) ON CONFLICT (k) DO NOTHING", s.Key)
			placeholders = append(placeholders, s.Key)
		case s.Absent:
			batch.Queue("INSERT INTO "+d.kvT+" (k, v) VALUES ($1, $2) ON CONFLICT (k) DO NOTHING", s.Key, nonNil(s.New))
		case s.Delete:
			batch.Queue("DELETE FROM "+d.kvT+" WHERE k = $1 AND v = $2", s.Key, nonNil(s.Old))
		default:
			batch.Queue("UPDATE "+d.kvT+" SET v = $3 WHERE k = $1 AND v = $2", s.Key, nonNil(s.Old), nonNil(s.New))
		}
	}
	_ = parts(sets, func(p []kv.Record) error {
		keys, vals := columns(p)
		batch.Queue("INSERT INTO "+d.kvT+" (k, v) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS t(k, v) ON CONFLICT (k) DO UPDATE SET v = excluded.v", keys, vals)
		return nil
	})
	if len(b.Deletes) > 0 {
		batch.Queue("DELETE FROM "+d.kvT+" WHERE k = ANY($1::bytea[])", b.Deletes)
	}
	writes := batch.Len()
	batch.Queue("SELECT txid_current()")
	res := tx.SendBatch(ctx, &batch)
	var failed []int
	for j := -skip; j < writes-skip; j++ {
		tag, err := res.Exec()
		if err != nil {
			res.Close()
			return nil, 0, err
		}
		if j >= 0 && j < len(order) && tag.RowsAffected() != 1 {
			failed = append(failed, order[j])
		}
	}
	var xid int64
	if err := res.QueryRow().Scan(&xid); err != nil {
		res.Close()
		return nil, 0, err
	}
	if err := res.Close(); err != nil {
		return nil, 0, err
	}
	if len(failed) == 0 && len(placeholders) > 0 {
		if _, err := tx.Exec(ctx, "DELETE FROM "+d.kvT+" WHERE k = ANY($1::bytea[])", placeholders); err != nil {
			return nil, 0, err
		}
	}
	slices.Sort(failed)
	return failed, xid, nil
}

// conflicts reads the current values of the failed swaps' keys.
func (d *Driver) conflicts(ctx context.Context, tx querier, swaps []kv.Swap, failed []int) (*kv.ConflictError, error) {
	keys := make([][]byte, len(failed))
	for j, i := range failed {
		keys[j] = swaps[i].Key
	}
	cur := make(map[string][]byte, len(keys))
	rows, err := tx.Query(ctx, "SELECT k, v FROM "+d.kvT+" WHERE k = ANY($1::bytea[])", keys)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return nil, err
		}
		cur[string(k)] = nonNil(v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ce := &kv.ConflictError{}
	for _, k := range keys {
		v, ok := cur[string(k)]
		ce.Conflicts = append(ce.Conflicts, kv.Conflict{Key: bytes.Clone(k), Exists: ok, Current: v})
	}
	return ce, nil
}

// Shared implements kv.Sharer: other artifactd processes may write to
// the same database.
func (d *Driver) Shared() bool { return true }

// Close implements kv.Driver: it waits for calls in flight and closes the
// pool.
func (d *Driver) Close() error {
	if d.g.Close() {
		d.pool.Close()
	}
	return nil
}
