package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/gate/render"
	"github.com/artifactd/artifactd/internal/testenv"
	"github.com/artifactd/artifactd/store"
)

// pageSite serves an article at /article and an empty JSON answer at
// /empty, counting requests. Every fetch in these tests aims at it, on
// loopback.
func pageSite(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/article", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><head><title>Prices</title></head><body><article><p>"+
			strings.Repeat("Item 42 costs 19.99 USD in every store this week. ", 8)+"</p></article></body></html>")
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, &hits
}

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := Run(context.Background(), args, &out, &errb)
	return rc, out.String(), errb.String()
}

// TestFetchCommandStore: `artifactd fetch URL --context ID --data DIR`
// fetches in-process under the address policy and records the verdict.
func TestFetchCommandStore(t *testing.T) {
	site, hits := pageSite(t)
	dir := t.TempDir()
	st, _, err := openAPIStore(context.Background(), dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateContext(context.Background(), "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// The default policy refuses loopback: nothing is fetched or stored.
	rc, _, stderr := run("fetch", site.URL+"/article", "--context", "c", "--data", dir)
	if rc != exitUsage || !strings.Contains(stderr, "loopback") || hits.Load() != 0 {
		t.Fatalf("default policy: exit %d, hits %d: %s", rc, hits.Load(), stderr)
	}
	rc, stdout, stderr := run("fetch", site.URL+"/article", "--context", "c", "--id", "page", "--data", dir, "--allow-private-fetch")
	if rc != exitOK || !strings.HasPrefix(stdout, "RETRIEVED confirmed\n  page version 1 in c") {
		t.Fatalf("exit %d: %s%s", rc, stdout, stderr)
	}
	rc, stdout, _ = run("fetch", site.URL+"/empty", "--context", "c", "--id", "empty", "--data", dir, "--allow-private-fetch", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if rc != exitMismatch || out["verdict"] != "FAILED" || out["reason"] != "transport.empty_body" {
		t.Fatalf("exit %d: %v", rc, out)
	}
	if data := out["artifact"].(map[string]any)["data"].(map[string]any); data["fetched_by"] != "artifactd" {
		t.Fatalf("%v", data)
	}
	rc, stdout, _ = run("log", "--data", dir, "--context", "c")
	if rc != 0 || strings.Count(stdout, "put ") != 2 {
		t.Fatalf("log: %d %s", rc, stdout)
	}
	if rc, _, _ := run("fetch", site.URL+"/article", "--context", "nope", "--data", dir, "--allow-private-fetch"); rc != exitUsage {
		t.Fatalf("unknown context: exit %d", rc)
	}
	// --secrets masks the fetched text stored and shown, as serve's does.
	secrets := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(secrets, []byte("19.99 USD\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, stdout, stderr = run("fetch", site.URL+"/article", "--context", "c", "--id", "masked", "--data", dir, "--allow-private-fetch", "--secrets", secrets, "--json")
	out = nil
	if err := json.Unmarshal([]byte(stdout), &out); rc != exitOK || err != nil {
		t.Fatalf("--secrets: exit %d: %s%s", rc, stdout, stderr)
	}
	if text, _ := out["text"].(string); text == "" || strings.Contains(text, "19.99") {
		t.Fatalf("the secret in the fetched text: %q", text)
	}
	if rc, _, stderr := run("fetch", site.URL+"/article", "--context", "c", "--server", "http://127.0.0.1:1", "--secrets", secrets); rc != exitUsage || !strings.Contains(stderr, "server's flags") {
		t.Fatalf("--secrets with --server: exit %d: %s", rc, stderr)
	}
}

// TestFetchCommandServer: through a running server, which decides whether
// it may fetch.
func TestFetchCommandServer(t *testing.T) {
	site, hits := pageSite(t)
	serveWith := func(allowFetch, allowPrivate bool) string {
		st, reg, err := openAPIStore(context.Background(), t.TempDir(), discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.CreateContext(context.Background(), "c", ""); err != nil {
			t.Fatal(err)
		}
		cfg := serveConfig{Logger: discardLogger()}
		if err := gateTiers(&cfg, allowFetch, allowPrivate, false); err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(newServer(st, reg, cfg))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	off := serveWith(false, false)
	if rc, _, stderr := run("fetch", site.URL+"/article", "--context", "c", "--server", off); rc != exitUsage || !strings.Contains(stderr, "--allow-fetch") {
		t.Fatalf("fetch off: %d %s", rc, stderr)
	}
	public := serveWith(true, false)
	if rc, _, stderr := run("fetch", site.URL+"/article", "--context", "c", "--server", public); rc != exitUsage || !strings.Contains(stderr, "is in the loopback range") {
		t.Fatalf("public only: %d %s", rc, stderr)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the site", hits.Load())
	}
	dev := serveWith(true, true)
	rc, stdout, stderr := run("fetch", site.URL+"/article", "--context", "c", "--server", dev+"/", "--id", "a")
	if rc != exitOK || !strings.HasPrefix(stdout, "RETRIEVED confirmed\n  a version 1") {
		t.Fatalf("exit %d: %s%s", rc, stdout, stderr)
	}
	if rc, stdout, _ := run("fetch", site.URL+"/empty", "--context", "c", "--server", dev); rc != exitMismatch || !strings.HasPrefix(stdout, "FAILED poison_root (transport.empty_body)") {
		t.Fatalf("empty: %d %s", rc, stdout)
	}
}

func TestFetchCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"fetch"},
		{"fetch", "https://example.com/"},
		{"fetch", "--context", "c"},
		{"fetch", "https://example.com/", "https://example.org/", "--context", "c"},
		{"fetch", "https://example.com/", "--context", "c", "--server", "http://127.0.0.1:1", "--render"},
		{"fetch", "https://example.com/", "--context", "c", "--data", "/nonexistent/artifactd-data"},
	} {
		if rc, _, _ := run(args...); rc != exitUsage {
			t.Errorf("%v: exit %d", args, rc)
		}
	}
	if rc, _, stderr := run("serve", "--data", t.TempDir(), "--allow-private-fetch"); rc != exitUsage || !strings.Contains(stderr, "needs --allow-fetch") {
		t.Errorf("serve --allow-private-fetch alone: %d %s", rc, stderr)
	}
	var out bytes.Buffer
	Run(context.Background(), []string{"help"}, &out, io.Discard)
	if !strings.Contains(out.String(), "fetch ") {
		t.Errorf("usage does not list fetch:\n%s", out.String())
	}
}

// TestFetchCommandRender: `fetch --render` renders a script shell (whose
// external script comes through the policy-checked fetcher) and records
// the rendered verdict. It needs Chromium: it skips without one, except
// under CI.
func TestFetchCommandRender(t *testing.T) {
	if _, err := render.FindBrowser(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	var hits atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title>Shop</title><script src="/app.js"></script></head><body><div id="root"></div></body></html>`)
	})
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `document.addEventListener("DOMContentLoaded", function () { document.getElementById("root").innerHTML = "<article><p>%s</p></article>"; });`,
			strings.Repeat("Item 42 costs 19.99 USD in every store this week. ", 10))
	})
	site := httptest.NewServer(mux)
	defer site.Close()
	dir := t.TempDir()
	st, _, err := openAPIStore(context.Background(), dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateContext(context.Background(), "c", ""); err != nil {
		t.Fatal(err)
	}
	st.Close()
	rc, stdout, stderr := run("fetch", site.URL+"/app", "--context", "c", "--data", dir, "--allow-private-fetch", "--render", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || rc != exitOK {
		t.Fatalf("exit %d: %v %s%s", rc, err, stdout, stderr)
	}
	data := out["artifact"].(map[string]any)["data"].(map[string]any)
	if out["verdict"] != "RETRIEVED" || out["rendered"] != true || data["rendered_from"].(map[string]any)["receipt"].(map[string]any)["reason"] != "extraction.script_shell" {
		t.Fatalf("%v", out)
	}
	if hits.Load() != 1 {
		t.Fatalf("app.js fetched %d times", hits.Load())
	}
}
