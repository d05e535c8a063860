package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/client"
)

// bigAnswer serves status with a body of size bytes of fill, of the given
// content type, in 1 MiB writes (chunked: no Content-Length unless
// withLength), and counts requests.
func bigAnswer(t *testing.T, status int, contentType string, size int, fill string, withLength bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", contentType)
		if withLength {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		w.WriteHeader(status)
		chunk := []byte(strings.Repeat(fill, (1<<20)/len(fill)))
		for sent := 0; sent < size; sent += len(chunk) {
			if size-sent < len(chunk) {
				chunk = chunk[:size-sent]
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// allocated returns the bytes allocated while f ran.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestRefusalPageIsBounded: a refusal that is not a problem — a proxy's
// 502 page — becomes a Problem whose Detail is its start, at most
// client.MaxDetailBytes and a marker, and no more of it is read. A 200 MiB
// page became a 200 MiB Detail, with 612 MiB allocated.
func TestRefusalPageIsBounded(t *testing.T) {
	for _, withLength := range []bool{false, true} {
		srv, _ := bigAnswer(t, http.StatusBadGateway, "text/html", 64<<20, "<p>bad gateway</p>", withLength)
		var err error
		alloc := allocated(func() { _, err = client.New(srv.URL).Hash(context.Background(), "c", "") })
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != http.StatusBadGateway {
			t.Fatalf("a 502 page: %v", err)
		}
		if len(p.Detail) > client.MaxDetailBytes+100 || !strings.HasPrefix(p.Detail, "<p>bad gateway</p>") || !strings.Contains(p.Detail, "[cut: ") {
			t.Errorf("Detail of %d bytes: %.80q … %q", len(p.Detail), p.Detail, p.Detail[max(0, len(p.Detail)-80):])
		}
		if alloc > 16<<20 {
			t.Errorf("reading a 64 MiB refusal page allocated %d MiB", alloc>>20)
		}
	}
}

// TestRefusalJSONIsBounded: a JSON refusal that is not a problem document
// keeps its start as the Detail, with a marker saying how much there was;
// one past client.MaxProblemBytes is read that far only.
func TestRefusalJSONIsBounded(t *testing.T) {
	srv, _ := bigAnswer(t, http.StatusBadGateway, "application/json", 100<<10, "x", true)
	_, err := client.New(srv.URL).Hash(context.Background(), "c", "")
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != http.StatusBadGateway || len(p.Detail) > client.MaxDetailBytes+100 || !strings.Contains(p.Detail, "of 102400 bytes shown]") {
		t.Fatalf("a 100 KiB JSON refusal: %v", err)
	}
	// Read whole, 256 MiB would cost twice that and more; 16 MiB of it are
	// read, in a buffer that grows to that.
	srv, _ = bigAnswer(t, http.StatusBadGateway, "application/problem+json", 256<<20, "x", false)
	alloc := allocated(func() { _, err = client.New(srv.URL).Hash(context.Background(), "c", "") })
	if !errors.As(err, &p) || p.Status != http.StatusBadGateway || len(p.Detail) > client.MaxDetailBytes+100 || !strings.Contains(p.Detail, "longer than") {
		t.Fatalf("a 256 MiB JSON refusal: %v", err)
	}
	if alloc > 8*client.MaxProblemBytes {
		t.Errorf("reading a 256 MiB JSON refusal allocated %d MiB", alloc>>20)
	}
}

// TestProblemIsReadWhole: a problem document of some size (a quarantine
// path through many ids) is decoded whole, well within MaxProblemBytes.
func TestProblemIsReadWhole(t *testing.T) {
	path := make([]string, 50000)
	for i := range path {
		path[i] = "a-step-of-the-chain-" + strconv.Itoa(i)
	}
	body := `{"type":"urn:artifactd:problem:quarantined","title":"Quarantined","status":409,"detail":"rests on f","tainted_by":{"path":["` + strings.Join(path, `","`) + `"]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	_, err := client.New(srv.URL).PutArtifact(context.Background(), "c", client.ArtifactRequest{Type: "note", Data: map[string]any{}})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code() != "quarantined" || len(p.Extensions["tainted_by"]) < len(body)-200 {
		t.Fatalf("a %d-byte problem: %v", len(body), err)
	}
}

// TestAnswerOverTheBoundIsAnError: a successful answer longer than
// WithMaxAnswerBytes is an error of the call (ErrAnswerTooLarge), never
// decoded cut, and the request is not sent again.
func TestAnswerOverTheBoundIsAnError(t *testing.T) {
	for _, withLength := range []bool{false, true} {
		srv, n := bigAnswer(t, http.StatusOK, "application/json", 2<<20, " ", withLength)
		_, err := client.New(srv.URL, client.WithMaxAnswerBytes(1<<20)).Hash(context.Background(), "c", "")
		if !errors.Is(err, client.ErrAnswerTooLarge) {
			t.Errorf("a 2 MiB answer with a 1 MiB bound (Content-Length %v): %v", withLength, err)
		}
		if got := n.Load(); got != 1 {
			t.Errorf("the request was sent %d times", got)
		}
	}
	// Within the bound it is read.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"commit":"sha256:` + strings.Repeat("0", 64) + `","context_hash":"sha256:` + strings.Repeat("1", 64) + `"` + strings.Repeat(" ", 1000) + `}`))
	}))
	t.Cleanup(srv.Close)
	if _, err := client.New(srv.URL, client.WithMaxAnswerBytes(2000)).Hash(context.Background(), "c", ""); err != nil {
		t.Errorf("an answer within the bound: %v", err)
	}
}
