package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newRecorder(h http.Handler, method, path string) []byte {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1" // an open server answers loopback Host values only
	h.ServeHTTP(rec, req)
	return rec.Body.Bytes()
}

// TestBench runs the load generator against an in-process server on a
// loopback port with a fixed number of requests.
func TestBench(t *testing.T) {
	var out, errb bytes.Buffer
	rc := Run(context.Background(), []string{"bench", "--data", t.TempDir(), "--clients", "4", "--requests", "40", "--json"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("bench: exit %d: %s %s", rc, out.String(), errb.String())
	}
	var res benchResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res.Commits != 40 || res.Errors != 0 || res.P99 < res.P50 || res.PerSecond <= 0 || !strings.HasPrefix(res.Target, "http://127.0.0.1:") {
		t.Fatalf("result %+v", res)
	}
	if rc := Run(context.Background(), []string{"bench", "--addr", "http://127.0.0.1:1", "--data", "x"}, io.Discard, io.Discard); rc != exitUsage {
		t.Fatalf("--addr with --data: exit %d", rc)
	}
}
