package web

import (
	"context"
	"errors"
	"fmt"
	"github.com/artifactd/artifactd/internal/lru"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/artifactd/artifactd/store"
)

// Options configure New.
type Options struct {
	// Store is the repository the pages read. Required.
	Store *store.Store
	// Logger receives internal errors; slog.Default() when nil.
	Logger *slog.Logger
	// Tokens, when set, turns authentication on: every page then needs a
	// token for which Tokens returns true (read access suffices). The UI
	// asks for it with a small form and keeps it in an HttpOnly,
	// SameSite=Strict cookie; an "Authorization: Bearer" header is
	// accepted too. Tokens must be safe for concurrent use.
	Tokens func(token string) bool
}

// server is the UI handler. It holds no mutable state of its own besides
// its caches (pictures, short texts, overviews), each keyed by immutable
// content and guarding itself.
type server struct {
	store  *store.Store
	log    *slog.Logger
	tokens func(string) bool
	pages  *pageSet
	assets *assetSet
	pics   *pictureCache
	// said caches the short texts of artifacts by content hash.
	said *saidCache
	// overviews caches clustered overviews by commit and grouping (the
	// overviewsKept most recently used).
	overviews *lru.Cache[string, *clusterSet]
	// tallies keeps, by context and grouping, the tally of the commit
	// whose overview was drawn last, from which another commit's is
	// derived (derivedTally), up to maxTallyBytes in all.
	tallies *lru.Cache[string, *keptTally]
	// derivations counts the tallies derivedTally made (tests read it).
	derivations atomic.Int64
	// chains caches first-parent commit chains by their head commit, and
	// steps what each commit changed; both are immutable per commit.
	chains *lru.Cache[string, *chain]
	steps  *lru.Cache[string, *stepSummary]
	// ids caches big states' artifact ids in natural order by commit
	// (sortedIDs): those of states of at least minListed artifacts
	// (minListedIDs; tests lower it), up to maxListedBytes in all.
	ids *lru.Cache[string, *listedIDs]
	// listedAt names, by context, the commit whose list ids kept last,
	// from which another commit's list is derived (derivedIDs).
	listedAt  *lru.Cache[string, string]
	minListed int
	// listings counts the lists of ids sortedIDs made by a pass over a
	// whole state (tests read it).
	listings atomic.Int64
	// textScan bounds how many artifacts' texts a search reads
	// (maxTextScan; tests lower it).
	textScan int
}

// New returns the read-only browser UI as an http.Handler meant to be
// mounted at "/". It serves the routes listed in ServeHTTP; every response
// carries the security headers of securityHeaders. New panics when
// opts.Store is nil or an embedded template does not parse (a build
// defect).
func New(opts Options) http.Handler {
	if opts.Store == nil {
		panic("web: Options.Store is nil")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &server{
		store:  opts.Store,
		log:    log,
		tokens: opts.Tokens,
		pages:  mustParsePages(),
		assets: mustLoadAssets(),
		pics:   newPictureCache(48 << 20),
		said:   newSaidCache(200_000),

		overviews: lru.New[string, *clusterSet](overviewsKept, nil),
		tallies:   lru.New[string](maxTallyBytes, tallyCost),
		chains:    lru.New[string, *chain](16, nil),
		steps:     lru.New[string, *stepSummary](4096, nil),
		ids:       lru.New[string](maxListedBytes, (*listedIDs).cost),
		listedAt:  lru.New[string, string](listedContexts, nil),
		minListed: minListedIDs,
		textScan:  maxTextScan,
	}
}

// Paths of the pages that do not belong to a context.
const (
	pathLogin   = "/ui/login"
	pathLogout  = "/ui/logout"
	pathCompare = "/ui/compare"
	prefixUI    = "/ui/"
	prefixCtx   = "/ui/contexts/"
	prefixAsst  = "/ui/assets/"
)

// ServeHTTP routes a request. The routes, all read-only GETs except the
// two auth forms:
//
//	/                                     contexts list (also /ui/; ?q=&page=)
//	/ui/compare                           two runs side by side (?a=&b=&a_at=&b_at=)
//	/ui/contexts/{ctx}                    one context: branches, log, artifact search
//	/ui/contexts/{ctx}/artifacts/{id}     one artifact: data, history, edges, trust, receipt
//	                                      (also …/artifacts/?id=, used for the ids "." and "..")
//	/ui/contexts/{ctx}/graph              provenance picture: overview, or ?root= neighbourhood
//	                                      (?up=&down=&expand=&path=&group=&find=; older ?dir=&depth=)
//	/ui/contexts/{ctx}/quarantine         poison roots and what they quarantine
//	/ui/contexts/{ctx}/diff               what changed between two commits (?from=&to=)
//	/ui/contexts/{ctx}/audit/{id}         audit report with Markdown and Mermaid (the nearest
//	                                      1,000 artifacts of a bigger one; ?format=json|markdown:
//	                                      the whole report, as a download)
//	/ui/assets/{file}                     embedded CSS and JS
//	/ui/login, /ui/logout                 token form (only when Options.Tokens is set)
//
// Every page takes ?at= (a branch, a commit id or a prefix of at least 8
// hex digits); every context page also takes ?step=N (&on=branch), the
// time-travel form, answered with a redirect to the same page at the Nth
// commit of the branch (handleStep). Paths are split on their escaped form, so an artifact id
// may hold any character, "/" included, written %2F.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	r = r.WithContext(context.WithValue(r.Context(), startKey{}, time.Now()))
	path := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(path, prefixAsst):
		s.handleAsset(w, r, strings.TrimPrefix(path, prefixAsst))
		return
	case path == pathLogin:
		s.handleLogin(w, r)
		return
	case path == pathLogout:
		s.handleLogout(w, r)
		return
	}
	if !s.authorized(r) {
		s.requireLogin(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.problem(w, r, &problem{Code: codeMethodNotAllowed, Detail: "the UI is read-only"})
		return
	}
	switch {
	case path == "/" || path == "/ui" || path == prefixUI || path == "/ui/contexts" || path == prefixCtx:
		s.handleContexts(w, r)
		return
	case path == pathCompare:
		s.handleCompare(w, r)
		return
	case strings.HasPrefix(path, prefixCtx):
		s.routeContext(w, r, strings.TrimPrefix(path, prefixCtx))
		return
	}
	s.problem(w, r, &problem{Code: codeNotFound, Detail: "no page at this address"})
}

// routeContext dispatches /ui/contexts/{ctx}/… ; rest is the escaped path
// after the prefix.
func (s *server) routeContext(w http.ResponseWriter, r *http.Request, rest string) {
	seg, sub, _ := strings.Cut(rest, "/")
	ctxID, err := url.PathUnescape(seg)
	if err != nil || store.ValidateContextID(ctxID) != nil {
		s.problem(w, r, &problem{Code: codeNotFound, Detail: "no such context"})
		return
	}
	page, arg, _ := strings.Cut(sub, "/")
	if s.handleStep(w, r, ctxID, page) {
		return
	}
	switch page {
	case "":
		s.handleContext(w, r, ctxID)
		return
	case "graph":
		if arg == "" {
			s.handleGraph(w, r, ctxID)
			return
		}
	case "quarantine":
		if arg == "" {
			s.handleQuarantine(w, r, ctxID)
			return
		}
	case "diff":
		if arg == "" {
			s.handleDiff(w, r, ctxID)
			return
		}
	case "artifacts", "audit":
		id, err := url.PathUnescape(arg)
		if arg == "" {
			id = r.URL.Query().Get("id") // the form used for "." and ".."
		}
		if err != nil || id == "" {
			break
		}
		if page == "artifacts" {
			s.handleArtifact(w, r, ctxID, id)
		} else {
			s.handleAudit(w, r, ctxID, id)
		}
		return
	}
	s.problem(w, r, &problem{Code: codeNotFound, Detail: "no page at this address"})
}

// startKey keys the time a request arrived in its context; render reports
// the time since as a Server-Timing header ("app;dur=<ms>").
type startKey struct{}

// serverTiming sets the Server-Timing header of a page: the milliseconds
// from the request's arrival to its rendered body.
func serverTiming(h http.Header, r *http.Request) {
	if t, ok := r.Context().Value(startKey{}).(time.Time); ok {
		h.Set("Server-Timing", "app;dur="+strconv.FormatFloat(float64(time.Since(t).Microseconds())/1000, 'f', 1, 64))
	}
}

// contentSecurityPolicy allows only this UI's own stylesheet and script;
// nothing inline, nothing from elsewhere, no framing, no <base>, forms only
// to this origin.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders sets the headers every UI response carries.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// storeProblem maps a store or graph error to the problem shown to the
// user. what names the thing looked up ("context", "commit or branch"…).
func storeProblem(err error, what string) *problem {
	var both *store.BranchOrCommitError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &problem{Code: codeNotFound, Detail: "no such " + what, Err: err}
	case errors.As(err, &both):
		return &problem{Code: codeAmbiguousRef, Detail: fmt.Sprintf("%s is both a branch (at %s) and a prefix of commit %s; give sha256:%s for the commit, or the branch's head %s", both.Ref, both.Head.Short(), both.Commit.Short(), both.Ref, both.Head.Short()), Err: err}
	case errors.Is(err, store.ErrAmbiguous):
		return &problem{Code: codeAmbiguousRef, Detail: "the commit prefix matches more than one commit; give more digits", Err: err}
	case errors.Is(err, store.ErrInvalid):
		return &problem{Code: codeInvalidQuery, Detail: "invalid " + what, Err: err}
	}
	return &problem{Code: codeInternal, Err: err}
}
