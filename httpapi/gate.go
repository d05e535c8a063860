package httpapi

import (
	"net/http"

	"github.com/artifactd/artifactd/hashing"
)

// handleFetch is POST /v1/contexts/{ctx}/fetches.
func (s *Server) handleFetch(w http.ResponseWriter, r *http.Request) {
	serveRecord(s, w, r, "fetch", s.svc.RecordFetch, func(in *FetchInput, h *hashing.Digest) { in.IfMatch = h },
		func(fw *FetchWrite) *ArtifactWrite { return &fw.ArtifactWrite })
}
