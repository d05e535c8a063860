package httpapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artifactd/artifactd/service"
)

// metrics are the counters /metrics exposes.
type metrics struct {
	byClass    [6]atomic.Int64 // requests by status class (index 1..5)
	durationNS atomic.Int64    // total request time
	// writes counts the writes that made a commit and those that changed
	// nothing (the service layer's counters).
	writes      func() (commits, noops int64)
	mu          sync.Mutex // guards problems
	problems    map[string]int64
	stateExport atomic.Int64 // artifacts streamed by /state
}

func newMetrics() *metrics {
	return &metrics{problems: map[string]int64{}, writes: func() (int64, int64) { return 0, 0 }}
}

func (m *metrics) request(status int, d time.Duration) {
	if c := status / 100; c >= 1 && c <= 5 {
		m.byClass[c].Add(1)
	}
	m.durationNS.Add(int64(d))
}

func (m *metrics) problem(code string) {
	m.mu.Lock()
	m.problems[code]++
	m.mu.Unlock()
}

// handleHealthz reports that the process serves HTTP.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
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
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
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

// handleMetrics writes the counters in the Prometheus text format.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m := s.metrics
	var b strings.Builder
	b.WriteString("# HELP artifactd_http_requests_total HTTP requests by status class.\n# TYPE artifactd_http_requests_total counter\n")
	for c := 1; c <= 5; c++ {
		fmt.Fprintf(&b, "artifactd_http_requests_total{class=\"%dxx\"} %d\n", c, m.byClass[c].Load())
	}
	b.WriteString("# HELP artifactd_http_request_seconds_total Time spent serving requests.\n# TYPE artifactd_http_request_seconds_total counter\n")
	fmt.Fprintf(&b, "artifactd_http_request_seconds_total %g\n", time.Duration(m.durationNS.Load()).Seconds())
	b.WriteString("# HELP artifactd_commits_total Write requests that made a commit.\n# TYPE artifactd_commits_total counter\n")
	commits, noops := m.writes()
	fmt.Fprintf(&b, "artifactd_commits_total %d\n", commits)
	b.WriteString("# HELP artifactd_noop_writes_total Write requests that changed nothing.\n# TYPE artifactd_noop_writes_total counter\n")
	fmt.Fprintf(&b, "artifactd_noop_writes_total %d\n", noops)
	b.WriteString("# HELP artifactd_state_artifacts_streamed_total Artifacts written by state exports.\n# TYPE artifactd_state_artifacts_streamed_total counter\n")
	fmt.Fprintf(&b, "artifactd_state_artifacts_streamed_total %d\n", m.stateExport.Load())
	b.WriteString("# HELP artifactd_panics_total Handler panics recovered (should stay 0).\n# TYPE artifactd_panics_total counter\n")
	fmt.Fprintf(&b, "artifactd_panics_total %d\n", s.panics.Load())
	b.WriteString("# HELP artifactd_problems_total Error responses by problem code.\n# TYPE artifactd_problems_total counter\n")
	m.mu.Lock()
	codes := make([]string, 0, len(m.problems))
	for c := range m.problems {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, "artifactd_problems_total{code=%q} %d\n", c, m.problems[c])
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}
