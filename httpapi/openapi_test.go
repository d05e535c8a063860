package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestOpenAPICoversRoutes walks the router and checks that every route is
// in /openapi.json and every documented operation is routed.
func TestOpenAPICoversRoutes(t *testing.T) {
	e := newEnv(t)
	routed := map[string]bool{}
	err := chi.Walk(e.srv.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+strings.TrimSuffix(route, "/")] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.get("/openapi.json")
	doc := e.must(r, 200)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v", doc["openapi"])
	}
	documented := map[string]bool{}
	ids := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			documented[strings.ToUpper(method)+" "+path] = true
			id := op.(map[string]any)["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("operationId %q empty or repeated", id)
			}
			ids[id] = true
			// Every path parameter is declared.
			declared := map[string]bool{}
			if ps, ok := op.(map[string]any)["parameters"].([]any); ok {
				for _, p := range ps {
					pm := p.(map[string]any)
					if pm["in"] == "path" {
						declared[pm["name"].(string)] = true
					}
				}
			}
			for _, m := range regexp.MustCompile(`\{([a-z]+)\}`).FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s %s: path parameter %s not declared", method, path, m[1])
				}
			}
		}
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("route %s is not in the OpenAPI document", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("documented %s is not routed", k)
		}
	}
	if len(routed) < 30 {
		t.Errorf("only %d routes", len(routed))
	}
	// Every $ref resolves inside the document.
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				if k == "$ref" {
					refs = append(refs, y.(string))
				}
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(doc)
	sort.Strings(refs)
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "#/") {
			t.Errorf("external ref %s", ref)
			continue
		}
		var cur any = doc
		for _, part := range strings.Split(ref[2:], "/") {
			m, ok := cur.(map[string]any)
			if !ok || m[part] == nil {
				t.Errorf("ref %s does not resolve", ref)
				break
			}
			cur = m[part]
		}
	}
	var raw json.RawMessage = r.body
	if !json.Valid(raw) {
		t.Fatal("invalid JSON")
	}
}

// TestUIMount: a UI handler is served at "/" while unknown /v1 routes stay
// problems.
func TestUIMount(t *testing.T) {
	e := newEnv(t)
	srv := New(Options{Store: e.st, Types: e.srv.Types(), Logger: discardLogger(),
		UI: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ui:" + r.URL.Path)) })})
	for _, c := range []struct {
		path, want string
		status     int
	}{{"/", "ui:/", 200}, {"/contexts/x", "ui:/contexts/x", 200}, {"/healthz", `{"status":"ok"}`, 200}} {
		rec := newRecorder()
		srv.ServeHTTP(rec, mustRequest(t, "GET", c.path))
		if rec.Code != c.status || strings.TrimSpace(rec.Body.String()) != c.want {
			t.Errorf("%s: %d %q", c.path, rec.Code, rec.Body.String())
		}
	}
	rec := newRecorder()
	srv.ServeHTTP(rec, mustRequest(t, "GET", "/v1/nothing"))
	if rec.Code != 404 || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("/v1/nothing: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestOpenAPIDeclaresEveryQuery asks every GET route for each query
// parameter the API checks somewhere (not the filters that take any
// artifact id), with a value no route accepts: a
// route whose answer is a 400 naming the parameter honours it, and the
// document must declare it there; a route the document says takes it must
// answer so.
func TestOpenAPIDeclaresEveryQuery(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "")
	e.must(e.post("/v1/contexts/c/artifacts", map[string]any{"id": "q", "type": "question", "data": map[string]any{"text": "q?"}}), 201)
	head := e.must(e.get("/v1/contexts/c"), 200)["head"].(string)
	digest := "sha256:" + strings.Repeat("ab", 32)
	fill := strings.NewReplacer("{ctx}", "c", "{id}", "q", "{commit}", head, "{request_hash}", digest, "{digest}", digest, "{name}", "note")
	bad := map[string]string{
		"at":    "no%20good%21",
		"limit": "x", "depth": "x", "max_nodes": "x", "format": "x", "dir": "x", "status": "x", "data": "x",
		"cursor": "%21%21%21",
	}
	doc := e.must(e.get("/openapi.json"), 200)
	checked := 0
	for path, item := range doc["paths"].(map[string]any) {
		op, ok := item.(map[string]any)["get"].(map[string]any)
		if !ok {
			continue
		}
		declared := map[string]bool{}
		ps, _ := op["parameters"].([]any)
		for _, p := range ps {
			if pm := p.(map[string]any); pm["in"] == "query" {
				declared[pm["name"].(string)] = true
			}
		}
		for param, v := range bad {
			r := e.get(fill.Replace(path) + "?" + param + "=" + v)
			honoured := r.status == 400 && strings.Contains(string(r.body), `"parameter":"`+param+`"`)
			if honoured != declared[param] {
				t.Errorf("GET %s: the document declares %s: %v; a bad %s answers %d %s", path, param, declared[param], param, r.status, r.body)
			}
			checked++
		}
	}
	if checked < 200 {
		t.Fatalf("only %d requests checked", checked)
	}
}
