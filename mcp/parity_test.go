package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/mcp"
	"github.com/artifactd/artifactd/service"
)

// twoBackends returns an in-process and a remote backend, each over its own
// fresh API with context "c" holding question q1 (and q1 linked nowhere).
// The remote one talks to the API as `artifactd serve` serves it (serve),
// behind its http.ServeMux.
func twoBackends(t *testing.T) map[string]mcp.Backend {
	t.Helper()
	out := map[string]mcp.Backend{}
	for _, kind := range []string{"inprocess", "remote"} {
		a := newAPI(t, "")
		a.createContext(t, "c", "")
		var b mcp.Backend
		if kind == "inprocess" {
			b = mcp.NewInProcess(a.srv.Service(), nil)
		} else {
			b = mcp.NewRemote(serve(t, a).URL, "", nil)
		}
		if _, err := b.PutArtifact(context.Background(), "c", mcp.ArtifactBody{ID: "q1", Type: "question", Data: map[string]any{"text": "q?"}}); err != nil {
			t.Fatal(err)
		}
		out[kind] = b
	}
	return out
}

// outcome summarises a backend's answer: "ok" or the problem's status,
// code and field errors.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var p *mcp.Problem
	if !errors.As(err, &p) {
		return "error: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", p.Status, p.Code)
	for _, f := range p.Errors {
		fmt.Fprintf(&b, " [%s%s %s]", f.Pointer, f.Parameter, f.Rule)
	}
	return b.String()
}

func headOf(t *testing.T, b mcp.Backend) string {
	t.Helper()
	v, err := b.Artifact(context.Background(), "c", "q1", "")
	if err != nil {
		t.Fatal(err)
	}
	return v.WrittenIn
}

// sameAnswer calls call on each backend and checks that both answer
// alike, and as want says when it is not "": a prefix of the outcome.
func sameAnswer(t *testing.T, name, want string, call func(b mcp.Backend) error) {
	t.Helper()
	bs := twoBackends(t)
	in, re := outcome(call(bs["inprocess"])), outcome(call(bs["remote"]))
	if in != re {
		t.Errorf("%s: in-process %q, remote %q", name, in, re)
	}
	if !strings.HasPrefix(in, want) {
		t.Errorf("%s: %q, want %q", name, in, want)
	}
}

var bg = context.Background()

// TestBackendsAgreeOnBadRefs: a ref that is neither a branch nor a commit
// id is a 400 naming its parameter on both backends (the in-process one
// answered 404 before).
func TestBackendsAgreeOnBadRefs(t *testing.T) {
	sameAnswer(t, "check_trust at=\"no good!\"", "400 invalid-ref [at ref]", func(b mcp.Backend) error {
		_, err := b.Artifact(bg, "c", "q1", "no good!")
		return err
	})
	sameAnswer(t, "provenance at=\"no good!\"", "400 invalid-ref [at ref]", func(b mcp.Backend) error {
		_, err := b.Provenance(bg, "c", mcp.ProvenanceQuery{ID: "q1", At: "no good!"})
		return err
	})
	sameAnswer(t, "audit at=\"no good!\"", "400 invalid-ref [at ref]", func(b mcp.Backend) error {
		_, err := b.Audit(bg, "c", mcp.AuditQuery{ID: "q1", At: "no good!"})
		return err
	})
	// With a bad query besides, the query is named: the HTTP door checks
	// its parameters before it opens the view at the ref.
	sameAnswer(t, "provenance at=\"no good!\" format=svg", "400 invalid-query [format enum]", func(b mcp.Backend) error {
		_, err := b.Provenance(bg, "c", mcp.ProvenanceQuery{ID: "q1", At: "no good!", Format: "svg"})
		return err
	})
	sameAnswer(t, "audit at=\"no good!\" format=html", "400 invalid-query [format enum]", func(b mcp.Backend) error {
		_, err := b.Audit(bg, "c", mcp.AuditQuery{ID: "q1", At: "no good!", Format: "html"})
		return err
	})
	sameAnswer(t, "diff from=\"no good!\"", "400 invalid-ref [from ref]", func(b mcp.Backend) error {
		_, err := b.Diff(bg, "c", "no good!", "")
		return err
	})
}

// TestBackendsAgreeOnUnknownRefs: a ref that names no branch or commit of
// the context is a 404 naming its parameter, rule exists, on both
// backends.
func TestBackendsAgreeOnUnknownRefs(t *testing.T) {
	sameAnswer(t, "check_trust at=nope", "404 not-found [at exists]", func(b mcp.Backend) error {
		_, err := b.Artifact(bg, "c", "q1", "nope")
		return err
	})
	sameAnswer(t, "audit at=nope", "404 not-found [at exists]", func(b mcp.Backend) error {
		_, err := b.Audit(bg, "c", mcp.AuditQuery{ID: "q1", At: "nope"})
		return err
	})
	sameAnswer(t, "diff to=nope", "404 not-found [to exists]", func(b mcp.Backend) error {
		_, err := b.Diff(bg, "c", "main", "nope")
		return err
	})
}

// TestBackendsTakeABareHexParent: a parent given as bare hex, which the
// request schema admits, is taken by both backends (the in-process one
// refused it).
func TestBackendsTakeABareHexParent(t *testing.T) {
	bs := twoBackends(t)
	for kind, b := range bs {
		head := strings.TrimPrefix(headOf(t, b), "sha256:")
		_, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{ID: "n1", Type: "note", Data: map[string]any{"text": "x"}, Parent: head})
		if err != nil {
			t.Errorf("%s: a bare-hex parent (which the API's schema admits, ^(sha256:)?[0-9a-f]{64}$) is refused: %v", kind, err)
		}
	}
}

// TestBackendsAgreeOnWriteShapes: writes the request schemas refuse are
// refused alike by both backends, naming the same pointer and rule (the
// in-process backend stored some and named other rules for others).
func TestBackendsAgreeOnWriteShapes(t *testing.T) {
	long := strings.Repeat("p", 300)
	redirects := make([]mcp.Redirect, 101)
	for i := range redirects {
		redirects[i] = mcp.Redirect{URL: fmt.Sprintf("https://x.example/%d", i), Status: 301}
	}
	body := "{\"a\":1}"
	cases := []struct {
		name string
		call func(b mcp.Backend) error
	}{ // every one a 422 validation
		{"artifact type \"\"", func(b mcp.Backend) error {
			_, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{Type: "", Data: map[string]any{"text": "x"}})
			return err
		}},
		{"artifact quarantine \"bogus\"", func(b mcp.Backend) error {
			_, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{Type: "note", Data: map[string]any{"text": "x"}, Quarantine: "bogus"})
			return err
		}},
		{"artifact edge rel \"\"", func(b mcp.Backend) error {
			_, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{Type: "note", Data: map[string]any{"text": "x"}, Edges: []mcp.EdgeBody{{Rel: "", To: "q1"}}})
			return err
		}},
		{"link to \"\"", func(b mcp.Backend) error {
			_, err := b.Commit(bg, "c", mcp.CommitBody{Ops: []mcp.OpBody{{Op: "link", From: "q1", Rel: "mentions", To: ""}}})
			return err
		}},
		{"fetch produced_by 300 chars", func(b mcp.Backend) error {
			_, err := b.RecordFetch(bg, "c", mcp.FetchBody{URL: "https://x.example/", Status: 200, Body: &body, ProducedBy: long})
			return err
		}},
		{"fetch 101 redirects", func(b mcp.Backend) error {
			_, err := b.RecordFetch(bg, "c", mcp.FetchBody{URL: "https://x.example/", Status: 200, Body: &body, Redirects: redirects})
			return err
		}},
		{"fetch redirect status 5000", func(b mcp.Backend) error {
			_, err := b.RecordFetch(bg, "c", mcp.FetchBody{URL: "https://x.example/", Status: 200, Body: &body, Redirects: []mcp.Redirect{{URL: "https://y.example/", Status: 5000}}})
			return err
		}},
		{"verify hash \"\"", func(b mcp.Backend) error {
			_, err := b.Verify(bg, "c", mcp.VerifyBody{Hash: ""})
			return err
		}},
	}
	for _, c := range cases {
		sameAnswer(t, c.name, "422 validation [/", c.call)
	}
}

// TestBackendsAgreeOnOddIDs: ids the remote backend must escape in a path
// answer alike on both backends, absent and present, with serve's
// http.ServeMux in front of the API: it cleans dot segments and "//" and
// redirects, and the remote followed — check_trust of ".." answered the
// context's description as the artifact, audit of ".." an empty report,
// provenance of "." the artifact "provenance", and a write to context ".."
// or "." went elsewhere.
func TestBackendsAgreeOnOddIDs(t *testing.T) {
	for _, id := range []string{"", "..", ".", "a/b", "50%", "x?y=1", "a#b", "../q1"} {
		id := id
		sameAnswer(t, fmt.Sprintf("check_trust id=%q", id), "", func(b mcp.Backend) error {
			_, err := b.Artifact(bg, "c", id, "")
			return err
		})
		sameAnswer(t, fmt.Sprintf("provenance id=%q", id), "", func(b mcp.Backend) error {
			_, err := b.Provenance(bg, "c", mcp.ProvenanceQuery{ID: id})
			return err
		})
		sameAnswer(t, fmt.Sprintf("audit id=%q", id), "", func(b mcp.Backend) error {
			_, err := b.Audit(bg, "c", mcp.AuditQuery{ID: id})
			return err
		})
	}
	// ids that exist, with characters the remote must escape
	for _, id := range []string{"..", ".", "a/b", "50%", "x?y=1", "a#b", "../q1"} {
		id := id
		sameAnswer(t, fmt.Sprintf("put+check_trust id=%q", id), "ok", func(b mcp.Backend) error {
			if _, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{ID: id, Type: "note", Data: map[string]any{"text": "x"}}); err != nil {
				return fmt.Errorf("put: %w", err)
			}
			v, err := b.Artifact(bg, "c", id, "")
			if err == nil && v.ID != id {
				return fmt.Errorf("got artifact %q", v.ID)
			}
			if err != nil {
				return err
			}
			p, err := b.Provenance(bg, "c", mcp.ProvenanceQuery{ID: id})
			if err == nil && p.ID != id {
				return fmt.Errorf("provenance of %q", p.ID)
			}
			if err != nil {
				return err
			}
			a, err := b.Audit(bg, "c", mcp.AuditQuery{ID: id, Format: "markdown"})
			if err == nil && a.Answer != id {
				return fmt.Errorf("audit of %q", a.Answer)
			}
			return err
		})
	}
	// Context ids no context has, in every route's path.
	for _, cx := range []string{"", ".", "..", "c/..", "../c"} {
		cx := cx
		sameAnswer(t, fmt.Sprintf("record_artifact context=%q", cx), "404 not-found", func(b mcp.Backend) error {
			_, err := b.PutArtifact(bg, cx, mcp.ArtifactBody{Type: "note", Data: map[string]any{"text": "x"}})
			return err
		})
		sameAnswer(t, fmt.Sprintf("check_trust context=%q", cx), "404 not-found", func(b mcp.Backend) error {
			_, err := b.Artifact(bg, cx, "q1", "")
			return err
		})
		sameAnswer(t, fmt.Sprintf("verify context=%q", cx), "404 not-found", func(b mcp.Backend) error {
			_, err := b.Verify(bg, cx, mcp.VerifyBody{Hash: "sha256:" + strings.Repeat("0", 64)})
			return err
		})
		sameAnswer(t, fmt.Sprintf("diff context=%q", cx), "404 not-found", func(b mcp.Backend) error {
			_, err := b.Diff(bg, cx, "main", "")
			return err
		})
	}
}

// TestRemoteFollowsNoRedirect: an answer that redirects is an error of the
// call, not the answer of where it points, whatever client the remote was
// given.
func TestRemoteFollowsNoRedirect(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/contexts/c" {
			http.Redirect(w, r, "/v1/contexts/c", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c"}`))
	}))
	t.Cleanup(ts.Close)
	for name, hc := range map[string]*http.Client{"default": nil, "given": http.DefaultClient} {
		v, err := mcp.NewRemote(ts.URL, "", hc).Artifact(bg, "c", "x", "")
		if err == nil || !strings.Contains(err.Error(), "301") {
			t.Errorf("%s client: a redirect was followed: %+v, %v", name, v, err)
		}
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Error("NewRemote changed the client it was given")
	}
}

// TestBackendsSayATextGraphWasCut: a Mermaid provenance cut at max_nodes
// says so, with its commit, on both backends (the remote one said
// neither).
func TestBackendsSayATextGraphWasCut(t *testing.T) {
	bs := twoBackends(t)
	got := map[string]string{}
	for kind, b := range bs {
		for i := 0; i < 3; i++ {
			e := []mcp.EdgeBody{{Rel: "derived_from", To: "q1"}}
			if i > 0 {
				e = []mcp.EdgeBody{{Rel: "derived_from", To: fmt.Sprintf("n%d", i-1)}}
			}
			if _, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{ID: fmt.Sprintf("n%d", i), Type: "note", Data: map[string]any{"text": "x"}, Edges: e}); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"json", "mermaid"} {
			p, err := b.Provenance(bg, "c", mcp.ProvenanceQuery{ID: "n2", MaxNodes: 2, Format: f})
			if err != nil {
				t.Fatal(err)
			}
			got[kind+" "+f] = fmt.Sprintf("truncated=%v commit_set=%v", p.Truncated, p.Commit != "")
		}
	}
	for k, v := range got {
		if v != "truncated=true commit_set=true" {
			t.Errorf("provenance of a chain of four with max_nodes=2, %s: %s", k, v)
		}
	}
	if len(got) != 4 {
		t.Errorf("answers %v", got)
	}
}

// TestBackendsBoundTheBody: a write over the API's body limit is a 413 on
// both backends (the in-process one stored it).
func TestBackendsBoundTheBody(t *testing.T) {
	big := strings.Repeat("x", 9<<20) // over the API's 8 MiB body limit
	sameAnswer(t, "record_artifact with 9 MiB of data", "413 payload-too-large", func(b mcp.Backend) error {
		_, err := b.PutArtifact(bg, "c", mcp.ArtifactBody{ID: "big", Type: "note", Data: map[string]any{"text": big}})
		return err
	})
}

// TestBackendsMeasureTheBodyAsHTTPDoes: both backends measure a write
// against the body limit on the body HTTP would carry, with <, > and &
// as they are. They measured json.Marshal's encoding, which writes each as
// a 6-byte \u003c escape: an HTML page submitted with submit_fetch (4.4
// MiB, 4.8 MB over HTTP, 201 there) and a note of 1.5 MiB of '<' were 413.
func TestBackendsMeasureTheBodyAsHTTPDoes(t *testing.T) {
	page := "<html><body>" + strings.Repeat("<p>Some text &amp; here.</p>\n", 160000) + "</body></html>"
	sameAnswer(t, "submit_fetch of a 4.4 MiB HTML page", "ok", func(b mcp.Backend) error {
		_, err := b.RecordFetch(bg, "c", mcp.FetchBody{ID: "page", URL: "https://x.example/", Status: 200, Headers: map[string]string{"content-type": "text/html"}, Body: &page})
		return err
	})
	// A note whose HTTP body is exactly the limit, and one a byte over.
	note := func(n int) mcp.ArtifactBody {
		return mcp.ArtifactBody{ID: "lt", Type: "note", Data: map[string]any{"text": strings.Repeat("<", n)}}
	}
	raw, err := service.Marshal(note(0))
	if err != nil {
		t.Fatal(err)
	}
	n := httpapi.DefaultMaxBodyBytes - (len(raw) - 1) // less its final newline
	for _, c := range []struct {
		n    int
		want string
		code int
	}{{n, "ok", http.StatusCreated}, {n + 1, "413 payload-too-large", http.StatusRequestEntityTooLarge}} {
		body, err := service.Marshal(note(c.n))
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.TrimSuffix(body, []byte("\n"))
		a := newAPI(t, "")
		a.createContext(t, "c", "")
		if code := postArtifact(t, a, "c", string(body)); code != c.code {
			t.Fatalf("HTTP body of %d bytes: %d, want %d", len(body), code, c.code)
		}
		sameAnswer(t, fmt.Sprintf("record_artifact whose HTTP body is %d bytes", len(body)), c.want, func(b mcp.Backend) error {
			_, err := b.PutArtifact(bg, "c", note(c.n))
			return err
		})
	}
}

// TestToolArgumentsAreNotAltered: tool arguments the API would refuse as
// non-canonical JSON (an integer past 2^53, a duplicate key, a lone
// surrogate) are refused with the API's problem on both backends. The
// SDK's decoding rounded, dropped or replaced them, and the write stored
// data the agent did not send.
func TestToolArgumentsAreNotAltered(t *testing.T) {
	a := newAPI(t, "")
	a.createContext(t, "c", "")
	ts := serve(t, a)
	for kind, b := range map[string]mcp.Backend{"inprocess": mcp.NewInProcess(a.srv.Service(), nil), "remote": mcp.NewRemote(ts.URL, "", nil)} {
		cs := connect(t, mcp.NewServer(b, mcp.Options{}))
		for i, args := range []string{
			`{"context":"c","id":"n-%s-%d","type":"note","data":{"text":"x","n":9007199254740993}}`,
			`{"context":"c","id":"n-%s-%d","type":"note","data":{"text":"x","n":12345678901234567890}}`,
			`{"context":"c","id":"n-%s-%d","type":"note","data":{"text":"x","text":"y"}}`,
			`{"context":"c","id":"n-%s-%d","type":"note","data":{"text":"x\ud800"}}`,
		} {
			raw := json.RawMessage(fmt.Sprintf(args, kind, i))
			// The same body over HTTP is refused.
			httpBody := strings.Replace(string(raw), `"context":"c",`, "", 1)
			hr := httptest.NewRequest("POST", "/v1/contexts/c/artifacts", strings.NewReader(httpBody))
			hr.Host = "127.0.0.1"
			hr.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			a.srv.ServeHTTP(rec, hr)
			if rec.Code != 400 {
				t.Fatalf("HTTP %s: %d %s", httpBody, rec.Code, rec.Body)
			}
			res, err := cs.CallTool(bg, &sdk.CallToolParams{Name: "record_artifact", Arguments: raw})
			if err != nil {
				t.Errorf("%s %s: protocol error %v", kind, raw, err)
				continue
			}
			if !res.IsError {
				got, _ := json.Marshal(res.StructuredContent)
				var w mcp.ArtifactWrite
				_ = json.Unmarshal(got, &w)
				t.Errorf("%s: %s accepted; stored data %v (the HTTP API refuses this body with 400 non-canonical-json)", kind, raw, w.Artifact.Data)
			} else if !strings.Contains(text(res), "(400 non-canonical-json)") {
				t.Errorf("%s %s: refused, but not as HTTP refuses it: %s", kind, raw, text(res))
			}
		}
	}
}

// TestRemoteRefusesAnOversizedAnswer: a text answer over the remote's
// read bound is an error, not a cut text passed on as the whole.
func TestRemoteRefusesAnOversizedAnswer(t *testing.T) {
	const size = 64<<20 + 1024
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "" { // the JSON form the remote asks first
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"x","commit":"sha256:` + strings.Repeat("0", 64) + `","nodes":[],"edges":[],"truncated":false}`))
			return
		}
		w.Header().Set("Content-Type", "text/vnd.mermaid; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		chunk := []byte(strings.Repeat("a", 1<<20))
		for n := 0; n < size; n += len(chunk) {
			if size-n < len(chunk) {
				chunk = chunk[:size-n]
			}
			_, _ = w.Write(chunk)
		}
	}))
	t.Cleanup(ts.Close)
	p, err := mcp.NewRemote(ts.URL, "", nil).Provenance(bg, "c", mcp.ProvenanceQuery{ID: "x", Format: "mermaid"})
	if err == nil {
		t.Fatalf("the server sent %d bytes; the remote answered success with %d bytes of text and no sign it was cut", size, len(p.Text))
	}
	if !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("error %v", err)
	}
}
