package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// corpusLabels are the corpus directories: "read" pages must be RETRIEVED,
// the others are walls the fingerprint layer should name.
var corpusLabels = []string{"read", "challenge", "consent_wall", "login_wall", "paywall", "rate_limited", "parked_domain", "soft_404"}

// corpusPage is one labelled page of testdata/corpus/<label>/<lang>-<name>.
type corpusPage struct {
	label, name, lang string
	ev                Evidence
}

func loadCorpus(t *testing.T) []corpusPage {
	t.Helper()
	var out []corpusPage
	for _, label := range corpusLabels {
		files, err := filepath.Glob(filepath.Join("testdata", "corpus", label, "*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("corpus %s: %v (no pages)", label, err)
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
			lang, _, _ := strings.Cut(strings.TrimPrefix(name, "hard-"), "-")
			ct := "text/html; charset=utf-8"
			if filepath.Ext(f) == ".txt" {
				ct = "text/plain; charset=utf-8"
			}
			out = append(out, corpusPage{label: label, name: name, lang: lang, ev: Evidence{
				URL: "https://" + lang + ".corpus.example/" + name, Status: 200,
				Headers: map[string]string{"Content-Type": ct}, Body: body,
			}})
		}
	}
	return out
}

// predicted is what a verdict says a page is: "read" for RETRIEVED, the
// fingerprint reason's name for a fingerprint UNKNOWN, otherwise the
// reason (an extraction verdict: not a read, but no wall named).
func predicted(res Result) string {
	switch {
	case res.Verdict == Retrieved:
		return "read"
	case res.Layer == LayerFingerprint:
		return strings.TrimPrefix(string(res.Reason), "fingerprint.")
	}
	return string(res.Reason)
}

// TestCorpus classifies the labelled corpus (testdata/corpus: pages written
// for this project in en de fr es pt it nl ru ja zh ko, half of them real
// reads of similar length) under gate/v2 and computes precision and recall
// per category and for "not a read" overall. The table is kept in
// testdata/corpus/results.md (rewrite with -rewrite) and quoted in
// docs/GATE.md. Every page whose name does not start with "hard-" must be
// judged as labelled; the hard ones (wording no rule knows, reads that use
// a rule's words) are measured, not required.
func TestCorpus(t *testing.T) {
	runCorpus(t, builtinRuleset(t, "gate/v2"), "results.md")
}

// TestCorpusV3 is TestCorpus under gate/v3, the default
// (testdata/corpus/results-v3.md), and lists the pages gate/v3 judges
// otherwise than gate/v2: none.
func TestCorpusV3(t *testing.T) {
	v2, v3 := builtinRuleset(t, "gate/v2"), builtinRuleset(t, "gate/v3")
	runCorpus(t, v3, "results-v3.md")
	var changed []string
	for _, p := range loadCorpus(t) {
		a, b := ClassifyWith(p.ev, v2), ClassifyWith(p.ev, v3)
		if a.Verdict != b.Verdict || a.Reason != b.Reason {
			changed = append(changed, fmt.Sprintf("%s/%s: %s %s → %s %s", p.label, p.name, a.Verdict, a.Reason, b.Verdict, b.Reason))
		}
	}
	if len(changed) > 0 {
		t.Errorf("gate/v3 judges %d corpus pages otherwise than gate/v2:\n%s", len(changed), strings.Join(changed, "\n"))
	}
}

// runCorpus classifies the corpus under rules and compares the table
// with testdata/corpus/<results>.
func runCorpus(t *testing.T, rules *Rules, results string) {
	t.Helper()
	pages := loadCorpus(t)
	type count struct{ tp, fp, fn int }
	counts := map[string]*count{}
	for _, l := range corpusLabels {
		counts[l] = &count{}
	}
	var wallsCaught, walls, readsKept, reads int
	var misses []string
	langs := map[string]bool{}
	for _, p := range pages {
		langs[p.lang] = true
		res := ClassifyWith(p.ev, rules)
		got := predicted(res)
		if p.label == "read" {
			reads++
			if res.Verdict == Retrieved {
				readsKept++
			}
		} else {
			walls++
			if res.Verdict != Retrieved {
				wallsCaught++
			}
		}
		if got == p.label {
			counts[p.label].tp++
		} else {
			counts[p.label].fn++
			if c := counts[got]; c != nil {
				c.fp++
			}
			misses = append(misses, fmt.Sprintf("%s/%s: %s (%s)", p.label, p.name, got, res.Layers[2].Detail))
			if !strings.HasPrefix(p.name, "hard-") {
				t.Errorf("%s/%s judged %s %s: %s", p.label, p.name, res.Verdict, res.Reason, res.Layers[2].Detail)
			}
		}
	}
	if len(pages) < 150 || reads*2 < len(pages)-10 || len(langs) < 11 {
		t.Fatalf("corpus too small: %d pages, %d reads, %d languages", len(pages), reads, len(langs))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Corpus: %d pages (%d reads, %d walls) in %d languages, ruleset %s.\n\n", len(pages), reads, walls, len(langs), rules.Name())
	b.WriteString("| category | pages | precision | recall |\n| --- | ---: | ---: | ---: |\n")
	ratio := func(a, n int) string {
		if n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f (%d/%d)", float64(a)/float64(n), a, n)
	}
	for _, l := range corpusLabels {
		c := counts[l]
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", l, c.tp+c.fn, ratio(c.tp, c.tp+c.fp), ratio(c.tp, c.tp+c.fn))
	}
	fmt.Fprintf(&b, "| not a read (any non-RETRIEVED verdict on a wall) | %d | %s | %s |\n", walls,
		ratio(wallsCaught, wallsCaught+reads-readsKept), ratio(wallsCaught, walls))
	v1, _ := Lookup(RulesetV1, "")
	var v1Caught, v1Kept int
	for _, p := range pages {
		res := ClassifyWith(p.ev, v1)
		if p.label == "read" && res.Verdict == Retrieved {
			v1Kept++
		}
		if p.label != "read" && res.Verdict != Retrieved {
			v1Caught++
		}
	}
	fmt.Fprintf(&b, "\nThe same corpus under gate/v1: walls caught (not RETRIEVED) %s, reads kept RETRIEVED %s.\n", ratio(v1Caught, walls), ratio(v1Kept, reads))
	sort.Strings(misses)
	b.WriteString("\nMisjudged pages:\n\n")
	for _, m := range misses {
		b.WriteString("- " + m + "\n")
	}
	t.Log("\n" + b.String())
	path := filepath.Join("testdata", "corpus", results)
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != b.String() {
		t.Errorf("%s is stale (go test ./gate -run TestCorpus -rewrite, then update docs/GATE.md): %v", path, err)
	}
}
