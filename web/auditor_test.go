package web

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

func TestSaid(t *testing.T) {
	cases := []struct {
		typ, data, want string
	}{
		{"claim", `{"text":"Item 42 costs 18.39 EUR","value":18.39}`, "Item 42 costs 18.39 EUR"},
		{"claim", `{"text":"About nineteen dollars","value":19.99}`, "About nineteen dollars (value 19.99)"},
		{"claim", `{"value":7.5}`, "value 7.5"},
		{"fetch_verdict", `{"verdict":"FAILED","reason":"transport.empty_body","url":"https://shop.example/a"}`, "FAILED transport.empty_body · https://shop.example/a"},
		{"fetch_verdict", `{"verdict":"RETRIEVED","url":"https://x.example/"}`, "RETRIEVED · https://x.example/"},
		{"note", `{"b":1,"a":"first string","c":"later"}`, "a: first string"},
		{"note", `{"n":1,"list":[1]}`, ""},
		{"note", `{"text":"line one\nline\ttwo   three"}`, "line one line two three"},
		{"note", `{"text":"<script>x</script>"}`, "<script>x</script>"}, // plain text: templates escape it
		{"note", `not json`, ""},
		{"note", `{"text":"` + strings.Repeat("é", 500) + `"}`, strings.Repeat("é", saidLimit-1) + "…"},
	}
	for _, c := range cases {
		if got := said(c.typ, []byte(c.data)); got != c.want {
			t.Errorf("said(%s, %.40s) = %q, want %q", c.typ, c.data, got, c.want)
		}
	}
}

func TestNaturalSort(t *testing.T) {
	ids := []string{"s10", "s2", "s1", "a", "s01", "s1b", "s1a", "x9y10", "x9y9", "10", "9", ""}
	naturalSort(ids)
	want := []string{"", "9", "10", "a", "s01", "s1", "s1a", "s1b", "s2", "s10", "x9y9", "x9y10"}
	if !slices.Equal(ids, want) {
		t.Errorf("natural order %q, want %q", ids, want)
	}
	// A total order: antisymmetric and consistent with equality.
	for _, a := range want {
		for _, b := range want {
			if naturalLess(a, b) && naturalLess(b, a) {
				t.Errorf("%q and %q are each less than the other", a, b)
			}
			if a != b && !naturalLess(a, b) && !naturalLess(b, a) {
				t.Errorf("%q and %q are unordered", a, b)
			}
		}
	}
}

func TestPluralAndTime(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 edges"}, {1, "1 edge"}, {2, "2 edges"}, {12345, "12,345 edges"}} {
		if got := plural(c.n, "edge", "edges"); got != c.want {
			t.Errorf("plural(%d) = %q", c.n, got)
		}
	}
	for in, want := range map[string]string{
		"2026-03-14T09:26:01.5Z":              "14 Mar 2026 09:26:01 UTC",
		"2026-03-14T09:26:01.123456789+01:00": "14 Mar 2026 08:26:01 UTC",
		"not a time":                          "not a time",
	} {
		if got := humanTime(in); got != want {
			t.Errorf("humanTime(%q) = %q, want %q", in, got, want)
		}
	}
}

// tableIDs reads the first cell of every row of the table with the given
// id.
func tableIDs(t *testing.T, body, id string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var text func(n *html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var walk func(n *html.Node, in bool)
	walk = func(n *html.Node, in bool) {
		if n.Type == html.ElementNode && n.Data == "table" {
			in = attr(n, "id") == id
		}
		if in && n.Type == html.ElementNode && n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" {
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "td" {
					out = append(out, strings.TrimSpace(text(c)))
					break
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(doc, false)
	return out
}

// TestNeighbourhood: one hop up and down by default, depth controls,
// expanding a node adds its neighbours, and path=1 adds the path to the
// poison root, marked.
func TestNeighbourhood(t *testing.T) {
	h, _, _ := newPlanServer(t)
	base := "/ui/contexts/poison-plan/graph?root="
	cases := []struct {
		query string
		want  []string
	}{
		{"s5", []string{"s5", "s1", "s8"}},
		{"s5&up=0", []string{"s5", "s8"}},
		{"s5&down=2", []string{"s5", "s1", "s8", "s10"}},
		{"s5&expand=s8", []string{"s5", "s1", "s8", "s10"}},
		{"s5&expand=s8&expand=s10", []string{"s5", "s1", "s8", "s10", "s9", "s7"}},
		{"s10&up=0&down=0&path=1", []string{"s10", "s8", "s5", "s1"}},
		{"s1&dir=in", []string{"s1", "s3", "s5", "s6", "s8", "s10"}},
	}
	for _, c := range cases {
		res, body := get(t, h, base+c.query)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", c.query, res.StatusCode)
		}
		ids := tableIDs(t, body, "node-table")
		if !slices.Equal(sorted(ids), sorted(c.want)) {
			t.Errorf("%s: nodes %q, want %q", c.query, ids, c.want)
		}
		if n := strings.Count(body, `class="node `); n != len(c.want) {
			t.Errorf("%s: %d nodes drawn, want %d", c.query, n, len(c.want))
		}
		checkHTML(t, c.query, body)
	}
	// Nodes say what was said, and link to the view with them expanded.
	_, body := get(t, h, base+"s5")
	for _, w := range []string{"With the 10% member discount", "Discounted price is 16.55 EUR", "FAILED transport.empty_body"} {
		if !strings.Contains(body, w) {
			t.Errorf("neighbourhood of s5 does not say %q", w)
		}
	}
	if !strings.Contains(body, `href="/ui/contexts/poison-plan/graph?root=s5&amp;expand=s8"`) {
		t.Errorf("s8 does not link to its expansion:\n%s", excerpt(body, "expand=s8"))
	}
	// The path to the poison root: offered for a quarantined root, drawn marked.
	if !strings.Contains(body, `id="show-path"`) {
		t.Error("no link to the path of the quarantined s5")
	}
	_, body = get(t, h, base+"s10&path=1")
	if n := strings.Count(body, "on-path"); n < 4 {
		t.Errorf("path nodes marked %d times", n)
	}
	if got := tableIDs(t, body, "x"); got != nil {
		t.Errorf("tableIDs of a missing table: %q", got)
	}
	for _, bad := range []string{"s5&up=x", "s5&down=-1", "s5&group=colour"} {
		if res, _ := get(t, h, base+bad); res.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", bad, res.StatusCode)
		}
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestFind searches ids and texts from the graph page and the context page.
func TestFind(t *testing.T) {
	h, _, _ := newPlanServer(t)
	matches := func(q string) []string {
		_, body := get(t, h, "/ui/contexts/poison-plan/graph?find="+q)
		i := strings.Index(body, `<ul class="matches">`)
		if i < 0 {
			return nil
		}
		list, _, _ := strings.Cut(body[i:], "</ul>")
		var ids []string
		for _, part := range strings.Split(list, `graph?root=`)[1:] {
			id, _, _ := strings.Cut(part, `"`)
			ids = append(ids, id)
		}
		return ids
	}
	if got := matches("shipping"); !slices.Equal(got, []string{"s4", "s7", "s10"}) {
		t.Errorf("find shipping (a URL, a claim, the answer): %q", got)
	}
	if got := matches("S1"); !slices.Equal(got, []string{"s1", "s10"}) {
		t.Errorf("find S1: %q", got)
	}
	if got := matches("s3"); !slices.Equal(got, []string{"s3"}) {
		t.Errorf("find s3: %q", got)
	}
	_, body := get(t, h, "/ui/contexts/poison-plan?q=discount")
	if !strings.Contains(body, "Artifacts 1–3 of 3 matching") {
		t.Errorf("text search on the context page:\n%s", excerpt(body, "list-count"))
	}
}

// TestOverviewClusters: a context larger than wholeNodes is drawn as
// clusters whose counts add up, linked to the lists of their artifacts.
func TestOverviewClusters(t *testing.T) {
	s := openStore(t)
	loadBig(t, s, "big", 600)
	h := New(Options{Store: s, Logger: quietLogger()})
	for _, group := range []string{"", "producer", "trust"} {
		_, body := get(t, h, "/ui/contexts/big/graph"+query("group", group))
		if !strings.Contains(body, `id="clusters"`) || !strings.Contains(body, "600 artifacts in") {
			t.Fatalf("group %q: no overview:\n%s", group, excerpt(body, "graph-count"))
		}
		checkHTML(t, "overview "+group, body)
	}
	var cs *clusterSet
	_ = s.Read(context.Background(), "big", "", func(v *store.View) error {
		cs = buildClusters(v.State, v.Trust.Status, "type")
		return nil
	})
	total := 0
	for _, c := range cs.clusters {
		total += c.n
	}
	if total != 600 {
		t.Errorf("clusters hold %d artifacts, want 600", total)
	}
	edges := 0
	for _, e := range cs.edges {
		edges += e.n
	}
	// loadBig: every claim derives from its fetch; all but the first of
	// each group of ten also rests on the previous claim.
	if want := 540 + 480; edges != want {
		t.Errorf("cluster edges count %d edges, want %d", edges, want)
	}
	// Cluster links list the cluster's artifacts with the matching filter.
	_, body := get(t, h, "/ui/contexts/big?type=claim&status=quarantined")
	if !strings.Contains(body, "Artifacts 1–18 of 18 matching") {
		t.Errorf("quarantined claims:\n%s", excerpt(body, "list-count"))
	}
	_, body = get(t, h, "/ui/contexts/big?producer=gate%2Fv1")
	if !strings.Contains(body, "Artifacts 1–60 of 60 matching") {
		t.Errorf("fetches by producer:\n%s", excerpt(body, "list-count"))
	}
}

// TestOverviewNotKeptFromAFailedRead: an overview built from a read of an
// old commit whose context ended while it walked the map (a browser that
// left) shows what the walk met, and is not kept: the next read of that
// commit's overview counts every artifact.
func TestOverviewNotKeptFromAFailedRead(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	if _, err := st.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 300 {
		ops = append(ops, putOp(t, fmt.Sprintf("a%03d", i), "claim", "p", map[string]any{"i": i}))
	}
	old := commit(t, st, "c", "main", "t", "m1", ops...)
	commit(t, st, "c", "main", "t", "m2", putOp(t, "a000", "claim", "p", map[string]any{"i": -1}))
	s := New(Options{Store: st, Logger: quietLogger()}).(*server)
	count := func(cs *clusterSet) int {
		n := 0
		for _, c := range cs.clusters {
			n += c.n
		}
		return n
	}
	rctx, cancel := context.WithCancel(ctx)
	err := st.ReadSparse(rctx, "c", old, func(v *store.View) error {
		cancel() // the browser leaves
		if n := count(s.clusters(rctx, v, "type")); n == 300 {
			return fmt.Errorf("the overview of a read whose context ended counts all %d artifacts", n)
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled read: %v", err)
	}
	if err := st.ReadSparse(ctx, "c", old, func(v *store.View) error {
		if n := count(s.clusters(ctx, v, "type")); n != 300 {
			return fmt.Errorf("the overview after a cancelled read counts %d artifacts, the state holds 300", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFieldDiff: the diff page and the artifact page show the changed
// JSON pointers with old and new values, and trust beside them.
func TestFieldDiff(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	_, body := get(t, h, "/ui/contexts/poison-plan/diff?from=main&to=refetch")
	for _, w := range []string{`<code class="pointer">/verdict</code>`, `&#34;FAILED&#34;`, `&#34;RETRIEVED&#34;`, `<code class="pointer">/reason</code>`,
		`<code class="pointer">/receipt/layers/0/verdict</code>`} {
		if !strings.Contains(body, w) {
			t.Errorf("diff main→refetch lacks %s", w)
		}
	}
	checkHTML(t, "field diff", body)
	// Version diff on the artifact page.
	_, body = get(t, h, "/ui/contexts/poison-plan/artifacts/s1?at=refetch")
	link := "/ui/contexts/poison-plan/artifacts/s1?at=" + pc.Refetch.ID.Hex() + "&amp;vs=" + pc.Steps["s1"].ID.Hex()
	if !strings.Contains(body, link) {
		t.Fatalf("no link to the changes from the previous version")
	}
	_, body = get(t, h, strings.ReplaceAll(link, "&amp;", "&"))
	if !strings.Contains(body, "Changes from v1 to v2") || !strings.Contains(body, `<code class="pointer">/verdict</code>`) {
		t.Errorf("version diff:\n%s", excerpt(body, "version-diff"))
	}
	if res, _ := get(t, h, "/ui/contexts/poison-plan/artifacts/s10?vs="+pc.Steps["s2"].ID.Hex()); res.StatusCode != 404 {
		t.Errorf("vs a commit without the artifact: %d, want 404", res.StatusCode)
	}
}

// TestCompareRuns: the same context at two branches, and two contexts.
func TestCompareRuns(t *testing.T) {
	h, _, s := newPlanServer(t)
	loadPoisonPlan(t, s, "poison-plan-2")
	_, body := get(t, h, "/ui/compare?a=poison-plan&b=poison-plan&b_at=refetch")
	if !strings.Contains(body, "≠ Different states") || !strings.Contains(body, "6 artifacts differ") {
		t.Errorf("main vs refetch:\n%s", excerpt(body, "compare-verdict"))
	}
	if got := tableIDs(t, body, "compare-rows"); !slices.Equal(got, []string{"s1", "s3", "s5", "s6", "s8", "s10"}) {
		t.Errorf("differing rows %q", got)
	}
	_, body = get(t, h, "/ui/compare?a=poison-plan&b=poison-plan-2")
	if !strings.Contains(body, "= Same state") {
		t.Errorf("two identical runs:\n%s", excerpt(body, "compare-verdict"))
	}
	checkHTML(t, "compare", body)
	_, body = get(t, h, "/ui/compare")
	if !strings.Contains(body, "Pick two contexts") {
		t.Error("empty compare page")
	}
	for _, bad := range []string{"a=nope&b=poison-plan", "a=poison-plan&b=bad%20id", "a=poison-plan&b=poison-plan&b_at=nope"} {
		if res, _ := get(t, h, "/ui/compare?"+bad); res.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", bad, res.StatusCode)
		}
	}
}

// TestContextsPages: the contexts list is paginated, searchable and in
// natural order.
func TestContextsPages(t *testing.T) {
	s := openStore(t)
	for i := range 120 {
		if _, err := s.CreateContext(context.Background(), fmt.Sprintf("run-%d", i), "enforce"); err != nil {
			t.Fatal(err)
		}
	}
	h := New(Options{Store: s, Logger: quietLogger()})
	_, body := get(t, h, "/")
	if !strings.Contains(body, "Contexts 1–50 of 120.") || !strings.Contains(body, `href="/?page=2"`) {
		t.Errorf("first page:\n%s", excerpt(body, "at-note"))
	}
	rows := contextIDs(t, body)
	if len(rows) != 50 || rows[0] != "run-0" || rows[1] != "run-1" || rows[10] != "run-10" {
		t.Errorf("natural order: %q", rows[:min(12, len(rows))])
	}
	_, body = get(t, h, "/?page=3")
	if rows := contextIDs(t, body); len(rows) != 20 || rows[19] != "run-119" {
		t.Errorf("last page: %q", rows)
	}
	_, body = get(t, h, "/?q=RUN-11")
	if rows := contextIDs(t, body); !slices.Equal(rows, []string{"run-11", "run-110", "run-111", "run-112", "run-113", "run-114", "run-115", "run-116", "run-117", "run-118", "run-119"}) {
		t.Errorf("search: %q", rows)
	}
	_, body = get(t, h, "/?q=nothing")
	if !strings.Contains(body, "No context id contains") {
		t.Error("empty search")
	}
}

func contextIDs(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, part := range strings.Split(body, `<td data-label="context"><a href="/ui/contexts/`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		id, _ = url.PathUnescape(id)
		out = append(out, id)
	}
	return out
}

// TestTimeline: every context page lists the commits before the shown one,
// each a link to the same view at that commit, with what it changed.
func TestTimeline(t *testing.T) {
	h, pc, _ := newPlanServer(t)
	_, body := get(t, h, "/ui/contexts/poison-plan/graph?root=s5&up=2")
	want := `href="/ui/contexts/poison-plan/graph?at=` + pc.Steps["s9"].ID.Hex() + `&amp;root=s5&amp;up=2"`
	if !strings.Contains(body, want) {
		t.Errorf("timeline does not keep the view:\n%s", excerpt(body, `id="timeline"`))
	}
	if !strings.Contains(body, "what changed") || strings.Count(body, `<li class="current"`) != 1 {
		t.Errorf("timeline marks:\n%s", excerpt(body, `id="timeline"`))
	}
	_, body = get(t, h, "/ui/contexts/poison-plan/artifacts/s3?at="+pc.Steps["s5"].ID.Hex())
	if !strings.Contains(body, `id="latest"`) {
		t.Error("an older commit offers no way back to the latest")
	}
	// Zero counts are neutral; times are human with RFC 3339 on hover.
	_, body = get(t, h, "/ui/contexts/poison-plan/artifacts/s2?at="+pc.Steps["s2"].ID.Hex())
	if !strings.Contains(body, `<time datetime="`+pc.Steps["s2"].Time+`" title="`+pc.Steps["s2"].Time+`">`) {
		t.Errorf("no machine time on hover")
	}
	_, body = get(t, h, "/ui/contexts/poison-plan?at="+pc.Steps["s2"].ID.Hex())
	if !strings.Contains(body, `card quarantined zero`) || strings.Contains(body, `card poison_root zero`) {
		t.Errorf("zero quarantined is not neutral, or one poison root is")
	}
}
