package graph

import (
	"iter"
	"slices"
	"sync"
)

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
	j := judge{s: s, roleOf: roleOf, status: func(id string) Status { return trust.Trust(id).Status }}
	return j.whole(trust.BlastRadius, len(trust.PoisonRoots))
}

// EvaluateIndexed is Evaluate judged by t, the trust index that follows
// s, with the definitions in force at s: the same evaluation as with
// t's report, without building the report (which passes over every
// artifact): the counts are t's summary, and an answer's sources are
// judged by a lookup each.
func EvaluateIndexed(s *State, t *TrustIndex) Evaluation {
	sum := t.Summary()
	return indexJudge(s, t).whole(sum.Quarantined, sum.PoisonRoots)
}

// EvaluateAfter is EvaluateIndexed of s and t derived from prev, the
// evaluation of another state of the same context, and touched: every
// artifact that differs between the two states (added, removed or
// changed) and the source of every edge that differs (added, removed or
// with other attributes), in any order, repeats allowed. The dangling
// claims and the answers are those of prev, judged again for the touched
// artifacts only; each answer's sources are walked again, their trust or
// their type's role may have moved. It costs what touched names plus
// those walks: no pass over s.
//
// The two states may define different types: a type's definition only
// moves which artifacts are sources, and the walks judge that again. They
// must define each relation alike, or touched must name every claim with
// an edge of a relation defined otherwise: along one history a relation's
// dependency never changes (defs.go), but two branches, or a branch reset
// and written again, may define one name with another dependency, which
// moves the claims resting on its edges with no change to them.
func EvaluateAfter(prev Evaluation, s *State, t *TrustIndex, touched []string) Evaluation {
	sum := t.Summary()
	j := indexJudge(s, t)
	dangling := make(map[string]bool, len(prev.DanglingClaims))
	for _, id := range prev.DanglingClaims {
		dangling[id] = true
	}
	answers := make(map[string]bool, len(prev.Answers))
	for _, a := range prev.Answers {
		answers[a.ID] = true
	}
	for _, id := range touched {
		a := s.art(id)
		delete(dangling, id)
		delete(answers, id)
		switch {
		case a == nil:
		case a.Type == "claim" && !j.dependsOnSomething(id):
			dangling[id] = true
		case a.Type == "answer":
			answers[id] = true
		}
	}
	ev := j.start(sum.Quarantined, sum.PoisonRoots)
	for id := range dangling {
		ev.DanglingClaims = append(ev.DanglingClaims, id)
	}
	slices.Sort(ev.DanglingClaims)
	ids := make([]string, 0, len(answers))
	for id := range answers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	j.answers(&ev, ids)
	return ev
}

// judge is what an evaluation reads: the state, which types are sources,
// and each artifact's trust status.
type judge struct {
	s      *State
	roleOf func(typ string) (Role, bool)
	status func(id string) Status
}

// indexJudge judges s by its trust index t with the definitions in
// force at s. An artifact the index does not list is confirmed (the
// index of a state read through its map lists only what is not), as a
// report judges one.
func indexJudge(s *State, t *TrustIndex) judge {
	return judge{s: s, roleOf: s.RoleOf, status: func(id string) Status {
		if st := t.Status(id); st != "" {
			return st
		}
		return StatusConfirmed
	}}
}

// start returns an evaluation of j's state with its counts and empty
// lists.
func (j judge) start(quarantined, poisonRoots int) Evaluation {
	ev := Evaluation{
		Artifacts:          j.s.nArt,
		Quarantined:        quarantined,
		PoisonRoots:        poisonRoots,
		Answers:            []AnswerEval{},
		UnsupportedAnswers: []string{},
		DanglingClaims:     []string{},
	}
	if ev.Artifacts > 0 {
		ev.QuarantinedShare = float64(ev.Quarantined) / float64(ev.Artifacts)
	}
	return ev
}

// whole evaluates j's state with one pass over its artifacts for the
// claims and answers, and one over its edges for the claims that depend
// on something: a state read through its map reads each once, where a
// lookup of every artifact and of every claim's edges read the map a
// million times.
func (j judge) whole(quarantined, poisonRoots int) Evaluation {
	s := j.s
	if _, ok := s.ranger(); ok {
		return j.wholeInOrder(quarantined, poisonRoots)
	}
	ev := j.start(quarantined, poisonRoots)
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
	j.answers(&ev, answers)
	return ev
}

// wholeInOrder is whole over a source that reads in key order (a state
// map): the artifacts in id order and the edges in key order, whose
// source ids come in that same order, are walked side by side, so each
// claim meets the edges leaving it as the walk passes them — no set of
// every claim (a million strings in a map, at a million claims), and no
// edge read before the first claim. Over a source that splits its
// artifacts (Splitter), two workers walk the two halves of that order.
func (j judge) wholeInOrder(quarantined, poisonRoots int) Evaluation {
	s := j.s
	ev := j.start(quarantined, poisonRoots)
	arts, mid := s.ArtifactHalves()
	edges := [2]iter.Seq[*Edge]{s.EdgesAfter(EdgeKey{}), func(func(*Edge) bool) {}}
	if mid != "" {
		edges = s.EdgesAround(mid)
	}
	var dangling, answers [2][]string
	var wg sync.WaitGroup
	for w := range arts {
		wg.Go(func() { dangling[w], answers[w] = j.claimsInOrder(arts[w], edges[w]) })
	}
	wg.Wait()
	ev.DanglingClaims = append(append(ev.DanglingClaims, dangling[0]...), dangling[1]...)
	j.answers(&ev, append(answers[0], answers[1]...))
	return ev
}

// claimsInOrder walks arts, artifacts in id order, and edges, the edges
// leaving them in key order, side by side: it returns the claims no edge
// of a dependency relation leaves, and the answers, in id order.
func (j judge) claimsInOrder(arts iter.Seq[*Artifact], edges iter.Seq[*Edge]) (dangling, answers []string) {
	var next func() (*Edge, bool)
	var e *Edge
	more := true
	for a := range arts {
		switch a.Type {
		case "answer":
			answers = append(answers, a.ID)
			continue
		case "claim":
		default:
			continue
		}
		if next == nil {
			pull, stop := iter.Pull(edges)
			defer stop()
			next = pull
			e, more = next()
		}
		for more && e.From < a.ID {
			e, more = next()
		}
		depends := false
		for more && e.From == a.ID {
			depends = depends || j.s.rels.Depends(e.Rel)
			e, more = next()
		}
		if !depends {
			dangling = append(dangling, a.ID)
		}
	}
	return dangling, answers
}

// dependsOnSomething reports whether an edge of a dependency relation
// leaves id.
func (j judge) dependsOnSomething(id string) bool {
	for k := range j.s.outOf(id).all() {
		if j.s.rels.Depends(k.Rel) {
			return true
		}
	}
	return false
}

// answers judges each of ids, answers of j's state in order, by walking
// its ancestors for sources, and fills ev's answers, shares and
// unsupported list.
func (j judge) answers(ev *Evaluation, ids []string) {
	total := 0
	for _, id := range ids {
		ae := AnswerEval{ID: id, Status: j.status(id)}
		for _, anc := range Ancestors(j.s, id, 0) {
			if !j.isSource(j.s.art(anc)) {
				continue
			}
			ae.Sources++
			if j.status(anc) == StatusConfirmed {
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
}

// isSource reports whether a is of a source type: a source or a fetch
// verdict.
func (j judge) isSource(a *Artifact) bool {
	r, ok := j.roleOf(a.Type)
	return ok && (r == RoleSource || r == RoleFetchVerdict)
}
