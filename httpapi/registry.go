package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// ---- branches ----

// handleListBranches is GET /v1/contexts/{ctx}/branches.
func (s *Server) handleListBranches(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	bs, err := s.st.Branches(r.Context(), ctxID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeTagged(w, r, map[string]any{"branches": nonNil(bs)})
}

// branchRequest is the body of POST /v1/contexts/{ctx}/branches.
type branchRequest struct {
	Name string `json:"name"`
	At   string `json:"at"`
}

// handleCreateBranch is POST /v1/contexts/{ctx}/branches: a new branch at
// any commit (at: id, unique prefix or branch; default main).
func (s *Server) handleCreateBranch(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in branchRequest
	if _, err := s.decodeJSON(w, r, "branch", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := store.ValidateBranch(in.Name); err != nil {
		s.writeError(w, r, &Error{Code: CodeValidation, Detail: service.Classify(err).Detail, Errors: []FieldError{{Pointer: "/name", Rule: "pattern", Detail: "bad branch name"}}})
		return
	}
	if err := store.ValidateNewBranch(in.Name); err != nil { // a ref of it would name a commit too
		s.writeError(w, r, &Error{Code: CodeValidation, Detail: service.Classify(err).Detail, Errors: []FieldError{{Pointer: "/name", Rule: store.NotCommitIDRule, Detail: store.CommitIDRule}}})
		return
	}
	c, err := s.svc.ResolveRef(r.Context(), ctxID, in.At, "at")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.CreateBranch(r.Context(), ctxID, in.Name, c.ID); err != nil {
		s.writeError(w, r, service.ExistsAt(err, "/name"))
		return
	}
	w.Header().Set("Location", "/v1/contexts/"+ctxID+"/branches/"+pathEscape(in.Name))
	s.writeJSON(w, r, http.StatusCreated, store.Branch{Name: in.Name, Head: c.ID})
}

// resetRequest is the body of POST .../branches/{branch}/reset.
type resetRequest struct {
	To            string `json:"to"`
	Parent        string `json:"parent"`
	ForgetEffects bool   `json:"forget_effects"`
}

// handleResetBranch is POST /v1/contexts/{ctx}/branches/{branch}/reset:
// move a branch to any commit (checkout or rollback). parent (or If-Match)
// must name the current head when given. The commits left behind stay
// readable by id.
func (s *Server) handleResetBranch(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	branch, err := urlParam(r, "branch")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in resetRequest
	if _, err := s.decodeJSON(w, r, "reset", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	parent, err := parseParent(r, in.Parent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.ResetBranch(r.Context(), ctxID, branch, service.ResetInput{To: in.To, Parent: parent, ParentIfMatch: parent != nil && in.Parent == "", ForgetEffects: in.ForgetEffects})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// writeTagged writes a JSON value with an ETag of its bytes.
func (s *Server) writeTagged(w http.ResponseWriter, r *http.Request, v any) {
	raw, err := marshal(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	etag := `"` + strconv.FormatUint(xxhash.Sum64(raw), 16) + `"`
	setCache(w, false)
	if err := Preconditions(r, etag); err != nil {
		s.respondRead(w, r, etag, nil, err)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// ---- types ----

// handleListTypes is GET /v1/types: built-in and user types with their
// schemas and roles.
func (s *Server) handleListTypes(w http.ResponseWriter, r *http.Request) {
	s.writeTagged(w, r, map[string]any{"types": s.types.List(), "relations": s.types.Relations()})
}

// handleGetType is GET /v1/types/{name}.
func (s *Server) handleGetType(w http.ResponseWriter, r *http.Request) {
	name, err := urlParam(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, ok := s.types.Get(name)
	if !ok {
		s.writeError(w, r, service.NotFoundParam("name", fmt.Sprintf("no type %q", name)))
		return
	}
	s.writeTagged(w, r, rec)
}

// typeRequest is the body of PUT /v1/types/{name}.
type typeRequest struct {
	Role        graph.Role      `json:"role"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// handlePutType is PUT /v1/types/{name}: register a user type (201) or
// update its schema (200; the version goes up when the schema or
// description changed). The schema must compile as draft 2020-12 and may
// not reference anything outside itself.
func (s *Server) handlePutType(w http.ResponseWriter, r *http.Request) {
	name, err := urlParam(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in typeRequest
	if _, err := s.decodeJSON(w, r, "type", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, changed, err := s.types.Put(r.Context(), s.st, name, in.Role, in.Description, in.Schema)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if changed && rec.Version == 1 {
		status = http.StatusCreated
	}
	s.writeJSON(w, r, status, rec)
}
