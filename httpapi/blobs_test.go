package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

const tenancyTokens = `
admin-token-0123456789    admin  *
team-a-token-0123456789   write  team-a-*
team-b-token-0123456789   write  team-b-*
`

const (
	teamA = "team-a-token-0123456789"
	teamB = "team-b-token-0123456789"
	admin = "admin-token-0123456789"
)

func as(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// problemShape is a problem with the digest it names replaced, so that two
// answers about different digests compare equal when they say the same.
func problemShape(r *resp, digest string) string {
	return fmt.Sprintf("%d %s %s", r.status, r.header.Get("Content-Type"), strings.ReplaceAll(string(r.body), digest, "DIGEST"))
}

// TestBlobTenancy: a token for team-a-* cannot read team-b's blobs by
// digest — not through the global route (admin only), not through its own
// context (404, the same answer as for bytes stored nowhere), not through
// team-b's context (403) — and cannot learn whether bytes exist elsewhere:
// its upload answers depend only on its own context.
func TestBlobTenancy(t *testing.T) {
	e := newEnv(t, withTokens(tenancyTokens))
	for _, id := range []string{"team-a-1", "team-b-1"} {
		e.must(e.send(req{method: "POST", path: "/v1/contexts", body: map[string]any{"id": id}, header: as(admin)}), 201)
	}
	// team-b's blobs: a tool output's full text, a fetched body and an
	// upload.
	out := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-b-1/tool-results", header: as(teamB),
		body: map[string]any{"id": "t1", "tool": "read_file", "ok": true, "output": "team b's private tool output"}}), 201)
	toolBlob := out["artifact"].(map[string]any)["data"].(map[string]any)["full_blob"].(string)
	fw := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-b-1/fetches", header: as(teamB),
		body: map[string]any{"id": "f1", "url": "https://b.example/report", "status": 200, "content_type": "text/plain", "body": "team b's private fetched report, long enough to be a read"}}), 201)
	bodyBlob := fw["body_blob"].(string)
	secret := []byte("team b's uploaded bytes")
	up := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-b-1/blobs", body: secret, header: as(teamB)}), 201)
	upBlob := up["digest"].(string)
	if upBlob != sha256Str(string(secret)) {
		t.Fatalf("upload digest %s", upBlob)
	}
	nowhere := sha256Str("bytes stored nowhere")

	for _, d := range []string{toolBlob, bodyBlob, upBlob} {
		// team-b reads its own blobs.
		if r := e.send(req{method: "GET", path: "/v1/contexts/team-b-1/blobs/" + d, header: as(teamB)}); r.status != 200 || r.header.Get("Cache-Control") == "" || strings.Contains(r.header.Get("Cache-Control"), "public") {
			t.Fatalf("team-b reads its blob %s: %d %s %q", d, r.status, r.body, r.header.Get("Cache-Control"))
		}
		// The global route is for admin tokens only.
		if r := e.send(req{method: "GET", path: "/v1/blobs/" + d, header: as(teamA)}); r.status != 403 {
			t.Fatalf("team-a on the global route: %d %s", r.status, r.body)
		}
		if r := e.send(req{method: "GET", path: "/v1/blobs/" + d, header: as(admin)}); r.status != 200 {
			t.Fatalf("admin on the global route: %d %s", r.status, r.body)
		}
		// Not through team-b's context.
		if r := e.send(req{method: "GET", path: "/v1/contexts/team-b-1/blobs/" + d, header: as(teamA)}); r.status != 403 {
			t.Fatalf("team-a through team-b's context: %d %s", r.status, r.body)
		}
		// Through its own context: the 404 of bytes stored nowhere, also
		// with If-None-Match naming the blob.
		got := e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + d, header: as(teamA)})
		want := e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + nowhere, header: as(teamA)})
		if got.status != 404 || problemShape(got, d) != problemShape(want, nowhere) {
			t.Fatalf("team-a reads team-b's blob through its context:\n got %s\nwant %s", problemShape(got, d), problemShape(want, nowhere))
		}
		h := as(teamA)
		h["If-None-Match"] = `"` + strings.TrimPrefix(d, "sha256:") + `"`
		if r := e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + d, header: h}); r.status != 404 {
			t.Fatalf("team-a with If-None-Match: %d", r.status)
		}
	}

	// Uploads: team-a sending team-b's bytes gets 201 like new bytes, then
	// 200 like any repeat; the bytes it sent are then its to read.
	fresh := []byte("bytes nobody stored before")
	for _, body := range [][]byte{secret, fresh} {
		first := e.send(req{method: "POST", path: "/v1/contexts/team-a-1/blobs", body: body, header: as(teamA)})
		second := e.send(req{method: "POST", path: "/v1/contexts/team-a-1/blobs", body: body, header: as(teamA)})
		if first.status != 201 || second.status != 200 {
			t.Fatalf("upload of %q: %d then %d", body, first.status, second.status)
		}
		d := sha256Str(string(body))
		if first.header.Get("Location") != "/v1/contexts/team-a-1/blobs/"+d {
			t.Fatalf("Location %q", first.header.Get("Location"))
		}
		if r := e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + d, header: as(teamA)}); r.status != 200 || !bytes.Equal(r.body, body) {
			t.Fatalf("team-a reads what it uploaded: %d", r.status)
		}
	}
	// team-a's uploads gave team-b nothing new, and team-b's tool output
	// is still not team-a's.
	if r := e.send(req{method: "GET", path: "/v1/contexts/team-b-1/blobs/" + sha256Str(string(fresh)), header: as(teamB)}); r.status != 404 {
		t.Fatalf("team-b reads team-a's upload: %d", r.status)
	}
	if r := e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + toolBlob, header: as(teamA)}); r.status != 404 {
		t.Fatalf("team-a reads team-b's tool output after uploading: %d", r.status)
	}
	// A write token on its context cannot store global blobs either.
	if r := e.send(req{method: "POST", path: "/v1/blobs", body: []byte("x"), header: as(teamA)}); r.status != 403 {
		t.Fatalf("team-a on POST /v1/blobs: %d", r.status)
	}
	// An unknown context: 404, and nothing stored.
	if r := e.send(req{method: "POST", path: "/v1/contexts/team-a-none/blobs", body: []byte("lost bytes"), header: as(teamA)}); r.status != 404 {
		t.Fatalf("upload to an unknown context: %d", r.status)
	}
	if ok, _ := e.st.HasBlob(t.Context(), mustDigest(t, sha256Str("lost bytes"))); ok {
		t.Fatal("an upload to an unknown context stored its bytes")
	}
}

// TestGateVerdictReadsBlobsThroughItsContext: a fetch verdict checked on
// the gate path (GatePutArtifact) finds its body only among the blobs of
// its own context: naming another context's blob is refused exactly like
// naming bytes stored nowhere, so it reveals nothing about them.
func TestGateVerdictReadsBlobsThroughItsContext(t *testing.T) {
	e := newEnv(t)
	e.createContext("a", "")
	e.createContext("b", "")
	fw := e.must(e.post("/v1/contexts/b/fetches", map[string]any{"id": "f", "url": "https://b.example/", "status": 200,
		"content_type": "text/plain", "body": "a report that only context b fetched, long enough to be read"}), 201)
	data, err := json.Marshal(fw["artifact"].(map[string]any)["data"])
	if err != nil {
		t.Fatal(err)
	}
	// The same verdict in its own context passes (a no-op).
	if w, err := e.srv.GatePutArtifact(t.Context(), "b", ArtifactInput{ID: "f", Type: TypeFetchVerdict, ProducedBy: "gate", Data: data}); err != nil || !w.Noop {
		t.Fatalf("own context: %v", err)
	}
	_, errA := e.srv.GatePutArtifact(t.Context(), "a", ArtifactInput{ID: "f", Type: TypeFetchVerdict, ProducedBy: "gate", Data: data})
	var ae *Error
	if !errors.As(errA, &ae) || ae.Code != CodeValidation {
		t.Fatalf("context a accepted context b's blob: %v", errA)
	}
	// The same verdict on a server that never stored the bytes.
	f := newEnv(t)
	f.createContext("a", "")
	_, errNowhere := f.srv.GatePutArtifact(t.Context(), "a", ArtifactInput{ID: "f", Type: TypeFetchVerdict, ProducedBy: "gate", Data: data})
	var an *Error
	if !errors.As(errNowhere, &an) || fmt.Sprint(an.Errors) != fmt.Sprint(ae.Errors) || an.Detail != ae.Detail {
		t.Fatalf("another context's blob: %v\nbytes stored nowhere: %v", errA, errNowhere)
	}
}

// patterned is a reader of n deterministic bytes that calls check before
// each read past every 4 MiB, with the count read so far.
type patterned struct {
	n, off int64
	check  func(off int64)
	next   int64
}

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if p.check != nil && p.off >= p.next {
		p.check(p.off)
		p.next += 4 << 20
	}
	k := min(int64(len(b)), p.n-p.off)
	for i := range k {
		x := p.off + i
		b[i] = byte(x*7 + x>>11)
	}
	p.off += k
	return int(k), nil
}

// TestBlobUploadStreams: POST …/blobs never holds the body whole. Its
// reads of a 24 MiB body are checked as they happen: whenever the
// handler asks for more bytes past 8 MiB, all but the last two MiB it has
// read are already out of memory, in the data directory, and the live heap
// (after a collection) has grown by less than half of what it read. Reading the blob back
// streams the same bytes.
func TestBlobUploadStreams(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, withStoreDir(dir))
	e.createContext("s", "")
	const size = 24 << 20
	onDisk := func() int64 {
		var n int64
		_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return nil
		})
		return n
	}
	base := onDisk()
	var baseHeap runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&baseHeap)
	var checks int
	var maxLive int64
	body := &patterned{n: size, check: func(off int64) {
		if off < 8<<20 {
			return
		}
		checks++
		if got := onDisk() - base; got < off-2<<20 {
			t.Errorf("after reading %d MiB of the body the data directory grew by %d MiB: the body is held in memory", off>>20, got>>20)
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		live := int64(m.HeapAlloc) - int64(baseHeap.HeapAlloc)
		maxLive = max(maxLive, live)
		if live > off/2 {
			t.Errorf("after reading %d MiB of the body the live heap grew by %d MiB", off>>20, live>>20)
		}
	}}
	r := localRequest("POST", "/v1/contexts/s/blobs", body)
	r.ContentLength = size
	r.Header.Set("Content-Type", "application/octet-stream")
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, r)
	if w.Code != 201 {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	if checks < 3 {
		t.Fatalf("%d checks ran", checks)
	}
	t.Logf("live heap during the upload of %d MiB: at most %.1f MiB above the start", size>>20, float64(maxLive)/(1<<20))
	var out struct {
		Digest string `json:"digest"`
		Size   int64  `json:"size"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Size != size {
		t.Fatalf("answer %s", w.Body)
	}
	h := sha256.New()
	if _, err := io.Copy(h, &patterned{n: size}); err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + hex.EncodeToString(h.Sum(nil)); out.Digest != want {
		t.Fatalf("digest %s, want %s", out.Digest, want)
	}
	// No temporary file is left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".blob-upload-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	// Read back over real HTTP, streamed: same bytes, Content-Length set.
	res, err := http.Get(e.ts.URL + "/v1/contexts/s/blobs/" + out.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	h.Reset()
	n, err := io.Copy(h, res.Body)
	if err != nil || n != size || res.ContentLength != size || "sha256:"+hex.EncodeToString(h.Sum(nil)) != out.Digest {
		t.Fatalf("read back %d bytes (Content-Length %d): %v", n, res.ContentLength, err)
	}
	// The same bytes again: 200, nothing new stored.
	w = httptest.NewRecorder()
	r = localRequest("POST", "/v1/contexts/s/blobs", &patterned{n: size})
	e.srv.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("repeat upload: %d %s", w.Code, w.Body)
	}
	// A body over the limit is refused and stores nothing.
	small := newEnv(t, withOptions(func(o *Options) { o.MaxBlobBytes = 3 << 20 }))
	small.createContext("s", "")
	w = httptest.NewRecorder()
	r = localRequest("POST", "/v1/contexts/s/blobs", &patterned{n: 4 << 20})
	r.ContentLength = -1
	small.srv.ServeHTTP(w, r)
	if w.Code != 413 || strings.Contains(w.Body.String(), "{ctx}/blobs") {
		// Its problem points nowhere near the route it came to (the body
		// limit's own problem sent the client to this very route).
		t.Fatalf("oversize upload of unknown length: %d %s", w.Code, w.Body)
	}
	h.Reset()
	_, _ = io.Copy(h, &patterned{n: 4 << 20})
	var d [32]byte
	copy(d[:], h.Sum(nil))
	if ok, _ := small.st.HasBlob(context.Background(), d); ok {
		t.Fatal("a refused upload was stored")
	}
}

func withStoreDir(dir string) envOption {
	return func(_ *Options, so *store.Options) { so.Dir = dir }
}

// localRequest is a request as the loopback listener would hand it over.
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host, r.RemoteAddr = "127.0.0.1", "127.0.0.1:40000"
	return r
}

// TestRefusedGateWriteHoldsNoBlob: a tool result or a fetch whose
// artifact is refused (a dangling edge, a missing branch) leaves its
// context holding none of the blobs it stored; the same write accepted
// holds them, and again as a no-op still does.
func TestRefusedGateWriteHoldsNoBlob(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "")
	held := func(text string) int {
		t.Helper()
		return e.get("/v1/contexts/c/blobs/" + hashing.Sum([]byte(text)).String()).status
	}
	out := "a tool's output that no one else wrote, " + strings.Repeat("long ", 400)
	body := "a fetched report that only this test fetched, long enough to be read as a page"
	before := e.hash("c")
	for _, r := range []*resp{
		e.post("/v1/contexts/c/tool-results", map[string]any{"id": "t1", "tool": "read_file", "ok": true, "output": out,
			"edges": []any{map[string]any{"rel": "uses", "to": "nosuch"}}}),
		e.post("/v1/contexts/c/tool-results", map[string]any{"id": "t1", "tool": "read_file", "ok": true, "output": out, "branch": "nosuch"}),
		e.post("/v1/contexts/c/fetches", map[string]any{"id": "f1", "url": "https://c.example/", "status": 200, "content_type": "text/plain", "body": body,
			"edges": []any{map[string]any{"rel": "uses", "to": "nosuch"}}}),
		e.post("/v1/contexts/c/fetches", map[string]any{"id": "f1", "url": "https://c.example/", "status": 200, "content_type": "text/plain", "body": body, "branch": "nosuch"}),
	} {
		if r.status != 404 && r.status != 422 {
			t.Fatalf("refused write: %d %s", r.status, r.body)
		}
	}
	if e.hash("c") != before {
		t.Fatal("a refused write moved the head")
	}
	if s := held(out); s != 404 {
		t.Errorf("the refused tool output's blob: %d, want 404", s)
	}
	if s := held(body); s != 404 {
		t.Errorf("the refused fetch's body: %d, want 404", s)
	}
	// Accepted, each holds its blob; written again (a no-op), still.
	for _, status := range []int{201, 200} {
		e.must(e.post("/v1/contexts/c/tool-results", map[string]any{"id": "t1", "tool": "read_file", "ok": true, "output": out}), status)
		e.must(e.post("/v1/contexts/c/fetches", map[string]any{"id": "f1", "url": "https://c.example/", "status": 200, "content_type": "text/plain", "body": body}), status)
		if held(out) != 200 || held(body) != 200 {
			t.Fatalf("accepted writes' blobs: %d %d", held(out), held(body))
		}
	}
}

// TestHeadAnswersAsGet: HEAD on a GET route is its GET without the body,
// under the same guard: a held blob's size and ETag with no bytes, a
// JSON read's status, the 404 and 403 of a GET. HEAD on these routes
// answered 405 before.
func TestHeadAnswersAsGet(t *testing.T) {
	e := newEnv(t, withTokens(tenancyTokens))
	for _, id := range []string{"team-a-1", "team-b-1"} {
		e.must(e.send(req{method: "POST", path: "/v1/contexts", body: map[string]any{"id": id}, header: as(admin)}), 201)
	}
	data := []byte("bytes of team a, read by size alone")
	d := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-a-1/blobs", body: data, header: as(teamA)}), 201)["digest"].(string)
	for _, c := range []struct {
		path, tok string
		status    int
		length    string
	}{
		{"/v1/contexts/team-a-1/blobs/" + d, teamA, 200, fmt.Sprint(len(data))},
		{"/v1/blobs/" + d, admin, 200, fmt.Sprint(len(data))},
		{"/v1/contexts/team-b-1/blobs/" + d, teamB, 404, ""},
		{"/v1/contexts/team-a-1/blobs/" + d, teamB, 403, ""},
		{"/v1/blobs/" + d, teamA, 403, ""},
		{"/v1/contexts/team-a-1", teamA, 200, ""},
		{"/v1/contexts/team-a-1/artifacts/none", teamA, 404, ""},
	} {
		get := e.send(req{method: "GET", path: c.path, header: as(c.tok)})
		head := e.send(req{method: "HEAD", path: c.path, header: as(c.tok)})
		if head.status != c.status || get.status != c.status || len(head.body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes (GET %d), want %d and no body", c.path, head.status, len(head.body), get.status, c.status)
		}
		if head.header.Get("Content-Type") != get.header.Get("Content-Type") || head.header.Get("ETag") != get.header.Get("ETag") {
			t.Errorf("HEAD %s: Content-Type %q ETag %q, GET's %q %q", c.path, head.header.Get("Content-Type"), head.header.Get("ETag"),
				get.header.Get("Content-Type"), get.header.Get("ETag"))
		}
		if c.length != "" && head.header.Get("Content-Length") != c.length {
			t.Errorf("HEAD %s: Content-Length %q, want %s", c.path, head.header.Get("Content-Length"), c.length)
		}
	}
}

// TestConditionalBlobReadAnswersAsWithoutIt: the ETag of a blob is its
// digest, which a client can name whether or not the bytes are there, so
// If-None-Match answers 304 only where the same request without it
// answers 200 — the bytes are stored and the request may read them. A
// pruned blob is 410 blob-pruned, an unknown digest 404 and another
// context's blob the 404 of bytes stored nowhere, with the same problem
// as without the header, for GET and HEAD, whatever form the tag takes.
func TestConditionalBlobReadAnswersAsWithoutIt(t *testing.T) {
	e := newEnv(t, withTokens(tenancyTokens))
	for _, id := range []string{"team-a-1", "team-b-1"} {
		e.must(e.send(req{method: "POST", path: "/v1/contexts", body: map[string]any{"id": id}, header: as(admin)}), 201)
	}
	// team-a's spilled tool output, pruned below; its upload, kept.
	out := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-a-1/tool-results", header: as(teamA),
		body: map[string]any{"id": "t1", "tool": "ls", "ok": true, "output": strings.Repeat("line of tool output\n", 3000)}}), 201)
	spilled := out["artifact"].(map[string]any)["data"].(map[string]any)["full_blob"].(string)
	kept := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-a-1/blobs", body: []byte("team a's kept bytes"), header: as(teamA)}), 201)["digest"].(string)
	other := e.must(e.send(req{method: "POST", path: "/v1/contexts/team-b-1/blobs", body: []byte("team b's bytes"), header: as(teamB)}), 201)["digest"].(string)
	nowhere := sha256Str("bytes stored nowhere")
	if e.send(req{method: "GET", path: "/v1/contexts/team-a-1/blobs/" + spilled, header: as(teamA)}).status != 200 {
		t.Fatal("the spilled output is not readable before the prune")
	}
	now := time.Now()
	if n, err := e.st.PruneSpills(t.Context(), now.Add(time.Hour), now, 0); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}

	for _, c := range []struct {
		name, path, tok, digest string
		status                  int
	}{
		{"held", "/v1/contexts/team-a-1/blobs/" + kept, teamA, kept, 200},
		{"global held", "/v1/blobs/" + kept, admin, kept, 200},
		{"pruned", "/v1/contexts/team-a-1/blobs/" + spilled, teamA, spilled, 410},
		{"global pruned", "/v1/blobs/" + spilled, admin, spilled, 410},
		{"unknown", "/v1/contexts/team-a-1/blobs/" + nowhere, teamA, nowhere, 404},
		{"global unknown", "/v1/blobs/" + nowhere, admin, nowhere, 404},
		{"another context's", "/v1/contexts/team-a-1/blobs/" + other, teamA, other, 404},
		{"not a token of the context", "/v1/contexts/team-b-1/blobs/" + other, teamA, other, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			hex := strings.TrimPrefix(c.digest, "sha256:")
			for _, method := range []string{"GET", "HEAD"} {
				plain := e.send(req{method: method, path: c.path, header: as(c.tok)})
				if plain.status != c.status {
					t.Fatalf("%s %s: %d %s, want %d", method, c.path, plain.status, plain.body, c.status)
				}
				for _, tag := range []string{`"` + hex + `"`, `W/"` + hex + `"`, `"other", "` + hex + `"`, "*"} {
					h := as(c.tok)
					h["If-None-Match"] = tag
					cond := e.send(req{method: method, path: c.path, header: h})
					if c.status == 200 {
						if cond.status != 304 || cond.header.Get("ETag") != plain.header.Get("ETag") || len(cond.body) != 0 ||
							cond.header.Get("Cache-Control") != plain.header.Get("Cache-Control") {
							t.Errorf("%s %s with If-None-Match %s: %d ETag %q Cache-Control %q, want 304 with %q %q",
								method, c.path, tag, cond.status, cond.header.Get("ETag"), cond.header.Get("Cache-Control"),
								plain.header.Get("ETag"), plain.header.Get("Cache-Control"))
						}
						continue
					}
					if cond.status != plain.status || !bytes.Equal(cond.body, plain.body) ||
						cond.header.Get("Content-Type") != plain.header.Get("Content-Type") ||
						cond.header.Get("Cache-Control") != plain.header.Get("Cache-Control") || cond.header.Get("ETag") != "" {
						t.Errorf("%s %s with If-None-Match %s:\n got %d %q %q ETag %q %s\nwant %d %q %q %s", method, c.path, tag,
							cond.status, cond.header.Get("Content-Type"), cond.header.Get("Cache-Control"), cond.header.Get("ETag"), cond.body,
							plain.status, plain.header.Get("Content-Type"), plain.header.Get("Cache-Control"), plain.body)
					}
				}
			}
			if c.status == 410 {
				if r := e.send(req{method: "GET", path: c.path, header: as(c.tok)}); !strings.Contains(string(r.body), "blob-pruned") || !strings.Contains(string(r.body), `"pruned_at"`) {
					t.Errorf("GET %s: %s, want blob-pruned with pruned_at", c.path, r.body)
				}
			}
		})
	}
}

// TestImportedPrunedBlobIsGoneThroughItsContextOnly: a bundle exported
// after its spilled output was pruned lists the blob as pruned. Imported
// here, the context reads it as 410 blob-pruned with the bundle's
// pruned_at, with If-None-Match too; the global route, which reads no
// context's import, answers the 404 of bytes stored nowhere.
func TestImportedPrunedBlobIsGoneThroughItsContextOnly(t *testing.T) {
	src := newEnv(t, withTokens(tenancyTokens))
	src.must(src.send(req{method: "POST", path: "/v1/contexts", body: map[string]any{"id": "team-a-1"}, header: as(admin)}), 201)
	out := src.must(src.send(req{method: "POST", path: "/v1/contexts/team-a-1/tool-results", header: as(teamA),
		body: map[string]any{"id": "t1", "tool": "ls", "ok": true, "output": strings.Repeat("line of tool output\n", 3000)}}), 201)
	spilled := out["artifact"].(map[string]any)["data"].(map[string]any)["full_blob"].(string)
	now := time.Now()
	if n, err := src.st.PruneSpills(t.Context(), now.Add(time.Hour), now, 0); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want 1", n, err)
	}
	var buf bytes.Buffer
	if h, err := src.st.Export(t.Context(), "team-a-1", "", &buf); err != nil || h.Pruned != 1 {
		t.Fatalf("export: %v %v", h, err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withTokens(tenancyTokens))
	if _, err := e.st.Import(t.Context(), b, "team-a-2"); err != nil {
		t.Fatal(err)
	}
	hex := strings.TrimPrefix(spilled, "sha256:")
	for _, c := range []struct {
		name, path, tok string
		status          int
	}{
		{"through the imported context", "/v1/contexts/team-a-2/blobs/" + spilled, teamA, 410},
		{"global", "/v1/blobs/" + spilled, admin, 404},
	} {
		for _, h := range []map[string]string{as(c.tok), {"Authorization": "Bearer " + c.tok, "If-None-Match": `"` + hex + `"`}} {
			r := e.send(req{method: "GET", path: c.path, header: h})
			if r.status != c.status {
				t.Errorf("%s: GET %s (%v): %d %s, want %d", c.name, c.path, h, r.status, r.body, c.status)
			}
			if c.status == 410 && (!strings.Contains(string(r.body), "blob-pruned") || !strings.Contains(string(r.body), `"pruned_at"`)) {
				t.Errorf("%s: GET %s: %s, want blob-pruned with pruned_at", c.name, c.path, r.body)
			}
		}
	}
}
