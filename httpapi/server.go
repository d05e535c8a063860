package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/gate/fetch"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// DefaultMaxBodyBytes is the default limit of a JSON request body (8 MiB).
const DefaultMaxBodyBytes = 8 << 20

// DefaultMaxBlobBytes is the default limit of a blob upload (64 MiB).
const DefaultMaxBlobBytes = 64 << 20

// Options configure New.
type Options struct {
	// Store is the repository served. Required.
	Store *store.Store
	// Service is the service layer the handlers call. When nil, New makes
	// one over Store from the fields below that configure it (Types,
	// AllowFetch, Fetcher, Render, Sanitize, GateRules, Clock, LeaseKey);
	// when set, those fields are ignored and Service must work on Store.
	Service *service.Service
	// Types is the type registry: what writes validate their data
	// against and record in the chain (trust reads each type's role from
	// the definitions the chain holds, not from the registry). Pass one
	// already loaded (Registry.Load), shared by every door of the
	// process. When nil, New makes one and loads it from Store (an error
	// is logged, and the registry then knows the built-in types only).
	Types *Registry
	// Logger receives request logs and internal errors; slog.Default() when
	// nil.
	Logger *slog.Logger
	// Tokens enables bearer-token authorization; nil or empty leaves the
	// API open (serve then binds loopback only).
	Tokens *Tokens
	// MaxBodyBytes limits JSON request bodies (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64
	// MaxBlobBytes limits blob uploads (DefaultMaxBlobBytes when 0).
	MaxBlobBytes int64
	// UI, when set, is mounted at "/" (the web package's browser UI). It
	// does its own authentication (a browser sends no bearer header): build
	// it with Tokens.ReadsAll when tokens are configured.
	UI http.Handler
	// Ready, when set, adds a readiness condition to /readyz.
	Ready func(ctx context.Context) error

	// AllowFetch lets POST .../fetches with "perform": true make the
	// server fetch a URL itself (serve --allow-fetch). Off by default.
	AllowFetch bool
	// Fetcher performs those fetches; when nil and AllowFetch is set, a
	// gate/fetch Fetcher with the default address policy (public
	// addresses only) and limits.
	Fetcher Fetcher
	// Render, when set, renders UNKNOWN extraction.script_shell verdicts in
	// a browser and classifies the rendered page (serve --render).
	Render Renderer
	// Sanitize tunes tool-result sanitising (POST .../tool-results); the
	// zero value is gate.DefaultSanitizeOptions. Its Secrets (serve
	// --secrets) are masked by value in model views, full-output blobs and
	// effect errors; POST /v1/admin/secrets adds more while serving.
	Sanitize gate.SanitizeOptions
	// GateRules is the ruleset new fetch verdicts are classified with
	// (serve --gate-rules); gate.BuiltinRules when nil. Verdicts are
	// checked against the ruleset their receipt names: the built-in ones
	// and GateRules.
	GateRules *gate.Rules
	// Clock gives the outbox its time (leases, created_at); time.Now when
	// nil. It never reaches a fetch verdict.
	Clock func() time.Time

	// AllowOrigins lists browser origins ("https://app.example") that may
	// write and that get CORS headers (serve --allow-origin). Without it,
	// every write that a browser marks cross-site or same-site (Origin or
	// Sec-Fetch-Site) is refused with 403 and no CORS header is sent:
	// CORS is opt-in.
	AllowOrigins []string
	// AllowHosts lists extra Host names accepted when the API is open (no
	// Tokens); loopback addresses and "localhost" are always accepted. An
	// open server answers any other Host with 421, so a DNS-rebinding page
	// cannot reach it.
	AllowHosts []string
	// BodyTimeout bounds the time to read a request body
	// (DefaultBodyTimeout when 0); a slower body gets 408 and the
	// connection is closed.
	BodyTimeout time.Duration
	// MaxLargeBodies bounds how many requests with a body over
	// LargeBodyBytes (or of unknown length) are handled at once
	// (DefaultMaxLargeBodies when 0); more get 503 with Retry-After.
	MaxLargeBodies int
	// LargeBodyBytes is the size from which a body counts as large
	// (DefaultLargeBodyBytes when 0).
	LargeBodyBytes int64
	// MaxHeaderBytes bounds the request line and headers a handler
	// accepts (DefaultMaxHeaderBytes when 0); more get 431 problem+json.
	// Set http.Server.MaxHeaderBytes above it, so that the server, not
	// net/http's plain-text answer, refuses.
	MaxHeaderBytes int
	// LeaseKey is the secret from which effect lease tokens are derived
	// (an HMAC key of at least 32 bytes). Keep it across restarts so that
	// leases survive them; when nil, New draws a random one and leases
	// end with the process.
	LeaseKey []byte
}

// Defaults of the network limits.
const (
	DefaultBodyTimeout    = 30 * time.Second
	DefaultMaxLargeBodies = 4
	DefaultLargeBodyBytes = 1 << 20
	DefaultMaxHeaderBytes = 64 << 10
)

// Server is the artifactd HTTP API. It implements http.Handler: each
// handler decodes its request, calls the service layer (Service) and
// writes what it answers. Methods are safe for concurrent use.
type Server struct {
	st      *store.Store
	types   *Registry
	log     *slog.Logger
	tokens  *Tokens
	maxBody int64
	maxBlob int64
	ready   func(ctx context.Context) error
	metrics *metrics
	router  chi.Router
	panics  atomic.Int64

	// svc is the service layer every handler calls; st and types are its
	// store and registry.
	svc *service.Service

	// The network guards (netguard.go).
	allowOrigins map[string]bool
	allowHosts   map[string]bool
	bodyTimeout  time.Duration
	largeBody    int64
	// largeBodies holds one token per large body being handled.
	largeBodies chan struct{}
	maxHeader   int
	// api routes the API alone (no UI, no catch-all): it answers which
	// methods a path allows.
	api chi.Router

	// openAPIRaw is /openapi.json's body, built once (openAPIOnce).
	openAPIOnce sync.Once
	openAPIRaw  []byte
}

// New returns the API handler for opts.Store.
func New(opts Options) *Server {
	s := &Server{
		st:      opts.Store,
		log:     opts.Logger,
		tokens:  opts.Tokens,
		maxBody: opts.MaxBodyBytes,
		maxBlob: opts.MaxBlobBytes,
		ready:   opts.Ready,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.svc = opts.Service
	if s.svc == nil {
		fetcher := opts.Fetcher
		if opts.AllowFetch && fetcher == nil {
			fetcher = fetch.New(fetch.Options{})
		}
		s.svc = service.New(service.Options{
			Store: opts.Store, Types: opts.Types, Logger: s.log,
			AllowFetch: opts.AllowFetch, Fetcher: fetcher, Render: opts.Render,
			Sanitize: opts.Sanitize, GateRules: opts.GateRules, Clock: opts.Clock, LeaseKey: opts.LeaseKey,
		})
	}
	s.types = s.svc.Types()
	s.metrics = newMetrics(s.svc.Writes, s.panics.Load, s.st.CachedBytes)
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxBlob <= 0 {
		s.maxBlob = DefaultMaxBlobBytes
	}
	s.initGuards(opts)
	s.router = s.newRouter(opts.UI)
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// MaxBodyBytes returns the limit of a JSON request body
// (Options.MaxBodyBytes, or its default).
func (s *Server) MaxBodyBytes() int64 { return s.maxBody }

// Router returns the chi router (tests walk its routes).
func (s *Server) Router() chi.Routes { return s.router }

// Panics returns how many handler panics the recover middleware caught.
func (s *Server) Panics() int64 { return s.panics.Load() }

// route is one API route: the handler, the scope it needs, and what the
// OpenAPI document says about it.
type route struct {
	method, pattern string
	handler         http.HandlerFunc
	// scope is the token scope needed; ScopeNone routes are public.
	scope Scope
	// on says where the scope applies: "ctx" (the {ctx} parameter),
	// onNewCtx (the same, for the route that creates it), "" (any
	// context) or "*" (every context).
	on  string
	doc opDoc
}

// onNewCtx is route.on for the route that creates the {ctx} it names.
const onNewCtx = "new ctx"

// routes lists every route of the API in one place.
func (s *Server) routes() []route {
	return []route{
		// Operations.
		{"GET", "/healthz", s.handleHealthz, ScopeNone, "", docHealthz},               // liveness: the process serves HTTP
		{"GET", "/readyz", s.handleReadyz, ScopeNone, "", docReadyz},                  // readiness: store open, types loaded
		{"GET", "/metrics", s.handleMetrics, ScopeNone, "", docMetrics},               // Prometheus text counters
		{"GET", "/openapi.json", s.handleOpenAPI, ScopeNone, "", docOpenAPI},          // this API as OpenAPI 3.1
		{"GET", "/v1/contexts", s.handleListContexts, ScopeRead, "", docListContexts}, // contexts the token may read
		{"POST", "/v1/contexts", s.handleCreateContext, ScopeWrite, "", docCreateContext},
		// Contexts.
		{"GET", "/v1/contexts/{ctx}", s.handleDescribeContext, ScopeRead, "ctx", docDescribeContext}, // branches, head, hash, counts, trust summary
		{"PUT", "/v1/contexts/{ctx}", s.handleEnsureContext, ScopeWrite, onNewCtx, docEnsureContext}, // create if absent; 200 when the same, 409 when different
		{"GET", "/v1/compare", s.handleCompare, ScopeRead, "", docCompare},                           // ?a=CTX[@REF]&b=CTX[@REF]: same run, or where it diverges
		// Commits: history and the general write.
		{"POST", "/v1/contexts/{ctx}/commits", s.handleCommit, ScopeWrite, "ctx", docCommit},         // one atomic commit of ops
		{"GET", "/v1/contexts/{ctx}/commits", s.handleListCommits, ScopeRead, "ctx", docListCommits}, // first-parent log, newest first
		{"GET", "/v1/contexts/{ctx}/commits/{commit}", s.handleGetCommit, ScopeRead, "ctx", docGetCommit},
		// Artifacts.
		{"POST", "/v1/contexts/{ctx}/artifacts", s.handlePutArtifact, ScopeWrite, "ctx", docPutArtifact},    // the one-call write: artifact + edges
		{"GET", "/v1/contexts/{ctx}/artifacts", s.handleListArtifacts, ScopeRead, "ctx", docListArtifacts},  // ?type= filter, cursor pages
		{"GET", "/v1/contexts/{ctx}/artifacts/{id}", s.handleGetArtifact, ScopeRead, "ctx", docGetArtifact}, // with data and trust
		{"GET", "/v1/contexts/{ctx}/artifacts/{id}/history", s.handleHistory, ScopeRead, "ctx", docHistory},
		{"GET", "/v1/contexts/{ctx}/artifacts/{id}/related", s.handleRelated, ScopeRead, "ctx", docRelated},
		{"GET", "/v1/contexts/{ctx}/artifacts/{id}/provenance", s.handleProvenance, ScopeRead, "ctx", docProvenance}, // json, mermaid or dot
		// State, trust and reports.
		{"GET", "/v1/contexts/{ctx}/edges", s.handleListEdges, ScopeRead, "ctx", docListEdges},
		{"GET", "/v1/contexts/{ctx}/state", s.handleState, ScopeRead, "ctx", docState}, // streamed export, enough to recompute the hash
		{"GET", "/v1/contexts/{ctx}/hash", s.handleHash, ScopeRead, "ctx", docHash},
		{"GET", "/v1/contexts/{ctx}/quarantine", s.handleQuarantine, ScopeRead, "ctx", docQuarantine},
		{"GET", "/v1/contexts/{ctx}/diff", s.handleDiff, ScopeRead, "ctx", docDiff},
		{"GET", "/v1/contexts/{ctx}/audit/{id}", s.handleAudit, ScopeRead, "ctx", docAudit},                               // json or markdown
		{"POST", "/v1/contexts/{ctx}/verify", s.handleVerify, ScopeRead, "ctx", docVerify},                                // replay the stored chain while serving
		{"GET", "/v1/contexts/{ctx}/eval", s.handleEval, ScopeRead, "ctx", docEval},                                       // supported answers, quarantine share
		{"GET", "/v1/contexts/{ctx}/model-calls/{request_hash}", s.handleGetModelCall, ScopeRead, "ctx", docGetModelCall}, // a recorded model response by request hash
		// Branches.
		{"GET", "/v1/contexts/{ctx}/branches", s.handleListBranches, ScopeRead, "ctx", docListBranches},
		{"POST", "/v1/contexts/{ctx}/branches", s.handleCreateBranch, ScopeWrite, "ctx", docCreateBranch},              // from any commit
		{"POST", "/v1/contexts/{ctx}/branches/{branch}/reset", s.handleResetBranch, ScopeAdmin, "ctx", docResetBranch}, // checkout / rollback
		{"POST", "/v1/contexts/{ctx}/merge", s.handleMerge, ScopeWrite, "ctx", docMerge},                               // three-way, all conflicts at once
		// The gate: the server classifies fetch evidence (or fetches) and
		// sanitises tool results.
		{"POST", "/v1/contexts/{ctx}/fetches", s.handleFetch, ScopeWrite, "ctx", docFetch},                // evidence → fetch_verdict with receipt
		{"POST", "/v1/contexts/{ctx}/tool-results", s.handleToolResult, ScopeWrite, "ctx", docToolResult}, // → tool_error / tool_output
		{"POST", "/v1/admin/secrets", s.handleAddSecrets, ScopeAdmin, "*", docAddSecrets},                 // operator secrets, masked by value; never echoed
		// The outbox: effects as state, claimed with leases.
		{"POST", "/v1/contexts/{ctx}/effects", s.handleCreateEffect, ScopeWrite, "ctx", docCreateEffect}, // idempotent by key
		{"GET", "/v1/contexts/{ctx}/effects", s.handleListEffects, ScopeRead, "ctx", docListEffects},     // ?status=
		{"POST", "/v1/contexts/{ctx}/effects/claim", s.handleClaimEffects, ScopeWrite, "ctx", docClaimEffects},
		{"POST", "/v1/contexts/{ctx}/effects/{id}/complete", s.handleCompleteEffect, ScopeWrite, "ctx", docCompleteEffect},
		{"POST", "/v1/contexts/{ctx}/effects/{id}/fail", s.handleFailEffect, ScopeWrite, "ctx", docFailEffect},
		// Type registry.
		{"GET", "/v1/types", s.handleListTypes, ScopeRead, "", docListTypes},
		{"GET", "/v1/types/{name}", s.handleGetType, ScopeRead, "", docGetType},
		{"PUT", "/v1/types/{name}", s.handlePutType, ScopeAdmin, "*", docPutType}, // global: admin on "*"
		// Relation registry: built-in and user relations; depends carries trust.
		{"GET", "/v1/relations", s.handleListRelations, ScopeRead, "", docListRelations},
		{"GET", "/v1/relations/{name}", s.handleGetRelation, ScopeRead, "", docGetRelation},
		{"PUT", "/v1/relations/{name}", s.handlePutRelation, ScopeAdmin, "*", docPutRelation}, // global: admin on "*"
		// Blobs: raw bytes by sha256, read through a context that holds them.
		{"POST", "/v1/contexts/{ctx}/blobs", s.handlePutContextBlob, ScopeWrite, "ctx", docPutContextBlob},        // streamed; 201 new to the context, 200 held
		{"GET", "/v1/contexts/{ctx}/blobs/{digest}", s.handleGetContextBlob, ScopeRead, "ctx", docGetContextBlob}, // 404 unless the context holds it
		{"POST", "/v1/blobs", s.handlePutBlob, ScopeAdmin, "*", docPutBlob},                                       // global: admin on "*"
		{"GET", "/v1/blobs/{digest}", s.handleGetBlob, ScopeAdmin, "*", docGetBlob},                               // global: admin on "*"
	}
}

func (s *Server) newRouter(ui http.Handler) chi.Router {
	s.api = chi.NewRouter()
	r := chi.NewRouter()
	r.Use(s.recoverer, s.logRequests, s.netGuard)
	r.NotFound(s.noRoute)
	r.MethodNotAllowed(s.noRoute)
	for _, rt := range s.routes() {
		h := s.guard(rt)
		r.Method(rt.method, rt.pattern, h)
		s.api.Method(rt.method, rt.pattern, http.NotFoundHandler())
		if rt.method == http.MethodGet {
			// HEAD is GET without the body (RFC 9110 §9.3.2): the same
			// guard and handler; net/http drops what it writes.
			r.Method(http.MethodHead, rt.pattern, h)
			s.api.Method(http.MethodHead, rt.pattern, http.NotFoundHandler())
		}
	}
	if ui != nil {
		r.Handle("/v1/*", http.HandlerFunc(s.noRoute))
		r.Mount("/", ui)
	}
	return r
}

// routeMethods are the methods the API routes use, in Allow order.
var routeMethods = []string{"GET", "HEAD", "POST", "PUT"}

// noRoute answers a request that no API route takes: 405 with Allow when
// the path is an API route for other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if r.URL.RawPath != "" {
		path = r.URL.RawPath // chi routes on the escaped path then
	}
	var allowed []string
	for _, m := range routeMethods {
		if s.api.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		s.writeError(w, r, errorf(CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
		return
	}
	list := strings.Join(allowed, ", ")
	w.Header().Set("Allow", list)
	s.writeError(w, r, errorf(CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, list))
}

// guard wraps a handler with its authorization check.
func (s *Server) guard(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.allowed(r, rt); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := singleParams(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := rt.ifMatchSupported(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		rt.handler(w, r)
	}
}

// ifMatchSupported refuses an If-Match header on a write route that has
// no branch head to compare it to (422 naming the header, rule
// not_supported): dropping the condition would apply a write its client
// asked to make only on a head it knows. The writes that land on a branch
// (their opDoc's ifMatch: a commit, an artifact, a reset, a tool result, a
// fetch, an effect, a merge) evaluate it; reads evaluate it against their
// ETag (Preconditions).
func (rt route) ifMatchSupported(r *http.Request) error {
	if rt.method == http.MethodGet || rt.doc.ifMatch || len(r.Header.Values("If-Match")) == 0 {
		return nil
	}
	return &Error{Code: CodeValidation, Detail: "this route takes no If-Match: it writes no branch head the header could name",
		Errors: []FieldError{{Parameter: "If-Match", Rule: "not_supported", Detail: "send it only to a write that lands on a branch"}}}
}

// allowed checks r's authorization for rt (public routes need none).
func (s *Server) allowed(r *http.Request, rt route) error {
	if rt.scope == ScopeNone {
		return nil
	}
	on := rt.on
	if on == "ctx" || on == onNewCtx {
		// Authenticate first (401), then refuse what cannot name a
		// context (404; 422 where the request would create it) before
		// checking grants on it.
		if _, err := s.authenticate(r); err != nil {
			return err
		}
		id, err := ctxParam(r)
		if err != nil {
			if on == onNewCtx {
				err = badContextID()
			}
			return err
		}
		on = id
	}
	return s.authorize(r, rt.scope, on)
}

// singleParams refuses a query that gives a parameter twice: every
// parameter of the API takes one value, and acting on the first of two
// (limit=5&limit=5000) would act on what the client may not have meant.
func singleParams(r *http.Request) error {
	q := r.URL.Query()
	names := make([]string, 0, len(q))
	for name, vs := range q {
		if len(vs) > 1 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	e := &Error{Code: CodeInvalidQuery, Detail: fmt.Sprintf("query parameter %s is given %d times; give each parameter once", quoteJSON(names[0]), len(q[names[0]]))}
	for _, n := range names {
		e.Errors = append(e.Errors, FieldError{Parameter: n, Rule: "single", Detail: "given more than once"})
	}
	return e
}

// recoverer turns a handler panic into a logged 500 problem. Tests assert
// that it never fires (Server.Panics).
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			s.panics.Add(1)
			s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", rec, "stack", string(debug.Stack()))
			if ww.Status() == 0 {
				s.writeError(ww, r, &Error{Code: CodeInternal})
			}
		}()
		next.ServeHTTP(ww, r)
	})
}

// logRequests logs one line per request and counts it.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		next.ServeHTTP(ww, r)
		d := time.Since(start)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.request(status, d)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
			slog.Duration("duration", d), slog.String("remote", r.RemoteAddr))
	})
}

// marshal is service.Marshal: JSON without HTML escaping, so canonical
// JSON in json.RawMessage fields is written byte for byte.
func marshal(v any) ([]byte, error) { return service.Marshal(v) }

// writeJSON writes v as a JSON response.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	raw, err := marshal(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

// jsonStream is a JSON response of a read written a piece at a time (a
// deep audit is tens of megabytes, a comparison of two big runs hundreds,
// which a whole Marshal would hold two or three times over).
type jsonStream func(io.Writer) error

// writeStream answers 200 with the JSON write writes (nothing for HEAD,
// whose body net/http drops).
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, write jsonStream) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if err := write(w); err != nil {
		// The status is sent; the client sees a cut body (and no final
		// chunk), which is all that is left to tell it.
		s.log.Warn("response cut", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}

// textBody is a non-JSON response of a read (Mermaid, DOT, Markdown).
type textBody struct {
	contentType string
	text        string
}

// etagFor is the ETag of a read: xxhash of the commit it reflects and the
// request's path and query. A new commit or a different query gives a new
// tag; the same read at the same commit gives the same one.
func etagFor(commit hashing.Digest, r *http.Request, salt string) string {
	h := xxhash.New()
	_, _ = h.Write(commit[:])
	_, _ = h.WriteString(salt)
	_, _ = h.WriteString(r.URL.Path)
	_, _ = h.WriteString("?")
	_, _ = h.WriteString(r.URL.RawQuery)
	return `"` + strconv.FormatUint(h.Sum64(), 16) + `"`
}

// Cache-Control of reads. A read at a full commit id, whose answer the
// commit fixes, never changes: it may be kept. Any other read — at a
// branch, which moves, at a prefix, which a later commit can make
// ambiguous, or of more than a commit (the branches, the clock, the type
// registry) — may be kept only on the condition that it is revalidated
// with its ETag. Both are private: a token's read is not another's.
const (
	cacheFixed  = "private, max-age=31536000, immutable"
	cacheMoving = "private, no-cache"
)

// setCache sets the Cache-Control of a read (cacheFixed when fixed).
// writeError replaces it with no-store.
func setCache(w http.ResponseWriter, fixed bool) {
	if fixed {
		w.Header().Set("Cache-Control", cacheFixed)
		return
	}
	w.Header().Set("Cache-Control", cacheMoving)
}

// fixedRef reports whether ref names commit id by its full id, rather
// than as a branch or a prefix.
func fixedRef(ref string, id hashing.Digest) bool {
	p, err := hashing.HexPrefix(ref)
	return err == nil && p == id.Hex()
}

// Preconditions evaluates the conditional headers of a read that has a
// representation to answer with, tagged etag ("" for a read that sends no
// ETag), in the order of RFC 9110 §13.2.2: If-Match first — false is a
// *fault.Error of code precondition-failed (412) naming the parameter
// If-Match, rule matches_etag, and If-None-Match is then not evaluated —
// then If-None-Match, NotModified (304) when it names etag or is "*" (a
// read with an ETag only). nil: answer 200. A read calls it only once it
// knows it has a representation: "*" in either header matches any
// current one (RFC 9110 §13.1.1, §13.1.2), not a 404, and a read that
// would answer 4xx keeps that answer (§13.2.1). A read that learns that
// later asks notModifiedEarly first, and respondRead calls this. It is
// the one evaluation of these headers: the web UI's assets call it too.
func Preconditions(r *http.Request, etag string) error {
	if vs := r.Header.Values("If-Match"); len(vs) > 0 && strings.TrimSpace(strings.Join(vs, ",")) != "*" && !strongListed(vs, etag) {
		return &Error{Code: CodePreconditionFailed, Detail: "If-Match names no entity tag of the current representation (compared strongly: a W/ tag never matches); read it without If-Match for its ETag",
			Errors: []FieldError{{Parameter: "If-Match", Rule: "matches_etag", Detail: "want the ETag of the current representation, or *"}}}
	}
	if etag != "" && inmHas(r, func(t string) bool { return t == etag || t == "*" }) {
		return NotModified{}
	}
	return nil
}

// notModifiedEarly reports whether a read may answer 304 before it knows
// whether it has a representation: If-None-Match names etag itself and
// If-Match, if sent, lists it. "*" in either waits for the read, as does
// an If-Match that lists no etag (412 only for a representation).
func notModifiedEarly(r *http.Request, etag string) bool {
	vs := r.Header.Values("If-Match")
	return inmHas(r, func(t string) bool { return t == etag }) && (len(vs) == 0 || strongListed(vs, etag))
}

// strongListed reports whether the If-Match lines vs, one list, name etag
// by strong comparison (RFC 9110 §8.8.3.2): the same opaque tag, neither
// weak. An empty list names nothing, and nothing names "" (no ETag).
func strongListed(vs []string, etag string) bool {
	if etag == "" || strings.HasPrefix(etag, "W/") {
		return false
	}
	for _, v := range vs {
		for _, t := range strings.Split(v, ",") {
			if strings.TrimSpace(t) == etag {
				return true
			}
		}
	}
	return false
}

// inmHas reports whether an entity tag of If-None-Match (weak or strong)
// passes match. The header's lines are one comma-separated list (RFC 9110
// §5.3), as If-Match's are (strongListed): a tag on a second line counts
// as one on the first. It is the one place If-None-Match is read, so
// notModifiedEarly and Preconditions agree.
func inmHas(r *http.Request, match func(string) bool) bool {
	for _, v := range r.Header.Values("If-None-Match") {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" && match(strings.TrimPrefix(t, "W/")) {
				return true
			}
		}
	}
	return false
}

// NotModified is what Preconditions returns for a read whose ETag
// If-None-Match names: answer 304 with the ETag and no body.
type NotModified struct{}

// Error says that the representation was not modified.
func (NotModified) Error() string { return "not modified" }

// readView runs fn on the state at ?at= of context {ctx}. It sets the
// ETag from the view's commit and answers 304 when If-None-Match names it
// and If-Match allows (without running fn); otherwise, once fn succeeded,
// 412 when If-Match is false and 304 when If-None-Match matches
// (Preconditions; what fn reads may not exist: a 404 stays one). fn runs under the store's read lock for a branch
// head, so it must not block; what it returns (a JSON value or a textBody)
// is written after the lock is released.
func (s *Server) readView(w http.ResponseWriter, r *http.Request, fn func(v *store.View) (any, error)) {
	s.readViewSalted(w, r, nil, fn)
}

// readViewSalted is readView with extra ETag input, for responses that
// depend on more than the viewed commit: salt returns, from the view,
// all the rest that the response depends on (the branches, which leases
// have passed), and runs first under the same lock as fn. Such a
// response is revalidated at any ref.
func (s *Server) readViewSalted(w http.ResponseWriter, r *http.Request, salt func(v *store.View) (string, error), fn func(v *store.View) (any, error)) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	at := r.URL.Query().Get("at")
	if err := service.CheckRef("at", at); err != nil {
		s.writeError(w, r, err)
		return
	}
	var out any
	var etag string
	err = s.st.Read(r.Context(), ctxID, at, func(v *store.View) error {
		extra := ""
		if salt != nil {
			var serr error
			if extra, serr = salt(v); serr != nil {
				return serr
			}
		}
		etag = etagFor(v.Commit.ID, r, extra)
		setCache(w, salt == nil && fixedRef(at, v.Commit.ID))
		if notModifiedEarly(r, etag) {
			return NotModified{}
		}
		var ferr error
		out, ferr = fn(v)
		return ferr
	})
	s.respondRead(w, r, etag, out, service.NameRef(err, "at"))
}

// respondRead writes the outcome of a read: 304 for NotModified, and
// for a read that succeeded (with an ETag, or "" for none) what its
// conditional headers say (Preconditions: 412 or 304), else 200.
func (s *Server) respondRead(w http.ResponseWriter, r *http.Request, etag string, out any, err error) {
	if err == nil {
		err = Preconditions(r, etag)
	}
	if _, ok := err.(NotModified); ok {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if write, ok := out.(jsonStream); ok {
		s.writeStream(w, r, write)
		return
	}
	if tb, ok := out.(textBody); ok {
		w.Header().Set("Content-Type", tb.contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(tb.text))
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
