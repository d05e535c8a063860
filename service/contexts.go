package service

import (
	"context"
	"errors"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/store"
)

// EnsureContext creates context id with quarantine mode quarantine
// (enforce when "") unless it exists: created says whether this call made
// it. A context that exists with the same mode is answered as it is (also
// when another request created it meanwhile); one with another mode is an
// exists error pointing at /quarantine, and nothing is changed. Re-running
// an agent that starts with this call never fails on "exists".
func (s *Service) EnsureContext(ctx context.Context, id, quarantine string) (info store.ContextInfo, created bool, err error) {
	if quarantine == "" {
		quarantine = store.ModeEnforce
	}
	info, err = s.st.GetContext(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		created = true
		info, err = s.st.CreateContext(ctx, id, quarantine)
		if errors.Is(err, store.ErrExists) { // created meanwhile by another request
			created = false
			info, err = s.st.GetContext(ctx, id)
		}
	}
	if err != nil {
		return store.ContextInfo{}, false, err
	}
	if info.Quarantine != quarantine {
		return store.ContextInfo{}, false, &fault.Error{Code: fault.Exists,
			Detail: "context " + quoteJSON(id) + " exists with quarantine " + quoteJSON(info.Quarantine) + "; nothing was changed",
			Errors: []fault.FieldError{{Pointer: "/quarantine", Rule: "matches_existing", Detail: "the existing context has quarantine " + info.Quarantine}}}
	}
	return info, created, nil
}
