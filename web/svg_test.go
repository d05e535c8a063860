package web

import (
	"context"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
)

func TestSanitizeSVG(t *testing.T) {
	in := `<?xml version="1.0"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg width="100pt" height="50pt" viewBox="0 0 100 50" onload="alert(1)" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<script>alert(1)</script>
<style>*{}</style>
<title>graph</title>
<g id="node1" class="node poison_root" onclick="alert(1)" style="fill:red">
<title>n0</title>
<a xlink:href="javascript:alert(1)" xlink:title="a&lt;script&gt;alert(1)&lt;/script&gt;" target="_blank">
<polygon fill="url(https://evil.example/x)" stroke="black" points="1,2 3,4"/>
<text x="1" y="2">&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;</text>
<foreignObject><div>hi</div></foreignObject>
<image xlink:href="https://evil.example/x.png"/>
</a>
<a href="https://evil.example/"><text>y</text></a>
<use xlink:href="#node1"/>
<svg><script>alert(2)</script></svg>
</g>
<g id="node2" class="node confirmed"><title>n1</title><ellipse fill="#d4edda" cx="1" cy="1" rx="1" ry="1"/></g>
<g id="edge1" class="edge dep"><title>n1&#45;&gt;n0</title><path d="M1,1"/></g>
</svg>
<!-- trailing -->`
	links := &svgLinks{
		nodes: map[string]nodeLink{
			"n0": {href: "/ui/contexts/c/artifacts/a%3Cb?at=main", title: "a<script>alert(1)</script> — poison root"},
			"n1": {href: "javascript:alert(1)", title: "evil"},
		},
		edges: map[string]string{"n1->n0": `n1 "derived_from" n0`},
	}
	out, err := sanitizeSVG([]byte(in), "provenance", `a "label" <x>`, links)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "onload", "onclick", "style", "url(", "javascript:", "evil", "foreignObject",
		"<image", "<use", "target=", "<title>n0</title>", "<title>graph</title>", "xlink:", "<!DOCTYPE", "<?xml", "<!--", "<div", `"label"`, "<x>"} {
		if strings.Contains(out, bad) {
			t.Errorf("sanitized SVG still has %q:\n%s", bad, out)
		}
	}
	for _, good := range []string{
		`<svg xmlns="http://www.w3.org/2000/svg" class="provenance" aria-label="a &#34;label&#34; &lt;x&gt;" width="100pt" height="50pt" viewBox="0 0 100 50">`,
		`<g id="provenance-node1" class="node poison_root">`,
		`<a href="/ui/contexts/c/artifacts/a%3Cb?at=main"><title>a&lt;script&gt;alert(1)&lt;/script&gt; — poison root</title>`,
		`<polygon stroke="black" points="1,2 3,4">`,
		`&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;`,
		`<text>y</text>`,
		`<g id="provenance-node2" class="node confirmed"><ellipse`,
		`<g id="provenance-edge1" class="edge dep"><title>n1 &#34;derived_from&#34; n0</title><path d="M1,1"></path></g>`,
		"</a></g>",
	} {
		if !strings.Contains(out, good) {
			t.Errorf("sanitized SVG lacks %q:\n%s", good, out)
		}
	}
	for _, bad := range []string{"", "<g/>", "<svg><g></svg>", "<html><svg/></html>", `<svg/><svg/>`, "<svg>&bogus;</svg>", "<svg><g><title><g/></title></g></svg>"} {
		if out, err := sanitizeSVG([]byte(bad), "", "", nil); err == nil {
			t.Errorf("sanitizeSVG(%q) = %q, want an error", bad, out)
		}
	}
}

// TestDOTInjection lays out a picture whose ids try to break out of the
// DOT quoting and checks that Graphviz saw exactly the nodes and edges we
// wrote, with labels intact and only our links.
func TestDOTInjection(t *testing.T) {
	const nonChars = " \ufffe\uffff"
	st := graph.NewState(nil)
	var ops []graph.Op
	ids := append([]string{"plain", `back\slash\N\G\L`, "entity &amp; &#60; &lt; &bogus;"}, hostileIDs...)
	for _, id := range ids {
		ops = append(ops, putOp(t, id, "claim", "x", map[string]any{"a": 1}))
	}
	for _, id := range ids[1:] {
		ops = append(ops, linkOp(id, "derived_from", "plain"))
	}
	if _, err := st.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	sg := graph.ContextSubgraph(st, 0)
	trust := map[string]graph.Trust{}
	saids := map[string]string{}
	for _, a := range sg.Nodes {
		trust[a.ID] = graph.Trust{ID: a.ID, Status: graph.StatusConfirmed}
		// Hostile text in the label and tooltip too, ending in the two
		// noncharacters XML forbids: the SVG Graphviz writes must still
		// parse.
		saids[a.ID] = "said " + a.ID + nonChars
	}
	d := buildDOT("c", "main", graphQuery{}, picture{nodes: sg.Nodes, edges: sg.Edges}, trust, saids, st.Relations().Depends)
	raw, err := layoutSVG(context.Background(), d.dot)
	if err != nil {
		t.Fatalf("layout: %v\n%s", err, d.dot)
	}
	out, err := sanitizeSVG(raw, "provenance", "x", &d.links)
	if err != nil {
		t.Fatal(err)
	}
	page := "<html><body>" + out + "</body></html>"
	checkHTML(t, "dot injection", page)
	if n := strings.Count(out, `class="node `); n != len(ids) {
		t.Errorf("%d nodes drawn, want %d\n%s", n, len(ids), d.dot)
	}
	if n := strings.Count(out, `class="edge `); n != len(ids)-1 {
		t.Errorf("%d edges drawn, want %d", n, len(ids)-1)
	}
	for _, id := range ids {
		if !strings.Contains(out, `href="`+artifactURLEscapedForXML(id)+`"`) {
			t.Errorf("no link for %q", id)
		}
		var tip strings.Builder
		escapeXML(&tip, id+" (claim) — confirmed\n“said "+id+nonChars+"”")
		if !strings.Contains(out, "<title>"+tip.String()+"</title>") {
			t.Errorf("tooltip of %q not literal", id)
		}
	}
	if strings.Contains(out, "evil") && !strings.Contains(out, "&#34;];evil[") {
		t.Errorf("the DOT string escaped its quotes:\n%s", out)
	}
}

func artifactURLEscapedForXML(id string) string {
	var b strings.Builder
	escapeXML(&b, artifactURL("c", id, "main"))
	return b.String()
}
