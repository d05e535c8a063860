package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one artifactd server. Build it with New.
type Client struct {
	base    string
	token   string
	hc      *http.Client
	retries int
	backoff time.Duration
}

// Option configures New.
type Option func(*Client)

// WithToken sends token as a bearer token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a client with a 30 s timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a safe request (GET, PUT of a context)
// is retried after a transport error or a 503 (default 2), and the first
// pause (doubled each time, default 100 ms).
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = n, backoff }
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:7070").
func New(baseURL string, opts ...Option) *Client {
	// The API never redirects a request it serves: a redirect followed
	// would decode another resource's answer as this one's.
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: hc, retries: 2, backoff: 100 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the server address the client talks to.
func (c *Client) BaseURL() string { return c.base }

// FieldError is one entry of a problem's errors list.
type FieldError struct {
	Pointer   string `json:"pointer,omitempty"`
	Parameter string `json:"parameter,omitempty"`
	Rule      string `json:"rule"`
	Detail    string `json:"detail"`
}

// Problem is an RFC 9457 problem answered by the server. Extensions holds
// the other members (tainted_by, cycle, conflicts, head…) undecoded.
type Problem struct {
	Type       string                     `json:"type"`
	Title      string                     `json:"title"`
	Status     int                        `json:"status"`
	Detail     string                     `json:"detail"`
	Instance   string                     `json:"instance,omitempty"`
	Errors     []FieldError               `json:"errors,omitempty"`
	Extensions map[string]json.RawMessage `json:"-"`
	// Method and URL name the request that failed.
	Method, URL string `json:"-"`
}

// ProblemTypePrefix starts every problem type the server writes.
const ProblemTypePrefix = "urn:artifactd:problem:"

// Code returns the problem code: the type without ProblemTypePrefix
// ("stale-parent", "quarantined", "validation", "not-found"…).
func (p *Problem) Code() string { return strings.TrimPrefix(p.Type, ProblemTypePrefix) }

// Error implements error: status, code, detail and each field error.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "artifactd: %s %s: %d %s: %s", p.Method, p.URL, p.Status, p.Code(), p.Detail)
	for _, e := range p.Errors {
		where := e.Pointer
		if e.Parameter != "" {
			where = "?" + e.Parameter
		}
		fmt.Fprintf(&b, "; %s [%s] %s", where, e.Rule, e.Detail)
	}
	return b.String()
}

// IsCode reports whether err is (or wraps) a *Problem with the given code.
func IsCode(err error, code string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Code() == code
}

// IsStale reports whether err is a refused write whose parent was not the
// branch head.
func IsStale(err error) bool { return IsCode(err, "stale-parent") }

// IsNotFound reports whether err is a 404 problem.
func IsNotFound(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusNotFound
}

func decodeProblem(method, u string, status int, body []byte) *Problem {
	p := &Problem{Method: method, URL: u}
	if err := json.Unmarshal(body, p); err != nil || p.Type == "" {
		return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status,
			Detail: strings.TrimSpace(string(body)), Method: method, URL: u}
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(body, &all)
	for _, k := range []string{"type", "title", "status", "detail", "instance", "errors"} {
		delete(all, k)
	}
	if len(all) > 0 {
		p.Extensions = all
	}
	return p
}

// PathEscape escapes one path segment (an artifact id "doc/1" becomes
// "doc%2F1"; "." and ".." become "%2E" and "%2E%2E", which no URL
// resolution takes for a dot segment).
func PathEscape(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// do sends one request and decodes a 2xx JSON body into out (when not
// nil). A non-2xx answer is a *Problem. Safe requests are retried.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	safe := method == http.MethodGet || (method == http.MethodPut && strings.HasPrefix(path, "/v1/contexts/"))
	attempts := 1
	if safe {
		attempts += c.retries
	}
	pause := c.backoff
	var lastErr error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(pause):
			}
			pause *= 2
		}
		status, raw, err := c.send(ctx, method, path, body)
		if err != nil {
			lastErr = err
			continue
		}
		if status >= 200 && status < 300 {
			if out != nil && len(raw) > 0 {
				if err := json.Unmarshal(raw, out); err != nil {
					return status, fmt.Errorf("decode %s %s: %w", method, path, err)
				}
			}
			return status, nil
		}
		lastErr = decodeProblem(method, path, status, raw)
		if status != http.StatusServiceUnavailable {
			return status, lastErr
		}
	}
	return 0, lastErr
}

func (c *Client) send(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return res.StatusCode, raw, nil
}

func ctxPath(ctxID string, rest ...string) string {
	p := "/v1/contexts/" + PathEscape(ctxID)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func withAt(path, at string) string {
	if at == "" {
		return path
	}
	return path + "?at=" + url.QueryEscape(at)
}
