package web

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/artifactd/artifactd/httpapi"
)

// cookieName holds the token the user typed into the login form, in
// unpadded base64url.
const cookieName = "artifactd_ui_token"

// maxLoginBody bounds the login form body.
const maxLoginBody = 8 << 10

// authorized reports whether r may read: always when authentication is
// off, else when its cookie or bearer token is accepted by Options.Tokens.
func (s *server) authorized(r *http.Request) bool {
	if s.tokens == nil {
		return true
	}
	if c, err := r.Cookie(cookieName); err == nil && c.Value != "" {
		if tok, err := base64.RawURLEncoding.DecodeString(c.Value); err == nil && len(tok) > 0 && s.tokens(string(tok)) {
			return true
		}
	}
	if tok, ok := httpapi.BearerToken(r.Header.Get("Authorization")); ok && s.tokens(tok) {
		return true
	}
	return false
}

// requireLogin answers an unauthorized request: a browser GET is sent to
// the login form (coming back to the page afterwards), anything else gets
// a 401 problem.
func (s *server) requireLogin(w http.ResponseWriter, r *http.Request) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && !wantsJSON(r) {
		http.Redirect(w, r, pathLogin+query("next", r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	s.problem(w, r, &problem{Code: codeUnauthorized, Detail: "a token with read access is required"})
}

// loginView is the login form's model.
type loginView struct {
	Next  string
	Error string
}

// handleLogin shows the token form (GET) and checks a submitted token
// (POST): an accepted token is stored in an HttpOnly, SameSite=Strict
// cookie and the user goes on to the page they asked for.
func (s *server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if s.tokens == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.render(w, r, http.StatusOK, "login", &page{Title: "Sign in"}, loginView{Next: safeNext(r.URL.Query().Get("next"))})
	case http.MethodPost:
		if !sameOrigin(r) {
			s.problem(w, r, &problem{Code: codeForbidden, Detail: "the form was posted from another site"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "the form could not be read"})
			return
		}
		next := safeNext(r.PostForm.Get("next"))
		tok := strings.TrimSpace(r.PostForm.Get("token"))
		if tok == "" || !s.tokens(tok) {
			s.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in"}, loginView{Next: next, Error: "That token was not accepted."})
			return
		}
		// Encoded: a cookie value takes a few ASCII characters only, and
		// net/http drops the others (a token with '"', ';', '\' or
		// letters past ASCII came back changed and never matched).
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(tok)), Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.problem(w, r, &problem{Code: codeMethodNotAllowed})
	}
}

// handleLogout forgets the token cookie (POST only).
func (s *server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.problem(w, r, &problem{Code: codeMethodNotAllowed})
		return
	}
	if !sameOrigin(r) {
		s.problem(w, r, &problem{Code: codeForbidden, Detail: "the form was posted from another site"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, pathLogin, http.StatusSeeOther)
}

// sameOrigin reports whether a form post came from this site: browsers
// send Origin (or at least Sec-Fetch-Site) with every POST; a request with
// neither is not from a browser page and is let through.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// safeNext returns next when it is a path on this site, else "/": the
// login form must not become an open redirect. A backslash is refused
// wherever it stands: browsers read it as a slash, and http.Redirect
// cleans the path, so "/./\evil.example" would leave as "/\evil.example",
// which a browser follows to another host. Control characters, which
// browsers strip from a URL before reading it, are refused too.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}
