package gate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// gapFixture is one case of testdata/corpus/gaps/<name>.json (its body is
// the file it names, e.g. <name>.html or <name>.body.json): evidence of
// a misjudgement gate/v2 makes (kind "gap") or of a genuine page of the
// same shape (kind "counter"), with the verdict each ruleset must give.
type gapFixture struct {
	Gap      string   `json:"gap"`
	Kind     string   `json:"kind"`
	About    string   `json:"about"`
	Evidence Evidence `json:"evidence"`
	Body     string   `json:"body"`
	V2       gapWant  `json:"v2"`
	V3       gapWant  `json:"v3"`
}

type gapWant struct {
	Verdict Verdict `json:"verdict"`
	Layer   Layer   `json:"layer,omitempty"`
	Reason  Reason  `json:"reason,omitempty"`
}

func (w gapWant) String() string { return fmt.Sprintf("%s/%s/%s", w.Verdict, w.Layer, w.Reason) }

func loadGaps(t *testing.T) map[string]gapFixture {
	t.Helper()
	dir := filepath.Join("testdata", "corpus", "gaps")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no gap fixtures: %v", err)
	}
	out := map[string]gapFixture{}
	for _, f := range files {
		if strings.HasSuffix(f, ".body.json") {
			continue // a JSON body, not a case
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g gapFixture
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g.Evidence.Body, err = os.ReadFile(filepath.Join(dir, g.Body)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = g
	}
	return out
}

// TestGapsV3 runs the evidence of the misjudgements the review of gate/v2
// found (docs/GATE.md, "Known gaps"): each "gap" fixture is judged wrongly
// by gate/v2 and rightly by gate/v3, and each "counter" fixture, a genuine
// page of the same shape, is judged the same by both. Every gap has at
// least one counter. The receipts of both rulesets verify (CheckVerdict).
func TestGapsV3(t *testing.T) {
	v2, v3 := builtinRuleset(t, "gate/v2"), builtinRuleset(t, "gate/v3")
	gaps := loadGaps(t)
	names := make([]string, 0, len(gaps))
	for n := range gaps {
		names = append(names, n)
	}
	sort.Strings(names)
	counters := map[string]int{}
	for _, name := range names {
		g := gaps[name]
		t.Run(name, func(t *testing.T) {
			got := func(res Result) gapWant { return gapWant{res.Verdict, res.Layer, res.Reason} }
			r2, r3 := ClassifyWith(g.Evidence, v2), ClassifyWith(g.Evidence, v3)
			checkResultShape(t, r3)
			if got(r2) != g.V2 {
				t.Errorf("gate/v2: %s, want %s (%s)", got(r2), g.V2, r2.Layers)
			}
			if got(r3) != g.V3 {
				t.Errorf("gate/v3: %s, want %s (%s)", got(r3), g.V3, r3.Layers)
			}
			switch g.Kind {
			case "gap":
				if g.V2 == g.V3 {
					t.Error("a gap fixture must be judged otherwise by gate/v2")
				}
			case "counter":
				counters[g.Gap]++
				if g.V2 != g.V3 {
					t.Error("a counter fixture must be judged alike by gate/v2 and gate/v3")
				}
			default:
				t.Fatalf("kind %q", g.Kind)
			}
			blob := func(string) ([]byte, bool, error) { return g.Evidence.Body, true, nil }
			for _, res := range []Result{r2, r3} {
				data, err := json.Marshal(NewVerdictData(res, FetchedByAgent))
				if err != nil {
					t.Fatal(err)
				}
				if err := CheckVerdict(data, blob); err != nil {
					t.Errorf("the %s receipt does not verify: %v", res.Receipt.Ruleset, err)
				}
			}
		})
	}
	for _, name := range names {
		if g := gaps[name]; g.Kind == "gap" && counters[g.Gap] == 0 {
			t.Errorf("gap %q has no counter fixture", g.Gap)
		}
	}
}

// TestV3Parsers covers the header and attribute readers the gate/v3
// checks use on input the fixtures do not show.
func TestV3Parsers(t *testing.T) {
	for _, c := range []struct {
		in                    string
		first, last, complete int64
		ok                    bool
	}{
		{"bytes 0-4095/96512", 0, 4095, 96512, true},
		{"BYTES 100-199/200", 100, 199, 200, true},
		{"bytes 0-4095/*", 0, 0, 0, false},
		{"bytes */96512", 0, 0, 0, false},
		{"bytes 10-5/100", 0, 0, 0, false},
		{"bytes 0-100/100", 0, 0, 0, false},
		{"bytes 0-1/9999999999999999999", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
	} {
		f, l, n, ok := parseContentRange(c.in)
		if f != c.first || l != c.last || n != c.complete || ok != c.ok {
			t.Errorf("parseContentRange(%q) = %d %d %d %v", c.in, f, l, n, ok)
		}
	}
	for in, want := range map[string]string{
		"0; url=https://a.example/x": "https://a.example/x",
		"5;URL='/next'":              "/next",
		`0; url="/q?a=1"`:            "/q?a=1",
		"3,https://b.example/":       "https://b.example/",
		"300":                        "",
		"0; url=":                    "",
	} {
		if got := refreshURL(in); got != want {
			t.Errorf("refreshURL(%q) = %q, want %q", in, got, want)
		}
	}
	for v, want := range map[string]bool{"null": true, "false": true, `""`: true, "{ }": true, "[]": true, "0": false, `"x"`: false, `{"a":1}`: false, "[null]": false} {
		if emptyJSON([]byte(v)) != want {
			t.Errorf("emptyJSON(%s) != %v", v, want)
		}
	}
	if s := htmlNotText([]byte("BZh is not a stream: <p>text</p>"), []byte("BZh is not a stream: <p>text</p>"), 20); s != "" {
		t.Errorf("a page starting BZh: %s", s)
	}
	if s := htmlNotText([]byte("\x1f\x8b\x08\x00"), []byte("\x1f\x8b\x08\x00"), 0); s != "" {
		t.Errorf("gate/v2 has no HTML binary check: %s", s)
	}
	// A JSON error envelope is only judged on small objects.
	v3 := builtinRuleset(t, "gate/v3")
	big := `{"error":"x","a":1,"b":2,"c":3,"d":4,"e":5,"f":6}`
	if s := v3.jsonErrorEnvelope([]byte(big)); s != "" {
		t.Errorf("seven members: %s", s)
	}
	if s := v3.jsonErrorEnvelope([]byte(`{"error":"x","a":1}`)); s == "" {
		t.Error("two members with an error")
	}
}

// FuzzSizeHeaders runs the gate/v3 size checks on any Content-Length and
// Content-Range: no panic, and a size mismatch only when a header says the
// body is short.
func FuzzSizeHeaders(f *testing.F) {
	f.Add(206, "4096", "bytes 0-4095/13338", []byte("<p>"+prose+"</p>"))
	f.Add(200, "99999999999999999999", "", []byte(prose))
	f.Add(206, "", "bytes 9223372036854775806-9223372036854775807/9223372036854775807", []byte(prose))
	f.Add(206, "-1", "bytes 0-0/1", []byte(prose))
	f.Fuzz(func(t *testing.T, status int, length, rng string, body []byte) {
		ev := Evidence{URL: "https://a.example/x", Status: status, Body: body,
			Headers: map[string]string{"Content-Type": "text/plain", "Content-Length": length, "Content-Range": rng}}
		res := Classify(ev)
		checkResultShape(t, res)
		if res.Reason == ReasonSizeMismatch && length == "" && (status != 206 || rng == "") {
			t.Fatalf("size mismatch without a size header: %+v", res.Layers[0])
		}
	})
}
