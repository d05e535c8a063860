package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/service"
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
	Edges      []service.EdgeInput `json:"edges"`
	Evidence   *planEvidence       `json:"evidence"`
}

type planEvidence struct {
	URL       string            `json:"url"`
	FinalURL  string            `json:"final_url"`
	Redirects []gate.Redirect   `json:"redirects"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Error     *string           `json:"error"`
}

// fetchInput is the evidence as a POST .../fetches body for step id.
func (ev *planEvidence) fetchInput(id string) service.FetchInput {
	body := ev.Body
	return service.FetchInput{ID: id, URL: ev.URL, FinalURL: ev.FinalURL, Redirects: ev.Redirects,
		Status: ev.Status, Headers: ev.Headers, Body: &body, Error: ev.Error}
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

// loadPlan writes the ten-step plan into context ctxID through the Go API:
// fetch steps as their evidence through the gate, which classifies it
// (s1, an empty HTTP 200, is FAILED transport.empty_body), derive steps as
// artifacts with their edges.
func loadPlan(ctx context.Context, svc *service.Service, ctxID string, steps []planStep) error {
	for _, s := range steps {
		var err error
		switch s.Kind {
		case "fetch":
			_, err = svc.RecordFetch(ctx, ctxID, s.Evidence.fetchInput(s.ID))
		default:
			_, err = svc.PutArtifact(ctx, ctxID, service.ArtifactInput{ID: s.ID, Type: s.Type, ProducedBy: s.ProducedBy, Data: s.Data, Edges: s.Edges})
		}
		if err != nil {
			return fmt.Errorf("step %s: %w", s.ID, err)
		}
	}
	return nil
}

// reportPage is the HTML an agent fetched for one annual report.
func reportPage(year, revenue string) string {
	return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Example Corp annual report ` + year + `</title></head><body>` +
		`<nav><a href="/">Example Corp</a></nav><article><h1>Annual report ` + year + `</h1>` +
		`<p>Revenue for the year was EUR ` + revenue + ` million. The board thanks every employee, customer and partner for a year of steady work.</p>` +
		`<p>Operating costs were held flat while the company opened two new regional offices and retired its oldest data centre.</p>` +
		`</article><footer>© Example Corp</footer></body></html>`
}

// loadAudit writes a small, clean research run: a question, two documents
// read from two fetches, a figure computed from both, and the answer.
func loadAudit(ctx context.Context, svc *service.Service, ctxID string) error {
	edge := func(rel, to string) service.EdgeInput { return service.EdgeInput{Rel: rel, To: to} }
	type item struct {
		fetch *service.FetchInput
		in    service.ArtifactInput
	}
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	fetched := func(id, year, revenue string) *service.FetchInput {
		body := reportPage(year, revenue)
		return &service.FetchInput{ID: id, URL: "https://example.com/reports/annual-" + year, Status: 200,
			Headers: map[string]string{"content-type": "text/html; charset=utf-8"}, Body: &body}
	}
	items := []item{
		{in: service.ArtifactInput{ID: "question", Type: "question", ProducedBy: "user",
			Data: raw(map[string]any{"text": "By how much did Example Corp's revenue grow from 2024 to 2025?"})}},
		{fetch: fetched("fetch-2024", "2024", "120.0")},
		{fetch: fetched("fetch-2025", "2025", "135.0")},
		{in: service.ArtifactInput{ID: "report-2024", Type: "document", ProducedBy: "reader",
			Data:  raw(map[string]any{"url": "https://example.com/reports/annual-2024", "title": "Example Corp annual report 2024", "text": "Revenue for the year was EUR 120.0 million."}),
			Edges: []service.EdgeInput{edge("extracted_from", "fetch-2024")}}},
		{in: service.ArtifactInput{ID: "report-2025", Type: "document", ProducedBy: "reader",
			Data:  raw(map[string]any{"url": "https://example.com/reports/annual-2025", "title": "Example Corp annual report 2025", "text": "Revenue for the year was EUR 135.0 million."}),
			Edges: []service.EdgeInput{edge("extracted_from", "fetch-2025")}}},
		{in: service.ArtifactInput{ID: "growth", Type: "claim", ProducedBy: "calculator",
			Data:  raw(map[string]any{"text": "Revenue grew 12.5% (135.0 / 120.0 - 1)", "value": 12.5}),
			Edges: []service.EdgeInput{edge("calculated_from", "report-2024"), edge("calculated_from", "report-2025")}}},
		{in: service.ArtifactInput{ID: "answer", Type: "answer", ProducedBy: "writer",
			Data:  raw(map[string]any{"text": "Example Corp's revenue grew 12.5%, from EUR 120.0 million in 2024 to EUR 135.0 million in 2025."}),
			Edges: []service.EdgeInput{edge("supported_by", "growth"), edge("responds_to", "question")}}},
	}
	for _, it := range items {
		var err error
		id := it.in.ID
		if it.fetch != nil {
			id = it.fetch.ID
			var w *service.FetchWrite
			if w, err = svc.RecordFetch(ctx, ctxID, *it.fetch); err == nil && w.Verdict != gate.Retrieved {
				err = fmt.Errorf("the gate says %s (%s)", w.Verdict, w.Reason)
			}
		} else {
			_, err = svc.PutArtifact(ctx, ctxID, it.in)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
	}
	return nil
}

// demoContext is one example context of `artifactd demo`.
type demoContext struct {
	id, mode, about string
	load            func(ctx context.Context, svc *service.Service, id string) error
}

func demoContexts() []demoContext {
	return []demoContext{
		{"poison-plan", store.ModeObserve, "ten-step plan; s1 is an empty HTTP 200 that poisons five later steps",
			func(ctx context.Context, svc *service.Service, id string) error {
				steps, err := parsePlan(poisonPlan)
				if err != nil {
					return err
				}
				return loadPlan(ctx, svc, id, steps)
			}},
		{"audit-demo", store.ModeEnforce, "a question, two documents from two fetches, a computed figure and the answer",
			loadAudit},
	}
}

// loadDemo creates and fills the example contexts that do not exist yet.
func loadDemo(ctx context.Context, st *store.Store, svc *service.Service, stdout io.Writer) error {
	for _, d := range demoContexts() {
		if _, err := st.CreateContext(ctx, d.id, d.mode); errors.Is(err, store.ErrExists) {
			fmt.Fprintf(stdout, "%-12s already loaded\n", d.id)
			continue
		} else if err != nil {
			return err
		}
		if err := d.load(ctx, svc, d.id); err != nil {
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
	fs := newFlagSet("demo", "[--data DIR | --store SPEC]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store (created if missing)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "demo: unexpected argument %q", pos[0])
	}
	sp, err := stf.resolve()
	if err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	st, reg, err := openAPISpec(ctx, sp, store.Options{Logger: discardLogger()}, false)
	if err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	defer st.Close()
	svc := newService(st, reg, serveConfig{Logger: discardLogger()}, nil)
	if err := loadDemo(ctx, st, svc, stdout); err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	head, err := st.Resolve(ctx, "poison-plan", "")
	if err != nil {
		return fail(stderr, exitUsage, "demo: %v", err)
	}
	fmt.Fprintf(stdout, `
Next:
  artifactd serve %[1]s          # serves http://%[2]s/ (the UI) and the API
  curl -s http://%[2]s/v1/contexts/poison-plan/quarantine
  curl -s 'http://%[2]s/v1/contexts/audit-demo/audit/answer?format=markdown'
  curl -s -X POST http://%[2]s/v1/contexts/poison-plan/verify -H 'Content-Type: application/json' -d '{"hash":"%[3]s"}'
  # with serve stopped, from the commit chain alone:
  artifactd replay %[1]s --context poison-plan --verify %[3]s
`, sp.flag(), defaultAddr, head.ContextHash)
	return exitOK
}
