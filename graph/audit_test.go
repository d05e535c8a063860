package graph

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestAuditPoisonPlan(t *testing.T) {
	s, idx := tqPlanObserve(t, tqLoadPlan(t))
	meta := AuditMeta{Context: "plan", Commit: "sha256:c0ffee", ContextHash: s.Hash().String()}
	rep, err := Audit(s, "s10", func(id string) Trust { return idx.Explain(s, id) }, nil, meta)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range rep.Artifacts {
		ids = append(ids, a.ID)
		if a.ContentHash != s.Artifact(a.ID).ContentHash || a.Version != 1 {
			t.Errorf("%s: hash or version", a.ID)
		}
	}
	if want := []string{"s10", "s7", "s8", "s9", "s2", "s4", "s5", "s1"}; !slices.Equal(ids, want) {
		t.Errorf("walk %v, want %v", ids, want)
	}
	if rep.Artifacts[7].Depth != 3 || rep.Artifacts[7].Trust.Status != StatusPoisonRoot {
		t.Errorf("s1: %+v", rep.Artifacts[7])
	}
	if rep.Summary != (TrustSummary{Confirmed: 4, Quarantined: 3, PoisonRoots: 1}) {
		t.Errorf("summary %+v", rep.Summary)
	}
	if got := tqEdgeStrings(rep.Edges); len(got) != 7 || got[0] != "s10 -supported_by-> s7" {
		t.Errorf("edges %v", got)
	}
	wantSources := []AuditSource{
		{"https://fx.example/rates/usd-eur", []string{"s2"}},
		{"https://shop.example/api/price/42", []string{"s1"}},
		{"https://shop.example/shipping", []string{"s4"}},
	}
	if got, _ := json.Marshal(rep.Sources); string(got) != string(must(json.Marshal(wantSources))) {
		t.Errorf("sources %s", got)
	}
	if rep.Trust.Status != StatusQuarantined || !slices.Equal(rep.Trust.Path, []string{"s10", "s8", "s5", "s1"}) {
		t.Errorf("answer trust %+v", rep.Trust)
	}
	md := rep.Markdown()
	for _, want := range []string{"| Answer | s10 |", "| 3 | s1 | fetch\\_verdict | 1 |", "**quarantined**; roots: s1; path: s10 → s8 → s5 → s1",
		"| https://shop.example/shipping | s4 |", "| Context hash | " + meta.ContextHash + " |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	// The data callback is used when payloads are not loaded: called with
	// every artifact reached, in the report's order (one window here;
	// TestAuditDataWindows has several).
	calls, asked := 0, []string{}
	rep, err = Audit(s, "s9", nil, func(arts []*Artifact) ([]json.RawMessage, error) {
		calls++
		for _, a := range arts {
			asked = append(asked, a.ID)
		}
		return make([]json.RawMessage, len(arts)), nil
	}, meta)
	if err != nil || calls != 1 || len(rep.Sources) != 0 || rep.Trust.Status != StatusConfirmed {
		t.Errorf("data: %d calls, sources %v, err %v", calls, rep.Sources, err)
	}
	var order []string
	for _, a := range rep.Artifacts {
		order = append(order, a.ID)
	}
	if !slices.Equal(asked, order) {
		t.Errorf("data asked for %v; the report lists %v", asked, order)
	}
	// Its data is what the sources come from, and its error is returned.
	rep, err = Audit(s, "s10", nil, func(arts []*Artifact) ([]json.RawMessage, error) {
		out := make([]json.RawMessage, len(arts))
		for i, a := range arts {
			out[i] = json.RawMessage(`{"url":"https://elsewhere.example/` + a.ID + `"}`)
		}
		return out, nil
	}, meta)
	if err != nil || len(rep.Sources) != len(rep.Artifacts) || rep.Sources[0].Locator != "https://elsewhere.example/s1" {
		t.Errorf("sources from the data callback: %+v, %v", rep.Sources, err)
	}
	broken := errors.New("payload unreadable")
	if _, err := Audit(s, "s10", nil, func([]*Artifact) ([]json.RawMessage, error) { return nil, broken }, meta); !errors.Is(err, broken) {
		t.Errorf("a failing data callback: %v", err)
	}
	if _, err := Audit(s, "nope", nil, nil, meta); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown answer: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// tqUnescapedPipes counts the | of a Markdown line that are not
// backslash-escaped.
func tqUnescapedPipes(line string) int {
	n := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '|':
			n++
		}
	}
	return n
}

func TestAuditMarkdownHostile(t *testing.T) {
	hostile := []string{
		"a|b", "<script>alert(1)</script>", "`code`", "[x](javascript:alert(1))", "![img](http://e.test/x.png)",
		"**bold** _it_ ~~s~~", `back\|slash`, "&lt;b&gt;", "# heading", "a\u2028b",
	}
	s := NewState(nil)
	ops := []Op{tqPutData("ans", "answer", map[string]any{"text": "x"})}
	for i, id := range hostile {
		ops = append(ops, tqPutData(id, "fetch_verdict", map[string]any{"verdict": "FAILED", "reason": "bad | reason\n## injected",
			"url": "https://e.test/" + string(rune('a'+i)) + "|\n<img src=x onerror=alert(1)>"}))
		ops = append(ops, tqLink("ans", "supported_by", id))
	}
	if err := ValidateID("a\u2028b"); err == nil {
		// Ids with line separators are refused by the state; keep the rest.
		t.Fatal("line separator id accepted")
	}
	ops = slices.DeleteFunc(ops, func(o Op) bool { return o.ID == "a\u2028b" || o.To == "a\u2028b" })
	tqApply(t, s, ops...)
	rep, err := Audit(s, "ans", nil, nil, AuditMeta{Context: "ctx|x\n# evil", Commit: "<c>", ContextHash: "`h`"})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	lines := strings.Split(strings.TrimSuffix(md, "\n"), "\n")
	// Each table row has exactly columns+1 unescaped pipes for its section.
	width := map[string]int{"# Audit report": 3, "## Artifacts": 8, "## Edges": 4, "## Sources": 3}
	section, tableRows := "", 0
	for _, line := range lines {
		if strings.HasPrefix(line, "#") {
			section = line
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if line != "" && line != "None." {
				t.Errorf("stray line %q", line)
			}
			continue
		}
		tableRows++
		if got := tqUnescapedPipes(line); got != width[section] {
			t.Errorf("%s: row has %d unescaped pipes, want %d: %q", section, got, width[section], line)
		}
	}
	// Headings: only ours.
	var headings []string
	for _, line := range lines {
		if strings.HasPrefix(line, "#") {
			headings = append(headings, line)
		}
	}
	if want := []string{"# Audit report", "## Artifacts", "## Edges", "## Sources"}; !slices.Equal(headings, want) {
		t.Errorf("headings %q", headings)
	}
	n := len(hostile) - 1
	// meta (2+6) + artifacts (2+1+n) + edges (2+n) + sources (2+n)
	if want := 8 + 3 + n + 2 + n + 2 + n; tableRows != want {
		t.Errorf("%d table rows, want %d:\n%s", tableRows, want, md)
	}
	for _, bad := range []string{"<script", "<img", "</", "[x](", "![img]", "`code`", "**bold**", "_it_", "~~s~~", "&lt;b&gt;"} {
		if strings.Contains(md, bad) {
			t.Errorf("markdown contains raw %q", bad)
		}
	}
}

func TestMarkdownText(t *testing.T) {
	tests := map[string]string{
		"plain":        "plain",
		"a|b":          `a\|b`,
		"x\ny\r\tz":    "x y  z",
		"<b>&":         "&lt;b&gt;&amp;",
		"`[a](b)`":     "\\`\\[a\\](b)\\`",
		`\`:            `\\`,
		"*_~!":         `\*\_\~\!`,
		"naïve — ok":   "naïve — ok",
		"a\u2028b\x7f": "a b ",
	}
	for in, want := range tests {
		if got := MarkdownText(in); got != want {
			t.Errorf("MarkdownText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAuditDataWindows: on a chain longer than a window the data callback
// is called window by window, each at most AuditDataWindow long, together
// in the report's order, and sources come from every window.
func TestAuditDataWindows(t *testing.T) {
	s := NewState(nil)
	n := 2*AuditDataWindow + 10
	var ops []Op
	for i := range n {
		id := fmt.Sprintf("c%05d", i)
		ops = append(ops, Op{Op: OpPut, ID: id, Type: "note", ProducedBy: "t", Data: json.RawMessage(`{}`)})
		if i > 0 {
			ops = append(ops, Op{Op: OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("c%05d", i-1)})
		}
	}
	if _, err := s.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var asked []string
	rep, err := Audit(s, fmt.Sprintf("c%05d", n-1), nil, func(arts []*Artifact) ([]json.RawMessage, error) {
		sizes = append(sizes, len(arts))
		out := make([]json.RawMessage, len(arts))
		for i, a := range arts {
			asked = append(asked, a.ID)
			out[i] = json.RawMessage(`{"url":"https://example.org/` + a.ID + `"}`)
		}
		return out, nil
	}, AuditMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{AuditDataWindow, AuditDataWindow, 10}) {
		t.Fatalf("windows of %v", sizes)
	}
	var order []string
	for _, a := range rep.Artifacts {
		order = append(order, a.ID)
	}
	if !slices.Equal(asked, order) || len(rep.Sources) != n {
		t.Fatalf("asked %d ids in the report's order: %v; %d sources, want %d", len(asked), slices.Equal(asked, order), len(rep.Sources), n)
	}
}

// TestLocatorsPrefilter: locators skips decoding a payload that has
// neither "url" nor "locator" in it, which holds only while every source
// field's name contains one of them; and it returns what decoding the
// payload's top-level members gives, for payloads that name the fields at
// the top, only in nested objects, with other value types, or not at all.
func TestLocatorsPrefilter(t *testing.T) {
	for _, f := range sourceFields {
		if !strings.Contains(f, "url") && !strings.Contains(f, "locator") {
			t.Fatalf("source field %q contains neither \"url\" nor \"locator\": locators' prefilter would skip it", f)
		}
	}
	decoded := func(data string) []string {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(data), &m) != nil {
			return nil
		}
		var out []string
		for _, f := range sourceFields {
			if v := jsonString(m[f]); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	for _, data := range []string{
		``, `{}`, `{"text":"a claim"}`, `{"text":"see url"}`,
		`{"url":"https://a.example/"}`,
		`{"final_url":"https://b.example/","locator":"doc#3","source_url":"s","url":"u"}`,
		`{"nested":{"url":"https://c.example/"}}`,
		`{"url":7,"locator":["x"],"source_url":null}`,
		`{"URL":"upper case is another member"}`,
		`{"text":"a locator"}`,
		`[1,2]`, `"url"`,
	} {
		if got, want := locators(json.RawMessage(data)), decoded(data); !slices.Equal(got, want) {
			t.Errorf("locators(%s) = %q, want %q", data, got, want)
		}
	}
}

// TestProvenanceWithin: on random states (the fork oracle's generator:
// mixed relations, some not dependencies, links made and unmade, a hub)
// and on the same states read over a source, ProvenanceWithin(id, max)
// holds exactly when Audit reports at most max artifacts for id, and over
// a source it reads the outgoing edges of at most max artifacts. A 3,000
// deep chain answers a small max after as many reads.
func TestProvenanceWithin(t *testing.T) {
	checked := 0
	for seed := range uint64(40) {
		s, lz, src := forkGenState(t, seed)
		for i := range forkGenIDs + 1 {
			id := "n" + strconv.Itoa(i)
			size := 0
			if rep, err := Audit(s, id, nil, nil, AuditMeta{}); err == nil {
				size = len(rep.Artifacts)
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			for max := range size + 2 {
				want := size <= max
				if got := s.ProvenanceWithin(id, max); got != want {
					t.Fatalf("seed %d: %s has %d artifacts in its provenance; within %d: %v", seed, id, size, max, got)
				}
				before := src.points.Load()
				if got := lz.ProvenanceWithin(id, max); got != want {
					t.Fatalf("seed %d: over a source, %s (%d) within %d: %v", seed, id, size, max, got)
				}
				// One read for the artifact itself, then one Out per
				// artifact walked.
				if reads := src.points.Load() - before; reads > int64(max)+1 {
					t.Fatalf("seed %d: %s within %d read the source %d times", seed, id, max, reads)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d cases checked; the generator is too weak", checked)
	}

	chain := chainState(t, 3000)
	src := newStateSource(wholeCopy(chain))
	lz, err := NewStateOver(nil, src, Counts{chain.nArt, chain.nTomb, chain.nEdge}, nil, chain.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if lz.ProvenanceWithin("c2999", 50) || !lz.ProvenanceWithin("c2999", 3000) || lz.ProvenanceWithin("c2999", 2999) {
		t.Fatal("a chain of 3,000 measured wrongly")
	}
	if n := src.points.Load(); n > 1+50+1+3000+1+2999 {
		t.Fatalf("three walks read the source %d times", n)
	}
}

// forkGenIDs is how many ids forkGenState's ops draw from (n0, n1, …).
const forkGenIDs = 24

// forkGenState returns a state the fork oracle's generator builds from
// seed (30 forks of random ops over forkGenIDs ids — mixed relations,
// some not dependencies, links made and unmade — with a hub for even
// seeds, each absorbed when it applies), and the same state read over a
// source, with the source.
func forkGenState(t *testing.T, seed uint64) (whole, overSource *State, src *stateSource) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	s := NewState(nil)
	for range 30 {
		f := s.Fork()
		if _, err := f.ApplyOps(forkOps(r, s, forkGenIDs, seed%2 == 0)); err == nil {
			if err := s.Absorb(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap := wholeCopy(s)
	src = newStateSource(snap)
	lz, err := NewStateOver(s.ruleset, src, Counts{s.nArt, s.nTomb, s.nEdge}, definitionsOf(snap), s.acc.Clone())
	if err != nil {
		t.Fatal(err)
	}
	return s, lz, src
}
