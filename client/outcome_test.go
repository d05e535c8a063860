package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/service"
)

// problemAnswerer is a local HTTP server that answers every request with
// the problem of code as artifactd's problem writer (httpapi.writeError)
// writes it: its type, title and status from httpapi's table, the detail
// given, the request path as instance, application/problem+json and
// no-store. retryAfter, when not empty, is sent too (artifactd sends none
// with a 503 other than overloaded; a proxy in front might). It counts the
// requests it saw.
func problemAnswerer(t *testing.T, code fault.Code, detail, retryAfter string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var seen atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		raw, err := service.Marshal(struct {
			Type     string `json:"type"`
			Title    string `json:"title"`
			Status   int    `json:"status"`
			Detail   string `json:"detail"`
			Instance string `json:"instance,omitempty"`
		}{httpapi.ProblemTypePrefix + string(code), httpapi.TitleOf(code), httpapi.StatusOf(code), detail, r.URL.Path})
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(httpapi.StatusOf(code))
		_, _ = w.Write(raw)
	}))
	t.Cleanup(s.Close)
	return s, &seen
}

// TestOutcomeUnknown: a POST write answered 503 commit-outcome-unknown
// (its commit went to PostgreSQL and the answer was lost) is an error
// IsOutcomeUnknown reports, a *Problem with status 503 and the code, and
// is sent exactly once: it may have landed, so the client does not send
// it again, even with retries turned up, even were a Retry-After added in
// front of the server. (Before: no IsOutcomeUnknown; a caller compared the
// code by hand.)
func TestOutcomeUnknown(t *testing.T) {
	for _, ra := range []string{"", "0"} {
		t.Run("Retry-After "+ra, func(t *testing.T) {
			t.Parallel()
			s, seen := problemAnswerer(t, httpapi.CodeOutcomeUnknown, service.OutcomeUnknownDetail, ra)
			c := client.New(s.URL, client.WithRetries(5, time.Millisecond))
			_, err := c.PutArtifact(context.Background(), "run", note)
			if !client.IsOutcomeUnknown(err) {
				t.Fatalf("err %v: IsOutcomeUnknown false", err)
			}
			if !client.IsOutcomeUnknown(fmt.Errorf("write: %w", err)) {
				t.Fatalf("wrapped %v: IsOutcomeUnknown false", err)
			}
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable || p.Code() != "commit-outcome-unknown" ||
				p.Title != "Commit outcome unknown" || p.Detail != service.OutcomeUnknownDetail || p.Instance != "/v1/contexts/run/artifacts" {
				t.Fatalf("err %v (%#v), want a 503 commit-outcome-unknown *Problem with the server's title, detail and instance", err, p)
			}
			if client.IsStale(err) || client.IsNotFound(err) {
				t.Fatalf("err %v taken for stale or not found", err)
			}
			if n := seen.Load(); n != 1 {
				t.Fatalf("%d requests, want 1: a write that may have landed was sent again", n)
			}
		})
	}
}

// TestOutcomeUnknownOnlyItsCode: other 503s (unavailable, overloaded) and
// errors that are no problem are not taken for commit-outcome-unknown.
func TestOutcomeUnknownOnlyItsCode(t *testing.T) {
	for _, tc := range []struct {
		code   fault.Code
		detail string
	}{
		{httpapi.CodeUnavailable, service.NotWrittenDetail},
		{httpapi.CodeOverloaded, "the server has reached its connection limit; only /healthz and /readyz are answered on this connection: retry"},
	} {
		t.Run(string(tc.code), func(t *testing.T) {
			t.Parallel()
			s, seen := problemAnswerer(t, tc.code, tc.detail, "")
			_, err := client.New(s.URL).PutArtifact(context.Background(), "run", note)
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable || p.Code() != string(tc.code) {
				t.Fatalf("err %v, want a 503 %s *Problem", err, tc.code)
			}
			if client.IsOutcomeUnknown(err) {
				t.Fatalf("503 %s taken for commit-outcome-unknown", tc.code)
			}
			if n := seen.Load(); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
	for _, err := range []error{nil, errors.New("commit-outcome-unknown"), &client.Problem{Type: "about:blank", Status: 503}} {
		if client.IsOutcomeUnknown(err) {
			t.Errorf("IsOutcomeUnknown(%v) true", err)
		}
	}
}
