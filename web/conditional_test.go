package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// sendRaw sends one request over real HTTP with exactly the header lines
// given (several values of a name are several lines) and returns the
// response and its body.
func sendRaw(t *testing.T, srv *httptest.Server, method, path string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// TestAssetPreconditions: the UI's assets, which answer with an ETag,
// evaluate the conditional headers as every API read does (one rule,
// httpapi.Preconditions): If-Match first — a list that does not name the
// ETag by strong comparison (another tag, its weak form, an empty value)
// is 412 precondition-failed naming the parameter If-Match, rule
// matches_etag, without the asset or its ETag, whatever If-None-Match
// says — then If-None-Match, 304 when one of its tags (weak comparison,
// any header line) is the ETag, or "*". The HTML pages send no ETag.
func TestAssetPreconditions(t *testing.T) {
	srv := httptest.NewServer(New(Options{Store: openStore(t), Logger: quietLogger()}))
	defer srv.Close()
	const other = `"0123456789"`
	for _, name := range []string{"style.css", "app.js"} {
		p := "/ui/assets/" + name
		plain, body := sendRaw(t, srv, http.MethodGet, p, nil)
		tag := plain.Header.Get("ETag")
		if plain.StatusCode != 200 || tag == "" || len(body) == 0 {
			t.Fatalf("GET %s: %d with ETag %q and %d bytes", p, plain.StatusCode, tag, len(body))
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			for _, c := range []struct {
				name   string
				h      http.Header
				status int
			}{
				{"If-Match its tag", http.Header{"If-Match": {tag}}, 200},
				{"If-Match star", http.Header{"If-Match": {"*"}}, 200},
				{"If-Match another tag, then its tag on a second line", http.Header{"If-Match": {other, tag}}, 200},
				{"If-Match another tag", http.Header{"If-Match": {other}}, 412},
				{"If-Match the weak form of its tag", http.Header{"If-Match": {"W/" + tag}}, 412},
				{"If-Match empty", http.Header{"If-Match": {""}}, 412},
				{"If-Match another tag and If-None-Match its tag", http.Header{"If-Match": {other}, "If-None-Match": {tag}}, 412},
				{"If-Match its tag and If-None-Match its tag", http.Header{"If-Match": {tag}, "If-None-Match": {tag}}, 304},
				{"If-None-Match its tag", http.Header{"If-None-Match": {tag}}, 304},
				{"If-None-Match its weak form", http.Header{"If-None-Match": {"W/" + tag}}, 304},
				{"If-None-Match a list holding it", http.Header{"If-None-Match": {other + ", " + tag}}, 304},
				{"If-None-Match another tag, then its tag on a second line", http.Header{"If-None-Match": {other, tag}}, 304},
				{"If-None-Match star", http.Header{"If-None-Match": {"*"}}, 304},
				{"If-None-Match another tag", http.Header{"If-None-Match": {other}}, 200},
			} {
				what := method + " " + p + " with " + c.name
				h := c.h.Clone()
				h.Set("Accept", "application/problem+json")
				res, got := sendRaw(t, srv, method, p, h)
				switch c.status {
				case 412:
					if res.StatusCode != 412 || res.Header.Get("ETag") != "" || res.Header.Get("Content-Type") != "application/problem+json" {
						t.Errorf("%s: %d with ETag %q, Content-Type %q, want 412 problem+json without an ETag", what, res.StatusCode, res.Header.Get("ETag"), res.Header.Get("Content-Type"))
						continue
					}
					if method == http.MethodHead {
						continue
					}
					var pj struct {
						Type   string
						Status int
						Errors []struct{ Parameter, Rule string }
					}
					if err := json.Unmarshal(got, &pj); err != nil || pj.Type != "urn:artifactd:problem:precondition-failed" || pj.Status != 412 ||
						len(pj.Errors) != 1 || pj.Errors[0].Parameter != "If-Match" || pj.Errors[0].Rule != "matches_etag" {
						t.Errorf("%s: problem %s (%v), want precondition-failed naming If-Match, rule matches_etag", what, got, err)
					}
				case 304:
					if res.StatusCode != 304 || res.Header.Get("ETag") != tag {
						t.Errorf("%s: %d with ETag %q, want 304 with %s", what, res.StatusCode, res.Header.Get("ETag"), tag)
					}
				default:
					wantBody := string(body)
					if method == http.MethodHead {
						wantBody = ""
					}
					if res.StatusCode != 200 || res.Header.Get("ETag") != tag || string(got) != wantBody {
						t.Errorf("%s: %d with ETag %q (%d bytes), want 200 with %s and the asset", what, res.StatusCode, res.Header.Get("ETag"), len(got), tag)
					}
				}
			}
		}
	}
	// A browser is shown the 412 as a page.
	res, got := sendRaw(t, srv, http.MethodGet, "/ui/assets/style.css", http.Header{"If-Match": {other}})
	if res.StatusCode != 412 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || len(got) == 0 {
		t.Errorf("GET style.css with If-Match another tag, as a browser: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// The HTML pages send no ETag, so no conditional header applies to them.
	h, _, _ := newPlanServer(t)
	pages := httptest.NewServer(h)
	defer pages.Close()
	ctx := "/ui/contexts/poison-plan"
	for _, p := range []string{"/", "/ui/", "/ui/login", ctx, ctx + "/artifacts/s1", ctx + "/graph", ctx + "/quarantine", ctx + "/diff", ctx + "/audit/s10"} {
		if res, _ := sendRaw(t, pages, http.MethodGet, p, nil); res.StatusCode != 200 || res.Header.Get("ETag") != "" {
			t.Errorf("GET %s: %d with ETag %q; a page that sends one must evaluate If-Match too", p, res.StatusCode, res.Header.Get("ETag"))
		}
	}
}
