package httpapi

import (
	"context"
	"net/http"

	"github.com/artifactd/artifactd/hashing"
)

// handlePutArtifact is POST /v1/contexts/{ctx}/artifacts.
func (s *Server) handlePutArtifact(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in ArtifactInput
	doc, err := s.decodeJSON(w, r, "artifact", &in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	parent, err := parseParent(r, in.Parent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := s.svc.PutDecoded(r.Context(), ctxID, &in, member(doc, "data"), parent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if out.Noop {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/contexts/"+ctxID+"/artifacts/"+pathEscape(out.Artifact.ID))
	s.writeJSON(w, r, status, out)
}

// handleCommit is POST /v1/contexts/{ctx}/commits.
func (s *Server) handleCommit(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in CommitInput
	doc, err := s.decodeJSON(w, r, "commit", &in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	parent, err := parseParent(r, in.Parent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	docs := make([]any, len(in.Ops))
	for i := range in.Ops {
		docs[i] = member(doc, "ops", i, "artifact", "data")
	}
	out, err := s.svc.CommitDecoded(r.Context(), ctxID, &in, docs, parent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if out.Noop {
		status = http.StatusOK
	}
	s.writeJSON(w, r, status, out)
}

// serveRecord decodes a request body of type In (checked against the
// request schema named schema) and the If-Match header (set on it by
// ifMatch), passes it to record and answers 201 with
// the artifact's Location, or 200 when the write was a no-op.
func serveRecord[In, Out any](s *Server, w http.ResponseWriter, r *http.Request, schema string, record func(context.Context, string, In) (Out, error), ifMatch func(*In, *hashing.Digest), written func(Out) *ArtifactWrite) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in In
	if _, err := s.decodeJSON(w, r, schema, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	head, err := parseIfMatch(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ifMatch(&in, head)
	out, err := record(r.Context(), ctxID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	aw := written(out)
	status := http.StatusCreated
	if aw.Noop {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/contexts/"+ctxID+"/artifacts/"+pathEscape(aw.Artifact.ID))
	s.writeJSON(w, r, status, out)
}
