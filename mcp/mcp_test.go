package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/mcp"
	"github.com/artifactd/artifactd/store"
)

const (
	writeToken = "write-token-0123456789"
	readToken  = "read-token-0123456789ab"
)

// api is a real API server over a real store in a temporary directory.
type api struct {
	st  *store.Store
	srv *httpapi.Server
}

func newAPI(t *testing.T, tokens string) *api {
	t.Helper()
	return newAPIWith(t, tokens, nil)
}

// newAPIWith is newAPI with options set by set (when not nil).
func newAPIWith(t *testing.T, tokens string, set func(o *httpapi.Options)) *api {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	reg := httpapi.NewRegistry()
	st, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	o := httpapi.Options{Store: st, Types: reg, Logger: log}
	if tokens != "" {
		if o.Tokens, err = httpapi.ParseTokens(tokens); err != nil {
			t.Fatal(err)
		}
	}
	if set != nil {
		set(&o)
	}
	a := &api{st: st, srv: httpapi.New(o)}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if n := a.srv.Panics(); n != 0 {
			t.Errorf("%d handler panics", n)
		}
	})
	return a
}

// serve serves the API as `artifactd serve` does (mcp.Mount: the MCP
// server at /mcp, the API behind the same http.ServeMux everywhere else).
func serve(t *testing.T, a *api) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(mcp.Mount(a.srv, mcp.Options{}))
	t.Cleanup(ts.Close)
	return ts
}

// createContext makes a context through the HTTP API.
func (a *api) createContext(t *testing.T, id, token string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/v1/contexts", strings.NewReader(`{"id":"`+id+`"}`))
	req.Host = "127.0.0.1" // an open server answers loopback Host values only
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	a.srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create context: %d %s", rec.Code, rec.Body)
	}
}

// connect opens an SDK client session to an MCP server over the in-memory
// transport.
func connect(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connectHTTP opens an SDK client session to endpoint over streamable
// HTTP, sending token.
func connectHTTP(t *testing.T, endpoint, token string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// call calls a tool; it fails the test on a protocol error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok calls a tool that must succeed and decodes its structured result.
func ok[T any](t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res := call(t, cs, name, args)
	var out T
	if res.IsError {
		t.Fatalf("%s: isError: %s", name, text(res))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v in %s", name, err, raw)
	}
	return out
}

// refused calls a tool that must be refused and returns the result text.
func refused(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s: want isError, got %s", name, text(res))
	}
	if res.StructuredContent != nil {
		t.Errorf("%s: a refusal carries structured content %v", name, res.StructuredContent)
	}
	return text(res)
}

func wantContains(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s: %q does not contain %q", what, got, s)
		}
	}
}

// checkTools lists the tools and checks each has input and output schemas
// that require "context".
func checkTools(t *testing.T, cs *sdk.ClientSession, allowFetch bool) {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Type       string                     `json:"type"`
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(in, &schema); err != nil || schema.Type != "object" || !slices.Contains(schema.Required, "context") {
			t.Errorf("%s: input schema %s does not require context", tool.Name, in)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
	}
	var want []string
	for _, n := range mcp.ToolNames {
		if n != "fetch_url" || allowFetch {
			want = append(want, n)
		}
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
}

// coreFlow is the scenario every transport runs: record, a quarantine
// refusal naming the root, check_trust, FAILED then RETRIEVED lifting the
// quarantine, tool results, reads, and verify.
func coreFlow(t *testing.T, cs *sdk.ClientSession, ctxID string) {
	t.Helper()
	q := ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{
		"context": ctxID, "id": "q1", "type": "question", "data": map[string]any{"text": "What does the widget cost?"}})
	if q.Commit == "" || q.Artifact.Trust == nil || q.Artifact.Trust.Status != "confirmed" {
		t.Fatalf("question: %+v", q)
	}
	first := q.Commit

	failed := ok[mcp.FetchWrite](t, cs, "submit_fetch", map[string]any{
		"context": ctxID, "id": "fetch:price", "url": "https://shop.example/p", "status": 200,
		"headers": map[string]any{"content-type": "application/json"}, "body": ""})
	if failed.Verdict != "FAILED" || failed.Artifact.ID != "fetch:price" {
		t.Fatalf("empty body: %+v", failed)
	}
	// Every door holds evidence and tool results to the request's shape:
	// a body with no address is no read, a file read names its path, a
	// successful tool result has an output.
	for _, c := range []struct {
		tool, want string
		args       map[string]any
	}{
		{"submit_fetch", "url", map[string]any{"context": ctxID, "id": "fetch:nowhere", "status": 200, "body": "a page of text long enough to be read"}},
		{"submit_fetch", "path", map[string]any{"context": ctxID, "id": "fetch:nofile", "kind": "file", "body": "a file's text long enough to be read"}},
		{"record_tool_result", "output", map[string]any{"context": ctxID, "id": "t:nothing", "tool": "t", "ok": true}},
	} {
		if got := refused(t, cs, c.tool, c.args); !strings.Contains(strings.ToLower(got), c.want) {
			t.Errorf("%s %v: %q does not name %s", c.tool, c.args, got, c.want)
		}
	}

	// A claim on the failed fetch is refused, naming the root and the path.
	msg := refused(t, cs, "record_artifact", map[string]any{
		"context": ctxID, "id": "c1", "type": "claim", "data": map[string]any{"text": "It costs 19.99"},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "fetch:price"}}})
	wantContains(t, "quarantine refusal", msg, "409", "quarantined", "Poison root: fetch:price", "Path: ", "fetch:price")
	// ...and nothing was written.
	wantContains(t, "refused write", refused(t, cs, "check_trust", map[string]any{"context": ctxID, "id": "c1"}), "404", "not-found")

	tr := ok[mcp.TrustAnswer](t, cs, "check_trust", map[string]any{"context": ctxID, "id": "fetch:price"})
	if tr.MayBuildOn || tr.Status != "poison_root" || tr.Reason == "" || tr.Type != "fetch_verdict" {
		t.Fatalf("check_trust of the failed fetch: %+v", tr)
	}

	// The re-fetch under the same id is RETRIEVED and confirms it.
	got := ok[mcp.FetchWrite](t, cs, "submit_fetch", map[string]any{
		"context": ctxID, "id": "fetch:price", "url": "https://shop.example/p", "status": 200,
		"headers": map[string]any{"content-type": "application/json"}, "body": `{"price": 19.99}`})
	if got.Verdict != "RETRIEVED" || got.Artifact.Version != 2 || !strings.Contains(got.Text, "19.99") {
		t.Fatalf("re-fetch: %+v", got)
	}
	tr = ok[mcp.TrustAnswer](t, cs, "check_trust", map[string]any{"context": ctxID, "id": "fetch:price"})
	if !tr.MayBuildOn || tr.Status != "confirmed" {
		t.Fatalf("check_trust after the re-fetch: %+v", tr)
	}

	c := ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{
		"context": ctxID, "id": "c1", "type": "claim", "data": map[string]any{"text": "It costs 19.99"},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "fetch:price"}}})
	if c.Artifact.Trust == nil || c.Artifact.Trust.Status != "confirmed" {
		t.Fatalf("claim: %+v", c)
	}
	ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{
		"context": ctxID, "id": "a1", "type": "answer", "data": map[string]any{"text": "19.99"},
		"edges": []any{map[string]any{"rel": "supported_by", "to": "c1"}}})
	l := ok[mcp.CommitWrite](t, cs, "link", map[string]any{"context": ctxID, "from": "a1", "rel": "responds_to", "to": "q1"})
	if l.Ops != 1 || l.Noop {
		t.Fatalf("link: %+v", l)
	}

	// Other refusals name the field.
	wantContains(t, "dangling edge", refused(t, cs, "record_artifact", map[string]any{
		"context": ctxID, "type": "note", "data": map[string]any{"text": "x"},
		"edges": []any{map[string]any{"rel": "mentions", "to": "nowhere"}}}), "422", "/edges/0")
	wantContains(t, "unknown context", refused(t, cs, "record_artifact", map[string]any{
		"context": ctxID + "-missing", "type": "note", "data": map[string]any{"text": "x"}}), "404")

	te := ok[mcp.ArtifactWrite](t, cs, "record_tool_result", map[string]any{
		"context": ctxID, "tool": "search", "ok": false, "error": "upstream timeout; key=sk-abcdefghijklmnopqrstuvwx"})
	if te.Artifact.Type != "tool_error" || te.Artifact.Trust == nil || te.Artifact.Trust.Status != "poison_root" {
		t.Fatalf("tool error: %+v", te)
	}

	p := ok[mcp.Provenance](t, cs, "provenance", map[string]any{"context": ctxID, "id": "a1"})
	var ids []string
	for _, n := range p.Nodes {
		ids = append(ids, n.ID)
	}
	if !slices.Contains(ids, "fetch:price") || !slices.Contains(ids, "c1") || len(p.Edges) < 2 {
		t.Fatalf("provenance: %+v", p)
	}
	// The HTTP route's bounds hold on every transport.
	for _, q := range []map[string]any{{"depth": -7}, {"depth": 1001}, {"max_nodes": 100000000}, {"max_nodes": -1}} {
		q["context"], q["id"] = ctxID, "a1"
		wantContains(t, fmt.Sprint("provenance ", q), refused(t, cs, "provenance", q), "400")
	}
	pm := ok[mcp.Provenance](t, cs, "provenance", map[string]any{"context": ctxID, "id": "a1", "format": "mermaid"})
	wantContains(t, "mermaid", pm.Text, "flowchart")

	au := ok[mcp.Audit](t, cs, "audit", map[string]any{"context": ctxID, "id": "a1", "format": "markdown"})
	if au.Answer != "a1" || au.Trust.Status != "confirmed" || len(au.Artifacts) != 3 || au.Markdown == "" {
		t.Fatalf("audit: %+v", au)
	}
	if len(au.Sources) != 1 || au.Sources[0].Locator != "https://shop.example/p" {
		t.Fatalf("audit sources: %+v", au.Sources)
	}

	d := ok[mcp.Diff](t, cs, "diff", map[string]any{"context": ctxID, "from": first})
	var added []string
	for _, a := range d.Added {
		added = append(added, a.ID)
	}
	if !slices.Contains(added, "c1") || !slices.Contains(added, "a1") || slices.Contains(added, "q1") {
		t.Fatalf("diff added %v", added)
	}

	v := ok[mcp.VerifyResult](t, cs, "verify", map[string]any{"context": ctxID, "hash": te.ContextHash})
	if !v.Match || v.ContextHash != te.ContextHash {
		t.Fatalf("verify: %+v", v)
	}
	v = ok[mcp.VerifyResult](t, cs, "verify", map[string]any{"context": ctxID, "hash": q.ContextHash})
	if v.Match || v.MatchesCommit != q.Commit {
		t.Fatalf("verify of an older hash: %+v", v)
	}
}

// TestInProcess runs the scenario over the in-process backend.
func TestInProcess(t *testing.T) {
	a := newAPI(t, "")
	a.createContext(t, "run", "")
	cs := connect(t, mcp.NewServer(mcp.NewInProcess(a.srv.Service(), nil), mcp.Options{}))
	checkTools(t, cs, false)
	coreFlow(t, cs, "run")
}

// TestRemote runs the scenario over the HTTP backend against a real server
// with tokens, and lists fetch_url when allowed.
func TestRemote(t *testing.T) {
	a := newAPI(t, writeToken+" write *")
	ts := serve(t, a)
	a.createContext(t, "run", writeToken)
	cs := connect(t, mcp.NewServer(mcp.NewRemote(ts.URL, writeToken, nil), mcp.Options{AllowFetch: true}))
	checkTools(t, cs, true)
	coreFlow(t, cs, "run")
	// The server was not started with --allow-fetch: 403, as isError.
	wantContains(t, "fetch_url", refused(t, cs, "fetch_url", map[string]any{"context": "run", "url": "https://example.com/"}), "403")

	// A wrong token is the server's 401.
	bad := connect(t, mcp.NewServer(mcp.NewRemote(ts.URL, "wrong-token-0123456789", nil), mcp.Options{}))
	wantContains(t, "bad token", refused(t, bad, "check_trust", map[string]any{"context": "run", "id": "q1"}), "401", "unauthorized")
}

// TestStreamableHTTP runs the scenario over streamable HTTP at /mcp, the
// way serve mounts it, and checks that the API's tokens and scopes hold
// for every tool call.
func TestStreamableHTTP(t *testing.T) {
	a := newAPI(t, writeToken+" write run*;"+readToken+" read run")
	ts := serve(t, a) // closed after the sessions (cleanups run last first)
	a.createContext(t, "run", writeToken)
	a.createContext(t, "run2", writeToken)

	cs, err := connectHTTP(t, ts.URL+"/mcp", writeToken)
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, cs, false)
	coreFlow(t, cs, "run")

	// A read token reads its context, cannot write it, cannot read another.
	ro, err := connectHTTP(t, ts.URL+"/mcp", readToken)
	if err != nil {
		t.Fatal(err)
	}
	if tr := ok[mcp.TrustAnswer](t, ro, "check_trust", map[string]any{"context": "run", "id": "a1"}); !tr.MayBuildOn {
		t.Fatalf("read token check_trust: %+v", tr)
	}
	wantContains(t, "read token writes", refused(t, ro, "record_artifact", map[string]any{
		"context": "run", "type": "note", "data": map[string]any{"text": "x"}}), "403", "forbidden")
	wantContains(t, "read token, other context", refused(t, ro, "check_trust", map[string]any{"context": "run2", "id": "a1"}), "403")

	// Without a valid token /mcp answers the API's 401 before any session.
	for _, tok := range []string{"", "unknown-token-0123456789"} {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("token %q: %d %s %s", tok, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestGuardOpenServerHost: on a server with no tokens, /mcp refuses a Host
// that is not a loopback name with the API's 421, as every API route does
// (a web page reaching it through DNS rebinding), and lets loopback in.
func TestGuardOpenServerHost(t *testing.T) {
	a := newAPI(t, "")
	h := mcp.Guard(a.srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "evil.example:7070": http.StatusMisdirectedRequest,
		"127.0.0.1:7070": http.StatusNoContent, "localhost": http.StatusNoContent} {
		req := httptest.NewRequest("POST", "/mcp", bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)))
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want || (want != http.StatusNoContent && rec.Header().Get("Content-Type") != "application/problem+json") {
			t.Errorf("Host %s: %d %s, want %d", host, rec.Code, rec.Header().Get("Content-Type"), want)
		}
	}
}

// TestSessionBoundToItsToken: a session opened with one token answers a
// request that carries another valid token, with that session's id, with
// 403 — a POST and a DELETE alike — and keeps answering its own token (the
// SDK binds a session to the user the Guard names, a digest of the
// token). A token may hold spaces, as the API reads it (the rest of the
// header after "Bearer "): such a session was not bound, and any other
// token could use it or end it.
func TestSessionBoundToItsToken(t *testing.T) {
	const spaced = "a write token with spaces 0123"
	a := newAPI(t, `[{"token":"`+writeToken+`","scope":"write","contexts":["run*"]},`+
		`{"token":"`+spaced+`","scope":"write","contexts":["run*"]},`+
		`{"token":"`+readToken+`","scope":"read","contexts":["run"]}]`)
	ts := serve(t, a)
	a.createContext(t, "run", writeToken)

	for _, owner := range []string{writeToken, spaced} {
		cs, err := connectHTTP(t, ts.URL+"/mcp", owner)
		if err != nil {
			t.Fatal(err)
		}
		send := func(method, token string) (int, string) {
			var body io.Reader
			if method == http.MethodPost {
				body = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`)
			}
			req, _ := http.NewRequest(method, ts.URL+"/mcp", body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", cs.ID())
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(raw)
		}
		for _, other := range []string{readToken, writeToken, spaced} {
			if other == owner {
				continue
			}
			for _, method := range []string{http.MethodPost, http.MethodDelete} {
				if code, body := send(method, other); code != http.StatusForbidden {
					t.Errorf("session of %q: %s with token %q: %d %.80s, want 403", owner, method, other, code, body)
				}
			}
		}
		if code, body := send(http.MethodPost, owner); code != http.StatusOK || !strings.Contains(body, "record_artifact") {
			t.Errorf("session of %q, its own token: %d %s", owner, code, body)
		}
		// Its tool calls are authorized with the token as sent.
		ok[mcp.ArtifactWrite](t, cs, "record_artifact", map[string]any{"context": "run", "type": "note", "data": map[string]any{"text": owner}})
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Errorf("session of %q, its client after the refusals: %v", owner, err)
		}
	}
}

// hostStatus sends a request for path to ts with Host host (and a bearer
// token when not empty): an MCP initialize for /mcp, a GET otherwise. It
// returns the status and the problem code of a refusal ("" for none).
func hostStatus(t *testing.T, ts *httptest.Server, path, host, token string) (int, string) {
	t.Helper()
	method, body := http.MethodGet, ""
	if path == "/mcp" {
		method, body = http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	}
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p struct {
		Type string `json:"type"`
	}
	if resp.StatusCode >= 300 && json.Unmarshal(raw, &p) == nil {
		return resp.StatusCode, strings.TrimPrefix(p.Type, "urn:artifactd:problem:")
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, "not a problem: " + string(raw)
	}
	return resp.StatusCode, ""
}

// TestMCPFollowsTheAPIsHostRule: /mcp answers a Host exactly as the API
// does, on a loopback listener (a server behind a reverse proxy that keeps
// the public Host): an open server takes loopback names and its
// --allow-host names and refuses any other with the API's 421; a server
// with tokens takes any Host. The SDK's own DNS-rebinding guard answered
// 403 "invalid Host header" to every Host but a loopback one, where the
// API answered 200.
func TestMCPFollowsTheAPIsHostRule(t *testing.T) {
	open := newAPIWith(t, "", func(o *httpapi.Options) { o.AllowHosts = []string{"artifactd.example.com"} })
	open.createContext(t, "c", "")
	withTokens := newAPI(t, writeToken+" write *")
	withTokens.createContext(t, "c", writeToken)
	for _, c := range []struct {
		name  string
		a     *api
		token string
		hosts map[string]int // Host → the API's status
	}{
		{"open", open, "", map[string]int{"artifactd.example.com": 200, "artifactd.example.com:443": 200, "localhost:7070": 200, "127.0.0.1": 200,
			"evil.example": 421, "evil.example:7070": 421}},
		{"tokens", withTokens, writeToken, map[string]int{"artifactd.example.com": 200, "evil.example": 200, "127.0.0.1": 200}},
	} {
		ts := serve(t, c.a)
		for host, want := range c.hosts {
			apiCode, apiProblem := hostStatus(t, ts, "/v1/contexts/c", host, c.token)
			mcpCode, mcpProblem := hostStatus(t, ts, "/mcp", host, c.token)
			if apiCode != want {
				t.Errorf("%s server, Host %s: the API answered %d %s, want %d", c.name, host, apiCode, apiProblem, want)
			}
			if mcpCode != apiCode || mcpProblem != apiProblem {
				t.Errorf("%s server, Host %s: /mcp answered %d %s, the API %d %s", c.name, host, mcpCode, mcpProblem, apiCode, apiProblem)
			}
		}
	}
}
