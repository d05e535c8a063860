package web

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// Overview limits.
const (
	// maxClusters is the most clusters drawn; smaller ones are merged
	// into one "other" cluster per trust status.
	maxClusters = 40
	// clusterSamples is how many ids (the first in natural order) each
	// cluster offers as starting points for a neighbourhood.
	clusterSamples = 3
	// otherGroup names the merged cluster.
	otherGroup = "(other)"
	// overviewsKept is how many overviews (by commit and grouping) the
	// server keeps.
	overviewsKept = 32
)

// clusterKey is what an artifact is grouped by.
type clusterKey struct {
	value  string // its type or producer ("" when grouped by trust)
	status graph.Status
}

// cluster is one box of the overview: the artifacts sharing a key, or,
// merged, the smallest clusters of a trust status (its key's value is
// otherGroup, which a producer may be named too).
type cluster struct {
	key     clusterKey
	merged  bool
	parts   int // of a merged cluster, how many it merged
	n       int
	samples []string
}

// label is what the overview calls c when grouped by group: its key's
// value as a label (labelText), or, merged, how many clusters of what it
// merged between the escape's delimiters ("⟨12 other producers⟩"). A
// producer may be called anything, "(other)" or "12 other producers"
// too, but its label holds ⟨ only in an escape ("⟨U+27E8⟩"), so none
// reads like the merged cluster: the delimiters mark the UI's own words
// in the same text in the table, the drawing and the tooltips, where a
// style alone (the table's italics, the drawing's dashed box) would not
// carry over to a tooltip or a copied label.
func (c *cluster) label(group string) string {
	if !c.merged {
		return labelText(c.key.value)
	}
	what := "group"
	if group == "type" || group == "producer" {
		what = group
	}
	return escOpen + plural(c.parts, "other "+what, "other "+what+"s") + escClose
}

// clusterEdge counts the edges from one cluster to another, by relation.
type clusterEdge struct {
	from, to int
	dep      bool
	n        int
	rels     map[string]int
}

// clusterSet is the overview of one state: clusters sorted by count, then
// key, and the edges between them.
type clusterSet struct {
	clusters []cluster
	edges    []*clusterEdge
}

// clusters returns the overview of v's state grouped by group (type,
// producer or trust), from the cache when this commit was seen before
// (a commit's state and trust never change); else from its tally,
// derived from the one kept for another commit of the context when the
// two differ little (derivedTally), or counted over the whole state. A
// tally a failed or cancelled read cut short (v.Err) is not kept, nor is
// its overview.
func (s *server) clusters(ctx context.Context, v *store.View, group string) *clusterSet {
	key := v.Commit.ID.String() + "\x00" + group
	if cs, ok := s.overviews.Get(key); ok {
		return cs
	}
	t, ok := s.derivedTally(ctx, v, group)
	if !ok {
		// The artifacts the pass meets exist, so their status is what
		// the index's unconfirmed list says.
		t = buildTally(v.State, unconfirmedOf(v.Trust).status, group)
	}
	cs := t.clusterSet(v.State.Relations())
	if v.Err() == nil { // not what a failed or cancelled read left out
		s.overviews.Put(key, cs)
		if k := (&keptTally{commit: v.Commit, t: t}); tallyCost(k) <= maxTallyBytes/4 {
			s.tallies.Put(v.ContextID()+"\x00"+group, k)
		}
	}
	return cs
}

// buildClusters is the overview of st grouped by group, status giving
// each artifact's trust status, counted over the whole state: linear in
// its size, no sorting of the whole state.
func buildClusters(st *graph.State, status func(id string) graph.Status, group string) *clusterSet {
	return buildTally(st, status, group).clusterSet(st.Relations())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// clusterRow is one cluster in the overview's table.
type clusterRow struct {
	// Value is the cluster's type or producer (shown as a label), the
	// merged cluster's label, or, grouped by trust, the status's name.
	Value   string
	Merged  bool // the smallest clusters of its status, merged
	Status  graph.Status
	N       int
	ListURL string
	Samples []sampleLink
}

type sampleLink struct{ ID, URL string }

// listURL is the context page listing c's artifacts: a merged cluster's
// are those of its status.
func listURL(ctx, at, group string, c *cluster) string {
	k := c.key
	kv := []string{"at", at, "status", string(k.status)}
	if !c.merged {
		switch group {
		case "type":
			kv = append(kv, "type", k.value)
		case "producer":
			kv = append(kv, "producer", k.value)
		}
	}
	return ctxURL(ctx, "") + query(kv...)
}

func (cs *clusterSet) rows(ctx, at, group string) []clusterRow {
	out := make([]clusterRow, 0, len(cs.clusters))
	for _, c := range cs.clusters {
		// The table shows a producer's name with its escapes styled
		// (template "label"), the merged cluster's label in its own
		// element.
		value := c.key.value
		if c.merged {
			value = c.label(group)
		}
		row := clusterRow{Value: value, Merged: c.merged, Status: c.key.status, N: c.n, ListURL: listURL(ctx, at, group, &c)}
		if group == "trust" {
			row.Value = statusName(c.key.status)
		}
		for _, id := range c.samples {
			row.Samples = append(row.Samples, sampleLink{ID: id, URL: graphQuery{root: id, group: "type", up: 1, down: 1}.url(ctx, at)})
		}
		out = append(out, row)
	}
	return out
}

// drawing writes the overview as DOT: one node per cluster (its shape by
// type when grouped by type, its style by trust, its label the group, a
// trust mark and the count) linking to the list of its artifacts, and one
// edge per (cluster, cluster, depends) with the count and main relation.
func (cs *clusterSet) drawing(ctx, at, group string) *drawing {
	d := &drawing{links: svgLinks{nodes: map[string]nodeLink{}, edges: map[string]string{}}}
	var b strings.Builder
	b.WriteString("digraph overview {\n")
	b.WriteString(`  graph [rankdir=TB, bgcolor="transparent", pad=0.1, nodesep=0.4, ranksep=0.6, fontname=` + fontname + "];\n")
	b.WriteString(`  node [fontname=` + fontname + `, fontsize=11, margin="0.15,0.06"];` + "\n")
	b.WriteString(`  edge [fontname=` + fontname + `, fontsize=9, arrowsize=0.7, color="#6b7280", fontcolor="#374151"];` + "\n")
	for i, c := range cs.clusters {
		name := "n" + strconv.Itoa(i)
		sty := styleOf(c.key.status)
		shape, rounded := "box", true
		if group == "type" && !c.merged {
			shape, rounded = shapeOf(c.key.value)
		}
		style := sty.Style
		if rounded {
			style = "rounded," + style
		}
		if c.merged {
			style += ",dashed"
		}
		value := c.label(group)
		short := value
		if !c.merged {
			short = shortLabel(c.key.value)
		}
		if group == "trust" {
			value, short = "all types", "all types"
		}
		label := short + "\n" + statusMark(c.key.status) + " " + statusName(c.key.status) + "\n" + plural(c.n, "artifact", "artifacts")
		tip := plural(c.n, "artifact", "artifacts") + " · " + value + " · " + statusName(c.key.status) + " — click to list them"
		d.links.nodes[name] = nodeLink{href: listURL(ctx, at, group, &c), title: tip}
		class := "cluster " + string(c.key.status)
		b.WriteString("  " + name + " [label=" + graph.DOTString(label) + ", shape=" + shape + `, style="` + style + `", fillcolor="` + sty.Fill +
			`", color="` + sty.Stroke + `", penwidth=` + sty.Pen + `, class="` + class + `"];` + "\n")
	}
	for _, e := range cs.edges {
		from, to := "n"+strconv.Itoa(e.from), "n"+strconv.Itoa(e.to)
		rels := make([]string, 0, len(e.rels))
		for r := range e.rels {
			rels = append(rels, r)
		}
		slices.SortFunc(rels, func(a, b string) int {
			if e.rels[a] != e.rels[b] {
				return e.rels[b] - e.rels[a]
			}
			return strings.Compare(a, b)
		})
		label := thousands(int64(e.n)) + " " + clip(rels[0], labelRunes)
		if len(rels) > 1 {
			label += " +" + strconv.Itoa(len(rels)-1)
		}
		class, attrs := "ref", ", style=dashed"
		if e.dep {
			class, attrs = "dep", ""
			if cs.clusters[e.to].key.status != graph.StatusConfirmed {
				class, attrs = "dep tainted", `, color="#b00020"`
			}
		}
		pen := min(1+math.Log10(float64(e.n)), 4)
		tip := plural(e.n, "edge", "edges") + ": " + strings.Join(rels, ", ")
		key := from + "->" + to
		if prev, ok := d.links.edges[key]; ok {
			tip = prev + "; " + tip
		}
		d.links.edges[key] = tip
		b.WriteString("  " + from + " -> " + to + ` [class="` + class + `"` + attrs + ", penwidth=" + strconv.FormatFloat(pen, 'f', 2, 64) +
			", label=" + graph.DOTString(label) + "];\n")
	}
	b.WriteString("}\n")
	d.dot = b.String()
	return d
}

// unconfirmedSet is the status of each unconfirmed artifact of a state,
// from its trust index's list of them: one walk of the few, not a lookup
// per artifact.
type unconfirmedSet map[string]graph.Status

// unconfirmedOf lists tr's unconfirmed artifacts.
func unconfirmedOf(tr *graph.TrustIndex) unconfirmedSet {
	u := unconfirmedSet{}
	for id, st := range tr.Unconfirmed() {
		u[id] = st
	}
	return u
}

// status returns the status of id, an artifact of the state: its listed
// one, else confirmed (as the index judges an artifact it does not list
// as unconfirmed).
func (u unconfirmedSet) status(id string) graph.Status {
	if st, ok := u[id]; ok {
		return st
	}
	return graph.StatusConfirmed
}
