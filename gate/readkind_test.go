package gate

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestClassifyReadKinds judges file and tool reads by their bytes without
// a status, and keeps HTTP the default.
func TestClassifyReadKinds(t *testing.T) {
	size := func(n int64) *int64 { return &n }
	doc := page("Costs", "<p>"+prose+"</p>")
	challenge := `<html><head><title>Just a moment...</title></head><body><div id="challenge-running"></div></body></html>`
	file := func(path string, body string, sz *int64) Evidence {
		return Evidence{Kind: ReadFile, Path: path, Size: sz, Body: []byte(body)}
	}
	tool := func(name, resource, body string) Evidence {
		return Evidence{Kind: ReadTool, Tool: name, URL: resource, Body: []byte(body)}
	}
	runClassifyCases(t, []classifyCase{
		{name: "file markdown", ev: file("/srv/notes/plan.md", "# Plan\n\n"+prose, size(int64(len("# Plan\n\n"+prose)))), verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				rc := res.Receipt
				if rc.Source != ReadFile || rc.Path != "/srv/notes/plan.md" || rc.Status != 0 || *rc.Size != int64(len(res.Text)) || rc.Kind != KindText {
					t.Fatalf("receipt %+v", rc)
				}
			}},
		{name: "file json by extension", ev: file(`C:\data\prices.json`, `{"p": 19.99}`, nil), verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				if res.Receipt.Kind != KindJSON || res.Receipt.ContentType != "application/json" {
					t.Fatalf("kind %s type %s", res.Receipt.Kind, res.Receipt.ContentType)
				}
			}},
		{name: "file invalid json", ev: file("data.json", `{"p": 19.`, nil), verdict: Unknown, layer: LayerExtraction, reason: ReasonInvalidJSON},
		{name: "file html saved challenge page", ev: file("page.html", challenge, nil), verdict: Unknown, layer: LayerFingerprint, reason: ReasonChallenge},
		{name: "file html article", ev: file("a.htm", doc, nil), verdict: Retrieved, check: textContains(prose)},
		{name: "file without extension sniffed", ev: file("README", prose, nil), verdict: Retrieved},
		{name: "file binary", ev: file("photo.png", "\x89PNG\r\n\x1a\n\x00\x00", nil), verdict: Unknown, layer: LayerExtraction, reason: ReasonBinary},
		{name: "file short read", ev: file("log.txt", "partial", size(4096)), verdict: Failed, layer: LayerTransport, reason: ReasonSizeMismatch},
		{name: "file empty", ev: file("empty.txt", "", size(0)), verdict: Failed, layer: LayerTransport, reason: ReasonEmptyBody},
		{name: "file read error", ev: Evidence{Kind: ReadFile, Path: "/nope", Error: "open /nope: no such file or directory"}, verdict: Failed, layer: LayerTransport, reason: ReasonTransportError},
		{name: "file content type given", ev: Evidence{Kind: ReadFile, Path: "blob", ContentType: "text/csv", Body: []byte("a,b\n1,2\n")}, verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				if res.Receipt.Kind != KindCSV {
					t.Fatalf("kind %s", res.Receipt.Kind)
				}
			}},
		{name: "tool read of a page", ev: tool("browser.read", "https://shop.example/item/42", doc), verdict: Retrieved,
			check: func(t *testing.T, res Result) {
				rc := res.Receipt
				if rc.Source != ReadTool || rc.Tool != "browser.read" || rc.URL != "https://shop.example/item/42" || rc.Status != 0 {
					t.Fatalf("receipt %+v", rc)
				}
			}},
		{name: "tool read of a wall", ev: tool("browser.read", "https://news.example/a", page("Oops", "<h1>Page not found</h1><p>Sorry.</p>")),
			verdict: Unknown, layer: LayerFingerprint, reason: ReasonSoft404},
		{name: "tool read with a status", ev: func() Evidence { e := tool("http.get", "https://a.example/", doc); e.Status = 403; return e }(),
			verdict: Failed, layer: LayerTransport, reason: "transport.http_403"},
		{name: "tool error", ev: Evidence{Kind: ReadTool, Tool: "s3.get", URL: "s3://bucket/key", Error: "AccessDenied for AKIAIOSFODNN7EXAMPLE"}, verdict: Failed, layer: LayerTransport, reason: ReasonTransportError,
			check: func(t *testing.T, res Result) {
				if strings.Contains(res.Receipt.Error, "IOSFODNN7EXA") {
					t.Fatalf("error not masked: %q", res.Receipt.Error)
				}
			}},
		{name: "tool json", ev: func() Evidence {
			e := tool("db.query", "sql:select 1", `[{"n":1}]`)
			e.ContentType = "application/json"
			return e
		}(), verdict: Retrieved},
		{name: "http default needs a status", ev: Evidence{URL: "https://a.example/", Body: []byte(doc), Headers: map[string]string{"content-type": "text/html"}},
			verdict: Failed, layer: LayerTransport, reason: ReasonInvalidStatus},
		{name: "explicit http", ev: Evidence{Kind: ReadHTTP, URL: "https://a.example/", Status: 200, Body: []byte(doc), Headers: map[string]string{"content-type": "text/html"}},
			verdict: Retrieved, check: func(t *testing.T, res Result) {
				if res.Receipt.Source != "" {
					t.Fatalf("source %q for http", res.Receipt.Source)
				}
			}},
		{name: "http ignores content_type without header", ev: Evidence{URL: "https://a.example/", Status: 200, ContentType: "application/json", Body: []byte(`{"a":1}`)},
			verdict: Retrieved, check: func(t *testing.T, res Result) {
				if res.Receipt.ContentType != "" {
					t.Fatalf("content type %q", res.Receipt.ContentType)
				}
			}},
		{name: "unknown kind", ev: Evidence{Kind: "ftp", URL: "ftp://a.example/x", Body: []byte("x")}, verdict: Failed, layer: LayerTransport, reason: ReasonInvalidKind},
	})

	// The JSON form of file evidence.
	var ev Evidence
	if err := json.Unmarshal([]byte(`{"kind":"file","path":"/a/b.txt","size":3,"url":""}`), &ev); err != nil || ev.Kind != ReadFile || *ev.Size != 3 {
		t.Fatalf("%v %+v", err, ev)
	}
}
