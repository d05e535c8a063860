package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/artifactd/artifactd/internal/testenv"
)

// hugeBatch is how many artifacts one commit of the HTTP ingest carries
// (about 6.5 MB of JSON, within serve's default 8 MiB body limit).
const hugeBatch = 25_000

// hugeVisits is how many visits each figure is the median of.
const hugeVisits = 5

// buildServe compiles cmd/artifactd without the race detector (the test
// binary may have it: the server's times must be the product's) into a
// temporary directory and returns the binary.
func buildServe(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "no go command to build cmd/artifactd: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "artifactd")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/artifactd")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/artifactd: %v\n%s", err, out)
	}
	return bin
}

var servingRE = regexp.MustCompile(`serving (http://\S+)`)

// startServe runs `artifactd serve` on a loopback port with a fresh data
// directory and returns its base URL; it is stopped (SIGINT) at cleanup.
func startServe(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("serve stderr (tail):\n%s", tailOf(stderr.String(), 2000))
		}
	})
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("artifactd serve exited before serving:\n%s", stderr.String())
		}
		return strings.TrimRight(u, "/")
	case <-time.After(60 * time.Second):
		t.Fatal("artifactd serve did not start within 60 s")
	}
	return ""
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// postJSON posts v as JSON and fails the test unless the answer is 2xx.
func postJSON(t *testing.T, url string, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, tailOf(string(body), 600))
	}
}

// hugeHTTPOps are the ops of artifacts [lo, hi) of the 100k context as the
// API takes them: every tenth a source (a question; every 500th a
// tool_error, a poison root), the others claims derived from their
// source and supported by the claim before them.
func hugeHTTPOps(lo, hi int) []map[string]any {
	ops := make([]map[string]any, 0, 3*(hi-lo))
	for i := lo; i < hi; i++ {
		id := fmt.Sprintf("a%05d", i)
		by := fmt.Sprintf("agent-%d", i/1000%7)
		if i%10 == 0 {
			typ, text := "question", "What does source "+id+" say?"
			if i%500 == 0 {
				typ, text = "tool_error", "timeout reading "+id
			}
			ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": typ, "produced_by": by, "data": map[string]any{"text": text}}})
			continue
		}
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": "claim", "produced_by": by, "data": map[string]any{"text": "claim " + id, "value": i}}})
		ops = append(ops, map[string]any{"op": "link", "from": id, "rel": "derived_from", "to": fmt.Sprintf("a%05d", i-i%10)})
		if i%10 > 1 {
			ops = append(ops, map[string]any{"op": "link", "from": id, "rel": "supported_by", "to": fmt.Sprintf("a%05d", i-1)})
		}
	}
	return ops
}

// TestBrowserHugeServe measures how long a 100k-artifact context's
// overview and neighbourhood pages take to render in server time, run
// where CI runs it (go test -race): it builds the artifactd binary
// without the race detector, starts `artifactd serve`,
// ingests 100,000 artifacts over HTTP in bulk commits, and opens the pages
// in headless Chromium, reading the Server-Timing the page reports. Each
// figure is the median of five visits: first visits of the overview (each
// after a one-artifact commit, so nothing is clustered or laid out yet)
// and of five neighbourhoods never drawn before, and revisits of each. The
// figures are logged, and those past the budget marked (unless the
// machine is overloaded: budgetApplies), but not failed on: performance
// is measured (docs/BENCHMARKS.md, "The UI on a 100k context"), not
// asserted, and a first visit here measured 308–375 ms on a quiet 2-core
// machine as well as under 300 ms. It asserts on the DOM (a clustered
// overview of every artifact, a neighbourhood picture), checks the pages
// at 390 px, and takes the README screenshots of the overview.
func TestBrowserHugeServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a 100k-artifact context")
	}
	ctx := newBrowser(t)
	out := testOutDir(t)
	start := time.Now()
	bin := buildServe(t)
	built := time.Since(start)
	base := startServe(t, bin)
	postJSON(t, base+"/v1/contexts", map[string]any{"id": "huge", "quarantine": "observe"})
	start = time.Now()
	for lo := 0; lo < hugeN; lo += hugeBatch {
		postJSON(t, base+"/v1/contexts/huge/commits", map[string]any{"author": "bench", "message": fmt.Sprintf("load %d-%d", lo, lo+hugeBatch-1), "ops": hugeHTTPOps(lo, lo+hugeBatch)})
	}
	t.Logf("built the binary in %v; ingested %d artifacts over HTTP in %d commits in %v", built.Round(time.Millisecond), hugeN, hugeN/hugeBatch, time.Since(start).Round(time.Millisecond))

	timed := func(path, ready string) float64 {
		t.Helper()
		step(t, ctx, path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS(ready)))
		took := eval[float64](t, ctx, serverTimingJS)
		if took < 0 {
			t.Fatalf("%s: no Server-Timing", path)
		}
		return took
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	step(t, ctx, "desktop", chromedp.EmulateViewport(1400, 900))
	t.Logf("context page: %.1f ms server time (loads the head)", timed("/ui/contexts/huge", "table.artifacts"))

	const overview = "/ui/contexts/huge/graph"
	var first, again []float64
	for i := range hugeVisits {
		// A new head: its overview is clustered and laid out afresh.
		postJSON(t, base+"/v1/contexts/huge/commits", map[string]any{"author": "bench", "message": fmt.Sprintf("one more %d", i),
			"ops": []map[string]any{{"op": "put", "artifact": map[string]any{"id": fmt.Sprintf("late%d", i), "type": "note", "data": map[string]any{"text": "late note"}}}}})
		first = append(first, timed(overview, "#clusters"))
	}
	for range hugeVisits {
		again = append(again, timed(overview, "#clusters"))
	}
	total := hugeN + hugeVisits
	if got := eval[string](t, ctx, `document.getElementById("graph-count").textContent`); !strings.HasPrefix(got, thousands(int64(total))+" artifacts in") {
		t.Errorf("overview says %q, want all %d artifacts clustered", got, total)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#clusters tbody tr").length`); n < 2 {
		t.Errorf("overview: %d clusters", n)
	}
	screenshot(t, ctx, out, "overview.png")
	figures := []struct {
		name         string
		first, again []float64
	}{{"overview", first, again}}

	first, again = nil, nil
	for i := range hugeVisits {
		root := fmt.Sprintf("a%05d", 50_005+10*i) // claims in the middle
		first = append(first, timed(overview+"?root="+root, "#graph svg.provenance g.node"))
		if n := eval[int](t, ctx, `document.querySelectorAll("#graph g.node").length`); n < 3 {
			t.Errorf("neighbourhood of %s: %d nodes", root, n)
		}
	}
	for range hugeVisits {
		again = append(again, timed(overview+"?root=a50005", "#graph svg.provenance g.node"))
	}
	if got := eval[string](t, ctx, `document.getElementById("graph-root").textContent`); !strings.Contains(got, "a50005") {
		t.Errorf("neighbourhood root %q", got)
	}
	figures = append(figures, struct {
		name         string
		first, again []float64
	}{"neighbourhood", first, again})

	check := budgetApplies(t)
	limit := float64(hugeBudget.Milliseconds())
	for _, f := range figures {
		t.Logf("100k context %-13s server time, median of %d: first visit %6.1f ms %v, revisit %6.1f ms %v",
			f.name, hugeVisits, median(f.first), f.first, median(f.again), f.again)
		if check && (median(f.first) > limit || median(f.again) > limit) {
			t.Logf("100k context %s: past the %.0f ms budget", f.name, limit)
		}
	}

	// Phone width: the big pages fit too.
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, p := range []string{"/ui/contexts/huge", overview, overview + "?group=producer", overview + "?root=a50005"} {
		step(t, ctx, "phone "+p, chromedp.Navigate(base+p), chromedp.WaitReady(chromedp.CSS("footer")))
		if over := eval[float64](t, ctx, overflowJS); over > 1 {
			t.Errorf("phone: %s overflows by %vpx", p, over)
		}
		if p == overview {
			screenshot(t, ctx, out, "overview-phone.png")
		}
	}
}
