package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/artifactd/artifactd/store"
)

// env is a real server over a real store in a temporary directory.
type env struct {
	t     *testing.T
	st    *store.Store
	srv   *Server
	ts    *httptest.Server
	token string // sent as a bearer token when set
	// so and o are what the store and the server were opened with, and
	// again points so at the same store anew (reopen).
	so    store.Options
	o     Options
	again func(*store.Options)
}

type envOption func(*Options, *store.Options)

func withTokens(text string) envOption {
	return func(o *Options, _ *store.Options) {
		tok, err := ParseTokens(text)
		if err != nil {
			panic(err)
		}
		o.Tokens = tok
	}
}

func withMaxBody(n int64) envOption {
	return func(o *Options, _ *store.Options) { o.MaxBodyBytes = n }
}

// withCacheBytes gives the store a cache budget of n bytes: with a small
// one, a view of an old commit is read through its state map rather than
// loaded whole.
func withCacheBytes(n int64) envOption {
	return func(_ *Options, so *store.Options) { so.CacheBytes = n }
}

func withClock(now time.Time) envOption {
	return func(_ *Options, so *store.Options) { so.Clock = func() time.Time { return now } }
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	reg := NewRegistry()
	tmp := t.TempDir()
	so := store.Options{Dir: tmp, Logger: discardLogger()}
	o := Options{Types: reg, Logger: discardLogger()}
	for _, f := range opts {
		f(&o, &so)
	}
	again := func(*store.Options) {}
	if so.Dir == tmp {
		again = testBackend(t, &so) // a test that names its directory reads Badger's files
	}
	st, err := store.Open(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	o.Store = st
	srv := New(o)
	ts := httptest.NewServer(srv)
	e := &env{t: t, st: st, srv: srv, ts: ts, so: so, o: o, again: again}
	t.Cleanup(e.close)
	return e
}

// close stops the server and closes the store.
func (e *env) close() {
	e.ts.Close()
	if err := e.st.Close(); err != nil {
		e.t.Errorf("close store: %v", err)
	}
	if n := e.srv.Panics(); n != 0 {
		e.t.Errorf("%d handler panics were recovered", n)
	}
}

// reopen restarts the server over its store opened again (on the backend
// the test runs on): the heads are then read through their state maps.
func (e *env) reopen() {
	e.t.Helper()
	e.close()
	e.again(&e.so)
	st, err := store.Open(context.Background(), e.so)
	if err != nil {
		e.t.Fatal(err)
	}
	reg := NewRegistry()
	if err := reg.Load(context.Background(), st); err != nil {
		e.t.Fatal(err)
	}
	e.o.Store, e.o.Types = st, reg
	e.st, e.srv = st, New(e.o)
	e.ts = httptest.NewServer(e.srv)
}

// resp is a response read in full.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) String() string { return string(r.body) }

// obj decodes the body as a JSON object.
func (r *resp) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object (%v): %s", err, r.body)
	}
	return m
}

// req is one request; body is a string (sent as is) or a value (JSON).
type req struct {
	method, path string
	body         any
	header       map[string]string
}

func (e *env) send(q req) *resp {
	e.t.Helper()
	var rd io.Reader
	ct := ""
	switch b := q.body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/json"
	case []byte:
		rd, ct = bytes.NewReader(b), "application/octet-stream"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd, ct = bytes.NewReader(raw), "application/json"
	}
	hr, err := http.NewRequest(q.method, e.ts.URL+q.path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct != "" {
		hr.Header.Set("Content-Type", ct)
	}
	if e.token != "" {
		hr.Header.Set("Authorization", "Bearer "+e.token)
	}
	for k, v := range q.header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	client := e.ts.Client()
	if hr.Header.Get("Expect") == "100-continue" {
		// A request the server refuses before reading its body (413) and
		// then closes: the client must wait for the server's word before
		// sending the body, or its write may meet a reset before it reads
		// the refusal.
		client = &http.Client{Transport: &http.Transport{ExpectContinueTimeout: 10 * time.Second}}
	}
	res, err := client.Do(hr)
	if err != nil {
		e.t.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: body}
}

func (e *env) get(path string) *resp { return e.send(req{method: "GET", path: path}) }

func (e *env) post(path string, body any) *resp {
	return e.send(req{method: "POST", path: path, body: body})
}

// must checks a response's status and returns its object body.
func (e *env) must(r *resp, status int) map[string]any {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if len(r.body) == 0 {
		return nil
	}
	return r.obj(e.t)
}

func (e *env) createContext(id, mode string) {
	e.t.Helper()
	body := map[string]any{"id": id}
	if mode != "" {
		body["quarantine"] = mode
	}
	e.must(e.post("/v1/contexts", body), 201)
}

// hash returns the context hash of main.
func (e *env) hash(ctxID string) string {
	e.t.Helper()
	m := e.must(e.get("/v1/contexts/"+ctxID+"/hash"), 200)
	return m["context_hash"].(string)
}

// ---- the ten-step plan ----

type planStep struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Type       string          `json:"type"`
	ProducedBy string          `json:"produced_by"`
	Data       json.RawMessage `json:"data"`
	Edges      []EdgeInput     `json:"edges"`
	// Evidence is a fetch step's evidence exactly as the plan gives it.
	Evidence json.RawMessage `json:"evidence"`
}

func loadPlan(t *testing.T) []planStep {
	t.Helper()
	raw, err := os.ReadFile("../testdata/poison-plan/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Steps []planStep `json:"steps"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p.Steps
}

// fetchBody is a fetch step's evidence as a POST .../fetches body: the
// plan's evidence with the step id.
func (s planStep) fetchBody(t *testing.T) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(s.Evidence, &body); err != nil {
		t.Fatal(err)
	}
	body["id"] = s.ID
	return body
}

// writeVerdict posts a fetch step's evidence to the gate, which decides
// the verdict: the empty body (s1) is FAILED (transport.empty_body), the
// others RETRIEVED.
func (e *env) writeVerdict(ctxID string, s planStep) {
	e.t.Helper()
	out := e.must(e.post("/v1/contexts/"+ctxID+"/fetches", s.fetchBody(e.t)), 201)
	want := map[bool]string{true: "FAILED", false: "RETRIEVED"}[s.ID == "s1"]
	if out["verdict"] != want {
		e.t.Fatalf("%s: verdict %v, want %s: %v", s.ID, out["verdict"], want, out)
	}
	if s.ID == "s1" && out["reason"] != "transport.empty_body" {
		e.t.Fatalf("s1: reason %v", out["reason"])
	}
	// Oracle: the trust the write reports is what a read explains.
	w := out["artifact"].(map[string]any)["trust"].(map[string]any)
	got := e.must(e.get("/v1/contexts/"+ctxID+"/artifacts/"+s.ID), 200)["trust"].(map[string]any)
	if w["status"] != got["status"] || fmt.Sprint(w["reason"]) != fmt.Sprint(got["reason"]) {
		e.t.Errorf("%s: write says %v, read says %v", s.ID, w, got)
	}
}

func (s planStep) input() map[string]any {
	return map[string]any{"id": s.ID, "type": s.Type, "produced_by": s.ProducedBy, "data": s.Data, "edges": s.Edges}
}

func strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, len(a))
	for i, x := range a {
		out[i], _ = x.(string)
	}
	return out
}

func decodeForTest(s string, v *any) error {
	x, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	*v = x
	return err
}
