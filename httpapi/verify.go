package httpapi

import (
	"net/http"
)

// handleVerify is POST /v1/contexts/{ctx}/verify.
func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in VerifyInput
	if _, err := s.decodeJSON(w, r, "verify", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.Verify(r.Context(), ctxID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
