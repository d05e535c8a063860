package httpapi

import (
	"strings"
	"testing"

	"github.com/artifactd/artifactd/gate"
)

// TestFetchReadKindsAndText: file and tool reads over HTTP need no status,
// produced_by is recorded, and the answer carries the extracted text with
// a blob for the whole.
func TestFetchReadKindsAndText(t *testing.T) {
	e := newEnv(t)
	e.createContext("k", "")
	note := "# Plan\n\nThe quarterly report compares the spend of the three teams and explains why storage grew."
	out := e.must(e.post("/v1/contexts/k/fetches", map[string]any{
		"id": "f1", "kind": "file", "path": "/srv/notes/plan.md", "size": len(note), "body": note, "produced_by": "agent:planner",
	}), 201)
	if out["verdict"] != "RETRIEVED" || out["text"] != note || out["text_chars"] != float64(len(note)) || out["text_truncated"] != nil {
		t.Fatalf("%v", out)
	}
	if blob := e.get("/v1/contexts/k/blobs/" + out["text_blob"].(string)); blob.status != 200 || string(blob.body) != note {
		t.Fatalf("text blob %d %q", blob.status, blob.body)
	}
	data := e.must(e.get("/v1/contexts/k/artifacts/f1"), 200)["data"].(map[string]any)
	rc := data["receipt"].(map[string]any)
	if data["produced_by"] != "agent:planner" || rc["source"] != "file" || rc["path"] != "/srv/notes/plan.md" || data["status"] != float64(0) || rc["ruleset"] != gate.RulesetVersion {
		t.Fatalf("data %v", data)
	}
	// A short read fails; a tool read is judged on its bytes.
	short := e.must(e.post("/v1/contexts/k/fetches", map[string]any{"kind": "file", "path": "a.txt", "size": 999, "body": "abc"}), 201)
	if short["reason"] != string(gate.ReasonSizeMismatch) {
		t.Fatalf("%v", short)
	}
	long := strings.Repeat("<p>The harbour ferry crosses the bay every forty minutes.</p>", 600)
	tool := e.must(e.post("/v1/contexts/k/fetches", map[string]any{"kind": "tool", "tool": "browser.read", "url": "https://news.example/a",
		"content_type": "text/html", "body": "<html><body>" + long + "</body></html>"}), 201)
	if tool["verdict"] != "RETRIEVED" || tool["text_truncated"] != true || len([]rune(tool["text"].(string))) != MaxFetchTextChars || tool["text_chars"].(float64) <= MaxFetchTextChars {
		t.Fatalf("tool read: %v %v %v", tool["verdict"], tool["text_truncated"], tool["text_chars"])
	}
	// Bad input: a file read needs a path; an unknown kind is refused.
	for _, c := range []struct {
		body    map[string]any
		pointer string
	}{
		{map[string]any{"kind": "file", "body": "x"}, ""},
		{map[string]any{"kind": "ftp", "url": "ftp://a/b", "body": "x"}, "/kind"},
		{map[string]any{"kind": "file", "path": "a", "size": -1, "body": "x"}, "/size"},
	} {
		r := e.post("/v1/contexts/k/fetches", c.body)
		p := r.obj(t)
		if r.status != 422 || !strings.Contains(r.String(), c.pointer) {
			t.Errorf("%v: %d %v", c.body, r.status, p)
		}
	}
}

// TestDeclaredSecrets: serve --secrets (Options.Sanitize.Secrets) and POST
// /v1/admin/secrets mask values in model views, full blobs, effect errors
// and fetch text, and the route never echoes a value.
func TestDeclaredSecrets(t *testing.T) {
	boot, err := gate.NewSecrets([]string{"boot-secret-value-1"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withTokens(testTokens), withOptions(func(o *Options) { o.Sanitize.Secrets = boot }))
	e.token = adminToken
	e.createContext("s", "")
	added := e.post("/v1/admin/secrets", map[string]any{"secrets": []string{"Xq9-runtime-secret", "boot-secret-value-1"}})
	if added.status != 200 || strings.Contains(added.String(), "runtime") || strings.Contains(added.String(), "boot-secret") {
		t.Fatalf("%d %s", added.status, added)
	}
	if p := added.obj(t); p["added"] != float64(1) || p["declared"] != float64(2) {
		t.Fatalf("%v", p)
	}
	bad := e.post("/v1/admin/secrets", map[string]any{"secrets": []string{"long-enough-value", "tiny"}})
	if bad.status != 422 || !strings.Contains(bad.String(), "/secrets/1") || strings.Contains(bad.String(), "tiny") || strings.Contains(bad.String(), "long-enough") {
		t.Fatalf("%d %s", bad.status, bad)
	}
	e.token = "write-token-0123456789"
	if r := e.post("/v1/admin/secrets", map[string]any{"secrets": []string{"another-secret-1"}}); r.status != 403 {
		t.Fatalf("write token: %d", r.status)
	}
	msg := "login failed with Xq9-runtime-secret and boot-secret-value-1 at db"
	te := e.must(e.post("/v1/contexts/s/tool-results", map[string]any{"id": "te", "tool": "db", "ok": false, "error": msg}), 201)
	data := te["artifact"].(map[string]any)["data"].(map[string]any)
	blob := e.get("/v1/contexts/s/blobs/" + data["full_blob"].(string))
	for _, s := range []string{data["model_view"].(string), string(blob.body)} {
		if strings.Contains(s, "runtime-secret") || strings.Contains(s, "boot-secret") || !strings.Contains(s, "with *** and *** at db") {
			t.Fatalf("not masked: %q", s)
		}
	}
	f := e.must(e.post("/v1/contexts/s/fetches", map[string]any{"kind": "file", "path": "cfg.txt", "body": "password is Xq9-runtime-secret here"}), 201)
	if strings.Contains(f["text"].(string), "runtime-secret") {
		t.Fatalf("fetch text %q", f["text"])
	}
	eff := e.must(e.post("/v1/contexts/s/effects", map[string]any{"kind": "email", "idempotency_key": "k1"}), 201)
	id := eff["effect"].(map[string]any)["id"].(string)
	tok := leaseTokenOf(e.must(e.post("/v1/contexts/s/effects/claim", map[string]any{"worker": "w1"}), 200))
	failed := e.post("/v1/contexts/s/effects/"+id+"/fail", map[string]any{"worker": "w1", "lease_token": tok, "error": "smtp auth Xq9-runtime-secret refused"})
	if failed.status != 200 || strings.Contains(failed.String(), "runtime-secret") {
		t.Fatalf("effect error: %d %s", failed.status, failed)
	}
}

// TestGateRulesOption: a server with an operator ruleset classifies with it
// and accepts its receipts; the built-in rulesets stay known.
func TestGateRulesOption(t *testing.T) {
	rules, err := gate.ParseRules([]byte(`{"format":1,"name":"site/v1","extends":"gate/v2","thresholds":{},
	  "phrases":[{"reason":"fingerprint.paywall","max_text":900,"phrases":{"en":["members only, join today"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withOptions(func(o *Options) { o.GateRules = rules }))
	e.createContext("r", "")
	page := "<html><head><title>Story</title></head><body><p>Members only, join today to read the harbour story in full.</p></body></html>"
	out := e.must(e.post("/v1/contexts/r/fetches", map[string]any{"id": "p", "url": "https://news.example/a", "status": 200,
		"headers": map[string]string{"content-type": "text/html"}, "body": page}), 201)
	if out["reason"] != string(gate.ReasonPaywall) {
		t.Fatalf("%v", out["reason"])
	}
	rc := e.must(e.get("/v1/contexts/r/artifacts/p"), 200)["data"].(map[string]any)["receipt"].(map[string]any)
	if rc["ruleset"] != "site/v1" || rc["ruleset_hash"] != rules.Hash() {
		t.Fatalf("receipt %v %v", rc["ruleset"], rc["ruleset_hash"])
	}
}
