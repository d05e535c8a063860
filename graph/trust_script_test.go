package graph

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// tqRewrite regenerates the expected output of testdata/trust/*.txt:
//
//	go test ./graph -run TestTrustScripts -trust.rewrite
//
// then review the diff.
var tqRewrite = flag.Bool("trust.rewrite", false, "rewrite the expected output of testdata/trust/*.txt")

// TestTrustScripts runs the trust scripts in testdata/trust. A script is a
// sequence of blocks: a command (with input lines), a "----" line, the
// expected output, and a blank line. Lines starting with # between blocks
// are comments. Commands:
//
//	commit [enforce]          ops follow, one a line:
//	  put ID TYPE [v=N]       an artifact with data {"n":ID,"v":N}
//	  fetch ID VERDICT [WHY]  a fetch_verdict
//	  link FROM REL TO | unlink FROM REL TO | del ID
//	trust                     the full report
//	explain ID...             Explain of each id
//	ancestors ID [DEPTH] | descendants ID [DEPTH]
//
// After every commit the incremental index is checked against a full pass
// for every artifact; a mismatch fails the test whatever the script says.
func TestTrustScripts(t *testing.T) {
	files, err := os.ReadDir("testdata/trust")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".txt") {
			continue
		}
		t.Run(f.Name(), func(t *testing.T) { tqRunScript(t, "testdata/trust/"+f.Name()) })
	}
}

type tqBlock struct {
	comments []string
	cmd      string
	input    []string
	want     string
}

func tqParseScript(t *testing.T, text string) []tqBlock {
	var blocks []tqBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); {
		var b tqBlock
		for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
			if strings.HasPrefix(lines[i], "#") {
				b.comments = append(b.comments, lines[i])
			}
			i++
		}
		if i == len(lines) {
			if len(b.comments) > 0 {
				blocks = append(blocks, b)
			}
			break
		}
		b.cmd = lines[i]
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			b.input = append(b.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("block %q has no ---- line", b.cmd)
		}
		var want []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		b.want = strings.Join(want, "\n")
		blocks = append(blocks, b)
	}
	return blocks
}

func tqRunScript(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := tqParseScript(t, string(raw))
	s := NewState(nil)
	idx := NewTrustIndex(s, tqBase)
	var out strings.Builder
	for _, b := range blocks {
		for _, c := range b.comments {
			out.WriteString(c + "\n")
		}
		if b.cmd == "" {
			continue
		}
		got := strings.TrimRight(tqRunCommand(t, s, idx, b), "\n")
		out.WriteString(b.cmd + "\n")
		for _, in := range b.input {
			out.WriteString(in + "\n")
		}
		out.WriteString("----\n" + got + "\n\n")
		if !*tqRewrite && got != b.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, b.cmd, got, b.want)
		}
	}
	if *tqRewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tqRunCommand(t *testing.T, s *State, idx *TrustIndex, b tqBlock) string {
	f := strings.Fields(b.cmd)
	var out strings.Builder
	switch f[0] {
	case "commit":
		enforce := len(f) > 1 && f[1] == "enforce"
		var ops []Op
		for _, line := range b.input {
			ops = append(ops, tqScriptOp(t, line))
		}
		ch, err := s.ApplyOps(ops)
		if err != nil {
			return "error: " + err.Error()
		}
		tainted := TaintedLinks(s, idx, ch)
		if enforce && len(tainted) > 0 {
			s.Undo(ch)
			if !errors.Is(tainted[0], ErrTainted) {
				t.Fatal("TaintError does not wrap ErrTainted")
			}
			return "refused: " + tainted[0].Error()
		}
		idx.Apply(s, ch)
		if err := idx.Verify(s); err != nil {
			t.Fatalf("%s: %v", b.cmd, err)
		}
		full := ComputeTrust(s, tqBase)
		tqSameTrust(t, s, idx, full)
		tqSameReport(t, s, idx.Report(s), full)
		out.WriteString("ok")
		for _, te := range tainted {
			out.WriteString("\nflagged: " + te.Error())
		}
	case "trust":
		rep := idx.Report(s)
		for _, r := range rep.PoisonRoots {
			fmt.Fprintf(&out, "poison_root %s blast=%d (%s)\n", r.ID, r.BlastRadius, r.Reason)
		}
		for _, q := range rep.Quarantined {
			out.WriteString(tqDescribe(q) + "\n")
		}
		fmt.Fprintf(&out, "confirmed %v\nblast_radius %d", rep.ConfirmedIDs(s), rep.BlastRadius)
	case "explain":
		for _, id := range f[1:] {
			out.WriteString(tqDescribe(idx.Explain(s, id)) + "\n")
		}
	case "ancestors", "descendants":
		depth := 0
		if len(f) > 2 {
			depth, _ = strconv.Atoi(f[2])
		}
		walk := Ancestors
		if f[0] == "descendants" {
			walk = Descendants
		}
		fmt.Fprintf(&out, "%v", walk(s, f[1], depth))
	default:
		t.Fatalf("unknown command %q", b.cmd)
	}
	return out.String()
}

func tqScriptOp(t *testing.T, line string) Op {
	f := strings.Fields(line)
	switch {
	case f[0] == "put" && len(f) >= 3:
		v := "0"
		if len(f) > 3 {
			v = strings.TrimPrefix(f[3], "v=")
		}
		return tqPutData(f[1], f[2], map[string]any{"n": f[1], "v": v})
	case f[0] == "fetch" && len(f) >= 3:
		why := ""
		if len(f) > 3 {
			why = f[3]
		}
		return tqPutData(f[1], "fetch_verdict", map[string]any{"verdict": f[2], "reason": why})
	case f[0] == "link" && len(f) == 4:
		return tqLink(f[1], f[2], f[3])
	case f[0] == "unlink" && len(f) == 4:
		return tqUnlink(f[1], f[2], f[3])
	case f[0] == "del" && len(f) == 2:
		return tqDel(f[1])
	}
	t.Fatalf("bad op line %q", line)
	return Op{}
}
