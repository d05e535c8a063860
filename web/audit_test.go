package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// TestAuditPageBounded: the audit page of an answer resting on more than
// maxAuditRows artifacts lists the nearest maxAuditRows (by depth, then
// id) and as many sources, says so, leaves the Markdown and the Mermaid
// flowchart out, and links the whole report at the commit it shows, which
// ?format=json answers
// byte for byte as the API's audit writes it and ?format=markdown as its
// Markdown — both as attachments. An unknown format is a 400 naming the
// parameter.
func TestAuditPageBounded(t *testing.T) {
	const n = maxAuditRows + 200
	s := openStore(t)
	id := func(i int) string { return fmt.Sprintf("c%04d", i) }
	var ops []graph.Op
	for i := range n {
		ops = append(ops, putOp(t, id(i), "claim", "agent", map[string]any{"text": "step " + id(i), "url": "https://example.com/" + id(i)}))
		if i > 0 {
			ops = append(ops, linkOp(id(i), "derived_from", id(i-1)))
		}
	}
	head := loadContext(t, s, "chain", ops...)
	h := New(Options{Store: s, Logger: quietLogger()})
	pinned := "?at=" + url.QueryEscape(head.ID.String()) + "&amp;format="
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
		// the downloads name the commit shown, not the branch asked for
		`href="/ui/contexts/chain/audit/` + tip + pinned + `json"`,
		`href="/ui/contexts/chain/audit/` + tip + pinned + `markdown"`,
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

// TestAuditPageNamesBounded: an answer resting on many poison roots, all
// naming one source, gets a verdict naming maxAuditNames of its roots and
// a source naming maxAuditNames of its artifacts, each with the count of
// the rest; a report of few artifacts but many edges leaves its Markdown
// and flowchart out (maxAuditCopy) and lists every artifact.
func TestAuditPageNamesBounded(t *testing.T) {
	s := openStore(t)
	const roots = 3 * maxAuditNames
	const shared = "https://example.com/same"
	ops := []graph.Op{putOp(t, "answer", "claim", "agent", map[string]any{"text": "the answer", "url": shared})}
	for i := range roots {
		id := fmt.Sprintf("f%03d", i)
		ops = append(ops, putOp(t, id, "fetch_verdict", "gate/v1", fetchVerdict(shared, shared, 200, "text/html", "", "FAILED", "transport.empty_body", "empty")),
			linkOp("answer", "supported_by", id))
	}
	loadContext(t, s, "roots", ops...)

	const dense = 200 // 19,900 edges: more than maxAuditCopyEdges
	ops = nil
	for i := range dense {
		id := fmt.Sprintf("d%03d", i)
		ops = append(ops, putOp(t, id, "claim", "agent", map[string]any{"text": id}))
		for j := range i {
			ops = append(ops, linkOp(id, "derived_from", fmt.Sprintf("d%03d", j)))
		}
	}
	loadContext(t, s, "dense", ops...)
	h := New(Options{Store: s, Logger: quietLogger()})

	_, body := get(t, h, "/ui/contexts/roots/audit/answer")
	checkHTML(t, "roots", body)
	i := strings.Index(body, `id="audit-verdict"`)
	j := strings.Index(body[i:], "</section>")
	verdict := body[i : i+j]
	verdict, _, _ = strings.Cut(verdict, "The path to a poison root") // the roots' sentence
	if n := strings.Count(verdict, `href="/ui/contexts/roots/artifacts/f`); n != maxAuditNames {
		t.Errorf("the verdict links %d roots, want %d", n, maxAuditNames)
	}
	if want := fmt.Sprintf("and %d more", roots-maxAuditNames); !strings.Contains(verdict, want) {
		t.Errorf("the verdict lacks %q", want)
	}
	i = strings.Index(body, `<ul class="sources-list">`)
	j = strings.Index(body[i:], "</ul>")
	sources := body[i : i+j]
	if n := strings.Count(sources, ", ") + 1; n != maxAuditNames {
		t.Errorf("the source names %d artifacts, want %d", n, maxAuditNames)
	}
	if want := fmt.Sprintf("and %d more", roots+1-maxAuditNames); !strings.Contains(sources, want) {
		t.Errorf("the source lacks %q", want)
	}
	if !strings.Contains(body, `id="audit-md"`) {
		t.Error("a report of 61 artifacts lost its Markdown")
	}

	_, body = get(t, h, fmt.Sprintf("/ui/contexts/dense/audit/d%03d", dense-1))
	checkHTML(t, "dense", body)
	if rows := strings.Count(body, `<td class="num" data-label="depth">`); rows != dense {
		t.Errorf("the dense report lists %d artifacts, want %d", rows, dense)
	}
	if !strings.Contains(body, `id="audit-copy-long"`) || strings.Contains(body, `id="audit-md"`) || strings.Contains(body, `id="audit-truncated"`) {
		t.Error("the dense report's page should list every artifact and leave the Markdown out")
	}
	if len(body) > 2<<20 {
		t.Errorf("the dense report's page is %d bytes", len(body))
	}
}
