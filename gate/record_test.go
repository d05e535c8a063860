package gate

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestCheckVerdictRulesets: a verdict is derived again with the ruleset its
// receipt names, and one naming an unknown ruleset is refused.
func TestCheckVerdictRulesets(t *testing.T) {
	// A short paywall page: RETRIEVED under gate/v1, UNKNOWN from gate/v2.
	ev := htmlEvidence(page("Budget", "<p>The city faces a gap in next year's budget. Subscribe to continue reading.</p>"))
	v1, _ := Lookup(RulesetV1, "")
	blobs := map[string][]byte{}
	record := func(res Result) json.RawMessage {
		blobs[res.Receipt.BodySHA256] = ev.Body
		b, err := json.Marshal(NewVerdictData(res, FetchedByAgent))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	blob := func(name string) ([]byte, bool, error) { b, ok := blobs[name]; return b, ok, nil }

	old := ClassifyWith(ev, v1)
	old.Receipt.RulesetHash = "" // as the first release wrote it
	if old.Verdict != Retrieved {
		t.Fatalf("gate/v1: %s", old.Reason)
	}
	if err := CheckVerdict(record(old), blob); err != nil {
		t.Fatalf("a gate/v1 receipt without a hash is re-derived with gate/v1: %v", err)
	}
	now := Classify(ev)
	if now.Reason != ReasonPaywall {
		t.Fatalf("%s: %s", RulesetVersion, now.Reason)
	}
	if err := CheckVerdict(record(now), blob); err != nil {
		t.Fatal(err)
	}
	// Claiming the default (gate/v3) for the v1 verdict: re-derived under
	// it, refused.
	forged := old
	forged.Receipt.Ruleset, forged.Receipt.RulesetHash = RulesetVersion, BuiltinRules().Hash()
	var ve *VerdictError
	if err := CheckVerdict(record(forged), blob); !errors.As(err, &ve) || ve.Rule != "rederived" {
		t.Fatalf("forged ruleset: %v", err)
	}
	for _, c := range []struct{ name, hash string }{{"site/v1", "sha256:" + sixtyFourZeros}, {RulesetVersion, ""}, {RulesetV1, BuiltinRules().Hash()}} {
		bad := now
		bad.Receipt.Ruleset, bad.Receipt.RulesetHash = c.name, c.hash
		if err := CheckVerdict(record(bad), blob); !errors.As(err, &ve) || ve.Pointer != "/receipt/ruleset" || ve.Rule != "ruleset" {
			t.Errorf("ruleset %q %q: %v", c.name, c.hash, err)
		}
	}
	// An operator's ruleset is known to a set that holds it.
	site, err := ParseRules([]byte(`{"format":1,"name":"site/v1","extends":"gate/v2","thresholds":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	res := ClassifyWith(ev, site)
	if err := CheckVerdict(record(res), blob); err == nil {
		t.Fatal("the built-in set must not know site/v1")
	}
	rs := BuiltinRulesets()
	if err := rs.Add(site); err != nil {
		t.Fatal(err)
	}
	if err := CheckVerdictWith(record(res), blob, rs); err != nil {
		t.Fatal(err)
	}
	// A file read re-derives with its kind (no status to invent).
	fe := Evidence{Kind: ReadFile, Path: "notes.md", Body: []byte("# Notes\n\n" + prose)}
	fres := Classify(fe)
	blobs[fres.Receipt.BodySHA256] = fe.Body
	fb, _ := json.Marshal(NewVerdictData(fres, FetchedByAgent))
	if err := CheckVerdict(fb, blob); err != nil || fres.Verdict != Retrieved {
		t.Fatalf("file read: %s %v", fres.Verdict, err)
	}
}

const sixtyFourZeros = "0000000000000000000000000000000000000000000000000000000000000000"
