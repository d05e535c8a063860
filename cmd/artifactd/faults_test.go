package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/hashing"
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
	id, err := hashing.ParseDigest(head)
	if err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(commitKey("c", id)) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
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
