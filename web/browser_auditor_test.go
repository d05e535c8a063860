package web

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// serverTimingJS reads the Server-Timing duration (ms) of the page shown.
const serverTimingJS = `(() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const st = nav && nav.serverTiming ? nav.serverTiming.find(e => e.name === "app") : null;
  return st ? st.duration : -1;
})()`

// overflowJS is how far the page is wider than the screen. The layout
// viewport (clientWidth) is the device width; window.innerWidth is not: a
// mobile browser zooms out to fit a page that overflows, and innerWidth
// then grows with it, hiding the overflow.
const overflowJS = `document.documentElement.scrollWidth - document.documentElement.clientWidth`

// TestBrowserAuditor walks the auditor's questions in Chromium at desktop
// (1400×900) and phone (390×844) widths, asserting on the DOM: what was
// said shows in graph nodes and audit rows, a changed artifact has its
// field-level diff, a click expands a neighbourhood, the path to a poison
// root is drawn, and no page overflows sideways at 390 px. It takes the
// README screenshots of every page at both widths but the 100k overview's
// (TestBrowserHugeServe checks that context and takes them).
func TestBrowserAuditor(t *testing.T) {
	ctx := newBrowser(t)
	out := testOutDir(t)
	s := openStore(t)
	pc := loadPoisonPlan(t, s, "poison-plan")
	loadPoisonPlan(t, s, "poison-plan-rerun")
	loadBig(t, s, "crawl-2026-03", 240)
	if _, err := s.CreateContext(context.Background(), "empty-run", "enforce"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: s, Logger: quietLogger()}))
	defer srv.Close()
	base := srv.URL
	plan := "/ui/contexts/poison-plan"
	desktop := chromedp.EmulateViewport(1400, 900)
	step(t, ctx, "desktop", desktop)

	// Say what was said: node labels carry the artifact's text.
	step(t, ctx, "graph", chromedp.Navigate(base+plan+"/graph"), chromedp.WaitVisible(chromedp.CSS("#graph svg.provenance g.node")))
	labels := map[string]string{}
	for _, n := range eval[[]pictureNode](t, ctx, readPicture) {
		labels[n.ID] = n.Label
	}
	for id, want := range map[string]string{"s6": "Item 42 costs 18.39 EUR", "s7": "Shipping to the EU costs 7.50", "s1": "FAILED transport.empty_body", "s9": "1 USD = 0.92 EUR"} {
		if !strings.Contains(strings.ReplaceAll(labels[id], "\n", " "), want) {
			t.Errorf("node %s label %q does not say %q", id, labels[id], want)
		}
	}
	for id, mark := range map[string]string{"s1": "✖", "s6": "⚠", "s2": "✓"} {
		if !strings.Contains(labels[id], mark) {
			t.Errorf("node %s label %q lacks the trust mark %s", id, labels[id], mark)
		}
	}
	screenshot(t, ctx, out, "graph.png")

	// Audit rows say what was said, top-down: answer, verdict, rests on.
	step(t, ctx, "audit", chromedp.Navigate(base+plan+"/audit/s10"), chromedp.WaitVisible(chromedp.CSS("#audit-artifacts")))
	rows := eval[[][]string](t, ctx, `Array.from(document.querySelectorAll("#audit-artifacts tbody tr")).map(tr => [tr.cells[1].textContent, tr.querySelector("td.said").textContent])`)
	saidOf := map[string]string{}
	for _, r := range rows {
		saidOf[r[0]] = r[1]
	}
	if saidOf["s8"] != "Discounted price is 16.55 EUR" || !strings.HasPrefix(saidOf["s1"], "FAILED transport.empty_body") {
		t.Errorf("audit rows say %q", saidOf)
	}
	order := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("main section[id^=audit-], main table#audit-artifacts")).map(e => e.id)`)
	if !slices.Equal(order, []string{"audit-answer", "audit-verdict", "audit-artifacts"}) {
		t.Errorf("audit page order %q", order)
	}
	if path := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#audit-path li")).map(li => li.textContent)`); !slices.Equal(path, []string{"s10", "s8", "s5", "s1"}) {
		t.Errorf("audit poison path %q", path)
	}
	screenshot(t, ctx, out, "audit.png")

	// A field-level diff of the changed s1, with its trust change beside it.
	step(t, ctx, "diff", chromedp.Navigate(base+plan+"/diff?from=main&to=refetch"), chromedp.WaitVisible(chromedp.CSS(".fields-table")))
	fields := eval[[][]string](t, ctx, `Array.from(document.querySelectorAll(".fields-table tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent))`)
	if !slices.ContainsFunc(fields, func(r []string) bool {
		return slices.Equal(r, []string{"/verdict", "changed", `"FAILED"`, `"RETRIEVED"`})
	}) {
		t.Errorf("field changes of s1: %q", fields)
	}
	if tr := eval[string](t, ctx, `document.querySelector("#diff-artifacts > tbody > tr").cells[5].textContent`); tr != "poison root → confirmed" {
		t.Errorf("trust beside the change: %q", tr)
	}
	screenshot(t, ctx, out, "diff.png")

	// A neighbourhood: one hop up and down; a click on a node expands it.
	step(t, ctx, "neighbourhood", chromedp.Navigate(base+plan+"/graph?root=s5"), chromedp.WaitVisible(chromedp.CSS("#graph svg.provenance g.node")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#graph g.node").length`); n != 3 {
		t.Errorf("neighbourhood of s5: %d nodes, want 3", n)
	}
	step(t, ctx, "expand s8", chromedp.Click(chromedp.CSS(`#graph g.node a[href*="expand=s8"]`)))
	waitFor(t, ctx, `location.search.includes("expand=s8") && document.readyState === "complete"`)
	ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#node-table tbody td.id")).map(td => td.textContent)`)
	if !slices.Equal(sorted(ids), []string{"s1", "s10", "s5", "s8"}) {
		t.Errorf("after expanding s8: %q", ids)
	}
	screenshot(t, ctx, out, "neighbourhood.png")

	// The path to the poison root, from the answer.
	step(t, ctx, "answer", chromedp.Navigate(base+plan+"/graph?root=s10&up=0&down=0"), chromedp.WaitVisible(chromedp.CSS("#show-path")))
	step(t, ctx, "show path", chromedp.Click(chromedp.CSS("#show-path")))
	waitFor(t, ctx, `location.search.includes("path=1") && document.readyState === "complete"`)
	if path := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#poison-path li")).map(li => li.textContent)`); !slices.Equal(path, []string{"s10", "s8", "s5", "s1"}) {
		t.Errorf("path to the poison root %q", path)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#graph g.node.on-path").length`); n != 4 {
		t.Errorf("%d nodes drawn on the path, want 4", n)
	}
	screenshot(t, ctx, out, "poison-path.png")

	// Compare two runs.
	step(t, ctx, "compare", chromedp.Navigate(base+"/ui/compare?a=poison-plan&b=poison-plan&b_at=refetch"), chromedp.WaitVisible(chromedp.CSS("#compare-rows")))
	if v := eval[string](t, ctx, `document.getElementById("compare-verdict").textContent`); !strings.HasPrefix(v, "≠ Different states") {
		t.Errorf("compare verdict %q", v)
	}
	screenshot(t, ctx, out, "compare.png")

	// The rest of the pages, for the README.
	shots := []struct{ name, path, ready string }{
		{"contexts", "/", "table.contexts"},
		{"context", plan, "table.log"},
		{"artifact", plan + "/artifacts/s1", "#receipt"},
		{"version-diff", plan + "/artifacts/s1?at=" + pc.Refetch.ID.Hex() + "&vs=" + pc.Steps["s1"].ID.Hex(), "#version-diff"},
		{"quarantine", plan + "/quarantine", "#roots"},
	}
	for _, p := range shots {
		step(t, ctx, p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		screenshot(t, ctx, out, p.name+".png")
	}

	// Phone width: no page overflows sideways, the main content comes
	// before the controls, and each page has its phone screenshot.
	pages := []struct{ name, path string }{
		{"contexts", "/"}, {"contexts-search", "/?q=plan"}, {"context", plan}, {"context-search", plan + "?q=price"},
		{"graph", plan + "/graph"}, {"neighbourhood", plan + "/graph?root=s5&expand=s8"},
		{"graph-earlier", plan + "/graph?at=" + pc.Steps["s6"].ID.Hex()}, {"artifact-refetch", plan + "/artifacts/s1?at=refetch"},
		{"poison-path", plan + "/graph?root=s10&up=0&down=0&path=1"}, {"find", plan + "/graph?find=shipping"},
		{"artifact", plan + "/artifacts/s1"}, {"version-diff", shots[3].path},
		{"quarantine", plan + "/quarantine"}, {"diff", plan + "/diff?from=main&to=refetch"}, {"diff-all", plan + "/diff"},
		{"audit", plan + "/audit/s10"}, {"compare", "/ui/compare?a=poison-plan&b=poison-plan&b_at=refetch"},
		{"compare-same", "/ui/compare?a=poison-plan&b=poison-plan-rerun"}, {"compare-empty", "/ui/compare"},
		{"crawl-overview", "/ui/contexts/crawl-2026-03/graph"}, {"empty", "/ui/contexts/empty-run/graph"},
	}
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phoneShots := map[string]bool{"contexts": true, "context": true, "graph": true, "neighbourhood": true, "artifact": true,
		"quarantine": true, "diff": true, "audit": true, "compare": true}
	for _, p := range pages {
		step(t, ctx, "phone "+p.name, chromedp.Navigate(base+p.path), chromedp.WaitReady(chromedp.CSS("footer")))
		if over := eval[float64](t, ctx, overflowJS); over > 1 {
			wide := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("main *")).filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && !e.closest(".graph-viewport, .table-wrap, pre, textarea, .legend-shapes")).slice(0, 5).map(e => e.tagName + "." + e.className)`)
			t.Errorf("phone: %s overflows by %vpx (%q)", p.path, over, wide)
		}
		if phoneShots[p.name] {
			screenshot(t, ctx, out, p.name+"-phone.png")
		}
	}
	// On a phone the picture comes before the graph's forms and legend.
	step(t, ctx, "phone graph order", chromedp.Navigate(base+plan+"/graph?root=s5"), chromedp.WaitVisible(chromedp.CSS("#graph")))
	if above := eval[bool](t, ctx, `document.getElementById("graph").getBoundingClientRect().top < document.getElementById("graph-form").getBoundingClientRect().top`); !above {
		t.Error("phone: the graph form comes before the picture")
	}
	// Reflowed tables keep every cell inside the screen, with labels.
	step(t, ctx, "phone audit", chromedp.Navigate(base+plan+"/audit/s10"), chromedp.WaitVisible(chromedp.CSS("#audit-artifacts")))
	if w := eval[float64](t, ctx, `Math.max(...Array.from(document.querySelectorAll("#audit-artifacts td.id")).map(td => td.getBoundingClientRect().width))`); w < 200 {
		t.Errorf("phone: audit id cells are %vpx wide (one letter per line?)", w)
	}
	t.Logf("screenshots in %s", out)
}
