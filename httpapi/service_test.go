package httpapi

import "context"

// The service layer's writes, as the tests of this package call them on
// the server they run.

func (s *Server) Types() *Registry { return s.svc.Types() }

func (s *Server) RecordFetch(ctx context.Context, ctxID string, in FetchInput) (*FetchWrite, error) {
	return s.svc.RecordFetch(ctx, ctxID, in)
}

func (s *Server) GatePutArtifact(ctx context.Context, ctxID string, in ArtifactInput) (*ArtifactWrite, error) {
	return s.svc.GatePutArtifact(ctx, ctxID, in)
}
