package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// Blobs are raw bytes named by their SHA-256. The bytes are stored once,
// whoever sends them, but a context reads only the blobs it holds: the ones
// it uploaded (POST /v1/contexts/{ctx}/blobs) and the ones its gate outputs
// recorded (fetch bodies and texts, full tool outputs and errors) or an
// imported bundle carried. A context that does not hold a blob gets the
// same 404 whether or not another context holds it, and an upload's status
// (201 new to this context, 200 already held) depends only on the context.
// The global routes (/v1/blobs) are for admin tokens on "*".

// bodyReader remembers the error of the request body it reads, so that a
// failed upload can be told from a failed store.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// writeBlob streams a request body into the store (never whole in memory)
// and returns what was stored.
func (s *Server) writeBlob(w http.ResponseWriter, r *http.Request) (store.BlobInfo, error) {
	// The body limit's own problem would point at this very route.
	tooLarge := errorf(CodeTooLarge, "the blob exceeds %d bytes, the most one upload holds; split it, or store it elsewhere and record where", s.maxBlob)
	if r.ContentLength > s.maxBlob {
		return store.BlobInfo{}, tooLarge
	}
	body := &bodyReader{r: http.MaxBytesReader(w, r.Body, s.maxBlob)}
	info, err := s.st.WriteBlob(r.Context(), body)
	if err != nil && body.err != nil {
		var mbe *http.MaxBytesError
		if errors.As(body.err, &mbe) {
			return info, tooLarge
		}
		if isTimeout(body.err) {
			return info, body.err
		}
		return info, errorf(CodeMalformedJSON, "could not read the request body: %v", body.err)
	}
	return info, err
}

// handlePutContextBlob is POST /v1/contexts/{ctx}/blobs: raw bytes of any
// content type, streamed to the store by SHA-256 and held by the context
// (201, or 200 when the context holds them already).
func (s *Server) handlePutContextBlob(w http.ResponseWriter, r *http.Request) {
	ctxID, _ := ctxParam(r)
	if _, err := s.st.GetContext(r.Context(), ctxID); err != nil {
		s.writeError(w, r, err)
		return
	}
	info, err := s.writeBlob(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	added, err := s.st.AddBlobMember(r.Context(), ctxID, info.Digest)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/contexts/"+ctxID+"/blobs/"+info.Digest.String())
	s.writeJSON(w, r, status, map[string]any{"digest": info.Digest, "size": info.Size})
}

// handleGetContextBlob is GET /v1/contexts/{ctx}/blobs/{digest}: the bytes
// of a blob the context holds, streamed.
func (s *Server) handleGetContextBlob(w http.ResponseWriter, r *http.Request) {
	ctxID, _ := ctxParam(r)
	raw, err := urlParam(r, "digest")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := hashing.ParseDigest(raw)
	if err != nil {
		s.writeError(w, r, noBlob(ctxID, raw))
		return
	}
	held, err := s.st.BlobMember(r.Context(), ctxID, d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !held {
		// The same answer whether or not the context exists in another
		// sense or another context holds the bytes.
		s.writeError(w, r, noBlob(ctxID, raw))
		return
	}
	s.serveBlob(w, r, ctxID, d, "private")
}

// noBlob is the one 404 of a blob a context does not hold.
func noBlob(ctxID, raw string) error {
	return errorf(CodeNotFound, "context %s holds no blob %s (blobs are named sha256:<64 lower-case hex digits>)", quoteJSON(ctxID), quoteJSON(raw))
}

// handlePutBlob is POST /v1/blobs (admin on "*"): raw bytes stored by
// SHA-256 and held by no context (201, or 200 when already stored).
func (s *Server) handlePutBlob(w http.ResponseWriter, r *http.Request) {
	info, err := s.writeBlob(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if info.Existed {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/blobs/"+info.Digest.String())
	s.writeJSON(w, r, status, map[string]any{"digest": info.Digest, "size": info.Size})
}

// handleGetBlob is GET /v1/blobs/{digest} (admin on "*"): any stored blob.
func (s *Server) handleGetBlob(w http.ResponseWriter, r *http.Request) {
	raw, err := urlParam(r, "digest")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := hashing.ParseDigest(raw)
	if err != nil {
		s.writeError(w, r, errorf(CodeNotFound, "no blob %q (blobs are named sha256:<64 lower-case hex digits>)", raw))
		return
	}
	s.serveBlob(w, r, "", d, "private")
}

// serveBlob answers the bytes of blob d, streamed from the store: 304 for
// a matching If-None-Match, 412 for an If-Match that does not name d,
// 410 when pruned — here, or, read through
// context ctxID (empty for the global route), in the store the bundle it
// was imported from came from. The caller has checked that the request
// may read d (a context's membership). A blob that stops
// verifying after its first bytes were sent is cut short (the client sees
// fewer bytes than Content-Length) and noted as corruption.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, ctxID string, d hashing.Digest, cache string) {
	etag := `"` + d.Hex() + `"`
	cacheControl := cache + ", max-age=31536000, immutable"
	if cond := Preconditions(r, etag); cond != nil {
		// The ETag is the digest, which the client can name whether or
		// not the bytes are here: 304 (or 412 for an If-Match naming
		// another) only when they are stored, as the same request without
		// the conditions would answer 200. A pruned blob is still 410 and
		// an unknown one 404 (StatBlob reads no bytes, so the answer
		// stays cheap).
		if err := s.st.StatContextBlob(r.Context(), ctxID, d); err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", cacheControl)
		s.respondRead(w, r, etag, nil, cond)
		return
	}
	br, err := s.st.OpenContextBlob(r.Context(), ctxID, d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer br.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(br.Size(), 10))
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheControl)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, br); err != nil && !errors.Is(err, context.Canceled) && r.Context().Err() == nil {
		if errors.Is(err, store.ErrCorrupt) {
			s.st.NoteCorruption(err)
		}
		s.log.Error("blob cut short", "digest", d.String(), "err", err)
	}
}
