package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Client talks to one artifactd server. Build it with New.
type Client struct {
	base    string
	token   string
	hc      *http.Client
	retries int
	backoff time.Duration
	// waits is how many times a request refused with a Retry-After is
	// sent again; longest is the longest delay waited for.
	waits   int
	longest time.Duration
	// maxAnswer bounds the bytes read of an answer (WithMaxAnswerBytes).
	maxAnswer int64
}

// Option configures New.
type Option func(*Client)

// WithToken sends token as a bearer token.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a client with a 30 s timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a safe request (GET, PUT of a context)
// is retried after a transport error or a 503 (default 2), and the first
// pause (doubled each time, default 100 ms). A 503 or 429 with a
// Retry-After is retried as WithRetryAfter says instead.
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) { c.retries, c.backoff = n, backoff }
}

// WithRetryAfter sets how many times a request refused with a
// Retry-After header (delta-seconds or an HTTP-date) is sent again after
// the delay the server asked for (default 3), and the longest delay
// waited for (default 30 s). It applies when the answer says the request
// was not processed, which is:
//
//   - a 503 whose problem code is "overloaded", for any method: the
//     server answers it from its connection and large-body guards, before
//     the request is routed, so no handler ran and nothing was written;
//   - a 429 or another 503, for a safe request only (GET, the idempotent
//     PUT of a context): artifactd sends neither with a Retry-After, so
//     such an answer comes from something in front of it, which does not
//     say whether a write went through.
//
// A Retry-After longer than longest, or ending past the deadline of the
// request's context, is not waited for: the refusal is returned at once
// as a *Problem whose RetryAfter says what the server asked. n = 0 turns
// this off: such answers are then handled as before (a safe request's 503
// is retried with the pauses of WithRetries; anything else is returned).
func WithRetryAfter(n int, longest time.Duration) Option {
	return func(c *Client) { c.waits, c.longest = n, longest }
}

// DefaultMaxAnswerBytes is the most bytes of a successful answer the
// client reads unless WithMaxAnswerBytes says otherwise: 1 GiB. The
// largest answers of the routes the client calls are streamed by the
// server, and the client decodes them whole: an audit (about 26 MB for a
// 100,000-deep answer, so some 260 MB for a million) and a comparison of
// runs (about 209 MB for a run of a million artifacts against a small
// one); an artifact's data is within the server's body limit (8 MiB by
// default, serve --max-body). State exports (GET .../state, every
// artifact with its data) are larger still, and the client does not read
// them.
const DefaultMaxAnswerBytes = 1 << 30

// Bounds of what is read of a refusal (a non-2xx answer). artifactd's
// problems are small (a detail, field errors, and for a quarantine the
// roots and one path), but an answer from something in front of it — a
// proxy's error page — may be of any size.
const (
	// MaxProblemBytes is the most bytes read of a refusal that is JSON
	// (a problem document), or WithMaxAnswerBytes when that is less.
	MaxProblemBytes = 16 << 20
	// MaxDetailBytes is the most bytes of a refusal that is not a problem
	// kept as its Problem.Detail (and read at all when it is not JSON):
	// the rest is cut, and the Detail ends with a marker saying so.
	MaxDetailBytes = 4 << 10
)

// ErrAnswerTooLarge is (wrapped in) the error of a call whose successful
// answer is longer than the client reads (WithMaxAnswerBytes). Such a
// call is not sent again.
var ErrAnswerTooLarge = errors.New("the answer is longer than the client reads")

// WithMaxAnswerBytes sets the most bytes of a successful answer read
// (DefaultMaxAnswerBytes by default); a longer answer is an error of the
// call, never decoded cut. Refusals are read to MaxProblemBytes at most,
// or n when that is less.
func WithMaxAnswerBytes(n int64) Option { return func(c *Client) { c.maxAnswer = n } }

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:7070").
func New(baseURL string, opts ...Option) *Client {
	// The API never redirects a request it serves: a redirect followed
	// would decode another resource's answer as this one's.
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: hc, retries: 2, backoff: 100 * time.Millisecond,
		waits: 3, longest: 30 * time.Second, maxAnswer: DefaultMaxAnswerBytes}
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
	// RetryAfter is the delay the answer's Retry-After header asked for
	// (0 without one, or for a date already past).
	RetryAfter time.Duration `json:"-"`
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

// IsOutcomeUnknown reports whether err is a write answered 503
// "commit-outcome-unknown": the server sent the write's commit to the
// database (PostgreSQL) and lost the answer, so the commit may or may not
// have landed. The client never sends such a write again on its own (only
// EnsureContext, an idempotent PUT, is retried after any 503). Read the
// branch head (Hash) or what else the write changes before retrying, since
// the commit may have landed, and retry with the head you read as Parent,
// so that a write that landed is refused as stale rather than applied
// twice.
func IsOutcomeUnknown(err error) bool { return IsCode(err, "commit-outcome-unknown") }

// IsNotFound reports whether err is a 404 problem.
func IsNotFound(err error) bool {
	var p *Problem
	return errors.As(err, &p) && p.Status == http.StatusNotFound
}

// decodeProblem is the Problem of a refusal whose body (all of it, or
// its start when cut) is body. A body that is not a problem document (a
// proxy's error page) becomes the Detail of an about:blank problem, cut to
// MaxDetailBytes.
func decodeProblem(method, u string, status int, body []byte, cut bool) *Problem {
	p := &Problem{Method: method, URL: u}
	if err := json.Unmarshal(body, p); err != nil || p.Type == "" {
		return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status,
			Detail: detailOf(body, cut), Method: method, URL: u}
	}
	if p.Status == 0 {
		// RFC 9457's status member is optional (a proxy's problem may
		// leave it out): the answer's status is the one that holds.
		p.Status = status
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

// detailOf is the Detail of a refusal whose body is not a problem: its
// text, at most MaxDetailBytes of it (cut at a character boundary), with
// a marker when anything was left out.
func detailOf(body []byte, cut bool) string {
	text := bytes.TrimSpace(body)
	if len(text) <= MaxDetailBytes && !cut {
		return string(text)
	}
	n := min(len(text), MaxDetailBytes)
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	// The read itself may have stopped inside a character (cut): drop
	// its first bytes too.
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			if !utf8.FullRune(text[i:n]) {
				n = i
			}
			break
		}
	}
	if cut {
		return string(text[:n]) + fmt.Sprintf(" … [cut: the answer was longer than %d bytes]", len(body))
	}
	return string(text[:n]) + fmt.Sprintf(" … [cut: %d of %d bytes shown]", n, len(text))
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

// encodeJSON is json.Marshal without its HTML escaping: "<", ">" and "&"
// go as themselves, not as six-byte \u003c escapes, so a body is as long
// as the server measures it against its limit (the server reads either
// form as the same value), not up to six times longer.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// do sends one request and decodes a 2xx JSON body into out (when not
// nil). A non-2xx answer is a *Problem. Safe requests are retried after a
// transport error or a 503; a refusal with a Retry-After that says the
// request was not processed is retried after that delay (WithRetryAfter).
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = encodeJSON(in); err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	safe := method == http.MethodGet || (method == http.MethodPut && strings.HasPrefix(path, "/v1/contexts/"))
	retries := 0
	if safe {
		retries = c.retries
	}
	waits := c.waits
	pause := c.backoff
	var last error // what the next attempt is sent again after
	for {
		status, hdr, raw, cut, err := c.send(ctx, method, path, body)
		if err == nil && status >= 200 && status < 300 {
			if out != nil && len(raw) > 0 {
				if err := json.Unmarshal(raw, out); err != nil {
					return status, fmt.Errorf("decode %s %s: %w", method, path, err)
				}
			}
			return status, nil
		}
		var wait time.Duration
		if err != nil {
			// The request may or may not have reached the server.
			if retries <= 0 || errors.Is(err, ErrAnswerTooLarge) {
				return 0, err
			}
			retries--
			wait, pause, last = pause, pause*2, err
		} else {
			p := decodeProblem(method, path, status, raw, cut)
			last = p
			delay, hasDelay := parseRetryAfter(hdr.Get("Retry-After"), time.Now())
			p.RetryAfter = delay
			switch {
			case c.waits > 0 && hasDelay && notProcessed(status, p, safe):
				if waits <= 0 || delay > c.longest {
					return status, p
				}
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
					return status, p
				}
				waits--
				wait = delay
			case status == http.StatusServiceUnavailable && retries > 0:
				retries--
				wait, pause = pause, pause*2
			default:
				return status, p
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%s %s: %w while waiting %v to send it again after: %v", method, path, ctx.Err(), wait, last)
		case <-t.C:
		}
	}
}

// notProcessed reports whether a refusal with HTTP status status that
// carried a Retry-After says its request was not processed, so that
// sending it again cannot write twice: a 503 "overloaded" comes from the
// guards that run before any handler (docs/API.md), whatever the method.
// Any other 503, and a 429, do not say so (artifactd sends neither with a
// Retry-After; a proxy in front may), so only a safe request is sent
// again after them.
func notProcessed(status int, p *Problem, safe bool) bool {
	switch status {
	case http.StatusServiceUnavailable:
		return safe || p.Code() == "overloaded"
	case http.StatusTooManyRequests:
		return safe
	}
	return false
}

// parseRetryAfter reads a Retry-After value, delta-seconds or an
// HTTP-date, as the delay from now; a date already past is no delay. It
// reports false for an absent or malformed value.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(math.MaxInt64/time.Second) {
			return math.MaxInt64, true // longer than any wait
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// send sends one request and reads its answer: a successful one whole
// (at most maxAnswer bytes, else an error), a refusal up to the bounds of
// refusals (MaxProblemBytes, MaxDetailBytes when it is not JSON), cut
// reporting that more was left unread.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (status int, hdr http.Header, raw []byte, cut bool, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, nil, false, fmt.Errorf("%s %s: %w", method, path, err)
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
		return 0, nil, nil, false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	ok := res.StatusCode >= 200 && res.StatusCode < 300
	limit := c.maxAnswer
	if limit <= 0 {
		limit = DefaultMaxAnswerBytes
	}
	if !ok {
		limit = min(limit, MaxProblemBytes)
		if !isJSON(res.Header.Get("Content-Type")) {
			limit = min(limit, MaxDetailBytes)
		}
	}
	if res.ContentLength > limit && ok {
		return 0, nil, nil, false, fmt.Errorf("%s %s: the answer is %d bytes: %w (%d; WithMaxAnswerBytes)", method, path, res.ContentLength, ErrAnswerTooLarge, limit)
	}
	raw, err = io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return 0, nil, nil, false, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if cut = int64(len(raw)) > limit; cut {
		if ok {
			// Never a cut answer decoded as the whole.
			return 0, nil, nil, false, fmt.Errorf("%s %s: %w (%d; WithMaxAnswerBytes)", method, path, ErrAnswerTooLarge, limit)
		}
		raw = raw[:limit]
	}
	return res.StatusCode, res.Header, raw, cut, nil
}

// isJSON reports whether a Content-Type is JSON: application/json,
// application/problem+json or another +json type.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
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
