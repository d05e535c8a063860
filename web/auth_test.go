package web

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestTokenLogin(t *testing.T) {
	s := openStore(t)
	loadPoisonPlan(t, s, "poison-plan")
	h := New(Options{Store: s, Logger: quietLogger(), Tokens: func(tok string) bool { return tok == "reader-token" }})

	// Without a token a page sends the browser to the form, keeping the path.
	res, _ := get(t, h, "/ui/contexts/poison-plan?at=main")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/contexts/poison-plan?at=main") {
		t.Fatalf("no token: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	checkSecurityHeaders(t, res, "redirect")
	res, _ = get(t, h, "/", "Accept", "application/json")
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("JSON client without token: %d", res.StatusCode)
	}
	res, body := get(t, h, "/ui/login?next=/ui/contexts/poison-plan")
	if res.StatusCode != 200 || !strings.Contains(body, `type="password"`) || !strings.Contains(body, `value="/ui/contexts/poison-plan"`) {
		t.Fatalf("login form: %d", res.StatusCode)
	}
	// Assets need no token.
	if res, _ := get(t, h, "/ui/assets/style.css"); res.StatusCode != 200 {
		t.Errorf("asset without token: %d", res.StatusCode)
	}

	post := func(form url.Values, header ...string) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	if res := post(url.Values{"token": {"wrong"}, "next": {"/"}}); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Errorf("wrong token: %d cookies %v", res.StatusCode, res.Cookies())
	}
	if res := post(url.Values{"token": {"reader-token"}}, "Origin", "https://evil.example"); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post: %d", res.StatusCode)
	}
	for _, next := range []string{"//evil.example/x", "/./\\evil.example", "/a/../\\evil.example"} {
		res = post(url.Values{"token": {"reader-token"}, "next": {next}}, "Origin", "http://example.com")
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/" {
			t.Errorf("open redirect to %q: %d %q", next, res.StatusCode, res.Header.Get("Location"))
		}
	}
	res = post(url.Values{"token": {"reader-token"}, "next": {"/ui/contexts/poison-plan"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/contexts/poison-plan" {
		t.Fatalf("login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Value != base64.RawURLEncoding.EncodeToString([]byte("reader-token")) {
		t.Fatalf("cookie: %+v", cookies)
	}
	res, body = get(t, h, "/ui/contexts/poison-plan", "Cookie", cookies[0].Name+"="+cookies[0].Value)
	if res.StatusCode != 200 || !strings.Contains(body, "Sign out") {
		t.Errorf("with cookie: %d", res.StatusCode)
	}
	if res, _ := get(t, h, "/ui/contexts/poison-plan", "Authorization", "Bearer reader-token"); res.StatusCode != 200 {
		t.Errorf("with bearer: %d", res.StatusCode)
	}
	if res, _ := get(t, h, "/ui/contexts/poison-plan", "Cookie", cookieName+"=stale"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("with a bad cookie: %d", res.StatusCode)
	}
	// Logout clears the cookie.
	req := httptest.NewRequest(http.MethodPost, "/ui/logout", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 || rec.Result().Cookies()[0].MaxAge >= 0 {
		t.Errorf("logout: %d %v", rec.Code, rec.Result().Cookies())
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/ui/contexts/a?at=main": "/ui/contexts/a?at=main",
		"//evil.example": "/", "/\\evil.example": "/", "https://evil.example/": "/", "javascript:alert(1)": "/", "ui/x": "/",
		// http.Redirect cleans these to "/\evil.example", which a browser
		// reads as "//evil.example".
		"/./\\evil.example": "/", "/a/../\\evil.example": "/", "/ui\\x": "/",
		// Browsers strip tabs and line breaks before reading a URL.
		"/\t/evil.example": "/", "/\n/evil.example": "/", "/ui/\x7f": "/",
		// An encoded backslash is a path on this site, and stays one.
		"/ui/contexts/a%5Cb": "/ui/contexts/a%5Cb",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoginTokenWithAnyCharacters: a token with characters a cookie value
// may not hold ('"', '\\', ';', letters past ASCII) signs in and stays
// signed in. The raw token went into the cookie before, net/http dropped
// those characters, and every page sent the user back to the form.
func TestLoginTokenWithAnyCharacters(t *testing.T) {
	s := openStore(t)
	loadContext(t, s, "c", putOp(t, "a", "claim", "agent", map[string]any{"text": "one"}))
	for _, tok := range []string{`reader"token-0123456789`, `reader\token-0123456789`, "reader;token=0123456789", "reader-tökén-0123456789"} {
		h := New(Options{Store: s, Logger: quietLogger(), Tokens: func(got string) bool { return got == tok }})
		req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {tok}, "next": {"/ui/contexts/c"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
			t.Fatalf("token %q: login status %d, cookies %v", tok, res.StatusCode, res.Cookies())
		}
		c := res.Cookies()[0]
		if strings.Contains(c.Value, "token") {
			t.Errorf("token %q: the cookie holds it raw: %q", tok, c.Value)
		}
		res2, _ := get(t, h, "/ui/contexts/c", "Cookie", c.Name+"="+c.Value)
		if res2.StatusCode != http.StatusOK {
			t.Errorf("token %q: signed in, but the next page answers %d (Location %q)", tok, res2.StatusCode, res2.Header.Get("Location"))
		}
	}
}

// TestBearerSchemeAnyCase: the UI takes a bearer token whose scheme is
// written in any case, with the spacing the API takes, as docs/API.md
// promises for every door. It took only "Bearer " before: "bearer" was
// sent to the login form (a JSON client got a 401) while the API and /mcp
// accepted the same header.
func TestBearerSchemeAnyCase(t *testing.T) {
	s := openStore(t)
	loadPoisonPlan(t, s, "poison-plan")
	h := New(Options{Store: s, Logger: quietLogger(), Tokens: func(tok string) bool { return tok == "reader-token" }})
	for _, v := range []string{"Bearer reader-token", "bearer reader-token", "BEARER reader-token", "Bearer  reader-token ", " bearer reader-token"} {
		if res, _ := get(t, h, "/ui/contexts/poison-plan", "Authorization", v); res.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: %d, want 200", v, res.StatusCode)
		}
		if res, _ := get(t, h, "/", "Authorization", v, "Accept", "application/json"); res.StatusCode == http.StatusUnauthorized {
			t.Errorf("Authorization %q, JSON client: 401", v)
		}
	}
	for _, v := range []string{"Basic reader-token", "Bearer", "Bearer wrong-token", "Bearerreader-token"} {
		if res, _ := get(t, h, "/ui/contexts/poison-plan", "Authorization", v); res.StatusCode != http.StatusSeeOther {
			t.Errorf("Authorization %q: %d, want the login form's 303", v, res.StatusCode)
		}
	}
}
