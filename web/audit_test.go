package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// TestAuditPageBounded: the audit page of an answer resting on more than
// maxAuditRows artifacts lists the nearest maxAuditRows (by depth, then
// id) and as many sources, says so, leaves the Markdown and the Mermaid
// flowchart out, and links the whole report, which ?format=json answers
// byte for byte as the API's audit writes it and ?format=markdown as its
// Markdown — both as attachments. An unknown format is a 400 naming the
// parameter.
func TestAuditPageBounded(t *testing.T) {
	const n = maxAuditRows + 200
	s := openStore(t)
	if _, err := s.CreateContext(context.Background(), "chain", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	id := func(i int) string { return fmt.Sprintf("c%04d", i) }
	var ops []graph.Op
	for i := range n {
		ops = append(ops, putOp(t, id(i), "claim", "agent", map[string]any{"text": "step " + id(i), "url": "https://example.com/" + id(i)}))
		if i > 0 {
			ops = append(ops, linkOp(id(i), "derived_from", id(i-1)))
		}
	}
	commit(t, s, "chain", "", "t", "chain", ops...)
	h := New(Options{Store: s, Logger: quietLogger()})
	tip := id(n - 1)
	page := "/ui/contexts/chain/audit/" + tip

	res, body := get(t, h, page+"?at=main")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", page, res.StatusCode, excerpt(body, "detail"))
	}
	checkHTML(t, page, body)
	if rows := strings.Count(body, `<td class="num" data-label="depth">`); rows != maxAuditRows {
		t.Errorf("the page lists %d artifacts, want %d", rows, maxAuditRows)
	}
	for _, want := range []string{
		`id="audit-truncated"`, "the 1,000 nearest to the answer (by depth, then id) of 1,200",
		`id="audit-sources-truncated"`, "The first 1,000 of 1,200",
		`id="audit-copy-long"`,
		`href="/ui/contexts/chain/audit/` + tip + `?at=main&amp;format=json"`,
		`href="/ui/contexts/chain/audit/` + tip + `?at=main&amp;format=markdown"`,
		">" + id(n-1000) + "<", // the farthest listed
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, not := range []string{`id="audit-md"`, "flowchart TD", ">" + id(n-1001) + "<"} {
		if strings.Contains(body, not) {
			t.Errorf("the page has %q", not)
		}
	}

	var want bytes.Buffer
	if err := s.Read(context.Background(), "chain", "", func(v *store.View) error {
		rep, _, err := v.Audit(context.Background(), tip)
		if err != nil {
			return err
		}
		return service.WriteAuditJSON(&want, rep)
	}); err != nil {
		t.Fatal(err)
	}
	res, got := get(t, h, page+"?format=json")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("?format=json: %d, %q, %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
	}
	checkSecurityHeaders(t, res, "?format=json")
	if got != want.String() {
		t.Fatalf("?format=json is not the API's report (%d bytes against %d)", len(got), want.Len())
	}
	var rep graph.AuditReport
	if err := json.Unmarshal([]byte(got), &rep); err != nil || len(rep.Artifacts) != n || len(rep.Sources) != n {
		t.Fatalf("?format=json: %d artifacts, %d sources, %v", len(rep.Artifacts), len(rep.Sources), err)
	}

	res, md := get(t, h, page+"?format=markdown")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/markdown") ||
		!strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("?format=markdown: %d, %q, %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
	}
	if md != rep.Markdown() || !strings.Contains(md, id(0)) {
		t.Fatal("?format=markdown is not the report's Markdown")
	}

	res, body = get(t, h, page+"?format=xml")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "format") {
		t.Fatalf("?format=xml: %d\n%s", res.StatusCode, body)
	}
}

// TestAuditPageSmallUnchanged: a report within maxAuditRows is listed
// whole, with its Markdown and flowchart, and no note of a cut.
func TestAuditPageSmallUnchanged(t *testing.T) {
	h, _, _ := newPlanServer(t)
	_, body := get(t, h, "/ui/contexts/poison-plan/audit/s10")
	for _, want := range []string{`id="audit-md"`, "flowchart TD", "# Audit report"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, not := range []string{`id="audit-truncated"`, `id="audit-sources-truncated"`, `id="audit-copy-long"`} {
		if strings.Contains(body, not) {
			t.Errorf("the page has %q", not)
		}
	}
}
