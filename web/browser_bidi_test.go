package web

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserBidiControlsStayInTheirValue shows, in Chromium, pages where
// a hostile text is followed by the page's own text on the same line: a
// commit message in the time-travel list (then the commit's op count and
// time), and a source's URL in an audit (then the artifacts that name
// it). Each hostile text ends with an unclosed RIGHT-TO-LEFT OVERRIDE,
// which would run on to the end of the line and draw the page's own text
// after it backwards ("named by s1" as "1s yb deman"). The page's text
// must read left to right, and the hostile text must still be shown.
func TestBrowserBidiControlsStayInTheirValue(t *testing.T) {
	ctx := newBrowser(t)
	s := openStore(t)
	if _, err := s.CreateContext(context.Background(), "bidi", "observe"); err != nil {
		t.Fatal(err)
	}
	commit(t, s, "bidi", "", "agent", "first",
		putOp(t, "s1", "claim", "agent", map[string]any{"text": "a claim", "url": "https://a.example/page\u202E"}),
		putOp(t, "answer", "answer", "agent", map[string]any{"text": "the answer"}),
		linkOp("answer", "supported_by", "s1"))
	commit(t, s, "bidi", "", "agent", "second step\u202E",
		putOp(t, "s2", "claim", "agent", map[string]any{"text": "another claim"}))
	srv := httptest.NewServer(New(Options{Store: s, Logger: quietLogger()}))
	defer srv.Close()

	// readsLTR reports whether the visible text of an element runs left
	// to right: its first non-space character is drawn left of its last.
	const readsLTR = `(el) => {
  const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const at = [];
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    for (let i = 0; i < n.data.length; i++) if (n.data[i].trim() !== "") at.push([n, i]);
  }
  if (at.length < 2) return false;
  const box = ([n, i]) => { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1); return r.getBoundingClientRect(); };
  return box(at[0]).left < box(at[at.length - 1]).left;
}`

	step(t, ctx, "context page", chromedp.Navigate(srv.URL+"/ui/contexts/bidi"), chromedp.WaitReady(chromedp.CSS("#timeline")))
	type line struct {
		Msg      string `json:"msg"`
		After    string `json:"after"`
		AfterLTR bool   `json:"afterLTR"`
	}
	got := eval[line](t, ctx, `(() => {
  document.getElementById("timeline").open = true;
  const msg = Array.from(document.querySelectorAll("#timeline .msg")).find(m => m.textContent.startsWith("second step"));
  if (!msg) return {msg: "", after: "", afterLTR: false};
  const after = msg.nextElementSibling;
  return {msg: msg.textContent, after: after.textContent, afterLTR: (`+readsLTR+`)(after)};
})()`)
	if got.Msg == "" {
		t.Fatal("the time-travel list does not show the commit message")
	}
	if !got.AfterLTR {
		t.Errorf("after the commit message %q, the list's own text %q is drawn right to left", got.Msg, got.After)
	}

	step(t, ctx, "audit page", chromedp.Navigate(srv.URL+"/ui/contexts/bidi/audit/answer"), chromedp.WaitReady(chromedp.CSS("footer")))
	type source struct {
		Locator  string `json:"locator"`
		Named    string `json:"named"`
		NamedLTR bool   `json:"namedLTR"`
	}
	src := eval[source](t, ctx, `(() => {
  const li = document.querySelector(".sources-list li");
  if (!li) return {locator: "", named: "", namedLTR: false};
  const named = li.querySelector(".muted");
  return {locator: li.querySelector("code").textContent, named: named.textContent, namedLTR: (`+readsLTR+`)(named)};
})()`)
	if src.Locator == "" || src.Named == "" {
		t.Fatalf("the audit lists no source: %+v", src)
	}
	if !src.NamedLTR {
		t.Errorf("after the source %q, %q is drawn right to left", src.Locator, src.Named)
	}
}
