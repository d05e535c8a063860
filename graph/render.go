package graph

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Colours of the trust classes, shared by Mermaid and DOT output.
var trustStyle = map[Status]struct{ fill, stroke string }{
	StatusPoisonRoot:  {"#f8d7da", "#b00020"},
	StatusQuarantined: {"#fff3cd", "#a15c00"},
	StatusConfirmed:   {"#d4edda", "#1e7e34"},
}

// statusClass maps a status to its Mermaid class name.
var statusClass = map[Status]string{
	StatusPoisonRoot:  "poison",
	StatusQuarantined: "quarantined",
	StatusConfirmed:   "confirmed",
}

// renderIDs numbers the subgraph's nodes n0, n1… in order.
func renderIDs(sg *Subgraph) map[string]string {
	m := make(map[string]string, len(sg.Nodes))
	for i, a := range sg.Nodes {
		m[a.ID] = "n" + strconv.Itoa(i)
	}
	return m
}

// Mermaid renders sg as a Mermaid flowchart (top-down). Artifact ids never
// appear as Mermaid ids: nodes are named n0, n1… in sg.Nodes order, and
// every label is a quoted string in which anything but letters, digits and
// a few inert punctuation marks is written as a Mermaid entity code
// (#35; for '#'), so no id or type can end a label, start a comment (%%),
// a directive, a click or style statement, or inject HTML. Dependency
// edges are solid, others dotted. When trust is not nil nodes get the class
// poison, quarantined or confirmed. Edges whose ends are not both in
// sg.Nodes are skipped.
func Mermaid(sg *Subgraph, trust func(id string) Trust) string {
	ids := renderIDs(sg)
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for _, a := range sg.Nodes {
		b.WriteString("    " + ids[a.ID] + "[\"" + MermaidText(a.ID) + " (" + MermaidText(a.Type) + ")\"]\n")
	}
	for _, e := range sg.Edges {
		from, ok1 := ids[e.From]
		to, ok2 := ids[e.To]
		if !ok1 || !ok2 {
			continue
		}
		arrow := " -.->|\""
		if sg.depends(e.Rel) {
			arrow = " -->|\""
		}
		b.WriteString("    " + from + arrow + MermaidText(e.Rel) + "\"| " + to + "\n")
	}
	if trust == nil {
		return b.String()
	}
	members := map[Status][]string{}
	for _, a := range sg.Nodes {
		st := trust(a.ID).Status
		if _, ok := statusClass[st]; ok {
			members[st] = append(members[st], ids[a.ID])
		}
	}
	for _, st := range []Status{StatusPoisonRoot, StatusQuarantined, StatusConfirmed} {
		style := trustStyle[st]
		b.WriteString("    classDef " + statusClass[st] + " fill:" + style.fill + ",stroke:" + style.stroke + ",color:#000\n")
	}
	for _, st := range []Status{StatusPoisonRoot, StatusQuarantined, StatusConfirmed} {
		if len(members[st]) > 0 {
			b.WriteString("    class " + strings.Join(members[st], ",") + " " + statusClass[st] + "\n")
		}
	}
	return b.String()
}

// MermaidText escapes s for a quoted Mermaid label: letters, digits,
// space and . , _ - : / ( ) + = @ ? ! are kept; control characters and
// line breaks become spaces; everything else becomes a decimal entity code
// such as #60; for '<'.
func MermaidText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsControl(r) || r == 0x2028 || r == 0x2029:
			b.WriteByte(' ')
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" .,_-:/()+=@?!", r)):
			b.WriteRune(r)
		case r >= 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		default:
			b.WriteString("#" + strconv.Itoa(int(r)) + ";")
		}
	}
	return b.String()
}

// DOT renders sg as a Graphviz digraph. Nodes are named "n0", "n1"… in
// sg.Nodes order; the artifact id and type go in the label and the id in
// the tooltip, as quoted strings escaped by DOTString (no HTML labels).
// Dependency edges are solid, others dashed. When trust is not nil nodes
// are filled by status. Edges whose ends are not both in sg.Nodes are
// skipped.
func DOT(sg *Subgraph, trust func(id string) Trust) string {
	ids := renderIDs(sg)
	var b strings.Builder
	b.WriteString("digraph provenance {\n")
	b.WriteString("    node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\"];\n")
	for _, a := range sg.Nodes {
		b.WriteString("    \"" + ids[a.ID] + "\" [label=" + DOTString(a.ID+"\n"+a.Type) + ", tooltip=" + DOTString(a.ID))
		if trust != nil {
			if style, ok := trustStyle[trust(a.ID).Status]; ok {
				b.WriteString(", fillcolor=\"" + style.fill + "\", color=\"" + style.stroke + "\"")
			}
		}
		b.WriteString("];\n")
	}
	for _, e := range sg.Edges {
		from, ok1 := ids[e.From]
		to, ok2 := ids[e.To]
		if !ok1 || !ok2 {
			continue
		}
		b.WriteString("    \"" + from + "\" -> \"" + to + "\" [label=" + DOTString(e.Rel))
		if !sg.depends(e.Rel) {
			b.WriteString(", style=dashed")
		}
		b.WriteString("];\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// DOTString returns s as a quoted DOT string for a label or tooltip
// (escString): " and \ are backslash-escaped, a line break becomes \n,
// other control characters become spaces, the noncharacters U+FFFE and
// U+FFFF (which XML forbids, so an SVG holding them does not parse)
// become U+FFFD, and &, < and > become the character entities &amp;
// &#60; &#62; (which Graphviz decodes), so the DOT text can also be
// embedded in HTML as is.
func DOTString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case unicode.IsControl(r) || r == 0x2028 || r == 0x2029:
			b.WriteByte(' ')
		case r == 0xFFFE || r == 0xFFFF:
			b.WriteRune(utf8.RuneError)
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&#60;")
		case r == '>':
			b.WriteString("&#62;")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
