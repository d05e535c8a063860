package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/client"
)

// TestDotIDs: artifacts whose ids are "." and ".." are read back as
// themselves. Their paths went out as dot segments, the server answered a
// redirect to the cleaned path, and the client decoded the context's
// description (or the artifact list) as the artifact, with no error.
func TestDotIDs(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	if _, err := c.EnsureContext(ctx, "dots", ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"..", "."} {
		if _, err := c.PutArtifact(ctx, "dots", client.ArtifactRequest{ID: id, Type: "note", Data: map[string]any{"text": "id " + id}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"..", "."} {
		a, err := c.GetArtifact(ctx, "dots", id, "")
		if err != nil || a.ID != id {
			t.Errorf("GetArtifact(%q): %+v, %v", id, a, err)
		}
	}
}

// TestRedirectIsNotFollowed: an answer that redirects is an error, not the
// answer of where it points.
func TestRedirectIsNotFollowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/contexts/c" {
			http.Redirect(w, r, "/v1/contexts/c", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c"})
	}))
	defer srv.Close()
	a, err := client.New(srv.URL).GetArtifact(context.Background(), "c", "x", "")
	if err == nil {
		t.Fatalf("a redirect was followed: %+v", a)
	}
}

// TestGetModelCallEscapesTheHash: the request hash is one path segment;
// a '/', '?' or '#' in it changed the route or dropped the at= before.
func TestGetModelCallEscapesTheHash(t *testing.T) {
	var raw string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw = r.URL.EscapedPath() + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{})
	}))
	defer srv.Close()
	_, _ = client.New(srv.URL).GetModelCall(context.Background(), "c", "a/b?at=other#x", "main")
	if want := "/v1/contexts/c/model-calls/a%2Fb%3Fat=other%23x?at=main"; raw != want {
		t.Fatalf("request went to %q, want %q", raw, want)
	}
}

// TestModelRecorderKeepsTheResponse: a recorded response is the one Call
// returned, digit for digit; one the server cannot store exactly (an
// integer past 2^53) is an error of the call. The recorder stored a
// rounded copy before, and replay answered it.
func TestModelRecorderKeepsTheResponse(t *testing.T) {
	c, _ := newClient(t)
	ctx := context.Background()
	if _, err := c.EnsureContext(ctx, "rec", ""); err != nil {
		t.Fatal(err)
	}
	rec := &client.ModelRecorder{Client: c, Context: "rec", Mode: client.Record, ProducedBy: "model"}
	answer := func(v any) func(context.Context, client.ModelRequest) (any, error) {
		return func(context.Context, client.ModelRequest) (any, error) { return v, nil }
	}
	req := client.ModelRequest{Model: "m"}
	got, err := rec.Call(ctx, req, answer(map[string]any{"n": 0.1, "text": "forty-two"}))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := client.RequestHash(req)
	mc, err := c.GetModelCall(ctx, "rec", h, "")
	if err != nil || string(mc.Response) != string(got) {
		t.Fatalf("Call returned %s, the record holds %s (%v)", got, mc.Response, err)
	}
	big := client.ModelRequest{Model: "big"}
	if _, err := rec.Call(ctx, big, answer(map[string]any{"id": int64(1234567890123456789)})); err == nil || !strings.Contains(err.Error(), "unsafe_integer") {
		t.Errorf("a response with an integer past 2^53: %v, want the server's unsafe_integer refusal", err)
	}
}
