package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestRoleBase(t *testing.T) {
	custom := func(typ string) (Role, bool) {
		switch typ {
		case "paper":
			return RoleSource, true
		case "odd":
			return Role("bogus"), true
		}
		return BuiltinRoles(typ)
	}
	fetch := func(data string) *Artifact {
		return &Artifact{ID: "f", Type: "fetch_verdict", Data: json.RawMessage(data)}
	}
	tests := []struct {
		name   string
		roleOf func(string) (Role, bool)
		a      *Artifact
		ok     bool
		reason string
	}{
		{"question is a source", nil, &Artifact{Type: "question"}, true, ""},
		{"user_input is a source", nil, &Artifact{Type: "user_input"}, true, ""},
		{"claim is derived", nil, &Artifact{Type: "claim"}, true, ""},
		{"tool_error never", nil, &Artifact{Type: "tool_error"}, false, "tool_error"},
		{"unknown type", nil, &Artifact{Type: "mystery"}, false, `unknown type "mystery"`},
		{"retrieved", nil, fetch(`{"verdict":"RETRIEVED"}`), true, ""},
		{"failed with reason", nil, fetch(`{"reason":"transport.empty_body","verdict":"FAILED"}`), false, "fetch_verdict FAILED (transport.empty_body)"},
		{"unknown verdict", nil, fetch(`{"verdict":"UNKNOWN"}`), false, "fetch_verdict UNKNOWN"},
		{"lower-case is not RETRIEVED", nil, fetch(`{"verdict":"retrieved"}`), false, "fetch_verdict retrieved"},
		{"verdict not a string", nil, fetch(`{"verdict":1}`), false, "fetch_verdict without a verdict"},
		{"no data", nil, fetch(``), false, "fetch_verdict without a verdict"},
		{"malformed data", nil, fetch(`{"verdict":`), false, "fetch_verdict without a verdict"},
		{"custom source", custom, &Artifact{Type: "paper"}, true, ""},
		{"custom bad role", custom, &Artifact{Type: "odd"}, false, `type "odd" has unknown role "bogus"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := RoleBase(tc.roleOf, nil)(tc.a)
			if ok != tc.ok || reason != tc.reason {
				t.Errorf("got (%v, %q), want (%v, %q)", ok, reason, tc.ok, tc.reason)
			}
		})
	}
	t.Run("verdictOf is used", func(t *testing.T) {
		var asked string
		base := RoleBase(nil, func(a *Artifact) (string, string) { asked = a.ID; return "RETRIEVED", "" })
		if ok, _ := base(&Artifact{ID: "f1", Type: "fetch_verdict"}); !ok || asked != "f1" {
			t.Errorf("ok=%v asked=%q", ok, asked)
		}
	})
}

func TestBuiltinRoles(t *testing.T) {
	for _, typ := range BuiltinTypes() {
		r, ok := BuiltinRoles(typ)
		if !ok || !r.Valid() {
			t.Errorf("%s: role %q ok=%v", typ, r, ok)
		}
	}
	if _, ok := BuiltinRoles("nope"); ok {
		t.Error("unknown type has a role")
	}
}

// tqSmall builds:
//
//	r1 fetch FAILED, r2 tool_error, q question, f fetch RETRIEVED
//	a -> r1; b -> r2, f; c -> a, b; d -> q; e mentions r1 (no trust);
//	r3 tool_error -> a; g -> r3
func tqSmall(t *testing.T) *State {
	s := NewState(nil)
	tqApply(t, s,
		tqFetch("r1", "FAILED", "transport.empty_body"), tqPut("r2", "tool_error"),
		tqPut("q", "question"), tqFetch("f", "RETRIEVED", "ok"),
		tqPut("a", "claim"), tqPut("b", "claim"), tqPut("c", "answer"), tqPut("d", "claim"),
		tqPut("e", "note"), tqPut("r3", "tool_error"), tqPut("g", "claim"),
		tqLink("a", "derived_from", "r1"), tqLink("b", "derived_from", "r2"), tqLink("b", "quotes", "f"),
		tqLink("c", "supported_by", "a"), tqLink("c", "supported_by", "b"), tqLink("d", "derived_from", "q"),
		tqLink("e", "mentions", "r1"), tqLink("r3", "uses", "a"), tqLink("g", "uses", "r3"))
	return s
}

func TestComputeTrust(t *testing.T) {
	s := tqSmall(t)
	rep := ComputeTrust(s, tqBase)
	got, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"poison_roots":[` +
		`{"id":"r1","reason":"fetch_verdict FAILED (transport.empty_body)","blast_radius":3},` +
		`{"id":"r2","reason":"tool_error","blast_radius":2},` +
		`{"id":"r3","reason":"tool_error","blast_radius":1}],` +
		`"quarantined":[` +
		`{"id":"a","status":"quarantined","roots":["r1"],"path":["a","r1"]},` +
		`{"id":"b","status":"quarantined","roots":["r2"],"path":["b","r2"]},` +
		`{"id":"c","status":"quarantined","roots":["r1","r2"],"path":["c","a","r1"]},` +
		`{"id":"g","status":"quarantined","roots":["r1","r3"],"path":["g","r3"]}],` +
		`"blast_radius":4,"confirmed":4}`
	if string(got) != want {
		t.Errorf("report\n got %s\nwant %s", got, want)
	}
	if ids := rep.ConfirmedIDs(s); !slices.Equal(ids, []string{"d", "e", "f", "q"}) {
		t.Errorf("confirmed %v", ids)
	}
	if tr := rep.Trust("r3"); tr.Status != StatusPoisonRoot || tr.Reason != "tool_error" {
		t.Errorf("r3: %+v", tr)
	}

	idx := NewTrustIndex(s, tqBase)
	tqSameTrust(t, s, idx, rep)
	if sum := idx.Summary(); sum != (TrustSummary{Confirmed: 4, Quarantined: 4, PoisonRoots: 3}) {
		t.Errorf("summary %+v", sum)
	}
	tqSameReport(t, s, idx.Report(s), rep)
}

func TestComputeTrustEmpty(t *testing.T) {
	rep := ComputeTrust(NewState(nil), tqBase)
	got, _ := json.Marshal(rep)
	if want := `{"poison_roots":[],"quarantined":[],"blast_radius":0,"confirmed":0}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// tqSameTrust checks that the index agrees with a full report for every
// artifact, including roots and paths.
func tqSameTrust(t *testing.T, s *State, idx *TrustIndex, rep *TrustReport) {
	t.Helper()
	for _, id := range s.ArtifactIDs() {
		want := rep.Trust(id)
		if got := idx.Explain(s, id); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: incremental %s, full %s", id, tqDescribe(got), tqDescribe(want))
		}
		if idx.Confirmed(id) != (want.Status == StatusConfirmed) || idx.Status(id) != want.Status {
			t.Fatalf("%s: Confirmed/Status disagree with %s", id, want.Status)
		}
	}
	sum := idx.Summary()
	if sum.Quarantined != rep.BlastRadius || sum.PoisonRoots != len(rep.PoisonRoots) || sum.Confirmed != rep.Confirmed {
		t.Fatalf("summary %+v, report %d quarantined %d roots %d confirmed", sum, rep.BlastRadius, len(rep.PoisonRoots), rep.Confirmed)
	}
}

// tqSameReport checks that two reports of s are equal.
func tqSameReport(t *testing.T, s *State, got, want *TrustReport) {
	t.Helper()
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("reports differ:\n got %s\nwant %s", gj, wj)
	}
	for _, id := range s.ArtifactIDs() {
		if g, w := got.Trust(id), want.Trust(id); !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: %s vs %s", id, tqDescribe(g), tqDescribe(w))
		}
	}
}

func TestTrustPathTruncated(t *testing.T) {
	s := NewState(nil)
	ops := []Op{tqFetch("c000", "FAILED", "http.500")}
	for i := 1; i < 100; i++ {
		ops = append(ops, tqPut(fmt.Sprintf("c%03d", i), "claim"), tqLink(fmt.Sprintf("c%03d", i), "derived_from", fmt.Sprintf("c%03d", i-1)))
	}
	tqApply(t, s, ops...)
	rep := ComputeTrust(s, tqBase)
	tr := rep.Trust("c099")
	if len(tr.Path) != MaxTrustPath || !tr.PathTruncated || tr.Path[0] != "c099" || tr.Path[MaxTrustPath-1] != "c036" {
		t.Fatalf("c099: %s", tqDescribe(tr))
	}
	// A path of exactly MaxTrustPath ids that reaches the root is whole.
	if tr := rep.Trust(fmt.Sprintf("c%03d", MaxTrustPath-1)); len(tr.Path) != MaxTrustPath || tr.PathTruncated || tr.Path[MaxTrustPath-1] != "c000" {
		t.Fatalf("c063: %s", tqDescribe(tr))
	}
	idx := NewTrustIndex(s, tqBase)
	tqSameTrust(t, s, idx, rep)
	// The path continues from its last id.
	if tr := idx.Explain(s, "c036"); tr.PathTruncated || tr.Path[len(tr.Path)-1] != "c000" {
		t.Fatalf("c036: %s", tqDescribe(tr))
	}
	if rep.PoisonRoots[0].BlastRadius != 99 {
		t.Errorf("blast radius %d", rep.PoisonRoots[0].BlastRadius)
	}
}

// tqPlan is testdata/poison-plan/plan.json.
type tqPlan struct {
	Steps []struct {
		ID         string          `json:"id"`
		Kind       string          `json:"kind"`
		Type       string          `json:"type"`
		ProducedBy string          `json:"produced_by"`
		Data       json.RawMessage `json:"data"`
		Evidence   struct {
			URL      string `json:"url"`
			FinalURL string `json:"final_url"`
			Status   int    `json:"status"`
			Body     string `json:"body"`
		} `json:"evidence"`
		Edges []struct{ Rel, To string } `json:"edges"`
	} `json:"steps"`
	Expect struct {
		Observe struct {
			PoisonRoots []string `json:"poison_roots"`
			Quarantined []string `json:"quarantined"`
			BlastRadius int      `json:"blast_radius"`
			Confirmed   []string `json:"confirmed"`
			Stored      int      `json:"stored"`
		} `json:"observe"`
		Enforce struct {
			Accepted    []string `json:"accepted"`
			Refused     []string `json:"refused"`
			BlastRadius int      `json:"blast_radius"`
			Confirmed   []string `json:"confirmed"`
			PoisonRoots []string `json:"poison_roots"`
		} `json:"enforce"`
		AfterRefetch struct {
			RefetchBody string   `json:"refetch_body"`
			Quarantined []string `json:"quarantined"`
			BlastRadius int      `json:"blast_radius"`
		} `json:"after_refetch"`
	} `json:"expect"`
}

func tqLoadPlan(t testing.TB) *tqPlan {
	t.Helper()
	raw, err := os.ReadFile("../testdata/poison-plan/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var p tqPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 10 {
		t.Fatalf("plan has %d steps", len(p.Steps))
	}
	return &p
}

// tqPlanOps returns the ops of each step. The gate is not involved: a
// fetch step becomes a fetch_verdict whose verdict is set by hand, FAILED
// for the empty body of s1 and RETRIEVED otherwise, as the gate would
// decide.
func tqPlanOps(p *tqPlan) (ids []string, steps [][]Op) {
	for _, st := range p.Steps {
		var ops []Op
		switch st.Kind {
		case "fetch":
			verdict, reason := "RETRIEVED", "ok"
			if st.Evidence.Body == "" {
				verdict, reason = "FAILED", "transport.empty_body"
			}
			ops = append(ops, tqPutData(st.ID, "fetch_verdict", map[string]any{"verdict": verdict, "reason": reason,
				"url": st.Evidence.URL, "final_url": st.Evidence.FinalURL, "status": st.Evidence.Status}))
		case "derive":
			var v any
			if err := json.Unmarshal(st.Data, &v); err != nil {
				panic(err)
			}
			op := tqPutData(st.ID, st.Type, v)
			op.ProducedBy = st.ProducedBy
			ops = append(ops, op)
			for _, e := range st.Edges {
				ops = append(ops, tqLink(st.ID, e.Rel, e.To))
			}
		default:
			panic("unknown step kind " + st.Kind)
		}
		ids = append(ids, st.ID)
		steps = append(steps, ops)
	}
	return ids, steps
}

func tqReportIDs(rep *TrustReport) (roots, quarantined []string) {
	roots, quarantined = []string{}, []string{}
	for _, r := range rep.PoisonRoots {
		roots = append(roots, r.ID)
	}
	for _, q := range rep.Quarantined {
		quarantined = append(quarantined, q.ID)
	}
	return roots, quarantined
}

// tqPlanObserve replays the plan in observe mode: every step stored.
func tqPlanObserve(t *testing.T, p *tqPlan) (*State, *TrustIndex) {
	t.Helper()
	_, steps := tqPlanOps(p)
	s := NewState(nil)
	idx := NewTrustIndex(s, tqBase)
	for _, ops := range steps {
		ch := tqApply(t, s, ops...)
		idx.Apply(s, ch)
	}
	return s, idx
}

func TestPoisonPlanObserve(t *testing.T) {
	p := tqLoadPlan(t)
	s, idx := tqPlanObserve(t, p)
	want := p.Expect.Observe
	rep := ComputeTrust(s, tqBase)
	roots, quarantined := tqReportIDs(rep)
	if s.NumArtifacts() != want.Stored {
		t.Errorf("stored %d, want %d", s.NumArtifacts(), want.Stored)
	}
	if !slices.Equal(roots, want.PoisonRoots) || !slices.Equal(quarantined, want.Quarantined) ||
		rep.BlastRadius != want.BlastRadius || !slices.Equal(rep.ConfirmedIDs(s), want.Confirmed) {
		t.Errorf("roots %v quarantined %v blast %d confirmed %v\nwant %v %v %d %v", roots, quarantined, rep.BlastRadius, rep.ConfirmedIDs(s),
			want.PoisonRoots, want.Quarantined, want.BlastRadius, want.Confirmed)
	}
	if rep.PoisonRoots[0].BlastRadius != 5 || rep.PoisonRoots[0].Reason != "fetch_verdict FAILED (transport.empty_body)" {
		t.Errorf("root %+v", rep.PoisonRoots[0])
	}
	if tr := rep.Trust("s10"); !slices.Equal(tr.Path, []string{"s10", "s8", "s5", "s1"}) || !slices.Equal(tr.Roots, []string{"s1"}) {
		t.Errorf("s10: %s", tqDescribe(tr))
	}
	tqSameTrust(t, s, idx, rep)
	if err := idx.Verify(s); err != nil {
		t.Error(err)
	}
}

func TestPoisonPlanEnforce(t *testing.T) {
	p := tqLoadPlan(t)
	want := p.Expect.Enforce
	ids, steps := tqPlanOps(p)
	s := NewState(nil)
	idx := NewTrustIndex(s, tqBase)
	accepted, refused := []string{}, []string{}
	byTaint := []string{}
	for i, ops := range steps {
		ch, err := s.ApplyOps(ops)
		if err != nil {
			// A step resting on a refused one cannot even be stored: its
			// edge would dangle.
			if !errors.Is(err, ErrDangling) {
				t.Fatalf("%s: %v", ids[i], err)
			}
			refused = append(refused, ids[i])
			continue
		}
		if err := CheckEnforce(s, idx, ch); err != nil {
			var te *TaintError
			if !errors.Is(err, ErrTainted) || !errors.As(err, &te) {
				t.Fatalf("%s: error %v is not a TaintError", ids[i], err)
			}
			if ids[i] == "s3" {
				wantMsg := "op 1: edge s3 -derived_from-> s1 rests on unconfirmed s1; poison root s1 (fetch_verdict FAILED (transport.empty_body)); path s3 -> s1"
				if err.Error() != wantMsg || !slices.Equal(te.Roots, []string{"s1"}) || !slices.Equal(te.Path, []string{"s3", "s1"}) {
					t.Errorf("s3 refused with %q %+v", err, te)
				}
			}
			s.Undo(ch)
			refused = append(refused, ids[i])
			byTaint = append(byTaint, ids[i])
			continue
		}
		idx.Apply(s, ch)
		accepted = append(accepted, ids[i])
	}
	// s3 and s5 rest on s1 directly; s6, s8 and s10 on refused steps.
	if !slices.Equal(byTaint, []string{"s3", "s5"}) {
		t.Errorf("refused as tainted: %v", byTaint)
	}
	if !slices.Equal(accepted, want.Accepted) || !slices.Equal(refused, want.Refused) {
		t.Errorf("accepted %v refused %v, want %v %v", accepted, refused, want.Accepted, want.Refused)
	}
	rep := ComputeTrust(s, tqBase)
	roots, _ := tqReportIDs(rep)
	if rep.BlastRadius != want.BlastRadius || !slices.Equal(rep.ConfirmedIDs(s), want.Confirmed) || !slices.Equal(roots, want.PoisonRoots) {
		t.Errorf("blast %d confirmed %v roots %v", rep.BlastRadius, rep.ConfirmedIDs(s), roots)
	}
	tqSameTrust(t, s, idx, rep)
}

func TestPoisonPlanRefetch(t *testing.T) {
	p := tqLoadPlan(t)
	s, idx := tqPlanObserve(t, p)
	want := p.Expect.AfterRefetch
	before := idx.Clone()
	refetch := tqPutData("s1", "fetch_verdict", map[string]any{"verdict": "RETRIEVED", "reason": "ok",
		"url": "https://shop.example/api/price/42", "body": want.RefetchBody})
	ch := tqApply(t, s, refetch)
	if s.Artifact("s1").Version != 2 {
		t.Fatalf("s1 version %d", s.Artifact("s1").Version)
	}
	idx.Apply(s, ch)
	rep := ComputeTrust(s, tqBase)
	_, quarantined := tqReportIDs(rep)
	if !slices.Equal(quarantined, want.Quarantined) || rep.BlastRadius != want.BlastRadius || len(rep.PoisonRoots) != 0 {
		t.Errorf("after refetch: quarantined %v blast %d roots %v", quarantined, rep.BlastRadius, rep.PoisonRoots)
	}
	tqSameTrust(t, s, idx, rep)
	// The clone taken before is independent and still sees the old state.
	if before.Summary().Quarantined != 5 {
		t.Errorf("clone changed: %+v", before.Summary())
	}
	// Reverting restores the quarantine.
	s.Undo(ch)
	idx.Revert(s, ch)
	tqSameTrust(t, s, idx, ComputeTrust(s, tqBase))
}

func TestTaintedLinksJudgesStateAfterCommit(t *testing.T) {
	s := NewState(nil)
	idx := NewTrustIndex(s, tqBase)
	commit := func(ops ...Op) ([]*TaintError, []Change) {
		t.Helper()
		ch := tqApply(t, s, ops...)
		return TaintedLinks(s, idx, ch), ch
	}
	accept := func(ch []Change) {
		t.Helper()
		idx.Apply(s, ch)
		if err := idx.Verify(s); err != nil {
			t.Fatal(err)
		}
	}
	errs, ch := commit(tqFetch("s1", "FAILED", "transport.empty_body"), tqFetch("s2", "RETRIEVED", "ok"),
		tqPut("y", "claim"), tqLink("y", "derived_from", "s1"))
	if len(errs) != 1 || errs[0].Index != 3 {
		t.Fatalf("first commit: %v", errs)
	}
	accept(ch) // observe

	// Re-fetch s1 RETRIEVED and link to it in the same commit: accepted.
	snapshot := idx.Clone()
	errs, ch = commit(tqFetch("s1", "RETRIEVED", "ok"), tqPut("s3", "claim"), tqLink("s3", "derived_from", "s1"))
	if len(errs) != 0 {
		t.Fatalf("refetch+link refused: %v", errs)
	}
	// TaintedLinks left the index alone.
	for _, id := range []string{"s1", "y"} {
		if snapshot.Status(id) != idx.Status(id) {
			t.Fatalf("%s changed before Apply", id)
		}
	}
	accept(ch)
	if !idx.Confirmed("y") {
		t.Fatal("y not lifted")
	}

	// Link to s2 while turning s2 FAILED in the same commit: refused.
	errs, ch = commit(tqPut("x", "claim"), tqLink("x", "supported_by", "s2"), tqFetch("s2", "FAILED", "http.404"))
	if len(errs) != 1 || errs[0].Edge != (EdgeKey{"x", "supported_by", "s2"}) || !slices.Equal(errs[0].Path, []string{"x", "s2"}) ||
		!slices.Equal(errs[0].Reasons, []string{"fetch_verdict FAILED (http.404)"}) {
		t.Fatalf("link to newly failed: %+v", errs)
	}
	s.Undo(ch)
	if err := idx.Verify(s); err != nil {
		t.Fatalf("refused commit left a trace: %v", err)
	}

	// A quarantined target: roots and path through it; several errors in
	// op order; a non-dependency link is not judged.
	accept(tqApply(t, s, tqFetch("s1", "FAILED", "again")))
	errs, ch = commit(tqPut("z", "claim"), tqLink("z", "mentions", "y"), tqLink("z", "uses", "y"), tqLink("z", "uses", "s3"),
		tqLink("z", "derived_from", "s2"))
	if len(errs) != 2 || errs[0].Index != 2 || errs[1].Index != 3 ||
		!slices.Equal(errs[0].Path, []string{"z", "y", "s1"}) || !slices.Equal(errs[1].Roots, []string{"s1"}) {
		t.Fatalf("quarantined targets: %+v", errs)
	}
	accept(ch)

	// Existing tainted edges are not judged again: a new version of y, new
	// attrs on y's edge, and an unlink+link of it.
	for _, ops := range [][]Op{
		{tqPutData("y", "claim", map[string]any{"text": "v2"})},
		{{Op: OpLink, From: "y", Rel: "derived_from", To: "s1", Attrs: json.RawMessage(`{"w":1}`)}},
		{tqUnlink("y", "derived_from", "s1"), tqLink("y", "derived_from", "s1")},
	} {
		errs, ch = commit(ops...)
		if len(errs) != 0 {
			t.Fatalf("%v: refused: %v", ops, errs)
		}
		accept(ch)
	}
	// A link then unlink in one commit adds nothing.
	if errs, ch = commit(tqPut("w", "claim"), tqLink("w", "uses", "s1"), tqUnlink("w", "uses", "s1")); len(errs) != 0 {
		t.Fatalf("transient link judged: %v", errs)
	}
	accept(ch)
	// A commit with no new link needs no overlay and reports nothing.
	if errs, _ = commit(tqPut("v", "claim")); errs != nil {
		t.Fatalf("no links: %v", errs)
	}
}

// TestTrustIncrementalMatchesFull is the oracle test: random commits
// (puts, re-puts flipping fetch verdicts, links, unlinks, deletes), and
// after each one the incremental index must equal a full pass for every
// artifact, TaintedLinks must agree with the full pass on the new state,
// and Revert must undo Apply.
func TestTrustIncrementalMatchesFull(t *testing.T) {
	seeds, commits := 150, 80
	if testing.Short() {
		seeds = 20
	}
	for seed := range seeds {
		tqRandomRun(t, uint64(seed), commits)
	}
}

func tqRandomRun(t *testing.T, seed uint64, commits int) {
	r := rand.New(rand.NewPCG(seed, 42))
	s := NewState(nil)
	idx := NewTrustIndex(s, tqBase)
	nids := 8 + r.IntN(30)
	id := func() string { return "n" + strconv.Itoa(r.IntN(nids)) }
	// existing mostly picks a live artifact, so that links usually apply.
	existing := func() string {
		if ids := s.ArtifactIDs(); len(ids) > 0 && r.IntN(10) > 0 {
			return ids[r.IntN(len(ids))]
		}
		return id()
	}
	rels := []string{"derived_from", "supported_by", "uses", "quotes", "mentions", "cites"}
	types := []string{"claim", "claim", "answer", "evidence", "question", "tool_error", "mystery"}
	putOp := func(x string) Op {
		if r.IntN(3) == 0 {
			v := "RETRIEVED"
			if r.IntN(2) == 0 {
				v = [...]string{"FAILED", "UNKNOWN"}[r.IntN(2)]
			}
			return tqFetch(x, v, "r"+strconv.Itoa(r.IntN(2)))
		}
		return tqPutData(x, types[r.IntN(len(types))], map[string]any{"v": r.IntN(3)})
	}
	applied := 0
	for c := 0; c < commits; c++ {
		var ops []Op
		unlinked := map[EdgeKey]bool{}
		nops := 1 + r.IntN(4)
		if r.IntN(8) == 0 {
			nops = 12 + r.IntN(12) // large commits take the map path of netChanges
		}
		for range nops {
			switch k := r.IntN(10); {
			case k < 3:
				ops = append(ops, putOp(id()))
			case k < 7:
				ops = append(ops, tqLink(existing(), rels[r.IntN(len(rels))], existing()))
			case k < 9:
				if es := s.Edges(); len(es) > 0 {
					e := es[r.IntN(len(es))]
					if !unlinked[e.Key()] {
						unlinked[e.Key()] = true
						ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
					}
				}
			default:
				x := id()
				for _, e := range append(s.Out(x), s.In(x)...) {
					if !unlinked[e.Key()] {
						unlinked[e.Key()] = true
						ops = append(ops, tqUnlink(e.From, e.Rel, e.To))
					}
				}
				ops = append(ops, tqDel(x))
				if r.IntN(3) == 0 {
					ops = append(ops, putOp(x))
				}
			}
		}
		ch, err := s.ApplyOps(ops)
		if err != nil {
			continue // cycles, dangling edges, duplicate unlinks: state unchanged
		}
		applied++
		full := ComputeTrust(s, tqBase)
		// TaintedLinks judges new dependency links on the new state.
		tainted := map[EdgeKey]bool{}
		for _, te := range TaintedLinks(s, idx, ch) {
			tainted[te.Edge] = true
			if tr := full.Trust(te.Edge.To); tr.Status == StatusConfirmed || te.Path[1] != te.Edge.To {
				t.Fatalf("seed %d commit %d: %v flagged but target is %s", seed, c, te, tr.Status)
			}
		}
		_, edges := netChanges(s, ch, false)
		for _, e := range edges {
			if !e.before && s.Edge(e.k) != nil && full.Trust(e.k.To).Status != StatusConfirmed && !tainted[e.k] {
				t.Fatalf("seed %d commit %d: new edge %s to unconfirmed target not flagged", seed, c, e.k)
			}
		}
		if r.IntN(4) == 0 {
			// Apply, then undo the commit and Revert: back to before.
			before := idx.Clone()
			idx.Apply(s, ch)
			s.Undo(ch)
			idx.Revert(s, ch)
			if !reflect.DeepEqual(idx.nodes, before.nodes) || !reflect.DeepEqual(idx.roots, before.roots) || idx.nq != before.nq {
				t.Fatalf("seed %d commit %d: Revert did not restore the index", seed, c)
			}
			if ch, err = s.ApplyOps(ops); err != nil {
				t.Fatalf("seed %d commit %d: re-apply: %v", seed, c, err)
			}
		}
		idx.Apply(s, ch)
		if err := idx.Verify(s); err != nil {
			t.Fatalf("seed %d commit %d (%v): %v", seed, c, ops, err)
		}
		for _, x := range s.ArtifactIDs() {
			if got, want := idx.Explain(s, x), full.Trust(x); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d commit %d: %s incremental %s, full %s", seed, c, x, tqDescribe(got), tqDescribe(want))
			}
		}
		tqSameReport(t, s, idx.Report(s), full)
	}
	if applied < commits/4 {
		t.Fatalf("seed %d: only %d of %d commits applied; the generator is too weak", seed, applied, commits)
	}
}

func TestTrustErrorsMessage(t *testing.T) {
	e := &TaintError{Index: 2, Edge: EdgeKey{"a", "uses", "b"}, Roots: []string{"r1", "r2"}, Reasons: []string{"tool_error", ""}, Path: []string{"a", "b", "r1"}}
	want := "op 2: edge a -uses-> b rests on unconfirmed b; poison roots r1 (tool_error), r2; path a -> b -> r1"
	if e.Error() != want {
		t.Errorf("got %q\nwant %q", e.Error(), want)
	}
	if !errors.Is(e, ErrTainted) || strings.Contains(ErrTainted.Error(), "%") {
		t.Error("Unwrap")
	}
}
