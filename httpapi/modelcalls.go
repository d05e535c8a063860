package httpapi

import (
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// handleGetModelCall is GET /v1/contexts/{ctx}/model-calls/{request_hash}: the
// recorded response of the request with that hash at ?at=, or 404. A record
// whose request does not hash to its key is a 409, never an answer.
func (s *Server) handleGetModelCall(w http.ResponseWriter, r *http.Request) {
	raw, err := urlParam(r, "request_hash")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !strings.HasPrefix(raw, "sha256:") {
		raw = "sha256:" + raw
	}
	want, err := hashing.ParseDigest(raw)
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeInvalidQuery, Detail: err.Error(),
			Errors: []FieldError{{Parameter: "request_hash", Rule: "digest", Detail: "want sha256:<64 lowercase hex digits> (or the bare hex)"}}})
		return
	}
	ctxID, _ := ctxParam(r)
	s.readView(w, r, func(v *store.View) (any, error) {
		return s.svc.ModelCallAt(r.Context(), ctxID, v, want)
	})
}
