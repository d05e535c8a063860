package httpapi

import "net/http"

// secretsRequest is POST /v1/admin/secrets.
type secretsRequest struct {
	Secrets []string `json:"secrets"`
}

// SecretsWrite is the answer to POST /v1/admin/secrets: how many distinct
// values are declared. The values are never echoed back.
type SecretsWrite struct {
	Added    int `json:"added"`
	Declared int `json:"declared"`
}

// handleAddSecrets is POST /v1/admin/secrets (admin on "*"): declare
// secret values to mask by value in tool results and effect errors from
// now on (service.Service.AddSecrets).
func (s *Server) handleAddSecrets(w http.ResponseWriter, r *http.Request) {
	var in secretsRequest
	if _, err := s.decodeJSON(w, r, "secrets", &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	added, n, err := s.svc.AddSecrets(in.Secrets)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, SecretsWrite{Added: added, Declared: n})
}
