package httpapi

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsExposition parses /metrics as a Prometheus scraper does and
// checks that its figures agree with what the test did: the commits and
// no-op writes it made, the requests it sent by status class (the counter
// and the histogram alike), the problems it caused, a store cache that
// holds what the writes read, and the runtime's and the process's own
// families.
func TestMetricsExposition(t *testing.T) {
	e := newEnv(t)
	e.createContext("m", "")
	for i := range 3 {
		e.must(e.post("/v1/contexts/m/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": fmt.Sprint(i)}}), 201)
	}
	e.must(e.post("/v1/contexts/m/artifacts", map[string]any{"id": "n", "type": "note", "data": map[string]any{"text": "2"}}), 200)
	if r := e.get("/v1/contexts/absent"); r.status != 404 {
		t.Fatalf("absent context: %d", r.status)
	}
	if r := e.post("/v1/contexts/m/artifacts", map[string]any{"type": "note"}); r.status != 422 {
		t.Fatalf("no data: %d", r.status)
	}
	// 1 create + 3 puts + 1 no-op put = 5 answered 2xx before the scrape,
	// then 2 answered 4xx.

	r := e.get("/metrics")
	if r.status != 200 {
		t.Fatalf("/metrics: %d", r.status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, r.body)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		f := families[name]
		if f == nil {
			t.Fatalf("no family %s", name)
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelOf(m, labels[i]) != labels[i+1] {
					continue metrics
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return 0
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"artifactd_commits_total", nil, 3}, // writes of artifacts; creating the context is not one
		{"artifactd_noop_writes_total", nil, 1},
		{"artifactd_http_requests_total", []string{"class", "2xx"}, 5},
		{"artifactd_http_requests_total", []string{"class", "4xx"}, 2},
		{"artifactd_http_requests_total", []string{"class", "5xx"}, 0},
		{"artifactd_http_request_duration_seconds", []string{"class", "2xx"}, 5},
		{"artifactd_http_request_duration_seconds", []string{"class", "4xx"}, 2},
		{"artifactd_problems_total", []string{"code", "not-found"}, 1},
		{"artifactd_panics_total", nil, 0},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels...); got != c.want {
			t.Errorf("%s %v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value("artifactd_store_cache_bytes"); got <= 0 {
		t.Errorf("artifactd_store_cache_bytes = %v after writes the store keeps a head of", got)
	}
	if got := value("go_goroutines"); got < 1 {
		t.Errorf("go_goroutines = %v", got)
	}
	if runtime.GOOS == "linux" {
		if got := value("process_resident_memory_bytes"); got < 1<<20 {
			t.Errorf("process_resident_memory_bytes = %v", got)
		}
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestMetricsNegotiatesOpenMetrics: docs/API.md says a scraper that asks
// for OpenMetrics gets it; the handler negotiated only the text and
// protobuf formats, and answered OpenMetrics' Accept with the text
// format.
func TestMetricsNegotiatesOpenMetrics(t *testing.T) {
	e := newEnv(t)
	r := e.send(req{method: "GET", path: "/metrics", header: map[string]string{"Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"}})
	if r.status != 200 {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("asked for OpenMetrics, got Content-Type %q", ct)
	}
	if !bytes.HasSuffix(r.body, []byte("# EOF\n")) {
		t.Fatalf("an OpenMetrics exposition ends with # EOF:\n%s", r.body)
	}
	// The text format stays the default.
	if ct := e.get("/metrics").header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("no Accept: Content-Type %q", ct)
	}
}
