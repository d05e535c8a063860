package web

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// Picture limits.
const (
	// maxPictureNodes caps the artifacts drawn; more are left out with a
	// visible "truncated" note.
	maxPictureNodes = 500
	// maxPictureEdges caps the edges drawn among them, and
	// maxDrawnDegree the edges drawn at one artifact: the layout's time
	// grows with the edges' density, not their number alone (60
	// artifacts and 1,500 edges among them took Graphviz 10 s with its
	// iteration limits lowered, and minutes without), so past this many
	// edges at a node the rest are left out of the picture (the table
	// lists them all) with the "truncated" note.
	maxPictureEdges = 1500
	maxDrawnDegree  = 12
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

// Graph page limits besides the picture's.
const (
	// wholeNodes: a context with at most this many artifacts is drawn
	// whole; a larger one gets the clustered overview.
	wholeNodes = 150
	// saidNodes: pictures with at most this many nodes show the short
	// text of each artifact in its label (larger ones in the tooltip).
	saidNodes = 120
	// naturalSizeNodes: pictures with more nodes are drawn at their
	// natural size in a scrolling box instead of shrunk to its width, so
	// labels stay readable.
	naturalSizeNodes = 15
	// maxMatches is the most search matches listed.
	maxMatches = 25
	// maxTextScan bounds how many artifacts' data a text search reads.
	maxTextScan = 20_000
	// maxExpand bounds the expanded nodes a neighbourhood URL may name,
	// and maxExpandBytes their ids' bytes: every node's links repeat the
	// list, so a page grows with nodes × the list.
	maxExpand      = 50
	maxExpandBytes = 2048
)

// picture is the part of a state one graph page draws.
type picture struct {
	nodes     []*graph.Artifact
	edges     []*graph.Edge
	truncated bool
	// onPath marks the artifacts of the path to the poison root.
	onPath map[string]bool
}

// drawnEdges returns the edges a picture draws, in their order: at most
// maxPictureEdges, and at most maxDrawnDegree at any artifact — except
// the edges of the path to the poison root and those at the root, which
// are kept first, within maxPictureEdges.
func drawnEdges(edges []*graph.Edge, root string, onPath map[string]bool) []*graph.Edge {
	degree := map[string]int{}
	keep := make([]bool, len(edges))
	n := 0
	take := func(i int) {
		keep[i] = true
		degree[edges[i].From]++
		degree[edges[i].To]++
		n++
	}
	for i, e := range edges {
		if n < maxPictureEdges && (e.From == root || e.To == root || onPath[e.From] && onPath[e.To]) {
			take(i)
		}
	}
	for i, e := range edges {
		if n < maxPictureEdges && !keep[i] && degree[e.From] < maxDrawnDegree && degree[e.To] < maxDrawnDegree {
			take(i)
		}
	}
	if n == len(edges) {
		return edges
	}
	out := make([]*graph.Edge, 0, n)
	for i, e := range edges {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}

// graphView is the graph page's model.
type graphView struct {
	// Mode is "whole" (every artifact of a small context), "overview"
	// (clusters of a large one) or "neighbourhood" (around Root).
	Mode        string
	Root        string
	RootSaid    string
	Find        string
	Up, Down    int // -1: no limit
	UpOptions   []depthOption
	DownOptions []depthOption
	Expand      []string
	Path        bool
	// PathIDs is the root's path to its poison root (when quarantined).
	PathIDs     []string
	RootStatus  graph.Status
	GroupBy     string
	Groups      []depthOption
	Matches     []matchRow
	MatchesMore bool
	TextScanned int
	Total       int
	Nodes       []nodeRow
	Clusters    []clusterRow
	NumEdges    int
	Truncated   bool
	MaxNodes    int
	SVG         template.HTML // sanitized by sanitizeSVG
	LegendSVG   template.HTML // sanitized by sanitizeSVG
	RenderError string
	Legend      []legendRow
	DOT         string
	Mermaid     string
	Large       bool
	// URLs of the neighbourhood controls.
	PathURL, NoPathURL, ResetURL string
}

type depthOption struct {
	Value, Label string
	Selected     bool
}

type nodeRow struct {
	ID        string
	Type      string
	Shape     string
	Said      string
	Status    graph.Status
	Reason    string
	CentreURL string
	ExpandURL string
	Expanded  bool
	OnPath    bool
}

type matchRow struct {
	ID, Type, Said string
	Status         graph.Status
	URL            string
}

// legendRow names one trust status; its swatch is drawn by style.css in
// the colours of statusStyles (the browser test compares them).
type legendRow struct {
	Status     graph.Status
	Name       string
	Border     string
	Definition string
}

// graphQuery is what the graph page's URL asks for.
type graphQuery struct {
	root, find, group string
	up, down          int
	expand            []string
	path              bool
}

// parseGraphQuery reads ?root=&up=&down=&expand=&path=&find=&group= and
// the older ?dir=&depth= (dir=in: depth hops down, else up).
func parseGraphQuery(q map[string][]string) (graphQuery, *problem) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	gq := graphQuery{root: get("root"), find: strings.TrimSpace(get("find")), group: get("group"), up: 1, down: 1, path: get("path") == "1"}
	depth := func(name string) (int, *problem) {
		d := get(name)
		if d == "all" {
			return -1, nil
		}
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 1000 {
			return 0, &problem{Code: codeInvalidQuery, Detail: name + " must be a number from 0 to 1000, or all"}
		}
		return n, nil
	}
	dir := get("dir")
	if dir != "" && dir != "out" && dir != "in" {
		return gq, &problem{Code: codeInvalidQuery, Detail: "dir must be out or in"}
	}
	if dir != "" || get("depth") != "" {
		d := -1
		if get("depth") != "" {
			var p *problem
			if d, p = depth("depth"); p != nil {
				return gq, p
			}
		}
		gq.up, gq.down = d, 0
		if dir == "in" {
			gq.up, gq.down = 0, d
		}
	}
	for _, name := range []string{"up", "down"} {
		if get(name) == "" {
			continue
		}
		d, p := depth(name)
		if p != nil {
			return gq, p
		}
		if name == "up" {
			gq.up = d
		} else {
			gq.down = d
		}
	}
	switch gq.group {
	case "", "type", "producer", "trust":
	default:
		return gq, &problem{Code: codeInvalidQuery, Detail: "group must be type, producer or trust"}
	}
	if gq.group == "" {
		gq.group = "type"
	}
	size := 0
	for _, e := range q["expand"] {
		if e != "" && !slices.Contains(gq.expand, e) && len(gq.expand) < maxExpand && size+len(e) <= maxExpandBytes {
			gq.expand = append(gq.expand, e)
			size += len(e)
		}
	}
	return gq, nil
}

// url writes the graph page address of gq (defaults left out).
func (gq graphQuery) url(ctx, at string) string {
	kv := []string{"root", gq.root}
	if gq.root != "" {
		if gq.up != 1 {
			kv = append(kv, "up", depthValue(gq.up))
		}
		if gq.down != 1 {
			kv = append(kv, "down", depthValue(gq.down))
		}
		for _, e := range gq.expand {
			kv = append(kv, "expand", e)
		}
		if gq.path {
			kv = append(kv, "path", "1")
		}
	} else if gq.group != "type" {
		kv = append(kv, "group", gq.group)
	}
	kv = append(kv, "at", at)
	return prefixCtx + url.PathEscape(ctx) + "/graph" + query(kv...)
}

func depthValue(d int) string {
	if d < 0 {
		return "all"
	}
	return strconv.Itoa(d)
}

// handleGraph draws the provenance graph. With ?root= it is the
// neighbourhood of that artifact: ?up= hops of what it rests on and
// ?down= hops of what rests on it (one each by default), plus one hop
// around every ?expand= artifact (a click on a node expands it), plus with
// ?path=1 the path to its poison root. Without a root a small context is
// drawn whole and a large one as clusters of artifacts by type, producer
// or trust (?group=), with the edges between clusters counted. ?find=
// searches ids and short texts. Pictures are laid out by Graphviz (dot)
// into SVG on the server, sanitized, inlined and cached by their drawing.
func (s *server) handleGraph(w http.ResponseWriter, r *http.Request, ctxID string) {
	q := r.URL.Query()
	at := q.Get("at")
	gq, bad := parseGraphQuery(q)
	if bad != nil {
		s.problem(w, r, bad)
		return
	}
	view := graphView{Root: gq.root, Find: gq.find, Up: gq.up, Down: gq.down, Expand: gq.expand, Path: gq.path,
		GroupBy: gq.group, MaxNodes: maxPictureNodes}
	view.UpOptions, view.DownOptions = depthOptions(gq.up), depthOptions(gq.down)
	for _, g := range []string{"type", "producer", "trust"} {
		view.Groups = append(view.Groups, depthOption{Value: g, Label: g, Selected: g == gq.group})
	}

	var shown *commitInfo
	var pic, legend *drawing
	_, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		view.Total = v.State.NumArtifacts()
		data := func(a *graph.Artifact) (json.RawMessage, error) { return v.Data(a) }
		if gq.find != "" {
			view.Matches, view.MatchesMore, view.TextScanned = s.findArtifacts(r.Context(), v, gq.find, func(id string) string {
				g := gq
				g.root, g.expand, g.path = id, nil, false
				return g.url(ctxID, at)
			})
		}
		if gq.root != "" && v.State.Artifact(gq.root) == nil {
			return &problem{Code: codeNotFound, Detail: "no artifact with the root id at commit " + v.Commit.ID.Short()}
		}
		// Only artifacts of the state are expanded, and only they are
		// carried on in the page's links.
		gq.expand = slices.DeleteFunc(gq.expand, func(id string) bool { return v.State.Artifact(id) == nil })
		view.Expand = gq.expand
		if gq.root == "" && view.Total > wholeNodes {
			view.Mode = "overview"
			cl := s.clusters(r.Context(), v, gq.group)
			view.Clusters, view.NumEdges = cl.rows(ctxID, at, gq.group), len(cl.edges)
			pic = cl.drawing(ctxID, at, gq.group)
			view.DOT = pic.dot
			return nil
		}
		trust := func(id string) graph.Trust {
			if v.Trust.Status(id) == graph.StatusConfirmed {
				return graph.Trust{ID: id, Status: graph.StatusConfirmed}
			}
			return v.Trust.Explain(v.State, id)
		}
		var sel picture
		if gq.root == "" {
			view.Mode = "whole"
			sg := graph.ContextSubgraph(v.State, maxPictureNodes)
			sel = picture{nodes: sg.Nodes, edges: sg.Edges, truncated: sg.Truncated}
		} else {
			view.Mode = "neighbourhood"
			rt := trust(gq.root)
			view.RootStatus = rt.Status
			if rt.Status == graph.StatusQuarantined {
				view.PathIDs = rt.Path
			}
			var path []string
			if gq.path {
				path = rt.Path
			}
			sel = neighbourhood(v.State, gq.root, gq.up, gq.down, gq.expand, path)
			view.RootSaid = s.said.get(v.State.Artifact(gq.root), data)
		}
		if kept := drawnEdges(sel.edges, gq.root, sel.onPath); len(kept) < len(sel.edges) {
			sel.edges, sel.truncated = kept, true
		}
		rels := v.State.Relations()
		statuses := map[string]graph.Trust{}
		saids := map[string]string{}
		for _, a := range sel.nodes {
			t := trust(a.ID)
			statuses[a.ID] = t
			saids[a.ID] = s.said.get(a, data)
			shape, _ := shapeOf(a.Type)
			row := nodeRow{ID: a.ID, Type: a.Type, Shape: shape, Said: cut(saids[a.ID], saidRow), Status: t.Status, Reason: t.Reason,
				Expanded: slices.Contains(gq.expand, a.ID) || a.ID == gq.root, OnPath: sel.onPath[a.ID]}
			c := gq
			c.root, c.expand, c.path = a.ID, nil, false
			row.CentreURL = c.url(ctxID, at)
			if gq.root != "" && !row.Expanded {
				e := gq
				e.expand = append(slices.Clone(gq.expand), a.ID)
				row.ExpandURL = e.url(ctxID, at)
			}
			view.Nodes = append(view.Nodes, row)
		}
		view.NumEdges = len(sel.edges)
		view.Truncated = sel.truncated
		pic = buildDOT(ctxID, at, gq, sel, statuses, saids, rels.Depends)
		legend = buildLegendDOT(sel)
		view.DOT = pic.dot
		view.Mermaid = graph.Mermaid(&graph.Subgraph{Nodes: sel.nodes, Edges: sel.edges},
			func(id string) graph.Trust { return statuses[id] })
		return nil
	})
	if !ok {
		return
	}
	if gq.root != "" {
		p := gq
		p.path = true
		view.PathURL = p.url(ctxID, at)
		p.path = false
		view.NoPathURL = p.url(ctxID, at)
		view.ResetURL = graphQuery{root: gq.root, group: "type", up: 1, down: 1}.url(ctxID, at)
	}
	view.Large = len(view.Nodes) > naturalSizeNodes
	view.Legend = legendRows()
	if pic != nil && (len(view.Nodes) > 0 || len(view.Clusters) > 0) {
		label := "Provenance graph of " + labelText(ctxID)
		switch {
		case gq.root != "":
			label += " around " + labelText(gq.root)
		case view.Mode == "overview":
			label += ": artifacts clustered by " + gq.group
		}
		svg, err := s.pics.svg(r.Context(), pic, "provenance", label)
		if err != nil {
			s.log.Error("web: draw graph", "context", ctxID, "err", err)
			view.RenderError = "The picture could not be drawn; the table below lists what it shows."
		}
		view.SVG = template.HTML(svg) // sanitizeSVG's output: allowlisted and re-escaped
		if legend != nil {
			if svg, err := s.pics.svg(r.Context(), legend, "legend-shapes", "Node shapes by artifact type"); err == nil {
				view.LegendSVG = template.HTML(svg) // sanitizeSVG's output
			}
		}
	}
	title := "Graph · " + ctxID
	if gq.root != "" {
		title = "Graph · " + gq.root
	}
	p := &page{Title: title, Ctx: ctxID, Nav: "graph", At: at, Commit: shown,
		Keep: keep(q, "root", "up", "down", "dir", "depth", "expand", "path", "group", "find")}
	s.render(w, r, http.StatusOK, "graph", p, view)
}

func depthOptions(cur int) []depthOption {
	var out []depthOption
	for _, d := range []int{0, 1, 2, 3, 5, 10, -1} {
		o := depthOption{Value: depthValue(d), Label: depthValue(d), Selected: d == cur}
		out = append(out, o)
	}
	if !slices.ContainsFunc(out, func(o depthOption) bool { return o.Selected }) {
		out = append(out, depthOption{Value: strconv.Itoa(cur), Label: strconv.Itoa(cur), Selected: true})
	}
	return out
}

func legendRows() []legendRow {
	return []legendRow{
		{graph.StatusPoisonRoot, "poison root", "bold border, ✖ mark",
			"its own base is false: a failed or unknown fetch, a tool error, an unknown type"},
		{graph.StatusQuarantined, "quarantined", "dashed border, ⚠ mark",
			"rests, directly or not, on a poison root"},
		{graph.StatusConfirmed, "confirmed", "plain border, ✓ mark",
			"rests only on confirmed facts"},
	}
}

// statusMark is the text mark of a trust status in pictures, so trust is
// never told by colour alone.
func statusMark(st graph.Status) string {
	switch st {
	case graph.StatusPoisonRoot:
		return "✖"
	case graph.StatusQuarantined:
		return "⚠"
	case graph.StatusConfirmed:
		return "✓"
	}
	return "?"
}

// neighbourhood picks the artifacts around root: up hops along outgoing
// edges (what it rests on and refers to), down hops along incoming edges
// (what rests on it), one hop both ways around each expanded artifact,
// and the artifacts of path. At most maxPictureNodes; edges are those
// among the chosen artifacts.
func neighbourhood(st *graph.State, root string, up, down int, expand, path []string) picture {
	pic := picture{onPath: map[string]bool{}}
	seen := map[string]bool{}
	add := func(id string) bool {
		if seen[id] {
			return true
		}
		a := st.Artifact(id)
		if a == nil {
			return true
		}
		if len(pic.nodes) >= maxPictureNodes {
			pic.truncated = true
			return false
		}
		seen[id] = true
		pic.nodes = append(pic.nodes, a)
		return true
	}
	walk := func(from string, depth int, out bool) {
		level := []string{from}
		for d := 0; len(level) > 0; d++ {
			var next []string
			for _, cur := range level {
				edges := st.In(cur)
				if out {
					edges = st.Out(cur)
				}
				for _, e := range edges {
					other := e.From
					if out {
						other = e.To
					}
					if seen[other] {
						continue
					}
					if depth >= 0 && d >= depth {
						pic.truncated = true
						continue
					}
					if !add(other) {
						return
					}
					next = append(next, other)
				}
			}
			level = next
		}
	}
	add(root)
	walk(root, up, true)
	walk(root, down, false)
	for _, id := range path {
		add(id)
		pic.onPath[id] = true
	}
	for _, x := range expand {
		if st.Artifact(x) == nil {
			continue
		}
		add(x)
		walk(x, 1, true)
		walk(x, 1, false)
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

// findArtifacts searches ids (all of them) and short texts (of the first
// maxTextScan artifacts in natural id order) for needle, case-insensitive,
// looking up only the artifacts it lists or whose text it reads.
func (s *server) findArtifacts(ctx context.Context, v *store.View, needle string, urlOf func(id string) string) ([]matchRow, bool, int) {
	low := strings.ToLower(needle)
	ids := s.sortedIDs(ctx, v)
	var out []matchRow
	more := false
	scanned := 0
	data := func(a *graph.Artifact) (json.RawMessage, error) { return v.Data(a) }
	// The exact id first, then id matches, then text matches.
	if a := v.State.Artifact(needle); a != nil {
		out = append(out, matchRow{ID: a.ID, Type: a.Type, Status: v.Trust.Status(a.ID), Said: cut(s.said.get(a, data), saidRow), URL: urlOf(a.ID)})
	}
	for pass := 0; pass < 2 && !more; pass++ {
		for _, id := range ids {
			if id == needle {
				continue
			}
			// An artifact is looked up only when its id matched or its
			// text is read: a state read through its map looks each up
			// in the map.
			var a *graph.Artifact
			var text string
			if pass == 0 {
				if !strings.Contains(strings.ToLower(id), low) {
					continue
				}
				if a = v.State.Artifact(id); a == nil {
					continue
				}
			} else {
				if strings.Contains(strings.ToLower(id), low) {
					continue // listed in the first pass
				}
				if scanned >= s.textScan {
					break
				}
				scanned++
				if a = v.State.Artifact(id); a == nil {
					continue
				}
				text = s.said.get(a, data)
				if !strings.Contains(strings.ToLower(text), low) {
					continue
				}
			}
			if len(out) >= maxMatches {
				more = true
				break
			}
			if text == "" {
				text = s.said.get(a, data)
			}
			out = append(out, matchRow{ID: id, Type: a.Type, Status: v.Trust.Status(id), Said: cut(text, saidRow), URL: urlOf(id)})
		}
	}
	return out, more, scanned
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
// strings in the DOT are the node labels (clipped id, type, trust mark and
// short text), as quoted graph.DOTString values: `"` and `\` backslash-
// escaped, control characters removed, `&`, `<`, `>` as entities; there
// are no HTML labels. Links and tooltips stay out of the DOT: they go to
// sanitizeSVG, which also re-checks everything Graphviz writes. In a
// neighbourhood a node links to the same view with that node expanded
// (the root to its artifact page); in the whole picture to its page.
func buildDOT(ctxID, at string, gq graphQuery, pic picture, trust map[string]graph.Trust, saids map[string]string, depends func(rel string) bool) *drawing {
	n := len(pic.nodes)
	root := gq.root
	d := &drawing{links: svgLinks{nodes: make(map[string]nodeLink, n), edges: make(map[string]string, len(pic.edges))}}
	var b strings.Builder
	b.Grow(240 * (n + len(pic.edges)))
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
		tip := labelText(a.ID) + " (" + a.Type + ") — " + statusName(t.Status)
		switch {
		case t.Reason != "":
			tip += ": " + t.Reason
		case len(t.Roots) == 1:
			tip += ": rests on " + labelText(t.Roots[0])
		case len(t.Roots) > 1:
			tip += ": rests on " + labelText(t.Roots[0]) + " and " + strconv.Itoa(len(t.Roots)-1) + " more"
		}
		if said := saids[a.ID]; said != "" {
			tip += "\n“" + said + "”"
		}
		href := artifactURL(ctxID, a.ID, at)
		if root != "" && a.ID != root && !slices.Contains(gq.expand, a.ID) {
			e := gq
			e.expand = append(slices.Clone(gq.expand), a.ID)
			href = e.url(ctxID, at)
			tip += "\n(click to expand its neighbours)"
		}
		d.links.nodes[names[a.ID]] = nodeLink{href: href, title: tip}
		class := string(t.Status)
		if class == "" {
			class = "unknown"
		}
		if graph.ValidateName("type", a.Type) == nil {
			class += " type-" + a.Type
		}
		if pic.onPath[a.ID] {
			class += " on-path"
		}
		label := shortLabel(a.ID) + "\n" + statusMark(t.Status) + " " + clip(a.Type, labelRunes)
		if said := saids[a.ID]; said != "" && n <= saidNodes {
			label += "\n" + wrapLabel(cut(said, saidNode), 30)
		}
		b.WriteString("  " + names[a.ID] + " [label=" + graph.DOTString(label) +
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
		if pic.onPath[e.From] && pic.onPath[e.To] && depends(e.Rel) {
			class += " on-path"
			attrs = `, color="#b00020", penwidth=3`
		}
		tip := labelText(e.From) + " —" + e.Rel + "→ " + labelText(e.To)
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

// wrapLabel breaks s into lines of about width runes at spaces (at most
// two lines; the text is already cut).
func wrapLabel(s string, width int) string {
	words := strings.Fields(s)
	var lines []string
	cur := ""
	for _, w := range words {
		switch {
		case cur == "":
			cur = w
		case len([]rune(cur))+1+len([]rune(w)) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	if len(lines) > 2 {
		lines = append(lines[:1], cut(strings.Join(lines[1:], " "), width))
	}
	return strings.Join(lines, "\n")
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
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	// Cut at a byte offset, not through []rune: that would turn a byte
	// that is not UTF-8 into U+FFFD before the label shows it as an
	// escape, and two producers apart by that byte alone would be drawn
	// alike.
	return runePrefix(s, n-1) + "…"
}

// runePrefix is the first n runes of s (s when it has fewer), cut at a
// byte offset (see clip).
func runePrefix(s string, n int) string {
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}
