package httpapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestMergeResolutionProducerFollowsTheLabelRules: the produced_by a
// value resolution writes is a new producer like any other, so it follows
// the rules of names: an invisible or control character is 422 naming the
// resolution's field, with nothing written; a readable one lands.
func TestMergeResolutionProducerFollowsTheLabelRules(t *testing.T) {
	e := newEnv(t)
	e.createContext("mp", "observe")
	put := func(branch, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/mp/artifacts", map[string]any{"id": "x", "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "base")
	e.must(e.post("/v1/contexts/mp/branches", map[string]any{"name": "b"}), 201)
	put("main", "ours")
	put("b", "theirs")
	before := e.hash("mp")
	for _, c := range []struct{ by, rule, names string }{
		{"plan\u200Bner", "visible", "U+200B ZERO WIDTH SPACE"},
		{"step\u202E1", "visible", "U+202E"},
		{"a\nb", "printable", "U+000A"},
	} {
		r := e.post("/v1/contexts/mp/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
			"value": map[string]any{"text": "both"}, "produced_by": c.by}}})
		errs, _ := r.obj(t)["errors"].([]any)
		if r.status != 422 || len(errs) == 0 {
			t.Fatalf("produced_by %q: %d %s", c.by, r.status, r.body)
		}
		fe := errs[0].(map[string]any)
		if fe["pointer"] != "/resolutions/x/produced_by" || fe["rule"] != c.rule || !strings.Contains(fmt.Sprint(fe["detail"]), c.names) {
			t.Fatalf("produced_by %q: %v", c.by, fe)
		}
		if e.hash("mp") != before {
			t.Fatalf("produced_by %q: a refused merge changed main", c.by)
		}
	}
	e.must(e.post("/v1/contexts/mp/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
		"value": map[string]any{"text": "both"}, "produced_by": "planner"}}}), 201)
	if x := e.must(e.get("/v1/contexts/mp/artifacts/x"), 200); x["produced_by"] != "planner" {
		t.Fatalf("x = %v", x)
	}
}

// TestMergeResolutionFieldsThatWouldBeIgnored: a resolution's type and
// produced_by describe the value it writes for an artifact. Beside a take,
// or on an edge's attrs, they would change nothing, so they are refused
// 422 naming the field rather than accepted and dropped unsaid; nothing
// is written.
func TestMergeResolutionFieldsThatWouldBeIgnored(t *testing.T) {
	e := newEnv(t)
	e.createContext("mi", "observe")
	put := func(branch, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/mi/artifacts", map[string]any{"id": "x", "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "base")
	e.must(e.post("/v1/contexts/mi/artifacts", map[string]any{"id": "y", "type": "note", "data": map[string]any{"text": "y"}}), 201)
	e.must(e.post("/v1/contexts/mi/commits", map[string]any{"ops": []map[string]any{{"op": "link", "from": "x", "rel": "cites", "to": "y", "attrs": map[string]any{"page": 1}}}}), 201)
	e.must(e.post("/v1/contexts/mi/branches", map[string]any{"name": "b"}), 201)
	put("main", "ours")
	put("b", "theirs")
	e.must(e.post("/v1/contexts/mi/commits", map[string]any{"ops": []map[string]any{{"op": "link", "from": "x", "rel": "cites", "to": "y", "attrs": map[string]any{"page": 2}}}}), 201)
	e.must(e.post("/v1/contexts/mi/commits", map[string]any{"branch": "b", "ops": []map[string]any{{"op": "link", "from": "x", "rel": "cites", "to": "y", "attrs": map[string]any{"page": 3}}}}), 201)
	edgeKey := "edge:x -cites-> y"
	before := e.hash("mi")
	for _, c := range []struct {
		name    string
		res     map[string]any
		pointer string
	}{
		{"a type beside a take", map[string]any{"x": map[string]any{"take": "theirs", "type": "claim"}, edgeKey: map[string]any{"take": "ours"}}, "/resolutions/x/type"},
		{"a producer beside a take", map[string]any{"x": map[string]any{"take": "ours", "produced_by": "planner"}, edgeKey: map[string]any{"take": "ours"}}, "/resolutions/x/produced_by"},
		{"a type for an edge's attrs", map[string]any{"x": map[string]any{"take": "ours"}, edgeKey: map[string]any{"value": map[string]any{"page": 4}, "type": "note"}}, "/resolutions/edge:x -cites-> y/type"},
		{"a producer for an edge taken", map[string]any{"x": map[string]any{"take": "ours"}, edgeKey: map[string]any{"take": "theirs", "produced_by": "planner"}}, "/resolutions/edge:x -cites-> y/produced_by"},
	} {
		r := e.post("/v1/contexts/mi/merge", map[string]any{"theirs": "b", "resolutions": c.res})
		errs, _ := r.obj(t)["errors"].([]any)
		if r.status != 422 || len(errs) == 0 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		if fe := errs[0].(map[string]any); fe["pointer"] != c.pointer || fe["rule"] == "" {
			t.Fatalf("%s: %v, want pointer %s", c.name, fe, c.pointer)
		}
		if e.hash("mi") != before {
			t.Fatalf("%s: a refused merge changed main", c.name)
		}
	}
	e.must(e.post("/v1/contexts/mi/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{
		"x": map[string]any{"value": map[string]any{"text": "both"}, "type": "note", "produced_by": "planner"}, edgeKey: map[string]any{"value": map[string]any{"page": 4}}}}), 201)
}

// TestMergeWithoutACommitReportsItsResolutionsUnused: a merge that writes
// no merge commit (up_to_date, fast_forward) settles no conflict, so each
// resolution it was given is listed in unused, as a three-way merge lists
// the keys that matched none of its conflicts.
func TestMergeWithoutACommitReportsItsResolutionsUnused(t *testing.T) {
	e := newEnv(t)
	e.createContext("mu", "observe")
	e.must(e.post("/v1/contexts/mu/artifacts", map[string]any{"id": "x", "type": "note", "data": map[string]any{"text": "base"}}), 201)
	e.must(e.post("/v1/contexts/mu/branches", map[string]any{"name": "b"}), 201)
	e.must(e.post("/v1/contexts/mu/artifacts", map[string]any{"id": "x", "branch": "b", "type": "note", "data": map[string]any{"text": "b"}}), 201)
	res := map[string]any{"x": map[string]any{"take": "ours"}, "edge:x -cites-> y": map[string]any{"take": "theirs"}}
	for _, c := range []struct{ ours, theirs, kind string }{
		{"b", "main", "up_to_date"},
		{"main", "b", "fast_forward"},
	} {
		out := e.must(e.post("/v1/contexts/mu/merge", map[string]any{"ours": c.ours, "theirs": c.theirs, "resolutions": res}), 200)
		if out["kind"] != c.kind {
			t.Fatalf("%s into %s: %v", c.theirs, c.ours, out)
		}
		if got := fmt.Sprint(out["unused"]); got != "[edge:x -cites-> y x]" {
			t.Fatalf("%s: unused = %s, want both resolution keys", c.kind, got)
		}
	}
}

// TestMergeRefusedInQuarantineNamesTheField: in an enforce context, a
// merge that would take theirs' claim onto a verdict ours has since
// found FAILED is refused as the same write made directly is (409
// quarantined), and, like it, names the field it rests on: /theirs, whose
// edge it is, rule confirmed, with a detail that does not count the
// merge's own ops. Nothing is written.
func TestMergeRefusedInQuarantineNamesTheField(t *testing.T) {
	e := newEnv(t)
	e.createContext("mq", "enforce")
	fetch := func(body string) {
		t.Helper()
		e.must(e.post("/v1/contexts/mq/fetches", map[string]any{"id": "f1", "url": "https://g.example/",
			"status": 200, "content_type": "text/plain", "body": body}), 201)
	}
	fetch("a report long enough to count as a real read of the page")
	e.must(e.post("/v1/contexts/mq/branches", map[string]any{"name": "b"}), 201)
	e.must(e.post("/v1/contexts/mq/artifacts", map[string]any{"id": "c2", "branch": "b", "type": "claim", "data": map[string]any{"text": "x"},
		"edges": []map[string]any{{"rel": "derived_from", "to": "f1"}}}), 201)
	fetch("")
	before := e.hash("mq")
	r := e.post("/v1/contexts/mq/merge", map[string]any{"theirs": "b"})
	p := e.must(r, 409)
	errs, _ := p["errors"].([]any)
	if p["type"] != ProblemTypePrefix+CodeQuarantined || len(errs) != 1 || p["tainted_by"] == nil {
		t.Fatalf("merge onto a FAILED verdict: %d %s", r.status, r.body)
	}
	if fe := errs[0].(map[string]any); fe["pointer"] != "/theirs" || fe["rule"] != "confirmed" || strings.HasPrefix(fmt.Sprint(p["detail"]), "op ") {
		t.Fatalf("merge onto a FAILED verdict: %s", r.body)
	}
	if e.hash("mq") != before {
		t.Fatal("a refused merge changed main")
	}
}

// TestMergeValueRacesARetype: a value resolution with no type of its own
// takes the artifact's type on ours, which a write may change after the
// merge checked the value against the type it saw. Racing such a retype
// (a note made a claim) never ends with ours holding a claim whose data
// the claim schema refuses: the value is checked again in the committer,
// against the type it is written as on the head the merge lands on.
func TestMergeValueRacesARetype(t *testing.T) {
	e := newEnv(t)
	e.createContext("rt", "observe")
	landed := 0
	for i := range 40 {
		key, branch := fmt.Sprintf("k%d", i), fmt.Sprintf("feat%d", i)
		put := func(branch, typ, text string) *resp {
			return e.post("/v1/contexts/rt/artifacts", map[string]any{"id": key, "branch": branch, "type": typ, "data": map[string]any{"text": text}})
		}
		e.must(put("main", "note", "base"), 201)
		e.must(e.post("/v1/contexts/rt/branches", map[string]any{"name": branch}), 201)
		e.must(put("main", "note", "ours"), 201)
		e.must(put(branch, "note", "theirs"), 201)
		var wg sync.WaitGroup
		var merged, retyped *resp
		wg.Go(func() {
			merged = e.post("/v1/contexts/rt/merge", map[string]any{"theirs": branch, "resolutions": map[string]any{
				key: map[string]any{"value": map[string]any{"text": ""}}}})
		})
		wg.Go(func() { retyped = put("main", "claim", "ours, a claim now") })
		wg.Wait()
		e.must(retyped, 201)
		a := e.must(e.get("/v1/contexts/rt/artifacts/"+key), 200)
		data, _ := a["data"].(map[string]any)
		if a["type"] == "claim" && data["text"] == "" {
			t.Fatalf("race %d: a claim with empty text landed (merge %d %s)", i, merged.status, merged.body)
		}
		if merged.status == 201 {
			landed++
		}
		if merged.status != 201 && merged.status != 422 {
			t.Fatalf("race %d: merge %d %s", i, merged.status, merged.body)
		}
	}
	t.Logf("%d of 40 merges landed", landed)
}

// TestOpenAPIMergeWithResolutionsMatches: a merge's answers as the
// OpenAPI document declares them once conflicts are in play — the 409
// listing them, and the 201 whose resolved lists the conflicts its
// resolutions settled (objects, as in the 409) and whose unused lists the
// keys that matched none.
func TestOpenAPIMergeWithResolutionsMatches(t *testing.T) {
	e := newEnv(t)
	v := newOpenAPIValidator(t, e.get("/openapi.json").body)
	e.createContext("mo", "observe")
	put := func(branch, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/mo/artifacts", map[string]any{"id": "x", "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "base")
	e.must(e.post("/v1/contexts/mo/branches", map[string]any{"name": "b"}), 201)
	put("main", "ours")
	put("b", "theirs")
	for _, c := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"theirs": "b"}, 409},
		{map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{"take": "theirs"}, "nothing": map[string]any{"take": "ours"}}}, 201},
	} {
		r := e.post("/v1/contexts/mo/merge", c.body)
		if r.status != c.status {
			t.Fatalf("%v: %d %s", c.body, r.status, r.body)
		}
		v.check("POST", "/v1/contexts/mo/merge", r)
	}
}
