package httpapi

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestDiffData: ?data=true adds the changed JSON pointers with old and
// new values to each changed artifact; without it the document is as
// before; a bad value is a 400 naming the parameter.
func TestDiffData(t *testing.T) {
	e := newEnv(t)
	e.createContext("d", "observe")
	w1 := e.must(e.post("/v1/contexts/d/artifacts", map[string]any{"id": "doc", "type": "document",
		"data": map[string]any{"text": "Item 42 costs 16.55 EUR", "url": "https://example.test/a", "tags": []any{"a", "b"}}}), 201)
	c1 := w1["commit"].(string)
	e.must(e.post("/v1/contexts/d/artifacts", map[string]any{"id": "same", "type": "note", "data": map[string]any{"text": "x"}}), 201)
	e.must(e.post("/v1/contexts/d/artifacts", map[string]any{"id": "doc", "type": "document",
		"data": map[string]any{"text": "Item 42 costs 18.20 EUR", "tags": []any{"a"}, "lang": "en"}}), 201)

	r := e.get("/v1/contexts/d/diff?from=" + url.QueryEscape(c1) + "&data=true")
	if r.status != 200 {
		t.Fatalf("diff data: %d %s", r.status, r.body)
	}
	var got struct {
		Added   []map[string]any `json:"added"`
		Changed []struct {
			ID   string `json:"id"`
			Data []struct {
				Pointer string          `json:"pointer"`
				Kind    string          `json:"kind"`
				Old     json.RawMessage `json:"old"`
				New     json.RawMessage `json:"new"`
			} `json:"data"`
		} `json:"changed"`
		Trust []any `json:"trust"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Added) != 1 || len(got.Changed) != 1 || got.Changed[0].ID != "doc" {
		t.Fatalf("diff: %s", r.body)
	}
	var lines []string
	for _, c := range got.Changed[0].Data {
		lines = append(lines, c.Kind+" "+c.Pointer+" "+string(c.Old)+" "+string(c.New))
	}
	want := []string{
		`added /lang  "en"`,
		`removed /tags/1 "b" `,
		`changed /text "Item 42 costs 16.55 EUR" "Item 42 costs 18.20 EUR"`,
		`removed /url "https://example.test/a" `,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("data changes:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// Without data=true: no "data" member.
	plain := e.get("/v1/contexts/d/diff?from=" + url.QueryEscape(c1))
	if plain.status != 200 || strings.Contains(string(plain.body), `"pointer"`) {
		t.Errorf("plain diff: %d %s", plain.status, plain.body)
	}
	if a, b := plain.header.Get("ETag"), r.header.Get("ETag"); a == b {
		t.Errorf("the two documents share the ETag %s", a)
	}

	// A bad value names the parameter.
	bad := e.get("/v1/contexts/d/diff?from=" + url.QueryEscape(c1) + "&data=yes")
	if bad.status != 400 || !strings.Contains(string(bad.body), `"parameter":"data"`) {
		t.Errorf("data=yes: %d %s", bad.status, bad.body)
	}
}
