package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
)

func TestCLIBranchDiffMerge(t *testing.T) {
	dir, head := cliFixture(t)
	// List, then create branches at main and at an older commit.
	code, out, _ := runCLI(t, "branch", "--data", dir, "--context", "run-1")
	if code != 0 || !strings.Contains(out, "exp") || !strings.Contains(out, "main") {
		t.Fatalf("branch list: %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "branch", "--data", dir, "--context", "run-1", "ours"); code != 0 {
		t.Fatalf("branch ours: %s", errOut)
	}
	if code, _, errOut := runCLI(t, "branch", "--data", dir, "--context", "run-1", "theirs", "--at", head.ID.Hex()[:10]); code != 0 {
		t.Fatalf("branch theirs --at: %s", errOut)
	}
	if code, _, errOut := runCLI(t, "branch", "--data", dir, "--context", "run-1", "ours"); code != 2 || !strings.Contains(errOut, "exists") {
		t.Fatalf("duplicate branch: %d %s", code, errOut)
	}

	// Diverge: an edit/edit conflict and a clean change on each side.
	writeOps(t, dir, "ours", cliPut("c", "claim", `{"text":"3 EUR, says ours"}`), cliPut("o", "note", `{}`))
	writeOps(t, dir, "theirs", cliPut("c", "claim", `{"text":"3 EUR, says theirs"}`), cliPut("t", "note", `{}`))

	// diff main → theirs, text and JSON.
	code, out, errOut := runCLI(t, "diff", "--data", dir, "--context", "run-1", "main", "theirs")
	if code != 0 || !strings.Contains(out, "~ c  claim v1 -> v2") || !strings.Contains(out, "+ t  note v1") {
		t.Fatalf("diff: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "diff", "--data", dir, "--context", "run-1", "main", "theirs", "--json")
	var d replay.DiffResult
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Added) != 1 || len(d.Changed) != 1 {
		t.Fatalf("diff --json: %d %s", code, out)
	}

	// The merge stops at the conflict, names it, and changes nothing.
	code, out, errOut = runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "ours", "theirs")
	if code != 1 || !strings.Contains(out, "c  [edit_edit]") || !strings.Contains(out, "theirs: claim v2") || !strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("conflicting merge: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "ours", "theirs", "--json")
	var rep mergeReport
	if code != 1 || json.Unmarshal([]byte(out), &rep) != nil || rep.Status != "conflict" || len(rep.Conflicts) != 1 || rep.Conflicts[0].Key != "c" {
		t.Fatalf("conflicting merge --json: %d %s", code, out)
	}
	// A value must follow its type's schema, as over the API (the CLI
	// merges through the service), and changes nothing when it does not.
	code, _, errOut = runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "ours", "theirs",
		"--resolve-value", `c={"text":5}`)
	if code != 2 || !strings.Contains(errOut, "schema") {
		t.Fatalf("a value against the schema: %d %s", code, errOut)
	}
	// Resolved with a value.
	code, out, errOut = runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "ours", "theirs",
		"--resolve-value", `c={"text":"3 EUR"}`, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Status != "merge" || len(rep.Result.Commit.Parents) != 2 {
		t.Fatalf("resolved merge: %d %s %s", code, out, errOut)
	}
	// Again: up to date. theirs fast-forwards to ours.
	if code, out, _ := runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "ours", "theirs"); code != 0 || !strings.Contains(out, "up to date") {
		t.Fatalf("second merge: %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "merge", "--data", dir, "--context", "run-1", "--into", "theirs", "ours"); code != 0 || !strings.Contains(out, "fast-forwarded") {
		t.Fatalf("fast-forward: %d %s", code, out)
	}
	// Bad resolutions are usage errors.
	for _, bad := range [][]string{{"--resolve", "c=mine"}, {"--resolve", "nokey"}, {"--resolve-value", "c=[1]"}, {"--resolve", "c=ours", "--resolve", "c=theirs"}} {
		args := append([]string{"merge", "--data", dir, "--context", "run-1", "theirs"}, bad...)
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if code, _, errOut := runCLI(t, "fsck", "--data", dir); code != 0 {
		t.Fatalf("fsck: %s", errOut)
	}
}

func TestParseResolutions(t *testing.T) {
	res, err := parseResolutions([]string{"a=b=ours", "edge:x -uses-> y=theirs"}, []string{`k={"v":"a=b"}`})
	if err != nil {
		t.Fatal(err)
	}
	if res["a=b"].Take != "ours" || res["edge:x -uses-> y"].Take != "theirs" || string(res["k"].Value) != `{"v":"a=b"}` {
		t.Fatalf("%+v", res)
	}
}

// TestResolveValueKeyHoldingAnObjectOpener: an artifact id may hold "={",
// and --resolve-value splits at the "={" after which the rest is one JSON
// object; it split at the first one before, and refused the value as not
// JSON. A "={" inside the value's strings stays in the value.
func TestResolveValueKeyHoldingAnObjectOpener(t *testing.T) {
	for _, tc := range []struct{ arg, key, value string }{
		{`a={b={"text":1}`, "a={b", `{"text":1}`},
		{`x={}={"text":"y"}`, "x={}", `{"text":"y"}`},
		{`k={"v":"a={b"}`, "k", `{"v":"a={b"}`},
		{`edge:-> -json-> {"id":"p={q"}={"text":2}`, `edge:-> -json-> {"id":"p={q"}`, `{"text":2}`},
	} {
		res, err := parseResolutions(nil, []string{tc.arg})
		if err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if got, ok := res[tc.key]; !ok || string(got.Value) != tc.value {
			t.Errorf("%s: resolutions %v, want %q -> %s", tc.arg, res, tc.key, tc.value)
		}
	}
	for _, bad := range []string{`k=[1]`, `={"a":1}`, `k={"a":`, `k={b={c`} {
		if _, err := parseResolutions(nil, []string{bad}); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestCLIAuditEval(t *testing.T) {
	dir, head := cliFixture(t)
	code, out, errOut := runCLI(t, "audit", "--data", dir, "--context", "run-1", "a")
	var rep struct {
		Answer    string `json:"answer"`
		Commit    string `json:"commit"`
		Artifacts []struct {
			ID string `json:"id"`
		} `json:"artifacts"`
		Sources []struct {
			Locator string `json:"locator"`
		} `json:"sources"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("audit: %d %s %s", code, out, errOut)
	}
	if rep.Answer != "a" || rep.Commit != head.ID.String() || len(rep.Artifacts) != 4 || len(rep.Sources) != 1 || rep.Sources[0].Locator != "https://shop.example/p" {
		t.Fatalf("audit report: %s", out)
	}
	code, out, _ = runCLI(t, "audit", "--data", dir, "--context", "run-1", "a", "--format", "markdown")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "#") {
		t.Fatalf("audit markdown: %d %s", code, out)
	}
	if code, _, errOut := runCLI(t, "audit", "--data", dir, "--context", "run-1", "nope"); code != 2 || !strings.Contains(errOut, "nope") {
		t.Fatalf("audit of a missing id: %d %s", code, errOut)
	}
	code, out, _ = runCLI(t, "eval", "--data", dir, "--context", "run-1", "--json")
	var ev struct {
		Artifacts        int     `json:"artifacts"`
		SupportedAnswers int     `json:"supported_answers"`
		SupportedShare   float64 `json:"supported_share"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ev) != nil || ev.Artifacts != 5 || ev.SupportedAnswers != 1 || ev.SupportedShare != 1 {
		t.Fatalf("eval: %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "eval", "--data", dir, "--context", "run-1"); code != 0 || !strings.Contains(out, "answers:") {
		t.Fatalf("eval text: %d %s", code, out)
	}
	// An unreadable payload fails the audit and points at fsck.
	var full struct {
		Artifacts []struct {
			ID          string `json:"id"`
			ContentHash string `json:"content_hash"`
		} `json:"artifacts"`
	}
	_, out, _ = runCLI(t, "audit", "--data", dir, "--context", "run-1", "a")
	if err := json.Unmarshal([]byte(out), &full); err != nil || len(full.Artifacts) == 0 {
		t.Fatalf("audit: %v %s", err, out)
	}
	deleteObject(t, dir, full.Artifacts[len(full.Artifacts)-1].ContentHash)
	if code, _, errOut := runCLI(t, "audit", "--data", dir, "--context", "run-1", "a"); code != 2 || !strings.Contains(errOut, "fsck") {
		t.Fatalf("audit over a deleted payload: %d %s", code, errOut)
	}
}

// writeOps commits ops on a branch of run-1 in dir through the store.
func writeOps(t *testing.T, dir, branch string, ops ...graph.Op) {
	t.Helper()
	ctx := context.Background()
	s, err := openStore(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Commit(ctx, store.CommitRequest{Context: "run-1", Branch: branch, Author: "t", Message: "m", Ops: ops}); err != nil {
		t.Fatal(err)
	}
}

// deleteObject removes the stored payload of content hash ch (as
// "sha256:…") from the store in dir, as a damaged disk might.
func deleteObject(t *testing.T, dir, ch string) {
	t.Helper()
	d, err := hashing.ParseDigest(ch)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := badgerkv.Open(context.Background(), badgerkv.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	// The object key of the store's layout (store/doc.go): obj NUL <hash>.
	if err := drv.Commit(context.Background(), kv.Batch{Deletes: [][]byte{append([]byte("obj\x00"), d[:]...)}}); err != nil {
		t.Fatal(err)
	}
}
