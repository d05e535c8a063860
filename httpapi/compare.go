package httpapi

import (
	"io"
	"net/http"

	"github.com/artifactd/artifactd/service"
)

// handleCompare is GET /v1/compare?a=CTX[@REF]&b=CTX[@REF]: are two runs
// the same, and where do they diverge. It needs read on both contexts.
// The answer is streamed: the comparison of two big runs lists every
// artifact of each.
func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var ids, refs [2]string
	for i, p := range []string{"a", "b"} {
		if q.Get(p) == "" {
			s.writeError(w, r, &Error{Code: CodeInvalidQuery, Detail: "query parameters a and b are required",
				Errors: []FieldError{{Parameter: p, Rule: "required", Detail: "want CTX or CTX@REF"}}})
			return
		}
		var err error
		if ids[i], refs[i], err = service.ParseCompareSide(p, q.Get(p)); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.authorize(r, ScopeRead, ids[i]); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	out, err := service.CompareRuns(r.Context(), s.st, ids[0], refs[0], ids[1], refs[1])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setCache(w, false) // a side may name a branch
	s.respondRead(w, r, "", jsonStream(func(w io.Writer) error { return service.WriteComparisonJSON(w, &out) }), nil)
}
