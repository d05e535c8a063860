package httpapi

import (
	"net/http"
	"strconv"

	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// handleCreateEffect is POST /v1/contexts/{ctx}/effects.
func (s *Server) handleCreateEffect(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in EffectInput
	if _, err := s.decodeJSON(w, r, "effect", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.IfMatch, err = parseIfMatch(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.CreateEffect(r.Context(), ctxID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/contexts/"+ctxID+"/artifacts/"+pathEscape(out.Effect.ID))
	s.writeJSON(w, r, status, out)
}

// handleClaimEffects is POST /v1/contexts/{ctx}/effects/claim.
func (s *Server) handleClaimEffects(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in ClaimInput
	if _, err := s.decodeJSON(w, r, "claim", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.ClaimEffects(r.Context(), ctxID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// handleCompleteEffect is POST /v1/contexts/{ctx}/effects/{id}/complete.
func (s *Server) handleCompleteEffect(w http.ResponseWriter, r *http.Request) {
	ctxID, id, ok := s.effectParams(w, r)
	if !ok {
		return
	}
	var in CompleteInput
	if _, err := s.decodeJSON(w, r, "complete", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.CompleteEffect(r.Context(), ctxID, id, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// handleFailEffect is POST /v1/contexts/{ctx}/effects/{id}/fail.
func (s *Server) handleFailEffect(w http.ResponseWriter, r *http.Request) {
	ctxID, id, ok := s.effectParams(w, r)
	if !ok {
		return
	}
	var in FailInput
	if _, err := s.decodeJSON(w, r, "fail", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.FailEffect(r.Context(), ctxID, id, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *Server) effectParams(w http.ResponseWriter, r *http.Request) (string, string, bool) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return "", "", false
	}
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return "", "", false
	}
	return ctxID, id, true
}

// handleListEffects is GET /v1/contexts/{ctx}/effects: the effects at
// main's head (or ?at=) sorted by id, with their data; ?status= keeps one
// status, where a claimed effect whose lease has expired counts as
// pending.
func (s *Server) handleListEffects(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := r.URL.Query().Get("status")
	if err := service.CheckEffectStatus(status); err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.svc.Now()
	// The answer depends on the clock, not only on the commit, but only
	// through which leases have passed: that salts the ETag (the raw time
	// would change it on every request, and no If-None-Match would ever
	// match).
	// The salt and the answer share one read of the effects.
	var all []service.EffectView
	expired := func(v *store.View) (string, error) {
		var err error
		all, err = service.EffectsAt(v)
		return strconv.Itoa(service.ExpiredLeases(all, now)), err
	}
	s.readViewSalted(w, r, expired, func(v *store.View) (any, error) {
		items, more, err := service.ListEffectsIn(all, status, cursor, limit, now)
		if err != nil {
			return nil, err
		}
		out := page[EffectView]{Commit: &v.Commit.ID, Items: items}
		if more {
			out.NextCursor = encodeCursor(items[limit-1].ID)
		}
		return out, nil
	})
}
