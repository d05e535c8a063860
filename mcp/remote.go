package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/httpapi"
)

// maxAnswerBytes bounds an answer read from the server.
const maxAnswerBytes = 64 << 20

// Remote is the Backend over the /v1 HTTP API of an artifactd server. Each
// call is one request; the server's problem+json refusals come back as
// *Problem values. It is safe for concurrent use.
type Remote struct {
	base   string
	token  string
	client *http.Client
}

// NewRemote returns the Backend for the server at base (e.g.
// "http://127.0.0.1:7070"), authenticating with the bearer token (none
// when empty). A nil hc is a client with no timeout of its own (each
// call's context bounds it). Redirects are never followed, whatever hc's
// CheckRedirect (a copy of hc is used): the API never redirects a request
// it serves, so a redirect comes from something in front of it — the
// http.ServeMux of `artifactd serve` cleaning a path, a proxy — and the
// answer where it points would be taken for this request's. It is an
// error of the call instead.
func NewRemote(base, token string, hc *http.Client) *Remote {
	c := http.Client{}
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = noRedirect
	return &Remote{base: strings.TrimSuffix(base, "/"), token: token, client: &c}
}

// noRedirect is the CheckRedirect of a Remote's client.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewHandlerBackend returns the Backend that serves each call with h in
// this process (no socket): the calls pass through h's authentication and
// authorization with the Authorization header of the MCP request that made
// them (see Handler), so a tool needs exactly the scope its API route
// needs.
func NewHandlerBackend(h http.Handler) *Remote {
	return NewRemote("http://127.0.0.1", "", &http.Client{Transport: handlerTransport{h}})
}

// handlerTransport is an http.RoundTripper that answers with a handler.
type handlerTransport struct{ h http.Handler }

// RoundTrip implements http.RoundTripper. The request is marked as one
// whose body is in memory (httpapi.WithBodyInMemory): the /mcp request
// that carried the call took the large-body slot and the body deadline
// for these bytes (httpapi.Server.GuardBody, in Mount), and a slot taken
// again here would count them twice — with one slot, every large call
// would be refused.
func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.WithContext(httpapi.WithBodyInMemory(req.Context()))
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the http.ResponseWriter of handlerTransport.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// authKey carries the Authorization header of the MCP request a tool call
// came in on.
type authKey struct{}

// withAuthorization returns ctx carrying an Authorization header value.
func withAuthorization(ctx context.Context, header string) context.Context {
	if header == "" {
		return ctx
	}
	return context.WithValue(ctx, authKey{}, header)
}

// do sends one request and decodes a JSON answer into out, or returns the
// answer's text when out is nil.
func (b *Remote) do(ctx context.Context, method, path string, q url.Values, body, out any) (string, error) {
	u := b.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader = http.NoBody
	if body != nil {
		raw, err := encode(body)
		if err != nil {
			return "", fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h, ok := ctx.Value(authKey{}).(string); ok {
		req.Header.Set("Authorization", h)
	} else if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if len(raw) > maxAnswerBytes {
		// Never a cut answer passed on as whole.
		return "", fmt.Errorf("%s %s: the answer exceeds %d bytes; ask for less (a lower max_nodes or depth)", method, path, maxAnswerBytes)
	}
	if resp.StatusCode >= 300 {
		if p, ok := problemFromJSON(resp.StatusCode, raw); ok {
			return "", p
		}
		if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode < 400 {
			return "", fmt.Errorf("%s %s: the server answered %s to %s; the API never redirects, so something in front of it did (not followed)", method, path, resp.Status, loc)
		}
		return "", fmt.Errorf("%s %s: the server answered %s", method, path, resp.Status)
	}
	if out == nil {
		return string(raw), nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return "", fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return "", nil
}

// ctxPath is /v1/contexts/{ctx} followed by segs (route words and
// artifact ids), each escaped as one segment by client.PathEscape, the Go
// client's: "/" becomes %2F, and "." and ".." become %2E and %2E%2E, which
// neither URL resolution nor the http.ServeMux in front of the API in
// `artifactd serve` takes for dot segments (url.PathEscape leaves them as
// they are, the mux cleaned them away and redirected, and the call read
// another resource). An empty context or artifact id cannot be a segment
// either — the mux cleans "//" too — and names nothing (no id is empty):
// it is answered here with the 404 the API and the in-process backend
// answer.
func ctxPath(ctxID string, segs ...string) (string, error) {
	if ctxID == "" {
		return "", &Problem{Status: http.StatusNotFound, Code: "not-found", Detail: `context "": not found`}
	}
	p := "/v1/contexts/" + client.PathEscape(ctxID)
	for _, s := range segs {
		if s == "" {
			return "", noArtifactID()
		}
		p += "/" + client.PathEscape(s)
	}
	return p, nil
}

// call is do at ctxPath(ctxID, segs...) with the answer decoded into a
// new T: every call whose answer is one JSON document.
func call[T any](ctx context.Context, b *Remote, method string, q url.Values, body any, ctxID string, segs ...string) (*T, error) {
	path, err := ctxPath(ctxID, segs...)
	if err != nil {
		return nil, err
	}
	out := new(T)
	_, err = b.do(ctx, method, path, q, body, out)
	return result(out, err)
}

// query builds a query from name, value pairs, leaving out empty values.
func query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}

// PutArtifact implements Backend.
func (b *Remote) PutArtifact(ctx context.Context, ctxID string, in ArtifactBody) (*ArtifactWrite, error) {
	return call[ArtifactWrite](ctx, b, http.MethodPost, nil, in, ctxID, "artifacts")
}

// Commit implements Backend.
func (b *Remote) Commit(ctx context.Context, ctxID string, in CommitBody) (*CommitWrite, error) {
	return call[CommitWrite](ctx, b, http.MethodPost, nil, in, ctxID, "commits")
}

// Artifact implements Backend.
func (b *Remote) Artifact(ctx context.Context, ctxID, id, at string) (*ArtifactView, error) {
	return call[ArtifactView](ctx, b, http.MethodGet, query("at", at), nil, ctxID, "artifacts", id)
}

// noArtifactID is the refusal of an empty artifact id, which names no
// path of the server (…/artifacts/ is no artifact's): the not-found the
// server answers for an id it does not hold, naming the parameter id.
func noArtifactID() *Problem {
	return &Problem{Status: http.StatusNotFound, Code: "not-found", Detail: `no artifact ""`,
		Errors: []FieldError{{Parameter: "id", Rule: "exists", Detail: "no such id here"}}}
}

// RecordFetch implements Backend.
func (b *Remote) RecordFetch(ctx context.Context, ctxID string, in FetchBody) (*FetchWrite, error) {
	return call[FetchWrite](ctx, b, http.MethodPost, nil, in, ctxID, "fetches")
}

// RecordToolResult implements Backend.
func (b *Remote) RecordToolResult(ctx context.Context, ctxID string, in ToolResultBody) (*ArtifactWrite, error) {
	return call[ArtifactWrite](ctx, b, http.MethodPost, nil, in, ctxID, "tool-results")
}

// Verify implements Backend.
func (b *Remote) Verify(ctx context.Context, ctxID string, in VerifyBody) (*VerifyResult, error) {
	return call[VerifyResult](ctx, b, http.MethodPost, nil, in, ctxID, "verify")
}

// Provenance implements Backend.
func (b *Remote) Provenance(ctx context.Context, ctxID string, q ProvenanceQuery) (*Provenance, error) {
	depth := ""
	if q.Depth != nil {
		depth = strconv.Itoa(*q.Depth)
	}
	maxNodes := ""
	if q.MaxNodes != 0 {
		maxNodes = strconv.Itoa(q.MaxNodes)
	}
	v := query("at", q.At, "depth", depth, "max_nodes", maxNodes, "format", q.Format)
	path, err := ctxPath(ctxID, "artifacts", q.ID, "provenance")
	if err != nil {
		return nil, err
	}
	if q.Format == "mermaid" || q.Format == "dot" {
		// The JSON form first, for its commit and whether the walk was
		// cut (the text answer says neither); then the text at that
		// commit, as Audit does.
		meta := &Provenance{}
		if _, err := b.do(ctx, http.MethodGet, path, query("at", q.At, "depth", depth, "max_nodes", maxNodes), nil, meta); err != nil {
			return nil, err
		}
		v.Set("at", meta.Commit)
		text, err := b.do(ctx, http.MethodGet, path, v, nil, nil)
		if err != nil {
			return nil, err
		}
		return &Provenance{ID: q.ID, Commit: meta.Commit, Format: q.Format, Truncated: meta.Truncated, Text: text}, nil
	}
	out := &Provenance{}
	_, err = b.do(ctx, http.MethodGet, path, v, nil, out)
	out.Format = "json"
	return result(out, err)
}

// Audit implements Backend: the JSON report, and its Markdown when asked.
func (b *Remote) Audit(ctx context.Context, ctxID string, q AuditQuery) (*Audit, error) {
	path, err := ctxPath(ctxID, "audit", q.ID)
	if err != nil {
		return nil, err
	}
	if q.Format != "" && q.Format != "json" && q.Format != "markdown" {
		// Let the server name the rule.
		_, err = b.do(ctx, http.MethodGet, path, query("at", q.At, "format", q.Format), nil, nil)
		if err == nil {
			err = fmt.Errorf("audit: the server accepted format %q", q.Format)
		}
		return nil, err
	}
	out := new(Audit)
	if _, err := b.do(ctx, http.MethodGet, path, query("at", q.At), nil, out); err != nil {
		return nil, err
	}
	if q.Format == "markdown" {
		// The same commit as the JSON report, even if a writer was faster.
		md, err := b.do(ctx, http.MethodGet, path, query("at", out.Commit, "format", "markdown"), nil, nil)
		if err != nil {
			return nil, err
		}
		out.Markdown = md
	}
	return out, nil
}

// Diff implements Backend.
func (b *Remote) Diff(ctx context.Context, ctxID, from, to string) (*Diff, error) {
	return call[Diff](ctx, b, http.MethodGet, query("from", from, "to", to), nil, ctxID, "diff")
}

func result[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}
