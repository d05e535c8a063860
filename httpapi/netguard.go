package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// The network guards: the checks every request passes before it is
// routed, in this order.
//
//  1. X-Content-Type-Options: nosniff is set, so every answer carries it
//     (JSON, problems, text exports, the UI).
//  2. A request on a reserve connection (LimitListener, when the
//     connection cap is reached) may only ask /healthz or /readyz; anything
//     else gets 503 overloaded with Retry-After, and the connection closes.
//  3. A request line and headers over MaxHeaderBytes → 431.
//  4. An open server (no tokens) answers only loopback Host values → 421.
//  5. A write marked cross-site or same-site by the browser (Origin,
//     Sec-Fetch-Site) from an origin not in AllowOrigins → 403.
//  6. A query that does not decode (bad percent-encoding) → 400.
//  7. A body sent with a Content-Encoding other than identity → 415: no
//     route decodes gzip or any other coding, and a blob stored from a
//     compressed body would hold bytes its sender did not mean.
//  8. A body over LargeBodyBytes (or of unknown length) takes one of
//     MaxLargeBodies slots, or gets 503 with Retry-After; every body must
//     arrive within BodyTimeout (408 otherwise). A handler beside the API
//     that reads bodies of its own (serve's /mcp) gets the same through
//     GuardBody; the requests it then makes of the API in this process,
//     with bytes already read, are marked (WithBodyInMemory) and take
//     neither again.
//
// Every refusal of a request whose body was not read to its end closes the
// connection (Connection: close) instead of draining the body, so a client
// that never finishes its body holds nothing once it is answered.

// initGuards sets the guard settings from opts, with their defaults.
func (s *Server) initGuards(opts Options) {
	s.allowOrigins = map[string]bool{}
	for _, o := range opts.AllowOrigins {
		s.allowOrigins[strings.TrimSuffix(o, "/")] = true
	}
	s.allowHosts = map[string]bool{}
	for _, h := range opts.AllowHosts {
		s.allowHosts[strings.ToLower(h)] = true
	}
	s.bodyTimeout = opts.BodyTimeout
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	s.largeBody = opts.LargeBodyBytes
	if s.largeBody <= 0 {
		s.largeBody = DefaultLargeBodyBytes
	}
	n := opts.MaxLargeBodies
	if n <= 0 {
		n = DefaultMaxLargeBodies
	}
	s.largeBodies = make(chan struct{}, n)
	s.maxHeader = opts.MaxHeaderBytes
	if s.maxHeader <= 0 {
		s.maxHeader = DefaultMaxHeaderBytes
	}
}

// ParseOrigin checks a browser origin given to serve --allow-origin:
// scheme http or https, a host, an optional port, nothing else. It returns
// the origin as browsers send it (no trailing slash).
func ParseOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", o, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("origin %q: want scheme://host[:port], such as https://app.example", o)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// healthPaths are the only paths a reserve connection may ask.
var healthPaths = map[string]bool{"/healthz": true, "/readyz": true}

// netGuard runs the checks listed at the top of this file.
func (s *Server) netGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if reservedConn(r.Context()) && !healthPaths[r.URL.Path] {
			h.Set("Retry-After", "1")
			s.writeError(w, r, errorf(CodeOverloaded, "the server has reached its connection limit; only /healthz and /readyz are answered on this connection: retry"))
			return
		}
		if n := headerBytes(r); n > s.maxHeader {
			s.writeError(w, r, &Error{Code: CodeHeadersTooLarge,
				Detail: fmt.Sprintf("the request line and headers are %d bytes; the limit is %d", n, s.maxHeader)})
			return
		}
		if s.tokens.Len() == 0 && !s.hostAllowed(r.Host) {
			s.writeError(w, r, &Error{Code: CodeHostNotAllowed,
				Detail: fmt.Sprintf("this server has no tokens and answers only loopback Host values (127.0.0.1, [::1], localhost), not %q: a web page reaching it through DNS rebinding is refused. Use a loopback address, or configure tokens or serve --allow-host", r.Host),
				Errors: []FieldError{{Parameter: "Host", Rule: "loopback_host", Detail: "not a loopback address or localhost"}}})
			return
		}
		origin := r.Header.Get("Origin")
		allowed := origin != "" && s.allowOrigins[origin]
		if len(s.allowOrigins) > 0 {
			// The CORS headers depend on Origin: every answer says so,
			// or a cache could give an allowed origin's page an answer
			// made without them (or another page one made with them).
			h.Add("Vary", "Origin")
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", "ETag, Location, Retry-After")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", strings.Join(routeMethods, ", "))
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if isWrite(r.Method) && !allowed && crossSite(r) {
			what := "Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site")
			param := "Sec-Fetch-Site"
			if origin != "" {
				what, param = "Origin "+quoteJSON(origin), "Origin"
			}
			s.writeError(w, r, &Error{Code: CodeCrossOrigin,
				Detail: fmt.Sprintf("a write from another site (%s) is refused: a web page must not write through a user's browser. Allow the origin with serve --allow-origin", what),
				Errors: []FieldError{{Parameter: param, Rule: "same_origin", Detail: "not this server's origin and not allowed"}}})
			return
		}
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			s.writeError(w, r, &Error{Code: CodeInvalidQuery, Detail: "the query string does not decode: " + err.Error(),
				Errors: []FieldError{{Parameter: "query", Rule: "percent_encoding", Detail: err.Error()}}})
			return
		}
		if ce := contentCoding(r.Header); ce != "" {
			s.writeError(w, r, &Error{Code: CodeUnsupportedMedia,
				Detail: fmt.Sprintf("Content-Encoding %q is not accepted: send the body as it is (identity)", ce),
				Errors: []FieldError{{Parameter: "Content-Encoding", Rule: "identity", Detail: "only identity is accepted"}}})
			return
		}
		if hasBody(r) && !bodyInMemory(r.Context()) {
			rc, release, ok := s.holdBody(w, r)
			if !ok {
				return
			}
			defer release()
			r.Body = &trackedBody{ReadCloser: r.Body, atEOF: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether r comes with a body to read.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// holdBody takes r's large-body slot (largeBodySlot) and gives its body
// the API's read deadline (BodyTimeout); it returns the response
// controller that set the deadline and what frees the slot, or false when
// it answered 503 for want of a slot.
func (s *Server) holdBody(w http.ResponseWriter, r *http.Request) (*http.ResponseController, func(), bool) {
	release, ok := s.largeBodySlot(w, r)
	if !ok {
		return nil, nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) // unsupported on recorders
	return rc, release, true
}

// largeBodySlot takes one of the large-body slots for r when its body is
// large (over LargeBodyBytes, or of unknown length), and returns what
// frees it; when none is free it answers 503 overloaded with Retry-After
// and reports false.
func (s *Server) largeBodySlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	if r.ContentLength >= 0 && r.ContentLength <= s.largeBody {
		return func() {}, true
	}
	select {
	case s.largeBodies <- struct{}{}:
		return func() { <-s.largeBodies }, true
	default:
		w.Header().Set("Retry-After", "1")
		s.writeError(w, r, errorf(CodeOverloaded, "%d large request bodies (over %d bytes, or of unknown length) are being read already: retry", cap(s.largeBodies), s.largeBody))
		return nil, false
	}
}

// GuardBody puts next, a handler served beside the API that reads a
// request body of its own (serve's /mcp), behind the API's body guard
// (step 8 above): a large body takes one of the large-body slots the
// API's own bodies take, or is refused 503 overloaded with Retry-After,
// and the slot is held until next returns; the body, at most limit bytes,
// is read here, within BodyTimeout, and next reads it from memory. A body
// that does not arrive in time is refused 408, one over limit 413, as the
// API refuses them (problem+json; the connection closes).
//
// The requests next makes of the API in this process with the body it
// read (mcp.NewHandlerBackend's) should carry WithBodyInMemory, or each
// would take a second slot for the same bytes.
func (s *Server) GuardBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasBody(r) || bodyInMemory(r.Context()) {
			next.ServeHTTP(w, r)
			return
		}
		rc, release, ok := s.holdBody(w, r)
		if !ok {
			return
		}
		defer release()
		body, err := readBody(w, r, limit)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// bodyKey is the context key of WithBodyInMemory's mark.
type bodyKey struct{}

// WithBodyInMemory marks ctx as that of a request made in this process
// whose body is in memory already, read by a handler that took the
// large-body slot and the body deadline for it (GuardBody): the API's
// network guard takes neither for it again. Only a handler of this
// process can set it; no request from the network carries it.
func WithBodyInMemory(ctx context.Context) context.Context {
	return context.WithValue(ctx, bodyKey{}, true)
}

// bodyInMemory reports whether ctx carries WithBodyInMemory's mark.
func bodyInMemory(ctx context.Context) bool {
	v, _ := ctx.Value(bodyKey{}).(bool)
	return v
}

// contentCoding returns the request's Content-Encoding when it names a
// coding other than identity, else "".
func contentCoding(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return v
			}
		}
	}
	return ""
}

// headerBytes is the size of the request line and headers as sent.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n + len(r.Host) + 8
}

// hostAllowed reports whether an open server answers Host host: a
// loopback IP literal, "localhost", a name given in AllowHosts, or no Host
// at all (an in-process request).
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"))
	if name == "localhost" || s.allowHosts[name] || s.allowHosts[strings.ToLower(host)] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// isWrite reports whether method may change state.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// crossSite reports whether a browser marked the request as coming from
// another origin: an Origin that is not this server's (compared with the
// Host the request names), or Sec-Fetch-Site cross-site or same-site.
// Clients that are not browsers send neither and pass.
func crossSite(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host)
	}
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Site")) {
	case "cross-site", "same-site":
		return true
	}
	return false
}

// trackedBody is a request body that knows whether it was read to its
// end; at its end the body read deadline is lifted, so that a long
// handler is not cancelled by it.
type trackedBody struct {
	io.ReadCloser
	atEOF func()
	eof   atomic.Bool
}

// Read implements io.Reader.
func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && b.eof.CompareAndSwap(false, true) {
		b.atEOF()
	}
	return n, err
}

// bodyPending reports whether r has a body that was not read to its end
// (an answer to it then closes the connection rather than drain it).
func bodyPending(r *http.Request) bool {
	if !hasBody(r) {
		return false
	}
	if tb, ok := r.Body.(*trackedBody); ok {
		return !tb.eof.Load()
	}
	return true
}

// isTimeout reports whether err is a read deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
