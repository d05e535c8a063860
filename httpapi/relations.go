package httpapi

import (
	"fmt"
	"net/http"

	"github.com/artifactd/artifactd/service"
)

// relationRequest is the body of PUT /v1/relations/{name}.
type relationRequest struct {
	Depends     *bool  `json:"depends"`
	Description string `json:"description"`
}

// handleListRelations is GET /v1/relations: built-in and user relations.
func (s *Server) handleListRelations(w http.ResponseWriter, r *http.Request) {
	s.writeTagged(w, r, map[string]any{"relations": s.types.Relations()})
}

// handleGetRelation is GET /v1/relations/{name}.
func (s *Server) handleGetRelation(w http.ResponseWriter, r *http.Request) {
	name, err := urlParam(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rec, ok := s.types.RelationOf(name)
	if !ok {
		s.writeError(w, r, service.NotFoundParam("name", fmt.Sprintf("no relation %q", name)))
		return
	}
	s.writeTagged(w, r, rec)
}

// handlePutRelation is PUT /v1/relations/{name}: register a user relation
// (201) or update its description (200).
func (s *Server) handlePutRelation(w http.ResponseWriter, r *http.Request) {
	name, err := urlParam(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in relationRequest
	if _, err := s.decodeJSON(w, r, "relation", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Depends == nil {
		s.writeError(w, r, &Error{Code: CodeValidation, Detail: "depends is required: true for a dependency relation (carries trust), false for a reference",
			Errors: []FieldError{{Pointer: "/depends", Rule: "required", Detail: "missing"}}})
		return
	}
	rec, changed, err := s.types.PutRelation(r.Context(), s.st, name, *in.Depends, in.Description)
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
