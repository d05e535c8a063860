package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/store"
)

// poisonPlan is a copy of testdata/poison-plan/plan.json (go:embed cannot
// reach outside the package; TestDemoPlanIsTheFixture keeps them equal).
//
//go:embed demodata/poison-plan.json
var poisonPlan []byte

// planStep is one step of the ten-step plan.
type planStep struct {
	ID         string              `json:"id"`
	Kind       string              `json:"kind"`
	What       string              `json:"what"`
	Type       string              `json:"type"`
	ProducedBy string              `json:"produced_by"`
	Data       json.RawMessage     `json:"data"`
	Edges      []httpapi.EdgeInput `json:"edges"`
	Evidence   *planEvidence       `json:"evidence"`
}

type planEvidence struct {
	URL      string            `json:"url"`
	FinalURL string            `json:"final_url"`
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     string            `json:"body"`
}

func parsePlan(raw []byte) ([]planStep, error) {
	var p struct {
		Steps []planStep `json:"steps"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return p.Steps, nil
}

// demoVerdict stands in for the gate until it lands: an empty body is
// FAILED (transport.empty_body), anything else RETRIEVED. The evidence body
// is kept as a blob named by the verdict.
func demoVerdict(ctx context.Context, st *store.Store, ev *planEvidence) (json.RawMessage, error) {
	v := map[string]any{
		"url": ev.URL, "final_url": ev.FinalURL, "status": ev.Status, "content_type": ev.Headers["content-type"],
		"verdict": "RETRIEVED", "reason": "demo.nonempty_body", "ruleset": "demo/v0", "raw_bytes": len(ev.Body),
	}
	if ev.Body == "" {
		v["verdict"], v["reason"] = "FAILED", "transport.empty_body"
	} else {
		d, err := st.PutBlob(ctx, []byte(ev.Body))
		if err != nil {
			return nil, err
		}
		v["body_sha256"], v["body_blob"] = d.String(), d.String()
	}
	return json.Marshal(v)
}

// loadPlan writes the ten-step plan into context ctxID through the Go API:
// fetch steps as fetch_verdict artifacts through the gate path, derive
// steps as artifacts with their edges.
func loadPlan(ctx context.Context, srv *httpapi.Server, st *store.Store, ctxID string, steps []planStep) error {
	for _, s := range steps {
		var err error
		switch s.Kind {
		case "fetch":
			var data json.RawMessage
			if data, err = demoVerdict(ctx, st, s.Evidence); err == nil {
				_, err = srv.GatePutArtifact(ctx, ctxID, httpapi.ArtifactInput{ID: s.ID, Type: httpapi.TypeFetchVerdict, ProducedBy: "gate", Data: data})
			}
		default:
			_, err = srv.PutArtifact(ctx, ctxID, httpapi.ArtifactInput{ID: s.ID, Type: s.Type, ProducedBy: s.ProducedBy, Data: s.Data, Edges: s.Edges})
		}
		if err != nil {
			return fmt.Errorf("step %s: %w", s.ID, err)
		}
	}
	return nil
}

// loadAudit writes a small, clean research run: a question, two documents
// read from two fetches, a figure computed from both, and the answer.
func loadAudit(ctx context.Context, srv *httpapi.Server, ctxID string) error {
	edge := func(rel, to string) httpapi.EdgeInput { return httpapi.EdgeInput{Rel: rel, To: to} }
	type item struct {
		gate bool
		in   httpapi.ArtifactInput
	}
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	items := []item{
		{in: httpapi.ArtifactInput{ID: "question", Type: "question", ProducedBy: "user",
			Data: raw(map[string]any{"text": "By how much did Example Corp's revenue grow from 2024 to 2025?"})}},
		{gate: true, in: httpapi.ArtifactInput{ID: "fetch-2024", Type: httpapi.TypeFetchVerdict, ProducedBy: "gate",
			Data: raw(map[string]any{"url": "https://example.com/reports/annual-2024", "status": 200, "content_type": "text/html", "verdict": "RETRIEVED", "reason": "demo.nonempty_body", "ruleset": "demo/v0"})}},
		{gate: true, in: httpapi.ArtifactInput{ID: "fetch-2025", Type: httpapi.TypeFetchVerdict, ProducedBy: "gate",
			Data: raw(map[string]any{"url": "https://example.com/reports/annual-2025", "status": 200, "content_type": "text/html", "verdict": "RETRIEVED", "reason": "demo.nonempty_body", "ruleset": "demo/v0"})}},
		{in: httpapi.ArtifactInput{ID: "report-2024", Type: "document", ProducedBy: "reader",
			Data:  raw(map[string]any{"url": "https://example.com/reports/annual-2024", "title": "Example Corp annual report 2024", "text": "Revenue for the year was EUR 120.0 million."}),
			Edges: []httpapi.EdgeInput{edge("extracted_from", "fetch-2024")}}},
		{in: httpapi.ArtifactInput{ID: "report-2025", Type: "document", ProducedBy: "reader",
			Data:  raw(map[string]any{"url": "https://example.com/reports/annual-2025", "title": "Example Corp annual report 2025", "text": "Revenue for the year was EUR 135.0 million."}),
			Edges: []httpapi.EdgeInput{edge("extracted_from", "fetch-2025")}}},
		{in: httpapi.ArtifactInput{ID: "growth", Type: "claim", ProducedBy: "calculator",
			Data:  raw(map[string]any{"text": "Revenue grew 12.5% (135.0 / 120.0 - 1)", "value": 12.5}),
			Edges: []httpapi.EdgeInput{edge("calculated_from", "report-2024"), edge("calculated_from", "report-2025")}}},
		{in: httpapi.ArtifactInput{ID: "answer", Type: "answer", ProducedBy: "writer",
			Data:  raw(map[string]any{"text": "Example Corp's revenue grew 12.5%, from EUR 120.0 million in 2024 to EUR 135.0 million in 2025."}),
			Edges: []httpapi.EdgeInput{edge("supported_by", "growth"), edge("responds_to", "question")}}},
	}
	for _, it := range items {
		var err error
		if it.gate {
			_, err = srv.GatePutArtifact(ctx, ctxID, it.in)
		} else {
			_, err = srv.PutArtifact(ctx, ctxID, it.in)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", it.in.ID, err)
		}
	}
	return nil
}

// demoContext is one example context of `artifactd demo`.
type demoContext struct {
	id, mode, about string
	load            func(ctx context.Context, srv *httpapi.Server, st *store.Store, id string) error
}

func demoContexts() []demoContext {
	return []demoContext{
		{"poison-plan", store.ModeObserve, "ten-step plan; s1 is an empty HTTP 200 that poisons five later steps",
			func(ctx context.Context, srv *httpapi.Server, st *store.Store, id string) error {
				steps, err := parsePlan(poisonPlan)
				if err != nil {
					return err
				}
				return loadPlan(ctx, srv, st, id, steps)
			}},
		{"audit-demo", store.ModeEnforce, "a question, two documents from two fetches, a computed figure and the answer",
			func(ctx context.Context, srv *httpapi.Server, _ *store.Store, id string) error {
				return loadAudit(ctx, srv, id)
			}},
	}
}

// loadDemo creates and fills the example contexts that do not exist yet.
func loadDemo(ctx context.Context, st *store.Store, srv *httpapi.Server, stdout io.Writer) error {
	for _, d := range demoContexts() {
		if _, err := st.CreateContext(ctx, d.id, d.mode); errors.Is(err, store.ErrExists) {
			fmt.Fprintf(stdout, "%-12s already loaded\n", d.id)
			continue
		} else if err != nil {
			return err
		}
		if err := d.load(ctx, srv, st, d.id); err != nil {
			return fmt.Errorf("context %s: %w", d.id, err)
		}
		c, err := st.Resolve(ctx, d.id, "")
		if err != nil {
			return err
		}
		var sum string
		err = st.Read(ctx, d.id, "", func(v *store.View) error {
			t := v.Trust.Summary()
			sum = fmt.Sprintf("%d confirmed, %d quarantined, %d poison root(s)", t.Confirmed, t.Quarantined, t.PoisonRoots)
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-12s %s (%s)\n             %d artifacts, %d edges; %s\n             context hash %s\n",
			d.id, d.about, d.mode, c.Artifacts, c.Edges, sum, c.ContextHash)
	}
	return nil
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[--data DIR]", stderr)
	dataDir := fs.String("data", defaultDataDir, "data directory of the store (created if missing)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "demo: unexpected argument %q", pos[0])
	}
	st, reg, err := openAPIStore(ctx, *dataDir, discardLogger())
	if err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	defer st.Close()
	srv := newServer(st, reg, serveConfig{Logger: discardLogger()})
	if err := loadDemo(ctx, st, srv, stdout); err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	fmt.Fprintf(stdout, `
Next:
  artifactd serve --data %[1]s
  curl -s localhost:7070/v1/contexts/poison-plan/quarantine
  curl -s localhost:7070/v1/contexts/audit-demo/audit/answer?format=markdown
  artifactd replay --data %[1]s --context poison-plan --verify <context hash>
`, *dataDir)
	return exitOK
}
