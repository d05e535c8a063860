package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/internal/testenv"
)

// The browser tests drive a real headless Chromium through chromedp.
// Without a Chromium they skip — except under CI (env CI set), where they
// fail, so a missing browser can never pass silently.

// chromiumPath finds the browser: $ARTIFACTD_CHROMIUM, else chromium,
// chromium-browser, google-chrome on PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ARTIFACTD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "no Chromium found (install Debian's chromium: apt-get install -y chromium, or set ARTIFACTD_CHROMIUM)")
	return ""
}

// newBrowser starts a headless Chromium with a private profile and no
// background networking, returning a chromedp context for one tab. A
// browser test is left out by -short, unless CI is set: then every
// browser test runs, and a missing Chromium fails (chromiumPath).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("a browser test: -short leaves it out")
	}
	path := chromiumPath(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// Start the browser without a deadline (a deadline on the first run
	// would bound the browser's life), then bound each step.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// step runs actions with a deadline.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds, riding out the
// navigation a click started (evaluations fail while a page is replaced).
func waitFor(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", cond)
}

// screenshot saves a full-page PNG under the test output folder
// ($ARTIFACTD_TEST_OUT, else a temporary directory) and, with
// UPDATE_SCREENSHOTS=1, into docs/screenshots/ for the README.
func screenshot(t *testing.T, ctx context.Context, outDir, name string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(outDir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func testOutDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTD_TEST_OUT")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "web")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cssRGB turns "#rrggbb" into the "rgb(r, g, b)" getComputedStyle gives.
func cssRGB(hex string) string {
	var r, g, b int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return hex
	}
	return fmt.Sprintf("rgb(%d, %d, %d)", r, g, b)
}

// pictureNode is what the page's provenance SVG says about one node.
type pictureNode struct {
	ID    string `json:"id"`
	Class string `json:"cls"`
	Fill  string `json:"fill"`
	Label string `json:"label"`
	Title string `json:"title"`
}

// readPicture collects the nodes of the provenance SVG from the DOM: the
// artifact id from the node's link, its class, the fill of its shape, its
// label and its tooltip.
const readPicture = `Array.from(document.querySelectorAll("#graph svg.provenance g.node")).map(g => {
  const a = g.querySelector("a");
  const href = a ? a.getAttribute("href") : "";
  const path = href.split("?")[0];
  const id = decodeURIComponent(path.substring(path.indexOf("/artifacts/") + "/artifacts/".length));
  const shape = g.querySelector("polygon, ellipse, path");
  return {id: id, cls: g.getAttribute("class"), fill: shape ? shape.getAttribute("fill") : "",
    label: Array.from(g.querySelectorAll("text")).map(t => t.textContent).join("\n"),
    title: a && a.querySelector("title") ? a.querySelector("title").textContent : ""};
})`

// TestBrowserPoisonPlan loads the ten-step plan, opens its graph in
// Chromium and checks every node's trust class and colour through the
// DOM, clicks through to an artifact and its history, opens the quarantine
// view and a diff (TestBrowserAuditor takes the README screenshots).
func TestBrowserPoisonPlan(t *testing.T) {
	ctx := newBrowser(t)
	s := openStore(t)
	pc := loadPoisonPlan(t, s, "poison-plan")
	// Two more contexts make the list page look like a real one.
	loadBig(t, s, "crawl-2026-03", 240)
	if _, err := s.CreateContext(context.Background(), "empty-run", "enforce"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: s, Logger: quietLogger()}))
	defer srv.Close()
	base := srv.URL

	// The contexts list.
	step(t, ctx, "contexts", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table.contexts")))
	rows := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("table.contexts tbody tr td:first-child")).map(td => td.textContent)`)
	if !slices.Equal(rows, []string{"crawl-2026-03", "empty-run", "poison-plan"}) {
		t.Errorf("contexts listed: %q", rows)
	}

	// The graph: every step with the status the plan expects.
	step(t, ctx, "graph", chromedp.Navigate(base+"/ui/contexts/poison-plan/graph"),
		chromedp.WaitVisible(chromedp.CSS("#graph svg.provenance g.node")))
	nodes := eval[[]pictureNode](t, ctx, readPicture)
	want := map[string]graph.Status{}
	for _, id := range pc.Plan.Expect.Observe.PoisonRoots {
		want[id] = graph.StatusPoisonRoot
	}
	for _, id := range pc.Plan.Expect.Observe.Quarantined {
		want[id] = graph.StatusQuarantined
	}
	for _, id := range pc.Plan.Expect.Observe.Confirmed {
		want[id] = graph.StatusConfirmed
	}
	if len(nodes) != 10 {
		t.Fatalf("the picture has %d nodes, want 10: %+v", len(nodes), nodes)
	}
	legend := eval[string](t, ctx, `document.getElementById("legend").textContent`)
	for _, n := range nodes {
		st, ok := want[n.ID]
		if !ok {
			t.Errorf("unexpected node %q", n.ID)
			continue
		}
		if !slices.Contains(strings.Fields(n.Class), string(st)) {
			t.Errorf("node %s: class %q, want %s", n.ID, n.Class, st)
		}
		if n.Fill != statusStyles[st].Fill {
			t.Errorf("node %s: fill %s, want %s (%s)", n.ID, n.Fill, statusStyles[st].Fill, st)
		}
		if !strings.HasPrefix(n.Label, n.ID+"\n") || !strings.Contains(n.Title, statusName(st)) {
			t.Errorf("node %s: label %q, tooltip %q", n.ID, n.Label, n.Title)
		}
		if !strings.Contains(legend, statusName(st)) {
			t.Errorf("legend does not name %q", statusName(st))
		}
	}
	// The legend's swatches have the colours of the nodes.
	for _, st := range []graph.Status{graph.StatusPoisonRoot, graph.StatusQuarantined, graph.StatusConfirmed} {
		swatch := eval[string](t, ctx, `getComputedStyle(document.querySelector(".legend .swatch.`+string(st)+`")).backgroundColor`)
		if want := cssRGB(statusStyles[st].Fill); swatch != want {
			t.Errorf("%s swatch colour %s, nodes are %s", st, swatch, want)
		}
	}
	// Shapes tell types apart: fetches are cylinders (paths), claims ellipses.
	shapes := eval[map[string]string](t, ctx, `Object.fromEntries(Array.from(document.querySelectorAll("#graph g.node")).map(g => [g.querySelector("text").textContent, g.querySelector("polygon,ellipse,path").tagName]))`)
	if shapes["s1"] != "path" || shapes["s3"] != "ellipse" || shapes["s10"] != "polygon" {
		t.Errorf("node shapes by type: %v", shapes)
	}

	// Click the quarantined s6 node: its page shows the path s6 → s3 → s1.
	step(t, ctx, "click s6", chromedp.Click(chromedp.CSS(`#graph g.node.quarantined a[href^="/ui/contexts/poison-plan/artifacts/s6"]`)),
		chromedp.WaitVisible(chromedp.CSS("#artifact-id")))
	if id := eval[string](t, ctx, `document.getElementById("artifact-id").textContent`); id != "s6" {
		t.Fatalf("clicked to %q, want s6", id)
	}
	path := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#trust-path li")).map(li => li.textContent)`)
	if !slices.Equal(path, []string{"s6", "s3", "s1"}) {
		t.Errorf("trust path of s6: %q", path)
	}
	// Then along the path to s1, the poison root, with its receipt.
	step(t, ctx, "click s1", chromedp.Click(chromedp.CSS(`#trust-path li:last-child a`)),
		chromedp.WaitVisible(chromedp.CSS("#receipt")))
	receipt := eval[string](t, ctx, `document.getElementById("receipt").textContent`)
	for _, w := range []string{"FAILED", "transport.empty_body", "gate/v1", "https://shop.example/api/price/42"} {
		if !strings.Contains(receipt, w) {
			t.Errorf("receipt lacks %q", w)
		}
	}

	// History: on the refetch branch s1 has two versions; the older one's
	// link opens the page at the commit that wrote it.
	step(t, ctx, "s1 at refetch", chromedp.Navigate(base+"/ui/contexts/poison-plan/artifacts/s1?at=refetch"),
		chromedp.WaitVisible(chromedp.CSS("#history")))
	versions := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#history tbody tr td:first-child")).map(td => td.textContent)`)
	if !slices.Equal(versions, []string{"v2", "v1"}) {
		t.Errorf("history versions %q", versions)
	}
	step(t, ctx, "open v1", chromedp.Click(chromedp.CSS(`#history tbody tr:last-child td:first-child a`)),
		chromedp.WaitVisible(chromedp.CSS(`#shown-commit[title="`+pc.Steps["s1"].ID.String()+`"]`)))
	if status := eval[string](t, ctx, `document.querySelector("#trust .badge").textContent`); status != "poison root" {
		t.Errorf("s1 v1 trust %q", status)
	}

	// Quarantine: s1 with a blast radius of 5.
	step(t, ctx, "quarantine", chromedp.Navigate(base+"/ui/contexts/poison-plan/quarantine"), chromedp.WaitVisible(chromedp.CSS("#roots")))
	roots := eval[[][]string](t, ctx, `Array.from(document.querySelectorAll("#roots tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent))`)
	if len(roots) != 1 || roots[0][0] != "s1" || roots[0][3] != "5" {
		t.Errorf("poison roots %q", roots)
	}
	quarantined := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#quarantined tbody tr td:first-child")).map(td => td.textContent)`)
	if !slices.Equal(quarantined, pc.Plan.Expect.Observe.Quarantined) {
		t.Errorf("quarantined %q, want %q", quarantined, pc.Plan.Expect.Observe.Quarantined)
	}

	// Diff main → refetch: s1 changed, and the five quarantined steps are
	// confirmed again.
	step(t, ctx, "diff", chromedp.Navigate(base+"/ui/contexts/poison-plan/diff?from=main&to=refetch"),
		chromedp.WaitVisible(chromedp.CSS("#diff-trust")))
	changed := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#diff-artifacts > tbody > tr:not(.fields)")).map(tr => tr.cells[0].textContent + " " + tr.cells[1].textContent)`)
	if !slices.Equal(changed, []string{"changed s1"}) {
		t.Errorf("diff artifacts %q", changed)
	}
	lifted := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#diff-trust tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent).join(" "))`)
	wantLifted := []string{"s1 poison root confirmed"}
	for _, id := range pc.Plan.Expect.Observe.Quarantined {
		wantLifted = append(wantLifted, id+" quarantined confirmed")
	}
	naturalSort(wantLifted) // s1, s5, s6, s8, s10
	if !slices.Equal(lifted, wantLifted) {
		t.Errorf("trust changes %q, want %q", lifted, wantLifted)
	}

	// The diff form works from the page.
	step(t, ctx, "diff form", chromedp.SetValue(chromedp.CSS("#from"), pc.Steps["s2"].ID.Hex()[:12]),
		chromedp.SetValue(chromedp.CSS("#to"), pc.Steps["s4"].ID.Hex()[:12]),
		chromedp.Click(chromedp.CSS(".diff-form button")),
		chromedp.WaitVisible(chromedp.CSS(`#diff-range a[href*="`+pc.Steps["s4"].ID.Hex()+`"]`)))
	added := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#diff-artifacts > tbody > tr:not(.fields)")).map(tr => tr.cells[1].textContent)`)
	if !slices.Equal(added, []string{"s3", "s4"}) {
		t.Errorf("diff s2..s4 artifacts %q", added)
	}

	// Audit of the answer, with the Markdown and Mermaid to copy.
	step(t, ctx, "audit", chromedp.Navigate(base+"/ui/contexts/poison-plan/audit/s10"), chromedp.WaitVisible(chromedp.CSS("#audit-md")))
	md := eval[string](t, ctx, `document.getElementById("audit-md").value`)
	mermaid := eval[string](t, ctx, `document.getElementById("audit-mermaid").value`)
	if !strings.HasPrefix(md, "# Audit report") || !strings.HasPrefix(mermaid, "flowchart TD") {
		t.Errorf("audit texts: %.40q / %.40q", md, mermaid)
	}

	// The context page with its search form.
	step(t, ctx, "search", chromedp.Navigate(base+"/ui/contexts/poison-plan"),
		chromedp.SetValue(chromedp.CSS("#q"), "s1"), chromedp.Click(chromedp.CSS(".search button")))
	waitFor(t, ctx, `location.search.includes("q=s1") && document.readyState === "complete"`)
	found := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("table.artifacts tbody tr td:first-child")).map(td => td.textContent)`)
	if !slices.Equal(found, []string{"s1", "s10"}) {
		t.Errorf("search s1: %q", found)
	}
	step(t, ctx, "context", chromedp.Navigate(base+"/ui/contexts/poison-plan"), chromedp.WaitVisible(chromedp.CSS("table.log")))

	// Zoom buttons (the one script) change the picture's size.
	step(t, ctx, "graph again", chromedp.Navigate(base+"/ui/contexts/poison-plan/graph"), chromedp.WaitVisible(chromedp.CSS(".graph-toolbar button")))
	w0 := eval[float64](t, ctx, `document.querySelector("#graph svg").getBoundingClientRect().width`)
	step(t, ctx, "zoom in", chromedp.Click(chromedp.CSS(`button[data-zoom="in"]`)), chromedp.Click(chromedp.CSS(`button[data-zoom="in"]`)))
	w1 := eval[float64](t, ctx, `document.querySelector("#graph svg").getBoundingClientRect().width`)
	if w1 <= w0 {
		t.Errorf("zoom in: width %v → %v", w0, w1)
	}

	// Phone width: no page overflows sideways (tables and the picture
	// scroll inside their own boxes).
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, p := range []string{"/", "/ui/contexts/poison-plan", "/ui/contexts/poison-plan/graph", "/ui/contexts/poison-plan/artifacts/s1",
		"/ui/contexts/poison-plan/quarantine", "/ui/contexts/poison-plan/diff?from=main&to=refetch", "/ui/contexts/poison-plan/audit/s10"} {
		step(t, ctx, "phone "+p, chromedp.Navigate(base+p), chromedp.WaitReady(chromedp.CSS("main")))
		overflow := eval[float64](t, ctx, overflowJS)
		if overflow > 1 {
			t.Errorf("phone width: %s overflows by %vpx", p, overflow)
		}
	}
	step(t, ctx, "phone graph", chromedp.Navigate(base+"/ui/contexts/poison-plan/graph"), chromedp.WaitVisible(chromedp.CSS("#graph svg")))
}

// TestBrowserXSS loads every page that shows the hostile context in
// Chromium with the Content-Security-Policy header removed, so escaping
// alone must hold: no injected script runs (window.__pwned stays
// undefined), no injected element or attribute exists, and each hostile
// string is displayed literally.
func TestBrowserXSS(t *testing.T) {
	ctx := newBrowser(t)
	s := openStore(t)
	first, head := loadHostile(t, s, "xss")
	h := New(Options{Store: s, Logger: quietLogger()})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(noCSP{w}, r)
	}))
	defer srv.Close()

	type pageCheck struct {
		Pwned     bool     `json:"pwned"`
		Scripts   []string `json:"scripts"`
		Injected  []string `json:"injected"`
		Handlers  []string `json:"handlers"`
		BadLinks  []string `json:"badLinks"`
		Text      string   `json:"text"`
		Textareas string   `json:"textareas"`
		Artifact  string   `json:"artifact"`
	}
	const inspect = `(() => {
  const all = Array.from(document.querySelectorAll("*"));
  return {
    pwned: typeof window.__pwned !== "undefined",
    scripts: Array.from(document.scripts).map(s => s.getAttribute("src") || "inline:" + s.textContent),
    injected: Array.from(document.querySelectorAll("img, iframe, object, embed, foreignObject, image, use, details[ontoggle], body script:not([src])")).map(e => e.outerHTML),
    handlers: all.flatMap(el => Array.from(el.attributes).filter(a => a.name.toLowerCase().startsWith("on")).map(a => el.tagName + "[" + a.name + "]")),
    badLinks: Array.from(document.querySelectorAll("[href], [src], [action]")).map(el => el.getAttribute("href") || el.getAttribute("src") || el.getAttribute("action")).filter(u => !/^\/([^\/\\]|$)/.test(u)),
    text: document.body.textContent,
    textareas: Array.from(document.querySelectorAll("textarea")).map(t => t.value).join("\n"),
    artifact: document.getElementById("artifact-id") ? document.getElementById("artifact-id").textContent : "",
  };
})()`
	for _, p := range hostilePages(first.ID.Hex(), head.ID.Hex()) {
		step(t, ctx, p, chromedp.Navigate(srv.URL+p), chromedp.WaitReady(chromedp.CSS("footer")))
		got := eval[pageCheck](t, ctx, inspect)
		if got.Pwned {
			t.Errorf("%s: an injected script ran", p)
		}
		for _, src := range got.Scripts {
			if !strings.HasPrefix(src, "/ui/assets/app.js?v=") {
				t.Errorf("%s: foreign script %q", p, src)
			}
		}
		if len(got.Injected) > 0 || len(got.Handlers) > 0 || len(got.BadLinks) > 0 {
			t.Errorf("%s: injected elements %q, handlers %q, links %q", p, got.Injected, got.Handlers, got.BadLinks)
		}
		if u, _ := url.Parse(p); strings.Contains(u.Path, "/artifacts/") {
			if want := literalOn(p); len(want) != 1 || (got.Artifact != want[0] && !strings.HasPrefix(want[0], "<script>")) {
				t.Errorf("%s: shows artifact %q, want %q", p, got.Artifact, want)
			}
		}
		for _, raw := range literalOn(p) {
			if !strings.Contains(got.Text, raw) && !strings.Contains(got.Textareas, raw) {
				t.Errorf("%s: %q is not shown literally", p, raw)
			}
		}
	}
}

// literalOn lists the hostile strings a page must display as text.
func literalOn(page string) []string {
	u, _ := url.Parse(page)
	path := u.EscapedPath()
	switch {
	case strings.Contains(path, "/artifacts/") || strings.Contains(path, "/audit/"):
		seg := path[strings.LastIndex(path, "/")+1:]
		id, _ := url.PathUnescape(seg)
		if seg == "" {
			id = u.Query().Get("id")
		}
		if strings.HasPrefix(id, "xss-") {
			return []string{xssScript}
		}
		return []string{id}
	case strings.HasSuffix(path, "/graph") && u.Query().Get("root") != "":
		return []string{u.Query().Get("root")}
	case strings.HasSuffix(path, "/graph") && u.Query().Get("find") != "":
		return []string{xssScript, xssImg}
	case path == "/ui/compare":
		return []string{xssImg, xssScript}
	case strings.HasSuffix(path, "/graph") || strings.HasSuffix(path, "/quarantine") || strings.HasSuffix(path, "/diff"):
		return []string{xssScript, xssImg, xssSVG}
	case u.Query().Get("at") != "":
		return []string{u.Query().Get("at")}
	case path == "/ui/contexts/xss":
		if q := u.Query().Get("q"); q != "" {
			return []string{q}
		}
		return hostileIDs
	}
	return nil
}

// noCSP drops the Content-Security-Policy header, so the XSS test proves
// escaping, not the policy.
type noCSP struct{ http.ResponseWriter }

func (w noCSP) WriteHeader(code int) {
	w.Header().Del("Content-Security-Policy")
	w.ResponseWriter.WriteHeader(code)
}

func (w noCSP) Write(b []byte) (int, error) {
	w.Header().Del("Content-Security-Policy")
	return w.ResponseWriter.Write(b)
}
