package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/client/internal/testserver"
)

// refuser is a local HTTP server that refuses the first refusals requests
// with status, problem code and Retry-After (refusals < 0: all of them),
// then answers 200, and records when each request arrived.
type refuser struct {
	status     int
	code       string // problem code; "" answers text/plain, as a proxy would
	retryAfter func() string
	refusals   int

	mu      sync.Mutex // guards arrived
	arrived []time.Time
}

func (f *refuser) start(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.arrived = append(f.arrived, time.Now())
		n := len(f.arrived)
		f.mu.Unlock()
		if f.refusals < 0 || n <= f.refusals {
			if ra := f.retryAfter(); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			if f.code == "" {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(f.status)
				_, _ = w.Write([]byte("try later\n"))
				return
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `{"type":"urn:artifactd:problem:%s","title":"t","status":%d,"detail":"refused"}`, f.code, f.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"commit":"c1","context_hash":"h1","artifact":{"id":"a","type":"note","version":1}}`))
			return
		}
		_, _ = w.Write([]byte(`{"commit":"c1","context_hash":"h1"}`))
	}))
	t.Cleanup(s.Close)
	return s
}

func (f *refuser) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.arrived...)
}

func seconds(s string) func() string { return func() string { return s } }

var note = client.ArtifactRequest{ID: "a", Type: "note", Data: map[string]any{"text": "x"}}

// TestRetryAfterWaited: a GET refused with 503 overloaded or 429 and
// Retry-After: 1, and a POST refused with 503 overloaded, are sent again
// no sooner than a second later, and the second answer is returned. (The
// client retried a GET's 503 after 100 ms, a 429 and a POST never.)
func TestRetryAfterWaited(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		code   string
		post   bool
	}{
		{"GET 503 overloaded", 503, "overloaded", false},
		{"GET 429", 429, "", false},
		{"POST 503 overloaded", 503, "overloaded", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &refuser{status: tc.status, code: tc.code, retryAfter: seconds("1"), refusals: 1}
			c := client.New(f.start(t).URL)
			var err error
			if tc.post {
				var w *client.ArtifactWrite
				w, err = c.PutArtifact(context.Background(), "run", note)
				if err == nil && w.Commit != "c1" {
					t.Fatalf("answer %+v", w)
				}
			} else {
				var h *client.Hash
				h, err = c.Hash(context.Background(), "run", "")
				if err == nil && h.Commit != "c1" {
					t.Fatalf("answer %+v", h)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			at := f.times()
			if len(at) != 2 {
				t.Fatalf("%d requests, want 2", len(at))
			}
			if gap := at[1].Sub(at[0]); gap < time.Second {
				t.Fatalf("sent again after %v, before the Retry-After of 1 s", gap)
			}
		})
	}
}

// TestRetryAfterDate: a Retry-After given as an HTTP-date is waited for
// until that date, for a POST refused as overloaded.
func TestRetryAfterDate(t *testing.T) {
	var mu sync.Mutex
	var until time.Time
	f := &refuser{status: 503, code: "overloaded", refusals: 1, retryAfter: func() string {
		mu.Lock()
		defer mu.Unlock()
		until = time.Now().Truncate(time.Second).Add(2 * time.Second)
		return until.UTC().Format(http.TimeFormat)
	}}
	c := client.New(f.start(t).URL)
	if _, err := c.PutArtifact(context.Background(), "run", note); err != nil {
		t.Fatal(err)
	}
	at := f.times()
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 || at[1].Before(until) {
		t.Fatalf("requests at %v; want 2, the second not before %v", at, until)
	}
}

// TestRetryAfterWriteNotProcessedOnly: a POST refused with a Retry-After
// by an answer that does not say it was not processed (503 unavailable,
// a proxy's 503 or 429) is sent once and its refusal returned at once,
// carrying the delay asked for.
func TestRetryAfterWriteNotProcessedOnly(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{503, "unavailable"}, {503, ""}, {429, ""}, {429, "overloaded"}} {
		t.Run(fmt.Sprint(tc.status, tc.code), func(t *testing.T) {
			t.Parallel()
			f := &refuser{status: tc.status, code: tc.code, retryAfter: seconds("1"), refusals: -1}
			c := client.New(f.start(t).URL)
			start := time.Now()
			_, err := c.PutArtifact(context.Background(), "run", note)
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != tc.status || p.RetryAfter != time.Second {
				t.Fatalf("err %v (%#v), want a %d problem with RetryAfter 1s", err, p, tc.status)
			}
			if n := len(f.times()); n != 1 {
				t.Fatalf("%d requests, want 1: a write that may have been processed was sent again", n)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("returned after %v", d)
			}
		})
	}
}

// TestRetryAfterProblemWithoutStatus: a proxy's 429 or 503 in
// problem+json without the optional "status" member (or with members not
// of RFC 9457's types), with a Retry-After, is retried for a GET like any
// other, and its Problem carries the HTTP status. (Before: the Problem's
// Status stayed 0 without the member, so the refusal was not recognised:
// a 429 was returned at once, a 503 retried after the pauses of
// WithRetries instead of its Retry-After.)
func TestRetryAfterProblemWithoutStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{429, `{"type":"about:blank","title":"slow down"}`},
		{503, `{"type":"about:blank","title":"slow down"}`},
		{429, `{"type":"about:blank","status":"Too Many Requests","errors":[null,"x"]}`},
		{503, `{"type":"about:blank","status":"Too Many Requests","errors":[null,"x"]}`},
	} {
		status := tc.status
		t.Run(fmt.Sprint(status, tc.body), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var arrived []time.Time
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrived = append(arrived, time.Now())
				n := len(arrived)
				mu.Unlock()
				if n == 1 {
					w.Header().Set("Retry-After", "1")
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(status)
					_, _ = w.Write([]byte(tc.body))
					return
				}
				_, _ = w.Write([]byte(`{"commit":"c1","context_hash":"h1"}`))
			}))
			defer s.Close()
			if _, err := client.New(s.URL).Hash(context.Background(), "run", ""); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(arrived) != 2 || arrived[1].Sub(arrived[0]) < time.Second {
				t.Fatalf("requests at %v: want 2, a second apart", arrived)
			}
		})
	}
	// The last refusal returned carries the answer's status.
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"slow down"}`))
	}))
	defer s.Close()
	_, err := client.New(s.URL).Hash(context.Background(), "run", "")
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusTooManyRequests || p.RetryAfter != 2*time.Minute {
		t.Fatalf("err %v (%#v), want a 429 problem with RetryAfter 2m", err, p)
	}
}

// TestRetryAfterUnreadable: a Retry-After that is no delay-seconds and no
// HTTP-date is no Retry-After (a POST refused with it is sent once, its
// Problem's RetryAfter 0); the three forms of an HTTP-date are read (a
// past one: sent again at once).
func TestRetryAfterUnreadable(t *testing.T) {
	for _, tc := range []struct {
		ra   string
		want int
	}{
		{"soon", 1}, {"1.5", 1}, {"+1", 1}, {"abc 1", 1}, {"foo 2099", 1},
		{"Sun, 06 Nov 2094 08:49:37 PST", 1}, {"Sun, 32 Nov 2094 08:49:37 GMT", 1},
		{"Mon, 01 Jan 99999999999999999999 00:00:00 GMT", 1},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 2}, {"Sunday, 06-Nov-94 08:49:37 GMT", 2},
		{"Sun Nov  6 08:49:37 1994", 2}, {"Sun Nov 6 08:49:37 1994", 2},
	} {
		t.Run(tc.ra, func(t *testing.T) {
			t.Parallel()
			f := &refuser{status: 503, code: "overloaded", retryAfter: seconds(tc.ra), refusals: 1}
			_, err := client.New(f.start(t).URL).PutArtifact(context.Background(), "run", note)
			if n := len(f.times()); n != tc.want {
				t.Fatalf("%d requests, want %d (err %v)", n, tc.want, err)
			}
			var p *client.Problem
			if tc.want == 1 && (!errors.As(err, &p) || p.Code() != "overloaded" || p.RetryAfter != 0) {
				t.Fatalf("err %v, want the overloaded problem without a delay", err)
			}
		})
	}
}

// TestRetryAfterPastDeadline: a Retry-After ending past the context's
// deadline, or longer than the longest wait, is not waited for: the
// server's refusal comes back at once, after one request.
func TestRetryAfterPastDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ra      string
		timeout time.Duration
	}{{"deadline", "5", 300 * time.Millisecond}, {"longest", "120", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &refuser{status: 503, code: "overloaded", retryAfter: seconds(tc.ra), refusals: -1}
			c := client.New(f.start(t).URL)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			_, err := c.Hash(ctx, "run", "")
			if d := time.Since(start); d > time.Second {
				t.Fatalf("returned after %v", d)
			}
			var p *client.Problem
			want, _ := time.ParseDuration(tc.ra + "s")
			if !errors.As(err, &p) || p.Code() != "overloaded" || p.RetryAfter != want {
				t.Fatalf("err %v, want the server's overloaded problem", err)
			}
			if n := len(f.times()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

// TestRetryAfterWaitCancelled: a call cancelled while it waits out a
// Retry-After ends at once with an error that is the context's, and that
// names the request and the refusal it waited after. (It was the bare
// context error.)
func TestRetryAfterWaitCancelled(t *testing.T) {
	f := &refuser{status: 503, code: "overloaded", retryAfter: seconds("20"), refusals: -1}
	c := client.New(f.start(t).URL)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Hash(ctx, "run", "")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v", d)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	for _, want := range []string{"GET /v1/contexts/run/hash", "20s", "overloaded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q does not say %q", err, want)
		}
	}
	if n := len(f.times()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestRetryAfterBounded: a request refused again and again is sent at
// most 1 + n times (WithRetryAfter, default 3); n = 0 keeps the behaviour
// without it (a safe request's 503 retried WithRetries times).
func TestRetryAfterBounded(t *testing.T) {
	for _, tc := range []struct {
		opts []client.Option
		want int
	}{
		{nil, 4},
		{[]client.Option{client.WithRetryAfter(1, time.Minute)}, 2},
		{[]client.Option{client.WithRetryAfter(0, 0)}, 3},
	} {
		f := &refuser{status: 503, code: "overloaded", retryAfter: seconds("0"), refusals: -1}
		c := client.New(f.start(t).URL, append(tc.opts, client.WithRetries(2, time.Millisecond))...)
		if _, err := c.Hash(context.Background(), "run", ""); !client.IsCode(err, "overloaded") {
			t.Fatalf("err %v", err)
		}
		if n := len(f.times()); n != tc.want {
			t.Fatalf("%d requests, want %d", n, tc.want)
		}
	}
}

// TestOverloadedWriteRetried: against a real artifactd at its connection
// cap, a write that lands on a reserve connection is refused with 503
// overloaded and Retry-After; the client sends it again after the delay,
// once a slot is free, and the artifact is written once.
func TestOverloadedWriteRetried(t *testing.T) {
	s := testserver.Start(t, bin, "--max-conns", "1")
	ctx := context.Background()
	setup := client.New(s.URL, client.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
	if _, err := setup.EnsureContext(ctx, "run", ""); err != nil {
		t.Fatal(err)
	}
	// Take the one ordinary slot with a keep-alive connection that was
	// answered (a reserve connection would have been refused).
	var hold net.Conn
	for i := 0; hold == nil; i++ {
		if i == 50 {
			t.Fatal("no ordinary connection slot came free")
		}
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /v1/contexts/run/hash HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(s.URL, "http://"))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil && res.StatusCode == http.StatusOK {
			hold = conn
			break
		}
		conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
	release := time.AfterFunc(300*time.Millisecond, func() { hold.Close() })
	defer release.Stop()
	defer hold.Close()

	c := client.New(s.URL)
	start := time.Now()
	if _, err := c.PutArtifact(ctx, "run", note); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("written after %v: the write was not refused and retried after its Retry-After of 1 s", d)
	}
	a, err := c.GetArtifact(ctx, "run", "a", "")
	if err != nil || a.Version != 1 {
		t.Fatalf("artifact %+v %v: want version 1, written once", a, err)
	}
}
