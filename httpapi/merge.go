package httpapi

import (
	"net/http"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/service"
)

// mergeRequest is the body of POST /v1/contexts/{ctx}/merge.
type mergeRequest = service.MergeInput

// MergeView is the answer to a merge.
type MergeView struct {
	Kind replay.MergeKind `json:"kind"`
	Base string           `json:"base"`
	// Bases lists every merge base, Base first, when there are several
	// (a criss-cross); absent when there is one.
	Bases []string `json:"bases,omitempty"`
	// BasesAncestor is the merge base of Bases, when there are several
	// and they have one: what they disagree on was merged against their
	// virtual base, merged from them against it.
	BasesAncestor string `json:"bases_ancestor,omitempty"`
	Ours          string `json:"ours"`
	Theirs        string `json:"theirs"`
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
	_, err = s.decodeJSON(w, r, "merge", &in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.IfMatch, err = parseIfMatch(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.Merge(r.Context(), ctxID, in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MergeView{Kind: res.Kind, Base: res.Base.String(), Ours: res.Ours.String(), Theirs: res.Theirs.String(),
		Commit: commitView(res.Commit), ContextHash: res.Commit.ContextHash.String(), Ops: len(res.Ops),
		Resolved: nonNil(res.Resolved), Unused: res.Unused}
	for _, b := range res.Bases {
		out.Bases = append(out.Bases, b.String())
	}
	if res.BasesAncestor != nil {
		out.BasesAncestor = res.BasesAncestor.String()
	}
	status := http.StatusOK
	if res.Kind == replay.MergeThreeWay {
		status = http.StatusCreated
	}
	s.writeJSON(w, r, status, out)
}
