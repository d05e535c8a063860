package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/store"
)

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pageAll follows next_cursor and returns every item's key.
func (e *env) pageAll(path string, key func(map[string]any) string) []string {
	e.t.Helper()
	var out []string
	cursor := ""
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for pages := 0; ; pages++ {
		p := e.must(e.get(path+sep+"cursor="+url.QueryEscape(cursor)), 200)
		for _, x := range p["items"].([]any) {
			out = append(out, key(x.(map[string]any)))
		}
		c, _ := p["next_cursor"].(string)
		if c == "" {
			return out
		}
		if pages > 10000 {
			e.t.Fatal("pagination does not end")
		}
		cursor = c
	}
}

// TestPagination: every list returns each item exactly once, in order.
func TestPagination(t *testing.T) {
	e := newEnv(t)
	e.createContext("pages", "observe")
	var ops []any
	var notes, all []string
	for i := 0; i < 250; i++ {
		typ := "note"
		if i%3 == 0 {
			typ = "claim"
		}
		id := fmt.Sprintf("a/%03d é", i) // ids with a slash and non-ASCII
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": typ, "data": map[string]any{"text": id}}})
		if i > 0 {
			ops = append(ops, map[string]any{"op": "link", "from": id, "rel": "mentions", "to": fmt.Sprintf("a/%03d é", i-1)})
			ops = append(ops, map[string]any{"op": "link", "from": id, "rel": "cites", "to": "a/000 é"})
		}
		all = append(all, id)
		if typ == "note" {
			notes = append(notes, id)
		}
	}
	e.must(e.post("/v1/contexts/pages/commits", map[string]any{"ops": ops}), 201)
	sort.Strings(all)
	byID := func(m map[string]any) string { return m["id"].(string) }
	for _, limit := range []int{1, 7, 100, 1000} {
		got := e.pageAll(fmt.Sprintf("/v1/contexts/pages/artifacts?limit=%d", limit), byID)
		if !reflect.DeepEqual(got, all) {
			t.Fatalf("limit %d: %d artifacts, want %d", limit, len(got), len(all))
		}
	}
	if got := e.pageAll("/v1/contexts/pages/artifacts?type=note&limit=9", byID); !reflect.DeepEqual(got, notes) {
		t.Fatalf("type filter: %d, want %d", len(got), len(notes))
	}
	edgeKey := func(m map[string]any) string {
		return m["from"].(string) + "|" + m["rel"].(string) + "|" + m["to"].(string)
	}
	edges := e.pageAll("/v1/contexts/pages/edges?limit=13", edgeKey)
	if len(edges) != 2*249 || !sort.StringsAreSorted(edges) {
		t.Fatalf("%d edges (sorted %v)", len(edges), sort.StringsAreSorted(edges))
	}
	seen := map[string]bool{}
	for _, k := range edges {
		if seen[k] {
			t.Fatalf("edge %s twice", k)
		}
		seen[k] = true
	}
	if got := e.pageAll("/v1/contexts/pages/edges?rel=cites&limit=10", edgeKey); len(got) != 249 {
		t.Fatalf("%d cites edges", len(got))
	}
	// Commits: make a few more and page through the log.
	for i := 0; i < 20; i++ {
		e.must(e.post("/v1/contexts/pages/artifacts", map[string]any{"id": "x", "type": "note", "data": map[string]any{"text": fmt.Sprint(i)}}), 201)
	}
	commits := e.pageAll("/v1/contexts/pages/commits?limit=3", byID)
	if len(commits) != 22 {
		t.Fatalf("%d commits, want 22", len(commits))
	}
	// Contexts.
	for i := 0; i < 11; i++ {
		e.createContext(fmt.Sprintf("ctx-%02d", i), "")
	}
	ctxs := e.pageAll("/v1/contexts?limit=4", byID)
	if len(ctxs) != 12 || !sort.StringsAreSorted(ctxs) {
		t.Fatalf("contexts %v", ctxs)
	}
	// An artifact id with a slash is addressed percent-encoded.
	a := e.must(e.get("/v1/contexts/pages/artifacts/"+url.PathEscape("a/007 é")), 200)
	if a["id"] != "a/007 é" {
		t.Fatalf("got %v", a["id"])
	}
}

// TestReads covers at=, ETags, history, related, provenance, audit, diff,
// state, branches, no-op writes and derived ids.
func TestReads(t *testing.T) {
	e := newEnv(t)
	e.createContext("r", "observe")
	w1 := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 201)
	c1 := w1["commit"].(string)
	e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "doc", "type": "document", "produced_by": "reader",
		"data": map[string]any{"text": "v1", "url": "https://example.test/a"}}), 201)
	w3 := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "ans", "type": "answer", "data": map[string]any{"text": "Because."},
		"edges": []any{map[string]any{"rel": "supported_by", "to": "doc", "attrs": map[string]any{"quote": "v1"}}, map[string]any{"rel": "responds_to", "to": "q"}}}), 201)
	c3 := w3["commit"].(string)
	if w3["artifact"].(map[string]any)["trust"].(map[string]any)["status"] != "confirmed" {
		t.Fatalf("trust %v", w3["artifact"])
	}
	// No-op: identical content again.
	same := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "Why?"}}), 200)
	if same["noop"] != true || same["commit"] != c3 {
		t.Fatalf("no-op write %v", same)
	}
	// Derived id.
	d := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"type": "note", "data": map[string]any{"text": "n"}}), 201)
	if id := d["artifact"].(map[string]any)["id"].(string); !strings.HasPrefix(id, "note:") || len(id) != 5+16 {
		t.Fatalf("derived id %q", id)
	}
	// A new version of doc.
	w5 := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "doc", "type": "document", "produced_by": "reader",
		"data": map[string]any{"text": "v2", "url": "https://example.test/a"}}), 201)
	if w5["artifact"].(map[string]any)["version"] != 2.0 {
		t.Fatalf("version %v", w5["artifact"])
	}

	// at= by full id, prefix and branch.
	for _, at := range []string{c3, strings.TrimPrefix(c3, "sha256:")[:10], "sha256:" + strings.TrimPrefix(c3, "sha256:")[:12]} {
		a := e.must(e.get("/v1/contexts/r/artifacts/doc?at="+url.QueryEscape(at)), 200)
		if a["data"].(map[string]any)["text"] != "v1" || a["version"] != 1.0 {
			t.Fatalf("at=%s: %v", at, a)
		}
	}
	if r := e.get("/v1/contexts/r/artifacts/doc?at=" + url.QueryEscape(c1)); r.status != 404 {
		t.Fatalf("doc at first commit: %d", r.status)
	}
	// ETags.
	r1 := e.get("/v1/contexts/r/artifacts/doc")
	tag := r1.header.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag")
	}
	r2 := e.send(req{method: "GET", path: "/v1/contexts/r/artifacts/doc", header: map[string]string{"If-None-Match": tag}})
	if r2.status != 304 || len(r2.body) != 0 {
		t.Fatalf("If-None-Match: %d", r2.status)
	}
	e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "other", "type": "note", "data": map[string]any{"text": "o"}}), 201)
	r3 := e.send(req{method: "GET", path: "/v1/contexts/r/artifacts/doc", header: map[string]string{"If-None-Match": tag}})
	if r3.status != 200 || r3.header.Get("ETag") == tag {
		t.Fatalf("after a commit: %d %s", r3.status, r3.header.Get("ETag"))
	}
	for _, p := range []string{"/v1/contexts/r/state", "/v1/contexts/r/quarantine", "/v1/contexts/r/hash", "/v1/contexts/r/commits/" + url.PathEscape(c3)} {
		a := e.get(p)
		b := e.send(req{method: "GET", path: p, header: map[string]string{"If-None-Match": a.header.Get("ETag")}})
		if a.status != 200 || a.header.Get("ETag") == "" || b.status != 304 {
			t.Errorf("%s: %d, then %d", p, a.status, b.status)
		}
	}

	// History.
	h := e.must(e.get("/v1/contexts/r/artifacts/doc/history"), 200)
	vs := h["versions"].([]any)
	if len(vs) != 2 || vs[0].(map[string]any)["version"] != 2.0 || vs[1].(map[string]any)["version"] != 1.0 {
		t.Fatalf("history %v", vs)
	}
	// Related.
	rel := e.must(e.get("/v1/contexts/r/artifacts/doc/related?dir=in"), 200)
	if es := rel["edges"].([]any); len(es) != 1 || es[0].(map[string]any)["from"] != "ans" {
		t.Fatalf("related %v", rel)
	}
	if es := e.must(e.get("/v1/contexts/r/artifacts/ans/related?rel=responds_to&dir=out"), 200)["edges"].([]any); len(es) != 1 {
		t.Fatalf("related rel filter %v", es)
	}
	// Provenance in three formats.
	pj := e.must(e.get("/v1/contexts/r/artifacts/ans/provenance"), 200)
	if n := len(pj["nodes"].([]any)); n != 3 {
		t.Fatalf("provenance nodes %d", n)
	}
	for f, ct := range map[string]string{"mermaid": "text/vnd.mermaid", "dot": "text/vnd.graphviz"} {
		r := e.get("/v1/contexts/r/artifacts/ans/provenance?format=" + f)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ct) || !bytes.Contains(r.body, []byte("n0")) {
			t.Fatalf("%s: %d %s %s", f, r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	// Audit.
	au := e.must(e.get("/v1/contexts/r/audit/ans"), 200)
	if au["answer"] != "ans" || len(au["sources"].([]any)) != 1 {
		t.Fatalf("audit %v", au)
	}
	md := e.get("/v1/contexts/r/audit/ans?format=markdown")
	if md.status != 200 || !strings.HasPrefix(md.header.Get("Content-Type"), "text/markdown") || !bytes.Contains(md.body, []byte("https://example.test/a")) {
		t.Fatalf("markdown audit: %d %s", md.status, md.body)
	}
	// Diff from c3 to main.
	df := e.must(e.get("/v1/contexts/r/diff?from="+url.QueryEscape(c3)), 200)
	if len(df["added"].([]any)) != 2 || len(df["changed"].([]any)) != 1 || len(df["removed"].([]any)) != 0 {
		t.Fatalf("diff %v", df)
	}
	// State: sorted, with data.
	st := e.must(e.get("/v1/contexts/r/state"), 200)
	var ids []string
	for _, a := range st["artifacts"].([]any) {
		m := a.(map[string]any)
		ids = append(ids, m["id"].(string))
		if m["data"] == nil || m["content_hash"] == nil {
			t.Fatalf("state artifact %v", m)
		}
	}
	if !sort.StringsAreSorted(ids) || len(ids) != 5 {
		t.Fatalf("state ids %v", ids)
	}
	if es := st["edges"].([]any); len(es) != 2 || es[1].(map[string]any)["attrs"].(map[string]any)["quote"] != "v1" {
		t.Fatalf("state edges %v", es)
	}

	// Branches: branch at c3, write there, reset main to it.
	e.must(e.post("/v1/contexts/r/branches", map[string]any{"name": "alt/1", "at": c3}), 201)
	wb := e.must(e.post("/v1/contexts/r/artifacts", map[string]any{"id": "alt", "branch": "alt/1", "type": "note", "data": map[string]any{"text": "b"}}), 201)
	if r := e.get("/v1/contexts/r/artifacts/alt"); r.status != 404 {
		t.Fatalf("branch write visible on main: %d", r.status)
	}
	e.must(e.get("/v1/contexts/r/artifacts/alt?at=alt%2F1"), 200)
	if r := e.post("/v1/contexts/r/branches", map[string]any{"name": "alt/1"}); r.status != 409 {
		t.Fatalf("duplicate branch: %d", r.status)
	}
	rs := e.must(e.post("/v1/contexts/r/branches/main/reset", map[string]any{"to": "alt/1"}), 200)
	if rs["head"] != wb["commit"] {
		t.Fatalf("reset %v", rs)
	}
	e.must(e.get("/v1/contexts/r/artifacts/alt"), 200)
	desc := e.must(e.get("/v1/contexts/r"), 200)
	if len(desc["branches"].([]any)) != 2 || desc["head"] != wb["commit"] {
		t.Fatalf("describe %v", desc)
	}
	cm := e.must(e.get("/v1/contexts/r/commits/"+url.PathEscape(wb["commit"].(string))), 200)
	if ops := cm["ops"].([]any); len(ops) != 1 || ops[0].(map[string]any)["op"] != "put" {
		t.Fatalf("commit ops %v", cm)
	}
}

// TestTypesAndBlobs covers the type registry and blobs.
func TestTypesAndBlobs(t *testing.T) {
	e := newEnv(t)
	e.createContext("t", "observe")
	schema := map[string]any{"type": "object", "required": []any{"price"}, "properties": map[string]any{"price": map[string]any{"type": "number", "minimum": 0}}}
	put := e.send(req{method: "PUT", path: "/v1/types/quote", body: map[string]any{"role": "source", "schema": schema, "description": "a price quote"}})
	rec := e.must(put, 201)
	if rec["version"] != 1.0 || rec["role"] != "source" || rec["builtin"] != false {
		t.Fatalf("type %v", rec)
	}
	again := e.must(e.send(req{method: "PUT", path: "/v1/types/quote", body: map[string]any{"role": "source", "schema": schema, "description": "a price quote"}}), 200)
	if again["version"] != 1.0 {
		t.Fatalf("unchanged type bumped: %v", again)
	}
	bad := e.post("/v1/contexts/t/artifacts", map[string]any{"type": "quote", "data": map[string]any{"price": -1}})
	if bad.status != 422 || !bytes.Contains(bad.body, []byte(`"pointer":"/data/price"`)) {
		t.Fatalf("schema violation: %d %s", bad.status, bad.body)
	}
	ok := e.must(e.post("/v1/contexts/t/artifacts", map[string]any{"id": "p", "type": "quote", "data": map[string]any{"price": 3.5}}), 201)
	if ok["artifact"].(map[string]any)["trust"].(map[string]any)["status"] != "confirmed" {
		t.Fatalf("user source type: %v", ok)
	}
	schema["properties"].(map[string]any)["currency"] = map[string]any{"type": "string"}
	v2 := e.must(e.send(req{method: "PUT", path: "/v1/types/quote", body: map[string]any{"role": "source", "schema": schema}}), 200)
	if v2["version"] != 2.0 {
		t.Fatalf("changed type: %v", v2)
	}
	if r := e.send(req{method: "PUT", path: "/v1/types/quote", body: map[string]any{"role": "never", "schema": schema}}); r.status != 409 {
		t.Fatalf("role change: %d %s", r.status, r.body)
	}
	if r := e.send(req{method: "PUT", path: "/v1/types/forged", body: map[string]any{"role": "fetch_verdict", "schema": true}}); r.status != 422 {
		t.Fatalf("fetch_verdict role: %d %s", r.status, r.body)
	}
	list := e.must(e.get("/v1/types"), 200)
	if n := len(list["types"].([]any)); n != 13 {
		t.Fatalf("%d types", n)
	}
	fv := e.must(e.get("/v1/types/fetch_verdict"), 200)
	if fv["reserved"] != true || fv["role"] != "fetch_verdict" {
		t.Fatalf("fetch_verdict %v", fv)
	}
	// The registry survives a reload from the store.
	reg := NewRegistry()
	if err := reg.Load(t.Context(), e.st); err != nil {
		t.Fatal(err)
	}
	if r, ok := reg.Get("quote"); !ok || r.Version != 2 {
		t.Fatalf("reloaded %v %v", r, ok)
	}

	// Blobs.
	body := []byte("raw \x00 bytes")
	b := e.must(e.post("/v1/blobs", body), 201)
	dg := b["digest"].(string)
	e.must(e.post("/v1/blobs", body), 200)
	g := e.get("/v1/blobs/" + dg)
	if g.status != 200 || !bytes.Equal(g.body, body) || g.header.Get("ETag") == "" {
		t.Fatalf("blob: %d %q", g.status, g.body)
	}
	if r := e.send(req{method: "GET", path: "/v1/blobs/" + dg, header: map[string]string{"If-None-Match": g.header.Get("ETag")}}); r.status != 304 {
		t.Fatalf("blob 304: %d", r.status)
	}
	if r := e.get("/v1/blobs/sha256:" + strings.Repeat("0", 64)); r.status != 404 {
		t.Fatalf("missing blob: %d", r.status)
	}
}

// TestAuthScopes: list filtering and scope checks with tokens.
func TestAuthScopes(t *testing.T) {
	e := newEnv(t, withTokens(testTokens))
	e.token = adminToken
	e.createContext("other-1", "")
	e.createContext("mine", "")
	e.token = "other-token-0123456789"
	ids := e.pageAll("/v1/contexts", func(m map[string]any) string { return m["id"].(string) })
	if !reflect.DeepEqual(ids, []string{"other-1"}) {
		t.Fatalf("visible contexts %v", ids)
	}
	e.must(e.post("/v1/contexts", map[string]any{"id": "other-2"}), 201)
	if r := e.post("/v1/contexts", map[string]any{"id": "mine-2"}); r.status != 403 {
		t.Fatalf("create outside grant: %d", r.status)
	}
	e.must(e.post("/v1/contexts/other-1/artifacts", map[string]any{"type": "note", "data": map[string]any{"text": "x"}}), 201)
	if r := e.get("/v1/contexts/mine"); r.status != 403 {
		t.Fatalf("read outside grant: %d", r.status)
	}
	if r := e.send(req{method: "PUT", path: "/v1/types/thing", body: map[string]any{"schema": true}}); r.status != 403 {
		t.Fatalf("type put without admin: %d", r.status)
	}
	e.token = ""
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		if r := e.get(p); r.status != 200 {
			t.Errorf("%s: %d", p, r.status)
		}
	}
	m := e.get("/metrics")
	if !bytes.Contains(m.body, []byte(`artifactd_problems_total{code="forbidden"} 3`)) || !bytes.Contains(m.body, []byte("artifactd_commits_total 1")) {
		t.Errorf("metrics:\n%s", m.body)
	}
}

func TestParseTokens(t *testing.T) {
	for _, bad := range []string{"", "short read *", "tok-0123456789abcdef root *", "tok-0123456789abcdef read", `[{"token":"tok-0123456789abcdef","scope":"read"}]`, "tok-0123456789abcdef read [", "{"} {
		if _, err := ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q) accepted", bad)
		}
	}
	for _, good := range []string{
		"tok-0123456789abcdef read *;tok-0123456789abcdef write a-*",
		`{"tokens":[{"token":"tok-0123456789abcdef","scope":"admin","contexts":["*"]}]}`,
		`[{"token":"tok-0123456789abcdef","scope":"write","contexts":["a","b*"]}]`,
	} {
		if tk, err := ParseTokens(good); err != nil || tk.Len() != 1 {
			t.Errorf("ParseTokens(%q): %v", good, err)
		}
	}
}

// TestSchemasCompile: every built-in type has a schema that compiles and
// accepts a typical payload.
func TestSchemasCompile(t *testing.T) {
	reg := NewRegistry()
	samples := map[string]string{
		"fetch_verdict": `{"url":"https://x","status":200,"verdict":"RETRIEVED","body_blob":"sha256:` + strings.Repeat("ab", 32) + `",
		  "receipt":{"ruleset":"gate/v1","verdict":"RETRIEVED","url":"https://x","status":200,"raw_bytes":3,"body_sha256":"sha256:` + strings.Repeat("ab", 32) + `","layers":[]}}`,
		"document": `{"text":"t"}`, "tool_error": `{"text":"[TOOL_ERROR] boom"}`, "tool_output": `{"text":"ok"}`,
		"effect": `{"kind":"email","idempotency_key":"k1","status":"pending"}`, "model_call": `{"model":"m"}`,
		"question": `{"text":"q"}`, "user_input": `{"text":"u"}`, "evidence": `{"text":"e"}`, "claim": `{"text":"c","value":1.5}`,
		"answer": `{"text":"a"}`, "note": `{"text":"n"}`,
	}
	for _, rec := range reg.List() {
		s, ok := samples[rec.Name]
		if !ok {
			t.Errorf("no sample for %s", rec.Name)
			continue
		}
		var v any
		if err := decodeForTest(s, &v); err != nil {
			t.Fatal(err)
		}
		if err := reg.Validate(rec.Name, v, "/data"); err != nil {
			t.Errorf("%s rejects %s: %v", rec.Name, s, err)
		}
		if err := reg.Validate(rec.Name, map[string]any{}, "/data"); err == nil && rec.Name != "user_input" {
			t.Errorf("%s accepts {}", rec.Name)
		}
	}
}

// TestPaginationOverTheMap: after a restart, a head is read through its
// state map, and a page of artifacts or edges starts at the cursor's
// place in the map (State.ArtifactsAfter, State.EdgesAfter) rather than
// after a walk of them all. Paged with small and large limits and
// filters — at the head, with commits since the restart that add ids and
// edges between others, delete, unlink and retype (layers above the
// map), and at the commit before them (the map alone) — every artifact
// and edge comes once, in key order.
func TestPaginationOverTheMap(t *testing.T) {
	e := newEnv(t, withCacheBytes(256<<10))
	e.createContext("pages", "observe")
	types := map[string]string{}
	edges := map[string]bool{} // by edgeKey
	var ops []any
	put := func(id, typ string) {
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": typ, "data": map[string]any{"text": id}}})
		types[id] = typ
	}
	link := func(op, from, rel, to string) {
		ops = append(ops, map[string]any{"op": op, "from": from, "rel": rel, "to": to})
		edges[from+"\x00"+rel+"\x00"+to] = op == "link"
	}
	id := func(i int) string { return fmt.Sprintf("a/%03d é", i) } // ids with a slash and non-ASCII
	for i := 0; i < 400; i++ {
		typ := "note"
		if i%3 == 0 {
			typ = "claim"
		}
		put(id(i), typ)
		if i%4 == 0 && i > 0 { // only every fourth artifact has edges
			link("link", id(i), "mentions", id(i-4))
			link("link", id(i), "cites", id(0))
		}
	}
	e.must(e.post("/v1/contexts/pages/commits", map[string]any{"ops": ops}), 201)
	first := e.must(e.get("/v1/contexts/pages/hash"), 200)["commit"].(string)
	typesBefore, edgesBefore := maps.Clone(types), maps.Clone(edges)
	e.reopen()
	for _, at := range []string{"", first} {
		if err := e.st.Read(context.Background(), "pages", at, func(v *store.View) error {
			if !v.State.IsLazy() {
				t.Errorf("after a restart the state at %q is not read through its state map", at)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 3; k++ {
		ops = nil
		for i := k; i < 400; i += 37 {
			between := fmt.Sprintf("%s/%d", id(i), k) // between a/i and a/i+1
			put(between, "note")
			link("link", between, "cites", id(i-i%4))
		}
		for i := 5 + k; i < 400; i += 41 {
			if _, ok := types[id(i)]; ok && i%4 != 0 {
				ops = append(ops, map[string]any{"op": "delete", "id": id(i)})
				delete(types, id(i))
			}
		}
		for i := 8 + 4*k; i < 400; i += 48 {
			link("unlink", id(i), "mentions", id(i-4))
		}
		put(id(7+k*50), "claim") // retyped, or put again
		put("zz last", "note")
		e.must(e.post("/v1/contexts/pages/commits", map[string]any{"ops": ops}), 201)
	}
	listed := func(m map[string]any) string { return m["id"].(string) + " " + m["type"].(string) }
	want := func(of map[string]string, typ string) []string {
		var out []string
		for _, id := range slices.Sorted(maps.Keys(of)) {
			if typ == "" || of[id] == typ {
				out = append(out, id+" "+of[id])
			}
		}
		return out
	}
	edgeListed := func(m map[string]any) string {
		return m["from"].(string) + "\x00" + m["rel"].(string) + "\x00" + m["to"].(string)
	}
	wantEdges := func(of map[string]bool, rel string) []string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(of)) {
			if of[k] && (rel == "" || strings.Split(k, "\x00")[1] == rel) {
				out = append(out, k)
			}
		}
		return out
	}
	for _, at := range []struct {
		query string
		types map[string]string
		edges map[string]bool
	}{{"", types, edges}, {"&at=" + first, typesBefore, edgesBefore}} {
		for _, limit := range []int{1, 7, 100, 1000} {
			if got, w := e.pageAll(fmt.Sprintf("/v1/contexts/pages/artifacts?limit=%d%s", limit, at.query), listed), want(at.types, ""); !slices.Equal(got, w) {
				t.Fatalf("artifacts, limit %d%s: %d, want %d (first %q, want %q)", limit, at.query, len(got), len(w), firstOf(got), firstOf(w))
			}
			if got, w := e.pageAll(fmt.Sprintf("/v1/contexts/pages/edges?limit=%d%s", limit, at.query), edgeListed), wantEdges(at.edges, ""); !slices.Equal(got, w) {
				t.Fatalf("edges, limit %d%s: %d, want %d (first %q, want %q)", limit, at.query, len(got), len(w), firstOf(got), firstOf(w))
			}
		}
		for _, typ := range []string{"note", "claim", "question"} {
			for _, limit := range []int{9, 1000} { // many pages; one, which stops at the type's last artifact
				if got, w := e.pageAll(fmt.Sprintf("/v1/contexts/pages/artifacts?limit=%d&type=%s%s", limit, typ, at.query), listed), want(at.types, typ); !slices.Equal(got, w) {
					t.Fatalf("type %s, limit %d%s: %d artifacts, want %d", typ, limit, at.query, len(got), len(w))
				}
			}
		}
		if got, w := e.pageAll("/v1/contexts/pages/edges?limit=9&rel=mentions"+at.query, edgeListed), wantEdges(at.edges, "mentions"); !slices.Equal(got, w) {
			t.Fatalf("rel mentions%s: %d edges, want %d", at.query, len(got), len(w))
		}
		// The edges into one artifact: many, one, none, and an id no
		// artifact has.
		for _, to := range []string{id(0), id(4), id(396), id(1), "a/"} {
			var w []string
			for _, k := range wantEdges(at.edges, "") {
				if strings.Split(k, "\x00")[2] == to {
					w = append(w, k)
				}
			}
			for _, limit := range []int{1, 9, 100} {
				if got := e.pageAll(fmt.Sprintf("/v1/contexts/pages/edges?limit=%d&to=%s%s", limit, url.QueryEscape(to), at.query), edgeListed); !slices.Equal(got, w) {
					t.Fatalf("edges into %q, limit %d%s: %q, want %q", to, limit, at.query, got, w)
				}
			}
		}
		// One artifact's edges: two, one left after an unlink, those of
		// an id between others, none, and an id no artifact has.
		for _, from := range []string{id(4), id(8), id(396), fmt.Sprintf("%s/%d", id(38), 1), id(1), "a/"} {
			var w []string
			for _, k := range wantEdges(at.edges, "") {
				if strings.Split(k, "\x00")[0] == from {
					w = append(w, k)
				}
			}
			for _, limit := range []int{1, 2, 9} {
				if got := e.pageAll(fmt.Sprintf("/v1/contexts/pages/edges?limit=%d&from=%s%s", limit, url.QueryEscape(from), at.query), edgeListed); !slices.Equal(got, w) {
					t.Fatalf("edges from %q, limit %d%s: %q, want %q", from, limit, at.query, got, w)
				}
			}
		}
	}
}

// firstOf returns the first of keys, or "".
func firstOf(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
