package httpapi

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"testing"
)

// planExpect is the "expect" section of testdata/poison-plan/plan.json.
type planExpect struct {
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
}

// trustSets reads the quarantine report and every artifact's status.
func (e *env) trustSets(ctxID string) (roots, quarantined, confirmed []string, blast int, reasons map[string]string) {
	e.t.Helper()
	q := e.must(e.get("/v1/contexts/"+ctxID+"/quarantine"), 200)
	reasons = map[string]string{}
	for _, x := range q["poison_roots"].([]any) {
		m := x.(map[string]any)
		roots = append(roots, m["id"].(string))
		reasons[m["id"].(string)] = m["reason"].(string)
	}
	for _, x := range q["quarantined"].([]any) {
		quarantined = append(quarantined, x.(map[string]any)["id"].(string))
	}
	for _, x := range e.must(e.get("/v1/contexts/"+ctxID+"/artifacts"), 200)["items"].([]any) {
		m := x.(map[string]any)
		if m["trust"].(map[string]any)["status"] == "confirmed" {
			confirmed = append(confirmed, m["id"].(string))
		}
	}
	sort.Strings(roots)
	sort.Strings(quarantined)
	sort.Strings(confirmed)
	return roots, quarantined, confirmed, int(q["blast_radius"].(float64)), reasons
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// TestPlanOverHTTP replays the ten-step plan entirely over HTTP — fetch
// steps as their evidence posted to /fetches, where the gate decides the
// verdict, derive steps to /artifacts — and checks every expectation of
// testdata/poison-plan/plan.json: observe, enforce and after the re-fetch.
func TestPlanOverHTTP(t *testing.T) {
	raw, err := os.ReadFile("../testdata/poison-plan/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Expect planExpect `json:"expect"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	want := f.Expect
	steps := loadPlan(t)

	t.Run("observe", func(t *testing.T) {
		e := newEnv(t)
		e.createContext("obs", "observe")
		for _, s := range steps {
			if s.Kind == "fetch" {
				e.must(e.post("/v1/contexts/obs/fetches", s.fetchBody(t)), 201)
			} else {
				e.must(e.post("/v1/contexts/obs/artifacts", s.input()), 201)
			}
		}
		roots, quarantined, confirmed, blast, reasons := e.trustSets("obs")
		if !reflect.DeepEqual(roots, sorted(want.Observe.PoisonRoots)) || !reflect.DeepEqual(quarantined, sorted(want.Observe.Quarantined)) ||
			!reflect.DeepEqual(confirmed, sorted(want.Observe.Confirmed)) || blast != want.Observe.BlastRadius {
			t.Fatalf("roots %v quarantined %v confirmed %v blast %d", roots, quarantined, confirmed, blast)
		}
		// The reason comes from the gate, not from the client.
		if reasons["s1"] != "fetch_verdict FAILED (transport.empty_body)" {
			t.Fatalf("s1: %q", reasons["s1"])
		}
		if n := e.must(e.get("/v1/contexts/obs"), 200)["counts"].(map[string]any)["artifacts"]; n != float64(want.Observe.Stored) {
			t.Fatalf("stored %v", n)
		}

		// After the re-fetch of s1 with the fixture's body.
		refetch := steps[0].fetchBody(t)
		refetch["body"] = want.AfterRefetch.RefetchBody
		out := e.must(e.post("/v1/contexts/obs/fetches", refetch), 201)
		if out["verdict"] != "RETRIEVED" {
			t.Fatalf("re-fetch: %v", out)
		}
		roots, quarantined, _, blast, _ = e.trustSets("obs")
		if len(roots) != 0 || len(quarantined) != len(want.AfterRefetch.Quarantined) || blast != want.AfterRefetch.BlastRadius {
			t.Fatalf("after re-fetch: roots %v quarantined %v blast %d", roots, quarantined, blast)
		}
	})

	t.Run("enforce", func(t *testing.T) {
		e := newEnv(t)
		e.createContext("enf", "enforce")
		var accepted, refused []string
		for _, s := range steps {
			var r *resp
			if s.Kind == "fetch" {
				r = e.post("/v1/contexts/enf/fetches", s.fetchBody(t))
			} else {
				r = e.post("/v1/contexts/enf/artifacts", s.input())
			}
			switch r.status {
			case 201:
				accepted = append(accepted, s.ID)
			case 409, 422:
				// 409: rests on s1; 422: rests on a refused step.
				refused = append(refused, s.ID)
			default:
				t.Fatalf("%s: %d %s", s.ID, r.status, r.body)
			}
		}
		if !reflect.DeepEqual(sorted(accepted), sorted(want.Enforce.Accepted)) || !reflect.DeepEqual(sorted(refused), sorted(want.Enforce.Refused)) {
			t.Fatalf("accepted %v refused %v", accepted, refused)
		}
		roots, quarantined, confirmed, blast, _ := e.trustSets("enf")
		if !reflect.DeepEqual(roots, sorted(want.Enforce.PoisonRoots)) || len(quarantined) != 0 || blast != want.Enforce.BlastRadius ||
			!reflect.DeepEqual(confirmed, sorted(want.Enforce.Confirmed)) {
			t.Fatalf("roots %v quarantined %v confirmed %v blast %d", roots, quarantined, confirmed, blast)
		}
	})
}
