package httpapi

import (
	"net/http"

	"github.com/artifactd/artifactd/hashing"
)

// handleToolResult is POST /v1/contexts/{ctx}/tool-results.
func (s *Server) handleToolResult(w http.ResponseWriter, r *http.Request) {
	serveRecord(s, w, r, "tool-result", s.svc.RecordToolResult, func(in *ToolResultInput, h *hashing.Digest) { in.IfMatch = h },
		func(aw *ArtifactWrite) *ArtifactWrite { return aw })
}
