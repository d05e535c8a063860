package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/hashing"
)

const hardenToken = "tok-harden-0123456789"

// seedAudit makes a context with an answer resting on a claim, for the
// text exports.
func (e *env) seedAudit(ctxID string) {
	e.t.Helper()
	e.createContext(ctxID, "")
	e.must(e.post("/v1/contexts/"+ctxID+"/artifacts", map[string]any{"id": "c", "type": "claim", "data": map[string]any{"text": "c"}}), 201)
	e.must(e.post("/v1/contexts/"+ctxID+"/artifacts", map[string]any{"id": "a", "type": "answer", "data": map[string]any{"text": "a"},
		"edges": []map[string]any{{"rel": "derived_from", "to": "c"}}}), 201)
}

// TestNosniffOnEveryResponse: JSON, problems, 405s, the text exports
// (markdown, mermaid, dot), operations routes and the UI all carry
// X-Content-Type-Options: nosniff.
func TestNosniffOnEveryResponse(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<p>ui</p>") })
	e := newEnv(t, withOptions(func(o *Options) { o.UI = ui }))
	e.seedAudit("n")
	for _, c := range []struct {
		method, path string
		status       int
		ctype        string
	}{
		{"GET", "/healthz", 200, "application/json"},
		{"GET", "/metrics", 200, ""},
		{"GET", "/v1/contexts/n", 200, "application/json"},
		{"GET", "/v1/contexts/n/audit/a?format=markdown", 200, "text/markdown"},
		{"GET", "/v1/contexts/n/artifacts/a/provenance?format=mermaid", 200, "text/vnd.mermaid"},
		{"GET", "/v1/contexts/n/artifacts/a/provenance?format=dot", 200, "text/vnd.graphviz"},
		{"GET", "/v1/contexts/nope", 404, "application/problem+json"},
		{"POST", "/v1/contexts/n", 405, "application/problem+json"},
		{"GET", "/v1/nothing/here", 404, "application/problem+json"},
		{"GET", "/", 200, ""},
	} {
		r := e.send(req{method: c.method, path: c.path})
		if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), c.ctype) {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.path, r.status, r.header.Get("Content-Type"), c.status, c.ctype)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q", c.method, c.path, got)
		}
	}
}

// TestMethodNotAllowed: a known path with a wrong method is 405 with
// Allow, with or without the UI mounted at "/" (whose /v1/* catch-all
// answered 404 before); an unknown path stays 404.
func TestMethodNotAllowed(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for name, opt := range map[string]envOption{"api": withOptions(func(*Options) {}), "with-ui": withOptions(func(o *Options) { o.UI = ui })} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, opt)
			e.createContext("m", "")
			for _, c := range []struct {
				method, path, allow string
			}{
				{"POST", "/v1/contexts/m", "GET, HEAD, PUT"},
				{"PUT", "/v1/contexts/m/commits", "GET, HEAD, POST"},
				{"GET", "/v1/contexts/m/effects/claim", "POST"},
				{"DELETE", "/v1/blobs", "POST"},
				{"HEAD", "/v1/contexts/m/effects/claim", "POST"},
				{"POST", "/v1/types/x", "GET, HEAD, PUT"},
				{"DELETE", "/v1/contexts/m/artifacts/a%2Fb", "GET, HEAD"},
			} {
				r := e.send(req{method: c.method, path: c.path})
				if r.status != 405 || r.header.Get("Allow") != c.allow || r.header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", c.method, c.path, r.status, r.header.Get("Allow"), r.body, c.allow)
				}
			}
			if r := e.send(req{method: "POST", path: "/v1/contexts/m/nothing"}); r.status != 404 || r.header.Get("Allow") != "" {
				t.Errorf("unknown path: %d Allow %q", r.status, r.header.Get("Allow"))
			}
		})
	}
}

// TestBearerSchemeCaseInsensitive: "bearer", "BEARER" and "Bearer" are
// the same scheme; other schemes and empty tokens stay 401.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	e := newEnv(t, withTokens(hardenToken+" admin *"))
	for _, c := range []struct {
		auth   string
		status int
	}{
		{"Bearer " + hardenToken, 200},
		{"bearer " + hardenToken, 200},
		{"BEARER " + hardenToken, 200},
		{"bEaReR   " + hardenToken + " ", 200},
		{"Basic " + hardenToken, 401},
		{"bearer", 401},
		{"Bearer ", 401},
		{hardenToken, 401},
	} {
		r := e.send(req{method: "GET", path: "/v1/contexts", header: map[string]string{"Authorization": c.auth}})
		if r.status != c.status {
			t.Errorf("Authorization %q: %d, want %d: %s", c.auth, r.status, c.status, r.body)
		}
	}
}

// rawHTTP sends one request with an arbitrary Host and headers over a new
// connection and returns the response.
func rawHTTP(t *testing.T, addr string, hr *http.Request) *resp {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := hr.Write(c); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), hr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &resp{status: res.StatusCode, header: res.Header, body: b}
}

// TestOpenModeHostCheck: an open server answers loopback and localhost
// Host values only, so that a page whose name was rebound to 127.0.0.1
// (DNS rebinding) gets 421; a token server answers any Host; AllowHosts
// extends the list.
func TestOpenModeHostCheck(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.AllowHosts = []string{"proxy.internal"} }))
	addr := e.ts.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		host   string
		status int
	}{
		{addr, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST", 200},
		{"[::1]:" + port, 200},
		{"127.0.0.2", 200},
		{"proxy.internal:" + port, 200},
		{"evil.example", 421},
		{"evil.example:" + port, 421},
		{"127.0.0.1.nip.io:" + port, 421},
		{"localhost.evil.example", 421},
		{"7f000001.rebind.network", 421},
		{"0x7f000001", 421},
		{"127.1", 421},
		{"2130706433", 421},
		{"192.168.1.10:" + port, 421},
		{"[::ffff:8.8.8.8]", 421},
	} {
		hr, _ := http.NewRequest("GET", "http://"+addr+"/v1/contexts", nil)
		hr.Host = c.host
		r := rawHTTP(t, addr, hr)
		if r.status != c.status {
			t.Errorf("Host %q: %d, want %d: %s", c.host, r.status, c.status, r.body)
		}
		if c.status == 421 && (r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.String(), `"parameter":"Host"`)) {
			t.Errorf("Host %q: %s %s", c.host, r.header.Get("Content-Type"), r.body)
		}
	}
	// A rebound name cannot write either.
	hr, _ := http.NewRequest("POST", "http://"+addr+"/v1/contexts", strings.NewReader(`{"id":"rebound"}`))
	hr.Host = "evil.example"
	hr.Header.Set("Content-Type", "application/json")
	if r := rawHTTP(t, addr, hr); r.status != 421 {
		t.Errorf("rebound write: %d %s", r.status, r.body)
	}
	if r := e.get("/v1/contexts/rebound"); r.status != 404 {
		t.Errorf("the refused write created the context: %d", r.status)
	}

	tk := newEnv(t, withTokens(hardenToken+" read *"))
	taddr := tk.ts.Listener.Addr().String()
	hr, _ = http.NewRequest("GET", "http://"+taddr+"/v1/contexts", nil)
	hr.Host = "artifactd.example.org"
	hr.Header.Set("Authorization", "Bearer "+hardenToken)
	if r := rawHTTP(t, taddr, hr); r.status != 200 {
		t.Errorf("token mode, public Host: %d %s", r.status, r.body)
	}
}

// TestCrossSiteWritesRefused: a simple cross-site POST /v1/blobs with
// text/plain (no preflight needed) is refused 403 and stores nothing, as
// is any write a browser marks cross-site; same-origin and configured
// origins pass, and only configured origins get CORS headers.
func TestCrossSiteWritesRefused(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.AllowOrigins = []string{"https://app.example"} }))
	e.createContext("x", "")
	self := "http://" + e.ts.Listener.Addr().String()
	blob := "hello from a web page"
	blobPath := "/v1/blobs/" + sha256Str(blob)
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"cross-site origin", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, 403},
		{"null origin", map[string]string{"Origin": "null", "Content-Type": "text/plain"}, 403},
		{"other port", map[string]string{"Origin": "http://127.0.0.1:1", "Content-Type": "text/plain"}, 403},
		{"sec-fetch-site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, 403},
		{"sec-fetch-site same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": "text/plain"}, 403},
	} {
		r := e.send(req{method: "POST", path: "/v1/blobs", body: []byte(blob), header: c.headers})
		if r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %s %q", c.name, r.status, r.body, r.header.Get("Access-Control-Allow-Origin"))
		}
		if g := e.get(blobPath); g.status != 404 {
			t.Fatalf("%s: the refused upload was stored (%d)", c.name, g.status)
		}
	}
	// The other write routes refuse too, and change nothing.
	before := e.hash("x")
	r := e.send(req{method: "POST", path: "/v1/contexts/x/artifacts", body: `{"type":"note","data":{"text":"csrf"}}`,
		header: map[string]string{"Origin": "https://evil.example"}})
	if r.status != 403 || e.hash("x") != before {
		t.Errorf("cross-site artifact write: %d %s", r.status, r.body)
	}
	// Reads are not refused (without CORS headers a page cannot read them).
	if r := e.send(req{method: "GET", path: "/v1/contexts/x", header: map[string]string{"Origin": "https://evil.example"}}); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("cross-site read: %d %q", r.status, r.header.Get("Access-Control-Allow-Origin"))
	}
	// Same origin and a configured origin write.
	if r := e.send(req{method: "POST", path: "/v1/blobs", body: []byte(blob), header: map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}}); r.status != 201 {
		t.Errorf("same-origin upload: %d %s", r.status, r.body)
	}
	r = e.send(req{method: "POST", path: "/v1/contexts/x/artifacts", body: `{"type":"note","data":{"text":"ok"}}`,
		header: map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}})
	if r.status != 201 || r.header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("allowed origin: %d %q %s", r.status, r.header.Get("Access-Control-Allow-Origin"), r.body)
	}
	pre := e.send(req{method: "OPTIONS", path: "/v1/contexts/x/commits", header: map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}})
	if pre.status != 204 || !strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", pre.status, pre.header)
	}
	if pre := e.send(req{method: "OPTIONS", path: "/v1/contexts/x/commits", header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}}); pre.header.Get("Access-Control-Allow-Origin") != "" || pre.status < 400 {
		t.Errorf("preflight of another origin: %d %v", pre.status, pre.header)
	}
	// With origins configured, every answer varies by Origin, those
	// without CORS headers too: a shared cache must not give one origin's
	// answer to another (or a page's to a request without Origin).
	for _, origin := range []string{"", "https://evil.example", "https://app.example"} {
		r := e.send(req{method: "GET", path: "/v1/contexts/x", header: map[string]string{"Origin": origin}})
		if r.status != 200 || !slices.Contains(r.header.Values("Vary"), "Origin") {
			t.Errorf("read with Origin %q: %d, Vary %q", origin, r.status, r.header.Values("Vary"))
		}
	}

	// Token mode refuses cross-site writes as well.
	tk := newEnv(t, withTokens(hardenToken+" admin *"))
	tk.token = hardenToken
	if r := tk.send(req{method: "POST", path: "/v1/blobs", body: []byte(blob), header: map[string]string{"Origin": "https://evil.example"}}); r.status != 403 {
		t.Errorf("token mode cross-site upload: %d %s", r.status, r.body)
	}
}

func sha256Str(s string) string { return hashing.Sum([]byte(s)).String() }

// TestMalformedRequestsGetProblems: requests the server can still answer
// get problem+json, not net/http's text/plain: bad percent-encoding in the
// query, oversized headers, bad JSON, a wrong content type.
func TestMalformedRequestsGetProblems(t *testing.T) {
	e := newEnv(t)
	e.createContext("p", "")
	big := strings.Repeat("a", 80<<10)
	for _, c := range []struct {
		name   string
		q      req
		status int
	}{
		{"bad query escape", req{method: "GET", path: "/v1/contexts/p/artifacts?at=%zz"}, 400},
		{"bad query escape on write", req{method: "POST", path: "/v1/contexts/p/artifacts?x=%", body: `{"type":"note","data":{"text":"a"}}`}, 400},
		{"oversized header", req{method: "GET", path: "/v1/contexts/p", header: map[string]string{"X-Big": big}}, 431},
		{"bad json", req{method: "POST", path: "/v1/contexts/p/artifacts", body: `{"type":`}, 400},
		{"wrong content type", req{method: "POST", path: "/v1/contexts/p/artifacts", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"bad path escape in id", req{method: "GET", path: "/v1/contexts/p/artifacts/a%2Fb%zz"}, 0},
		// No route decodes a content coding: a body said to be compressed
		// is refused, not read as it is.
		{"gzip body", req{method: "POST", path: "/v1/contexts/p/artifacts", body: `{"type":"note","data":{"text":"a"}}`, header: map[string]string{"Content-Encoding": "gzip"}}, 415},
		{"coded blob", req{method: "POST", path: "/v1/contexts/p/blobs", body: "some bytes", header: map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "identity, br"}}, 415},
	} {
		if c.status == 0 {
			continue // net/http itself refuses a request URI that does not parse (text/plain 400)
		}
		before := e.hash("p")
		r := e.send(c.q)
		if r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %q %s", c.name, r.status, r.header.Get("Content-Type"), r.body)
		}
		if e.hash("p") != before {
			t.Errorf("%s: state changed", c.name)
		}
	}
	if r := e.get("/v1/contexts/p/blobs/" + hashing.ContentHash([]byte("some bytes")).String()); r.status != 404 {
		t.Errorf("a refused blob was stored: %d", r.status)
	}
	// identity is no coding at all.
	e.must(e.send(req{method: "POST", path: "/v1/contexts/p/artifacts", body: `{"type":"note","data":{"text":"a"}}`, header: map[string]string{"Content-Encoding": "identity"}}), 201)
}

// startServer serves srv like artifactd serve does, on a limited loopback
// listener with short timeouts.
func startServer(t *testing.T, srv *Server, maxConns, reserve int, timeout time.Duration) string {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitListener(tcp, maxConns, reserve, timeout)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: timeout, IdleTimeout: timeout, MaxHeaderBytes: 1 << 20,
		ConnContext: ConnContext, ErrorLog: nil}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return tcp.Addr().String()
}

// closedWithin reports whether the server closes c (EOF or reset, after
// any answer) within d.
func closedWithin(c net.Conn, d time.Duration) (bool, string) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false, string(got)
	}
	return true, string(got)
}

// TestRefusedRequestClosesConnection: an unauthenticated request whose
// body never finishes gets its 401 and the connection is closed at once,
// not drained (net/http would wait for up to 256 KiB more).
func TestRefusedRequestClosesConnection(t *testing.T) {
	e := newEnv(t, withTokens(hardenToken+" admin *"), withOptions(func(o *Options) { o.BodyTimeout = time.Minute }))
	addr := startServer(t, e.srv, 64, 4, time.Minute)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\nonly a start", addr)
	start := time.Now()
	closed, got := closedWithin(c, 5*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 401") || !strings.Contains(got, "application/problem+json") {
		t.Fatalf("answer: %q", got)
	}
	if !closed {
		t.Fatalf("the connection is still open %v after the 401", time.Since(start))
	}
}

// TestSlowBodyTimesOut: a body that does not arrive within BodyTimeout is
// a 408 problem and the connection closes; a handler that runs longer
// than the body timeout after reading its body is not cut.
func TestSlowBodyTimesOut(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.BodyTimeout = 300 * time.Millisecond }))
	e.createContext("s", "")
	addr := startServer(t, e.srv, 64, 4, time.Minute)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/contexts/s/artifacts HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"type\":", addr)
	closed, got := closedWithin(c, 5*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 408") || !strings.Contains(got, "request-timeout") || !closed {
		t.Fatalf("closed %v, answer %q", closed, got)
	}
	// A normal write on a kept-alive connection still works after the
	// body timeout has passed (the deadline is lifted once the body is in).
	cl := &http.Client{}
	for range 2 {
		res, err := cl.Post("http://"+addr+"/v1/contexts/s/artifacts", "application/json", strings.NewReader(`{"type":"note","data":{"text":"k"}}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 201 && res.StatusCode != 200 {
			t.Fatalf("write: %d", res.StatusCode)
		}
		time.Sleep(400 * time.Millisecond)
	}
}

// TestSlowSocketFlood opens many more slow sockets than the connection
// cap — some that never finish their headers, some that never finish
// their body — and shows that /healthz still answers, that other routes
// on a reserve connection get 503 with Retry-After, and that every slow
// socket is closed by the server.
func TestSlowSocketFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood takes a few seconds")
	}
	const maxConns, reserve, slow = 16, 4, 120
	timeout := 700 * time.Millisecond
	e := newEnv(t, withOptions(func(o *Options) { o.BodyTimeout = timeout }))
	addr := startServer(t, e.srv, maxConns, reserve, timeout)
	var socks []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return // the backlog may be full: the kernel refuses, which is fine
			}
			if i%2 == 0 {
				fmt.Fprintf(c, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nContent-Length: 50000\r\n\r\nabc", addr)
			} else {
				fmt.Fprintf(c, "GET /v1/contexts HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
			}
			mu.Lock()
			socks = append(socks, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range socks {
			c.Close()
		}
	}()
	// /healthz answers while the flood holds every slot.
	start := time.Now()
	deadline := start.Add(6 * time.Second)
	healthy := false
	for time.Now().Before(deadline) && !healthy {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		b, _ := io.ReadAll(c)
		c.Close()
		healthy = bytes.HasPrefix(b, []byte("HTTP/1.1 200"))
	}
	if !healthy {
		t.Fatalf("/healthz did not answer within %v of a %d-socket flood", time.Since(start), slow)
	}
	t.Logf("/healthz answered %v after the flood began", time.Since(start))
	// Every slow socket is closed by the server.
	closedAll := 0
	var wg2 sync.WaitGroup
	var mu2 sync.Mutex
	for _, c := range socks {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			if ok, _ := closedWithin(c, 8*time.Second); ok {
				mu2.Lock()
				closedAll++
				mu2.Unlock()
			}
		}()
	}
	wg2.Wait()
	if closedAll != len(socks) {
		t.Fatalf("%d of %d slow sockets still open after 8s", len(socks)-closedAll, len(socks))
	}
	// And the server serves normally again.
	res, err := http.Get("http://" + addr + "/v1/contexts")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("after the flood: %d", res.StatusCode)
	}
}

// TestReserveConnectionAnswersHealthOnly: on a reserve connection only the
// health routes are served; others get 503 overloaded with Retry-After.
func TestReserveConnectionAnswersHealthOnly(t *testing.T) {
	e := newEnv(t)
	srv := e.srv
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/v1/contexts": 503} {
		hr := httptest.NewRequest("GET", path, nil)
		hr.Host = "127.0.0.1"
		hr = hr.WithContext(context.WithValue(hr.Context(), connKey{}, true))
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, hr)
		if rec.Code != want {
			t.Errorf("%s on a reserve connection: %d, want %d", path, rec.Code, want)
		}
		if want == 503 && (rec.Header().Get("Retry-After") == "" || rec.Header().Get("Content-Type") != "application/problem+json") {
			t.Errorf("%s: %v", path, rec.Header())
		}
	}
}

// TestLargeBodySlots: beyond MaxLargeBodies concurrent large bodies, a
// request gets 503 with Retry-After; small bodies are not limited.
func TestLargeBodySlots(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.MaxLargeBodies = 1; o.LargeBodyBytes = 1000; o.BodyTimeout = 10 * time.Second }))
	e.createContext("l", "")
	addr := startServer(t, e.srv, 64, 4, time.Minute)
	hold, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	fmt.Fprintf(hold, "POST /v1/blobs HTTP/1.1\r\nHost: %s\r\nContent-Length: 5000\r\n\r\nabc", addr)
	time.Sleep(200 * time.Millisecond)
	big := strings.Repeat("x", 2000)
	res, err := http.Post("http://"+addr+"/v1/blobs", "application/octet-stream", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "overloaded") {
		t.Fatalf("second large body: %d %v %s", res.StatusCode, res.Header, b)
	}
	res, err = http.Post("http://"+addr+"/v1/blobs", "application/octet-stream", strings.NewReader("small"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("small body: %d", res.StatusCode)
	}
	hold.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err = http.Post("http://"+addr+"/v1/blobs", "application/octet-stream", strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == 201 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res.StatusCode != 201 {
		t.Fatalf("large body after the slot freed: %d", res.StatusCode)
	}
}

// TestInvisibleIDsRefused: over HTTP, an artifact id or edge end with a
// bidi control, a zero-width character or a non-NFC form, and a producer
// or author name with a control or invisible character, is a 422 naming
// the pointer, the rule and the code point, and nothing is written.
func TestInvisibleIDsRefused(t *testing.T) {
	e := newEnv(t)
	e.createContext("i", "")
	e.must(e.post("/v1/contexts/i/artifacts", map[string]any{"id": "b", "type": "note", "data": map[string]any{"text": "b"}}), 201)
	before := e.hash("i")
	for _, c := range []struct {
		path    string
		body    map[string]any
		pointer string
		rule    string
		names   string
	}{
		{"/v1/contexts/i/artifacts", map[string]any{"id": "report\u202Etxt.exe", "type": "note", "data": map[string]any{"text": "x"}}, "/id", "visible", "U+202E RIGHT-TO-LEFT OVERRIDE"},
		{"/v1/contexts/i/artifacts", map[string]any{"id": "caf\u0065\u0301", "type": "note", "data": map[string]any{"text": "x"}}, "/id", "nfc", "café"},
		{"/v1/contexts/i/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "x"}, "edges": []map[string]any{{"rel": "cites", "to": "b\u200B"}}}, "/edges/0/to", "visible", "U+200B ZERO WIDTH SPACE"},
		{"/v1/contexts/i/commits", map[string]any{"ops": []map[string]any{{"op": "link", "from": "b\u2066", "rel": "cites", "to": "b"}}}, "/ops/0/from", "visible", "U+2066"},
		// Producers and authors are names the UI and audits show too.
		{"/v1/contexts/i/artifacts", map[string]any{"id": "p", "type": "note", "produced_by": "plan\u200Bner", "data": map[string]any{"text": "x"}}, "/produced_by", "visible", "U+200B ZERO WIDTH SPACE"},
		{"/v1/contexts/i/artifacts", map[string]any{"id": "p", "type": "note", "produced_by": "step\u202E1", "data": map[string]any{"text": "x"}}, "/produced_by", "visible", "U+202E"},
		{"/v1/contexts/i/artifacts", map[string]any{"id": "p", "type": "note", "produced_by": "a\nb", "data": map[string]any{"text": "x"}}, "/produced_by", "printable", "U+000A"},
		{"/v1/contexts/i/commits", map[string]any{"ops": []map[string]any{{"op": "put", "artifact": map[string]any{"id": "p", "type": "note", "produced_by": "agent\u00A0", "data": map[string]any{"text": "x"}}}}}, "/ops/0/artifact/produced_by", "visible", "U+00A0"},
		{"/v1/contexts/i/commits", map[string]any{"author": "bo\u2060b", "ops": []map[string]any{{"op": "put", "artifact": map[string]any{"id": "p", "type": "note", "data": map[string]any{"text": "x"}}}}}, "/author", "visible", "U+2060 WORD JOINER"},
		{"/v1/contexts/i/effects", map[string]any{"idempotency_key": "k", "kind": "email", "produced_by": "mail\uFEFFer"}, "/produced_by", "visible", "U+FEFF"},
		{"/v1/contexts/i/merge", map[string]any{"theirs": "main", "author": "x\u200Dy"}, "/author", "visible", "U+200D ZERO WIDTH JOINER"},
	} {
		r := e.post(c.path, c.body)
		m := r.obj(t)
		errs, _ := m["errors"].([]any)
		if r.status != 422 || len(errs) == 0 {
			t.Errorf("%v: %d %s", c.body, r.status, r.body)
			continue
		}
		fe := errs[0].(map[string]any)
		if fe["pointer"] != c.pointer || fe["rule"] != c.rule || !strings.Contains(fmt.Sprint(fe["detail"]), c.names) {
			t.Errorf("%v: %v; want pointer %s rule %s naming %s", c.body, fe, c.pointer, c.rule, c.names)
		}
	}
	if e.hash("i") != before {
		t.Error("a refused id changed the state")
	}
}
