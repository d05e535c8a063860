package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store"
)

func withLogger(l *slog.Logger) envOption {
	return func(o *Options, _ *store.Options) { o.Logger = l }
}

// TestInternalErrorsDoNotLeak: a store failure is a 5xx problem whose
// detail says nothing about the cause, and the cause is logged.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, withLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	e.createContext("c", "")
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*resp{e.get("/v1/contexts/c/state"), e.post("/v1/contexts/c/artifacts", map[string]any{"type": "note", "data": map[string]any{"text": "x"}})} {
		if r.status < 500 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if bytes.Contains(bytes.ToLower(r.body), []byte("badger")) || bytes.Contains(r.body, []byte("closed")) && r.status == 500 {
			t.Errorf("internal text leaked: %s", r.body)
		}
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("internal error not logged:\n%s", logs.String())
	}
}

// FuzzWrite sends arbitrary bodies to the write routes: every answer is a
// success or a problem, and nothing panics.
func FuzzWrite(f *testing.F) {
	for _, s := range []string{
		`{"type":"note","data":{"text":"a"}}`,
		`{"id":"x","type":"claim","data":{"text":"t","value":1e400}}`,
		`{"type":"note","data":{"text":"\ud800"}}`,
		`{"ops":[{"op":"put","artifact":{"id":"a","type":"note","data":{"text":"a"}}},{"op":"link","from":"a","rel":"uses","to":"a"}]}`,
		`{"ops":[{"op":"unlink","from":"a","rel":"cites","to":"b"},{"op":"delete","id":""}]}`,
		`{"id":"y","type":"document","data":{"blob":"sha256:00"},"edges":[{"rel":"quotes","to":"x","attrs":{"k":[1,{"a":null}]}}]}`,
		`[]`, `null`, `{"type":"note","data":{"text":"a"},"parent":"` + strings.Repeat("a", 64) + `"}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	reg := NewRegistry()
	st, err := store.Open(f.Context(), store.Options{Dir: f.TempDir(), Logger: discardLogger(), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	srv := New(Options{Store: st, Types: reg, Logger: discardLogger()})
	if _, err := st.CreateContext(f.Context(), "fz", "observe"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string, commit bool) {
		path := "/v1/contexts/fz/artifacts"
		if commit {
			path = "/v1/contexts/fz/commits"
		}
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Host = "127.0.0.1" // an open server refuses other Host values (421)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { srv.ServeHTTP(rec, req); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("%q: no answer after 20s\n%s", body, buf[:runtime.Stack(buf, true)])
		}
		if srv.Panics() != 0 {
			t.Fatalf("panic on %q", body)
		}
		ct := rec.Header().Get("Content-Type")
		switch {
		case rec.Code < 300 && ct == "application/json":
		case rec.Code >= 400 && rec.Code < 500 && ct == "application/problem+json":
		default:
			t.Fatalf("%q: %d %s %s", body, rec.Code, ct, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer: %s", rec.Body)
		}
	})
}
