package httpapi

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Scope is what a token may do. Each scope includes the ones below it:
// admin ⊇ write ⊇ read.
type Scope int

// The scopes.
const (
	ScopeNone Scope = iota
	ScopeRead
	ScopeWrite
	ScopeAdmin
)

func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// ParseScope parses "read", "write" or "admin".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return ScopeNone, fmt.Errorf("unknown scope %q: want read, write or admin", s)
}

// Grant is one token's permission: a scope on the contexts whose ids match
// one of Contexts (path.Match globs, "*" for all).
type Grant struct {
	Token    string   `json:"token"`
	Scope    string   `json:"scope"`
	Contexts []string `json:"contexts"`
}

// Tokens maps bearer tokens (by their SHA-256, so a lookup does not leak
// token bytes through timing) to their grants. The zero value has no tokens;
// a server with no tokens does not check authorization (it must then listen
// on loopback only, which `artifactd serve` enforces). Tokens is immutable
// once built.
type Tokens struct {
	byHash map[[32]byte][]grant
}

type grant struct {
	scope    Scope
	patterns []string
}

// Len returns the number of distinct tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byHash)
}

// ParseTokens reads a tokens file: either JSON (an array of grants, or an
// object {"tokens": [...]}) or lines "TOKEN SCOPE PATTERN[,PATTERN...]"
// where blank lines and lines starting with # are ignored and ";" also
// separates entries (handy in ARTIFACTD_TOKENS). A pattern is a context id
// glob; "*" matches every context.
func ParseTokens(text string) (*Tokens, error) {
	var grants []Grant
	trimmed := strings.TrimSpace(text)
	switch {
	case strings.HasPrefix(trimmed, "["):
		if err := json.Unmarshal([]byte(trimmed), &grants); err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
	case strings.HasPrefix(trimmed, "{"):
		var doc struct {
			Tokens []Grant `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(trimmed), &doc); err != nil {
			return nil, fmt.Errorf("tokens: %w", err)
		}
		grants = doc.Tokens
	default:
		sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, ";", "\n")))
		line := 0
		for sc.Scan() {
			line++
			l := strings.TrimSpace(sc.Text())
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			f := strings.Fields(l)
			if len(f) != 3 {
				return nil, fmt.Errorf("tokens entry %d: want \"TOKEN SCOPE PATTERN[,PATTERN...]\", got %d fields", line, len(f))
			}
			grants = append(grants, Grant{Token: f[0], Scope: f[1], Contexts: strings.Split(f[2], ",")})
		}
	}
	t := &Tokens{byHash: map[[32]byte][]grant{}}
	for i, g := range grants {
		if len(g.Token) < 16 {
			return nil, fmt.Errorf("tokens entry %d: a token must be at least 16 characters", i+1)
		}
		sc, err := ParseScope(g.Scope)
		if err != nil {
			return nil, fmt.Errorf("tokens entry %d: %w", i+1, err)
		}
		if len(g.Contexts) == 0 {
			return nil, fmt.Errorf("tokens entry %d: no context pattern (use \"*\" for all)", i+1)
		}
		for _, p := range g.Contexts {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return nil, fmt.Errorf("tokens entry %d: bad context pattern %q", i+1, p)
			}
		}
		h := sha256.Sum256([]byte(g.Token))
		t.byHash[h] = append(t.byHash[h], grant{scope: sc, patterns: g.Contexts})
	}
	if len(t.byHash) == 0 {
		return nil, fmt.Errorf("tokens: no token defined")
	}
	return t, nil
}

// ReadsAll reports whether token grants read scope on every context (the
// pattern "*"): what the browser UI, which lists every context, requires.
// It is safe for concurrent use.
func (t *Tokens) ReadsAll(token string) bool {
	if t.Len() == 0 {
		return false
	}
	p := &principal{grants: t.byHash[sha256.Sum256([]byte(token))]}
	return p.allows(ScopeRead, "*")
}

// principal is what an authenticated request may do; nil grants mean
// authorization is off (no tokens configured).
type principal struct {
	open   bool
	grants []grant
}

// allows reports whether the principal has scope on context ctxID.
// An empty ctxID asks for the scope on any context; "*" asks for it on
// every context (pattern exactly "*").
func (p *principal) allows(need Scope, ctxID string) bool {
	if p.open {
		return true
	}
	for _, g := range p.grants {
		if g.scope < need {
			continue
		}
		for _, pat := range g.patterns {
			switch ctxID {
			case "":
				return true
			case "*":
				if pat == "*" {
					return true
				}
			default:
				if ok, _ := path.Match(pat, ctxID); ok {
					return true
				}
			}
		}
	}
	return false
}

// BearerToken returns the token of an Authorization header value as the
// API reads it: the scheme Bearer (in any case, RFC 9110 §11.1), a space,
// and the rest of the value, surrounding spaces trimmed — a token may
// hold spaces (a JSON tokens file allows them). ok is false for another
// scheme or an empty token.
func BearerToken(header string) (token string, ok bool) {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(header), " ")
	tok = strings.TrimSpace(tok)
	return tok, strings.EqualFold(scheme, "Bearer") && tok != ""
}

// authenticate returns the request's principal, or a 401 problem.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	if s.tokens.Len() == 0 {
		return &principal{open: true}, nil
	}
	tok, ok := BearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, errorf(CodeUnauthorized, "send Authorization: Bearer <token>")
	}
	grants := s.tokens.byHash[sha256.Sum256([]byte(tok))]
	if grants == nil {
		return nil, errorf(CodeUnauthorized, "unknown bearer token")
	}
	return &principal{grants: grants}, nil
}

// authorize checks that the request may act with scope need on ctxID
// (see principal.allows).
func (s *Server) authorize(r *http.Request, need Scope, ctxID string) error {
	p, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if !p.allows(need, ctxID) {
		what := "context " + quoteJSON(ctxID)
		switch ctxID {
		case "":
			what = "any context"
		case "*":
			what = "every context (pattern \"*\")"
		}
		return errorf(CodeForbidden, "the token does not grant %s on %s", need, what)
	}
	return nil
}
