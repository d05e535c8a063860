package httpapi

import (
	"net/http"
)

// handleFetch is POST /v1/contexts/{ctx}/fetches.
func (s *Server) handleFetch(w http.ResponseWriter, r *http.Request) {
	serveRecord(s, w, r, "fetch", s.svc.RecordFetch, func(fw *FetchWrite) *ArtifactWrite { return &fw.ArtifactWrite })
}
