package httpapi

import (
	"net/http"
	"time"

	"github.com/artifactd/artifactd/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are what /metrics exposes, in a registry of the Server's own
// (client_golang; never the process-wide default registry): the API's
// request and problem counters, the service layer's write counters, the
// store's cache size, and the Go runtime's and the process's collectors
// (heap, goroutines, resident size, open files).
type metrics struct {
	// handler serves the registry's metrics (promhttp, built once).
	handler     http.Handler
	requests    *prometheus.CounterVec   // by status class ("2xx")
	seconds     prometheus.Counter       // time spent serving requests
	durations   *prometheus.HistogramVec // request durations by status class
	problems    *prometheus.CounterVec   // error responses by problem code
	stateExport prometheus.Counter       // artifacts streamed by /state
	// byClass and durationByClass are requests' and durations' children
	// of each status class (index 1..5), looked up once.
	byClass         [6]prometheus.Counter
	durationByClass [6]prometheus.Observer
}

// statusClasses are the label values of the status classes, index 1..5.
var statusClasses = [6]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

// newMetrics registers the Server's metrics; writes reads the service
// layer's counters, panics the recovered handler panics, and cached the
// store's cache estimate (store.Store.CachedBytes).
func newMetrics(writes func() (commits, noops int64), panics func() int64, cached func() int64) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "artifactd_http_requests_total",
			Help: "HTTP requests by status class."}, []string{"class"}),
		seconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "artifactd_http_request_seconds_total",
			Help: "Time spent serving requests."}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "artifactd_http_request_duration_seconds",
			Help:    "Request durations by status class.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"class"}),
		problems: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "artifactd_problems_total",
			Help: "Error responses by problem code."}, []string{"code"}),
		stateExport: prometheus.NewCounter(prometheus.CounterOpts{Name: "artifactd_state_artifacts_streamed_total",
			Help: "Artifacts written by state exports."}),
	}
	for c := 1; c <= 5; c++ {
		// Every class is present from the start, at 0, as a scraper
		// expects of a counter it computes a rate of.
		m.byClass[c] = m.requests.WithLabelValues(statusClasses[c])
		m.durationByClass[c] = m.durations.WithLabelValues(statusClasses[c])
	}
	reg.MustRegister(m.requests, m.seconds, m.durations, m.problems, m.stateExport,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "artifactd_commits_total",
			Help: "Write requests that made a commit."}, func() float64 { c, _ := writes(); return float64(c) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "artifactd_noop_writes_total",
			Help: "Write requests that changed nothing."}, func() float64 { _, n := writes(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "artifactd_panics_total",
			Help: "Handler panics recovered (should stay 0)."}, func() float64 { return float64(panics()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "artifactd_store_cache_bytes",
			Help: "The store's estimate of the Go heap its caches hold (heads, state-map nodes, payloads), bounded by its cache budget."},
			func() float64 { return float64(cached()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
	return m
}

func (m *metrics) request(status int, d time.Duration) {
	m.seconds.Add(d.Seconds())
	if c := status / 100; c >= 1 && c <= 5 {
		m.byClass[c].Inc()
		m.durationByClass[c].Observe(d.Seconds())
	}
}

func (m *metrics) problem(code string) {
	m.problems.WithLabelValues(code).Inc()
}

// handleHealthz reports that the process serves HTTP. Like every read
// without an ETag it evaluates If-Match (respondRead): "*" holds, a list
// of tags is 412.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.respondRead(w, r, "", map[string]string{"status": "ok"}, nil)
}

// handleReadyz reports whether the store answers and the type registry is
// loaded.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if !s.types.Loaded() {
		if err := s.types.Load(r.Context(), s.st); err != nil {
			s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "the type registry is not loaded", Err: err})
			return
		}
	}
	if _, err := s.st.ListTypes(r.Context()); err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "the store does not answer", Err: err})
		return
	}
	if err := s.st.Health(); err != nil {
		s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: notReadyDetail(err), Err: err})
		return
	}
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			s.writeError(w, r, &Error{Code: CodeUnavailable, Detail: "not ready", Err: err})
			return
		}
	}
	s.respondRead(w, r, "", map[string]string{"status": "ready"}, nil)
}

// notReadyDetail says why the store is not ready without the text of err
// (which writeError logs): /readyz answers anyone, and that text may name
// another context's commit or the data directory.
func notReadyDetail(err error) string {
	switch service.Classify(err).Code {
	case CodeStoreCorrupt:
		return "not ready: " + service.CorruptDetail
	case CodeNoSpace:
		return "not ready: the data directory's file system has less free space than the store keeps in reserve; writes resume by themselves once there is room"
	}
	return "not ready: the store stopped taking writes; the server log says why"
}

// handleMetrics writes the metrics in the Prometheus text format (or
// another the scraper asks for); a list of tags in If-Match is 412, as on
// every read without an ETag.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if err := Preconditions(r, ""); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.handler.ServeHTTP(w, r)
}
