package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

// judgement is what anyone judging a context at one commit sees: its
// trust report, the audit of every answer, the diff from the commit
// before, and the structural evaluation, as canonical JSON.
type judgement struct {
	Quarantine string
	Audits     map[string]string
	Diff       string
	Eval       string
}

// scrubJSON re-encodes a JSON value with the given top-level members
// removed (ones that name where the answer came from, not what it says).
func scrubJSON(t *testing.T, raw []byte, drop ...string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, raw)
	}
	for _, k := range drop {
		delete(v, k)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hashing.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

// TestTrustIsAFunctionOfTheChain runs one pipeline with user types, a
// custom dependency relation, a FAILED fetch under it and a schema change
// between commits through the server, then judges every commit three ways
// — over HTTP while serving, with the offline CLI on the same data
// directory, and with the CLI on a fresh store that imported an export of
// the context and has no type or relation registered — and requires the
// same quarantine report, audits, diffs and evaluations at every commit.
func TestTrustIsAFunctionOfTheChain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	do := func(method, path string, body any, want int) []byte {
		t.Helper()
		code, b := httpDo(t, method, ts.URL+path, body)
		if code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, b)
		}
		return b
	}
	// Definitions a real pipeline brings: its own types and relation.
	do("PUT", "/v1/types/spend", map[string]any{"role": "source", "description": "a ledger line", "schema": map[string]any{
		"type": "object", "required": []string{"usd"}, "properties": map[string]any{"usd": map[string]any{"type": "number"}}}}, 201)
	do("PUT", "/v1/types/table", map[string]any{"role": "derived", "schema": map[string]any{"type": "object"}}, 201)
	do("PUT", "/v1/types/variance", map[string]any{"role": "derived", "schema": map[string]any{"type": "object"}}, 201)
	do("PUT", "/v1/relations/materialized_from", map[string]any{"depends": true, "description": "a table built from its inputs"}, 201)
	do("POST", "/v1/contexts", map[string]any{"id": "pipe", "quarantine": "observe"}, 201)

	commits := []string{}
	head := func(b []byte) {
		var w struct {
			Commit string `json:"commit"`
		}
		if err := json.Unmarshal(b, &w); err != nil || w.Commit == "" {
			t.Fatalf("no commit in %s", b)
		}
		commits = append(commits, w.Commit)
	}
	put := func(id, typ string, data any, edges ...map[string]any) {
		if edges == nil {
			edges = []map[string]any{}
		}
		head(do("POST", "/v1/contexts/pipe/artifacts", map[string]any{"id": id, "type": typ, "produced_by": "pipeline", "data": data, "edges": edges}, 201))
	}
	edge := func(rel, to string) map[string]any { return map[string]any{"rel": rel, "to": to} }
	empty := ""
	head(do("POST", "/v1/contexts/pipe/fetches", map[string]any{"id": "rates", "url": "https://rates.example/today", "status": 200,
		"headers": map[string]string{"Content-Type": "application/json"}, "body": empty}, 201))
	put("ledger", "spend", map[string]any{"usd": 1200})
	put("t1", "table", map[string]any{"rows": 2}, edge("materialized_from", "ledger"), edge("materialized_from", "rates"))
	put("v1", "variance", map[string]any{"pct": 3.5}, edge("derived_from", "t1"))
	put("a1", "answer", map[string]any{"text": "spend is 3.5% over plan"}, edge("supported_by", "v1"))
	// The schema of table changes between commits: the next put records
	// the new definition.
	do("PUT", "/v1/types/table", map[string]any{"role": "derived", "description": "now with a row count",
		"schema": map[string]any{"type": "object", "required": []string{"rows"}}}, 200)
	put("t2", "table", map[string]any{"rows": 1}, edge("materialized_from", "ledger"))
	put("a2", "answer", map[string]any{"text": "spend is 1200 USD"}, edge("supported_by", "t2"), edge("supported_by", "ledger"))
	// Data the old schema allowed and the new one does not is refused now.
	do("POST", "/v1/contexts/pipe/artifacts", map[string]any{"id": "t3", "type": "table", "data": map[string]any{}}, 422)

	answersAt := func(i int) []string {
		var out []string
		for _, a := range []struct {
			id string
			at int
		}{{"a1", 4}, {"a2", 6}} {
			if i >= a.at {
				out = append(out, a.id)
			}
		}
		return out
	}
	judgeHTTP := func(i int) judgement {
		c := commits[i]
		j := judgement{Audits: map[string]string{}}
		j.Quarantine = scrubJSON(t, do("GET", "/v1/contexts/pipe/quarantine?at="+c, nil, 200))
		for _, a := range answersAt(i) {
			j.Audits[a] = scrubJSON(t, do("GET", "/v1/contexts/pipe/audit/"+a+"?at="+c, nil, 200))
		}
		if i > 0 {
			j.Diff = scrubJSON(t, do("GET", "/v1/contexts/pipe/diff?from="+commits[i-1]+"&to="+c, nil, 200))
		}
		j.Eval = scrubJSON(t, do("GET", "/v1/contexts/pipe/eval?at="+c, nil, 200))
		return j
	}
	served := make([]judgement, len(commits))
	for i := range commits {
		served[i] = judgeHTTP(i)
	}
	// The judgement the test is about: the custom relation carries the
	// FAILED fetch's taint to t1, v1 and a1; a2 rests on clean inputs.
	last := served[len(served)-1]
	for _, want := range []string{`"id":"rates"`, `"blast_radius":3`} {
		if !strings.Contains(last.Quarantine, want) {
			t.Fatalf("quarantine at the head lacks %s: %s", want, last.Quarantine)
		}
	}
	if !strings.Contains(last.Eval, `"unsupported_answers":["a1"]`) || !strings.Contains(last.Eval, `"supported_answers":1`) {
		t.Fatalf("eval at the head: %s", last.Eval)
	}
	// While serving, the verify route replays the stored chain.
	hashOf := func(i int) string {
		var c struct {
			ContextHash string `json:"context_hash"`
		}
		_ = json.Unmarshal(do("GET", "/v1/contexts/pipe/commits/"+commits[i], nil, 200), &c)
		return c.ContextHash
	}
	headHash := hashOf(len(commits) - 1)
	if b := do("POST", "/v1/contexts/pipe/verify", map[string]any{"hash": headHash}, 200); !bytes.Contains(b, []byte(`"match":true`)) {
		t.Fatalf("verify head: %s", b)
	}
	old := hashOf(3)
	b := do("POST", "/v1/contexts/pipe/verify", map[string]any{"hash": old}, 200)
	if !bytes.Contains(b, []byte(`"match":false`)) || !bytes.Contains(b, []byte(`"matches_commit":"`+commits[3]+`"`)) {
		t.Fatalf("verify an older hash: %s", b)
	}
	// replay --server uses the route while the directory is locked, and
	// an offline command on the locked directory says what to do.
	if code, _, stderr := runArtifactd(t, "replay", "--server", ts.URL, "--context", "pipe", "--verify", headHash); code != 0 {
		t.Fatalf("replay --server: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "replay", "--server", ts.URL, "--context", "pipe", "--verify", old); code != 1 || !strings.Contains(stderr, commits[3]) {
		t.Fatalf("replay --server with an older hash: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "audit", "--data", dir, "--context", "pipe", "a1"); code != 2 || !strings.Contains(stderr, "--server") {
		t.Fatalf("offline on a served directory: exit %d: %s", code, stderr)
	}
	ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Export, and import into a fresh store that registers nothing.
	bundle := filepath.Join(t.TempDir(), "pipe.jsonl")
	if code, _, stderr := runArtifactd(t, "export", "--data", dir, "--context", "pipe", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	fresh := t.TempDir()
	if code, _, stderr := runArtifactd(t, "import", "--data", fresh, bundle); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	judgeCLI := func(dataDir string, i int) judgement {
		c := commits[i]
		run := func(args ...string) []byte {
			t.Helper()
			code, out, stderr := runArtifactd(t, append(args, "--data", dataDir, "--context", "pipe")...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, stderr)
			}
			return []byte(out)
		}
		j := judgement{Audits: map[string]string{}}
		j.Quarantine = scrubJSON(t, run("quarantine", "--at", c, "--json"))
		for _, a := range answersAt(i) {
			j.Audits[a] = scrubJSON(t, run("audit", "--at", c, a))
		}
		if i > 0 {
			j.Diff = scrubJSON(t, run("diff", commits[i-1], c, "--json"))
		}
		j.Eval = scrubJSON(t, run("eval", "--at", c, "--json"))
		return j
	}
	for i := range commits {
		for _, path := range []struct{ name, dir string }{{"offline CLI", dir}, {"imported copy", fresh}} {
			got := judgeCLI(path.dir, i)
			if fmt.Sprint(got) != fmt.Sprint(served[i]) {
				t.Fatalf("commit %d (%s): the %s judges differently from the server\n got  %+v\n want %+v", i, commits[i], path.name, got, served[i])
			}
		}
	}
	// Offline verification of the imported copy, and an empty --verify
	// is a usage error, not a pass.
	if code, _, stderr := runArtifactd(t, "replay", "--data", fresh, "--context", "pipe", "--verify", headHash); code != 0 {
		t.Fatalf("replay the import: %d %s", code, stderr)
	}
	if code, _, _ := runArtifactd(t, "replay", "--data", fresh, "--context", "pipe", "--verify", ""); code != 2 {
		t.Fatalf("replay --verify \"\": exit %d, want 2", code)
	}
}
