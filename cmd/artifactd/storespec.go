package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
)

// envStore is the environment variable that names the store when neither
// --store nor --data is given.
const envStore = "ARTIFACTD_STORE"

// storeSpec names a store: an embedded Badger data directory or a
// PostgreSQL database. Exactly one of Dir and DSN is set.
type storeSpec struct {
	// Dir is the Badger data directory.
	Dir string
	// DSN is the PostgreSQL connection string (postgres://... or
	// postgresql://...).
	DSN string
}

// specSyntax is what a store spec may be, for error messages.
const specSyntax = "badger:DIR, a directory, or postgres://USER@HOST:PORT/DB"

// parseStoreSpec parses a store spec: "badger:DIR", "postgres://…" or
// "postgresql://…", or a plain directory (Badger). Any other URL scheme
// is refused, so that a mistyped database URL never becomes a directory.
func parseStoreSpec(s string) (storeSpec, error) {
	switch {
	case s == "":
		return storeSpec{}, fmt.Errorf("empty: expected %s", specSyntax)
	case strings.HasPrefix(s, "badger:"):
		dir := strings.TrimPrefix(s, "badger:")
		if dir == "" {
			return storeSpec{}, errors.New("badger: needs a directory (badger:DIR)")
		}
		return storeSpec{Dir: dir}, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil {
			return storeSpec{}, fmt.Errorf("not a PostgreSQL URL: %w", err)
		}
		if u.Host == "" && u.Query().Get("host") == "" {
			return storeSpec{}, fmt.Errorf("%s names no host: expected postgres://USER@HOST:PORT/DB", u.Redacted())
		}
		return storeSpec{DSN: s}, nil
	}
	if i := strings.Index(s, "://"); i > 0 && !strings.ContainsAny(s[:i], `/\.`) {
		return storeSpec{}, fmt.Errorf("unknown store scheme %q: expected %s", s[:i], specSyntax)
	}
	return storeSpec{Dir: s}, nil
}

// isPostgres reports whether sp names a PostgreSQL database.
func (sp storeSpec) isPostgres() bool { return sp.DSN != "" }

// isZero reports whether sp names no store.
func (sp storeSpec) isZero() bool { return sp.Dir == "" && sp.DSN == "" }

// String names the store for messages, without a password.
func (sp storeSpec) String() string {
	if !sp.isPostgres() {
		return sp.Dir
	}
	if u, err := url.Parse(sp.DSN); err == nil {
		return u.Redacted()
	}
	return "postgres://…"
}

// flag is the command-line flag that names sp (the password left out).
func (sp storeSpec) flag() string {
	if sp.isPostgres() {
		return "--store '" + sp.String() + "'"
	}
	return "--data " + sp.Dir
}

// storeFlags are the --data and --store flags of a command that opens a
// store.
type storeFlags struct {
	fs   *flag.FlagSet
	data *string
	spec *string
}

// addStoreFlags defines --data (with its default and usage) and --store
// on fs.
func addStoreFlags(fs *flag.FlagSet, dataDefault, dataUsage string) *storeFlags {
	return &storeFlags{
		fs:   fs,
		data: fs.String("data", dataDefault, dataUsage),
		spec: fs.String("store", "", "the store: "+specSyntax+" (default: $"+envStore+", else --data)"),
	}
}

// given returns the flag, --data or --store, that was set on the command
// line, or "" when neither was (a store named only by $ARTIFACTD_STORE).
func (f *storeFlags) given() string {
	name := ""
	f.fs.Visit(func(fl *flag.Flag) {
		if name == "" && (fl.Name == "data" || fl.Name == "store") {
			name = "--" + fl.Name
		}
	})
	return name
}

// resolve returns the store the flags name, after parsing: --store, else
// an explicit --data, else $ARTIFACTD_STORE, else --data's default (which
// may be empty: no store named). Errors name the flag or variable.
func (f *storeFlags) resolve() (storeSpec, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case set["store"] && set["data"]:
		return storeSpec{}, errors.New("--store and --data both name a store: give one")
	case set["store"]:
		sp, err := parseStoreSpec(*f.spec)
		if err != nil {
			return storeSpec{}, fmt.Errorf("--store: %w", err)
		}
		return sp, nil
	case set["data"]:
		if *f.data == "" {
			return storeSpec{}, errors.New("--data: empty: expected a directory")
		}
		if strings.Contains(*f.data, "://") {
			// Never a directory named after a database URL.
			return storeSpec{}, fmt.Errorf("--data %q is a URL, not a directory: name a database with --store", *f.data)
		}
		return storeSpec{Dir: *f.data}, nil
	}
	if env := os.Getenv(envStore); env != "" {
		sp, err := parseStoreSpec(env)
		if err != nil {
			return storeSpec{}, fmt.Errorf("%s: %w", envStore, err)
		}
		return sp, nil
	}
	return storeSpec{Dir: *f.data}, nil
}

// openDriver opens the storage driver sp names (Badger creates a missing
// directory).
func openDriver(ctx context.Context, sp storeSpec, noSync bool) (kv.Driver, error) {
	if sp.isPostgres() {
		d, err := pgkv.Open(ctx, pgkv.Options{DSN: sp.DSN})
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL store %s: %w", sp, err)
		}
		return d, nil
	}
	d, err := badgerkv.Open(ctx, badgerkv.Options{Dir: sp.Dir, NoSync: noSync, Logger: discardLogger()})
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%s is in use by a running artifactd (the data directory is locked): stop it first", sp.Dir)
		}
		return nil, fmt.Errorf("data directory %s: %w", sp.Dir, err)
	}
	return d, nil
}

// formatKey is the store's format record (store/doc.go's key layout):
// present in every store that was opened once.
var formatKey = []byte("meta\x00format")

// openSpec opens the store sp names with opts (whose Dir and Driver it
// sets). With existing, a store that was never created is refused: a read
// never creates one.
func openSpec(ctx context.Context, sp storeSpec, opts store.Options, existing bool) (*store.Store, error) {
	if !sp.isPostgres() {
		if existing {
			if err := mustExist(sp.Dir); err != nil {
				return nil, err
			}
		}
		opts.Dir = sp.Dir
		return openStoreWith(ctx, opts)
	}
	drv, err := openDriver(ctx, sp, opts.NoSync)
	if err != nil {
		return nil, err
	}
	if existing {
		if _, err := drv.Get(ctx, formatKey); errors.Is(err, kv.ErrNotFound) {
			drv.Close()
			return nil, fmt.Errorf("PostgreSQL store %s holds no artifactd store yet (create one with serve, demo or import)", sp)
		} else if err != nil {
			drv.Close()
			return nil, fmt.Errorf("PostgreSQL store %s: %w", sp, err)
		}
	}
	// The free-space reserve is about a local data directory; the
	// database's room is the database's to manage.
	opts.ReserveBytes = -1
	st, err := openOnDriver(ctx, drv, opts)
	if err != nil {
		drv.Close() // a second Close is harmless
		return nil, fmt.Errorf("PostgreSQL store %s: %w", sp, err)
	}
	return st, nil
}

// leaseKeyRecord is where a PostgreSQL store keeps the effect lease key,
// so that every process serving the database derives the same lease
// tokens (a claim on one, a complete on another). It is outside the
// store's own key layout and no bundle carries it.
var leaseKeyRecord = []byte("meta\x00lease.key")

// leaseKeyFor returns the effect lease key for sp: DIR/lease.key for
// Badger (leaseKey), a record in the database for PostgreSQL, written
// once by whichever process comes first.
func leaseKeyFor(ctx context.Context, sp storeSpec) ([]byte, error) {
	if !sp.isPostgres() {
		return leaseKey(sp.Dir)
	}
	drv, err := pgkv.Open(ctx, pgkv.Options{DSN: sp.DSN, MaxConns: 2})
	if err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	defer drv.Close()
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	if err := drv.PutImmutable(ctx, []kv.Record{{Key: leaseKeyRecord, Value: b}}); err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	got, err := drv.Get(ctx, leaseKeyRecord)
	if err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	if len(got) < 32 {
		return nil, fmt.Errorf("lease key: the record in the database has %d bytes, want 32", len(got))
	}
	return got, nil
}

// openOnDriver opens a store on drv, which the store closes on Close.
func openOnDriver(ctx context.Context, drv kv.Driver, opts store.Options) (*store.Store, error) {
	opts.Driver = drv
	return store.Open(ctx, opts)
}
