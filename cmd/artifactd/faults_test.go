package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/httpapi"
)

// TestDiskFullIs507: below the free-space reserve every write is a 507
// problem with Retry-After and nothing is written; reads go on; writes
// resume by themselves once there is room again.
func TestDiskFullIs507(t *testing.T) {
	ctx := context.Background()
	st, reg, err := openAPIStore(ctx, t.TempDir(), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	defer ts.Close()
	put := func(id string) (int, []byte) {
		return httpDo(t, "POST", ts.URL+"/v1/contexts/c/artifacts", map[string]any{"id": id, "type": "note", "data": map[string]any{"text": id}})
	}
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "c"}); code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	if code, b := put("before"); code != 201 {
		t.Fatalf("%d %s", code, b)
	}
	_, hash := httpDo(t, "GET", ts.URL+"/v1/contexts/c/hash", nil)
	st.SetReserveBytes(1 << 62) // no file system has this much free
	code, b := put("during")
	if code != 507 || !strings.Contains(string(b), "insufficient-storage") || !strings.Contains(string(b), "reserve") {
		t.Fatalf("write with a full disk: %d %s", code, b)
	}
	if code, b := httpDo(t, "GET", ts.URL+"/v1/contexts/c/artifacts/before", nil); code != 200 {
		t.Fatalf("read with a full disk: %d %s", code, b)
	}
	if code, _ := httpDo(t, "GET", ts.URL+"/readyz", nil); code != 503 {
		t.Fatalf("readyz with a full disk: %d", code)
	}
	if _, again := httpDo(t, "GET", ts.URL+"/v1/contexts/c/hash", nil); string(again) != string(hash) {
		t.Fatal("a refused write changed the state")
	}
	st.SetReserveBytes(0)
	if code, b := put("after"); code != 201 {
		t.Fatalf("write after space returned: %d %s", code, b)
	}
}

// TestCorruptStoreIsNotReady: a branch whose commit record is missing is a
// 500 store-corrupt naming fsck, never a 404; from then on /readyz fails
// and writes are refused.
func TestCorruptStoreIsNotReady(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "c"})
	_, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "a"}})
	head := jsonField(t, b, "commit")
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	deleteCommitRecord(t, dir, "c", head)
	st, reg, err = openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts = httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	defer ts.Close()
	if code, _ := httpDo(t, "GET", ts.URL+"/readyz", nil); code != 200 {
		t.Fatalf("readyz before the corruption is met: %d", code)
	}
	code, b := httpDo(t, "GET", ts.URL+"/v1/contexts/c/artifacts/a", nil)
	if code != 500 || !strings.Contains(string(b), "store-corrupt") || !strings.Contains(string(b), "fsck") {
		t.Fatalf("read of a branch whose commit is missing: %d %s", code, b)
	}
	if code, b := httpDo(t, "GET", ts.URL+"/readyz", nil); code != 503 || !strings.Contains(string(b), "fsck") {
		t.Fatalf("readyz after corruption: %d %s", code, b)
	}
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "d"}); code < 500 {
		t.Fatalf("a write after corruption was accepted: %d %s", code, b)
	}
}

func jsonField(t *testing.T, raw []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	s, _ := m[name].(string)
	return s
}

// TestVerifyRouteOnATamperedStore: while serving, POST .../verify answers
// match true and false on a sound store, and on a store one of whose op
// chunks was changed under it (the server stopped, a byte flipped, the
// server started again) it fails loudly with 500 store-corrupt naming
// fsck — never a match, never a mismatch.
func TestVerifyRouteOnATamperedStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	httpDo(t, "POST", ts.URL+"/v1/contexts", map[string]any{"id": "c"})
	_, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "a"}})
	head, hash := jsonField(t, b, "commit"), jsonField(t, b, "context_hash")
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/verify", map[string]any{"hash": hash}); code != 200 || !strings.Contains(string(b), `"match":true`) {
		t.Fatalf("verify: %d %s", code, b)
	}
	if code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/verify", map[string]any{"hash": strings.Repeat("ab", 32)}); code != 200 || !strings.Contains(string(b), `"match":false`) {
		t.Fatalf("verify of another hash: %d %s", code, b)
	}
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	id, err := hashing.ParseDigest(head)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, dir, opsKey("c", id, 0), nil)
	st, reg, err = openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts = httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	defer ts.Close()
	code, b := httpDo(t, "POST", ts.URL+"/v1/contexts/c/verify", map[string]any{"hash": hash})
	if code != 500 || !strings.Contains(string(b), "store-corrupt") || !strings.Contains(string(b), "fsck") {
		t.Fatalf("verify on a tampered store: %d %s", code, b)
	}
}

// lockedBuffer is a log sink that servers' goroutines may write at once.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCorruptionNamesNoOtherTenant: once a read of team-b's context met
// a missing commit, a token for team-a-* is refused its writes and anyone
// is told the server is not ready — without learning team-b's context id,
// its commit or the data directory; the server log names them.
func TestCorruptionNamesNoOtherTenant(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tokens, err := httpapi.ParseTokens("admin-token-0123456789 admin *;team-a-token-0123456789 write team-a-*")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cfg := serveConfig{Logger: slog.New(slog.NewTextHandler(logs, nil)), Tokens: tokens}
	send := func(ts *httptest.Server, method, path, token string, body any) (int, string) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, err := http.NewRequest(method, ts.URL+path, bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(st, reg, cfg))
	for _, id := range []string{"team-a-1", "team-b-secret"} {
		if code, b := send(ts, "POST", "/v1/contexts", "admin-token-0123456789", map[string]any{"id": id}); code != 201 {
			t.Fatalf("create %s: %d %s", id, code, b)
		}
	}
	_, b := send(ts, "POST", "/v1/contexts/team-b-secret/artifacts", "admin-token-0123456789", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "b"}})
	head := jsonField(t, []byte(b), "commit")
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	deleteCommitRecord(t, dir, "team-b-secret", head)

	st, reg, err = openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts = httptest.NewServer(newServer(st, reg, cfg))
	defer ts.Close()
	// team-b's operator meets the damage; from then on the store refuses writes.
	if code, b := send(ts, "GET", "/v1/contexts/team-b-secret/artifacts/a", "admin-token-0123456789", nil); code != 500 || !strings.Contains(b, "store-corrupt") {
		t.Fatalf("read of the damaged branch: %d %s", code, b)
	}
	leaks := []string{"team-b-secret", strings.TrimPrefix(head, "sha256:")[:12], dir}
	for _, c := range []struct {
		what, method, path, token string
		body                      any
		status                    int
	}{
		{"team-a's write", "POST", "/v1/contexts/team-a-1/artifacts", "team-a-token-0123456789", map[string]any{"id": "x", "type": "note", "data": map[string]any{"text": "a"}}, 500},
		{"readyz without a token", "GET", "/readyz", "", nil, 503},
	} {
		code, b := send(ts, c.method, c.path, c.token, c.body)
		if code != c.status || !strings.Contains(b, "fsck") {
			t.Errorf("%s: %d %s", c.what, code, b)
		}
		for _, l := range leaks {
			if strings.Contains(b, l) {
				t.Errorf("%s names %q: %s", c.what, l, b)
			}
		}
	}
	if !strings.Contains(logs.String(), "team-b-secret") {
		t.Errorf("the server log does not name the damaged context:\n%s", logs.String())
	}
}

// deleteCommitRecord deletes, straight from the Badger files of the closed
// store in dir, the record of commit head (a sha256:… string) of context
// ctxID: the corruption a lost record is.
func deleteCommitRecord(t *testing.T, dir, ctxID, head string) {
	t.Helper()
	id, err := hashing.ParseDigest(head)
	if err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(commitKey(ctxID, id)) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
