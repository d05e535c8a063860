package httpapi

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
)

// TestPlanObserve replays the ten-step plan over HTTP in observe mode:
// everything is stored, s1 is the poison root and s3 s5 s6 s8 s10 are
// quarantined (blast radius 5), while the clean branch s2/s4/s7/s9 stays
// confirmed.
func TestPlanObserve(t *testing.T) {
	e := newEnv(t)
	e.createContext("poison-plan", "observe")
	for _, s := range loadPlan(t) {
		if s.Kind == "fetch" {
			e.writeVerdict("poison-plan", s)
			continue
		}
		out := e.must(e.post("/v1/contexts/poison-plan/artifacts", s.input()), 201)
		art := out["artifact"].(map[string]any)
		if art["id"] != s.ID || art["version"] != 1.0 {
			t.Fatalf("%s: artifact %v", s.ID, art)
		}
		// Oracle: the trust a write reports equals what a read explains.
		got := e.must(e.get("/v1/contexts/poison-plan/artifacts/"+s.ID), 200)
		if !reflect.DeepEqual(art["trust"], got["trust"]) || out["trust_at"] != out["commit"] {
			t.Errorf("%s: write says %v at %v, read says %v", s.ID, art["trust"], out["trust_at"], got["trust"])
		}
	}
	q := e.must(e.get("/v1/contexts/poison-plan/quarantine"), 200)
	roots := q["poison_roots"].([]any)
	if len(roots) != 1 || roots[0].(map[string]any)["id"] != "s1" ||
		roots[0].(map[string]any)["reason"] != "fetch_verdict FAILED (transport.empty_body)" {
		t.Fatalf("poison roots %v", roots)
	}
	var quarantined []string
	paths := map[string][]string{}
	for _, x := range q["quarantined"].([]any) {
		m := x.(map[string]any)
		id := m["id"].(string)
		quarantined = append(quarantined, id)
		paths[id] = strs(m["path"])
		if !reflect.DeepEqual(strs(m["roots"]), []string{"s1"}) {
			t.Errorf("%s roots %v", id, m["roots"])
		}
	}
	sort.Strings(quarantined)
	if want := []string{"s10", "s3", "s5", "s6", "s8"}; !reflect.DeepEqual(quarantined, want) {
		t.Fatalf("quarantined %v, want %v", quarantined, want)
	}
	if q["blast_radius"] != 5.0 {
		t.Fatalf("blast radius %v", q["blast_radius"])
	}
	if want := []string{"s10", "s8", "s5", "s1"}; !reflect.DeepEqual(paths["s10"], want) {
		t.Errorf("path of s10 %v, want %v", paths["s10"], want)
	}
	for _, id := range []string{"s2", "s4", "s7", "s9"} {
		a := e.must(e.get("/v1/contexts/poison-plan/artifacts/"+id), 200)
		if st := a["trust"].(map[string]any)["status"]; st != "confirmed" {
			t.Errorf("%s is %v, want confirmed", id, st)
		}
	}

	// After a RETRIEVED re-fetch of s1 (the plan's after_refetch body,
	// posted as evidence) nothing stays quarantined, and the diff names
	// every trust change.
	before := q["commit"].(string)
	refetch := loadPlan(t)[0].fetchBody(t)
	refetch["body"] = `{"price": 19.99}`
	w := e.must(e.post("/v1/contexts/poison-plan/fetches", refetch), 201)
	if art := w["artifact"].(map[string]any); w["verdict"] != "RETRIEVED" || art["version"] != 2.0 || art["trust"].(map[string]any)["status"] != "confirmed" {
		t.Fatalf("re-fetch: %v", w)
	}
	q = e.must(e.get("/v1/contexts/poison-plan/quarantine"), 200)
	if q["blast_radius"] != 0.0 || len(q["quarantined"].([]any)) != 0 || len(q["poison_roots"].([]any)) != 0 {
		t.Fatalf("after re-fetch %v", q)
	}
	d := e.must(e.get("/v1/contexts/poison-plan/diff?from="+before), 200)
	changes := map[string]string{}
	for _, x := range d["trust"].([]any) {
		m := x.(map[string]any)
		changes[m["id"].(string)] = fmt.Sprint(m["old"], "->", m["new"])
	}
	want := map[string]string{"s1": "poison_root->confirmed", "s3": "quarantined->confirmed", "s5": "quarantined->confirmed",
		"s6": "quarantined->confirmed", "s8": "quarantined->confirmed", "s10": "quarantined->confirmed"}
	if !reflect.DeepEqual(changes, want) {
		t.Fatalf("trust changes %v, want %v", changes, want)
	}
}

// TestPlanEnforce replays the plan in enforce mode: the five steps that
// rest on s1 are refused with 409 and the chain that taints them, the rest
// are accepted, and no refusal changes the state.
//
// In a pure enforce context s6, s8 and s10 depend on steps that were
// themselves refused, so their edges would dangle (422). To show each of
// the five refused for the taint itself, the plan is replayed in an
// observe context where every derive step is first sent with
// "quarantine": "enforce" (a write may tighten, never loosen, its
// context's mode) and, once refused, stored flagged as an agent in observe
// mode would. A second, pure enforce context checks the cascade.
func TestPlanEnforce(t *testing.T) {
	e := newEnv(t)
	e.createContext("plan", "observe")
	refusedPaths := map[string][]string{}
	var accepted, refused []string
	for _, s := range loadPlan(t) {
		if s.Kind == "fetch" {
			e.writeVerdict("plan", s)
			accepted = append(accepted, s.ID)
			continue
		}
		before := e.hash("plan")
		in := s.input()
		in["quarantine"] = "enforce"
		r := e.post("/v1/contexts/plan/artifacts", in)
		switch r.status {
		case 201:
			accepted = append(accepted, s.ID)
			continue
		case 409:
		default:
			t.Fatalf("%s: status %d: %s", s.ID, r.status, r.body)
		}
		refused = append(refused, s.ID)
		p := r.obj(t)
		if r.header.Get("Content-Type") != "application/problem+json" || p["type"] != ProblemTypePrefix+CodeQuarantined {
			t.Fatalf("%s: problem %v", s.ID, p)
		}
		tb := p["tainted_by"].(map[string]any)
		if !reflect.DeepEqual(strs(tb["roots"]), []string{"s1"}) {
			t.Errorf("%s: tainted_by roots %v", s.ID, tb["roots"])
		}
		refusedPaths[s.ID] = strs(tb["path"])
		if got := e.hash("plan"); got != before {
			t.Fatalf("%s: a refused write changed the hash", s.ID)
		}
		// Store it flagged, as observe mode does.
		out := e.must(e.post("/v1/contexts/plan/artifacts", s.input()), 201)
		if len(out["tainted"].([]any)) == 0 {
			t.Errorf("%s: observe-mode write not flagged", s.ID)
		}
	}
	if want := []string{"s3", "s5", "s6", "s8", "s10"}; !reflect.DeepEqual(refused, want) {
		t.Fatalf("refused %v, want %v", refused, want)
	}
	if want := []string{"s1", "s2", "s4", "s7", "s9"}; !reflect.DeepEqual(accepted, want) {
		t.Fatalf("accepted %v, want %v", accepted, want)
	}
	wantPaths := map[string][]string{
		"s3": {"s3", "s1"}, "s5": {"s5", "s1"}, "s6": {"s6", "s3", "s1"},
		"s8": {"s8", "s5", "s1"}, "s10": {"s10", "s8", "s5", "s1"},
	}
	if !reflect.DeepEqual(refusedPaths, wantPaths) {
		t.Errorf("tainted_by paths %v, want %v", refusedPaths, wantPaths)
	}

	// A pure enforce context: s3 and s5 are refused for taint; s6, s8 and
	// s10 then rest on artifacts that were never stored.
	e.createContext("strict", "enforce")
	for _, s := range loadPlan(t) {
		if s.Kind == "fetch" {
			e.writeVerdict("strict", s)
			continue
		}
		before := e.hash("strict")
		r := e.post("/v1/contexts/strict/artifacts", s.input())
		want := map[string]int{"s3": 409, "s5": 409, "s6": 422, "s8": 422, "s10": 422}[s.ID]
		if want == 0 {
			want = 201
		}
		if r.status != want {
			t.Fatalf("strict %s: status %d, want %d: %s", s.ID, r.status, want, r.body)
		}
		if want != 201 && e.hash("strict") != before {
			t.Fatalf("strict %s: refused write changed the hash", s.ID)
		}
	}
	q := e.must(e.get("/v1/contexts/strict/quarantine"), 200)
	if q["blast_radius"] != 0.0 || len(q["poison_roots"].([]any)) != 1 {
		t.Fatalf("strict quarantine %v", q)
	}
	d := e.must(e.get("/v1/contexts/strict"), 200)
	if d["counts"].(map[string]any)["artifacts"] != 5.0 {
		t.Fatalf("strict context holds %v", d["counts"])
	}
}
