package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/gate/fetch"
	"github.com/artifactd/artifactd/gate/render"
	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/internal/cores"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/web"
)

const defaultAddr = "127.0.0.1:7070"

// serveConfig configures newServer and runServe.
type serveConfig struct {
	// Tokens enables authorization; nil serves an open API (loopback only
	// unless Insecure).
	Tokens   *httpapi.Tokens
	Insecure bool
	// MaxBody limits JSON request bodies (httpapi.DefaultMaxBodyBytes when 0).
	MaxBody int64
	Logger  *slog.Logger
	// UI is the browser UI, mounted at "/" when set (the web package).
	UI http.Handler
	// Fetcher, when set, lets POST .../fetches with "perform": true fetch
	// (serve --allow-fetch); Render renders script shells (serve --render).
	Fetcher httpapi.Fetcher
	Render  httpapi.Renderer
	// FetchMode and RenderMode describe them for the start-up line.
	FetchMode, RenderMode string
	// AllowOrigins and AllowHosts are serve --allow-origin and
	// --allow-host (httpapi.Options).
	AllowOrigins, AllowHosts []string
	// Net holds the connection limits and timeouts (zero: the defaults).
	Net netLimits
	// GateRules is the ruleset new verdicts use (serve --gate-rules; the
	// built-in gate/v3 when nil); Secrets are the declared secrets (serve
	// --secrets).
	GateRules *gate.Rules
	Secrets   gate.Secrets
	// SpillRetention, when positive, prunes the bytes of spilled full tool
	// outputs that are older (serve --spill-retention).
	SpillRetention time.Duration
	// CacheBytes, MappedBytes, ValueThreshold and TableBytes are serve
	// --cache-bytes, --mapped-bytes, --value-threshold and --table-bytes
	// (store.Options; zero: the defaults).
	CacheBytes, MappedBytes, ValueThreshold, TableBytes int64
	// ReserveBytes is serve --reserve-bytes: the free space writes leave
	// on the data directory's file system (0: store.DefaultReserveBytes;
	// negative: no check).
	ReserveBytes int64
}

// netLimits are serve's connection limits and timeouts.
type netLimits struct {
	// MaxConns caps open connections (defaultMaxConns when 0); a few more
	// are kept for /healthz and /readyz (httpapi.LimitListener).
	MaxConns int
	// HeaderTimeout, BodyTimeout and IdleTimeout bound the time to read
	// headers, to read a body, and to keep an idle connection.
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// MaxLargeBodies bounds concurrent large bodies (httpapi.Options).
	MaxLargeBodies int
}

// Network defaults of serve.
const (
	defaultHeaderTimeout = 10 * time.Second
	defaultIdleTimeout   = 60 * time.Second
	// reserveConns are the connections kept, beyond --max-conns, for
	// health checks; each lives at most reserveLife.
	reserveConns = 8
	reserveLife  = 2 * time.Second
	// serverMaxHeaderBytes is net/http's own header limit, kept above
	// httpapi.DefaultMaxHeaderBytes so that the API answers oversized
	// headers with problem+json (net/http's answer is text/plain).
	serverMaxHeaderBytes = 1 << 20
)

// defaultMaxConns is the connection cap when --max-conns is not given:
// 512, or less when the open-file limit leaves fewer descriptors beside
// the 128 kept for the store (Badger's tables and value logs).
func defaultMaxConns() int {
	n := 512
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < uint64(n+128+reserveConns) {
		n = int(rl.Cur) - 128 - reserveConns
	}
	return max(n, 16)
}

// leaseKey returns the secret that effect lease tokens are derived from,
// kept in DIR/lease.key (created, 32 random bytes, mode 0600, on first
// use) so that leases survive a restart. It is not part of any bundle or
// hash.
func leaseKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, "lease.key")
	b, err := os.ReadFile(p)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return nil, fmt.Errorf("lease key: %w", err)
	}
	return b, nil
}

// knownRulesets returns the built-in rulesets plus the one in the file at
// path ("" adds none): what import and replay of a bundle re-derive its
// verdicts with (--gate-rules).
func knownRulesets(path string) (*gate.Rulesets, error) {
	rs := gate.BuiltinRulesets()
	r, err := loadGateRules(path)
	if err != nil || r == nil {
		return rs, err
	}
	return rs, rs.Add(r)
}

// gateFlags are --gate-rules and --secrets, which every command that
// records through the service in its own process takes (serve, mcp
// --data, fetch --data): a verdict's ruleset and the masking of stored
// text must not depend on the door a write came through.
type gateFlags struct{ rules, secrets *string }

// addGateFlags defines the gate flags on fs.
func addGateFlags(fs *flag.FlagSet) gateFlags {
	return gateFlags{
		rules:   fs.String("gate-rules", "", "gate ruleset file (JSON, format 1, usually extending gate/v3) for new fetch verdicts"),
		secrets: fs.String("secrets", "", "file of secret values, one per line, masked by value in tool results, fetched text and effect errors"),
	}
}

// given reports whether either gate flag was set.
func (g gateFlags) given() bool { return *g.rules != "" || *g.secrets != "" }

// load reads the files the gate flags name into cfg.
func (g gateFlags) load(cfg *serveConfig) error {
	var err error
	if cfg.GateRules, err = loadGateRules(*g.rules); err != nil {
		return fmt.Errorf("--gate-rules: %w", err)
	}
	if cfg.Secrets, err = loadSecrets(*g.secrets); err != nil {
		return fmt.Errorf("--secrets: %w", err)
	}
	return nil
}

// loadGateRules reads a ruleset file (serve --gate-rules); "" means none.
func loadGateRules(path string) (*gate.Rules, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := gate.ParseRules(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := gate.BuiltinRulesets().Add(r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// loadSecrets reads a secrets file (serve --secrets): one value per line,
// blank lines ignored, surrounding whitespace not part of a value.
func loadSecrets(path string) (gate.Secrets, error) {
	if path == "" {
		return gate.Secrets{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return gate.Secrets{}, err
	}
	var vals []string
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(ln) != "" {
			vals = append(vals, ln)
		}
	}
	sec, err := gate.NewSecrets(vals)
	if err != nil {
		return gate.Secrets{}, fmt.Errorf("%s: %w (values are counted from 0, blank lines skipped)", path, err)
	}
	return sec, nil
}

// openAPIStore opens the store with the type registry wired in: the
// registry's RoleOf gives user types their trust role, so it must exist
// before the store and be loaded before the first request.
func openAPIStore(ctx context.Context, dir string, logger *slog.Logger) (*store.Store, *httpapi.Registry, error) {
	return openAPISpec(ctx, storeSpec{Dir: dir}, store.Options{Logger: logger}, false)
}

// openAPISpec is openAPIStore for the store sp names; with existing, one
// that was never created is refused (openSpec).
func openAPISpec(ctx context.Context, sp storeSpec, opts store.Options, existing bool) (*store.Store, *httpapi.Registry, error) {
	reg := httpapi.NewRegistry()
	logger := opts.Logger
	st, err := openSpec(ctx, sp, opts, existing)
	if err != nil {
		return nil, nil, err
	}
	if err := reg.Load(ctx, st); err != nil {
		st.Close()
		return nil, nil, err
	}
	for name, why := range reg.Refused() {
		logger.Warn("a type's stored schema is refused by this release: its artifacts are refused until it is registered again", "type", name, "why", why)
	}
	// Blobs are read through the contexts that hold them; a store written
	// before that learns, once, which blobs its gate outputs recorded.
	if n, err := st.BackfillBlobMembers(ctx); err != nil {
		st.Close()
		return nil, nil, err
	} else if n > 0 {
		logger.Info("recorded the blobs each context's gate outputs name", "records", n)
	}
	return st, reg, nil
}

// newServer returns the HTTP handler serving st: the API under /v1 and the
// operations routes, plus cfg.UI at "/" when set.
func newServer(st *store.Store, types *httpapi.Registry, cfg serveConfig) *httpapi.Server {
	return newServerKey(st, types, cfg, nil)
}

// newServerKey is newServer with the effect lease key.
func newServerKey(st *store.Store, types *httpapi.Registry, cfg serveConfig, key []byte) *httpapi.Server {
	return httpapi.New(httpapi.Options{
		Store: st, Service: newService(st, types, cfg, key), Logger: cfg.Logger, Tokens: cfg.Tokens,
		MaxBodyBytes: cfg.MaxBody, UI: cfg.UI,
		AllowOrigins: cfg.AllowOrigins, AllowHosts: cfg.AllowHosts,
		BodyTimeout: cfg.Net.BodyTimeout, MaxLargeBodies: cfg.Net.MaxLargeBodies,
	})
}

// newService returns the service layer over st with cfg's gate tiers,
// ruleset and secrets and the effect lease key (random when nil): what
// serve's handlers call, and what the offline commands (fetch, demo, mcp
// --data) call directly.
func newService(st *store.Store, types *service.Registry, cfg serveConfig, key []byte) *service.Service {
	return service.New(service.Options{
		Store: st, Types: types, Logger: cfg.Logger,
		AllowFetch: cfg.Fetcher != nil, Fetcher: cfg.Fetcher, Render: cfg.Render,
		LeaseKey:  key,
		GateRules: cfg.GateRules, Sanitize: gate.SanitizeOptions{Secrets: cfg.Secrets},
	})
}

// gateTiers builds the optional gate tiers of serve and fetch: a fetcher
// when allowFetch (public addresses only, unless allowPrivate also admits
// loopback and private ranges for development), and a renderer when
// renderOn (its subresources go through the fetcher, so the same address
// policy applies; without one the page renders from its inline scripts).
func gateTiers(cfg *serveConfig, allowFetch, allowPrivate, renderOn bool) error {
	if allowPrivate && !allowFetch {
		return errors.New("--allow-private-fetch needs --allow-fetch")
	}
	cfg.FetchMode, cfg.RenderMode = "off", "off"
	var fetcher *fetch.Fetcher
	if allowFetch {
		policy := fetch.Policy{}
		cfg.FetchMode = "public addresses only"
		if allowPrivate {
			policy = fetch.Policy{AllowLoopback: true, AllowPrivate: true}
			cfg.FetchMode = "PRIVATE AND LOOPBACK ADDRESSES ALLOWED (development only)"
		}
		fetcher = fetch.New(fetch.Options{Policy: policy})
		cfg.Fetcher = fetcher
	}
	if renderOn {
		ropts := render.Options{}
		if fetcher != nil {
			ropts.Loader = fetcher
		}
		r, err := render.New(ropts)
		if err != nil {
			return fmt.Errorf("--render: %w", err)
		}
		cfg.Render = r
		cfg.RenderMode = "headless chromium"
	}
	return nil
}

// loadTokens reads tokens from a file, or from ARTIFACTD_TOKENS when no
// file is named; nil when neither is set.
func loadTokens(file string) (*httpapi.Tokens, error) {
	text := os.Getenv("ARTIFACTD_TOKENS")
	src := "ARTIFACTD_TOKENS"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		text, src = string(b), file
	}
	if strings.TrimSpace(text) == "" {
		if file != "" {
			return nil, fmt.Errorf("%s defines no token", file)
		}
		return nil, nil
	}
	t, err := httpapi.ParseTokens(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return t, nil
}

// checkBind refuses to expose an open API: without tokens the address must
// be loopback (127.0.0.0/8, ::1 or a name resolving only to those) unless
// insecure is set.
func checkBind(addr string, haveTokens, insecure bool) error {
	if haveTokens || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if host != "" {
		addrs, err := net.LookupIP(host)
		if err != nil {
			return fmt.Errorf("--addr %q: %v", addr, err)
		}
		ips = addrs
	}
	loopback := len(ips) > 0
	for _, ip := range ips {
		loopback = loopback && ip.IsLoopback()
	}
	if !loopback {
		return fmt.Errorf("refusing to serve on %s without tokens: anyone who can reach it could read and write every context.\n"+
			"  Give --tokens FILE (or ARTIFACTD_TOKENS), bind a loopback address such as %s, or pass --insecure if something in front of artifactd authenticates", addr, defaultAddr)
	}
	return nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "[--data DIR | --store SPEC] [--addr HOST:PORT] [--tokens FILE] [--insecure] [--max-body BYTES] [--allow-fetch [--allow-private-fetch]] [--render] [--gate-rules FILE] [--secrets FILE] [--spill-retention D] [--allow-origin ORIGIN]... [--allow-host HOST]... [--max-conns N] [--header-timeout D] [--body-timeout D] [--idle-timeout D] [--max-large-bodies N] [--cache-bytes N] [--mapped-bytes N] [--value-threshold N] [--table-bytes N] [--reserve-bytes N]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store (created if missing)")
	addr := fs.String("addr", defaultAddr, "address to listen on")
	tokensFile := fs.String("tokens", "", "bearer tokens file: JSON or lines \"TOKEN SCOPE PATTERN[,PATTERN]\" (default: $ARTIFACTD_TOKENS)")
	insecure := fs.Bool("insecure", false, "allow a non-loopback address without tokens")
	maxBody := fs.Int64("max-body", httpapi.DefaultMaxBodyBytes, "largest JSON request body in bytes")
	allowFetch := fs.Bool("allow-fetch", false, `let POST .../fetches with "perform": true fetch URLs (public addresses only)`)
	allowPrivate := fs.Bool("allow-private-fetch", false, "with --allow-fetch, also fetch loopback and private addresses (tests and development only)")
	renderOn := fs.Bool("render", false, "render UNKNOWN script shells in headless chromium ($ARTIFACTD_CHROMIUM, else chromium or google-chrome on PATH) and classify them again")
	var origins, hosts stringList
	fs.Var(&origins, "allow-origin", "a browser origin (https://app.example) allowed to write, with CORS headers (repeatable; default: none, cross-site writes get 403)")
	fs.Var(&hosts, "allow-host", "a Host name an open (token-less) server answers besides loopback and localhost (repeatable)")
	var nl netLimits
	fs.IntVar(&nl.MaxConns, "max-conns", defaultMaxConns(), "most open connections (8 more are kept for /healthz and /readyz)")
	fs.DurationVar(&nl.HeaderTimeout, "header-timeout", defaultHeaderTimeout, "time to read a request's headers")
	fs.DurationVar(&nl.BodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "time to read a request body (408 after)")
	fs.DurationVar(&nl.IdleTimeout, "idle-timeout", defaultIdleTimeout, "time an idle keep-alive connection stays open")
	fs.IntVar(&nl.MaxLargeBodies, "max-large-bodies", httpapi.DefaultMaxLargeBodies, "request bodies over 1 MiB (or of unknown length) read at once (503 beyond)")
	spillRetention := fs.Duration("spill-retention", 0, "prune the bytes of spilled full tool outputs older than this (e.g. 720h); the artifacts keep their digests and the blobs answer 410 Gone; 0 keeps them")
	gf := addGateFlags(fs)
	cacheBytes := fs.Int64("cache-bytes", store.DefaultCacheBytes, "memory budget of the store's caches (branch heads, state-map nodes, payloads); the Go runtime's soft limit is it plus 192 MiB, raised to 1.5 times the live heap when that is more, unless GOMEMLIMIT is set")
	mappedBytes := fs.Int64("mapped-bytes", store.DefaultMappedBytes, "resident pages of the embedded database's mapped files past which they are paged out (Linux; -1: no bound)")
	valueThreshold := fs.Int64("value-threshold", store.DefaultValueThreshold, "size in bytes from which the embedded database keeps a value in its value log, not its tree (up to 1048576; -1: every value below 1 MiB in the tree, where compactions copy it again from level to level)")
	tableBytes := fs.Int64("table-bytes", store.DefaultTableBytes, "size in bytes of the embedded database's tables below level 0 (64 KiB to 64 MiB): smaller keeps commits from waiting long behind compactions, larger keeps fewer files open (about two per MiB of tree at the default)")
	reserveBytes := fs.Int64("reserve-bytes", store.DefaultReserveBytes, "free space in bytes that writes leave on the data directory's file system: below it every write is refused with 507 until space is freed, before the embedded database could run out of room mid-write (-1: no check)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "serve: unexpected argument %q", pos[0])
	}
	sp, err := stf.resolve()
	if err != nil {
		return fail(stderr, exitUsage, "serve: %v", err)
	}
	if *maxBody <= 0 {
		return fail(stderr, exitUsage, "serve: --max-body must be positive")
	}
	tokens, err := loadTokens(*tokensFile)
	if err != nil {
		return fail(stderr, exitUsage, "serve: tokens: %v", err)
	}
	if err := checkBind(*addr, tokens != nil, *insecure); err != nil {
		return fail(stderr, exitUsage, "serve: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if nl.MaxConns <= 0 || nl.HeaderTimeout <= 0 || nl.BodyTimeout <= 0 || nl.IdleTimeout <= 0 || nl.MaxLargeBodies <= 0 {
		return fail(stderr, exitUsage, "serve: --max-conns, --max-large-bodies and the timeouts must be positive")
	}
	for i, o := range origins {
		if origins[i], err = httpapi.ParseOrigin(o); err != nil {
			return fail(stderr, exitUsage, "serve: --allow-origin: %v", err)
		}
	}
	cfg := serveConfig{Tokens: tokens, Insecure: *insecure, MaxBody: *maxBody, Logger: logger,
		AllowOrigins: origins, AllowHosts: hosts, Net: nl}
	if err := gf.load(&cfg); err != nil {
		return fail(stderr, exitUsage, "serve: %v", err)
	}
	if *spillRetention < 0 {
		return fail(stderr, exitUsage, "serve: --spill-retention must not be negative")
	}
	cfg.SpillRetention = *spillRetention
	if *cacheBytes < store.MinCacheBytes {
		return fail(stderr, exitUsage, "serve: --cache-bytes must be at least 1 MiB (%d)", store.MinCacheBytes)
	}
	if *mappedBytes == 0 || *mappedBytes < -1 {
		return fail(stderr, exitUsage, "serve: --mapped-bytes must be positive, or -1 for no bound")
	}
	if *valueThreshold == 0 || *valueThreshold < -1 || *valueThreshold > store.MaxValueThreshold {
		return fail(stderr, exitUsage, "serve: --value-threshold must be from 1 to %d, or -1 to keep values in the tree", store.MaxValueThreshold)
	}
	if *tableBytes < store.MinTableBytes || *tableBytes > store.MaxTableBytes {
		return fail(stderr, exitUsage, "serve: --table-bytes must be from %d to %d", store.MinTableBytes, store.MaxTableBytes)
	}
	if *reserveBytes == 0 || *reserveBytes < -1 {
		return fail(stderr, exitUsage, "serve: --reserve-bytes must be positive, or -1 for no check")
	}
	cfg.CacheBytes, cfg.MappedBytes, cfg.ValueThreshold, cfg.TableBytes = *cacheBytes, *mappedBytes, *valueThreshold, *tableBytes
	cfg.ReserveBytes = *reserveBytes
	if err := gateTiers(&cfg, *allowFetch, *allowPrivate, *renderOn); err != nil {
		return fail(stderr, exitUsage, "serve: %v", err)
	}
	if err := serve(ctx, sp, *addr, cfg, stdout); err != nil {
		return fail(stderr, exitUsage, "serve: %v", err)
	}
	return exitOK
}

// serve runs the server until ctx ends, then shuts down gracefully:
// in-flight requests (and their commits) finish, then the store closes.
func serve(ctx context.Context, sp storeSpec, addr string, cfg serveConfig, stdout io.Writer) error {
	defer setServerProcs()()
	st, reg, err := openAPISpec(ctx, sp, store.Options{Logger: cfg.Logger, CacheBytes: cfg.CacheBytes, MappedBytes: cfg.MappedBytes, ValueThreshold: cfg.ValueThreshold, TableBytes: cfg.TableBytes, ReserveBytes: cfg.ReserveBytes}, false)
	if err != nil {
		return err
	}
	key, err := leaseKeyFor(ctx, sp)
	if err != nil {
		st.Close()
		return err
	}
	stopLimit := limitMemory(st, cfg.CacheBytes)
	defer stopLimit()
	nl := cfg.Net
	if nl.MaxConns <= 0 {
		nl.MaxConns = defaultMaxConns()
	}
	if nl.HeaderTimeout <= 0 {
		nl.HeaderTimeout = defaultHeaderTimeout
	}
	if nl.IdleTimeout <= 0 {
		nl.IdleTimeout = defaultIdleTimeout
	}
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		st.Close()
		return err
	}
	ln := httpapi.LimitListener(tcp, nl.MaxConns, reserveConns, reserveLife)
	if cfg.UI == nil {
		uiOpts := web.Options{Store: st, Logger: cfg.Logger}
		if cfg.Tokens != nil {
			uiOpts.Tokens = cfg.Tokens.ReadsAll
		}
		cfg.UI = web.New(uiOpts)
	}
	// Body read deadlines are set per request by the API (so that a long
	// handler is never cut by them); ReadTimeout stays unset for that
	// reason.
	srv := &http.Server{
		Handler:           withMCP(newServerKey(st, reg, cfg, key), cfg),
		ReadHeaderTimeout: nl.HeaderTimeout,
		IdleTimeout:       nl.IdleTimeout,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		ConnContext:       httpapi.ConnContext,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	auth := "open (loopback)"
	switch {
	case cfg.Tokens != nil:
		auth = fmt.Sprintf("%d bearer token(s)", cfg.Tokens.Len())
	case cfg.Insecure:
		auth = "OPEN, --insecure"
	}
	if cfg.FetchMode == "" {
		cfg.FetchMode, cfg.RenderMode = "off", "off"
	}
	fmt.Fprintf(stdout, "artifactd: serving http://%s (data %s, auth %s, server-side fetch %s, render %s)\n", ln.Addr(), sp, auth, cfg.FetchMode, cfg.RenderMode)
	cfg.Logger.Info("serving", "addr", ln.Addr().String(), "data", sp.String(), "auth", auth, "fetch", cfg.FetchMode, "render", cfg.RenderMode,
		"gomaxprocs", runtime.GOMAXPROCS(0), "cores", cores.Count()) // setServerProcs
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.SpillRetention > 0 {
		pctx, stopPruning := context.WithCancel(ctx)
		defer stopPruning()
		go pruneSpills(pctx, st, cfg.SpillRetention, cfg.Logger)
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
		cfg.Logger.Info("shutting down: finishing in-flight requests")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if cerr := st.Close(); cerr != nil && err == nil {
		err = cerr
	}
	cfg.Logger.Info("stopped", "err", err)
	return err
}

// pruneSpills prunes, every tenth of the retention window (at least every
// second, at most every minute), the spilled outputs older than it.
func pruneSpills(ctx context.Context, st *store.Store, retention time.Duration, log *slog.Logger) {
	every := min(max(retention/10, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		now := time.Now()
		n, err := st.PruneSpills(ctx, now.Add(-retention), now, 10000)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("prune spilled outputs", "err", err)
		case n > 0:
			log.Info("pruned spilled outputs", "blobs", n, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
