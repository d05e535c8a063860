package graph

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tqHostile are ids and types meant to break out of a label. Subgraphs are
// built by hand so that even ids the state would refuse (line breaks) are
// tried.
var tqHostile = []string{
	"</script><script>alert(1)</script>",
	`"];evil[`,
	"A-->B",
	"%%{init: {'securityLevel':'loose'}}%%",
	"x\nclick n0 call alert(1)",
	"y\nstyle n0 fill:#f00",
	"semi;colon#hash",
	"`md` **b** <b>&amp;</b>",
	`back\slash "quote" \N \G`,
	"[brackets]{braces}(parens)|pipe|",
	"naïve 東京 ok",
	"tab\there\r\nand\u2028line",
}

func tqHostileSubgraph() *Subgraph {
	sg := &Subgraph{}
	for i, id := range tqHostile {
		sg.Nodes = append(sg.Nodes, &Artifact{ID: id, Type: tqHostile[(i+3)%len(tqHostile)]})
	}
	for i := 1; i < len(tqHostile); i++ {
		rel := "derived_from"
		if i%2 == 0 {
			rel = "mentions"
		}
		sg.Edges = append(sg.Edges, &Edge{From: tqHostile[i], Rel: rel, To: tqHostile[i-1]})
	}
	// A relation name that is not a valid name, and an edge leaving the
	// subgraph, which is skipped.
	sg.Edges = append(sg.Edges, &Edge{From: tqHostile[0], Rel: `x"|y`, To: tqHostile[1]},
		&Edge{From: tqHostile[0], Rel: "uses", To: "outside"})
	return sg
}

func tqHostileTrust(id string) Trust {
	switch {
	case strings.HasPrefix(id, "A-->"):
		return Trust{ID: id, Status: StatusPoisonRoot}
	case strings.HasPrefix(id, "x"):
		return Trust{ID: id, Status: StatusQuarantined}
	}
	return Trust{ID: id, Status: StatusConfirmed}
}

var mermaidEntity = regexp.MustCompile(`#(\d+);`)

// tqMermaidDecode undoes MermaidText for a label (what Mermaid displays).
func tqMermaidDecode(s string) string {
	return mermaidEntity.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(m[1 : len(m)-1])
		return string(rune(n))
	})
}

// tqFlatten is what both renderers show for a line break or control
// character: a space (DOT keeps \n as a line break).
func tqFlatten(s string, keepNewline bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' && keepNewline:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestMermaidHostile(t *testing.T) {
	sg := tqHostileSubgraph()
	out := Mermaid(sg, tqHostileTrust)
	var (
		node     = regexp.MustCompile(`^    (n\d+)\["([^"]*)"\]$`)
		edge     = regexp.MustCompile(`^    n\d+ (-->|-\.->)\|"([^"]*)"\| n\d+$`)
		classDef = regexp.MustCompile(`^    classDef (poison|quarantined|confirmed) fill:#[0-9a-f]{6},stroke:#[0-9a-f]{6},color:#000$`)
		class    = regexp.MustCompile(`^    class n\d+(,n\d+)* (poison|quarantined|confirmed)$`)
		safe     = regexp.MustCompile(`^[\pL\pN .,_\-:/()+=@?!#;]*$`)
	)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "flowchart TD" {
		t.Fatalf("first line %q", lines[0])
	}
	var nodes, edges, classDefs, classes int
	for _, line := range lines[1:] {
		switch {
		case node.MatchString(line):
			m := node.FindStringSubmatch(line)
			if !safe.MatchString(m[2]) {
				t.Errorf("label with unsafe characters: %q", m[2])
			}
			i, _ := strconv.Atoi(m[1][1:])
			a := sg.Nodes[i]
			if want := tqFlatten(a.ID, false) + " (" + tqFlatten(a.Type, false) + ")"; tqMermaidDecode(m[2]) != want {
				t.Errorf("label %q decodes to %q, want %q", m[2], tqMermaidDecode(m[2]), want)
			}
			nodes++
		case edge.MatchString(line):
			if m := edge.FindStringSubmatch(line); !safe.MatchString(m[2]) {
				t.Errorf("edge label with unsafe characters: %q", m[2])
			}
			edges++
		case classDef.MatchString(line):
			classDefs++
		case class.MatchString(line):
			classes++
		default:
			t.Errorf("line does not parse: %q", line)
		}
	}
	if nodes != len(sg.Nodes) || edges != len(sg.Edges)-1 || classDefs != 3 || classes != 3 {
		t.Errorf("%d nodes %d edges %d classDefs %d classes:\n%s", nodes, edges, classDefs, classes, out)
	}
	noArrows := strings.NewReplacer(" -->|", "", " -.->|", "").Replace(out)
	for _, bad := range []string{"</script", "%%", "-->B", "\nclick", "\nstyle", "`", "<", ">", "&amp;"} {
		if strings.Contains(noArrows, bad) {
			t.Errorf("output contains %q", bad)
		}
	}
	if !strings.Contains(out, "    class n2 poison\n") || !strings.Contains(out, "    n1 -->|\"derived_from\"| n0\n") || !strings.Contains(out, "    n2 -.->|\"mentions\"| n1\n") {
		t.Errorf("classes or arrows:\n%s", out)
	}
	if strings.Contains(Mermaid(sg, nil), "class") {
		t.Error("classes without trust")
	}
}

// tqDOTDecode undoes DOTString for a string's contents (what Graphviz
// shows; \n stays a line break).
func tqDOTDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return strings.NewReplacer("&#60;", "<", "&#62;", ">", "&amp;", "&").Replace(b.String())
}

func TestDOTHostile(t *testing.T) {
	sg := tqHostileSubgraph()
	out := DOT(sg, tqHostileTrust)
	const str = `"((?:[^"\\\n]|\\[^\n])*)"`
	var (
		node = regexp.MustCompile(`^    "(n\d+)" \[label=` + str + `, tooltip=` + str + `(, fillcolor="#[0-9a-f]{6}", color="#[0-9a-f]{6}")?\];$`)
		edge = regexp.MustCompile(`^    "n\d+" -> "n\d+" \[label=` + str + `(, style=dashed)?\];$`)
	)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "digraph provenance {" || lines[len(lines)-1] != "}" || !strings.HasPrefix(lines[1], "    node [") {
		t.Fatalf("frame:\n%s", out)
	}
	var nodes, edges int
	for _, line := range lines[2 : len(lines)-1] {
		switch {
		case node.MatchString(line):
			m := node.FindStringSubmatch(line)
			i, _ := strconv.Atoi(m[1][1:])
			a := sg.Nodes[i]
			if got, want := tqDOTDecode(m[2]), tqFlatten(a.ID+"\n"+a.Type, true); got != want {
				t.Errorf("label decodes to %q, want %q", got, want)
			}
			if got, want := tqDOTDecode(m[3]), tqFlatten(a.ID, true); got != want {
				t.Errorf("tooltip decodes to %q, want %q", got, want)
			}
			nodes++
		case edge.MatchString(line):
			edges++
		default:
			t.Errorf("line does not parse: %q", line)
		}
	}
	if nodes != len(sg.Nodes) || edges != len(sg.Edges)-1 {
		t.Errorf("%d nodes %d edges:\n%s", nodes, edges, out)
	}
	noArrows := strings.ReplaceAll(out, `" -> "`, "")
	for _, bad := range []string{"<", ">", "\r", "\u2028"} {
		if strings.Contains(noArrows, bad) {
			t.Errorf("output contains %q", bad)
		}
	}
	// Escape sequences such as \N (the node name) must not survive: every
	// backslash in a string is followed by an escaped character.
	if strings.Contains(out, `\N`) && !strings.Contains(out, `\\N`) {
		t.Error(`unescaped \N`)
	}
	if !strings.Contains(out, `"n2" [label="A--&#62;B`) || !strings.Contains(out, `fillcolor="#f8d7da"`) {
		t.Errorf("entities or fill:\n%s", out)
	}
}

func TestRenderProvenance(t *testing.T) {
	s, idx := tqPlanObserve(t, tqLoadPlan(t))
	sg := Provenance(s, "s10", -1)
	trust := func(id string) Trust { return idx.Explain(s, id) }
	m := Mermaid(sg, trust)
	want := "flowchart TD\n" +
		"    n0[\"s10 (answer)\"]\n" +
		"    n1[\"s7 (claim)\"]\n" +
		"    n2[\"s8 (claim)\"]\n" +
		"    n3[\"s9 (evidence)\"]\n" +
		"    n4[\"s4 (fetch_verdict)\"]\n" +
		"    n5[\"s5 (claim)\"]\n" +
		"    n6[\"s2 (fetch_verdict)\"]\n" +
		"    n7[\"s1 (fetch_verdict)\"]\n" +
		"    n0 -->|\"supported_by\"| n1\n" +
		"    n0 -->|\"supported_by\"| n2\n" +
		"    n0 -->|\"supported_by\"| n3\n" +
		"    n5 -->|\"derived_from\"| n7\n" +
		"    n1 -->|\"extracted_from\"| n4\n" +
		"    n2 -->|\"calculated_from\"| n5\n" +
		"    n3 -->|\"extracted_from\"| n6\n" +
		"    classDef poison fill:#f8d7da,stroke:#b00020,color:#000\n" +
		"    classDef quarantined fill:#fff3cd,stroke:#a15c00,color:#000\n" +
		"    classDef confirmed fill:#d4edda,stroke:#1e7e34,color:#000\n" +
		"    class n7 poison\n" +
		"    class n0,n2,n5 quarantined\n" +
		"    class n1,n3,n4,n6 confirmed\n"
	if m != want {
		t.Errorf("mermaid:\n%s\nwant:\n%s", m, want)
	}
	if d := DOT(sg, trust); strings.Count(d, " -> ") != 7 || strings.Count(d, "[label=") != 15 {
		t.Errorf("dot:\n%s", d)
	}
}

func TestMermaidText(t *testing.T) {
	tests := map[string]string{
		"s1":            "s1",
		`a"b`:           "a#34;b",
		"<>":            "#60;#62;",
		"#;":            "#35;#59;",
		"%%":            "#37;#37;",
		"a\nb":          "a b",
		"`":             "#96;",
		"[x]{y}":        "#91;x#93;#123;y#125;",
		"東京":            "東京",
		"\u202eevil":    "#8238;evil",
		"a|b":           "a#124;b",
		"https://x.y/z": "https://x.y/z",
	}
	for in, want := range tests {
		if got := MermaidText(in); got != want {
			t.Errorf("MermaidText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDOTString(t *testing.T) {
	tests := map[string]string{
		"s1":             `"s1"`,
		`a"b\c`:          `"a\"b\\c"`,
		"x\ny\rz":        `"x\ny z"`,
		"<b>&":           `"&#60;b&#62;&amp;"`,
		`\N\G`:           `"\\N\\G"`,
		"東京":             `"東京"`,
		"tab\there":      `"tab here"`,
		"a\ufffeb\uffff": "\"a\ufffdb\ufffd\"",
	}
	for in, want := range tests {
		if got := DOTString(in); got != want {
			t.Errorf("DOTString(%q) = %s, want %s", in, got, want)
		}
	}
}
