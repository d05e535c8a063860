package web

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// seen is the text of an HTML fragment as a reader sees it: tags
// dropped, entities read, the code points that draw nothing (format
// characters, controls, fillers, the combining grapheme joiner,
// variation selectors, private use) dropped, every other space drawn as
// one ASCII space, and spaces collapsed and trimmed as HTML lays text
// out. It is written apart from the UI's own list of invisible code
// points, from what a browser draws.
func seen(fragment string) string {
	text := html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(fragment, ""))
	var b strings.Builder
	for _, r := range text {
		switch {
		case unicode.Is(unicode.Zs, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r), r == '\t', r == '\n', r == '\r', r == '\f':
			b.WriteByte(' ')
		case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Cc, r), unicode.Is(unicode.Co, r),
			unicode.Is(unicode.Variation_Selector, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), r == 0x034f,
			r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, r == 0x2800:
		default:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// okPage GETs path from srv over HTTP and returns its body, failing t
// unless it answers 200.
func okPage(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", path, res.StatusCode, err, body)
	}
	return string(body)
}

// readApart fails t when two of the values a page shows read alike:
// shown maps each value (a producer) to what the page drew for it.
func readApart(t *testing.T, where string, shown map[string][]string) {
	t.Helper()
	by := map[string]string{}
	for value, texts := range shown {
		for _, s := range texts {
			if other, ok := by[s]; ok && other != value {
				t.Errorf("%s: %q and %q both read %q", where, other, value, s)
			}
			by[s] = value
		}
	}
}

// TestLookAlikeLabelsReadApart serves, over real HTTP, a context written
// before producers were checked (the core does not check them): its
// producers differ only by a code point that draws nothing or draws as a
// space ("agent" and "agent" with a ZERO WIDTH SPACE, "agent x" with a
// space and with a NO-BREAK SPACE…), one is named as the UI writes an
// escape ("agent⟨U+200B⟩"), and two, past maxClusters, as the overview's
// merged cluster reads, with and without the marks around it. Read as a
// reader sees them (seen), any two of them must read apart: in the
// context page's rows, on an artifact's page, and in the overview by
// producer — its table and its drawing — where none may read like the
// merged cluster either.
func TestLookAlikeLabelsReadApart(t *testing.T) {
	lookAlike := []string{
		"agent", "agent\u200b", "agent\u200d", "agent\u2060", "\ufeffagent", "ag\u00adent", "agent\u034f",
		"agent\u3164", "agent\u115f", "agent\u180e", "agent\x01",
		"agent x", "agent\u00a0x", "agent\u2028x", "agent\u3000x", "agent\u202fx",
		"agent⟨U+200B⟩", "agent\u3008U+200B\u3009",
		// Default-ignorable code points the id and label rules accept:
		// browsers draw them as nothing.
		"agent\u17b4", "agent\u2065", "agent\ufff0", "agent\U000E0080",
		// Longer than a drawn label: cut, a byte that is not UTF-8 must
		// still read apart from U+FFFD.
		strings.Repeat("a", labelRunes-2) + "\xffzzzz", strings.Repeat("a", labelRunes-2) + "\ufffdzzzz",
	}
	// All artifacts are confirmed, so the overview keeps maxClusters-3
	// clusters, the largest, and merges the others into one
	// (tally.clusterSet): the big producers below are kept and the
	// small ones merged.
	const small = 50
	big := len(lookAlike) + 2
	merged := big + small - (maxClusters - 3)
	mergedName := fmt.Sprintf("%d other producers", merged)
	producers := append(lookAlike, mergedName, "⟨"+mergedName+"⟩")

	st := openStore(t)
	var ops []graph.Op
	idOf := map[string]string{} // artifact id → its producer
	for i, by := range producers {
		for j := range 12 {
			id := fmt.Sprintf("p%02d-%02d", i, j)
			idOf[id] = by
			ops = append(ops, putOp(t, id, "claim", by, map[string]any{"text": "a claim by 👩\u200d💻"}))
		}
	}
	for i := range small {
		ops = append(ops, putOp(t, fmt.Sprintf("s%02d", i), "claim", fmt.Sprintf("step-%02d", i), map[string]any{"text": "a step"}))
	}
	loadContext(t, st, "look", ops...)
	srv := httptest.NewServer(New(Options{Store: st, Logger: quietLogger()}))
	defer srv.Close()
	page := func(path string) string { t.Helper(); return okPage(t, srv, path) }

	// The context page: every artifact's row names its producer.
	body := page("/ui/contexts/look?q=-00")
	rows := regexp.MustCompile(`(?s)<tr><td class="id" data-label="id"><a href="[^"]*">(.*?)</a></td>.*?<td data-label="produced by">(.*?)</td>`).FindAllStringSubmatch(body, -1)
	if len(rows) < len(producers) {
		t.Fatalf("the context page lists %d rows, want at least %d:\n%s", len(rows), len(producers), excerpt(body, "produced by"))
	}
	shown := map[string][]string{}
	for _, m := range rows {
		by, ok := idOf[seen(m[1])]
		if !ok {
			continue
		}
		shown[by] = append(shown[by], seen(m[2]))
	}
	readApart(t, "context page", shown)

	// An artifact's page names its producer.
	shown = map[string][]string{}
	meta := regexp.MustCompile(`<dt>produced by</dt><dd>(.*?)</dd>`)
	for i, by := range producers {
		m := meta.FindStringSubmatch(page(fmt.Sprintf("/ui/contexts/look/artifacts/p%02d-00", i)))
		if m == nil {
			t.Fatalf("the page of p%02d-00 names no producer", i)
		}
		shown[by] = append(shown[by], seen(m[1]))
	}
	readApart(t, "artifact pages", shown)
	// Content is evidence and is shown as it is: the said text keeps its
	// ZERO WIDTH JOINER.
	if body := page("/ui/contexts/look/artifacts/p01-00"); !strings.Contains(body, "“a claim by 👩\u200d💻”") {
		t.Errorf("the artifact page does not show its text as written:\n%s", excerpt(body, "said"))
	}

	// The overview by producer: its table, the merged cluster's row
	// among them, and its drawing.
	body = page("/ui/contexts/look/graph?group=producer")
	cells := regexp.MustCompile(`<tr><td data-label="producer"><a href="([^"]*)">(.*?)</a></td>`).FindAllStringSubmatch(body, -1)
	if len(cells) != maxClusters-3+1 {
		t.Fatalf("the overview's table has %d clusters, want %d:\n%s", len(cells), maxClusters-3+1, excerpt(body, `id="clusters"`))
	}
	var table []string
	listOf := map[string]string{} // a cluster's label → its list's URL
	for _, m := range cells {
		table = append(table, seen(m[2]))
		listOf[seen(m[2])] = html.UnescapeString(m[1])
	}
	// A cluster's link lists the artifacts of exactly its producer.
	list, ok := listOf["agent⟨U+200B⟩"]
	if !ok {
		t.Fatalf("no cluster reads %q: %q", "agent⟨U+200B⟩", table)
	}
	if !strings.Contains(list, "producer=agent%E2%80%8B") {
		t.Errorf("the cluster of %q lists %s", "agent\u200b", list)
	}
	listed := regexp.MustCompile(`<td data-label="produced by">(.*?)</td>`).FindAllStringSubmatch(page(list), -1)
	if len(listed) != 12 {
		t.Errorf("the cluster of %q lists %d artifacts, want 12", "agent\u200b", len(listed))
	}
	for _, m := range listed {
		if got := seen(m[1]); got != "agent⟨U+200B⟩" {
			t.Errorf("the cluster of %q lists an artifact by %q", "agent\u200b", got)
		}
	}
	svg := body[strings.Index(body, "<svg"):strings.Index(body, "</svg>")]
	nodes := regexp.MustCompile(`(?s)<g [^>]*class="node[^"]*".*?<text[^>]*>(.*?)</text>`).FindAllStringSubmatch(svg, -1)
	if len(nodes) != len(cells) {
		t.Fatalf("the overview draws %d clusters, its table lists %d:\n%s", len(nodes), len(cells), svg)
	}
	var drawn []string
	for _, m := range nodes {
		drawn = append(drawn, seen(m[1]))
	}
	for what, labels := range map[string][]string{"overview table": table, "overview drawing": drawn} {
		count := map[string]int{}
		for _, l := range labels {
			count[l]++
		}
		for l, n := range count {
			if n > 1 {
				t.Errorf("%s: %d clusters read %q: %q", what, n, l, labels)
			}
		}
	}
}

// TestLookAlikeAuthorsAndIDsReadApart serves, over real HTTP, a chain of
// artifacts whose ids differ by a code point the id rules accept but a
// browser draws as nothing (U+17B4, U+2065, U+FFF0) or by the escape's
// marks typed in the id, each written by a commit whose author, and by a
// producer whose name, differ likewise (authors and producers written
// before they were checked). Read as a reader sees them (seen), no two
// may read alike in the context page's commit list, the whole graph's
// node labels and tooltips, or the audit's rows.
func TestLookAlikeAuthorsAndIDsReadApart(t *testing.T) {
	ids := []string{"c", "c\u17b4", "c\u2065", "c\ufff0", "c⟨U+17B4⟩", "c\u3008U+17B4\u3009"}
	authors := []string{"bot", "bot\u200b", "bot\u17b4", "bot\u2065", "bot⟨U+200B⟩", "bot\u00a0"}
	producers := []string{"agent", "agent\u2060", "agent\u17b5", "agent\ufff8", "agent⟨U+2060⟩", "agent\u3000"}
	st := openStore(t)
	if _, err := st.CreateContext(t.Context(), "who", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		ops := []graph.Op{putOp(t, id, "claim", producers[i], map[string]any{"text": "a claim"})}
		if i > 0 {
			ops = append(ops, linkOp(id, "derived_from", ids[i-1]))
		}
		commit(t, st, "who", "", authors[i], fmt.Sprintf("step %d", i), ops...)
	}
	srv := httptest.NewServer(New(Options{Store: st, Logger: quietLogger()}))
	defer srv.Close()
	page := func(path string) string { t.Helper(); return okPage(t, srv, path) }
	// idOf reads an artifact link's target back to its id.
	idOf := func(href string) string {
		t.Helper()
		u, err := url.Parse(html.UnescapeString(href))
		if err != nil {
			t.Fatal(err)
		}
		return u.Path[strings.LastIndex(u.Path, "/")+1:]
	}

	// The commit list names each commit's author.
	rows := regexp.MustCompile(`(?s)<td data-label="author">(.*?)</td>\s*<td class="msg" data-label="message">step (\d+)</td>`).FindAllStringSubmatch(page("/ui/contexts/who"), -1)
	if len(rows) != len(authors) {
		t.Fatalf("the commit list shows %d of the %d authors", len(rows), len(authors))
	}
	shown := map[string][]string{}
	for _, m := range rows {
		var i int
		fmt.Sscan(m[2], &i)
		shown[authors[i]] = append(shown[authors[i]], seen(m[1]))
	}
	readApart(t, "commit list", shown)

	// The whole graph: each node's label and its tooltip's first line.
	body := page("/ui/contexts/who/graph")
	nodes := regexp.MustCompile(`(?s)<g id="[^"]*node\d+" class="node[^"]*">\s*<a href="([^"]*)"><title>(.*?)</title>.*?<text[^>]*>(.*?)</text>`).FindAllStringSubmatch(body, -1)
	if len(nodes) != len(ids) {
		t.Fatalf("the graph draws %d of the %d artifacts:\n%s", len(nodes), len(ids), body)
	}
	labels, tips := map[string][]string{}, map[string][]string{}
	for _, m := range nodes {
		id := idOf(m[1])
		if !slices.Contains(ids, id) {
			t.Fatalf("a node links to %q, no artifact of the context", id)
		}
		labels[id] = append(labels[id], seen(m[3]))
		tip, _, _ := strings.Cut(html.UnescapeString(m[2]), " (")
		tips[id] = append(tips[id], seen(tip))
	}
	readApart(t, "graph labels", labels)
	readApart(t, "graph tooltips", tips)

	// The audit of the chain's tip: a row per artifact, its id and its
	// producer.
	body = page("/ui/contexts/who/audit/" + url.PathEscape(ids[len(ids)-1]))
	audit := regexp.MustCompile(`(?s)<td class="id" data-label="id"><a href="([^"]*)">(.*?)</a></td>.*?<td data-label="produced by">(.*?)</td></tr>`).FindAllStringSubmatch(body, -1)
	if len(audit) != len(ids) {
		t.Fatalf("the audit lists %d of the %d artifacts", len(audit), len(ids))
	}
	auditIDs, auditBy := map[string][]string{}, map[string][]string{}
	for _, m := range audit {
		id := idOf(m[1])
		i := slices.Index(ids, id)
		if i < 0 {
			t.Fatalf("an audit row links to %q, no artifact of the context", id)
		}
		auditIDs[id] = append(auditIDs[id], seen(m[2]))
		auditBy[producers[i]] = append(auditBy[producers[i]], seen(m[3]))
	}
	readApart(t, "audit ids", auditIDs)
	readApart(t, "audit producers", auditBy)
}

// TestProducerFilterSurvivesTheSearchForm lists, over real HTTP, the
// artifacts of a producer written with a byte that is not UTF-8 (history
// from before producers were checked), then submits the list's search
// form as a browser does — a field's value is text, so such a byte is
// sent as U+FFFD — and checks that the filter is still the same
// producer's, not lost and not another producer's whose name has U+FFFD
// there.
func TestProducerFilterSurvivesTheSearchForm(t *testing.T) {
	st := openStore(t)
	loadContext(t, st, "hp",
		putOp(t, "x1", "claim", "\xffbad", map[string]any{"text": "one"}),
		putOp(t, "x2", "claim", "\ufffdbad", map[string]any{"text": "two"}),
		putOp(t, "x3", "claim", "other", map[string]any{"text": "three"}))
	srv := httptest.NewServer(New(Options{Store: st, Logger: quietLogger()}))
	defer srv.Close()
	listed := func(query string) (ids []string, body string) {
		t.Helper()
		body = okPage(t, srv, "/ui/contexts/hp?"+query)
		for _, m := range regexp.MustCompile(`<td class="id" data-label="id"><a href="[^"]*">(.*?)</a>`).FindAllStringSubmatch(body, -1) {
			ids = append(ids, seen(m[1]))
		}
		return ids, body
	}
	ids, body := listed("producer=%FFbad")
	if !slices.Equal(ids, []string{"x1"}) {
		t.Fatalf("?producer=%%FFbad lists %q, want [x1]", ids)
	}
	// No form of the page (the search, time travel) carries the byte in a
	// field, where a browser would send U+FFFD.
	hidden := regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)"`).FindAllStringSubmatch(body, -1)
	carried := 0
	for _, m := range hidden {
		v := html.UnescapeString(m[2])
		if !utf8.ValidString(v) || strings.ContainsRune(v, utf8.RuneError) {
			t.Errorf("a form field %s holds %q: a browser sends it as U+FFFD", m[1], v)
		}
		if strings.HasPrefix(m[1], "producer") {
			carried++
		}
	}
	if carried < 2 {
		t.Errorf("%d forms carry the producer filter, want the search and the time travel's: %q", carried, hidden)
	}
	// Each form as a browser submits it: its fields' values as text.
	for _, name := range []string{`class="search" role="search"`, `class="at-form"`, `class="travel-form" id="travel-form"`} {
		form := regexp.MustCompile(`(?s)<form method="get" ` + name + `>(.*?)</form>`).FindStringSubmatch(body)
		if form == nil {
			t.Fatalf("the list has no form %s", name)
		}
		sent := url.Values{}
		for _, m := range regexp.MustCompile(`<input (?:type="[^"]*" )?(?:id="[^"]*" )?name="([^"]*)" (?:min="[^"]*" max="[^"]*" )?value="([^"]*)"`).FindAllStringSubmatch(form[1], -1) {
			sent.Add(html.UnescapeString(m[1]), strings.ToValidUTF8(html.UnescapeString(m[2]), "\ufffd"))
		}
		if ids, _ := listed(sent.Encode()); !slices.Equal(ids, []string{"x1"}) {
			t.Errorf("the form %s sent %q, which lists %q, want [x1]", name, sent.Encode(), ids)
		}
	}
}
