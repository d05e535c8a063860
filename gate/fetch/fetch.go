package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/artifactd/artifactd/gate"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 8 << 20          // 8 MiB
	DefaultTimeout      = 15 * time.Second // the whole exchange, body included
	DefaultMaxRedirects = gate.MaxRedirects
	DefaultUserAgent    = "artifactd-gate/1 (+https://github.com/artifactd/artifactd)"
	// DefaultDialTimeout bounds one TCP connection attempt.
	DefaultDialTimeout = 10 * time.Second
	// maxHeaderBytes bounds the response headers.
	maxHeaderBytes = 1 << 20
)

// Resolver turns a host name into IP addresses. *net.Resolver implements
// it; tests inject a fake one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to address, an "ip:port" that the policy
// already allowed. (&net.Dialer{}).DialContext fits; tests inject a hook.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options configure New. The zero value is the production setup: the
// system resolver, the default policy and limits.
type Options struct {
	// Policy is the address policy (zero: global addresses only).
	Policy Policy
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver Resolver
	// Dial connects to a checked ip:port (a net.Dialer with
	// DefaultDialTimeout when nil).
	Dial DialFunc
	// MaxBodyBytes bounds the body read (DefaultMaxBodyBytes when <= 0).
	MaxBodyBytes int64
	// Timeout bounds the whole fetch, body included (DefaultTimeout when
	// <= 0).
	Timeout time.Duration
	// MaxRedirects is the most redirects followed (DefaultMaxRedirects when
	// <= 0).
	MaxRedirects int
	// UserAgent is sent with every request (DefaultUserAgent when empty).
	UserAgent string
	// TLSConfig, when set, is the TLS client configuration (tests trust
	// their own certificate with it).
	TLSConfig *tls.Config
}

// Fetcher fetches URLs under an address policy. It is safe for concurrent
// use; each Fetch is independent (no connection is reused).
type Fetcher struct {
	policy       Policy
	resolver     Resolver
	dial         DialFunc
	maxBody      int64
	timeout      time.Duration
	maxRedirects int
	userAgent    string
	transport    *http.Transport
}

// New returns a Fetcher with opts.
func New(opts Options) *Fetcher {
	f := &Fetcher{
		policy: opts.Policy, resolver: opts.Resolver, dial: opts.Dial,
		maxBody: opts.MaxBodyBytes, timeout: opts.Timeout, maxRedirects: opts.MaxRedirects, userAgent: opts.UserAgent,
	}
	if f.resolver == nil {
		f.resolver = net.DefaultResolver
	}
	if f.dial == nil {
		f.dial = (&net.Dialer{Timeout: DefaultDialTimeout}).DialContext
	}
	if f.maxBody <= 0 {
		f.maxBody = DefaultMaxBodyBytes
	}
	if f.timeout <= 0 {
		f.timeout = DefaultTimeout
	}
	if f.maxRedirects <= 0 {
		f.maxRedirects = DefaultMaxRedirects
	}
	if f.userAgent == "" {
		f.userAgent = DefaultUserAgent
	}
	f.transport = &http.Transport{
		// Never a proxy: it would connect on our behalf to addresses we
		// never checked.
		Proxy:                  nil,
		DialContext:            f.dialContext,
		TLSClientConfig:        opts.TLSConfig,
		ForceAttemptHTTP2:      true,
		DisableKeepAlives:      true,
		DisableCompression:     true, // forward the raw body; the classifier decodes it
		TLSHandshakeTimeout:    DefaultDialTimeout,
		ResponseHeaderTimeout:  f.timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	return f
}

// Policy returns the fetcher's address policy.
func (f *Fetcher) Policy() Policy { return f.policy }

// ErrURL marks a URL the fetcher cannot fetch at all (not absolute http or
// https, no host).
var ErrURL = errors.New("cannot fetch this URL")

// Fetch gets rawURL and returns what it saw as gate.Evidence: the redirect
// chain, the final URL, status, headers (lower-case names, values of a
// repeated header joined with ", ") and the raw body (at most MaxBodyBytes,
// still content-encoded), or the transport error text.
//
// The error is non-nil only when nothing may be fetched: the URL is not an
// absolute http(s) URL (ErrURL), or the policy refused an address of the
// URL or of a redirect target (a *BlockedError, errors.Is ErrBlocked); the
// evidence then holds what was seen before the refusal and must not be
// classified as if the fetch had happened. Transport failures — DNS errors,
// refused connections, timeouts, a body cut at the limit — are evidence,
// not errors: the classifier turns them into a FAILED verdict.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (gate.Evidence, error) {
	ev := gate.Evidence{URL: rawURL}
	u, err := checkURL(rawURL)
	if err != nil {
		return ev, err
	}
	// The timeout bounds the whole exchange, the first lookup included.
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := f.checkHost(ctx, u.Hostname()); err != nil {
		return ev, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return ev, fmt.Errorf("%w: %v", ErrURL, err)
	}
	req.Header.Set("User-Agent", f.userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")

	stoppedAt := ""
	client := &http.Client{
		Transport: f.transport,
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			prev := via[len(via)-1]
			status := 0
			if next.Response != nil {
				status = next.Response.StatusCode
			}
			ev.Redirects = append(ev.Redirects, gate.Redirect{URL: prev.URL.String(), Status: status})
			if _, err := checkURL(next.URL.String()); err != nil {
				return err
			}
			if len(ev.Redirects) > f.maxRedirects || visited(next.URL, via) {
				// Stop here and let the classifier name it from the
				// chain (transport.too_many_redirects or
				// transport.redirect_loop).
				stoppedAt = next.URL.String()
				return http.ErrUseLastResponse
			}
			return f.checkHost(next.Context(), next.URL.Hostname())
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		var be *BlockedError
		if errors.As(err, &be) {
			return ev, be
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.URL != "" {
			ev.FinalURL = ue.URL
		}
		ev.Error = errorText(err)
		return ev, nil
	}
	defer resp.Body.Close()
	if stoppedAt != "" {
		ev.FinalURL = stoppedAt
		return ev, nil
	}
	ev.FinalURL = resp.Request.URL.String()
	ev.Status = resp.StatusCode
	ev.Headers = flattenHeaders(resp.Header)
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBody+1))
	switch {
	case int64(len(body)) > f.maxBody:
		body = body[:f.maxBody]
		ev.Error = fmt.Sprintf("response body exceeds the %d-byte limit; the fetch was cut", f.maxBody)
	case err != nil:
		ev.Error = "reading the body: " + errorText(err)
	}
	ev.Body = body
	return ev, nil
}

// checkURL parses an absolute http or https URL with a host.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("%w: scheme %q (want http or https)", ErrURL, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q has no host", ErrURL, raw)
	}
	return u, nil
}

// visited reports whether u was already requested in this exchange.
func visited(u *url.URL, via []*http.Request) bool {
	s := u.String()
	for _, r := range via {
		if r.URL.String() == s {
			return true
		}
	}
	return false
}

// errorText is the transport error as the classifier should read it: the
// url.Error wrapper ("Get \"…\": ") is dropped, the cause is kept — but
// not what it says of this machine, which the evidence would carry to the
// agent: a connection's local address (net.OpError.Source) and the
// resolver a lookup asked (net.DNSError.Server).
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	text := err.Error()
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Source != nil {
		public := *oe
		public.Source = nil
		text = strings.Replace(text, oe.Error(), public.Error(), 1)
	}
	var de *net.DNSError
	if errors.As(err, &de) && de.Server != "" {
		public := *de
		public.Server = ""
		text = strings.Replace(text, de.Error(), public.Error(), 1)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout: " + text
	}
	return text
}

// flattenHeaders keeps one value per header name, lower-cased.
func flattenHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		out[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out
}

// resolve returns the addresses of host: the address itself for an IP
// literal, else what the resolver says.
func (f *Fetcher) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	addrs, err := f.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// checkHost resolves host and refuses it when any of its addresses is
// forbidden. A resolution failure is not a refusal: the dial will fail the
// same way and the evidence records it.
func (f *Fetcher) checkHost(ctx context.Context, host string) error {
	addrs, err := f.resolve(ctx, host)
	if err != nil {
		return nil
	}
	return f.checkAll(host, addrs)
}

func (f *Fetcher) checkAll(host string, addrs []netip.Addr) error {
	for _, a := range addrs {
		if err := Allowed(a, f.policy); err != nil {
			be := err.(*BlockedError)
			if _, lerr := netip.ParseAddr(host); lerr != nil {
				be.Host = host
			}
			return be
		}
	}
	return nil
}

// dialContext is the transport's only way out: it resolves the host,
// refuses the connection when any address is forbidden, dials only checked
// addresses, and checks the address it actually connected to again.
func (f *Fetcher) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", portText)
	}
	addrs, err := f.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := f.checkAll(host, addrs); err != nil {
		return nil, err
	}
	var firstErr error
	for _, a := range addrs {
		a = a.Unmap()
		if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6()) {
			continue
		}
		conn, err := f.dial(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
			if err := Allowed(ta.AddrPort().Addr(), f.policy); err != nil {
				conn.Close()
				return nil, err
			}
		}
		return conn, nil
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("no %s address for %s", network, host)
	}
	return nil, firstErr
}
