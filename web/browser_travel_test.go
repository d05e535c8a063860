package web

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestBrowserTimeTravel drives the time-travel control in Chromium: on
// the artifact page of s1 at the head of branch refetch (s1 fetched
// again, RETRIEVED), a key press on the slider moves it one commit back
// and the same view shows the earlier state (s1 FAILED, a poison root)
// with what changed at that step (s10 added); the next-step link comes
// back, naming s1 changed and its trust lifted; the form works without
// the script (a plain GET of ?step=); and at 390 px no page with the
// control overflows sideways. It takes the README screenshots of the
// control.
func TestBrowserTimeTravel(t *testing.T) {
	ctx := newBrowser(t)
	out := testOutDir(t)
	s := openStore(t)
	pc := loadPoisonPlan(t, s, "poison-plan")
	srv := httptest.NewServer(New(Options{Store: s, Logger: quietLogger()}))
	defer srv.Close()
	base := srv.URL
	plan := "/ui/contexts/poison-plan"
	text := func(id string) string {
		return eval[string](t, ctx, `(document.getElementById("`+id+`") || {textContent: ""}).textContent`)
	}
	step(t, ctx, "desktop", chromedp.EmulateViewport(1400, 900))

	step(t, ctx, "s1 at refetch", chromedp.Navigate(base+plan+"/artifacts/s1?at=refetch"), chromedp.WaitVisible(chromedp.CSS("#step")))
	if got := text("said"); !strings.Contains(got, "RETRIEVED") {
		t.Fatalf("s1 at refetch says %q", got)
	}
	if got := text("step-line"); !strings.Contains(got, "1 artifact changed") || !strings.Contains(text("step-names"), "changed s1") {
		t.Errorf("refetch head: step %q, names %q", got, text("step-names"))
	}
	screenshot(t, ctx, out, "time-travel.png")

	// One step back with the keyboard on the slider (the script submits
	// its form on change).
	step(t, ctx, "focus the slider", chromedp.Focus(chromedp.CSS("#step")))
	step(t, ctx, "arrow left", chromedp.KeyEvent(kb.ArrowLeft))
	s10 := pc.Steps["s10"].ID.Hex()
	waitFor(t, ctx, `location.search.includes("at=`+s10+`") && document.readyState === "complete" && !!document.getElementById("step-line")`)
	if got := text("artifact-id"); got != "s1" {
		t.Errorf("the slider left the view: artifact %q", got)
	}
	if got := text("said"); !strings.Contains(got, "FAILED transport.empty_body") {
		t.Errorf("s1 one step back says %q, want its FAILED version", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("#trust .badge").textContent`); got != "poison root" {
		t.Errorf("s1 one step back: trust %q", got)
	}
	if got := text("step-out"); got != "11" {
		t.Errorf("slider at step %q, want 11", got)
	}
	if got, names := text("step-line"), text("step-names"); !strings.HasPrefix(got, "4 ops: 1 artifact added, 3 edges added") || !strings.Contains(names, "added s10") {
		t.Errorf("step 11: %q, names %q", got, names)
	}
	if on := eval[string](t, ctx, `new URLSearchParams(location.search).get("on")`); on != "refetch" {
		t.Errorf("stepping left the branch: on=%q", on)
	}

	// The next-step link goes back to the head of refetch.
	step(t, ctx, "next", chromedp.Click(chromedp.CSS("#step-next")))
	waitFor(t, ctx, `location.search.includes("at=`+pc.Refetch.ID.Hex()+`") && document.readyState === "complete" && !!document.getElementById("step-trust")`)
	if got := text("step-trust"); !strings.Contains(got, "s1: poison root → confirmed") {
		t.Errorf("step 12 trust changes %q", got)
	}
	if got := text("said"); !strings.Contains(got, "RETRIEVED") {
		t.Errorf("s1 at step 12 says %q", got)
	}

	// Without the script: the form is a plain GET of ?step=.
	step(t, ctx, "step 2", chromedp.Navigate(base+plan+"/graph?root=s1&step=2&on=refetch"), chromedp.WaitVisible(chromedp.CSS("#step-line")))
	if got := eval[string](t, ctx, `location.search`); !strings.Contains(got, "at="+pc.Steps["s1"].ID.Hex()) || !strings.Contains(got, "root=s1") {
		t.Errorf("step 2 went to %q", got)
	}
	if got := text("step-line"); !strings.HasPrefix(got, "1 op: 1 artifact added") || !strings.Contains(text("step-names"), "added s1") {
		t.Errorf("step 2: %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("#graph g.node").length`); n != 1 {
		t.Errorf("graph of s1 at step 2: %d nodes, want 1", n)
	}

	// Phone width: the control fits on every page.
	step(t, ctx, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, p := range []string{plan + "?at=" + s10, plan + "/graph?at=" + s10, plan + "/graph?root=s5&at=" + s10,
		plan + "/artifacts/s1?at=refetch", plan + "/audit/s10?at=" + s10, plan + "/diff?at=refetch",
		plan + "/quarantine?at=" + pc.Steps["s5"].ID.Hex()} {
		step(t, ctx, "phone "+p, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.CSS("#step")))
		if over := eval[float64](t, ctx, overflowJS); over > 1 {
			t.Errorf("phone: %s overflows by %vpx", p, over)
		}
		if right := eval[float64](t, ctx, `Math.max(...Array.from(document.querySelectorAll("#travel, #travel *")).map(e => e.getBoundingClientRect().right))`); right > 390+1 {
			t.Errorf("phone: the control on %s reaches %vpx", p, right)
		}
	}
	step(t, ctx, "phone s1", chromedp.Navigate(base+plan+"/artifacts/s1?at="+s10+"&on=refetch"), chromedp.WaitVisible(chromedp.CSS("#step")))
	if over := eval[float64](t, ctx, overflowJS); over > 1 {
		wide := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("main *")).filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 5).map(e => e.tagName + "." + e.className)`)
		t.Errorf("phone: s1 overflows by %vpx (%q)", over, wide)
	}
	screenshot(t, ctx, out, "time-travel-phone.png")
}
