package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
)

// ---- an independent implementation of HASHING.md, for the test only ----

// jcs writes the RFC 8785 form of the values leaves hold: strings,
// integers (json.Number in integer form) and objects of them. Anything
// else fails the test.
func jcs(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	var write func(v any)
	write = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteByte('"')
			for _, r := range x {
				switch {
				case r == '"':
					b.WriteString(`\"`)
				case r == '\\':
					b.WriteString(`\\`)
				case r == '\b':
					b.WriteString(`\b`)
				case r == '\f':
					b.WriteString(`\f`)
				case r == '\n':
					b.WriteString(`\n`)
				case r == '\r':
					b.WriteString(`\r`)
				case r == '\t':
					b.WriteString(`\t`)
				case r < 0x20:
					fmt.Fprintf(&b, `\u%04x`, r)
				default:
					b.WriteRune(r)
				}
			}
			b.WriteByte('"')
		case json.Number:
			if !regexp.MustCompile(`^-?(0|[1-9][0-9]{0,15})$`).MatchString(string(x)) {
				t.Fatalf("jcs: only integers here, got %s", x)
			}
			b.WriteString(string(x))
		case int64:
			fmt.Fprint(&b, x)
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			// Sort by UTF-16 code units.
			sort.Slice(keys, func(i, j int) bool {
				return slices.Compare(utf16.Encode([]rune(keys[i])), utf16.Encode([]rune(keys[j]))) < 0
			})
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				write(k)
				b.WriteByte(':')
				write(x[k])
			}
			b.WriteByte('}')
		default:
			t.Fatalf("jcs: unexpected %T", v)
		}
	}
	write(v)
	return b.Bytes()
}

// stateExport is GET /v1/contexts/{ctx}/state, decoded with numbers kept
// as written and data kept as the bytes received.
type stateExport struct {
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
	Artifacts   []struct {
		ID          string          `json:"id"`
		Type        string          `json:"type"`
		Version     json.Number     `json:"version"`
		ProducedBy  string          `json:"produced_by"`
		ContentHash string          `json:"content_hash"`
		Data        json.RawMessage `json:"data"`
	} `json:"artifacts"`
	Edges []struct {
		From  string         `json:"from"`
		Rel   string         `json:"rel"`
		To    string         `json:"to"`
		Attrs map[string]any `json:"attrs"`
	} `json:"edges"`
}

// recomputeHash is HASHING.md §3–4 from the export alone. It also checks
// every content hash against the data bytes received (the server sends
// the canonical bytes unchanged).
func recomputeHash(t *testing.T, raw []byte) string {
	t.Helper()
	var st stateExport
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	sum := func(b []byte) []byte { h := sha256.Sum256(b); return h[:] }
	var leaves [][]byte
	for _, a := range st.Artifacts {
		if got := "sha256:" + hex.EncodeToString(sum(a.Data)); got != a.ContentHash {
			t.Errorf("%s: data hashes to %s, content_hash is %s", a.ID, got, a.ContentHash)
		}
		leaves = append(leaves, sum(jcs(t, map[string]any{"kind": "artifact", "id": a.ID, "type": a.Type,
			"version": a.Version, "content_hash": a.ContentHash, "produced_by": a.ProducedBy})))
	}
	for _, e := range st.Edges {
		leaf := map[string]any{"kind": "edge", "from": e.From, "rel": e.Rel, "to": e.To}
		if len(e.Attrs) > 0 {
			attrs := map[string]any{}
			for k, v := range e.Attrs {
				attrs[k] = v
			}
			leaf["attrs"] = attrs
		}
		leaves = append(leaves, sum(jcs(t, leaf)))
	}
	sort.Slice(leaves, func(i, j int) bool { return bytes.Compare(leaves[i], leaves[j]) < 0 })
	root := sha256.New()
	root.Write([]byte("artifactd/ctx/v1"))
	for i := 0; i < len(leaves); {
		j := i
		var bucket []byte
		for ; j < len(leaves) && leaves[j][0] == leaves[i][0]; j++ {
			bucket = append(bucket, leaves[j]...)
		}
		root.Write([]byte{leaves[i][0]})
		root.Write(sum(bucket))
		i = j
	}
	got := "sha256:" + hex.EncodeToString(root.Sum(nil))
	if got != st.ContextHash {
		t.Fatalf("recomputed %s, server says %s", got, st.ContextHash)
	}
	return got
}

func TestEmptyStateHash(t *testing.T) {
	got := recomputeHash(t, []byte(`{"commit":"x","context_hash":"sha256:1f92a2b7e73c8fca046dea13443bc7de2829f7b3223e88fbcd2d7b5c7377c76d","artifacts":[],"edges":[]}`))
	if !strings.HasPrefix(got, "sha256:1f92a2b7") {
		t.Fatal(got)
	}
}

func httpDo(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestStateHashAndReplay: the ten-step plan over HTTP (fetch verdicts
// through the gate path), the state export recomputed independently equals
// the context hash, and after the server shuts down `artifactd replay
// --verify` accepts that hash and rejects another.
func TestStateHashAndReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(st, reg, serveConfig{Logger: discardLogger()})
	ts := httptest.NewServer(srv)
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "plan", "quarantine": "observe"}); code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	steps, err := parsePlan(poisonPlan)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Kind == "fetch" {
			if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/plan/fetches", s.Evidence.fetchInput(s.ID)); code != 201 {
				t.Fatalf("%s: %d %s", s.ID, code, b)
			}
			continue
		}
		body := map[string]any{"id": s.ID, "type": s.Type, "produced_by": s.ProducedBy, "data": s.Data, "edges": s.Edges}
		if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/plan/artifacts", body); code != 201 {
			t.Fatalf("%s: %d %s", s.ID, code, b)
		}
	}
	// Edge attrs with non-ASCII keys, a control character and HTML
	// characters exercise the JCS rules.
	attrs := map[string]any{"é": "<b>&", "a\tb": 3, "z": "line\nbreak", "Z": "\u2028"}
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/plan/commits", map[string]any{"ops": []any{
		map[string]any{"op": "link", "from": "s10", "rel": "cites", "to": "s2", "attrs": attrs}}}); code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	code, raw := httpDo(t, "GET", ts.URL+"/v1/contexts/plan/state", nil)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	hash := recomputeHash(t, raw)
	code, q := httpDo(t, "GET", ts.URL+"/v1/contexts/plan/quarantine", nil)
	if code != 200 || !bytes.Contains(q, []byte(`"blast_radius":5`)) {
		t.Fatalf("quarantine %d %s", code, q)
	}

	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := Run(ctx, []string{"replay", "--data", dir, "--context", "plan", "--verify", hash}, &out, &errb); rc != 0 {
		t.Fatalf("replay --verify %s: exit %d\n%s%s", hash, rc, out.String(), errb.String())
	}
	if rc := Run(ctx, []string{"replay", "--data", dir, "--context", "plan", "--verify", strings.TrimPrefix(hash, "sha256:")[:12]}, io.Discard, io.Discard); rc != 0 {
		t.Fatalf("replay --verify with a prefix: exit %d", rc)
	}
	wrong := "sha256:" + strings.Repeat("0", 64)
	if rc := Run(ctx, []string{"replay", "--data", dir, "--context", "plan", "--verify", wrong}, io.Discard, io.Discard); rc != 1 {
		t.Fatalf("replay --verify with a wrong hash: exit %d, want 1", rc)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeLifecycle runs `artifactd serve` on a loopback port, talks to
// it, stops it with its context (as SIGINT does) and reopens the data.
// serveInProcess starts `serve --addr 127.0.0.1:0` with args in process and
// returns its base URL, a stop that shuts it down and checks that it
// exits 0 (called at the test's end if not before), and its log.
func serveInProcess(t *testing.T, args ...string) (base string, stop func(), stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), &stdout, stderr)
	}()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case rc := <-done:
			if rc != 0 {
				t.Fatalf("serve exit %d: %s", rc, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
		}
	}
	t.Cleanup(stop)
	re := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			return m[1], stop, stderr
		}
		select {
		case rc := <-done:
			stopped = true
			t.Fatalf("serve exited %d: %s", rc, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeReserveBytes: serve --reserve-bytes sets the free space writes
// leave; above what the file system has free, a write is a 507 whose
// detail names the flag to lower, and reads go on.
func TestServeReserveBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	base, _, _ := serveInProcess(t, "--data", dir, "--reserve-bytes", strconv.FormatInt(1<<62, 10))
	code, b := httpDo(t, "POST", base+"/v1/contexts", map[string]any{"id": "c"})
	if code != 507 || !strings.Contains(string(b), "insufficient-storage") || !strings.Contains(string(b), "serve --reserve-bytes") {
		t.Fatalf("a write below the reserve: %d %s", code, b)
	}
	// Every writer reads the answer: it does not name the data directory.
	if strings.Contains(string(b), dir) {
		t.Errorf("the 507 names the data directory: %s", b)
	}
	if code, b := httpDo(t, "GET", base+"/v1/contexts", nil); code != 200 || strings.Contains(string(b), `"c"`) {
		t.Fatalf("a read below the reserve: %d %s", code, b)
	}
}

func TestServeLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	base, stop, stderr := serveInProcess(t, "--data", dir)
	if code, b := httpDo(t, "GET", base+"/readyz", nil); code != 200 {
		t.Fatalf("readyz %d %s", code, b)
	}
	if code, b := httpDo(t, "POST", base+"/v1/contexts", map[string]any{"id": "kept"}); code != 201 {
		t.Fatalf("create %d %s", code, b)
	}
	stop()
	if !strings.Contains(stderr.String(), "msg=request") || !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("no request log or shutdown log:\n%s", stderr.String())
	}
	var out bytes.Buffer
	if rc := Run(context.Background(), []string{"log", "--data", dir, "--context", "kept"}, &out, io.Discard); rc != 0 || !strings.Contains(out.String(), "create context") {
		t.Fatalf("log after shutdown: %d %s", rc, out.String())
	}
}

// TestServeRefusesOpenNonLoopback: without tokens only loopback binds.
func TestServeRefusesOpenNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:7070", ":7070", "[::]:7070", "192.0.2.1:7070"} {
		var stderr bytes.Buffer
		rc := Run(context.Background(), []string{"serve", "--data", t.TempDir(), "--addr", addr}, io.Discard, &stderr)
		if rc != exitUsage || !strings.Contains(stderr.String(), "refusing to serve") {
			t.Errorf("%s: exit %d: %s", addr, rc, stderr.String())
		}
	}
	for _, c := range []struct {
		addr             string
		tokens, insecure bool
		ok               bool
	}{
		{"127.0.0.1:7070", false, false, true}, {"[::1]:7070", false, false, true}, {"localhost:7070", false, false, true},
		{"0.0.0.0:7070", true, false, true}, {"0.0.0.0:7070", false, true, true}, {"0.0.0.0:7070", false, false, false},
	} {
		if err := checkBind(c.addr, c.tokens, c.insecure); (err == nil) != c.ok {
			t.Errorf("checkBind(%s, tokens %v, insecure %v) = %v", c.addr, c.tokens, c.insecure, err)
		}
	}
}

func TestLoadTokens(t *testing.T) {
	t.Setenv("ARTIFACTD_TOKENS", "")
	if tk, err := loadTokens(""); err != nil || tk != nil {
		t.Fatalf("no tokens: %v %v", tk, err)
	}
	t.Setenv("ARTIFACTD_TOKENS", "env-token-0123456789 read *")
	if tk, err := loadTokens(""); err != nil || tk.Len() != 1 {
		t.Fatalf("env tokens: %v", err)
	}
	f := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(f, []byte(`[{"token":"file-token-0123456789","scope":"admin","contexts":["*"]},{"token":"file-token-abcdefghij","scope":"read","contexts":["a*"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if tk, err := loadTokens(f); err != nil || tk.Len() != 2 {
		t.Fatalf("file tokens: %v", err)
	}
	if err := os.WriteFile(f, []byte("bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTokens(f); err == nil {
		t.Fatal("bad tokens file accepted")
	}
	var stderr bytes.Buffer
	if rc := Run(context.Background(), []string{"serve", "--tokens", f, "--data", t.TempDir()}, io.Discard, &stderr); rc != exitUsage {
		t.Fatalf("serve with a bad tokens file: %d %s", rc, stderr.String())
	}
}

// TestServeMemoryFlags: the cache and mapped-file budgets are refused, with
// the flag named, when they cannot bound anything, and so are a value-log
// threshold Badger cannot take and a table size out of range.
func TestServeMemoryFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-bytes", "1000"}, "--cache-bytes must be at least 1 MiB"},
		{[]string{"--cache-bytes", "-1"}, "--cache-bytes must be at least 1 MiB"},
		{[]string{"--mapped-bytes", "0"}, "--mapped-bytes must be positive, or -1"},
		{[]string{"--mapped-bytes", "-2"}, "--mapped-bytes must be positive, or -1"},
		{[]string{"--value-threshold", "0"}, "--value-threshold must be from 1 to 1048576, or -1"},
		{[]string{"--value-threshold", "-2"}, "--value-threshold must be from 1 to 1048576, or -1"},
		{[]string{"--value-threshold", "1048577"}, "--value-threshold must be from 1 to 1048576, or -1"},
		{[]string{"--table-bytes", "65535"}, "--table-bytes must be from 65536 to 67108864"},
		{[]string{"--table-bytes", "0"}, "--table-bytes must be from 65536 to 67108864"},
		{[]string{"--table-bytes", "67108865"}, "--table-bytes must be from 65536 to 67108864"},
		{[]string{"--reserve-bytes", "0"}, "--reserve-bytes must be positive, or -1"},
		{[]string{"--reserve-bytes", "-2"}, "--reserve-bytes must be positive, or -1"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)
		if rc := Run(context.Background(), args, io.Discard, &stderr); rc != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, %q; want exit %d and %q", c.args, rc, stderr.String(), exitUsage, c.want)
		}
	}
}

// TestAPIDocServeSynopsisHasEveryFlag keeps docs/API.md's synopsis of
// serve whole: every flag `serve -h` lists is in it. --reserve-bytes was
// missing from it.
func TestAPIDocServeSynopsisHasEveryFlag(t *testing.T) {
	doc, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatalf("docs/API.md is part of the repository: %v", err)
	}
	syn := regexp.MustCompile("(?m)^- `artifactd serve [^`]*`").Find(doc)
	if syn == nil {
		t.Fatal("docs/API.md has no synopsis of artifactd serve")
	}
	var help bytes.Buffer
	Run(context.Background(), []string{"serve", "-h"}, &help, &help)
	flags := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("serve -h lists %d flags:\n%s", len(flags), help.String())
	}
	for _, f := range flags {
		if !regexp.MustCompile(`(\[|\| )--` + regexp.QuoteMeta(f[1]) + `[ \]]`).Match(syn) {
			t.Errorf("docs/API.md's synopsis of serve lacks --%s", f[1])
		}
	}
}
