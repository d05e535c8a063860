// Package render is the gate's optional render tier: it loads an HTML
// script shell that was already fetched into a headless Chromium (through
// chromedp), lets its scripts build the page, and returns the rendered
// document as new evidence for gate.Classify.
//
// The browser has no network of its own. Every request that goes through
// its network stack is paused with the DevTools Fetch domain: the page's
// own document is answered from the fetched body; scripts, stylesheets and
// XHR/fetch calls are answered through Options.Loader (the gate's
// policy-checked fetcher) when one is set and refused otherwise;
// everything else (images, frames, further navigations, media, fonts) is
// refused. As a second wall the browser is started with a host resolver
// that resolves nothing and a proxy that does not exist (loopback
// included), so a request that escaped interception (a WebSocket, which
// the Fetch domain does not pause) fails instead of reaching an address
// the fetch policy forbids.
//
// What a script builds without a request (a blob: or data: URL) never
// reaches the interception. The one way such content leaves the page is a
// download, and the browser refuses every download (Browser
// setDownloadBehavior "deny", set before the page loads). The browser's
// HOME and XDG config, cache and data directories are inside the render's
// profile, which is removed after the render, so it writes nothing under
// the server user's home (no ~/Downloads, crash reports or dconf).
//
// # Glossary
//
//   - Shell: an HTML page that the classifier found UNKNOWN
//     (extraction.script_shell): scripts and too little text.
//   - Render: one headless Chromium process with its own temporary profile,
//     started for one page and stopped after it (no state is shared between
//     renders); bounded by Options.Timeout.
//   - Settle: after the load event, the DOM is read once the page's text
//     length has stopped changing for three polls (or after Options.Settle).
//   - Rendered evidence: the shell's evidence with the serialised DOM as its
//     body and "text/html; charset=utf-8" as its content type; the other
//     headers (and so header fingerprints such as cf-mitigated) are kept, so
//     an honest render of a wall is still a wall.
package render

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/artifactd/artifactd/gate"
)

// Defaults of Options.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultSettle          = 3 * time.Second
	DefaultMaxSubresources = 64
	DefaultMaxOutputBytes  = 8 << 20
	DefaultMaxConcurrent   = 2
	settlePoll             = 100 * time.Millisecond
	stablePolls            = 3
)

// ErrNoBrowser: no Chromium was found.
var ErrNoBrowser = errors.New("no Chromium found (install Debian's chromium, or set ARTIFACTD_CHROMIUM to the browser's path)")

// Loader fetches a subresource for the page under the fetch policy.
// *fetch.Fetcher (package gate/fetch) implements it.
type Loader interface {
	Fetch(ctx context.Context, url string) (gate.Evidence, error)
}

// Options configure New.
type Options struct {
	// ExecPath is the browser binary; FindBrowser's answer when empty.
	ExecPath string
	// Timeout bounds one render, browser start included (DefaultTimeout).
	Timeout time.Duration
	// Settle bounds the wait for the DOM after the load event
	// (DefaultSettle).
	Settle time.Duration
	// Loader answers the page's script, stylesheet and XHR/fetch requests;
	// nil refuses them (the page renders from its inline scripts only).
	Loader Loader
	// MaxSubresources bounds the requests answered through Loader
	// (DefaultMaxSubresources).
	MaxSubresources int
	// MaxOutputBytes bounds the rendered document (DefaultMaxOutputBytes).
	MaxOutputBytes int
	// MaxConcurrent bounds the browsers running at once
	// (DefaultMaxConcurrent); further renders wait their turn within their
	// own timeout.
	MaxConcurrent int
}

// Renderer renders shells. It is safe for concurrent use; each Render runs
// its own browser, at most MaxConcurrent at once.
type Renderer struct {
	opts  Options
	slots chan struct{} // one token per running browser
}

// FindBrowser returns the path of a Chromium: $ARTIFACTD_CHROMIUM, else
// chromium, chromium-browser, google-chrome or google-chrome-stable on
// PATH.
func FindBrowser() (string, error) {
	if p := os.Getenv("ARTIFACTD_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// New returns a Renderer. It fails with ErrNoBrowser when opts.ExecPath is
// empty and FindBrowser finds nothing; it does not start the browser.
func New(opts Options) (*Renderer, error) {
	if opts.ExecPath == "" {
		p, err := FindBrowser()
		if err != nil {
			return nil, err
		}
		opts.ExecPath = p
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.MaxSubresources <= 0 {
		opts.MaxSubresources = DefaultMaxSubresources
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	return &Renderer{opts: opts, slots: make(chan struct{}, opts.MaxConcurrent)}, nil
}

// Render loads ev's body as the page at ev's final URL in a fresh headless
// browser with no network of its own, waits for the page to settle and
// returns the rendered evidence (see the package doc). It fails when the
// body cannot be decoded, the page URL is not http(s), the browser cannot
// start, or the time runs out.
func (r *Renderer) Render(ctx context.Context, ev gate.Evidence) (gate.Evidence, error) {
	body, err := decodeBody(ev.Body, ev.Header("content-encoding"))
	if err != nil {
		return gate.Evidence{}, err
	}
	pageURL := ev.FinalURL
	if pageURL == "" {
		pageURL = ev.URL
	}
	u, err := url.Parse(pageURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return gate.Evidence{}, fmt.Errorf("render: page URL %q is not an absolute http(s) URL", pageURL)
	}
	ctype := ev.Header("content-type")
	if ctype == "" {
		ctype = "text/html"
	}
	profile, err := os.MkdirTemp("", "artifactd-render-")
	if err != nil {
		return gate.Evidence{}, err
	}
	defer removeProfile(profile)

	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-ctx.Done():
		return gate.Evidence{}, fmt.Errorf("render: waiting for a free browser: %w", ctx.Err())
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, browserOptions(r.opts.ExecPath, profile)...)
	tab, cancelTab := chromedp.NewContext(alloc)
	// The request handlers end when the tab does; the browser exits (and
	// the profile can go) when the allocator does.
	var wg sync.WaitGroup
	defer func() {
		cancelTab()
		wg.Wait()
		cancelAlloc()
	}()

	// A download from a blob: or data: URL is no network request, so the
	// interception never sees it: the browser refuses every download.
	if _, err := chromedp.CallBrowser(tab, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny}); err != nil {
		return gate.Evidence{}, fmt.Errorf("render: start %s and deny downloads: %w", r.opts.ExecPath, err)
	}
	paused := chromedp.Events(tab, fetch.RequestPaused)
	if _, err := chromedp.Call(tab, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		return gate.Evidence{}, fmt.Errorf("render: start %s: %w", r.opts.ExecPath, err)
	}
	h := &interceptor{r: r, body: body, ctype: ctype}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p, err := range paused {
			if err != nil {
				return
			}
			h.handle(tab, p, &wg)
		}
	}()

	if err := chromedp.Do(tab, chromedp.Navigate(u.String())); err != nil {
		return gate.Evidence{}, fmt.Errorf("render: load the page: %w", err)
	}
	r.settle(tab)
	html, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement ? document.documentElement.outerHTML : ""`))
	if err != nil {
		return gate.Evidence{}, fmt.Errorf("render: read the DOM: %w", err)
	}
	if at, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.URL`)); err != nil || at != u.String() {
		return gate.Evidence{}, fmt.Errorf("render: the page left %s for %q (%v)", u, at, err)
	}
	if len(html) > r.opts.MaxOutputBytes {
		return gate.Evidence{}, fmt.Errorf("render: the rendered document has %d bytes, more than %d", len(html), r.opts.MaxOutputBytes)
	}
	out := ev
	out.Headers = map[string]string{"content-type": "text/html; charset=utf-8"}
	for k, v := range ev.Headers {
		switch strings.ToLower(k) {
		case "content-type", "content-encoding", "content-length", "transfer-encoding":
		default:
			out.Headers[k] = v
		}
	}
	out.Body = []byte("<!DOCTYPE html>" + html)
	return out, nil
}

// beforeRemoveProfile, when set (by a test), sees each render's profile
// before it is removed: a download the browser wrote into it, under its
// HOME, goes with it and so cannot be seen after.
var beforeRemoveProfile func(profile string)

// removeProfile removes a render's profile once its browser is gone, and
// the directory in the temporary directory that holds the browser's
// single-instance socket, which the profile's SingletonSocket link names:
// the browser is killed, not asked to quit, so it never removes that
// directory itself. Only a directory directly in the temporary directory
// whose SingletonSocket the link names is removed.
func removeProfile(profile string) {
	if h := beforeRemoveProfile; h != nil {
		h(profile)
	}
	if link, err := os.Readlink(filepath.Join(profile, "SingletonSocket")); err == nil && filepath.Base(link) == "SingletonSocket" {
		if dir := filepath.Dir(link); filepath.Dir(dir) == filepath.Clean(os.TempDir()) {
			_ = os.RemoveAll(dir)
		}
	}
	_ = os.RemoveAll(profile)
}

// browserOptions are the flags of a render's browser: headless, no
// sandbox (it runs as an unprivileged user's child or in a container), no
// GPU, none of Chromium's own background traffic, a private profile in
// profile that also holds its HOME and XDG config, cache and data
// directories (so it writes nothing under the server user's home: no
// ~/Downloads, crash reports or dconf), and the second wall: nothing
// resolves, and whatever is not intercepted goes to a proxy that is not
// there (loopback included).
func browserOptions(execPath, profile string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(execPath),
		chromedp.UserDataDir(profile),
		chromedp.Env(
			"HOME="+filepath.Join(profile, "home"),
			"XDG_CONFIG_HOME="+filepath.Join(profile, "home", ".config"),
			"XDG_CACHE_HOME="+filepath.Join(profile, "home", ".cache"),
			"XDG_DATA_HOME="+filepath.Join(profile, "home", ".local", "share"),
		),
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
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
	}
}

// settle waits until the document has finished loading and its text
// length has stayed the same for stablePolls polls, or Settle has passed.
// (The load event that Navigate waits for can be a frame's.)
func (r *Renderer) settle(tab context.Context) {
	deadline := time.Now().Add(r.opts.Settle)
	last, same := -1, 0
	for time.Now().Before(deadline) && same < stablePolls {
		n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.readyState !== "complete" ? -1 : document.body ? document.body.innerText.length : 0`))
		if err != nil {
			return
		}
		if n >= 0 && n == last {
			same++
		} else {
			last, same = n, 0
		}
		select {
		case <-tab.Done():
			return
		case <-time.After(settlePoll):
		}
	}
}

// interceptor answers the paused requests of one render.
type interceptor struct {
	r      *Renderer
	body   []byte
	ctype  string
	served atomic.Bool  // the page's document was answered
	loaded atomic.Int32 // requests answered through the Loader
}

// handle answers one paused request: the first document request with the
// page, loadable subresources through the Loader (in their own goroutine),
// everything else with a refusal.
func (h *interceptor) handle(tab context.Context, p fetch.EventRequestPaused, wg *sync.WaitGroup) {
	switch p.ResourceType {
	case network.ResourceTypeDocument:
		if h.served.CompareAndSwap(false, true) {
			fulfill(tab, p.RequestID, 200, h.ctype, h.body)
			return
		}
		// Any other document (a navigation away, a frame) gets 204 No
		// Content: the browser stays on the page, a frame stays empty.
		// A refusal would replace the page with an error page.
		fulfill(tab, p.RequestID, 204, "", nil)
		return
	case network.ResourceTypeScript, network.ResourceTypeStylesheet, network.ResourceTypeXHR, network.ResourceTypeFetch:
		if h.r.opts.Loader != nil && h.loaded.Add(1) <= int32(h.r.opts.MaxSubresources) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.load(tab, p)
			}()
			return
		}
	}
	refuse(tab, p.RequestID)
}

// load fetches a subresource through the Loader (the fetch policy applies)
// and answers the browser with it.
func (h *interceptor) load(tab context.Context, p fetch.EventRequestPaused) {
	if p.Request == nil || p.Request.Method != "GET" {
		refuse(tab, p.RequestID)
		return
	}
	ev, err := h.r.opts.Loader.Fetch(tab, p.Request.URL)
	if err != nil || ev.Error != "" || ev.Status == 0 {
		refuse(tab, p.RequestID)
		return
	}
	body, err := decodeBody(ev.Body, ev.Header("content-encoding"))
	if err != nil {
		refuse(tab, p.RequestID)
		return
	}
	fulfill(tab, p.RequestID, int64(ev.Status), ev.Header("content-type"), body)
}

func fulfill(tab context.Context, id fetch.RequestID, status int64, ctype string, body []byte) {
	var hdrs []*fetch.HeaderEntry
	if ctype != "" {
		hdrs = append(hdrs, &fetch.HeaderEntry{Name: "Content-Type", Value: ctype})
	}
	_, _ = chromedp.Call(tab, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: id, ResponseCode: status, ResponseHeaders: hdrs, Body: body})
}

func refuse(tab context.Context, id fetch.RequestID) {
	_, _ = chromedp.Call(tab, fetch.FailRequest, fetch.FailRequestParams{RequestID: id, ErrorReason: network.ErrorReasonBlockedByClient})
}

// decodeBody undoes a Content-Encoding with the gate's decoder
// (gate.DecodeContent: the bytes the gate judged), within
// DefaultMaxOutputBytes. Two rules are the renderer's own: more than
// gate.MaxContentCodings entries, identity ones included, are refused
// before anything is decoded, and so is a coding the gate cannot decode,
// even on a body that reads as text (the gate takes that header for stale).
func decodeBody(b []byte, encoding string) ([]byte, error) {
	codings := strings.Split(strings.ToLower(encoding), ",")
	if len(codings) > gate.MaxContentCodings {
		// Each layer may decode to DefaultMaxOutputBytes, outside the
		// render's time limit: not a thousand of them.
		return nil, fmt.Errorf("render: %d content codings; at most %d are decoded", len(codings), gate.MaxContentCodings)
	}
	for _, c := range codings {
		if c = strings.TrimSpace(c); c != "" && !gate.SupportedCoding(c) {
			return nil, fmt.Errorf("render: content encoding %q", c)
		}
	}
	out, err := gate.DecodeContent(b, encoding, DefaultMaxOutputBytes)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return out, nil
}
