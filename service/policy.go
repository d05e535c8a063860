package service

import (
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// QuarantineReport is GET /v1/contexts/{ctx}/quarantine.
type QuarantineReport struct {
	Commit      hashing.Digest     `json:"commit"`
	ContextHash hashing.Digest     `json:"context_hash"`
	PoisonRoots []graph.Root       `json:"poison_roots"`
	Quarantined []QuarantinedView  `json:"quarantined"`
	BlastRadius int                `json:"blast_radius"`
	Summary     graph.TrustSummary `json:"summary"`
}

// QuarantinedView is one quarantined artifact: the poison roots it rests
// on and one shortest path to a root.
type QuarantinedView struct {
	ID            string   `json:"id"`
	Roots         []string `json:"roots"`
	Path          []string `json:"path"`
	PathTruncated bool     `json:"path_truncated,omitempty"`
}

// QuarantineOf is the trust report of a view as GET .../quarantine and
// `artifactd quarantine --json` show it.
func QuarantineOf(v *store.View) QuarantineReport {
	rep := v.Trust.Report(v.State)
	out := QuarantineReport{
		Commit: v.Commit.ID, ContextHash: v.Commit.ContextHash, PoisonRoots: nonNil(rep.PoisonRoots),
		Quarantined: make([]QuarantinedView, len(rep.Quarantined)), BlastRadius: rep.BlastRadius, Summary: v.Trust.Summary(),
	}
	for i, t := range rep.Quarantined {
		out.Quarantined[i] = QuarantinedView{ID: t.ID, Roots: nonNil(t.Roots), Path: nonNil(t.Path), PathTruncated: t.PathTruncated}
	}
	return out
}
