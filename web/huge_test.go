package web

import (
	"github.com/artifactd/artifactd/internal/lru"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
)

// hugeN is the size of the context the issue asks the overview and the
// neighbourhood pages to handle.
const hugeN = 100_000

// hugePages are the graph pages of a 100k-artifact context that must
// render within hugeBudget of server time.
var hugePages = []struct{ name, path string }{
	{"overview-type", "/ui/contexts/huge/graph"},
	{"overview-producer", "/ui/contexts/huge/graph?group=producer"},
	{"overview-trust", "/ui/contexts/huge/graph?group=trust"},
	{"neighbourhood", "/ui/contexts/huge/graph?root=a50005"},
	{"neighbourhood-2", "/ui/contexts/huge/graph?root=a50005&up=2&down=2"},
	{"neighbourhood-expand", "/ui/contexts/huge/graph?root=a50005&expand=a50004&expand=a50006"},
	{"neighbourhood-path", "/ui/contexts/huge/graph?root=a50009&path=1"},
}

const hugeBudget = 300 * time.Millisecond

func newHugeServer(tb testing.TB) http.Handler {
	tb.Helper()
	s := openStore(tb)
	start := time.Now()
	loadBig(tb, s, "huge", hugeN)
	tb.Logf("loaded %d artifacts in %v", hugeN, time.Since(start).Round(time.Millisecond))
	return New(Options{Store: s, Logger: quietLogger()})
}

// serveTimed serves path and returns the Server-Timing duration the page
// reports and the body.
func serveTimed(tb testing.TB, h http.Handler, path string) (time.Duration, string) {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("GET %s: %d\n%s", path, rec.Code, excerpt(rec.Body.String(), "detail"))
	}
	st := rec.Header().Get("Server-Timing")
	ms, err := strconv.ParseFloat(strings.TrimPrefix(st, "app;dur="), 64)
	if err != nil {
		tb.Fatalf("GET %s: Server-Timing %q", path, st)
	}
	return time.Duration(ms * float64(time.Millisecond)), rec.Body.String()
}

// TestHugeContextGraphs renders the overview and neighbourhood pages of a
// 100k-artifact context and checks they are what they claim: a clustered
// overview (never the first 500 ids) and a neighbourhood picture. It
// reports the server time (Server-Timing) of a first visit — clusters
// computed afresh, the median of three — and of a revisit (median of
// five), and marks those past hugeBudget. It does not fail on them:
// performance is measured (docs/BENCHMARKS.md, "The UI on a 100k
// context"), not asserted, on a machine whose load a test cannot know.
func TestHugeContextGraphs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100k-artifact context")
	}
	if raceEnabled {
		t.Skip("a 100k-artifact context takes minutes under the race detector; TestOverviewClusters covers the code")
	}
	h := newHugeServer(t)
	srv := h.(*server)
	serveTimed(t, h, "/ui/contexts/huge") // loads the head
	check := budgetApplies(t)
	for _, p := range hugePages {
		var first, again []time.Duration
		var body string
		cpu0 := cpuTime()
		for range 3 {
			srv.overviews = lru.New[string, *clusterSet](overviewsKept, nil) // a first visit: nothing clustered yet
			d, b := serveTimed(t, h, p.path)
			first, body = append(first, d), b
		}
		cpu := (cpuTime() - cpu0) / 3
		for range 5 {
			d, _ := serveTimed(t, h, p.path)
			again = append(again, d)
		}
		slices.Sort(first)
		slices.Sort(again)
		t.Logf("%-22s first visit %7.1f ms (%6.1f cpu-ms), revisit %6.1f ms (medians)", p.name, ms(first[1]), ms(cpu), ms(again[2]))
		if check && (first[1] > hugeBudget || again[2] > hugeBudget) {
			t.Logf("%s: past the %v budget", p.path, hugeBudget)
		}
		switch {
		case strings.Contains(p.path, "root="):
			if !strings.Contains(body, `<svg`) || !strings.Contains(body, `id="graph-root"`) {
				t.Errorf("%s: no neighbourhood picture", p.path)
			}
		default:
			if !strings.Contains(body, `id="clusters"`) || !strings.Contains(body, "100,000 artifacts in") {
				t.Errorf("%s: no clustered overview:\n%s", p.path, excerpt(body, "graph-count"))
			}
		}
	}
}

// budgetApplies reports whether time budgets are checked: not under the
// race detector (several-fold slower), and not while the machine's
// one-minute load average exceeds twice its CPUs (a shared machine then
// measures its neighbours, not this code; the figures are still logged).
func budgetApplies(tb testing.TB) bool {
	tb.Helper()
	if raceEnabled {
		return false
	}
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return true
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return true
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil || load <= 2*float64(runtime.NumCPU()) {
		return true
	}
	tb.Logf("load average %.1f on %d CPUs: time budgets not checked", load, runtime.NumCPU())
	return false
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the CPU time of the process so far (user and system, every
// thread, GC included); benchmarks report it per operation beside the wall
// time because the machines they run on are shared.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs fn b.N times and reports cpu-ms/op.
func loopCPU(b *testing.B, fn func()) {
	b.Helper()
	start := cpuTime()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	b.ReportMetric(ms(cpuTime()-start)/float64(n), "cpu-ms/op")
}

// BenchmarkHugeOverview renders the clustered overview of the 100k
// context with its clusters and layout cached (a revisit).
func BenchmarkHugeOverview(b *testing.B) {
	h := newHugeServer(b)
	serve(b, h, "/ui/contexts/huge/graph")
	loopCPU(b, func() { serve(b, h, "/ui/contexts/huge/graph") })
}

// BenchmarkHugeOverviewCold clusters the 100k context afresh on every
// iteration (a new grouping cache each time; the layout stays cached).
func BenchmarkHugeOverviewCold(b *testing.B) {
	s := openStore(b)
	loadBig(b, s, "huge", hugeN)
	h := New(Options{Store: s, Logger: quietLogger()}).(*server)
	serve(b, h, "/ui/contexts/huge/graph")
	loopCPU(b, func() {
		h.overviews = lru.New[string, *clusterSet](overviewsKept, nil)
		h.tallies = lru.New[string](maxTallyBytes, tallyCost)
		serve(b, h, "/ui/contexts/huge/graph")
	})
}

// BenchmarkHugeOverviewAfterCommit commits one artifact to the 100k
// context and renders its overview, on every iteration: the page a
// person watching an agent write reloads (its overview derived from the
// one before; its layout new, since the counts changed).
func BenchmarkHugeOverviewAfterCommit(b *testing.B) {
	s := openStore(b)
	loadBig(b, s, "huge", hugeN)
	h := New(Options{Store: s, Logger: quietLogger()})
	serve(b, h, "/ui/contexts/huge/graph")
	i := 0
	loopCPU(b, func() {
		i++
		id := "late" + strconv.Itoa(i)
		commit(b, s, "huge", "", "bench", id, putOp(b, id, "claim", "agent", map[string]any{"i": i}), linkOp(id, "derived_from", "a00010"))
		serve(b, h, "/ui/contexts/huge/graph")
	})
}

// BenchmarkHugeNeighbourhood renders a one-hop neighbourhood in the 100k
// context.
func BenchmarkHugeNeighbourhood(b *testing.B) {
	h := newHugeServer(b)
	serve(b, h, "/ui/contexts/huge/graph?root=a50005")
	loopCPU(b, func() { serve(b, h, "/ui/contexts/huge/graph?root=a50005") })
}

// BenchmarkHugeNeighbourhoodCold renders neighbourhoods never seen before
// (a different root each time: text lookups and a layout every time).
func BenchmarkHugeNeighbourhoodCold(b *testing.B) {
	h := newHugeServer(b)
	serve(b, h, "/ui/contexts/huge/graph?root=a50005")
	i := 0
	loopCPU(b, func() {
		i++
		serve(b, h, "/ui/contexts/huge/graph?root=a"+strconv.Itoa(10000+i*37%89000+1))
	})
}

// BenchmarkBuildClusters100k clusters a 100k-artifact state held in
// memory (no store, no page): the work of a first overview visit.
func BenchmarkBuildClusters100k(b *testing.B) {
	st := graph.NewState(nil)
	if _, err := st.ApplyOps(bigOps(b, hugeN)); err != nil {
		b.Fatal(err)
	}
	tr := graph.NewTrustIndex(st, graph.RoleBase(nil, nil))
	for _, group := range []string{"type", "producer", "trust"} {
		b.Run(group, func(b *testing.B) {
			loopCPU(b, func() { buildClusters(st, tr.Status, group) })
		})
	}
}
