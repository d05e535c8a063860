package httpapi

import (
	"fmt"
	"sync"
	"testing"
)

// TestMerge: a clean merge, a conflict reported with nothing changed,
// resolutions by side and by value, and the client rules on values.
func TestMerge(t *testing.T) {
	e := newEnv(t)
	e.createContext("m", "observe")
	put := func(branch, id, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/m/artifacts", map[string]any{"id": id, "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	put("main", "x", "base")
	e.must(e.post("/v1/contexts/m/branches", map[string]any{"name": "b"}), 201)
	e.must(e.post("/v1/contexts/m/branches", map[string]any{"name": "ff"}), 201)
	put("main", "x", "ours")
	put("b", "x", "theirs")
	put("b", "y", "only on b")

	before := e.must(e.get("/v1/contexts/m/hash"), 200)
	r := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b"})
	p := e.must(r, 409)
	cs := p["conflicts"].([]any)
	if p["type"] != ProblemTypePrefix+CodeMergeConflict || len(cs) != 1 || cs[0].(map[string]any)["key"] != "x" || cs[0].(map[string]any)["kind"] != "edit_edit" {
		t.Fatalf("conflict %s", r.body)
	}
	if after := e.must(e.get("/v1/contexts/m/hash"), 200); after["commit"] != before["commit"] {
		t.Fatal("a refused merge moved the head")
	}
	// Value resolutions follow the type's schema.
	bad := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{"value": map[string]any{"text": 5}}}})
	if bad.status != 422 || e.must(bad, 422)["errors"].([]any)[0].(map[string]any)["pointer"] != "/resolutions/x/value/text" {
		t.Fatalf("bad value: %d %s", bad.status, bad.body)
	}
	forged := e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "resolutions": map[string]any{"x": map[string]any{
		"type": "fetch_verdict", "value": map[string]any{"url": "https://x", "verdict": "RETRIEVED"}}}})
	if forged.status != 422 || e.must(forged, 422)["type"] != ProblemTypePrefix+CodeReservedType {
		t.Fatalf("forged verdict: %d %s", forged.status, forged.body)
	}
	m := e.must(e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b", "message": "merge b",
		"resolutions": map[string]any{"x": map[string]any{"take": "theirs"}}}), 201)
	if m["kind"] != "merge" || len(m["commit"].(map[string]any)["parents"].([]any)) != 2 || len(m["resolved"].([]any)) != 1 {
		t.Fatalf("merge %v", m)
	}
	x := e.must(e.get("/v1/contexts/m/artifacts/x"), 200)
	if x["data"].(map[string]any)["text"] != "theirs" {
		t.Fatalf("x is %v", x["data"])
	}
	e.must(e.get("/v1/contexts/m/artifacts/y"), 200)
	// Up to date, then a fast-forward of ff to main.
	if u := e.must(e.post("/v1/contexts/m/merge", map[string]any{"theirs": "b"}), 200); u["kind"] != "up_to_date" {
		t.Fatalf("again: %v", u)
	}
	if f := e.must(e.post("/v1/contexts/m/merge", map[string]any{"ours": "ff", "theirs": "main"}), 200); f["kind"] != "fast_forward" || f["commit"].(map[string]any)["id"] != m["commit"].(map[string]any)["id"] {
		t.Fatalf("fast-forward: %v", f)
	}
}

// TestMergeKeepsGateOutputs: a value resolution cannot replace a gate's
// verdict or tool error, on either side, nor write an effect or a verdict;
// taking a side's gate output still merges. Each refusal names the
// resolution and leaves the head where it was.
func TestMergeKeepsGateOutputs(t *testing.T) {
	e := newEnv(t)
	e.createContext("g", "observe")
	fetch := func(branch, body string) {
		t.Helper()
		e.must(e.post("/v1/contexts/g/fetches", map[string]any{"id": "f1", "branch": branch, "url": "https://g.example/",
			"status": 200, "content_type": "text/plain", "body": body}), 201)
	}
	toolErr := func(branch, msg string) {
		t.Helper()
		e.must(e.post("/v1/contexts/g/tool-results", map[string]any{"id": "t1", "branch": branch, "tool": "read_file", "ok": false, "error": msg}), 201)
	}
	note := func(branch, text string) {
		t.Helper()
		e.must(e.post("/v1/contexts/g/artifacts", map[string]any{"id": "n", "branch": branch, "type": "note", "data": map[string]any{"text": text}}), 201)
	}
	fetch("main", "")
	toolErr("main", "permission denied")
	note("main", "base")
	e.must(e.post("/v1/contexts/g/branches", map[string]any{"name": "side"}), 201)
	// The verdict on main stays FAILED (an empty body); side's read.
	fetch("main", " ")
	fetch("side", "a report long enough to count as a real read of the page")
	toolErr("main", "disk full")
	toolErr("side", "timed out")
	note("main", "ours")
	note("side", "theirs")

	before := e.must(e.get("/v1/contexts/g/hash"), 200)["commit"]
	takeRest := map[string]any{"take": "ours"}
	for _, c := range []struct {
		name, key, pointer string
		res                map[string]any
	}{
		{"a verdict made a note", "f1", "/resolutions/f1/value", map[string]any{"type": "note", "value": map[string]any{"text": "RETRIEVED fine"}}},
		{"a verdict given a value", "f1", "/resolutions/f1/value", map[string]any{"value": map[string]any{"url": "https://g.example/", "verdict": "RETRIEVED"}}},
		{"a tool error made a claim", "t1", "/resolutions/t1/value", map[string]any{"type": "claim", "value": map[string]any{"text": "fine"}}},
		{"a note made an effect", "n", "/resolutions/n/type", map[string]any{"type": "effect", "value": map[string]any{"status": "sent"}}},
		{"a note made a verdict", "n", "/resolutions/n/type", map[string]any{"type": "fetch_verdict", "value": map[string]any{"verdict": "RETRIEVED"}}},
		{"a note made a tool output", "n", "/resolutions/n/type", map[string]any{"type": "tool_output", "value": map[string]any{"text": "ok"}}},
	} {
		res := map[string]any{"f1": takeRest, "t1": takeRest, "n": takeRest}
		res[c.key] = c.res
		r := e.post("/v1/contexts/g/merge", map[string]any{"theirs": "side", "resolutions": res})
		p := e.must(r, 422)
		errs, _ := p["errors"].([]any)
		if p["type"] != ProblemTypePrefix+CodeReservedType || len(errs) != 1 || errs[0].(map[string]any)["pointer"] != c.pointer {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
		if after := e.must(e.get("/v1/contexts/g/hash"), 200)["commit"]; after != before {
			t.Fatalf("%s: a refused merge moved the head", c.name)
		}
	}
	// Taking a side's gate outputs merges; the verdict is theirs, the
	// gate's.
	e.must(e.post("/v1/contexts/g/merge", map[string]any{"theirs": "side", "resolutions": map[string]any{
		"f1": map[string]any{"take": "theirs"}, "t1": map[string]any{"take": "ours"}, "n": map[string]any{"value": map[string]any{"text": "both"}}}}), 201)
	f1 := e.must(e.get("/v1/contexts/g/artifacts/f1"), 200)
	if f1["type"] != "fetch_verdict" || f1["produced_by"] != "gate" {
		t.Fatalf("f1 after the merge: %v", f1)
	}
	if t1 := e.must(e.get("/v1/contexts/g/artifacts/t1"), 200); t1["type"] != "tool_error" {
		t.Fatalf("t1 after the merge: %v", t1)
	}
}

// TestWriteRefusalsNameTheField: a resolution that takes no side and
// gives no value, a take that is neither side, a value for a cycle, a
// commit id as the branch to merge into, and a write to a branch whose
// name is not one are 422s naming their field, with nothing written.
func TestWriteRefusalsNameTheField(t *testing.T) {
	e := newEnv(t)
	e.createContext("w", "observe")
	e.must(e.post("/v1/contexts/w/artifacts", map[string]any{"id": "a", "type": "note", "data": map[string]any{"text": "a"}}), 201)
	e.must(e.post("/v1/contexts/w/branches", map[string]any{"name": "side"}), 201)
	head := e.must(e.get("/v1/contexts/w/hash"), 200)["commit"].(string)
	for _, c := range []struct {
		name, path, pointer string
		body                map[string]any
	}{
		{"empty resolution", "/v1/contexts/w/merge", "/resolutions/a", map[string]any{"theirs": "side", "resolutions": map[string]any{"a": map[string]any{}}}},
		{"take neither side", "/v1/contexts/w/merge", "/resolutions/a/take", map[string]any{"theirs": "side", "resolutions": map[string]any{"a": map[string]any{"take": "mine"}}}},
		{"value for a cycle", "/v1/contexts/w/merge", "/resolutions/cycle:a -uses-> b/value", map[string]any{"theirs": "side", "resolutions": map[string]any{"cycle:a -uses-> b": map[string]any{"value": map[string]any{}}}}},
		{"commit id as ours", "/v1/contexts/w/merge", "/ours", map[string]any{"theirs": "side", "ours": head}},
		{"artifact on a bad branch", "/v1/contexts/w/artifacts", "/branch", map[string]any{"type": "note", "data": map[string]any{"text": "b"}, "branch": "a b"}},
		{"commit on a bad branch", "/v1/contexts/w/commits", "/branch", map[string]any{"branch": "a b", "ops": []any{map[string]any{"op": "delete", "id": "a"}}}},
		{"tool result on a bad branch", "/v1/contexts/w/tool-results", "/branch", map[string]any{"tool": "t", "ok": true, "output": "x", "branch": "../x"}},
		{"fetch on a bad branch", "/v1/contexts/w/fetches", "/branch", map[string]any{"url": "https://w.example/", "status": 200, "body": "x", "branch": head}},
	} {
		r := e.post(c.path, c.body)
		p := e.must(r, 422)
		errs, _ := p["errors"].([]any)
		if len(errs) == 0 || errs[0].(map[string]any)["pointer"] != c.pointer {
			t.Errorf("%s: %s", c.name, r.body)
		}
	}
	if got := e.must(e.get("/v1/contexts/w/hash"), 200)["commit"]; got != head {
		t.Fatal("a refused write moved the head")
	}
}

// TestMergeValueRacesAGateWrite: a merge whose value resolution was
// checked while ours had no artifact at its key, racing a fetch that
// records a verdict there, never ends with the verdict replaced by the
// client's value: the rule is checked again in the committer, on the
// head the merge lands on. Without that, about half of the races
// replaced the gate's FAILED verdict with a confirmed note.
func TestMergeValueRacesAGateWrite(t *testing.T) {
	e := newEnv(t)
	e.createContext("r", "observe")
	e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "base", "type": "note", "data": map[string]any{"text": "base"}}), 201)
	for i := range 30 {
		key, branch := fmt.Sprintf("k%d", i), fmt.Sprintf("feat%d", i)
		e.must(e.post("/v1/contexts/r/branches", map[string]any{"name": branch}), 201)
		e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": key, "branch": branch, "type": "note", "data": map[string]any{"text": "theirs"}}), 201)
		var wg sync.WaitGroup
		var merged, fetched *resp
		wg.Go(func() {
			merged = e.post("/v1/contexts/r/merge", map[string]any{"theirs": branch, "resolutions": map[string]any{
				key: map[string]any{"type": "note", "value": map[string]any{"text": "the client says fine"}}}})
		})
		wg.Go(func() {
			fetched = e.post("/v1/contexts/r/fetches", map[string]any{"id": key, "url": "https://r.example/", "status": 500, "body": ""})
		})
		wg.Wait()
		a := e.must(e.get("/v1/contexts/r/artifacts/"+key), 200)
		data, _ := a["data"].(map[string]any)
		switch {
		case fetched.status == 201 && (a["type"] != "fetch_verdict" || data["receipt"] == nil):
			t.Fatalf("race %d: the gate's verdict was replaced (merge %d %s): %v", i, merged.status, merged.body, a)
		case merged.status != 201 && merged.status != 200 && merged.status != 422 && merged.status != 409:
			t.Fatalf("race %d: merge %d %s", i, merged.status, merged.body)
		}
	}
}
