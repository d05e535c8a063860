package graph

import "slices"

// AnswerEval is the structural evaluation of one answer. Sources counts
// the distinct source artifacts among its dependency ancestors (role
// source or fetch_verdict, whatever their status), ConfirmedSources the
// confirmed ones (a confirmed fetch_verdict is a RETRIEVED one). An
// answer is Supported when it is itself confirmed and ConfirmedSources >
// 0: a quarantined answer is never supported, however many confirmed
// sources it also rests on.
type AnswerEval struct {
	ID               string `json:"id"`
	Status           Status `json:"status"`
	Sources          int    `json:"sources"`
	ConfirmedSources int    `json:"confirmed_sources"`
	Supported        bool   `json:"supported"`
}

// Evaluation is a structural evaluation of a state: how well its answers
// rest on confirmed sources and how much of it is quarantined. Shares are
// in [0, 1] and 0 when there is nothing to divide by. Lists are sorted by
// id and never nil.
type Evaluation struct {
	Artifacts        int     `json:"artifacts"`
	Quarantined      int     `json:"quarantined"`
	QuarantinedShare float64 `json:"quarantined_share"`
	PoisonRoots      int     `json:"poison_roots"`

	Answers              []AnswerEval `json:"answers"`
	SupportedAnswers     int          `json:"supported_answers"`
	SupportedShare       float64      `json:"supported_share"`
	MeanSourcesPerAnswer float64      `json:"mean_sources_per_answer"`
	UnsupportedAnswers   []string     `json:"unsupported_answers"`

	// DanglingClaims are claims with no dependency edge: they rest on
	// nothing.
	DanglingClaims []string `json:"dangling_claims"`
}

// Evaluate is EvaluateWith using the definitions in force at s.
func Evaluate(s *State, trust *TrustReport) Evaluation {
	return EvaluateWith(s, trust, nil)
}

// EvaluateWith evaluates the artifacts of type answer and claim of s.
// trust must be the report of s (when nil it is computed with
// RoleBase(roleOf, nil)); roleOf (s.RoleOf when nil) tells which types
// are sources. It walks the ancestors of each answer, and passes once
// over the artifacts and once over the edges.
func EvaluateWith(s *State, trust *TrustReport, roleOf func(typ string) (Role, bool)) Evaluation {
	if roleOf == nil {
		roleOf = s.RoleOf
	}
	if trust == nil {
		trust = ComputeTrust(s, RoleBase(roleOf, nil))
	}
	ev := Evaluation{
		Artifacts:          s.nArt,
		Quarantined:        trust.BlastRadius,
		PoisonRoots:        len(trust.PoisonRoots),
		Answers:            []AnswerEval{},
		UnsupportedAnswers: []string{},
		DanglingClaims:     []string{},
	}
	if ev.Artifacts > 0 {
		ev.QuarantinedShare = float64(ev.Quarantined) / float64(ev.Artifacts)
	}
	isSource := func(a *Artifact) bool {
		r, ok := roleOf(a.Type)
		return ok && (r == RoleSource || r == RoleFetchVerdict)
	}
	// One pass over the artifacts for the claims and answers, and one
	// over the edges for the claims that depend on something: a state
	// read through its map reads each once, where a lookup of every
	// artifact and of every claim's edges read the map a million times.
	claims := map[string]bool{}
	var answers []string
	s.RangeArtifacts(func(a *Artifact) bool {
		switch a.Type {
		case "claim":
			claims[a.ID] = true
		case "answer":
			answers = append(answers, a.ID)
		}
		return true
	})
	if len(claims) > 0 {
		s.RangeEdges(func(e *Edge) bool {
			if s.rels.Depends(e.Rel) {
				delete(claims, e.From)
			}
			return true
		})
	}
	for id := range claims {
		ev.DanglingClaims = append(ev.DanglingClaims, id)
	}
	slices.Sort(ev.DanglingClaims)
	slices.Sort(answers)
	total := 0
	for _, id := range answers {
		ae := AnswerEval{ID: id, Status: trust.Trust(id).Status}
		for _, anc := range Ancestors(s, id, 0) {
			if !isSource(s.art(anc)) {
				continue
			}
			ae.Sources++
			if trust.Trust(anc).Status == StatusConfirmed {
				ae.ConfirmedSources++
			}
		}
		ae.Supported = ae.Status == StatusConfirmed && ae.ConfirmedSources > 0
		total += ae.Sources
		if ae.Supported {
			ev.SupportedAnswers++
		} else {
			ev.UnsupportedAnswers = append(ev.UnsupportedAnswers, id)
		}
		ev.Answers = append(ev.Answers, ae)
	}
	if n := len(ev.Answers); n > 0 {
		ev.SupportedShare = float64(ev.SupportedAnswers) / float64(n)
		ev.MeanSourcesPerAnswer = float64(total) / float64(n)
	}
	slices.Sort(ev.UnsupportedAnswers)
	return ev
}
