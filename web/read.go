package web

import (
	"errors"
	"net/http"

	"github.com/artifactd/artifactd/store"
)

// Error makes a problem usable as an error inside a store.Read callback.
func (p *problem) Error() string {
	if p.Err != nil {
		return string(p.Code) + ": " + p.Detail + ": " + p.Err.Error()
	}
	return string(p.Code) + ": " + p.Detail
}

// Unwrap returns the cause.
func (p *problem) Unwrap() error { return p.Err }

// read looks up context ctxID and calls fn with a view of the state at the
// request's ?at= (the main head when absent). fn runs under the store's
// read lock for a branch head: it must only collect what the page needs,
// never render or do slow work. It returns false after writing the problem
// response when the context or the commit does not exist, or fn failed
// (fn may return a *problem to choose what the user sees).
func (s *server) read(w http.ResponseWriter, r *http.Request, ctxID string, fn func(v *store.View) error) (store.ContextInfo, bool) {
	return s.readOr(w, r, ctxID, nil, fn)
}

// readOr is read, except that an error of fn that handled accepts is left
// to the caller: nothing is written and the result is false.
func (s *server) readOr(w http.ResponseWriter, r *http.Request, ctxID string, handled func(error) bool, fn func(v *store.View) error) (store.ContextInfo, bool) {
	info, err := s.store.GetContext(r.Context(), ctxID)
	if err != nil {
		s.problem(w, r, storeProblem(err, "context"))
		return info, false
	}
	at := r.URL.Query().Get("at")
	var fnErr error
	err = s.store.Read(r.Context(), ctxID, at, func(v *store.View) error {
		fnErr = fn(v)
		return nil
	})
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit or branch "+quoteRef(at)+" in this context"))
		return info, false
	}
	if fnErr != nil {
		if handled != nil && handled(fnErr) {
			return info, false
		}
		var p *problem
		if errors.As(fnErr, &p) {
			s.problem(w, r, p)
		} else {
			s.problem(w, r, storeProblem(fnErr, "artifact"))
		}
		return info, false
	}
	return info, true
}

// quoteRef names a ref for a message, bounded in length.
func quoteRef(ref string) string {
	if ref == "" {
		return "main"
	}
	if r := []rune(ref); len(r) > 80 {
		ref = string(r[:80]) + "…"
	}
	return "“" + ref + "”"
}
