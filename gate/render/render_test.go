package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/gate/fetch"
	"github.com/artifactd/artifactd/internal/testenv"
)

// The browser tests drive a real headless Chromium. Without one they skip,
// except under CI (env CI set), where they fail. Every page they render
// comes from a loopback test server, and the browser itself reaches no
// server at all: a counter on each handler shows who asked for what.

func newRenderer(t *testing.T, opts Options) *Renderer {
	t.Helper()
	if opts.Settle == 0 {
		// The settle wait ends as soon as the page is stable; the long
		// bound only matters on a loaded machine (CI under -race), where a
		// page can take seconds to reach readyState "complete".
		opts.Settle = 30 * time.Second
	}
	r, err := New(opts)
	if errors.Is(err, ErrNoBrowser) {
		testenv.Missing(t, "no Chromium found (install Debian's chromium: apt-get install -y chromium, or set ARTIFACTD_CHROMIUM)")
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const articleText = "Item 42 costs 19.99 USD in every store this week, and shipping to the EU takes four to six business days. "

// site is a loopback test server that records the requests it gets.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string // "path user-agent"
}

func newSite(t *testing.T, pages map[string]string) *site {
	s := &site{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.URL.Path+" "+r.UserAgent())
		s.mu.Unlock()
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ct := "text/html; charset=utf-8"
		if strings.HasSuffix(r.URL.Path, ".js") {
			ct = "text/javascript"
		}
		w.Header().Set("Content-Type", ct)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hits...)
}

// shell is a page whose inline script writes its text.
func shell(script string) string {
	return `<!doctype html><html><head><title>Shop</title>` + script + `</head><body><div id="root"></div></body></html>`
}

const writeArticle = `<script>document.addEventListener("DOMContentLoaded", function () {
  var a = document.createElement("article");
  for (var i = 0; i < 6; i++) { var p = document.createElement("p"); p.textContent = ` + "`" + articleText + "`" + `; a.appendChild(p); }
  document.getElementById("root").appendChild(a);
});</script>`

// fetchShell fetches a page of the test site the way the gate does
// (loopback allowed for the test) and checks that it is a script shell.
func fetchShell(t *testing.T, s *site, path string) gate.Evidence {
	t.Helper()
	ev, err := fetch.New(fetch.Options{Policy: fetch.Policy{AllowLoopback: true}}).Fetch(t.Context(), s.URL+path)
	if err != nil {
		t.Fatal(err)
	}
	if r := gate.Classify(ev); r.Verdict != gate.Unknown || r.Reason != gate.ReasonScriptShell {
		t.Fatalf("%s is not a script shell: %s %s", path, r.Verdict, r.Reason)
	}
	return ev
}

func render(t *testing.T, r *Renderer, ev gate.Evidence) gate.Result {
	t.Helper()
	start := time.Now()
	out, err := r.Render(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rendered in %v: %d bytes", time.Since(start).Round(time.Millisecond), len(out.Body))
	if out.Header("content-type") != "text/html; charset=utf-8" || out.URL != ev.URL || out.Status != ev.Status {
		t.Fatalf("rendered evidence %+v", out)
	}
	return gate.Classify(out)
}

func TestRender(t *testing.T) {
	r := newRenderer(t, Options{})
	forbidden := newSite(t, map[string]string{"/secret": "secret", "/x.js": `document.title = "pwned"`})
	s := newSite(t, map[string]string{
		"/inline":   shell(writeArticle),
		"/external": shell(`<script src="/app.js"></script>`),
		"/app.js": `document.addEventListener("DOMContentLoaded", function () {
  document.getElementById("root").innerHTML = "<article><p>" + ` + "`" + strings.Repeat(articleText, 6) + "`" + ` + "</p></article>";
});`,
		// A page that tries to reach another loopback server every way it
		// can: script, image, fetch, iframe, navigation.
		"/escape": shell(writeArticle + `<script src="` + forbidden.URL + `/x.js"></script><script>
  fetch("` + forbidden.URL + `/secret").catch(function () {});
  var i = new Image(); i.src = "` + forbidden.URL + `/secret?img";
  var f = document.createElement("iframe"); f.src = "` + forbidden.URL + `/secret?frame"; document.documentElement.appendChild(f);
  // Navigate away only after the article is written: a navigation that
  // starts while the parser is still blocked aborts the parse (before
  // DOMContentLoaded), which would make the expected verdict depend on
  // timing rather than on the policy under test.
  document.addEventListener("DOMContentLoaded", function () {
    setTimeout(function () { location.href = "` + forbidden.URL + `/secret?nav"; }, 50);
  });
</script>`),
		// An honest render of a challenge page is still a wall.
		"/wall": shell(`<script>document.addEventListener("DOMContentLoaded", function () {
  document.title = "Just a moment...";
  document.getElementById("root").innerHTML = '<div id="cf-please-wait">Checking your browser before accessing the site.</div>';
});</script>`),
	})

	t.Run("inline script writes the article", func(t *testing.T) {
		ev := fetchShell(t, s, "/inline")
		if res := render(t, r, ev); res.Verdict != gate.Retrieved {
			t.Fatalf("%s %s %+v", res.Verdict, res.Reason, res.Layers)
		}
	})
	t.Run("external script without a loader stays a shell", func(t *testing.T) {
		ev := fetchShell(t, s, "/external")
		before := len(s.requests())
		if res := render(t, r, ev); res.Verdict != gate.Unknown || res.Reason != gate.ReasonScriptShell {
			t.Fatalf("%s %s", res.Verdict, res.Reason)
		}
		if got := s.requests()[before:]; len(got) != 0 {
			t.Fatalf("the browser reached the site: %v", got)
		}
	})
	t.Run("external script through the loader", func(t *testing.T) {
		ev := fetchShell(t, s, "/external")
		loader := newRenderer(t, Options{Loader: fetch.New(fetch.Options{Policy: fetch.Policy{AllowLoopback: true}})})
		before := len(s.requests())
		if res := render(t, loader, ev); res.Verdict != gate.Retrieved {
			t.Fatalf("%s %s", res.Verdict, res.Reason)
		}
		got := s.requests()[before:]
		if len(got) != 1 || got[0] != "/app.js "+fetch.DefaultUserAgent {
			t.Fatalf("requests %v, want only /app.js by the gate's fetcher", got)
		}
	})
	t.Run("the fetch policy applies to the page", func(t *testing.T) {
		ev := fetchShell(t, s, "/escape")
		// A loader with the default policy: loopback is refused.
		strict := newRenderer(t, Options{Loader: fetch.New(fetch.Options{})})
		for _, rr := range []*Renderer{r, strict} {
			if res := render(t, rr, ev); res.Verdict != gate.Retrieved {
				out, _ := rr.Render(t.Context(), ev)
				t.Fatalf("%s %s\n%s", res.Verdict, res.Reason, out.Body)
			}
		}
		if got := forbidden.requests(); len(got) != 0 {
			t.Fatalf("the page reached a forbidden server: %v", got)
		}
	})
	t.Run("a rendered wall stays UNKNOWN", func(t *testing.T) {
		ev := fetchShell(t, s, "/wall")
		if res := render(t, r, ev); res.Verdict != gate.Unknown || res.Reason != gate.ReasonChallenge {
			t.Fatalf("%s %s", res.Verdict, res.Reason)
		}
	})
}

func TestRenderRefusesBadInput(t *testing.T) {
	r, err := New(Options{ExecPath: "/nonexistent/chromium", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Render(t.Context(), gate.Evidence{URL: "file:///etc/passwd", Body: []byte("<html>")}); err == nil {
		t.Fatal("a file URL was rendered")
	}
	if _, err := r.Render(t.Context(), gate.Evidence{URL: "https://x.example/", Headers: map[string]string{"content-encoding": "zstd"}, Body: []byte("x")}); err == nil {
		t.Fatal("an unknown encoding was rendered")
	}
	if _, err := r.Render(t.Context(), gate.Evidence{URL: "https://x.example/", Body: []byte("<html>")}); err == nil {
		t.Fatal("a missing browser rendered")
	}
}

// TestBrowserHasNoNetwork checks the second wall alone: a browser started
// with the render flags but without interception cannot load a loopback
// page, by address or by name.
func TestBrowserHasNoNetwork(t *testing.T) {
	r := newRenderer(t, Options{})
	s := newSite(t, map[string]string{"/": shell(writeArticle)})
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), browserOptions(r.opts.ExecPath, t.TempDir())...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(s.URL, "http://127.0.0.1:")
	for _, u := range []string{s.URL + "/", "http://localhost:" + port + "/", "http://[::1]:" + port + "/"} {
		ctx, cancel := context.WithTimeout(tab, 20*time.Second)
		err := chromedp.Do(ctx, chromedp.Navigate(u))
		cancel()
		if err == nil {
			t.Errorf("%s loaded", u)
		}
	}
	if got := s.requests(); len(got) != 0 {
		t.Fatalf("the browser reached the site: %v", got)
	}
}

// TestDecodeBodyBoundsItsCodings: a body stacking more than
// gate.MaxContentCodings codings is refused before any is decoded (each
// layer may decode to DefaultMaxOutputBytes, and the decode ran outside
// the render's time limit: 500 layers of a 40 KB body took 10 s); one
// coding decodes. No browser is started.
func TestDecodeBodyBoundsItsCodings(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte("<p>a page</p>"))
	_ = zw.Close()
	if out, err := decodeBody(buf.Bytes(), "gzip"); err != nil || string(out) != "<p>a page</p>" {
		t.Fatalf("one coding: %q %v", out, err)
	}
	if _, err := decodeBody(buf.Bytes(), strings.Repeat("identity, ", gate.MaxContentCodings)+"gzip"); err == nil || !strings.Contains(err.Error(), "content codings") {
		t.Errorf("%d codings: %v", gate.MaxContentCodings+1, err)
	}
}

// TestDecodeBodySharesTheGatesDecoder: the renderer decodes what the gate
// decoded (gate.DecodeContent), refusing what the gate would refuse, and a
// coding the gate cannot decode even where the gate would take the header
// for stale.
func TestDecodeBodySharesTheGatesDecoder(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte("<p>a page</p>"))
	_ = zw.Close()
	if out, err := decodeBody([]byte("<p>a page</p>"), "gzip"); err != nil || string(out) != "<p>a page</p>" {
		t.Fatalf("a stale gzip header: %q %v", out, err)
	}
	if _, err := decodeBody(buf.Bytes()[:buf.Len()/2], "gzip"); !errors.Is(err, gate.ErrCorruptContent) {
		t.Fatalf("a truncated stream: %v", err)
	}
	if _, err := decodeBody([]byte("<p>a page</p>"), "zstd"); err == nil {
		t.Fatal("a coding the gate cannot decode")
	}
}

// TestRenderWritesNothingUnderHome: a download a page's script starts from
// a blob: or data: URL is no network request (the Fetch interception never
// sees it), and a browser started with the server's own HOME wrote it, of
// any size, into ~/Downloads, where it stayed, besides its crash-report
// and dconf directories under ~/.config and ~/.cache. Downloads are denied
// and the browser's HOME and XDG directories are in the render's profile,
// removed after it: nothing appears under HOME, no profile is left, and
// the page still gets its verdict. A download let through would land in
// the profile's own HOME and go with it, unseen; so each profile is looked
// at before its removal too, and a file in its downloads directory (or a
// partial .crdownload anywhere in it) fails the test.
func TestRenderWritesNothingUnderHome(t *testing.T) {
	var mu sync.Mutex
	var downloaded []string
	beforeRemoveProfile = func(profile string) {
		_ = filepath.WalkDir(profile, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(profile, p)
			if strings.HasPrefix(rel, filepath.Join("home", "Downloads")+string(filepath.Separator)) || strings.HasSuffix(p, ".crdownload") {
				mu.Lock()
				downloaded = append(downloaded, rel)
				mu.Unlock()
			}
			return nil
		})
	}
	t.Cleanup(func() { beforeRemoveProfile = nil })
	home, tmp := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", tmp) // where the render's profile goes
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	r := newRenderer(t, Options{})
	// One download a page: Chromium holds back a page's second automatic
	// download for a permission nobody grants.
	save := func(name, href string) string {
		return shell(writeArticle + `<script>
var a = document.createElement("a"); a.href = ` + href + `; a.download = "` + name + `";
document.documentElement.appendChild(a); a.click();
</script>`)
	}
	s := newSite(t, map[string]string{
		"/blob": save("note.txt", `URL.createObjectURL(new Blob(["written by a hostile page\n"], {type: "application/octet-stream"}))`),
		"/data": save("data.txt", `"data:application/octet-stream;base64,d3JpdHRlbiBieSBhIGhvc3RpbGUgcGFnZQo="`),
		"/big":  save("fill.bin", `URL.createObjectURL(new Blob(Array(2).fill(new Uint8Array(16 << 20))))`),
	})
	for _, path := range []string{"/blob", "/data", "/big"} {
		ev := fetchShell(t, s, path)
		if res := render(t, r, ev); res.Verdict != gate.Retrieved {
			t.Fatalf("%s: %s %s", path, res.Verdict, res.Reason)
		}
	}
	// A download that slipped through would still be writing: give it a
	// moment to show.
	time.Sleep(time.Second)
	_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var size int64
		if info, err := d.Info(); err == nil {
			size = info.Size()
		}
		t.Errorf("written under HOME: %s (%d bytes)", strings.TrimPrefix(p, home), size)
		return nil
	})
	if left, _ := os.ReadDir(home); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("HOME holds %q after the render", names)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "artifactd-render-*")); len(left) > 0 {
		t.Errorf("%d profiles left after the renders", len(left))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, rel := range downloaded {
		t.Errorf("downloaded into the render's profile: %s", rel)
	}
}

// TestRenderLeavesNothingInTempDir: a render's browser keeps its
// single-instance socket in a directory of its own in the temporary
// directory, outside its profile, and is killed rather than left to
// remove it; each render left one behind, so a server rendering pages
// filled its temporary directory with them. Now the render removes it
// with the profile.
func TestRenderLeavesNothingInTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := newRenderer(t, Options{})
	s := newSite(t, map[string]string{"/a": shell(writeArticle)})
	for range 2 {
		if res := render(t, r, fetchShell(t, s, "/a")); res.Verdict != gate.Retrieved {
			t.Fatalf("%s %s", res.Verdict, res.Reason)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("the temporary directory holds %q after two renders", names)
	}
}
