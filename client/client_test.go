package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/client/internal/testserver"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "artifactd-client-test-")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		bin = testserver.Build(buildT{}, dir)
		return m.Run()
	}()
	os.Exit(code)
}

// buildT lets TestMain call Build, which reports through testing.TB.
type buildT struct{ testing.TB }

func (buildT) Helper()                        {}
func (buildT) Fatalf(format string, a ...any) { panic("build artifactd: " + format) }
func (buildT) Fatal(a ...any)                 { panic(a) }

func newClient(t *testing.T) (*client.Client, *testserver.Server) {
	t.Helper()
	s := testserver.Start(t, bin)
	return client.New(s.URL), s
}

// TestProblemFields: a refused write is a *Problem with the type, status,
// detail and the field errors (pointer and rule) the server sent, plus its
// extensions; the store is unchanged.
func TestProblemFields(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	if _, err := c.EnsureContext(ctx, "run", ""); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Hash(ctx, "run", "")
	_, err := c.PutArtifact(ctx, "run", client.ArtifactRequest{Type: "answer", Data: map[string]any{}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 422 || p.Code() != "validation" || len(p.Errors) == 0 || p.Errors[0].Pointer != "/data/text" || p.Errors[0].Rule == "" {
		t.Fatalf("validation problem: %#v (%v)", p, err)
	}
	// A claim resting on a failed fetch is refused (enforce) with the chain.
	empty := ""
	if _, err := c.RecordFetch(ctx, "run", client.FetchRequest{ID: "f", URL: "https://example.com/", Status: 200, Body: &empty}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutArtifact(ctx, "run", client.ArtifactRequest{ID: "c", Type: "claim", Data: map[string]any{"text": "x"}, Edges: []client.Edge{{Rel: "derived_from", To: "f"}}})
	if !client.IsCode(err, "quarantined") || !errors.As(err, &p) || p.Status != 409 || p.Extensions["tainted_by"] == nil {
		t.Fatalf("quarantine problem: %v", err)
	}
	if _, err := c.GetArtifact(ctx, "run", "c", ""); !client.IsNotFound(err) {
		t.Fatalf("refused write is readable: %v", err)
	}
	after, _ := c.Hash(ctx, "run", "")
	if before.ContextHash == after.ContextHash {
		t.Fatal("the fetch did not change the hash")
	}
	if _, err := c.GetArtifact(ctx, "nope", "x", ""); !client.IsNotFound(err) {
		t.Fatalf("unknown context: %v", err)
	}
}

// TestEnsureContext: creating twice succeeds; other settings are refused.
func TestEnsureContext(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if info, err := c.EnsureContext(ctx, "run", "observe"); err != nil || info.Quarantine != "observe" {
			t.Fatalf("ensure %d: %+v %v", i, info, err)
		}
	}
	if _, err := c.EnsureContext(ctx, "run", "enforce"); !client.IsCode(err, "exists") {
		t.Fatalf("other settings: %v", err)
	}
}

// TestCAS: concurrent writers with a parent never fork: without retries
// exactly the losers get stale-parent; with retries every write lands, one
// after the other, and each saw the head it built on.
func TestCAS(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	if _, err := c.EnsureContext(ctx, "run", ""); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	var ok, stale atomic.Int64
	start := make(chan struct{})
	head, _ := c.Hash(ctx, "run", "")
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, err := c.PutArtifact(ctx, "run", client.ArtifactRequest{ID: "n", Type: "note", Data: map[string]any{"text": string(rune('a' + i))}, Parent: head.Commit})
			switch {
			case err == nil:
				ok.Add(1)
			case client.IsStale(err):
				stale.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || stale.Load() != writers-1 {
		t.Fatalf("same parent: %d won, %d stale; want 1 and %d", ok.Load(), stale.Load(), writers-1)
	}
	// With retries: a counter that every writer increments.
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.PutArtifactCAS(ctx, "run", "", 50, func(head string) (client.ArtifactRequest, error) {
				n := 0.0
				if a, err := c.GetArtifact(ctx, "run", "counter", head); err == nil {
					var d struct{ N float64 }
					_ = jsonUnmarshal(a.Data, &d)
					n = d.N
				} else if !client.IsNotFound(err) {
					return client.ArtifactRequest{}, err
				}
				return client.ArtifactRequest{ID: "counter", Type: "note", Data: map[string]any{"text": "counter", "n": n + 1}}, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	a, err := c.GetArtifact(ctx, "run", "counter", "")
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ N float64 }
	_ = jsonUnmarshal(a.Data, &d)
	if d.N != writers || a.Version != writers {
		t.Fatalf("counter %v at version %d, want %d", d.N, a.Version, writers)
	}
}

// TestModelRecordReplay: a recorded run and a replayed run in another
// context reach the same context hash; the replay never calls the model;
// a request that was not recorded fails loudly.
func TestModelRecordReplay(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	var calls atomic.Int64
	model := func(ctx context.Context, req client.ModelRequest) (any, error) {
		calls.Add(1)
		return map[string]any{"text": "42"}, nil
	}
	req := client.ModelRequest{Model: "m", Parameters: map[string]any{"temperature": 0.2}, Messages: []any{map[string]any{"role": "user", "content": "6 x 7?"}}}
	hashes := map[string]string{}
	for _, run := range []struct {
		ctx  string
		mode client.Mode
	}{{"recorded", client.Record}, {"replayed", client.Replay}} {
		if _, err := c.EnsureContext(ctx, run.ctx, ""); err != nil {
			t.Fatal(err)
		}
		rec := &client.ModelRecorder{Client: c, Context: run.ctx, Source: "recorded", Mode: run.mode, ProducedBy: "model"}
		resp, err := rec.Call(ctx, req, model)
		if err != nil || string(resp) != `{"text":"42"}` {
			t.Fatalf("%s: %s %v", run.ctx, resp, err)
		}
		h, _ := c.Hash(ctx, run.ctx, "")
		hashes[run.ctx] = h.ContextHash
	}
	if calls.Load() != 1 {
		t.Fatalf("the model was called %d times, want 1 (replay must not call it)", calls.Load())
	}
	if hashes["recorded"] != hashes["replayed"] {
		t.Fatalf("replayed run differs: %v", hashes)
	}
	cmp, err := c.Compare(ctx, "recorded", "replayed@main")
	if err != nil || !cmp.Equal {
		t.Fatalf("compare: %+v %v", cmp, err)
	}
	rec := &client.ModelRecorder{Client: c, Context: "replayed", Source: "recorded", Mode: client.Replay}
	other := req
	other.Model = "other"
	_, err = rec.Call(ctx, other, model)
	var miss *client.ErrReplayMiss
	if !errors.As(err, &miss) || calls.Load() != 1 {
		t.Fatalf("replay miss: %v (calls %d)", err, calls.Load())
	}
	// A source context that does not exist is not a miss: it is the
	// server's 404 for the context (it read as "no recorded model call …
	// record it first").
	typo := &client.ModelRecorder{Client: c, Context: "replayed", Source: "recorded-typo", Mode: client.Replay}
	_, err = typo.Call(ctx, req, model)
	if errors.As(err, &miss) || !client.IsNotFound(err) || !strings.Contains(err.Error(), `source context "recorded-typo"`) || calls.Load() != 1 {
		t.Fatalf("replay from a context that does not exist: %v (calls %d)", err, calls.Load())
	}
	// The hash the server checks is the one the client computed.
	h, _ := client.RequestHash(req)
	got, err := c.GetModelCall(ctx, "recorded", h, "")
	if err != nil || got.RequestHash != h {
		t.Fatalf("GetModelCall: %+v %v", got, err)
	}
}

// TestHTMLBodiesAreSentAsTheServerMeasuresThem: a fetched page of 4.6 MB
// full of "<", ">" and "&" — under the server's 8 MiB body limit — is
// recorded; encoded with json.Marshal's HTML escaping each of those
// became a six-byte \u003c escape, the request grew to 16 MB and the
// server refused it 413.
func TestHTMLBodiesAreSentAsTheServerMeasuresThem(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	if _, err := c.EnsureContext(ctx, "pages", ""); err != nil {
		t.Fatal(err)
	}
	body := "<html><body>" + strings.Repeat("<p>a&b</p>", 460_000) + "</body></html>"
	w, err := c.RecordFetch(ctx, "pages", client.FetchRequest{ID: "page", URL: "https://example.org/", Status: 200,
		Headers: map[string]string{"content-type": "text/html"}, Body: &body})
	if err != nil {
		t.Fatalf("record a %d-byte page: %v", len(body), err)
	}
	if w.Artifact.ID != "page" || w.BodyBlob != "sha256:"+sha256Hex(body) {
		t.Fatalf("recorded artifact %q, body blob %s; want page and the page's own bytes", w.Artifact.ID, w.BodyBlob)
	}
}

// sha256Hex is the lowercase hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
