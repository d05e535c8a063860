package web

import (
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// Picture limits.
const (
	// maxPictureNodes caps the artifacts drawn; more are left out with a
	// visible "truncated" note.
	maxPictureNodes = 500
	// maxPictureEdges caps the edges drawn among them.
	maxPictureEdges = 1500
	// edgeLabelNodes: pictures with at most this many nodes get relation
	// labels on their edges (larger ones have them as tooltips only, which
	// keeps the layout readable and fast).
	edgeLabelNodes = 60
	// fastLayoutNodes: above this many nodes the dot engine's iteration
	// limits are lowered, which keeps a 500-node layout well under a
	// second at a small cost in crossings.
	fastLayoutNodes = 100
	// labelRunes is the longest id shown in a node label (the tooltip and
	// the artifact page have it whole).
	labelRunes = 28
)

// typeShapes gives each built-in type its node shape, so types can be told
// apart without colour (colour is the trust status). Other types are
// rounded boxes.
var typeShapes = map[string]string{
	"fetch_verdict": "cylinder",
	"document":      "note",
	"question":      "hexagon",
	"user_input":    "invhouse",
	"evidence":      "box",
	"claim":         "ellipse",
	"answer":        "doubleoctagon",
	"tool_error":    "octagon",
	"tool_output":   "component",
	"effect":        "cds",
	"model_call":    "box3d",
	"note":          "tab",
}

// shapeOf returns a type's shape and whether it is the rounded default.
func shapeOf(typ string) (string, bool) {
	if s, ok := typeShapes[typ]; ok {
		return s, false
	}
	return "box", true
}

// nodeStyle is how a trust status is drawn. Besides the fill colour each
// status has its own border (bold, dashed, plain) so it survives greyscale
// printing and colour blindness; the legend names all of it.
type nodeStyle struct {
	Fill, Stroke, Style, Pen string
}

var statusStyles = map[graph.Status]nodeStyle{
	graph.StatusPoisonRoot:  {"#f8d7da", "#b00020", "filled,bold", "2.6"},
	graph.StatusQuarantined: {"#fff3cd", "#a15c00", "filled,dashed", "1.8"},
	graph.StatusConfirmed:   {"#d4edda", "#1e7e34", "filled", "1.2"},
}

var unknownStyle = nodeStyle{"#eeeeee", "#555555", "filled", "1"}

func styleOf(st graph.Status) nodeStyle {
	if s, ok := statusStyles[st]; ok {
		return s
	}
	return unknownStyle
}

// picture is the part of a state one graph page draws.
type picture struct {
	nodes     []*graph.Artifact
	edges     []*graph.Edge
	truncated bool
}

// graphView is the graph page's model.
type graphView struct {
	Root         string
	Dir          string
	Depth        int // -1: no limit
	DepthOptions []depthOption
	Total        int // artifacts in the state
	Nodes        []nodeRow
	NumEdges     int
	Truncated    bool
	MaxNodes     int
	SVG          template.HTML // sanitized by sanitizeSVG
	LegendSVG    template.HTML // sanitized by sanitizeSVG
	RenderError  string
	Legend       []legendRow
	DOT          string
	Mermaid      string
	Large        bool
}

type depthOption struct {
	Value, Label string
	Selected     bool
}

type nodeRow struct {
	ID     string
	Type   string
	Shape  string
	Status graph.Status
	Reason string
}

// legendRow names one trust status; its swatch is drawn by style.css in
// the colours of statusStyles (the browser test compares them).
type legendRow struct {
	Status     graph.Status
	Name       string
	Border     string
	Definition string
}

// handleGraph draws the provenance graph: of ?root= (what it rests on, or
// with dir=in what rests on it) down to ?depth= edges, or of the whole
// context; at most maxPictureNodes artifacts. The picture is laid out by
// Graphviz (dot) into SVG on the server, sanitized and inlined, so nodes
// are links and the DOM can be inspected.
func (s *server) handleGraph(w http.ResponseWriter, r *http.Request, ctxID string) {
	q := r.URL.Query()
	at := q.Get("at")
	view := graphView{Root: q.Get("root"), Dir: q.Get("dir"), Depth: -1, MaxNodes: maxPictureNodes}
	if view.Dir != "" && view.Dir != "out" && view.Dir != "in" {
		s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "dir must be out or in"})
		return
	}
	if d := q.Get("depth"); d != "" && d != "all" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 1000 {
			s.problem(w, r, &problem{Code: codeInvalidQuery, Detail: "depth must be a number from 0 to 1000, or all"})
			return
		}
		view.Depth = n
	}
	view.DepthOptions = depthOptions(view.Depth)

	var shown *commitInfo
	var pic, legend *drawing
	_, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		view.Total = v.State.NumArtifacts()
		if view.Root != "" && v.State.Artifact(view.Root) == nil {
			return &problem{Code: codeNotFound, Detail: "no artifact with the root id at commit " + v.Commit.ID.Short()}
		}
		sel := selectPicture(v.State, view.Root, view.Dir, view.Depth)
		trust := func(id string) graph.Trust {
			if v.Trust.Status(id) == graph.StatusConfirmed {
				return graph.Trust{ID: id, Status: graph.StatusConfirmed}
			}
			return v.Trust.Explain(v.State, id)
		}
		rels := v.State.Relations()
		statuses := map[string]graph.Trust{}
		for _, a := range sel.nodes {
			t := trust(a.ID)
			statuses[a.ID] = t
			shape, _ := shapeOf(a.Type)
			view.Nodes = append(view.Nodes, nodeRow{ID: a.ID, Type: a.Type, Shape: shape, Status: t.Status, Reason: t.Reason})
		}
		view.NumEdges = len(sel.edges)
		view.Truncated = sel.truncated
		pic, legend = buildDOT(ctxID, at, view.Root, sel, statuses, rels.Depends), buildLegendDOT(sel)
		view.DOT = pic.dot
		view.Mermaid = graph.Mermaid(&graph.Subgraph{Nodes: sel.nodes, Edges: sel.edges},
			func(id string) graph.Trust { return statuses[id] })
		return nil
	})
	if !ok {
		return
	}
	view.Large = len(view.Nodes) > edgeLabelNodes
	view.Legend = legendRows()
	if len(view.Nodes) > 0 {
		label := "Provenance graph of " + ctxID
		if view.Root != "" {
			label += " from " + view.Root
		}
		svg, err := s.pics.svg(r.Context(), pic, "provenance", label)
		if err != nil {
			s.log.Error("web: draw graph", "context", ctxID, "err", err)
			view.RenderError = "The picture could not be drawn; the table below lists its nodes."
		}
		view.SVG = template.HTML(svg) // sanitizeSVG's output: allowlisted and re-escaped
		if svg, err := s.pics.svg(r.Context(), legend, "legend-shapes", "Node shapes by artifact type"); err == nil {
			view.LegendSVG = template.HTML(svg) // sanitizeSVG's output
		}
	}
	title := "Graph · " + ctxID
	if view.Root != "" {
		title = "Graph · " + view.Root
	}
	p := &page{Title: title, Ctx: ctxID, Nav: "graph", At: at, Commit: shown, Keep: keep(q, "root", "dir", "depth")}
	s.render(w, r, http.StatusOK, "graph", p, view)
}

func depthOptions(cur int) []depthOption {
	var out []depthOption
	for _, d := range []int{1, 2, 3, 5, 10, -1} {
		o := depthOption{Value: strconv.Itoa(d), Label: strconv.Itoa(d), Selected: d == cur}
		if d < 0 {
			o.Value, o.Label = "all", "all"
		}
		out = append(out, o)
	}
	if !slices.ContainsFunc(out, func(o depthOption) bool { return o.Selected }) {
		out = append(out, depthOption{Value: strconv.Itoa(cur), Label: strconv.Itoa(cur), Selected: true})
	}
	return out
}

func legendRows() []legendRow {
	return []legendRow{
		{graph.StatusPoisonRoot, "poison root", "bold border",
			"its own base is false: a failed or unknown fetch, a tool error, an unknown type"},
		{graph.StatusQuarantined, "quarantined", "dashed border",
			"rests, directly or not, on a poison root"},
		{graph.StatusConfirmed, "confirmed", "plain border",
			"rests only on confirmed facts"},
	}
}

// selectPicture picks the artifacts and edges to draw. Without a root it
// is the whole state (the first maxPictureNodes ids); with one it is a
// breadth-first walk from the root along outgoing edges (what the root
// rests on and refers to) or, with dir "in", along incoming edges (what
// rests on the root: its blast radius), depth edges deep (depth < 0: no
// limit). Edges are those among the chosen artifacts.
func selectPicture(st *graph.State, root, dir string, depth int) picture {
	var pic picture
	switch {
	case root == "":
		sg := graph.ContextSubgraph(st, maxPictureNodes)
		pic = picture{nodes: sg.Nodes, edges: sg.Edges, truncated: sg.Truncated}
	case dir == "in":
		pic = dependents(st, root, depth)
	default:
		sg := graph.ProvenanceLimit(st, root, depth, maxPictureNodes)
		pic = picture{nodes: sg.Nodes, edges: sg.Edges, truncated: sg.Truncated}
	}
	if len(pic.edges) > maxPictureEdges {
		pic.edges, pic.truncated = pic.edges[:maxPictureEdges], true
	}
	return pic
}

// dependents walks incoming edges breadth-first from root.
func dependents(st *graph.State, root string, depth int) picture {
	pic := picture{nodes: []*graph.Artifact{st.Artifact(root)}}
	seen := map[string]bool{root: true}
	level := []string{root}
	for d := 0; len(level) > 0; d++ {
		var next []string
		for _, cur := range level {
			for _, e := range st.In(cur) {
				if seen[e.From] {
					continue
				}
				if (depth >= 0 && d >= depth) || len(pic.nodes) >= maxPictureNodes {
					pic.truncated = true
					continue
				}
				seen[e.From] = true
				pic.nodes = append(pic.nodes, st.Artifact(e.From))
				next = append(next, e.From)
			}
		}
		level = next
	}
	for _, a := range pic.nodes {
		for _, e := range st.Out(a.ID) {
			if seen[e.To] {
				pic.edges = append(pic.edges, e)
			}
		}
	}
	graph.SortEdges(pic.edges)
	return pic
}

// fontname is the font every label is measured and drawn in.
const fontname = `"Helvetica,Arial,sans-serif"`

// drawing is a DOT graph and the links and tooltips sanitizeSVG adds to
// the SVG Graphviz makes of it.
type drawing struct {
	dot   string
	links svgLinks
}

// key identifies the drawing for the picture cache: the DOT and every
// link and tooltip, in a fixed order.
func (d *drawing) key() string {
	var b strings.Builder
	b.WriteString(d.dot)
	for i := 0; ; i++ {
		l, ok := d.links.nodes["n"+strconv.Itoa(i)]
		if !ok {
			break
		}
		b.WriteString("\x00" + l.href + "\x00" + l.title)
	}
	edges := make([]string, 0, len(d.links.edges))
	for k, v := range d.links.edges {
		edges = append(edges, k+"\x00"+v)
	}
	slices.Sort(edges)
	for _, e := range edges {
		b.WriteString("\x01" + e)
	}
	return b.String()
}

// buildDOT writes the picture as a Graphviz digraph. Nodes are named n0,
// n1… — no artifact string is ever a DOT id — and the only artifact
// strings in the DOT are the node labels (clipped id and type), as quoted
// graph.DOTString values: `"` and `\` backslash-escaped, control
// characters removed, `&`, `<`, `>` as entities; there are no HTML labels.
// Links and tooltips stay out of the DOT: they go to sanitizeSVG, which
// also re-checks everything Graphviz writes.
func buildDOT(ctxID, at, root string, pic picture, trust map[string]graph.Trust, depends func(rel string) bool) *drawing {
	n := len(pic.nodes)
	d := &drawing{links: svgLinks{nodes: make(map[string]nodeLink, n), edges: make(map[string]string, len(pic.edges))}}
	var b strings.Builder
	b.Grow(200 * (n + len(pic.edges)))
	b.WriteString("digraph provenance {\n")
	b.WriteString(`  graph [rankdir=TB, bgcolor="transparent", pad=0.1, fontname=` + fontname)
	if n <= edgeLabelNodes {
		b.WriteString(`, nodesep=0.5, ranksep=0.5`)
	} else {
		b.WriteString(`, nodesep=0.25, ranksep=0.45`)
	}
	if n > fastLayoutNodes {
		b.WriteString(`, nslimit=1, nslimit1=1, mclimit=0.2, searchsize=10`)
	}
	b.WriteString("];\n")
	b.WriteString(`  node [fontname=` + fontname + `, fontsize=10, margin="0.1,0.04", height=0.35];` + "\n")
	b.WriteString(`  edge [fontname=` + fontname + `, fontsize=8, arrowsize=0.6, color="#6b7280", fontcolor="#374151"];` + "\n")
	names := make(map[string]string, n)
	for i, a := range pic.nodes {
		names[a.ID] = "n" + strconv.Itoa(i)
	}
	for _, a := range pic.nodes {
		t := trust[a.ID]
		sty := styleOf(t.Status)
		shape, rounded := shapeOf(a.Type)
		style := sty.Style
		if rounded {
			style = "rounded," + style
		}
		tip := a.ID + " (" + a.Type + ") — " + statusName(t.Status)
		switch {
		case t.Reason != "":
			tip += ": " + t.Reason
		case len(t.Roots) == 1:
			tip += ": rests on " + t.Roots[0]
		case len(t.Roots) > 1:
			tip += ": rests on " + t.Roots[0] + " and " + strconv.Itoa(len(t.Roots)-1) + " more"
		}
		d.links.nodes[names[a.ID]] = nodeLink{href: artifactURL(ctxID, a.ID, at), title: tip}
		class := string(t.Status)
		if class == "" {
			class = "unknown"
		}
		if graph.ValidateName("type", a.Type) == nil {
			class += " type-" + a.Type
		}
		b.WriteString("  " + names[a.ID] + " [label=" + graph.DOTString(clip(a.ID, labelRunes)+"\n"+clip(a.Type, labelRunes)) +
			", shape=" + shape + ", style=\"" + style + "\", fillcolor=\"" + sty.Fill + "\", color=\"" + sty.Stroke +
			"\", penwidth=" + sty.Pen + ", class=\"" + class + "\"")
		if a.ID == root {
			b.WriteString(", peripheries=2")
		}
		b.WriteString("];\n")
	}
	for _, e := range pic.edges {
		from, ok1 := names[e.From]
		to, ok2 := names[e.To]
		if !ok1 || !ok2 {
			continue
		}
		class, attrs := "ref", ", style=dashed"
		if depends(e.Rel) {
			class, attrs = "dep", ""
			if trust[e.To].Status != graph.StatusConfirmed {
				class, attrs = "dep tainted", `, color="#b00020", penwidth=1.4`
			}
		}
		tip := e.From + " —" + e.Rel + "→ " + e.To
		if prev, ok := d.links.edges[from+"->"+to]; ok {
			tip = prev + "; " + tip
		}
		d.links.edges[from+"->"+to] = tip
		b.WriteString("  " + from + " -> " + to + " [class=\"" + class + "\"" + attrs)
		if n <= edgeLabelNodes {
			b.WriteString(", label=" + graph.DOTString(e.Rel))
		}
		b.WriteString("];\n")
	}
	b.WriteString("}\n")
	d.dot = b.String()
	return d
}

// buildLegendDOT draws one node per artifact type in the picture, in its
// shape, so the legend shows exactly the shapes used.
func buildLegendDOT(pic picture) *drawing {
	types := map[string]bool{}
	for _, a := range pic.nodes {
		types[a.Type] = true
	}
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("digraph legend {\n")
	b.WriteString(`  graph [bgcolor="transparent", nodesep=0.15, pad=0.05];` + "\n")
	b.WriteString(`  node [fontname=` + fontname + `, fontsize=9, style=filled, fillcolor="#ffffff", color="#374151", height=0.3, margin="0.08,0.03"];` + "\n")
	for i, t := range names {
		shape, rounded := shapeOf(t)
		style := "filled"
		if rounded {
			style = "rounded,filled"
		}
		b.WriteString("  t" + strconv.Itoa(i) + " [label=" + graph.DOTString(clip(t, labelRunes)) + ", shape=" + shape + `, style="` + style + `"];` + "\n")
	}
	b.WriteString("}\n")
	return &drawing{dot: b.String()}
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
