package gate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rewrite regenerates golden files: go test ./gate -run Golden -rewrite.
// Review the diff before committing it.
var rewrite = flag.Bool("rewrite", false, "rewrite the golden files under testdata")

// TestGoldenReceiptsV1 keeps gate/v1 exactly: the receipt of every shared
// gate case under the gate/v1 ruleset, without its ruleset_hash (receipts
// of the first release had none), is byte for byte the receipt the first
// release wrote (testdata/receipts/<case>.json, recorded before the rules
// moved into a file). These files are never rewritten.
func TestGoldenReceiptsV1(t *testing.T) {
	v1, err := Lookup(RulesetV1, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range loadGateCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			rc := ClassifyWith(c.evidence(), v1).Receipt
			if rc.RulesetHash != v1.Hash() {
				t.Fatalf("hash %q, want %q", rc.RulesetHash, v1.Hash())
			}
			rc.RulesetHash = ""
			checkGolden(t, filepath.Join("testdata", "receipts", c.Name+".json"), rc, false)
		})
	}
}

// TestGoldenReceipts keeps the receipt of every shared gate case under
// gate/v2 (testdata/receipts-v2/<case>.json), and checks which cases
// gate/v2 records differently from gate/v1: only those listed here and in
// docs/GATE.md may differ in anything but the ruleset name and hash, and
// none in its verdict or reason.
func TestGoldenReceipts(t *testing.T) {
	v1, _ := Lookup(RulesetV1, "")
	v2 := builtinRuleset(t, "gate/v2")
	var changed []string
	for _, c := range loadGateCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			rc := ClassifyWith(c.evidence(), v2).Receipt
			checkGolden(t, filepath.Join("testdata", "receipts-v2", c.Name+".json"), rc, false)
			old := ClassifyWith(c.evidence(), v1).Receipt
			old.Ruleset, old.RulesetHash = rc.Ruleset, rc.RulesetHash
			a, _ := json.Marshal(old)
			b, _ := json.Marshal(rc)
			if !bytes.Equal(a, b) {
				changed = append(changed, c.Name)
			}
			if old.Verdict != rc.Verdict || old.Reason != rc.Reason {
				t.Errorf("gate/v2 judges %s/%s, gate/v1 %s/%s", rc.Verdict, rc.Reason, old.Verdict, old.Reason)
			}
		})
	}
	sort.Strings(changed)
	// No shared case changes its verdict or reason; these two gain a
	// phrase signal besides the structural one.
	if want := []string{"login-wall", "soft-404"}; strings.Join(changed, ",") != strings.Join(want, ",") {
		t.Errorf("gate/v2 changes the receipts of %v, want %v", changed, want)
	}
}

// TestGoldenReceiptsV3 keeps the receipt of every shared gate case under
// gate/v3, the default (testdata/receipts-v3/<case>.json; rewrite with
// -rewrite), and checks that gate/v3 records none of them differently
// from gate/v2 but for the ruleset name and hash.
func TestGoldenReceiptsV3(t *testing.T) {
	v2 := builtinRuleset(t, "gate/v2")
	if RulesetVersion != "gate/v3" {
		t.Fatalf("the default is %s", RulesetVersion)
	}
	var changed []string
	for _, c := range loadGateCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			rc := Classify(c.evidence()).Receipt
			checkGolden(t, filepath.Join("testdata", "receipts-v3", c.Name+".json"), rc, *rewrite)
			old := ClassifyWith(c.evidence(), v2).Receipt
			old.Ruleset, old.RulesetHash = rc.Ruleset, rc.RulesetHash
			a, _ := json.Marshal(old)
			b, _ := json.Marshal(rc)
			if !bytes.Equal(a, b) {
				changed = append(changed, c.Name)
			}
		})
	}
	if len(changed) > 0 {
		t.Errorf("gate/v3 changes the receipts of %v, want none", changed)
	}
}

// builtinRuleset returns the built-in ruleset of that name.
func builtinRuleset(tb testing.TB, name string) *Rules {
	tb.Helper()
	r := builtin().byName(name)
	if r == nil {
		tb.Fatalf("no built-in ruleset %s", name)
	}
	return r
}

// checkGolden compares the indented JSON of v with the file at path (or
// writes it when write is set).
func checkGolden(t *testing.T, path string, v any, write bool) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if write {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (create it with -rewrite): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file:\n got %s\nwant %s", path, got, want)
	}
}
