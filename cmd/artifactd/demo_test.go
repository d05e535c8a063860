package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDemoPlanIsTheFixture keeps the embedded copy equal to
// testdata/poison-plan/plan.json.
func TestDemoPlanIsTheFixture(t *testing.T) {
	want, err := os.ReadFile("../../testdata/poison-plan/plan.json")
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	if !bytes.Equal(want, poisonPlan) {
		t.Fatal("cmd/artifactd/demodata/poison-plan.json differs from testdata/poison-plan/plan.json; copy it again")
	}
}

// TestDemo loads the example contexts, checks the quarantine report of the
// plan and the audit run, loads again (nothing changes), and verifies both
// contexts with replay.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if rc := Run(context.Background(), []string{"demo", "--data", dir}, &out, &errb); rc != 0 {
		t.Fatalf("demo: exit %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), "5 quarantined, 1 poison root") || !strings.Contains(out.String(), "audit-demo") {
		t.Fatalf("demo output:\n%s", out.String())
	}
	hashes := regexp.MustCompile(`context hash (sha256:[0-9a-f]{64})`).FindAllStringSubmatch(out.String(), -1)
	if len(hashes) != 2 {
		t.Fatalf("hashes in %s", out.String())
	}
	out.Reset()
	if rc := Run(context.Background(), []string{"demo", "--data", dir}, &out, io.Discard); rc != 0 || strings.Count(out.String(), "already loaded") != 2 {
		t.Fatalf("second demo: %d %s", rc, out.String())
	}
	for i, id := range []string{"poison-plan", "audit-demo"} {
		if rc := Run(context.Background(), []string{"replay", "--data", dir, "--context", id, "--verify", hashes[i][1]}, io.Discard, io.Discard); rc != 0 {
			t.Errorf("replay %s: exit %d", id, rc)
		}
	}
	// The audit run is clean and its answer rests on both fetches.
	st, reg, err := openAPIStore(context.Background(), dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := newServer(st, reg, serveConfig{Logger: discardLogger()})
	rec := newRecorder(srv, "GET", "/v1/contexts/audit-demo/audit/answer")
	var rep struct {
		Summary struct{ Confirmed, Quarantined int } `json:"summary"`
		Sources []struct{ Locator string }           `json:"sources"`
	}
	if err := json.Unmarshal(rec, &rep); err != nil {
		t.Fatalf("%v: %s", err, rec)
	}
	if rep.Summary.Quarantined != 0 || rep.Summary.Confirmed != 6 || len(rep.Sources) != 2 {
		t.Fatalf("audit %s", rec)
	}
}

// TestAPIDocQuotesTheDemoHash keeps docs/API.md's first session true: the
// context hash it shows for the demo's plan is the one the demo loads. It
// quoted a hash of an older demo, which a reader comparing the two took
// for a broken store.
func TestAPIDocQuotesTheDemoHash(t *testing.T) {
	doc, err := os.ReadFile("../../docs/API.md")
	if err != nil {
		t.Fatalf("docs/API.md is part of the repository: %v", err)
	}
	m := regexp.MustCompile(`"context_hash":"(sha256:[0-9a-f]{8,64})…?"`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/API.md quotes no context_hash in its first session")
	}
	var out bytes.Buffer
	if rc := Run(context.Background(), []string{"demo", "--data", t.TempDir()}, &out, io.Discard); rc != 0 {
		t.Fatalf("demo: exit %d", rc)
	}
	got := regexp.MustCompile(`(?s)^poison-plan .*?context hash (sha256:[0-9a-f]{64})`).FindStringSubmatch(out.String())
	if got == nil {
		t.Fatalf("no hash of poison-plan in the demo's output:\n%s", out.String())
	}
	if !strings.HasPrefix(got[1], string(m[1])) {
		t.Errorf("docs/API.md quotes %s… for the demo's plan; the demo loads %s", m[1], got[1])
	}
}
