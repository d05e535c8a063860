package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/gate/fetch"
	"github.com/artifactd/artifactd/store"
)

func withOptions(f func(*Options)) envOption {
	return func(o *Options, _ *store.Options) { f(o) }
}

// mapResolver resolves each name to one address.
type mapResolver map[string]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// gateFixture is one case of testdata/gate/cases.json: evidence fields
// plus the expected outcome.
type gateFixture map[string]any

func loadGateFixtures(t *testing.T) []gateFixture {
	t.Helper()
	raw, err := os.ReadFile("../testdata/gate/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []gateFixture `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) == 0 {
		t.Fatal("no gate cases")
	}
	return f.Cases
}

// TestFetchFixtures posts every case of testdata/gate/cases.json to the
// gate: each gets its expected verdict and deciding layer, the body is
// stored as the blob the receipt names, and the verdict's trust follows.
func TestFetchFixtures(t *testing.T) {
	e := newEnv(t)
	e.createContext("g", "observe")
	for _, c := range loadGateFixtures(t) {
		name := c["name"].(string)
		expect := c["expect"].(map[string]any)
		body := map[string]any{"id": "fetch-" + name}
		for k, v := range c {
			if k != "name" && k != "expect" && k != "note" {
				body[k] = v
			}
		}
		out := e.must(e.post("/v1/contexts/g/fetches", body), 201)
		// A RETRIEVED verdict has no deciding layer: both are then absent.
		if out["verdict"] != expect["verdict"] || out["layer"] != expect["layer"] {
			t.Errorf("%s: %v/%v (%v), want %v/%v", name, out["verdict"], out["layer"], out["reason"], expect["verdict"], expect["layer"])
			continue
		}
		if r, ok := expect["reason"]; ok && out["reason"] != r {
			t.Errorf("%s: reason %v, want %v", name, out["reason"], r)
		}
		art := out["artifact"].(map[string]any)
		data := art["data"].(map[string]any)
		rc := data["receipt"].(map[string]any)
		want := digestOf([]byte(c["body"].(string)))
		if data["body_blob"] != want || rc["body_sha256"] != want || out["body_blob"] != want {
			t.Errorf("%s: body_blob %v, receipt %v, want %s", name, data["body_blob"], rc["body_sha256"], want)
		}
		blob := e.get("/v1/contexts/g/blobs/" + want)
		if blob.status != 200 || string(blob.body) != c["body"].(string) {
			t.Errorf("%s: blob %d (%d bytes)", name, blob.status, len(blob.body))
		}
		if data["verdict"] != out["verdict"] || data["fetched_by"] != "agent" || art["type"] != TypeFetchVerdict || art["produced_by"] != "gate" {
			t.Errorf("%s: data %v", name, data)
		}
		status := art["trust"].(map[string]any)["status"]
		if wantStatus := map[bool]string{true: "confirmed", false: "poison_root"}[out["verdict"] == "RETRIEVED"]; status != wantStatus {
			t.Errorf("%s: trust %v, want %s", name, status, wantStatus)
		}
	}
}

// TestFetchVersions: a new verdict for an id is a new version; the same
// evidence again changes nothing.
func TestFetchVersions(t *testing.T) {
	e := newEnv(t)
	e.createContext("v", "")
	ev := map[string]any{"id": "price", "url": "https://shop.example/p", "status": 200, "headers": map[string]any{"content-type": "application/json"}, "body": ""}
	first := e.must(e.post("/v1/contexts/v/fetches", ev), 201)
	ev["body"] = `{"price": 19.99}`
	second := e.must(e.post("/v1/contexts/v/fetches", ev), 201)
	again := e.must(e.post("/v1/contexts/v/fetches", ev), 200)
	if first["verdict"] != "FAILED" || second["verdict"] != "RETRIEVED" || again["noop"] != true {
		t.Fatalf("%v / %v / %v", first["verdict"], second["verdict"], again)
	}
	if v := second["artifact"].(map[string]any)["version"]; v != 2.0 {
		t.Fatalf("version %v", v)
	}
}

// TestFetchBodyBase64: raw bytes (here gzip, forwarded undecoded) arrive
// as body_base64 and are stored exactly.
func TestFetchBodyBase64(t *testing.T) {
	e := newEnv(t)
	e.createContext("b", "")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprint(zw, `{"price": 19.99, "currency": "USD"}`)
	zw.Close()
	out := e.must(e.post("/v1/contexts/b/fetches", map[string]any{"id": "z", "url": "https://x.example/p", "status": 200,
		"headers": map[string]any{"Content-Type": "application/json", "Content-Encoding": "gzip"}, "body_base64": base64.StdEncoding.EncodeToString(gz.Bytes())}), 201)
	if out["verdict"] != "RETRIEVED" || out["body_blob"] != digestOf(gz.Bytes()) {
		t.Fatalf("%v", out)
	}
	if b := e.get("/v1/contexts/b/blobs/" + digestOf(gz.Bytes())); !bytes.Equal(b.body, gz.Bytes()) {
		t.Fatal("blob differs from the bytes sent")
	}
	for _, bad := range []map[string]any{
		{"url": "https://x", "body": "a", "body_base64": "YQ=="},
		{"url": "https://x", "body_base64": "not base64!"},
		{"url": "https://x", "status": "200"},
		{"url": "https://x", "redirects": []any{"https://y"}},
		{"url": "https://x", "perform": true, "body": "x"},
		{"url": "https://x", "unknown": 1},
	} {
		r := e.post("/v1/contexts/b/fetches", bad)
		if r.status != 422 {
			t.Errorf("%v: %d %s", bad, r.status, r.body)
		}
	}
}

// TestFetchForgeryRefused: every way to store a verdict the evidence does
// not bear is refused, and none changes the state.
func TestFetchForgeryRefused(t *testing.T) {
	e := newEnv(t)
	e.createContext("f", "observe")
	ctx := context.Background()
	genuine := e.must(e.post("/v1/contexts/f/fetches", map[string]any{"id": "real", "url": "https://shop.example/p", "status": 200,
		"headers": map[string]any{"content-type": "application/json"}, "body": `{"price": 19.99}`}), 201)
	realData := genuine["artifact"].(map[string]any)["data"]
	e.must(e.post("/v1/contexts/f/artifacts", map[string]any{"id": "c", "type": "claim", "data": map[string]any{"text": "x"}}), 201)
	before := e.hash("f")

	t.Run("client writes", func(t *testing.T) {
		for _, c := range []struct {
			path string
			body any
		}{
			{"/v1/contexts/f/artifacts", map[string]any{"id": "forged", "type": "fetch_verdict", "data": realData}},
			{"/v1/contexts/f/artifacts", map[string]any{"id": "real", "type": "claim", "data": map[string]any{"text": "overwrite"}}},
			{"/v1/contexts/f/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": "forged", "type": "fetch_verdict", "data": realData}}}}},
			{"/v1/contexts/f/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": "real", "type": "note", "data": map[string]any{"text": "x"}}}}}},
			{"/v1/contexts/f/commits", map[string]any{"ops": []any{map[string]any{"op": "delete", "id": "real"}}}},
		} {
			r := e.post(c.path, c.body)
			if r.status != 422 || r.obj(t)["type"] != ProblemTypePrefix+CodeReservedType {
				t.Errorf("%s %v: %d %s", c.path, c.body, r.status, r.body)
			}
		}
		// A type with the fetch_verdict role cannot be registered either.
		if r := e.send(req{method: "PUT", path: "/v1/types/my_verdict", body: map[string]any{"role": "fetch_verdict", "schema": true}}); r.status != 422 {
			t.Errorf("role: %d", r.status)
		}
		if e.hash("f") != before {
			t.Fatal("a refused client write changed the state")
		}
	})

	t.Run("claims in the evidence are ignored", func(t *testing.T) {
		forgedReceipt := realData.(map[string]any)["receipt"]
		out := e.must(e.post("/v1/contexts/f/fetches", map[string]any{"id": "claimed", "url": "https://shop.example/q", "status": 200,
			"headers": map[string]any{"content-type": "application/json"}, "body": "",
			"verdict": "RETRIEVED", "reason": "ok", "layer": nil, "receipt": forgedReceipt, "body_sha256": digestOf([]byte(`{"price": 19.99}`))}), 201)
		if out["verdict"] != "FAILED" || out["reason"] != "transport.empty_body" {
			t.Fatalf("%v", out)
		}
		if got := strs(out["ignored"]); strings.Join(got, ",") != "body_sha256,layer,reason,receipt,verdict" {
			t.Errorf("ignored %v", got)
		}
		a := e.must(e.get("/v1/contexts/f/artifacts/claimed"), 200)
		if a["data"].(map[string]any)["verdict"] != "FAILED" || a["trust"].(map[string]any)["status"] != "poison_root" {
			t.Fatalf("%v", a)
		}
	})
	before = e.hash("f")

	// The Go gate path checks what it is given against the receipt and
	// the stored blob.
	good := func() VerdictData {
		var v VerdictData
		raw, _ := json.Marshal(realData)
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	other := []byte(`{"price": 1.00}`)
	if _, err := e.st.PutBlob(ctx, other); err != nil {
		t.Fatal(err)
	}
	empty := gate.Classify(gate.Evidence{URL: "https://shop.example/p", Status: 200, Headers: map[string]string{"content-type": "application/json"}})
	if _, err := e.st.PutBlob(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, pointer, rule string
		tamper              func(v *VerdictData)
	}{
		{"blob is not the receipt's", "/data/body_blob", "matches_receipt", func(v *VerdictData) { v.BodyBlob = digestOf(other) }},
		{"receipt names other stored bytes", "/data/body_blob", "matches_receipt", func(v *VerdictData) { v.Receipt.BodySHA256 = digestOf(other) }},
		{"both name unstored bytes", "/data/body_blob", "stored_blob", func(v *VerdictData) {
			v.BodyBlob = digestOf([]byte("never stored"))
			v.Receipt.BodySHA256 = v.BodyBlob
		}},
		{"raw size differs", "/data/receipt/raw_bytes", "matches_blob", func(v *VerdictData) { v.Receipt.RawBytes++ }},
		{"verdict differs from receipt", "/data/verdict", "matches_receipt", func(v *VerdictData) {
			v.Verdict = gate.Unknown
		}},
		{"RETRIEVED claimed for an empty body", "/data/receipt/verdict", "rederived", func(v *VerdictData) {
			rc := empty.Receipt
			rc.Verdict, rc.Layer, rc.Reason = gate.Retrieved, "", ""
			v.Receipt, v.BodyBlob = rc, rc.BodySHA256
			v.Reason, v.Layer = "", ""
		}},
		{"RETRIEVED claimed for other bytes", "/data/receipt/verdict", "rederived", func(v *VerdictData) {
			// A receipt whose hash and size fit a stored blob that is not
			// a read (the empty body, status 200).
			v.Receipt.BodySHA256, v.Receipt.RawBytes = empty.Receipt.BodySHA256, 0
			v.BodyBlob = v.Receipt.BodySHA256
		}},
		{"no receipt", "/data/receipt/ruleset", "ruleset", func(v *VerdictData) { v.Receipt = gate.Receipt{} }},
		{"other ruleset", "/data/receipt/ruleset", "ruleset", func(v *VerdictData) { v.Receipt.Ruleset = "gate/v0" }},
		{"url differs", "/data/url", "matches_receipt", func(v *VerdictData) { v.URL = "https://elsewhere.example/" }},
		{"shell that was not a shell", "/data/rendered_from/receipt/reason", "script_shell", func(v *VerdictData) {
			v.RenderedFrom = &RenderedFrom{Receipt: v.Receipt, BodyBlob: v.BodyBlob}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := good()
			c.tamper(&v)
			raw, _ := json.Marshal(v)
			_, err := e.srv.GatePutArtifact(ctx, "f", ArtifactInput{ID: "forged", Type: TypeFetchVerdict, ProducedBy: "gate", Data: raw})
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != CodeValidation || len(ae.Errors) != 1 || ae.Errors[0].Pointer != c.pointer || ae.Errors[0].Rule != c.rule {
				t.Fatalf("got %#v", err)
			}
		})
	}
	if e.hash("f") != before {
		t.Fatal("a refused verdict changed the state")
	}
	// The genuine data passes the same checks (a no-op: it is stored).
	raw, _ := json.Marshal(good())
	w, err := e.srv.GatePutArtifact(ctx, "f", ArtifactInput{ID: "real", Type: TypeFetchVerdict, ProducedBy: "gate", Data: raw})
	if err != nil || !w.Noop {
		t.Fatalf("genuine: %v %+v", err, w)
	}
	// A verdict never replaces an artifact of another type.
	r := e.post("/v1/contexts/f/fetches", map[string]any{"id": "c", "url": "https://x.example/", "status": 200, "body": "plain text"})
	if r.status != 409 || r.obj(t)["type"] != ProblemTypePrefix+CodeConflict {
		t.Fatalf("overwrite a claim: %d %s", r.status, r.body)
	}
}

// TestPerformOff: without AllowFetch the server never fetches.
func TestPerformOff(t *testing.T) {
	ts, hits := countingServer(articleHandler)
	defer ts.Close()
	e := newEnv(t)
	e.createContext("p", "")
	r := e.post("/v1/contexts/p/fetches", map[string]any{"id": "x", "url": ts.URL, "perform": true})
	if r.status != 403 || hits.Load() != 0 || !strings.Contains(r.String(), "--allow-fetch") {
		t.Fatalf("%d %s (hits %d)", r.status, r.body, hits.Load())
	}
}

func articleHandler(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, "<!doctype html><html><head><title>Prices</title></head><body><article><p>"+
		strings.Repeat("Item 42 costs 19.99 USD in every store this week. ", 8)+"</p></article></body></html>")
}

func countingServer(h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	})), &n
}

// TestPerformLoopbackRefused: with --allow-fetch and the default policy,
// perform to 127.0.0.1, [::1], localhost, and to a local listener that
// redirects to another loopback port are refused (403) before any request
// is sent, and nothing is committed.
func TestPerformLoopbackRefused(t *testing.T) {
	ts, hits := countingServer(articleHandler)
	defer ts.Close()
	redir, redirHits := countingServer(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, ts.URL+"/", http.StatusFound) })
	defer redir.Close()
	port := strings.TrimPrefix(ts.URL, "http://127.0.0.1:")
	e := newEnv(t, withOptions(func(o *Options) { o.AllowFetch = true }))
	e.createContext("p", "")
	before := e.hash("p")
	for _, u := range []string{ts.URL + "/", "http://[::1]:" + port + "/", "http://localhost:" + port + "/", redir.URL + "/start"} {
		r := e.post("/v1/contexts/p/fetches", map[string]any{"id": "x", "url": u, "perform": true})
		p := r.obj(t)
		if r.status != 403 || p["type"] != ProblemTypePrefix+CodeForbidden || p["blocked"].(map[string]any)["class"] != "loopback" {
			t.Errorf("%s: %d %s", u, r.status, r.body)
		}
		checkBlockedNamesURL(t, p, "loopback")
	}
	if r := e.post("/v1/contexts/p/fetches", map[string]any{"url": "file:///etc/passwd", "perform": true}); r.status != 422 {
		t.Errorf("file URL: %d %s", r.status, r.body)
	}
	if hits.Load() != 0 || redirHits.Load() != 0 || e.hash("p") != before {
		t.Fatalf("hits %d/%d, hash moved: %v", hits.Load(), redirHits.Load(), e.hash("p") != before)
	}
}

// TestPerformRedirectRefused: a fetch whose first hop is allowed (the
// test-only loopback policy, through a resolver that sends every name to
// one listener) but which redirects to a private address is refused at
// the redirect; the dialer is never asked for the private address.
func TestPerformRedirectRefused(t *testing.T) {
	ts, _ := countingServer(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://intranet.example/admin", http.StatusFound)
	})
	defer ts.Close()
	res := mapResolver{"start.example": "127.0.0.1", "intranet.example": "10.1.2.3"}
	f := fetch.New(fetch.Options{Policy: fetch.Policy{AllowLoopback: true}, Resolver: res,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			if !strings.HasPrefix(address, "127.0.0.1:") {
				t.Errorf("dial %s", address)
				return nil, errors.New("refused by the test")
			}
			return (&net.Dialer{}).DialContext(ctx, network, strings.TrimPrefix(ts.URL, "http://"))
		}})
	e := newEnv(t, withOptions(func(o *Options) { o.AllowFetch, o.Fetcher = true, f }))
	e.createContext("p", "")
	r := e.post("/v1/contexts/p/fetches", map[string]any{"id": "x", "url": "http://start.example/", "perform": true})
	if r.status != 403 || r.obj(t)["blocked"].(map[string]any)["class"] != "private" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	checkBlockedNamesURL(t, r.obj(t), "private")
}

// checkBlockedNamesURL checks that p, the problem of a perform fetch the
// fetch policy refused, has an errors entry like every other refusal: the
// body's /url, rule fetch_policy, a detail naming the blocked class.
func checkBlockedNamesURL(t *testing.T, p map[string]any, class string) {
	t.Helper()
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 {
		t.Errorf("a blocked fetch has %d errors entries, want 1 naming /url: %v", len(errs), p)
		return
	}
	f := errs[0].(map[string]any)
	if f["pointer"] != "/url" || f["rule"] != "fetch_policy" || !strings.Contains(f["detail"].(string), "blocked address class "+class) {
		t.Errorf("errors[0] %v, want pointer /url, rule fetch_policy, detail naming blocked address class %s", f, class)
	}
}

// TestPerformLoopbackAllowed: with a test-only loopback policy the server
// fetches a local page itself and classifies it for real.
func TestPerformLoopbackAllowed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/article", articleHandler)
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/article", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.Header().Set("Content-Type", "application/json") })
	ts := httptest.NewServer(mux)
	defer ts.Close()
	e := newEnv(t, withOptions(func(o *Options) {
		o.AllowFetch, o.Fetcher = true, fetch.New(fetch.Options{Policy: fetch.Policy{AllowLoopback: true}})
	}))
	e.createContext("p", "observe")
	out := e.must(e.post("/v1/contexts/p/fetches", map[string]any{"id": "a", "url": ts.URL + "/moved", "perform": true}), 201)
	data := out["artifact"].(map[string]any)["data"].(map[string]any)
	rc := data["receipt"].(map[string]any)
	if out["verdict"] != "RETRIEVED" || data["fetched_by"] != "artifactd" || data["final_url"] != ts.URL+"/article" || len(rc["redirects"].([]any)) != 1 {
		t.Fatalf("%v", out)
	}
	blob := e.get("/v1/contexts/p/blobs/" + out["body_blob"].(string))
	if !strings.Contains(blob.String(), "Item 42 costs") {
		t.Fatalf("blob %q", blob.body)
	}
	out = e.must(e.post("/v1/contexts/p/fetches", map[string]any{"id": "b", "url": ts.URL + "/empty", "perform": true}), 201)
	if out["verdict"] != "FAILED" || out["reason"] != "transport.empty_body" {
		t.Fatalf("%v", out)
	}
}

// fakeRenderer stands in for the browser: it returns a fixed page, or an
// error.
type fakeRenderer struct {
	html  string
	err   error
	calls atomic.Int32
}

func (f *fakeRenderer) Render(_ context.Context, ev gate.Evidence) (gate.Evidence, error) {
	f.calls.Add(1)
	if f.err != nil {
		return gate.Evidence{}, f.err
	}
	out := ev
	out.Headers = map[string]string{"content-type": "text/html; charset=utf-8"}
	out.Body = []byte(f.html)
	return out, nil
}

const shellPage = `<!doctype html><html><head><title>App</title><script src="/app.js"></script></head><body><div id="root"></div><script>` +
	`document.getElementById("root").textContent = "Loading";</script></body></html>`

// TestRenderTier: a script shell is rendered and classified again; the
// stored verdict keeps the shell's receipt and blob in rendered_from, and
// passes the gate path's own checks. A rendered wall stays UNKNOWN; a
// render error keeps the shell's verdict.
func TestRenderTier(t *testing.T) {
	article := "<!doctype html><html><head><title>Prices</title></head><body><article><p>" + strings.Repeat("Item 42 costs 19.99 USD in every store this week. ", 8) + "</p></article></body></html>"
	wall := `<!doctype html><html><head><title>Just a moment...</title></head><body><div id="cf-please-wait">Checking your browser</div></body></html>`
	shell := map[string]any{"id": "s", "url": "https://app.example/", "status": 200, "headers": map[string]any{"content-type": "text/html"}, "body": shellPage}
	for _, c := range []struct {
		name            string
		r               *fakeRenderer
		verdict, reason string
		rendered        bool
	}{
		{"article", &fakeRenderer{html: article}, "RETRIEVED", "", true},
		{"wall", &fakeRenderer{html: wall}, "UNKNOWN", "fingerprint.challenge", true},
		{"error", &fakeRenderer{err: errors.New("chromium crashed; token=abcdefghijklmnopqrstuvwxyz")}, "UNKNOWN", "extraction.script_shell", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, withOptions(func(o *Options) { o.Render = c.r }))
			e.createContext("r", "")
			out := e.must(e.post("/v1/contexts/r/fetches", shell), 201)
			if out["verdict"] != c.verdict || fmt.Sprint(out["reason"]) != fmt.Sprint(map[bool]any{true: c.reason, false: nil}[c.reason != ""]) ||
				(out["rendered"] == true) != c.rendered || c.r.calls.Load() != 1 {
				t.Fatalf("%v", out)
			}
			data := out["artifact"].(map[string]any)["data"].(map[string]any)
			if c.rendered {
				from := data["rendered_from"].(map[string]any)
				if from["body_blob"] != digestOf([]byte(shellPage)) || from["receipt"].(map[string]any)["reason"] != "extraction.script_shell" {
					t.Fatalf("rendered_from %v", from)
				}
				// The gate path accepts what RecordFetch wrote.
				raw, _ := json.Marshal(data)
				if w, err := e.srv.GatePutArtifact(t.Context(), "r", ArtifactInput{ID: "s", Type: TypeFetchVerdict, ProducedBy: "gate", Data: raw}); err != nil || !w.Noop {
					t.Fatalf("re-put: %v", err)
				}
			} else if !strings.Contains(data["render_error"].(string), "chromium crashed") || strings.Contains(data["render_error"].(string), "qrstuv") {
				t.Fatalf("render_error %v", data["render_error"])
			}
		})
	}
	// Only script shells are rendered.
	r := &fakeRenderer{html: article}
	e := newEnv(t, withOptions(func(o *Options) { o.Render = r }))
	e.createContext("r", "")
	e.must(e.post("/v1/contexts/r/fetches", map[string]any{"id": "w", "url": "https://x.example/", "status": 200, "headers": map[string]any{"content-type": "text/html"}, "body": wall}), 201)
	if r.calls.Load() != 0 {
		t.Fatal("a wall was rendered")
	}
}
