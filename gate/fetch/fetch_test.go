package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
)

// No test here connects to anything but loopback. Private, link-local and
// metadata targets are reached only through fakeResolver, and the dial
// hooks fail the test if asked for a forbidden address: the policy must
// refuse before any dial.

// fakeResolver maps host names to addresses.
type fakeResolver struct {
	mu    sync.Mutex
	names map[string][]string
	// answers, when set for a name, are returned in turn (DNS rebinding).
	answers map[string][][]string
	calls   map[string]int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	list, ok := r.names[host]
	if seq, rebind := r.answers[host]; rebind {
		i := min(r.calls[host], len(seq)-1)
		list, ok = seq[i], true
	}
	r.calls[host]++
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// guardedDial returns a dial hook that fails the test if it is asked for an
// address the default policy forbids, and otherwise connects as route
// says: route maps the "ip:port" asked for to a real loopback listener
// address, and the connection then reports the address asked for as its
// remote address (a stand-in for a public server). Unrouted addresses
// fail. It counts its calls.
func guardedDial(t *testing.T, policy Policy, route map[string]string, calls *atomic.Int32) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		calls.Add(1)
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			t.Errorf("dial hook got %q, not an ip:port", address)
			return nil, err
		}
		if err := Allowed(ap.Addr(), policy); err != nil {
			t.Errorf("dial hook called for a forbidden address %s: %v", address, err)
			return nil, err
		}
		to, ok := route[address]
		if !ok {
			return nil, fmt.Errorf("test dial: no route to %s", address)
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, network, to)
		if err != nil {
			return nil, err
		}
		return remoteAs{conn, net.TCPAddrFromAddrPort(ap)}, nil
	}
}

// remoteAs is a connection that reports another remote address.
type remoteAs struct {
	net.Conn
	remote net.Addr
}

func (c remoteAs) RemoteAddr() net.Addr { return c.remote }

// counting serves h and counts requests.
func counting(h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	return ts, &n
}

func article(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, "<!doctype html><html><head><title>Prices</title></head><body><article><p>"+
		strings.Repeat("Item 42 costs 19.99 USD in every store this week. ", 8)+"</p></article></body></html>")
}

func mustBlocked(t *testing.T, err error, class Class) *BlockedError {
	t.Helper()
	var be *BlockedError
	if !errors.As(err, &be) || !errors.Is(err, ErrBlocked) {
		t.Fatalf("error %v (%T), want a *BlockedError", err, err)
	}
	if be.Class != class {
		t.Fatalf("blocked as %s, want %s: %v", be.Class, class, be)
	}
	return be
}

// TestFakeResolverForbiddenTargets: names that resolve to forbidden
// addresses are refused after resolution, before any dial.
func TestFakeResolverForbiddenTargets(t *testing.T) {
	cases := map[string]struct {
		addrs []string
		class Class
	}{
		"ten.example":       {[]string{"10.0.0.1"}, ClassPrivate},
		"rfc1918.example":   {[]string{"172.16.5.4"}, ClassPrivate},
		"home.example":      {[]string{"192.168.1.1"}, ClassPrivate},
		"cgnat.example":     {[]string{"100.64.0.1"}, ClassShared},
		"ula.example":       {[]string{"fc00::1"}, ClassPrivate},
		"metadata.example":  {[]string{"169.254.169.254"}, ClassMetadata},
		"imds6.example":     {[]string{"fd00:ec2::254"}, ClassMetadata},
		"linklocal.example": {[]string{"169.254.10.10"}, ClassLinkLocal},
		"ll6.example":       {[]string{"fe80::1"}, ClassLinkLocal},
		"zero.example":      {[]string{"0.0.0.0"}, ClassUnspecified},
		"zeronet.example":   {[]string{"0.0.0.7"}, ClassThisNetwork},
		"mcast.example":     {[]string{"224.0.0.251"}, ClassMulticast},
		"mapped.example":    {[]string{"::ffff:10.1.2.3"}, ClassPrivate},
		"nat64.example":     {[]string{"64:ff9b::a9fe:a9fe"}, ClassMetadata},
		"loop.example":      {[]string{"127.0.0.1"}, ClassLoopback},
		// One bad address among good ones refuses the host.
		"mixed.example": {[]string{"8.8.8.8", "10.0.0.1"}, ClassPrivate},
	}
	res := &fakeResolver{names: map[string][]string{}}
	for name, c := range cases {
		res.names[name] = c.addrs
	}
	var dials atomic.Int32
	f := New(Options{Resolver: res, Dial: guardedDial(t, Policy{}, nil, &dials)})
	for name, c := range cases {
		for _, u := range []string{"http://" + name + "/x", "https://" + name + ":8443/y"} {
			_, err := f.Fetch(t.Context(), u)
			be := mustBlocked(t, err, c.class)
			if be.Host != name {
				t.Errorf("%s: host %q", u, be.Host)
			}
		}
	}
	// Literal addresses never reach the resolver.
	for _, u := range []string{"http://10.0.0.1/", "http://[fd00:ec2::254]/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:80/"} {
		if _, err := f.Fetch(t.Context(), u); !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d dials", n)
	}
}

// TestRedirectToForbiddenRefused: a public host (a loopback listener the
// dial hook presents as 8.8.8.8) redirects to private, loopback and
// metadata addresses; each redirect is refused before it is followed.
func TestRedirectToForbiddenRefused(t *testing.T) {
	inner, innerHits := counting(article)
	defer inner.Close()
	innerURL, _ := url.Parse(inner.URL)
	targets := []struct {
		location string
		class    Class
	}{
		{"http://internal.example/secret", ClassPrivate},
		{"http://" + innerURL.Host + "/", ClassLoopback},
		{"http://localhost:" + innerURL.Port() + "/", ClassLoopback},
		{"http://169.254.169.254/latest/meta-data/iam/", ClassMetadata},
		{"http://[fd00:ec2::254]/", ClassMetadata},
	}
	outer, outerHits := counting(func(w http.ResponseWriter, r *http.Request) {
		var i int
		fmt.Sscanf(r.URL.Path, "/go/%d", &i)
		http.Redirect(w, r, targets[i].location, http.StatusFound)
	})
	defer outer.Close()
	outerAddr := strings.TrimPrefix(outer.URL, "http://")
	res := &fakeResolver{names: map[string][]string{
		"public.example":   {"8.8.8.8"},
		"internal.example": {"10.0.0.1"},
		"localhost":        {"127.0.0.1", "::1"},
	}}
	var dials atomic.Int32
	f := New(Options{Resolver: res, Dial: guardedDial(t, Policy{}, map[string]string{"8.8.8.8:80": outerAddr}, &dials)})
	for i, tg := range targets {
		_, err := f.Fetch(t.Context(), fmt.Sprintf("http://public.example/go/%d", i))
		mustBlocked(t, err, tg.class)
	}
	if outerHits.Load() != int32(len(targets)) || innerHits.Load() != 0 {
		t.Fatalf("outer hit %d times, inner %d", outerHits.Load(), innerHits.Load())
	}
	if dials.Load() != int32(len(targets)) {
		t.Fatalf("%d dials, want one per fetch", dials.Load())
	}
}

// TestRebinding: the name resolves to a public address when checked and
// to a private one when dialled; the dialer's own check refuses it.
func TestRebinding(t *testing.T) {
	res := &fakeResolver{answers: map[string][][]string{"rebind.example": {{"8.8.8.8"}, {"10.0.0.1"}}}}
	var dials atomic.Int32
	f := New(Options{Resolver: res, Dial: guardedDial(t, Policy{}, nil, &dials)})
	_, err := f.Fetch(t.Context(), "http://rebind.example/")
	mustBlocked(t, err, ClassPrivate)
	if dials.Load() != 0 {
		t.Fatalf("%d dials", dials.Load())
	}
}

// TestConnectedAddressChecked: the connection's actual remote address is
// checked too (here the hook's connection claims to come from 10.0.0.9).
func TestConnectedAddressChecked(t *testing.T) {
	ts, hits := counting(article)
	defer ts.Close()
	res := &fakeResolver{names: map[string][]string{"public.example": {"8.8.8.8"}}}
	f := New(Options{Resolver: res, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, strings.TrimPrefix(ts.URL, "http://"))
		if err != nil {
			return nil, err
		}
		return remoteAs{c, &net.TCPAddr{IP: net.ParseIP("10.0.0.9"), Port: 80}}, nil
	}})
	_, err := f.Fetch(t.Context(), "http://public.example/")
	mustBlocked(t, err, ClassPrivate)
	if hits.Load() != 0 {
		t.Fatal("a request was sent over a refused connection")
	}
}

// TestLoopbackRefusedLive: with the default policy, 127.0.0.1, [::1] and
// localhost are refused (system resolver), and a local listener that
// redirects to another loopback port is refused at its first hop.
func TestLoopbackRefusedLive(t *testing.T) {
	ts, hits := counting(article)
	defer ts.Close()
	port := strings.TrimPrefix(ts.URL, "http://127.0.0.1:")
	redir, redirHits := counting(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, ts.URL+"/", http.StatusFound) })
	defer redir.Close()
	f := New(Options{})
	for _, u := range []string{ts.URL + "/", "http://[::1]:" + port + "/", "http://localhost:" + port + "/", redir.URL + "/"} {
		_, err := f.Fetch(t.Context(), u)
		mustBlocked(t, err, ClassLoopback)
	}
	if hits.Load() != 0 || redirHits.Load() != 0 {
		t.Fatalf("requests reached the listeners: %d, %d", hits.Load(), redirHits.Load())
	}
}

func TestBadURL(t *testing.T) {
	f := New(Options{Dial: func(context.Context, string, string) (net.Conn, error) {
		t.Error("dial")
		return nil, errors.New("no")
	}})
	for _, u := range []string{"ftp://example.com/x", "file:///etc/passwd", "gopher://x", "/relative", "http://", "://x", "javascript:alert(1)"} {
		if _, err := f.Fetch(t.Context(), u); !errors.Is(err, ErrURL) {
			t.Errorf("%q: %v", u, err)
		}
	}
}

// loopbackFetcher may fetch local test servers.
func loopbackFetcher(opts Options) *Fetcher {
	opts.Policy = Policy{AllowLoopback: true}
	return New(opts)
}

// TestFetchLoopbackAllowed: with the test-only loopback policy a local
// server is fetched for real and the evidence classifies as expected.
func TestFetchLoopbackAllowed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/article", article)
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusMovedPermanently) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/article", http.StatusFound) })
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			t.Errorf("Accept-Encoding %q", r.Header.Get("Accept-Encoding"))
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		fmt.Fprint(zw, `{"price": 19.99}`)
		zw.Close()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(b.Bytes())
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/forbidden", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write(bytes.Repeat([]byte("x"), 5000)) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/loop1", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop2", http.StatusFound) })
	mux.HandleFunc("/loop2", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop1", http.StatusFound) })
	var hops atomic.Int32
	mux.HandleFunc("/hop/", func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		var i int
		fmt.Sscanf(r.URL.Path, "/hop/%d", &i)
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", i+1), http.StatusFound)
	})
	mux.HandleFunc("/ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://example.com/", http.StatusFound)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()

	f := loopbackFetcher(Options{MaxBodyBytes: 1000, Timeout: 2 * time.Second})
	fetch := func(path string) (gate.Evidence, gate.Result) {
		t.Helper()
		ev, err := f.Fetch(t.Context(), ts.URL+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return ev, gate.Classify(ev)
	}
	check := func(path string, verdict gate.Verdict, reason gate.Reason) gate.Evidence {
		t.Helper()
		ev, res := fetch(path)
		if res.Verdict != verdict || res.Reason != reason {
			t.Fatalf("%s: %s %s (%+v), want %s %s", path, res.Verdict, res.Reason, res.Layers, verdict, reason)
		}
		return ev
	}

	ev := check("/article", gate.Retrieved, "")
	if ev.Status != 200 || ev.FinalURL != ts.URL+"/article" || ev.Headers["content-type"] != "text/html; charset=utf-8" || len(ev.Redirects) != 0 {
		t.Fatalf("article evidence %+v", ev)
	}
	ev = check("/a", gate.Retrieved, "")
	want := []gate.Redirect{{URL: ts.URL + "/a", Status: 301}, {URL: ts.URL + "/b", Status: 302}}
	if fmt.Sprint(ev.Redirects) != fmt.Sprint(want) || ev.FinalURL != ts.URL+"/article" {
		t.Fatalf("redirects %v final %s", ev.Redirects, ev.FinalURL)
	}
	ev = check("/gzip", gate.Retrieved, "")
	if ev.Headers["content-encoding"] != "gzip" || bytes.Contains(ev.Body, []byte("price")) {
		t.Fatalf("the body was decompressed: %q", ev.Body)
	}
	if r := gate.Classify(ev); r.Receipt.ContentEncoding != "gzip" || r.Text != `{"price": 19.99}` {
		t.Fatalf("receipt %+v text %q", r.Receipt, r.Text)
	}
	check("/empty", gate.Failed, gate.ReasonEmptyBody)
	check("/forbidden", gate.Failed, "transport.http_403")
	ev = check("/big", gate.Failed, gate.ReasonTransportError)
	if len(ev.Body) != 1000 || !strings.Contains(ev.Error, "1000-byte limit") {
		t.Fatalf("big: %d bytes, error %q", len(ev.Body), ev.Error)
	}
	start := time.Now()
	check("/slow", gate.Failed, gate.ReasonTimeout)
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	check("/loop1", gate.Failed, gate.ReasonRedirectLoop)
	ev = check("/hop/0", gate.Failed, gate.ReasonTooManyRedirects)
	if len(ev.Redirects) != 11 || hops.Load() != 11 {
		t.Fatalf("%d redirects recorded, %d requests", len(ev.Redirects), hops.Load())
	}
	check("/ftp", gate.Failed, gate.ReasonTransportError)
}

// TestFetchTLS: https through the custom dialer.
func TestFetchTLS(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(article))
	defer ts.Close()
	f := loopbackFetcher(Options{TLSConfig: ts.Client().Transport.(*http.Transport).TLSClientConfig})
	ev, err := f.Fetch(t.Context(), ts.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if r := gate.Classify(ev); r.Verdict != gate.Retrieved {
		t.Fatalf("%+v", r.Layers)
	}
	// A refused connection is evidence, not an error.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ev, err = f.Fetch(t.Context(), "http://"+addr+"/")
	if err != nil || ev.Error == "" || gate.Classify(ev).Reason != gate.ReasonTransportError {
		t.Fatalf("closed port: %v %+v", err, ev)
	}
}

// deadlineResolver records whether the first lookup had a deadline.
type deadlineResolver struct{ deadline time.Time }

func (r *deadlineResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	if r.deadline.IsZero() {
		r.deadline, _ = ctx.Deadline()
	}
	return nil, &net.DNSError{Err: "no such host", Name: "slow-dns.example", IsNotFound: true}
}

// TestTimeoutBoundsTheFirstLookup: the fetch's timeout covers the lookup
// done before the request; it ran on the caller's context before, so a
// slow resolver could hold a fetch for its whole retry budget.
func TestTimeoutBoundsTheFirstLookup(t *testing.T) {
	r := &deadlineResolver{}
	f := New(Options{Resolver: r, Timeout: 200 * time.Millisecond})
	start := time.Now()
	if _, err := f.Fetch(context.Background(), "http://slow-dns.example/"); err != nil {
		t.Logf("fetch: %v", err)
	}
	if r.deadline.IsZero() || r.deadline.After(start.Add(time.Second)) {
		t.Errorf("the first lookup's deadline is %v, want within the 200 ms timeout of %v", r.deadline, start)
	}
}

// TestErrorTextKeepsThisMachineOut: a transport error's text, which the
// evidence carries to the agent, names neither the local address of the
// connection nor the resolver a lookup asked; what the classifier reads
// (the operation, the remote address, the cause, a timeout) stays.
func TestErrorTextKeepsThisMachineOut(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 49966}
	remote := &net.TCPAddr{IP: net.ParseIP("93.184.216.34"), Port: 443}
	reset := fmt.Errorf("reading: %w", &net.OpError{Op: "read", Net: "tcp", Source: local, Addr: remote, Err: syscall.ECONNRESET})
	if got := errorText(reset); strings.Contains(got, "10.1.2.3") || !strings.Contains(got, "93.184.216.34:443") || !strings.Contains(got, "connection reset") {
		t.Errorf("reset: %q", got)
	}
	dns := &url.Error{Op: "Get", URL: "http://x.invalid/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", Server: "10.255.255.53:53", IsNotFound: true}}}
	if got := errorText(dns); strings.Contains(got, "10.255.255.53") || !strings.Contains(got, "lookup x.invalid") || !strings.Contains(got, "no such host") {
		t.Errorf("lookup: %q", got)
	}
	slow := &net.OpError{Op: "dial", Net: "tcp", Source: local, Addr: remote, Err: context.DeadlineExceeded}
	if got := errorText(slow); !strings.HasPrefix(got, "timeout: ") || strings.Contains(got, "10.1.2.3") {
		t.Errorf("timeout: %q", got)
	}
}
