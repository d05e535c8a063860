package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// handleGetModelCall is GET /v1/contexts/{ctx}/model-calls/{hash}: the
// recorded response of the request with that hash at ?at=, or 404. A record
// whose request does not hash to its key is a 409, never an answer.
func (s *Server) handleGetModelCall(w http.ResponseWriter, r *http.Request) {
	raw, err := urlParam(r, "hash")
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
	id := service.ModelCallID(want)
	s.readView(w, r, func(v *store.View) (any, error) {
		meta := v.State.Artifact(id)
		if meta == nil {
			return nil, errorf(CodeNotFound, "no model call with request hash %s at commit %s", want, v.Commit.ID.Short())
		}
		if meta.Type != "model_call" {
			return nil, errorf(CodeConflict, "artifact %q has type %q, not model_call", id, meta.Type)
		}
		a, wrote, err := s.st.ArtifactAt(r.Context(), ctxID, v.Commit, id)
		if err != nil {
			return nil, err
		}
		var rec struct {
			Model       string          `json:"model"`
			RequestHash string          `json:"request_hash"`
			Request     json.RawMessage `json:"request"`
			Response    json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(a.Data, &rec); err != nil {
			return nil, errorf(CodeConflict, "model call %q is not a record: %v", id, err)
		}
		got, err := service.ModelCallRequestHash(rec.Request)
		if err != nil || got != want || rec.RequestHash != want.String() {
			return nil, errorf(CodeConflict, "model call %q does not record a request hashing to %s; it cannot be replayed", id, want)
		}
		if rec.Response == nil {
			return nil, errorf(CodeConflict, "model call %q records no response", id)
		}
		return ModelCallView{RequestHash: want, Artifact: id, Model: rec.Model, Request: rec.Request, Response: rec.Response,
			WrittenIn: wrote, Commit: v.Commit.ID}, nil
	})
}
