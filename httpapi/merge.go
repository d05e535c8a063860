package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// mergeRequest is the body of POST /v1/contexts/{ctx}/merge.
type mergeRequest struct {
	Ours        string                       `json:"ours"`
	Theirs      string                       `json:"theirs"`
	Resolutions map[string]replay.Resolution `json:"resolutions"`
	Author      string                       `json:"author"`
	Message     string                       `json:"message"`
}

// MergeView is the answer to a merge.
type MergeView struct {
	Kind   replay.MergeKind `json:"kind"`
	Base   string           `json:"base"`
	Ours   string           `json:"ours"`
	Theirs string           `json:"theirs"`
	// Commit is ours' head after the merge.
	Commit      CommitView        `json:"commit"`
	ContextHash string            `json:"context_hash"`
	Ops         int               `json:"ops"`
	Resolved    []replay.Conflict `json:"resolved"`
	Unused      []string          `json:"unused,omitempty"`
}

// handleMerge is POST /v1/contexts/{ctx}/merge: a three-way merge of
// theirs (branch or commit) into branch ours (default main). Conflicts are
// all reported at once (409 merge-conflict, nothing written) and may be
// settled by resolutions keyed like the conflicts: {"take":"ours|theirs"}
// or {"value":{...}} (new data for an artifact, attrs for an edge).
// 201 when a merge commit was written, 200 for up_to_date and fast_forward.
func (s *Server) handleMerge(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var in mergeRequest
	doc, err := s.decodeJSON(w, r, "merge", &in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.Ours == "" {
		in.Ours = store.DefaultBranch
	}
	for _, p := range [][2]string{{"/ours", in.Ours}, {"/theirs", in.Theirs}} {
		if err := refParam(p[0][1:], p[1]); err != nil {
			s.writeError(w, r, pointTo(err, p[0]))
			return
		}
	}
	if err := s.checkResolutions(r.Context(), ctxID, &in, doc); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.st.Merge(r.Context(), ctxID, in.Ours, in.Theirs, in.Resolutions, in.Author, in.Message)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MergeView{Kind: res.Kind, Base: res.Base.String(), Ours: res.Ours.String(), Theirs: res.Theirs.String(),
		Commit: commitView(res.Commit), ContextHash: res.Commit.ContextHash.String(), Ops: len(res.Ops),
		Resolved: nonNil(res.Resolved), Unused: res.Unused}
	status := http.StatusOK
	if res.Kind == replay.MergeThreeWay {
		status = http.StatusCreated
		s.countWrite(false)
	}
	s.writeJSON(w, r, status, out)
}

// checkResolutions holds value resolutions of artifacts to the client's
// rules: the data must match its type's schema, and no value may become a
// fetch_verdict (only the gate writes verdicts). Take-resolutions copy a
// version one side already has and need no check.
func (s *Server) checkResolutions(ctx context.Context, ctxID string, in *mergeRequest, doc any) error {
	for key, res := range in.Resolutions {
		ptr := "/resolutions/" + escapePointer(key)
		if res.Take != "" && len(res.Value) > 0 {
			return &Error{Code: CodeValidation, Detail: "a resolution takes a side or gives a value, not both",
				Errors: []FieldError{{Pointer: ptr, Rule: "oneOf", Detail: "take or value"}}}
		}
		if len(res.Value) == 0 || strings.HasPrefix(key, "edge:") || strings.HasPrefix(key, "cycle:") {
			continue
		}
		typ := res.Type
		if typ == "" {
			// The merged version keeps ours' type, else theirs'.
			for _, ref := range []string{in.Ours, in.Theirs} {
				c, err := s.st.Resolve(ctx, ctxID, ref)
				if err != nil {
					return err
				}
				a, _, err := s.st.ArtifactAt(ctx, ctxID, c, key)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				typ = a.Type
				break
			}
		}
		if typ == TypeFetchVerdict || gateOwned[typ] != "" {
			return &Error{Code: CodeReservedType, Detail: fmt.Sprintf("a merge resolution cannot write a %s value (only the gate writes one): take ours or theirs", typ),
				Errors: []FieldError{{Pointer: ptr + "/value", Rule: "reserved", Detail: "gate output"}}}
		}
		if typ != "" {
			if err := s.types.validate(typ, member(doc, "resolutions", key, "value"), ptr+"/value"); err != nil {
				return err
			}
		}
	}
	return nil
}
