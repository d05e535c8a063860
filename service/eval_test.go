package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestEvalFollowsCommits is the oracle of Service.Eval: along a random
// history of one context (claims, answers, questions and fetch verdicts
// that fail and recover, linked by dependency relations and by one that
// is not; links unmade, types changed, artifacts deleted; a user type and
// relation defined now and then; a branch written beside main), each
// commit's evaluation — asked at the head, at a commit up to six back,
// and after a restart of the store, whose heads are then read through
// their state maps — equals the evaluation as it was made before (the
// trust report of the view, graph.EvaluateWith), field by field; and
// most of them were derived from the one evaluated before.
func TestEvalFollowsCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() (*store.Store, *Service) {
		reg := NewRegistry()
		st, err := store.Open(ctx, store.Options{Dir: dir, Logger: log, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Load(ctx, st); err != nil {
			t.Fatal(err)
		}
		return st, New(Options{Store: st, Types: reg, Logger: log, LeaseKey: make([]byte, 32)})
	}
	st, svc := open()
	defer func() { st.Close() }()
	if _, err := st.CreateContext(ctx, "e", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 35))
	// 700 artifacts to start with, so that most commits differ from the
	// one before by less than a sixteenth of the state; the history then
	// writes among the first 120 of them.
	ids := func() string { return fmt.Sprintf("x%03d", r.IntN(120)) }
	var bulk []graph.Op
	for i := range 700 {
		typ := [...]string{"claim", "claim", "answer", "question"}[i%4]
		bulk = append(bulk, graph.Op{Op: graph.OpPut, ID: fmt.Sprintf("x%03d", i), Type: typ, Data: json.RawMessage(`{}`)})
		if i > 0 && i%3 != 0 {
			bulk = append(bulk, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("x%03d", i), Rel: "derived_from", To: fmt.Sprintf("x%03d", r.IntN(i))})
		}
	}
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "e", Author: "t", Message: "bulk", Ops: bulk}); err != nil {
		t.Fatal(err)
	}
	types := []string{"claim", "claim", "answer", "question", "note", "verdict"}
	rels := []string{"derived_from", "supported_by", "mentions"}
	var commits []*replay.Commit
	asked, derived := 0, int64(0)
	check := func(at *replay.Commit, why string) {
		t.Helper()
		err := st.ReadAt(ctx, "e", at, func(v *store.View) error {
			got := svc.Eval(ctx, "e", v)
			want := graph.EvaluateWith(v.State, v.Trust.Report(v.State), nil)
			if !reflect.DeepEqual(got.Evaluation, want) {
				g, _ := json.Marshal(got.Evaluation)
				w, _ := json.Marshal(want)
				t.Fatalf("%s, commit %d of %d:\n got %s\nwant %s", why, indexOf(commits, at), len(commits), g, w)
			}
			if got.Commit != at.ID.String() {
				t.Fatalf("report of commit %s, want %s", got.Commit, at.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		asked++
	}
	for step := range 120 {
		branch := store.DefaultBranch
		if step%5 == 4 {
			branch = "side"
			switch {
			case step == 4:
				if err := st.CreateBranch(ctx, "e", "side", commits[len(commits)-1].ID); err != nil {
					t.Fatal(err)
				}
			case step%30 == 29:
				// Back to main now and then, as a run's retry does.
				if err := st.ResetBranch(ctx, "e", "side", commits[len(commits)-1].ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		var ops []graph.Op
		for range 1 + r.IntN(6) {
			switch k := r.IntN(12); {
			case k < 5:
				typ := types[r.IntN(len(types))]
				data := map[string]any{"n": r.IntN(4)}
				if typ == "verdict" {
					typ = "fetch_verdict"
					data = map[string]any{"url": "https://example.test/", "verdict": [...]string{"RETRIEVED", "RETRIEVED", "FAILED"}[r.IntN(3)], "reason": "r"}
				}
				if step > 30 && r.IntN(8) == 0 {
					typ = [...]string{"memo", "finding"}[r.IntN(2)] // user types, finding defined at step 70
				}
				b, _ := json.Marshal(data)
				ops = append(ops, graph.Op{Op: graph.OpPut, ID: ids(), Type: typ, Data: b})
			case k < 9:
				rel := rels[r.IntN(len(rels))]
				if step > 30 && r.IntN(6) == 0 {
					rel = [...]string{"props_up", "leans_on"}[r.IntN(2)] // leans_on defined at step 70
				}
				ops = append(ops, graph.Op{Op: graph.OpLink, From: ids(), Rel: rel, To: ids()})
			case k < 11:
				ops = append(ops, graph.Op{Op: graph.OpUnlink, From: ids(), Rel: rels[r.IntN(len(rels))], To: ids()})
			default:
				ops = append(ops, graph.Op{Op: graph.OpDelete, ID: ids()})
			}
		}
		if step == 50 {
			// Before its type's definition (step 70): an answer whose
			// only source is of the user type. Defining the type makes f1
			// a source with no change to either (a derivation across
			// definitions would miss it).
			ops = []graph.Op{{Op: graph.OpPut, ID: "f1", Type: "finding", Data: json.RawMessage(`{}`)},
				{Op: graph.OpPut, ID: "ans", Type: "answer", Data: json.RawMessage(`{}`)},
				{Op: graph.OpLink, From: "ans", Rel: "supported_by", To: "f1"}}
		}
		if step == 30 || step == 70 {
			types := []graph.TypeDef{{Name: "memo", Role: graph.RoleSource, Description: "m"}}
			rels := []graph.RelationDef{{Name: "props_up", Depends: true, Description: "p"}}
			if step == 70 {
				types = []graph.TypeDef{{Name: "finding", Role: graph.RoleSource, Description: "f"}}
				rels = []graph.RelationDef{{Name: "leans_on", Depends: true, Description: "l"}}
			}
			err := st.Read(ctx, "e", branch, func(v *store.View) error {
				defs, err := graph.DefinitionOps(v.State, types, rels)
				ops = defs
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// Ops that do not apply (a link to nothing, a delete of nothing)
		// are dropped one at a time until the rest commits; the steps'
		// own ops must commit whole.
		special := step == 30 || step == 50 || step == 70
		for len(ops) > 0 {
			res, err := st.Commit(ctx, store.CommitRequest{Context: "e", Branch: branch, Author: "t", Message: "m", Ops: ops})
			if err == nil {
				if !res.Noop {
					commits = append(commits, res.Commit)
				}
				break
			}
			if special {
				t.Fatalf("step %d: %v", step, err)
			}
			ops = ops[1:]
		}
		if len(commits) == 0 {
			continue
		}
		check(commits[len(commits)-1], "the newest commit")
		if r.IntN(3) == 0 {
			check(commits[max(0, len(commits)-1-r.IntN(7))], "an earlier commit")
		}
		if step == 60 || step == 100 {
			derived += svc.evalDerivations.Load()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st, svc = open()
			check(commits[len(commits)-1], "after a restart")
			check(commits[max(0, len(commits)-3)], "after a restart, an earlier commit")
		}
	}
	derived += svc.evalDerivations.Load()
	t.Logf("%d evaluations asked, %d derived", asked, derived)
	if asked < 150 || derived < int64(asked)*3/5 {
		t.Fatalf("%d evaluations asked, %d derived: the test needs more", asked, derived)
	}
}

// indexOf returns the position of c among commits, or -1.
func indexOf(commits []*replay.Commit, c *replay.Commit) int {
	for i, x := range commits {
		if x.ID == c.ID {
			return i
		}
	}
	return -1
}

// TestEvalAcrossRelationDefinitions: two branches define one relation
// with another dependency and link the same claim by it. The diff of
// their heads names only the definition, yet the claim rests on nothing
// on one branch and on something on the other: the evaluation of each
// head, asked after the other's, must be the whole one.
func TestEvalAcrossRelationDefinitions(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	st := svc.Store()
	ops := []graph.Op{{Op: graph.OpPut, ID: "q", Type: "question", Data: json.RawMessage(`{"text":"q"}`)},
		{Op: graph.OpPut, ID: "c1", Type: "claim", Data: json.RawMessage(`{"text":"c"}`)}}
	for i := range 40 {
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: fmt.Sprintf("n%02d", i), Type: "note", Data: json.RawMessage(`{"text":"n"}`)})
	}
	base, err := st.Commit(ctx, store.CommitRequest{Context: "o", Author: "t", Message: "base", Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]*replay.Commit{}
	for _, b := range []struct {
		name    string
		depends bool
	}{{"a", true}, {"b", false}} {
		if err := st.CreateBranch(ctx, "o", b.name, base.Commit.ID); err != nil {
			t.Fatal(err)
		}
		var defs []graph.Op
		err := st.Read(ctx, "o", b.name, func(v *store.View) error {
			var err error
			defs, err = graph.DefinitionOps(v.State, nil, []graph.RelationDef{{Name: "leans_on", Depends: b.depends, Description: "l"}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Commit(ctx, store.CommitRequest{Context: "o", Branch: b.name, Author: "t", Message: "def", Ops: defs}); err != nil {
			t.Fatal(err)
		}
		res, err := st.Commit(ctx, store.CommitRequest{Context: "o", Branch: b.name, Author: "t", Message: "link",
			Ops: []graph.Op{{Op: graph.OpLink, From: "c1", Rel: "leans_on", To: "q"}}})
		if err != nil {
			t.Fatal(err)
		}
		heads[b.name] = res.Commit
	}
	for _, name := range []string{"a", "b", "a", "b"} {
		err := st.ReadAt(ctx, "o", heads[name], func(v *store.View) error {
			got, want := svc.Eval(ctx, "o", v), graph.EvaluateWith(v.State, v.Trust.Report(v.State), nil)
			if !reflect.DeepEqual(got.Evaluation, want) {
				t.Errorf("branch %s: dangling %v, want %v", name, got.DanglingClaims, want.DanglingClaims)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvalReportsAreTheirOwn: a caller that changes the report Eval gave
// it does not change the next one (what the service keeps is never handed
// out).
func TestEvalReportsAreTheirOwn(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	st := svc.Store()
	res, err := st.Commit(ctx, store.CommitRequest{Context: "o", Author: "t", Message: "m", Ops: []graph.Op{
		{Op: graph.OpPut, ID: "c", Type: "claim", Data: json.RawMessage(`{"text":"c"}`)},
		{Op: graph.OpPut, ID: "ans", Type: "answer", Data: json.RawMessage(`{"text":"a"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var first, second EvalReport
	for _, rep := range []*EvalReport{&first, &second} {
		if err := st.ReadAt(ctx, "o", res.Commit, func(v *store.View) error { *rep = svc.Eval(ctx, "o", v); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(rep.Answers) != 1 || len(rep.DanglingClaims) != 1 || len(rep.UnsupportedAnswers) != 1 {
			t.Fatalf("report %+v", rep.Evaluation)
		}
		rep.Answers[0].ID, rep.DanglingClaims[0], rep.UnsupportedAnswers[0] = "changed", "changed", "changed"
	}
	var third EvalReport
	if err := st.ReadAt(ctx, "o", res.Commit, func(v *store.View) error { third = svc.Eval(ctx, "o", v); return nil }); err != nil {
		t.Fatal(err)
	}
	if third.Answers[0].ID != "ans" || third.DanglingClaims[0] != "c" || third.UnsupportedAnswers[0] != "ans" {
		t.Fatalf("a caller's change reached the kept evaluation: %+v", third.Evaluation)
	}
}
