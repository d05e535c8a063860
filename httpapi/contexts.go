package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// ContextView describes a context (GET /v1/contexts/{ctx}).
type ContextView struct {
	ID         string         `json:"id"`
	Quarantine string         `json:"quarantine"`
	Created    string         `json:"created"`
	Branches   []store.Branch `json:"branches,omitempty"`
	// The rest describes the state at ?at= (default main).
	Head        hashing.Digest      `json:"head"`
	ContextHash hashing.Digest      `json:"context_hash"`
	Seq         uint64              `json:"seq"`
	Counts      ContextCounts       `json:"counts"`
	Trust       *graph.TrustSummary `json:"trust,omitempty"`
}

// ContextCounts counts a state.
type ContextCounts struct {
	Artifacts int `json:"artifacts"`
	Edges     int `json:"edges"`
}

// handleListContexts is GET /v1/contexts: the contexts the token may read,
// sorted by id, in cursor pages.
func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	all, err := s.st.ListContexts(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	i := 0
	if cursor != "" {
		i = sort.Search(len(all), func(i int) bool { return all[i].ID > cursor })
	}
	items := []store.ContextInfo{}
	next := ""
	for ; i < len(all); i++ {
		if !p.allows(ScopeRead, all[i].ID) {
			continue
		}
		if len(items) == limit {
			next = encodeCursor(items[len(items)-1].ID)
			break
		}
		items = append(items, all[i])
	}
	setCache(w, false) // contexts come and go
	s.respondRead(w, r, "", page[store.ContextInfo]{Items: items, NextCursor: next}, nil)
}

// contextRequest is the body of POST /v1/contexts.
type contextRequest struct {
	ID         string `json:"id"`
	Quarantine string `json:"quarantine"`
}

// handleCreateContext is POST /v1/contexts: 201 with the context record.
func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	var in contextRequest
	if _, err := s.decodeJSON(w, r, "context", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.authorize(r, ScopeWrite, in.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.st.CreateContext(r.Context(), in.ID, in.Quarantine)
	if err != nil {
		s.writeError(w, r, service.ExistsAt(err, "/id"))
		return
	}
	w.Header().Set("Location", "/v1/contexts/"+info.ID)
	s.writeJSON(w, r, http.StatusCreated, info)
}

// badContextID is the refusal of a context id in the path that no
// context may have, where the request would create it.
func badContextID() *Error {
	return &Error{Code: CodeValidation, Detail: "the context id in the path is not valid",
		Errors: []FieldError{{Parameter: "ctx", Rule: "context_id", Detail: "1-128 characters of [A-Za-z0-9._-], not . or .."}}}
}

// handleEnsureContext is PUT /v1/contexts/{ctx}: create the context if it
// does not exist (201), answer 200 with the record when it exists with the
// same settings, 409 when its settings differ. The body is optional:
// {"quarantine"?: "enforce"|"observe", "id"?: the path id}. Re-running an
// agent that starts with this call never fails on "exists".
func (s *Server) handleEnsureContext(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, badContextID()) // the guard answers it first
		return
	}
	body, err := readBody(w, r, s.maxBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in := contextRequest{ID: ctxID}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := requireJSON(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		// The body may omit the id: take it from the path, then check the
		// body against the same schema as POST /v1/contexts. A body that
		// is rewritten so is held to canonical JSON first: once
		// re-marshalled, a key given twice or a lone surrogate would be
		// gone unseen.
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil && m != nil && m["id"] == nil {
			if _, err := hashing.Canonicalize(body); err != nil {
				s.writeError(w, r, err)
				return
			}
			m["id"], _ = json.Marshal(ctxID)
			body, _ = json.Marshal(m)
		}
		if _, err := decodeCanonical(body, "context", &in); err != nil {
			s.writeError(w, r, err)
			return
		}
		if in.ID != ctxID {
			s.writeError(w, r, &Error{Code: CodeValidation, Detail: "the body's id differs from the path's",
				Errors: []FieldError{{Pointer: "/id", Rule: "matches_path", Detail: "omit id or repeat the id in the path"}}})
			return
		}
	}
	info, created, err := s.svc.EnsureContext(r.Context(), ctxID, in.Quarantine)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/contexts/"+info.ID)
	s.writeJSON(w, r, status, info)
}

// handleDescribeContext is GET /v1/contexts/{ctx}.
func (s *Server) handleDescribeContext(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.st.GetContext(r.Context(), ctxID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	branches, err := s.st.Branches(r.Context(), ctxID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Branches change without the viewed commit changing: they salt the ETag.
	salt := ""
	for _, b := range branches {
		salt += b.Name + "\x00" + b.Head.String() + "\x00"
	}
	s.readViewSalted(w, r, func(*store.View) (string, error) { return salt, nil }, func(v *store.View) (any, error) {
		sum := v.Trust.Summary()
		return ContextView{
			ID: info.ID, Quarantine: info.Quarantine, Created: info.Created, Branches: branches,
			Head: v.Commit.ID, ContextHash: v.Commit.ContextHash, Seq: v.Commit.Seq,
			Counts: ContextCounts{Artifacts: v.Commit.Artifacts, Edges: v.Commit.Edges},
			Trust:  &sum,
		}, nil
	})
}
