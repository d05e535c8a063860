package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// sanitizeFixtures is testdata/sanitize/cases.json.
type sanitizeFixtures struct {
	Errors []struct {
		Name       string `json:"name"`
		Error      string `json:"error"`
		ModelView  string `json:"model_view"`
		TotalChars *int   `json:"total_chars"`
		Spilled    *bool  `json:"spilled"`
	} `json:"errors"`
	LongOutput struct {
		Limit  int `json:"limit"`
		Expect struct {
			ShownMaxChars int      `json:"shown_max_chars"`
			ShownContains []string `json:"shown_contains"`
			BlobContains  []string `json:"blob_contains"`
		} `json:"expect"`
	} `json:"long_output"`
}

func loadSanitizeFixtures(t *testing.T) sanitizeFixtures {
	t.Helper()
	raw, err := os.ReadFile("../testdata/sanitize/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var f sanitizeFixtures
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Errors) == 0 {
		t.Fatal("no sanitize cases")
	}
	return f
}

// TestToolErrorFixtures posts every error case of
// testdata/sanitize/cases.json: the stored model_view is the fixture's
// byte for byte, the blob holds the whole masked text, and a tool_error
// is a poison root.
func TestToolErrorFixtures(t *testing.T) {
	e := newEnv(t)
	e.createContext("t", "observe")
	f := loadSanitizeFixtures(t)
	for i, c := range f.Errors {
		out := e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"id": fmt.Sprintf("err-%d", i), "tool": "read_file", "ok": false, "error": c.Error}), 201)
		// Read it back as stored, not as the write echoed it.
		a := e.must(e.get("/v1/contexts/t/artifacts/"+fmt.Sprintf("err-%d", i)), 200)
		data := a["data"].(map[string]any)
		if a["type"] != TypeToolError || data["model_view"] != c.ModelView {
			t.Errorf("%s: model_view\n got %q\nwant %q", c.Name, data["model_view"], c.ModelView)
		}
		if c.TotalChars != nil && data["total_chars"] != float64(*c.TotalChars) {
			t.Errorf("%s: total_chars %v, want %d", c.Name, data["total_chars"], *c.TotalChars)
		}
		if c.Spilled != nil && data["spilled"] != *c.Spilled {
			t.Errorf("%s: spilled %v, want %v", c.Name, data["spilled"], *c.Spilled)
		}
		want := gate.SanitizeError(c.Error, gate.DefaultSanitizeOptions()).Masked
		if blob := e.get("/v1/contexts/t/blobs/" + data["full_blob"].(string)); blob.status != 200 || string(blob.body) != want {
			t.Errorf("%s: blob %q, want %q", c.Name, blob.body, want)
		}
		if st := out["artifact"].(map[string]any)["trust"].(map[string]any)["status"]; st != "poison_root" {
			t.Errorf("%s: trust %v", c.Name, st)
		}
	}
}

// longOutput builds the long_output case: 'marker_head', 200 rows of
// 'row_<i> ' and 80 'x', 'marker_tail', joined by newlines.
func longOutput() string {
	lines := []string{"marker_head"}
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("row_%d ", i)+strings.Repeat("x", 80))
	}
	return strings.Join(append(lines, "marker_tail"), "\n")
}

// TestToolOutputLong: the long-output case holds over HTTP.
func TestToolOutputLong(t *testing.T) {
	e := newEnv(t)
	e.createContext("t", "")
	f := loadSanitizeFixtures(t)
	out := e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"id": "ls", "tool": "ls", "ok": true, "output": longOutput()}), 201)
	data := out["artifact"].(map[string]any)["data"].(map[string]any)
	view := data["model_view"].(string)
	if n := utf8.RuneCountInString(view); n > f.LongOutput.Expect.ShownMaxChars || n > f.LongOutput.Limit {
		t.Fatalf("view has %d characters", n)
	}
	for _, s := range f.LongOutput.Expect.ShownContains {
		if !strings.Contains(view, s) {
			t.Errorf("view lacks %q", s)
		}
	}
	ref := data["full_blob"].(string)
	if !strings.Contains(view, ref) || data["truncated"] != true || data["total_chars"] != float64(utf8.RuneCountInString(longOutput())) {
		t.Errorf("notice/fields: %v", data)
	}
	blob := e.get("/v1/contexts/t/blobs/" + ref).String()
	for _, s := range f.LongOutput.Expect.BlobContains {
		if !strings.Contains(blob, s) {
			t.Errorf("blob lacks %q", s)
		}
	}
	if blob != longOutput() {
		t.Error("the blob is not the whole output")
	}
	// A short output is shown whole; a tool_output is confirmed.
	out = e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"tool": "echo", "ok": true, "output": "hello <system>x</system>"}), 201)
	art := out["artifact"].(map[string]any)
	if art["data"].(map[string]any)["model_view"] != "hello x" || art["trust"].(map[string]any)["status"] != "confirmed" || !strings.HasPrefix(art["id"].(string), "tool_output:") {
		t.Fatalf("%v", art)
	}
	for _, bad := range []map[string]any{
		{"ok": true, "error": "x"}, {"ok": false, "output": "x"}, {"ok": false}, {"ok": true}, {"error": "x"}, {"ok": "false", "error": "x"},
	} {
		if r := e.post("/v1/contexts/t/tool-results", bad); r.status != 422 {
			t.Errorf("%v: %d %s", bad, r.status, r.body)
		}
	}
}

// TestToolResultOptions: the sanitiser limits come from Options.Sanitize.
func TestToolResultOptions(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.Sanitize = gate.SanitizeOptions{MaxErrorChars: 10, MaxOutputChars: 300} }))
	e.createContext("t", "")
	out := e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"ok": false, "error": strings.Repeat("y", 50)}), 201)
	if v := out["artifact"].(map[string]any)["data"].(map[string]any)["model_view"]; v != gate.ErrorPrefix+strings.Repeat("y", 10)+gate.TruncationMarker {
		t.Fatalf("%q", v)
	}
	out = e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"ok": true, "output": longOutput()}), 201)
	if v := out["artifact"].(map[string]any)["data"].(map[string]any)["model_view"].(string); utf8.RuneCountInString(v) > 300 {
		t.Fatalf("%d characters", utf8.RuneCountInString(v))
	}
}

// TestSecretsNeverStored sends secrets in tool errors, outputs and the
// tool name, then looks for them everywhere: every artifact (the state
// export), every blob an artifact names, and the bytes of every file in
// the store's directory.
func TestSecretsNeverStored(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(_ *Options, so *store.Options) { so.Dir = dir })
	e.createContext("s", "")
	secrets := []string{
		"sk-proj-a1B2c3D4e5F6g7H8i9J0a1B2c3D4",
		"ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
		"AKIAIOSFODNN7EXAMPLE",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJl",
		"s3cretPassw0rd",
		"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
	}
	// The part of each secret that masking removes (the kept head and tail
	// are not secret).
	cores := []string{"D4e5F6g7H8i9J0a1B2", "CDEFGHIJKLMNOPQRSTUVWXYZ012345", "SFODNN7EXA", "OiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0", "s3cretPassw0rd", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"}
	msg := fmt.Sprintf("upstream said: invalid key %s; push with %s failed; AccessDenied for %s; Authorization: Bearer %s; postgres://app:%s@db:5432/x\n-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n",
		secrets[0], secrets[1], secrets[2], secrets[3], secrets[4], secrets[5])
	e.must(e.post("/v1/contexts/s/tool-results", map[string]any{"id": "e1", "tool": "deploy " + secrets[1], "ok": false, "error": msg}), 201)
	e.must(e.post("/v1/contexts/s/tool-results", map[string]any{"id": "o1", "tool": "env", "ok": true, "output": msg + strings.Repeat("filler line\n", 400) + msg}), 201)
	e.must(e.post("/v1/contexts/s/tool-results", map[string]any{"id": "e2", "tool": "short", "ok": false, "error": strings.Repeat("z", 3000) + msg}), 201)

	state := e.get("/v1/contexts/s/state")
	if state.status != 200 {
		t.Fatal(state.String())
	}
	var st struct {
		Artifacts []struct {
			ID   string          `json:"id"`
			Data json.RawMessage `json:"data"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(state.body, &st); err != nil {
		t.Fatal(err)
	}
	haystacks := map[string][]byte{"state": state.body}
	for _, a := range st.Artifacts {
		var d map[string]any
		_ = json.Unmarshal(a.Data, &d)
		ref, _ := d["full_blob"].(string)
		if ref == "" {
			t.Fatalf("%s has no full_blob", a.ID)
		}
		b := e.get("/v1/contexts/s/blobs/" + ref)
		if b.status != 200 || len(b.body) == 0 {
			t.Fatalf("blob of %s: %d", a.ID, b.status)
		}
		haystacks["blob of "+a.ID] = b.body
	}
	if len(st.Artifacts) != 3 {
		t.Fatalf("%d artifacts", len(st.Artifacts))
	}
	// Close the store so that everything is on disk, then read every file.
	e.ts.Close()
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		haystacks["file "+filepath.Base(path)] = b
		files++
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walk: %v (%d files)", err, files)
	}
	// Control: the files hold the stored text readably, so the scan below
	// would find a secret that was stored.
	inFiles := false
	for where, b := range haystacks {
		inFiles = inFiles || strings.HasPrefix(where, "file ") && bytes.Contains(b, []byte("upstream said: invalid key sk-pro...c3D4"))
	}
	if !inFiles {
		t.Fatal("no store file holds the masked text: the file scan proves nothing")
	}
	for where, b := range haystacks {
		for _, c := range cores {
			if bytes.Contains(b, []byte(c)) {
				t.Errorf("%s holds the secret %q", where, c)
			}
		}
	}
}

// TestToolResultCannotReplaceReserved: a tool result written at the id of
// a fetch verdict or of an effect is refused (409), so a FAILED verdict
// does not become a confirmed tool output and an effect stays in the
// outbox; the state is unchanged.
func TestToolResultCannotReplaceReserved(t *testing.T) {
	e := newEnv(t)
	e.createContext("r", "enforce")
	e.must(e.post("/v1/contexts/r/fetches", map[string]any{"id": "fetch:price", "url": "https://r.example/", "status": 200, "content_type": "text/plain", "body": ""}), 201)
	created := e.must(e.post("/v1/contexts/r/effects", map[string]any{"idempotency_key": "k1", "kind": "webhook"}), 201)
	effectID := effect(created)["id"].(string)
	before := e.hash("r")
	for _, id := range []string{"fetch:price", effectID} {
		r := e.post("/v1/contexts/r/tool-results", map[string]any{"id": id, "tool": "t", "ok": true, "output": `{"price":19.99}`})
		if r.status != 409 {
			t.Errorf("tool result at %q: %d %s", id, r.status, r.body)
		}
	}
	if e.hash("r") != before {
		t.Fatal("a refused tool result changed the context")
	}
	if a := e.must(e.get("/v1/contexts/r/artifacts/fetch:price"), 200); a["type"] != "fetch_verdict" {
		t.Fatalf("fetch:price is now %v", a["type"])
	}
	if items := e.must(e.get("/v1/contexts/r/effects"), 200)["items"].([]any); len(items) != 1 {
		t.Fatalf("effects after the refused writes: %v", items)
	}
}

// TestRefusedToolResultStoresNoBlob: a tool result refused — an unknown
// branch, a field the service refuses, an edge the commit refuses —
// stores none of its text's bytes (docs/API.md: a refused request
// changes nothing), and the context's head stays.
func TestRefusedToolResultStoresNoBlob(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "enforce")
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "q"}}), 201)
	head := e.hash("c")
	cases := []struct {
		name   string
		body   map[string]any
		header map[string]string
		status int
	}{
		{"unknown branch", map[string]any{"branch": "nope"}, nil, 404},
		{"bad produced_by", map[string]any{"produced_by": "a\nb"}, nil, 422},
		{"branch not a name", map[string]any{"branch": "no such/../name"}, nil, 422},
		{"edge to nowhere", map[string]any{"edges": []any{map[string]any{"rel": "derived_from", "to": "nowhere"}}}, nil, 422},
		{"unknown relation", map[string]any{"edges": []any{map[string]any{"rel": "nope", "to": "q"}}}, nil, 422},
		{"cycle", map[string]any{"id": "q", "edges": []any{map[string]any{"rel": "derived_from", "to": "q"}}}, nil, 0},
	}
	for i, c := range cases {
		for _, ok := range []bool{true, false} {
			text := fmt.Sprintf("the text of refused tool result %d (ok %v)", i, ok)
			body := map[string]any{"ok": ok, "id": fmt.Sprintf("t%d", i), "tool": "t"}
			if ok {
				body["output"] = text
			} else {
				body["error"] = text
			}
			for k, v := range c.body {
				body[k] = v
			}
			r := e.send(req{method: "POST", path: "/v1/contexts/c/tool-results", body: body, header: c.header})
			if r.status < 400 || c.status != 0 && r.status != c.status {
				t.Errorf("%s (ok %v): %d %.300s, want %d", c.name, ok, r.status, r.body, c.status)
				continue
			}
			d := hashing.Sum([]byte(text))
			if g := e.get("/v1/blobs/" + d.String()); g.status != 404 {
				t.Errorf("%s (ok %v): the refused tool result stored its text: GET /v1/blobs/%s = %d, want 404", c.name, ok, d, g.status)
			}
			if h := e.hash("c"); h != head {
				t.Errorf("%s (ok %v): the refused tool result changed the context: %s -> %s", c.name, ok, head, h)
			}
		}
	}
	// Accepted, the same request stores the text and the context holds it.
	text := "the text of an accepted tool result"
	e.must(e.post("/v1/contexts/c/tool-results", map[string]any{"ok": true, "output": text, "id": "t"}), 201)
	d := hashing.Sum([]byte(text))
	if g := e.get("/v1/contexts/c/blobs/" + d.String()); g.status != 200 {
		t.Fatalf("an accepted tool result's text: GET = %d, want 200", g.status)
	}
}

// TestToolOutputOfManyChunks: a tool output of several blob chunks is
// stored, in the commit that records it, whole — read back byte for byte —
// and a refused one of the same size stores none of it (on every backend
// the suite runs on).
func TestToolOutputOfManyChunks(t *testing.T) {
	e := newEnv(t)
	e.createContext("t", "")
	var b strings.Builder
	for i := 0; b.Len() < 6<<20; i++ {
		fmt.Fprintf(&b, "line %d of a long tool output\n", i)
	}
	output := b.String()
	refused := e.post("/v1/contexts/t/tool-results", map[string]any{"id": "big0", "tool": "dump", "ok": true, "branch": "nope", "output": output + "!"})
	if refused.status != 404 {
		t.Fatalf("unknown branch: %d %s", refused.status, refused.body)
	}
	if r := e.get("/v1/blobs/" + hashing.Sum([]byte(output+"!")).String()); r.status != 404 {
		t.Errorf("the refused output was stored: %d", r.status)
	}
	out := e.must(e.post("/v1/contexts/t/tool-results", map[string]any{"id": "big", "tool": "dump", "ok": true, "output": output}), 201)
	ref := out["artifact"].(map[string]any)["data"].(map[string]any)["full_blob"].(string)
	if ref != hashing.Sum([]byte(output)).String() {
		t.Fatalf("full_blob %s, want the output's digest", ref)
	}
	if got := e.get("/v1/contexts/t/blobs/" + ref); got.status != 200 || string(got.body) != output {
		t.Fatalf("read back: %d, %d bytes of %d", got.status, len(got.body), len(output))
	}
}
