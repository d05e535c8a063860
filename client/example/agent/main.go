// Command agent is the example agent loop of the Go client: question →
// fetch through the gate → claim with edges → answer → audit → context
// hash → verify. Its "model" is a stand-in function; run it once with
// -mode record, then again with -mode replay against a new context: the
// replay answers from the recorded model call, calls no model, and
// reaches the same context hash.
//
//	artifactd serve &
//	go run ./client/example/agent -server http://127.0.0.1:7070 -context run-1
//	go run ./client/example/agent -server http://127.0.0.1:7070 -context run-2 -mode replay -source run-1
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/artifactd/artifactd/client"
)

// page is what the agent "fetched": the evidence it hands to the gate.
const page = `<html><head><title>Annual report 2025</title></head><body>
<h1>Annual report 2025</h1>
<p>Revenue for the year was 12.4 million euros, up from 10.1 million in 2024.
The board attributes the growth to the new subscription product.</p></body></html>`

// Model is the model the agent calls; the example's stand-in answers from
// the page.
type Model func(ctx context.Context, req client.ModelRequest) (any, error)

func standInModel(ctx context.Context, req client.ModelRequest) (any, error) {
	return map[string]any{"text": "Revenue grew from 10.1 to 12.4 million euros (22.8 %).", "finish_reason": "stop"}, nil
}

// Result is what one run of the loop ends with.
type Result struct {
	ContextHash string
	Verified    bool
	ByHash      bool
}

// Run runs the loop in context ctxID.
func Run(ctx context.Context, c *client.Client, ctxID string, rec *client.ModelRecorder, out io.Writer) (*Result, error) {
	if _, err := c.EnsureContext(ctx, ctxID, "enforce"); err != nil {
		return nil, err
	}
	question := "How much did revenue grow in 2025?"
	if _, err := c.PutArtifact(ctx, ctxID, client.ArtifactRequest{ID: "question", Type: "question", ProducedBy: "user",
		Data: map[string]any{"text": question}}); err != nil {
		return nil, err
	}
	body := page
	f, err := c.RecordFetch(ctx, ctxID, client.FetchRequest{ID: "fetch-report", URL: "https://example.com/reports/2025",
		Status: 200, Headers: map[string]string{"content-type": "text/html; charset=utf-8"}, Body: &body})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "fetch-report: %s %s\n", f.Verdict, f.Reason)
	if _, err := c.PutArtifact(ctx, ctxID, client.ArtifactRequest{ID: "report", Type: "document", ProducedBy: "reader",
		Data:  map[string]any{"url": "https://example.com/reports/2025", "text": "Revenue 2025: 12.4 million euros; 2024: 10.1 million."},
		Edges: []client.Edge{{Rel: "extracted_from", To: "fetch-report"}}}); err != nil {
		return nil, err
	}
	rec.Context = ctxID
	resp, err := rec.Call(ctx, client.ModelRequest{Model: "stand-in-1", Parameters: map[string]any{"temperature": 0},
		Messages: []any{map[string]any{"role": "user", "content": question + "\n\n" + "Revenue 2025: 12.4 million euros; 2024: 10.1 million."}}},
		standInModel)
	if err != nil {
		return nil, err
	}
	claim := strings.TrimSpace(string(resp))
	if _, err := c.PutArtifact(ctx, ctxID, client.ArtifactRequest{ID: "growth", Type: "claim", ProducedBy: "model",
		Data:  map[string]any{"text": "Revenue grew 22.8 % in 2025", "value": 22.8, "model_response": claim},
		Edges: []client.Edge{{Rel: "calculated_from", To: "report"}}}); err != nil {
		return nil, err
	}
	if _, err := c.PutArtifact(ctx, ctxID, client.ArtifactRequest{ID: "answer", Type: "answer", ProducedBy: "agent",
		Data:  map[string]any{"text": "Revenue grew by 22.8 % (10.1 → 12.4 million euros)."},
		Edges: []client.Edge{{Rel: "supported_by", To: "growth"}, {Rel: "responds_to", To: "question"}}}); err != nil {
		return nil, err
	}
	audit, err := c.Audit(ctx, ctxID, "answer")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "audit: answer is %s; %d confirmed, %d quarantined; sources %d\n", audit.Trust.Status, audit.Summary.Confirmed, audit.Summary.Quarantined, len(audit.Sources))
	h, err := c.Hash(ctx, ctxID, "")
	if err != nil {
		return nil, err
	}
	v, err := c.Verify(ctx, ctxID, h.ContextHash, h.Commit)
	if err != nil {
		return nil, err
	}
	how := "replayed by the server"
	if v.ByHash {
		how = "compared with GET .../hash (this server has no verify route)"
	}
	fmt.Fprintf(out, "context hash %s\nverify: match=%v (%s)\n", h.ContextHash, v.Match, how)
	return &Result{ContextHash: h.ContextHash, Verified: v.Match, ByHash: v.ByHash}, nil
}

func main() {
	server := flag.String("server", "http://127.0.0.1:7070", "artifactd address")
	ctxID := flag.String("context", "example-agent", "context of this run")
	mode := flag.String("mode", "record", "record (call the model and record it) or replay (answer from the record)")
	source := flag.String("source", "", "in replay mode, the context holding the records (default -context)")
	flag.Parse()
	rec := &client.ModelRecorder{ProducedBy: "model", Source: *source}
	switch *mode {
	case "record":
	case "replay":
		rec.Mode = client.Replay
	default:
		fmt.Fprintln(os.Stderr, "agent: -mode must be record or replay")
		os.Exit(2)
	}
	c := client.New(*server, client.WithToken(os.Getenv("ARTIFACTD_TOKEN")))
	rec.Client = c
	res, err := Run(context.Background(), c, *ctxID, rec, os.Stdout)
	var miss *client.ErrReplayMiss
	switch {
	case errors.As(err, &miss):
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	case !res.Verified:
		os.Exit(1)
	}
}
