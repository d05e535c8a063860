package graph

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestEvaluatePoisonPlan(t *testing.T) {
	s, _ := tqPlanObserve(t, tqLoadPlan(t))
	// s10 rests on two confirmed sources and on the failed fetch: it is
	// quarantined, so it is not supported, however many confirmed sources
	// it also has. A claim resting on nothing, and an answer resting only on the
	// placeholder claim s3 (so only on the failed fetch).
	tqApply(t, s, tqPut("c0", "claim"), tqPut("a2", "answer"), tqLink("a2", "supported_by", "s3"),
		tqPut("q", "question"), tqPut("a3", "answer"), tqLink("a3", "responds_to", "q"),
		tqPut("a4", "answer"), tqLink("a4", "supported_by", "q"))
	ev := Evaluate(s, ComputeTrust(s, tqBase))
	got, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"artifacts":15,"quarantined":6,"quarantined_share":0.4,"poison_roots":1,` +
		`"answers":[` +
		`{"id":"a2","status":"quarantined","sources":1,"confirmed_sources":0,"supported":false},` +
		`{"id":"a3","status":"confirmed","sources":0,"confirmed_sources":0,"supported":false},` +
		`{"id":"a4","status":"confirmed","sources":1,"confirmed_sources":1,"supported":true},` +
		`{"id":"s10","status":"quarantined","sources":3,"confirmed_sources":2,"supported":false}],` +
		`"supported_answers":1,"supported_share":0.25,"mean_sources_per_answer":1.25,` +
		`"unsupported_answers":["a2","a3","s10"],"dangling_claims":["c0"]}`
	if string(got) != want {
		t.Errorf("evaluation\n got %s\nwant %s", got, want)
	}
	// Without a report, the same trust is computed.
	if again := Evaluate(s, nil); !slices.Equal(again.UnsupportedAnswers, ev.UnsupportedAnswers) || again.Quarantined != 6 {
		t.Errorf("nil report: %+v", again)
	}
	// With fetch verdicts as plain derived types only the question
	// supports an answer.
	noSources := func(typ string) (Role, bool) {
		if typ == "fetch_verdict" {
			return RoleDerived, true
		}
		return BuiltinRoles(typ)
	}
	if ev := EvaluateWith(s, nil, noSources); ev.SupportedAnswers != 1 || ev.Answers[2].ConfirmedSources != 1 || ev.PoisonRoots != 0 {
		t.Errorf("fetch verdicts as derived: %+v", ev)
	}
}

func TestEvaluateEmpty(t *testing.T) {
	got, err := json.Marshal(Evaluate(NewState(nil), nil))
	if err != nil {
		t.Fatal(err) // a NaN share would fail here
	}
	want := `{"artifacts":0,"quarantined":0,"quarantined_share":0,"poison_roots":0,"answers":[],"supported_answers":0,` +
		`"supported_share":0,"mean_sources_per_answer":0,"unsupported_answers":[],"dangling_claims":[]}`
	if string(got) != want {
		t.Errorf("got %s", got)
	}
}

// TestEvaluateMatchesOracle: the evaluation, which passes once over the
// artifacts and once over the edges, equals the plain algorithm's
// (evaluateOracle: every id in order, each looked up, each claim's
// dependencies asked) on the fork generator's states — claims, answers
// and sources linked by mixed relations, some not dependencies — whole,
// over a source, and with a fork above that.
func TestEvaluateMatchesOracle(t *testing.T) {
	dangling, answers := 0, 0
	for seed := range uint64(40) {
		s, lz, _ := forkGenState(t, seed)
		f := lz.Fork()
		r := rand.New(rand.NewPCG(seed, 3))
		ops := forkOps(r, s, forkGenIDs, false)
		if _, err := f.ApplyOps(ops); err != nil {
			f, ops = lz, nil
		}
		// Over a source that reads in key order, the claims meet their
		// edges in a walk side by side (wholeInOrder).
		snap := wholeCopy(s)
		rsrc := &rangingSource{stateSource: newStateSource(snap)}
		ranged, err := NewStateOver(s.ruleset, rsrc, Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
		if err != nil {
			t.Fatal(err)
		}
		rf := ranged.Fork()
		if _, err := rf.ApplyOps(ops); err != nil {
			t.Fatal(err)
		}
		// Over a source that splits its artifacts, two workers walk the
		// two halves, each side by side with its half of the edges.
		ssrc := &splittingSource{rangingSource: &rangingSource{stateSource: newStateSource(snap)}}
		if ids := snap.ArtifactIDs(); len(ids) > 0 {
			ssrc.mid = ids[r.IntN(len(ids))]
		}
		split, err := NewStateOver(s.ruleset, ssrc, Counts{snap.nArt, snap.nTomb, snap.nEdge}, definitionsOf(snap), snap.acc.Clone())
		if err != nil {
			t.Fatal(err)
		}
		sf := split.Fork()
		if _, err := sf.ApplyOps(ops); err != nil {
			t.Fatal(err)
		}
		for name, st := range map[string]*State{"whole": s, "over a source": lz, "a fork over a source": f,
			"over a ranging source": ranged, "a fork over a ranging source": rf,
			"over a splitting source": split, "a fork over a splitting source": sf} {
			got, want := Evaluate(st, nil), evaluateOracle(st, ComputeTrust(st, RoleBase(st.RoleOf, nil)))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, %s:\n got %+v\nwant %+v", seed, name, got, want)
			}
			dangling += len(got.DanglingClaims)
			answers += len(got.Answers)
		}
		if snap.nArt > 0 && rsrc.ranged.Load() == 0 {
			t.Fatalf("seed %d: the states over a ranging source were not walked in key order", seed)
		}
	}
	if dangling == 0 || answers == 0 {
		t.Fatalf("the states had %d dangling claims and %d answers: the test needs both", dangling, answers)
	}
}

// evaluateOracle is EvaluateWith as first written, for the definitions in
// force at s: every id in order, each artifact looked up, each claim's
// dependencies asked.
func evaluateOracle(s *State, trust *TrustReport) Evaluation {
	ev := Evaluation{Artifacts: s.nArt, Quarantined: trust.BlastRadius, PoisonRoots: len(trust.PoisonRoots),
		Answers: []AnswerEval{}, UnsupportedAnswers: []string{}, DanglingClaims: []string{}}
	if ev.Artifacts > 0 {
		ev.QuarantinedShare = float64(ev.Quarantined) / float64(ev.Artifacts)
	}
	total := 0
	for _, id := range s.ArtifactIDs() {
		a := s.Artifact(id)
		switch a.Type {
		case "claim":
			if len(s.DependsOn(id)) == 0 {
				ev.DanglingClaims = append(ev.DanglingClaims, id)
			}
		case "answer":
			ae := AnswerEval{ID: id, Status: trust.Trust(id).Status}
			for _, anc := range Ancestors(s, id, 0) {
				if r, ok := s.RoleOf(s.Artifact(anc).Type); !ok || (r != RoleSource && r != RoleFetchVerdict) {
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
	}
	if n := len(ev.Answers); n > 0 {
		ev.SupportedShare = float64(ev.SupportedAnswers) / float64(n)
		ev.MeanSourcesPerAnswer = float64(total) / float64(n)
	}
	return ev
}

// TestEvaluateAfterMatchesOracle: along random histories (the fork
// generator's ops: claims, answers, sources and fetch verdicts, linked by
// mixed relations, links made and unmade, types changed, deletes), the
// evaluation judged by the trust index (EvaluateIndexed) and the one
// derived from the evaluation of a state one to four steps back
// (EvaluateAfter, given what differs between the two) both equal the
// plain algorithm's, for the state whole and over a source with its index
// over a source; the generator defines a user source type and a user
// dependency relation now and then, so some pairs differ in definitions.
func TestEvaluateAfterMatchesOracle(t *testing.T) {
	baseOf := func(st *State) BaseFunc { return st.Base(nil) }
	derived, moved := 0, 0
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 11))
		s := NewState(nil)
		var history []*State
		var evals []Evaluation
		for step := range 25 {
			f := s.Clone()
			if _, err := f.ApplyOps(forkOps(r, s, forkGenIDs, seed%2 == 0)); err != nil {
				continue
			}
			s = f
			idx := NewTrustIndexFor(s, baseOf)
			want := evaluateOracle(s, ComputeTrust(s, RoleBase(s.RoleOf, nil)))
			lz := overSource(t, s.Clone())
			views := map[string]struct {
				st  *State
				idx *TrustIndex
			}{"whole": {s, idx}, "over a source": {lz, overTrust(NewTrustIndexFor(lz, baseOf), baseOf)}}
			for name, v := range views {
				if got := EvaluateIndexed(v.st, v.idx); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d, %s, indexed:\n got %+v\nwant %+v", seed, step, name, got, want)
				}
				for back := 1; back <= 4 && back <= len(history); back++ {
					old := history[len(history)-back]
					touched := evalTouched(old, s)
					got := EvaluateAfter(evals[len(evals)-back], v.st, v.idx, touched)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d step %d, %s, derived from %d back (touched %v):\n got %+v\nwant %+v", seed, step, name, back, touched, got, want)
					}
					derived++
					if !slices.Equal(evals[len(evals)-back].DanglingClaims, want.DanglingClaims) ||
						!reflect.DeepEqual(evals[len(evals)-back].Answers, want.Answers) {
						moved++
					}
				}
			}
			history = append(history, s)
			evals = append(evals, want)
		}
	}
	if derived < 1000 || moved < derived/4 {
		t.Fatalf("%d evaluations derived, %d of them from one whose claims or answers differed: the test needs more", derived, moved)
	}
}

// evalTouched is what EvaluateAfter needs of two states, found by
// comparing them whole: the artifacts that differ (present on one side
// only, or with other metadata) and the sources of the edges that differ
// (present on one side only, or with other attributes).
func evalTouched(a, b *State) (touched []string) {
	seen := map[string]bool{}
	for _, id := range append(a.ArtifactIDs(), b.ArtifactIDs()...) {
		x, y := a.Artifact(id), b.Artifact(id)
		if seen[id] || x != nil && y != nil && x.Type == y.Type && x.Version == y.Version && x.ContentHash == y.ContentHash && x.ProducedBy == y.ProducedBy {
			continue
		}
		seen[id] = true
		touched = append(touched, id)
	}
	edges := func(s *State) map[EdgeKey]string {
		m := map[EdgeKey]string{}
		for _, e := range s.Edges() {
			m[e.Key()] = string(e.Attrs)
		}
		return m
	}
	ea, eb := edges(a), edges(b)
	for _, m := range []map[EdgeKey]string{ea, eb} {
		for k := range m {
			x, inA := ea[k]
			y, inB := eb[k]
			if inA != inB || x != y {
				touched = append(touched, k.From)
			}
		}
	}
	return touched
}
