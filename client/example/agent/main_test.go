package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/client/internal/testserver"
)

// TestAgentLoop runs the example against a real `artifactd serve`: the
// recorded run verifies; the replayed run (another context, model calls
// answered from the record) calls no model and reaches the same context
// hash; a replay against a context without records fails loudly; after
// the server stops, `artifactd replay --verify` proves both hashes from
// the commit chain (exit 0).
func TestAgentLoop(t *testing.T) {
	s := testserver.Start(t, "")
	c := client.New(s.URL)
	ctx := context.Background()
	var out bytes.Buffer
	rec := &client.ModelRecorder{Client: c, ProducedBy: "model"}
	first, err := Run(ctx, c, "run-1", rec, &out)
	if err != nil {
		t.Fatalf("record run: %v\n%s", err, out.String())
	}
	if first.ByHash {
		t.Error("verify fell back to comparing GET .../hash; the server has POST .../verify")
	}
	if !first.Verified || !strings.Contains(out.String(), "fetch-report: RETRIEVED") || !strings.Contains(out.String(), "answer is confirmed") {
		t.Fatalf("record run output:\n%s", out.String())
	}
	// Running the same loop again in the same context changes nothing.
	again, err := Run(ctx, c, "run-1", rec, &out)
	if err != nil || again.ContextHash != first.ContextHash {
		t.Fatalf("re-run: %v %+v", err, again)
	}
	replay := &client.ModelRecorder{Client: c, ProducedBy: "model", Mode: client.Replay, Source: "run-1"}
	second, err := Run(ctx, c, "run-2", replay, &out)
	if err != nil {
		t.Fatalf("replay run: %v\n%s", err, out.String())
	}
	if second.ContextHash != first.ContextHash || !second.Verified {
		t.Fatalf("replayed run: %+v, recorded %+v", second, first)
	}
	miss := &client.ModelRecorder{Client: c, Mode: client.Replay, Source: "run-3"}
	var missErr *client.ErrReplayMiss
	if _, err := Run(ctx, c, "run-3", miss, &out); !errors.As(err, &missErr) {
		t.Fatalf("replay without records: %v", err)
	}
	s.Stop()
	for _, id := range []string{"run-1", "run-2"} {
		if rc, msg := s.Replay(id, first.ContextHash); rc != 0 {
			t.Errorf("artifactd replay --context %s --verify: exit %d\n%s", id, rc, msg)
		}
	}
}
