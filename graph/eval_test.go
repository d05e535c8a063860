package graph

import (
	"encoding/json"
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
