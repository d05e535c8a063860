package web

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/replay"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// page is what the layout template needs on every page; Body holds the
// page's own view model.
type page struct {
	Title string
	// Ctx is the context the page belongs to ("" for the contexts list).
	Ctx string
	// Nav names the active navigation tab.
	Nav string
	// At is the ?at= value as the user gave it; links keep it so that
	// following them stays at the same commit.
	At string
	// Commit is the commit the page shows (nil on pages without one).
	Commit *commitInfo
	// Keep are the query parameters the time-travel form carries over.
	Keep []param
	// Auth is set when authentication is on (the logout button shows).
	Auth bool
	// Travel is the time-travel control (nil on pages without a commit).
	Travel *travel
	// TravelOnError shows the control on an error page too: an artifact
	// page at a commit the artifact is not in, from which the user slides
	// on to one where it is.
	TravelOnError bool
	// Timeline lists the commits around the shown one on the control's
	// chain, each a link to this same view at that commit.
	Timeline []timelineRow
	// Latest links to this view at the branch head when the page shows
	// an older commit.
	Latest string
	// CSS and JS are the asset URLs.
	CSS, JS string
	Body    any
}

// timelineRow is one commit of the time-travel list.
type timelineRow struct {
	Short, ID, Message, Time string
	Ops                      int
	// Step is the commit's position on the control's chain (1-based).
	Step    int
	URL     string
	DiffURL string
	Current bool
}

// param is one query parameter.
type param struct{ Name, Value string }

// commitInfo describes the commit a page shows.
type commitInfo struct {
	ID          string
	Short       string
	Branch      string // set when the page shows a branch head
	Time        string
	Author      string
	Message     string
	Artifacts   int
	Edges       int
	ContextHash string
}

func newCommitInfo(c *replay.Commit, branch string) *commitInfo {
	return &commitInfo{
		ID: c.ID.String(), Short: c.ID.Short(), Branch: branch, Time: c.Time,
		Author: c.Author, Message: c.Message, Artifacts: c.Artifacts, Edges: c.Edges,
		ContextHash: c.ContextHash.String(),
	}
}

// pageSet holds one parsed template set per page, each the layout plus
// the page's "content".
type pageSet struct {
	byName map[string]*template.Template
}

// funcs are the helpers templates may call. Every one returns plain
// strings; html/template escapes them for the context they land in.
var funcs = template.FuncMap{
	"ctxURL":        func(ctx, at string) string { return ctxURL(ctx, at) },
	"artURL":        func(ctx, id, at string) string { return artifactURL(ctx, id, at) },
	"auditURL":      func(ctx, id, at string) string { return auditURL(ctx, id, at) },
	"graphURL":      func(ctx, root, at string) string { return graphURL(ctx, root, at, "") },
	"blastURL":      func(ctx, root, at string) string { return graphURL(ctx, root, at, "in") },
	"quarantineURL": func(ctx, at string) string { return ctxURL(ctx, "") + "/quarantine" + query("at", at) },
	"diffURL": func(ctx, from, to string) string {
		return ctxURL(ctx, "") + "/diff" + query("from", from, "to", to)
	},
	"filterURL": func(ctx, at, status string) string {
		return ctxURL(ctx, "") + query("at", at, "status", status)
	},
	"short":      func(d hashing.Digest) string { return d.Short() },
	"plural":     plural,
	"mark":       func(st string) string { return statusMark(graph.Status(st)) },
	"human":      humanTime,
	"num":        func(n int) string { return thousands(int64(n)) },
	"num64":      func(n int64) string { return thousands(n) },
	"statusName": statusName,
	// verdictClass styles the three verdicts the gate writes; any other
	// value (it comes from artifact data) gets no class.
	"verdictClass": func(v string) string {
		switch v {
		case "RETRIEVED", "FAILED", "UNKNOWN":
			return "v-" + v
		}
		return ""
	},
	// formParam is a hidden field carrying a value a form cannot carry
	// as it is (not UTF-8) percent-encoded.
	"formParam": formParam,
	// label splits an identifier into the runs template "label" shows,
	// its invisible code points as escapes (labelParts); labelText is
	// the same as one string, for attribute values.
	"label":     labelParts,
	"labelText": labelText,
	"add":       func(a, b int) int { return a + b },
	"stepLine":  stepLine,
	"sides":     func(a, b compareSide) []compareSide { return []compareSide{a, b} },
}

func mustParsePages() *pageSet {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	ps := &pageSet{byName: map[string]*template.Template{}}
	for _, n := range names {
		file := path.Base(n)
		if file == "layout.html" {
			continue
		}
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
		ps.byName[strings.TrimSuffix(file, ".html")] = t
	}
	return ps
}

// render executes page name into a buffer and writes it with status. A
// template failure becomes a 500 before anything is sent.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, p *page, body any) {
	t := s.pages.byName[name]
	p.Body = body
	p.Auth = s.tokens != nil
	p.CSS = s.assets.url("style.css")
	p.JS = s.assets.url("app.js")
	if p.Ctx != "" && p.Commit != nil && (status == http.StatusOK || p.TravelOnError) {
		s.travelControl(r, p)
	}
	var buf bytes.Buffer
	if t == nil {
		s.log.Error("web: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.log.Error("web: template", "name", name, "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	out := showBidiControls(buf.Bytes())
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	serverTiming(h, r)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// bidiControls are the explicit directional formatting characters:
// embeddings and overrides (U+202A–U+202E) and isolates (U+2066–U+2069).
// One left open in a value runs on to the end of its line, so the page's
// own text after the value (a commit's op count, the ids that name a
// source) would be drawn reordered or backwards. The templates hold none;
// in a page they come from artifact data, commits or the request.
const bidiControls = "\u202A\u202B\u202C\u202D\u202E\u2066\u2067\u2068\u2069"

// bidiShown replaces each of bidiControls with U+FFFD, which is drawn:
// the reader sees that something invisible stood there (the API returns
// it as stored).
var bidiShown = strings.NewReplacer(
	"\u202A", "\uFFFD", "\u202B", "\uFFFD", "\u202C", "\uFFFD", "\u202D", "\uFFFD", "\u202E", "\uFFFD",
	"\u2066", "\uFFFD", "\u2067", "\uFFFD", "\u2068", "\uFFFD", "\u2069", "\uFFFD",
)

// showBidiControls returns page with every one of bidiControls replaced
// by U+FFFD (page itself when it has none): in text, in attribute values
// (a search box shows U+FFFD where the query had one) and in the inline
// SVG. URLs are not changed: html/template and the URL builders write
// such characters in them percent-encoded.
func showBidiControls(page []byte) []byte {
	if !hasBidiControl(page) {
		return page
	}
	return []byte(bidiShown.Replace(string(page)))
}

// hasBidiControl reports whether page holds one of bidiControls. Every
// page goes through it, some of them megabytes: it looks for their UTF-8
// lead byte (E2) with IndexByte and checks the two bytes after it (80 AA–
// AE, 81 A6–A9), about 30 times faster than bytes.ContainsAny's rune by
// rune decoding even on a page with a dash on every line
// (BenchmarkBidiLook).
func hasBidiControl(page []byte) bool {
	for {
		i := bytes.IndexByte(page, 0xE2)
		if i < 0 || i+2 >= len(page) {
			return false
		}
		if c1, c2 := page[i+1], page[i+2]; (c1 == 0x80 && c2 >= 0xAA && c2 <= 0xAE) || (c1 == 0x81 && c2 >= 0xA6 && c2 <= 0xA9) {
			return true
		}
		page = page[i+1:]
	}
}

func queryPrefix(raw string) string {
	if raw == "" {
		return ""
	}
	return "?" + raw
}

// assetSet is the embedded CSS and JS, each with a content hash used as a
// cache-busting version in its URL.
type assetSet struct {
	files map[string]asset
}

type asset struct {
	data    []byte
	ctype   string
	version string
}

func mustLoadAssets() *assetSet {
	as := &assetSet{files: map[string]asset{}}
	ents, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range ents {
		data, err := fs.ReadFile(assetFS, "assets/"+e.Name())
		if err != nil {
			panic(err)
		}
		ctype := "application/octet-stream"
		switch path.Ext(e.Name()) {
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		}
		as.files[e.Name()] = asset{data: data, ctype: ctype, version: strconv.FormatUint(xxhash.Sum64(data), 36)}
	}
	return as
}

func (as *assetSet) url(name string) string {
	return prefixAsst + name + "?v=" + as.files[name].version
}

// handleAsset serves an embedded asset. Assets need no token: they hold
// nothing from the store. Its ETag is the asset's version; the
// conditional headers are evaluated as on every API read, by the one
// evaluation (httpapi.Preconditions): an If-Match that does not name the
// ETag is 412 precondition-failed, an If-None-Match that does is 304.
func (s *server) handleAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := s.assets.files[name]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		s.problem(w, r, &problem{Code: codeNotFound, Detail: "no such asset"})
		return
	}
	etag := `"` + a.version + `"`
	h := w.Header()
	var failed *fault.Error
	switch err := httpapi.Preconditions(r, etag); {
	case errors.As(err, &failed):
		s.problem(w, r, &problem{Code: failed.Code, Detail: failed.Detail, Errors: failed.Errors})
		return
	case errors.Is(err, httpapi.NotModified{}):
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("ETag", etag)
	h.Set("Content-Length", strconv.Itoa(len(a.data)))
	_, _ = w.Write(a.data)
}

// URL builders. Artifact ids and context ids are path-escaped, so any id
// (with "/", "?", "#", "%" or spaces) stays one path segment; the route
// reads it back from the escaped path.

func ctxURL(ctx, at string) string {
	return prefixCtx + url.PathEscape(ctx) + query("at", at)
}

func artifactURL(ctx, id, at string) string {
	return idURL(ctx, "artifacts", id, "at", at)
}

func auditURL(ctx, id, at string) string {
	return idURL(ctx, "audit", id, "at", at)
}

// idURL is the address of a page about one artifact, with the query's
// name/value pairs kv (query). The ids "." and ".." cannot be path
// segments (browsers resolve them, escaped or not), so they go in the
// query: /ui/contexts/{ctx}/artifacts/?id=..
func idURL(ctx, page, id string, kv ...string) string {
	base := prefixCtx + url.PathEscape(ctx) + "/" + page + "/"
	if id == "." || id == ".." {
		return base + query(append([]string{"id", id}, kv...)...)
	}
	return base + url.PathEscape(id) + query(kv...)
}

func graphURL(ctx, root, at, dir string) string {
	return prefixCtx + url.PathEscape(ctx) + "/graph" + query("root", root, "dir", dir, "at", at)
}

// query builds "?k=v&…" from name/value pairs, leaving out empty values,
// in the order given.
func query(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1]))
	}
	return b.String()
}

// thousands formats n with thin separators: 10000 → "10,000".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// statusName is the human name of a trust status.
func statusName(st graph.Status) string {
	switch st {
	case graph.StatusPoisonRoot:
		return "poison root"
	case graph.StatusQuarantined:
		return "quarantined"
	case graph.StatusConfirmed:
		return "confirmed"
	}
	return "unknown"
}
