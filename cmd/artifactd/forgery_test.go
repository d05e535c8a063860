package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// forgedStore writes, straight through the store (as an attacker editing
// a bundle and recomputing every hash and id would end up), a context
// whose fetch_verdict says what its evidence does not, and exports it.
func forgedBundle(t *testing.T, edit func(d *gate.VerdictData), storeBody bool) (bundle, srcDir string) {
	t.Helper()
	ctx := context.Background()
	srcDir = t.TempDir()
	st, err := store.Open(ctx, store.Options{Dir: srcDir, NoSync: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	body := []byte{} // an empty 200: FAILED transport.empty_body
	res := gate.Classify(gate.Evidence{URL: "https://shop.example/p", Status: 200, Body: body})
	if res.Verdict != gate.Failed {
		t.Fatalf("fixture: %s", res.Verdict)
	}
	if storeBody {
		if _, err := st.PutContextBlob(ctx, "run", body); err != nil {
			t.Fatal(err)
		}
	}
	d := gate.NewVerdictData(res, gate.FetchedByAgent)
	edit(&d)
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	ops := []graph.Op{cliPut("f", "fetch_verdict", string(raw)), cliPut("c", "claim", `{"text":"19.99"}`), cliLink("c", "extracted_from", "f")}
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "run", Author: "agent", Message: "forged", Ops: ops}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bundle = filepath.Join(t.TempDir(), "run.jsonl")
	if code, _, stderr := runArtifactd(t, "export", "--data", srcDir, "--context", "run", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	// Its hashes are all right (the store computed them) — and yet
	// replay refuses it, because its content does not bear out its gate
	// outputs.
	if code, _, stderr := runArtifactd(t, "replay", bundle); code != 2 || !strings.Contains(stderr, "hashes verify, but its content does not") {
		t.Fatalf("replay of a forged bundle: exit %d: %s", code, stderr)
	}
	return bundle, srcDir
}

func TestImportRefusesForgedVerdict(t *testing.T) {
	bundle, _ := forgedBundle(t, func(d *gate.VerdictData) {
		// FAILED edited into RETRIEVED, receipt included.
		d.Verdict, d.Reason, d.Layer = gate.Retrieved, "", ""
		d.Receipt.Verdict, d.Receipt.Reason, d.Receipt.Layer = gate.Retrieved, "", ""
	}, true)
	fresh := t.TempDir()
	code, _, stderr := runArtifactd(t, "import", "--data", fresh, bundle)
	if code != 2 || !strings.Contains(stderr, `fetch_verdict "f"`) || !strings.Contains(stderr, "rederived") && !strings.Contains(stderr, "not RETRIEVED") {
		t.Fatalf("import of a forged verdict: exit %d: %s", code, stderr)
	}
	// Nothing was written: the context does not exist.
	if code, _, _ := runArtifactd(t, "log", "--data", fresh, "--context", "run"); code == 0 {
		t.Fatal("a refused import left a context behind")
	}
}

func TestImportRefusesMissingBlob(t *testing.T) {
	bundle, src := forgedBundle(t, func(*gate.VerdictData) {}, false)
	code, _, stderr := runArtifactd(t, "import", "--data", t.TempDir(), bundle)
	if code != 2 || !strings.Contains(stderr, "not in the bundle") {
		t.Fatalf("import of a verdict without its body: exit %d: %s", code, stderr)
	}
	// fsck of the store that lacks the blob says so.
	code, out, stderr := runArtifactd(t, "fsck", "--data", src, "--json")
	if code == 0 || !strings.Contains(out+stderr, `"blob"`) {
		t.Fatalf("fsck with a missing body blob: exit %d: %s %s", code, out, stderr)
	}
}

// TestImportValidatesAgainstTheChainsSchemas: data that its type's schema,
// as the chain defines it at that commit, does not allow is refused by
// import, though every hash of the bundle is right.
func TestImportValidatesAgainstTheChainsSchemas(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	st, err := store.Open(ctx, store.Options{Dir: src, NoSync: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	def := graph.TypeDef{Name: "spend", Role: graph.RoleSource, Schema: json.RawMessage(`{"required":["usd"],"type":"object"}`)}
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "run", Author: "agent", Message: "ok", Types: []graph.TypeDef{def},
		Ops: []graph.Op{cliPut("s1", "spend", `{"usd":3}`)}}); err != nil {
		t.Fatal(err)
	}
	// Written straight through the store, which does not validate: the
	// server's door would have refused it.
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "run", Author: "agent", Message: "bad", Types: []graph.TypeDef{def},
		Ops: []graph.Op{cliPut("s2", "spend", `{"eur":3}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "run.jsonl")
	if code, _, stderr := runArtifactd(t, "export", "--data", src, "--context", "run", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	code, _, stderr := runArtifactd(t, "import", "--data", t.TempDir(), bundle)
	if code != 2 || !strings.Contains(stderr, `spend "s2"`) || !strings.Contains(stderr, "schema") {
		t.Fatalf("import of data its schema refuses: exit %d: %s", code, stderr)
	}
}

// TestImportWithOperatorRuleset: a verdict whose receipt names a ruleset
// the importer does not know is refused; given the ruleset file the
// server ran with (import --gate-rules), it is re-derived and accepted.
func TestImportWithOperatorRuleset(t *testing.T) {
	rulesFile := filepath.Join(t.TempDir(), "acme.json")
	if err := os.WriteFile(rulesFile, []byte(`{"format":1,"name":"acme/v1","extends":"gate/v2","about":"an operator's ruleset"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := gate.ParseRules(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := t.TempDir()
	st, err := store.Open(ctx, store.Options{Dir: src, NoSync: true, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"price":3,"currency":"EUR"}`)
	if _, err := st.PutContextBlob(ctx, "run", body); err != nil {
		t.Fatal(err)
	}
	res := gate.ClassifyWith(gate.Evidence{URL: "https://shop.example/p", Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}, rules)
	data, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, store.CommitRequest{Context: "run", Author: "gate", Message: "fetch", Ops: []graph.Op{cliPut("f", "fetch_verdict", string(data))}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "run.jsonl")
	if code, _, stderr := runArtifactd(t, "export", "--data", src, "--context", "run", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "import", "--data", t.TempDir(), bundle); code != 2 || !strings.Contains(stderr, "acme/v1") {
		t.Fatalf("import without the ruleset: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "import", "--data", t.TempDir(), "--gate-rules", rulesFile, bundle); code != 0 {
		t.Fatalf("import with the ruleset: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "replay", bundle); code != 2 || !strings.Contains(stderr, "acme/v1") {
		t.Fatalf("replay without the ruleset: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArtifactd(t, "replay", "--gate-rules", rulesFile, bundle); code != 0 {
		t.Fatalf("replay with the ruleset: exit %d: %s", code, stderr)
	}
}
