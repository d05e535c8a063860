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
	head := commit(t, s, "chain", "", "t", "chain", ops...)
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
	for _, c := range []string{"roots", "dense"} {
		if _, err := s.CreateContext(context.Background(), c, store.ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	const roots = 3 * maxAuditNames
	const shared = "https://example.com/same"
	ops := []graph.Op{putOp(t, "answer", "claim", "agent", map[string]any{"text": "the answer", "url": shared})}
	for i := range roots {
		id := fmt.Sprintf("f%03d", i)
		ops = append(ops, putOp(t, id, "fetch_verdict", "gate/v1", fetchVerdict(shared, shared, 200, "text/html", "", "FAILED", "transport.empty_body", "empty")),
			linkOp("answer", "supported_by", id))
	}
	commit(t, s, "roots", "", "t", "roots", ops...)

	const dense = 200 // 19,900 edges: more than maxAuditCopy/64
	ops = nil
	for i := range dense {
		id := fmt.Sprintf("d%03d", i)
		ops = append(ops, putOp(t, id, "claim", "agent", map[string]any{"text": id}))
		for j := range i {
			ops = append(ops, linkOp(id, "derived_from", fmt.Sprintf("d%03d", j)))
		}
	}
	commit(t, s, "dense", "", "t", "dense", ops...)
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

// TestContextListUnfilteredMatchesFiltered: the context page without a
// search or filter (which looks up only its page's artifacts) lists what
// the same page does with a filter every artifact passes (which looks up
// every artifact) — the rows, their order, the counts, the types — on the
// first, a middle and the last page and one past it, and over the state
// map after a restart as well as on a head made by commits. It reopens
// its store, so it keeps to the embedded backend (a store's Close closes
// the driver it was given) whichever the other tests use.
func TestContextListUnfilteredMatchesFiltered(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(context.Background(), "claims", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n = 2*artifactsPerPage + 37
	var ops []graph.Op
	for i := range n {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"text": fmt.Sprintf("claim %d", i)}))
		if i > 0 {
			ops = append(ops, linkOp(fmt.Sprintf("s%d", i), "derived_from", fmt.Sprintf("s%d", i/2)))
		}
	}
	commit(t, s, "claims", "", "t", "claims", ops...)
	rowsOf := func(body string) string {
		i := strings.Index(body, "<tbody")
		j := strings.Index(body[i:], "</tbody>")
		return body[i : i+j]
	}
	check := func(h http.Handler, what string) {
		for _, page := range []int{1, 2, 3, 4} {
			p := fmt.Sprintf("/ui/contexts/claims?page=%d", page)
			_, all := get(t, h, p)
			_, typed := get(t, h, p+"&type=claim")
			if rowsOf(all) != rowsOf(typed) {
				t.Errorf("%s, page %d: the unfiltered rows differ from the filtered ones", what, page)
			}
			if page <= 3 && !strings.Contains(all, fmt.Sprintf("of %d", n)) {
				t.Errorf("%s, page %d: no count of %d", what, page, n)
			}
			if want := fmt.Sprintf(`<option value="claim">claim (%d)</option>`, n); !strings.Contains(all, want) {
				t.Errorf("%s, page %d: the type list lacks %s", what, page, want)
			}
		}
	}
	check(New(Options{Store: s, Logger: quietLogger()}), "a head made by commits")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(New(Options{Store: s, Logger: quietLogger()}), "after a restart")
}

// TestContextPageHugePageNumber: a page number whose offset would
// overflow renders, past the last page, instead of panicking on a slice
// with a negative bound (or listing the first rows as a page before the
// first, as it once did).
func TestContextPageHugePageNumber(t *testing.T) {
	s := openStore(t)
	if _, err := s.CreateContext(context.Background(), "claims", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 150 {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"text": fmt.Sprintf("claim %d", i)}))
	}
	commit(t, s, "claims", "", "t", "claims", ops...)
	h := New(Options{Store: s, Logger: quietLogger()})
	for _, page := range []string{"184467440737095517", "92233720368547760", "9223372036854775807", "3"} {
		for _, filter := range []string{"", "&type=claim"} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("page=%s%s: panic: %v", page, filter, p)
					}
				}()
				res, body := get(t, h, "/ui/contexts/claims?page="+page+filter)
				if res.StatusCode != http.StatusOK {
					t.Errorf("page=%s%s: status %d", page, filter, res.StatusCode)
				}
				if strings.Contains(body, `<td class="id"`) {
					t.Errorf("page=%s%s: lists artifacts past the last page", page, filter)
				}
			}()
		}
	}
}
