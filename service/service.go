package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/internal/lru"
	"github.com/artifactd/artifactd/store"
)

// Options configure New.
type Options struct {
	// Store is the repository served. Required.
	Store *store.Store
	// Types is the type registry: what writes validate their data
	// against and record in the chain (trust reads each type's role from
	// the definitions the chain holds, not from the registry). Pass one
	// already loaded (Registry.Load), shared by every door of the
	// process. When nil, New makes one and loads it from Store (an error
	// is logged, and the registry then knows the built-in types only).
	Types *Registry
	// Logger receives the warnings of the use cases; slog.Default() when
	// nil.
	Logger *slog.Logger
	// AllowFetch lets RecordFetch with Perform fetch a URL itself. Off by
	// default.
	AllowFetch bool
	// Fetcher performs those fetches; RecordFetch with Perform is refused
	// (403) when it is nil. The door supplies one (gate/fetch), since
	// fetching is I/O this layer does not do itself.
	Fetcher Fetcher
	// Render, when set, renders UNKNOWN extraction.script_shell verdicts in
	// a browser and classifies the rendered page.
	Render Renderer
	// Sanitize tunes tool-result sanitising; the zero value is
	// gate.DefaultSanitizeOptions. Its Secrets are masked by value in
	// model views, full-output blobs, fetched text and effect errors;
	// AddSecrets adds more.
	Sanitize gate.SanitizeOptions
	// GateRules is the ruleset new fetch verdicts are classified with;
	// gate.BuiltinRules when nil. Verdicts are checked against the ruleset
	// their receipt names: the built-in ones and GateRules.
	GateRules *gate.Rules
	// Clock gives the outbox its time (leases, created_at); time.Now when
	// nil. It never reaches a fetch verdict.
	Clock func() time.Time
	// LeaseKey is the secret from which effect lease tokens are derived
	// (an HMAC key of at least 32 bytes). Keep it across restarts so that
	// leases survive them; when nil, New draws a random one and leases end
	// with the process.
	LeaseKey []byte
}

// Service is the use cases over one store: writes with the client's rules,
// the gate's recording of fetches and tool results, the outbox, the type
// and relation registry, verify, compare and the trust reports. Every door
// (HTTP, the browser UI, the CLI, the MCP server) calls it, so a rule holds
// whichever door a request came through. Its errors are *fault.Error
// values or errors that Classify maps. Methods are safe for concurrent use.
type Service struct {
	st         *store.Store
	types      *Registry
	log        *slog.Logger
	allowFetch bool
	fetcher    Fetcher
	render     Renderer
	clock      func() time.Time
	rules      *gate.Rules    // the ruleset new verdicts use
	rulesets   *gate.Rulesets // the rulesets a verdict may name; read-only after New
	leaseKey   []byte

	// secretsMu guards sanitize (its Secrets grow by AddSecrets).
	secretsMu sync.RWMutex
	sanitize  gate.SanitizeOptions

	commits, noops atomic.Int64

	// evals keeps the evaluation made last of each context (Eval), up
	// to maxEvalBytes in all; evalDerivations counts those Eval derived
	// from one kept (tests read it).
	evals           *lru.Cache[string, *keptEval]
	evalDerivations atomic.Int64

	// validated, when a test sets it, runs after a write has validated
	// its data and before it decides the definitions its commit records.
	validated func()
	// claiming, when a test sets it, runs each round of a claim after
	// the claim read its pool and before it commits.
	claiming func()
	// finishing, when a test sets it, runs twice each round of a complete
	// or fail: before the round reads the effect (read false), and after
	// it has read it and checked the lease, before it commits (read true).
	finishing func(read bool)
}

// New returns the service over opts.Store.
func New(opts Options) *Service {
	s := &Service{
		st: opts.Store, types: opts.Types, log: opts.Logger,
		allowFetch: opts.AllowFetch, fetcher: opts.Fetcher, render: opts.Render,
		sanitize: opts.Sanitize, clock: opts.Clock, rules: opts.GateRules,
		rulesets: gate.BuiltinRulesets(), leaseKey: opts.LeaseKey,
		evals: lru.New[string](maxEvalBytes, evalCost),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.rules == nil {
		s.rules = gate.BuiltinRules()
	}
	if err := s.rulesets.Add(s.rules); err != nil {
		// A ruleset named like a built-in one but different: serve refuses
		// such a file before New; keep the built-in default.
		s.log.Error("gate ruleset refused", "err", err)
		s.rules = gate.BuiltinRules()
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if len(s.leaseKey) == 0 {
		s.leaseKey = make([]byte, 32)
		_, _ = rand.Read(s.leaseKey)
	}
	if s.types == nil {
		s.types = NewRegistry()
		if err := s.types.Load(context.Background(), s.st); err != nil {
			s.log.Error("load type registry", "err", err)
		}
	}
	return s
}

// Store returns the store the service works on.
func (s *Service) Store() *store.Store { return s.st }

// Types returns the type and relation registry.
func (s *Service) Types() *Registry { return s.types }

// Writes returns how many writes committed and how many were no-ops,
// since New.
func (s *Service) Writes() (commits, noops int64) { return s.commits.Load(), s.noops.Load() }

// sanitizeOptions returns the current sanitising options (with every
// declared secret).
func (s *Service) sanitizeOptions() gate.SanitizeOptions {
	s.secretsMu.RLock()
	defer s.secretsMu.RUnlock()
	return s.sanitize
}

// AddSecrets declares more secret values (see gate.NewSecrets for the
// rules) and returns how many of them were new and how many distinct
// values are declared now. Values live in memory. The error is a 422
// *fault.Error naming the index of a refused value, never the value.
func (s *Service) AddSecrets(values []string) (added, declared int, err error) {
	s.secretsMu.Lock()
	defer s.secretsMu.Unlock()
	before := s.sanitize.Secrets.Len()
	next, err := s.sanitize.Secrets.Add(values...)
	if err != nil {
		return 0, 0, Classify(err)
	}
	s.sanitize.Secrets = next
	return next.Len() - before, next.Len(), nil
}

// Marshal encodes v as JSON without HTML escaping, so that canonical JSON
// held in json.RawMessage fields (artifact data, edge attrs) is written
// byte for byte. The result ends with a newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return buf.Bytes(), nil
}
