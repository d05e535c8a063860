package httpapi

import "testing"

// TestCreateExistingContextNamesItsID: POST /v1/contexts with an id that
// is taken is 409 naming /id with rule "unique", as every other refusal
// names its field; it named none before. The context is unchanged.
func TestCreateExistingContextNamesItsID(t *testing.T) {
	e := newEnv(t)
	e.createContext("taken", "enforce")
	m := e.must(e.post("/v1/contexts", map[string]any{"id": "taken", "quarantine": "observe"}), 409)
	errs, _ := m["errors"].([]any)
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one naming /id", m["errors"])
	}
	fe := errs[0].(map[string]any)
	if fe["pointer"] != "/id" || fe["rule"] != "unique" {
		t.Fatalf("errors name %v, rule %v; want /id, rule unique: %v", fe["pointer"], fe["rule"], m)
	}
	if got := e.must(e.get("/v1/contexts/taken"), 200)["quarantine"]; got != "enforce" {
		t.Fatalf("quarantine after the refused create: %v, want enforce", got)
	}
}
