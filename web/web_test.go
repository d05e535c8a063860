package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// get serves one request and returns the response and its body.
func get(t *testing.T, h http.Handler, target string, header ...string) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func newPlanServer(t *testing.T) (http.Handler, *planContext, *store.Store) {
	t.Helper()
	s := openStore(t)
	pc := loadPoisonPlan(t, s, "poison-plan")
	return New(Options{Store: s, Logger: quietLogger()}), pc, s
}

func checkSecurityHeaders(t *testing.T, res *http.Response, what string) {
	t.Helper()
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "style-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", what, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("%s: CSP allows unsafe sources: %q", what, csp)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s: missing nosniff or no-referrer: %v", what, res.Header)
	}
}

func TestEveryPage(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	ctx := "/ui/contexts/poison-plan"
	pages := []struct {
		path string
		want []string
	}{
		{"/", []string{"poison-plan", "observe", pc.Head.ID.Short(), "4 confirmed", "5 quarantined", "1 poison root"}},
		{"/ui/", []string{"poison-plan"}},
		{ctx, []string{"Branches", "refetch", "s10: answer", "gate", "Artifacts 1–10 of 10", "s1: fetch price of item 42"}},
		{ctx + "?q=s1", []string{"Exact id match", "Artifacts 1–2 of 2 matching"}},
		{ctx + "?type=fetch_verdict&status=poison_root", []string{"Artifacts 1–1 of 1 matching"}},
		{ctx + "/artifacts/s1", []string{"poison root", "Fetch verdict receipt", "transport.empty_body", "gate/v1", "https://shop.example/api/price/42", "History", "Used by"}},
		{ctx + "/artifacts/s10", []string{"quarantined", "Path to its poison root", "supported_by", "Item 42 costs 16.55 EUR"}},
		{ctx + "/artifacts/s9", []string{"Confirmed: it rests only on confirmed facts"}},
		{ctx + "/graph", []string{"<svg", "Legend", "poison root", "quarantined", "confirmed", "10 artifacts and 9 edges drawn"}},
		{ctx + "/graph?root=s10&depth=2", []string{"<svg", "Truncated"}},
		{ctx + "/graph?root=s1&dir=in", []string{"<svg", "what rests on it"}},
		{ctx + "/quarantine", []string{"Poison roots", "fetch_verdict FAILED", "transport.empty_body"}},
		{ctx + "/diff", []string{"Diff", "s10", "added"}},
		{ctx + "/diff?from=main&to=refetch", []string{"changed", "Trust changes", "s10"}},
		{ctx + "/audit/s10", []string{"Audit of", "Markdown report", "flowchart TD", "# Audit report", "https://shop.example/shipping"}},
	}
	for _, p := range pages {
		res, body := get(t, h, p.path)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d\n%s", p.path, res.StatusCode, body)
			continue
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: content type %q", p.path, ct)
		}
		checkSecurityHeaders(t, res, p.path)
		for _, w := range p.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s: body lacks %q", p.path, w)
			}
		}
		checkHTML(t, p.path, body)
	}
	// Assets.
	for _, a := range []string{"style.css", "app.js"} {
		res, body := get(t, h, "/ui/assets/"+a)
		if res.StatusCode != 200 || len(body) < 100 {
			t.Errorf("asset %s: %d (%d bytes)", a, res.StatusCode, len(body))
		}
		checkSecurityHeaders(t, res, a)
	}
}

// TestAtShowsOlderCommit: ?at= moves every page to another commit and the
// page names it.
func TestAtShowsOlderCommit(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	ctx := "/ui/contexts/poison-plan"
	old := pc.Steps["s3"]
	for _, ref := range []string{old.ID.Hex(), old.ID.Hex()[:10], old.ID.String()} {
		_, body := get(t, h, ctx+"?at="+url.QueryEscape(ref))
		if !strings.Contains(body, `id="shown-commit" title="`+old.ID.String()+`"`) || !strings.Contains(body, "not a branch head") {
			t.Errorf("at=%s: banner does not name commit %s", ref, old.ID.Short())
		}
		if !strings.Contains(body, "Artifacts 1–3 of 3") {
			t.Errorf("at=%s: expected the three artifacts of step 3", ref)
		}
	}
	// At the old commit s10 does not exist yet.
	if res, _ := get(t, h, ctx+"/artifacts/s10?at="+old.ID.Hex()); res.StatusCode != http.StatusNotFound {
		t.Errorf("s10 at step 3: status %d, want 404", res.StatusCode)
	}
	// The graph at step 3 draws three nodes; links inside keep ?at=.
	_, body := get(t, h, ctx+"/graph?at="+old.ID.Hex())
	if !strings.Contains(body, "3 artifacts and 1 edge drawn") || !strings.Contains(body, "at="+old.ID.Hex()) {
		t.Errorf("graph at step 3 wrong:\n%s", excerpt(body, "drawn"))
	}
	// A branch: s1 on "refetch" is RETRIEVED, version 2, and nothing is quarantined.
	_, body = get(t, h, ctx+"/artifacts/s1?at=refetch")
	if !strings.Contains(body, "head of refetch") || !strings.Contains(body, "v2") || !strings.Contains(body, "RETRIEVED") || strings.Contains(body, "transport.empty_body") {
		t.Errorf("s1 at refetch does not show version 2 RETRIEVED")
	}
	_, body = get(t, h, ctx+"/artifacts/s1?at=main")
	if !strings.Contains(body, "head of main") || !strings.Contains(body, "transport.empty_body") {
		t.Errorf("s1 at main does not show the failed fetch")
	}
	_, body = get(t, h, ctx+"/quarantine?at=refetch")
	if !strings.Contains(body, "No poison roots") {
		t.Errorf("quarantine at refetch should be empty")
	}
	// The contexts list follows ?at= too.
	_, body = get(t, h, "/?at=refetch")
	if !strings.Contains(body, pc.Refetch.ID.Short()) {
		t.Errorf("contexts list at=refetch does not show the refetch head")
	}
	// The history of s1 at refetch lists both versions with their commits.
	_, body = get(t, h, ctx+"/artifacts/s1?at=refetch")
	for _, c := range []string{pc.Steps["s1"].ID.Short(), pc.Refetch.ID.Short()} {
		if !strings.Contains(body, c) {
			t.Errorf("history of s1 lacks commit %s", c)
		}
	}
}

func TestNotFoundProblems(t *testing.T) {
	h, _, _ := newPlanServer(t)
	cases := []string{
		"/ui/contexts/nope",
		"/ui/contexts/nope/graph",
		"/ui/contexts/poison-plan/artifacts/nope",
		"/ui/contexts/poison-plan/audit/nope",
		"/ui/contexts/poison-plan/graph?root=nope",
		"/ui/contexts/poison-plan?at=no-such-branch",
		"/ui/contexts/poison-plan?at=deadbeefdeadbeef",
		"/ui/contexts/poison-plan/diff?from=nope",
		"/ui/contexts/poison-plan/nonsense",
		"/ui/contexts/bad%20id",
		"/nothing/here",
	}
	for _, c := range cases {
		res, body := get(t, h, c)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", c, res.StatusCode)
		}
		if !strings.Contains(body, "urn:artifactd:problem:not-found") || !strings.Contains(body, "404") {
			t.Errorf("GET %s: no problem page: %s", c, excerpt(body, "problem"))
		}
		checkSecurityHeaders(t, res, c)
		res, body = get(t, h, c, "Accept", "application/problem+json")
		var p problemJSON
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal([]byte(body), &p) != nil ||
			p.Type != "urn:artifactd:problem:not-found" || p.Status != 404 {
			t.Errorf("GET %s as JSON: %d %q %s", c, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	res, _ := get(t, h, "/ui/contexts/poison-plan/graph?depth=x")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("bad depth: %d", res.StatusCode)
	}
	// Read-only: nothing but GET and HEAD.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/ui/contexts/poison-plan", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", m, rec.Code)
		}
	}
}

// TestHostileEscaping loads every page showing hostile strings and checks
// the HTML: the raw strings never appear, their escaped forms do, and the
// parsed document has no script but ours, no event handler attribute and
// no link or source outside this site.
func TestHostileEscaping(t *testing.T) {
	s := openStore(t)
	first, head := loadHostile(t, s, "xss")
	h := New(Options{Store: s, Logger: quietLogger()})
	for _, p := range hostilePages(first.ID.Hex(), head.ID.Hex()) {
		res, body := get(t, h, p)
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d", p, res.StatusCode)
			continue
		}
		for _, raw := range []string{xssScript, xssImg, xssSVG, xssDetails, "<img", "<details open", "onerror=\"", `href="javascript`} {
			if strings.Contains(body, raw) {
				t.Errorf("GET %s: raw %q in the HTML:\n%s", p, raw, excerpt(body, raw))
			}
		}
		checkHTML(t, p, body)
	}
	// The escaped forms are there.
	_, body := get(t, h, "/ui/contexts/xss/artifacts/"+url.PathEscape(xssScript))
	if !strings.Contains(body, "&lt;script&gt;window.__pwned=1&lt;/script&gt;") {
		t.Error("artifact page does not show the escaped id")
	}
}

// hostilePages lists every page that shows the hostile context's strings.
func hostilePages(first, head string) []string {
	base := "/ui/contexts/xss"
	pages := []string{
		"/", base, base + "?q=" + url.QueryEscape(xssScript), base + "?type=claim",
		base + "/graph", base + "/graph?root=xss-answer", base + "/graph?root=xss-fetch&dir=in",
		base + "/graph?root=" + url.QueryEscape(xssDOT), base + "/quarantine",
		base + "/diff", base + "/diff?from=" + first + "&to=" + head,
		base + "/audit/xss-answer", base + "/artifacts/xss-answer", base + "/artifacts/xss-fetch",
		base + "/artifacts/xss-question",
		base + "?at=" + url.QueryEscape(xssScript),                   // a 404 that echoes the ref
		base + "/artifacts/xss-question?at=" + head + "&vs=" + first, // a version diff
		base + "/graph?root=xss-answer&path=1&up=all&down=all",
		base + "/graph?root=xss-question&expand=" + url.QueryEscape(xssScript) + "&expand=" + url.QueryEscape(xssDOT),
		base + "/graph?find=" + url.QueryEscape("pwned"),
		base + "?q=" + url.QueryEscape("pwned"),
		"/ui/compare?a=xss&b=xss&a_at=" + first,
		"/?q=xss",
		"/ui/contexts/xss-big/graph?group=producer", // the overview's clusters
		"/ui/contexts/xss-big/graph?root=" + url.QueryEscape(xssAttrText+"-005"),
		// The time-travel control at a commit that is no head, carrying
		// hostile parameters in its form (on= is not a branch: ignored).
		base + "/graph?root=xss-answer&at=" + head + "&on=" + url.QueryEscape(xssScript) + "&find=" + url.QueryEscape(xssDOT),
	}
	for _, id := range hostileIDs {
		pages = append(pages, artifactURL("xss", id, ""), auditURL("xss", id, ""),
			base+"/graph?root="+url.QueryEscape(id)+"&dir=in")
	}
	return pages
}

// checkHTML parses a page and fails on anything active that is not ours:
// scripts other than /ui/assets/app.js, on* attributes, inline style,
// and href/src/action values that leave this site or use a scheme.
func checkHTML(t *testing.T, what, body string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: parse: %v", what, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				if src := attr(n, "src"); !strings.HasPrefix(src, "/ui/assets/app.js?v=") || n.FirstChild != nil {
					t.Errorf("%s: foreign script %q", what, src)
				}
			case "iframe", "object", "embed", "img", "image", "foreignObject", "foreignobject", "style", "base", "meta":
				if n.Data != "meta" || attr(n, "http-equiv") != "" {
					t.Errorf("%s: unexpected <%s>", what, n.Data)
				}
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				if strings.HasPrefix(k, "on") || k == "style" || k == "srcdoc" || k == "formaction" {
					t.Errorf("%s: attribute %s=%q on <%s>", what, a.Key, a.Val, n.Data)
				}
				if k == "href" || k == "src" || k == "action" || k == "xlink:href" {
					if !localURL(a.Val) {
						t.Errorf("%s: %s=%q on <%s> leaves the site", what, a.Key, a.Val, n.Data)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}

var localPath = regexp.MustCompile(`^/[^/\\]`)

func localURL(v string) bool {
	if v == "/" {
		return true
	}
	if !localPath.MatchString(v) {
		return false
	}
	u, err := url.Parse(v)
	return err == nil && u.Scheme == "" && u.Host == ""
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func excerpt(body, near string) string {
	i := strings.Index(body, near)
	if i < 0 {
		if len(body) > 400 {
			return body[:400]
		}
		return body
	}
	lo, hi := max(0, i-200), min(len(body), i+200)
	return body[lo:hi]
}

// TestGraphPicture checks the SVG of the plan: one linked node per step
// with the status class and the colours the legend names.
func TestGraphPicture(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	_, body := get(t, h, "/ui/contexts/poison-plan/graph")
	nodes := svgNodes(t, body)
	if len(nodes) != 10 {
		t.Fatalf("%d nodes in the picture, want 10", len(nodes))
	}
	want := map[string]string{}
	for _, id := range pc.Plan.Expect.Observe.PoisonRoots {
		want[id] = "poison_root"
	}
	for _, id := range pc.Plan.Expect.Observe.Quarantined {
		want[id] = "quarantined"
	}
	for _, id := range pc.Plan.Expect.Observe.Confirmed {
		want[id] = "confirmed"
	}
	for id, n := range nodes {
		if !strings.Contains(" "+n.class+" ", " "+want[id]+" ") {
			t.Errorf("node %s: class %q, want %s", id, n.class, want[id])
		}
		if n.fill != statusStyles[graph.Status(want[id])].Fill {
			t.Errorf("node %s: fill %q", id, n.fill)
		}
		if n.href != "/ui/contexts/poison-plan/artifacts/"+id {
			t.Errorf("node %s: href %q", id, n.href)
		}
	}
}

type svgNode struct{ class, fill, href string }

// svgNodes reads the node groups of the page's provenance SVG, keyed by
// the artifact id in their link.
func svgNodes(t *testing.T, body string) map[string]svgNode {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]svgNode{}
	var walk func(n *html.Node, inPic bool)
	walk = func(n *html.Node, inPic bool) {
		if n.Type == html.ElementNode && n.Data == "svg" && strings.Contains(attr(n, "class"), "provenance") {
			inPic = true
		}
		if inPic && n.Type == html.ElementNode && n.Data == "g" && strings.HasPrefix(attr(n, "class"), "node ") {
			var nd svgNode
			nd.class = attr(n, "class")
			var find func(c *html.Node)
			find = func(c *html.Node) {
				if c.Type == html.ElementNode {
					if c.Data == "a" && nd.href == "" {
						nd.href = attr(c, "href")
					}
					if (c.Data == "polygon" || c.Data == "ellipse" || c.Data == "path") && nd.fill == "" && attr(c, "fill") != "none" {
						nd.fill = attr(c, "fill")
					}
				}
				for d := c.FirstChild; d != nil; d = d.NextSibling {
					find(d)
				}
			}
			find(n)
			u, _ := url.Parse(nd.href)
			id, _ := url.PathUnescape(strings.TrimPrefix(u.EscapedPath(), "/ui/contexts/poison-plan/artifacts/"))
			out[id] = nd
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inPic)
		}
	}
	walk(doc, false)
	return out
}

// TestConcurrentPages renders pictures and pages from many goroutines at
// once (run with -race): Graphviz is one module per process and must be
// serialized, the picture cache shared.
func TestConcurrentPages(t *testing.T) {
	h, _, _ := newPlanServer(t)
	paths := []string{"/ui/contexts/poison-plan/graph", "/ui/contexts/poison-plan/graph?root=s10",
		"/ui/contexts/poison-plan/graph?root=s1&dir=in", "/ui/contexts/poison-plan/graph?root=s8&depth=1",
		"/ui/contexts/poison-plan/graph?at=refetch", "/ui/contexts/poison-plan", "/ui/contexts/poison-plan/diff?from=main&to=refetch"}
	h2 := New(Options{Store: h.(*server).store, Logger: quietLogger()}) // a second handler shares Graphviz
	done := make(chan string, 4*len(paths))
	for i := range 4 * len(paths) {
		go func() {
			hh := h
			if i%2 == 1 {
				hh = h2
			}
			rec := httptest.NewRecorder()
			hh.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, paths[i%len(paths)], nil))
			if rec.Code != 200 || (strings.Contains(paths[i%len(paths)], "graph") && !strings.Contains(rec.Body.String(), `<svg xmlns=`)) {
				done <- paths[i%len(paths)]
				return
			}
			done <- ""
		}()
	}
	for range 4 * len(paths) {
		if p := <-done; p != "" {
			t.Errorf("concurrent GET %s failed", p)
		}
	}
}

func TestHead(t *testing.T) {
	h, _, _ := newPlanServer(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/ui/contexts/poison-plan", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Security-Policy") == "" {
		t.Errorf("HEAD: %d", rec.Code)
	}
}
