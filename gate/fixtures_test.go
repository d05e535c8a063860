package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// gateCase is one case of testdata/gate/cases.json.
type gateCase struct {
	Name      string            `json:"name"`
	URL       string            `json:"url"`
	FinalURL  string            `json:"final_url"`
	Redirects []Redirect        `json:"redirects"`
	Status    int               `json:"status"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
	Error     *string           `json:"error"`
	Expect    struct {
		Verdict Verdict `json:"verdict"`
		Layer   Layer   `json:"layer"`
		Reason  Reason  `json:"reason"`
	} `json:"expect"`
	Note string `json:"note"`
}

func (c gateCase) evidence() Evidence {
	ev := Evidence{
		URL:       c.URL,
		FinalURL:  c.FinalURL,
		Redirects: c.Redirects,
		Status:    c.Status,
		Headers:   c.Headers,
		Body:      []byte(c.Body),
	}
	if c.Error != nil {
		ev.Error = *c.Error
	}
	return ev
}

func loadGateCases(tb testing.TB) []gateCase {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "gate", "cases.json"))
	if err != nil {
		tb.Fatalf("read gate fixtures: %v", err)
	}
	var f struct {
		Cases []gateCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("decode gate fixtures: %v", err)
	}
	if len(f.Cases) == 0 {
		tb.Fatal("no gate cases")
	}
	return f.Cases
}

// TestGateFixtures runs every case of testdata/gate/cases.json: verdict,
// deciding layer (none for RETRIEVED) and reason where the fixture has one.
func TestGateFixtures(t *testing.T) {
	for _, c := range loadGateCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			res := Classify(c.evidence())
			if res.Verdict != c.Expect.Verdict || res.Layer != c.Expect.Layer {
				t.Fatalf("got %s/%s (%s), want %s/%s\nlayers: %+v",
					res.Verdict, res.Layer, res.Reason, c.Expect.Verdict, c.Expect.Layer, res.Layers)
			}
			if c.Expect.Reason != "" && res.Reason != c.Expect.Reason {
				t.Fatalf("reason %s, want %s", res.Reason, c.Expect.Reason)
			}
			checkResultShape(t, res)
			if res.Receipt.RawBytes != len(c.Body) {
				t.Errorf("raw bytes %d, want %d", res.Receipt.RawBytes, len(c.Body))
			}
		})
	}
}

// checkResultShape checks the invariants every Result keeps.
func checkResultShape(t *testing.T, res Result) {
	t.Helper()
	if !res.Verdict.Valid() {
		t.Fatalf("invalid verdict %q", res.Verdict)
	}
	if len(res.Layers) != 3 || res.Layers[0].Layer != LayerTransport ||
		res.Layers[1].Layer != LayerExtraction || res.Layers[2].Layer != LayerFingerprint {
		t.Fatalf("layers %+v", res.Layers)
	}
	for _, l := range res.Layers {
		if !l.Verdict.Valid() {
			t.Fatalf("layer %s verdict %q", l.Layer, l.Verdict)
		}
		if (l.Verdict == Retrieved) != (l.Reason == "") {
			t.Fatalf("layer %s: verdict %s with reason %q", l.Layer, l.Verdict, l.Reason)
		}
		if l.Reason != "" && l.Reason.Layer() != l.Layer {
			t.Fatalf("layer %s gave reason %s", l.Layer, l.Reason)
		}
	}
	if res.Layers[2].Verdict == Failed {
		t.Fatal("fingerprint layer gave FAILED")
	}
	if res.Verdict == Retrieved {
		if res.Layer != "" || res.Reason != "" {
			t.Fatalf("RETRIEVED with layer %q reason %q", res.Layer, res.Reason)
		}
	} else if res.Reason.Layer() != res.Layer || res.Layer == "" {
		t.Fatalf("verdict %s layer %q reason %q", res.Verdict, res.Layer, res.Reason)
	}
	rc := res.Receipt
	if rc.Ruleset == "" || !strings.HasPrefix(rc.RulesetHash, "sha256:") || len(rc.RulesetHash) != 7+64 ||
		rc.Verdict != res.Verdict || rc.Layer != res.Layer || rc.Reason != res.Reason {
		t.Fatalf("receipt header %+v disagrees with result", rc)
	}
	if !strings.HasPrefix(rc.BodySHA256, "sha256:") || len(rc.BodySHA256) != 7+64 {
		t.Fatalf("body sha256 %q", rc.BodySHA256)
	}
	if rc.Redirects == nil || len(rc.Layers) != 3 {
		t.Fatalf("receipt redirects %v layers %v", rc.Redirects, rc.Layers)
	}
	if rc.ExtractedBytes != len(res.Text) {
		t.Fatalf("extracted bytes %d, text %d", rc.ExtractedBytes, len(res.Text))
	}
	if !utf8.ValidString(res.Text) {
		t.Fatal("text is not valid UTF-8")
	}
	texts := []string{rc.URL, rc.FinalURL, rc.Error, rc.ContentType, rc.ContentEncoding, rc.Title, rc.Charset, rc.BodySHA256,
		rc.Source, rc.Path, rc.Tool, rc.Ruleset}
	for _, r := range rc.Redirects {
		texts = append(texts, r.URL)
	}
	for _, l := range rc.Layers {
		texts = append(texts, l.Detail)
	}
	texts = append(append(texts, rc.Signals...), rc.Notes...)
	for _, s := range texts {
		if !utf8.ValidString(s) {
			t.Fatalf("receipt holds invalid UTF-8: %q", s)
		}
	}
}

// sanitizeFixtures is testdata/sanitize/cases.json.
type sanitizeFixtures struct {
	About  string `json:"about"`
	Errors []struct {
		Name       string `json:"name"`
		Error      string `json:"error"`
		ModelView  string `json:"model_view"`
		TotalChars *int   `json:"total_chars"`
		Spilled    *bool  `json:"spilled"`
		Note       string `json:"note"`
	} `json:"errors"`
	LongOutput struct {
		About  string `json:"about"`
		Limit  int    `json:"limit"`
		Make   string `json:"make"`
		Expect struct {
			ShownMaxChars int      `json:"shown_max_chars"`
			ShownContains []string `json:"shown_contains"`
			BlobContains  []string `json:"blob_contains"`
		} `json:"expect"`
	} `json:"long_output"`
}

func loadSanitizeFixtures(tb testing.TB) sanitizeFixtures {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "sanitize", "cases.json"))
	if err != nil {
		tb.Fatalf("read sanitize fixtures: %v", err)
	}
	var f sanitizeFixtures
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields() // a new kind of case must not pass unnoticed
	if err := dec.Decode(&f); err != nil {
		tb.Fatalf("decode sanitize fixtures: %v", err)
	}
	if len(f.Errors) == 0 {
		tb.Fatal("no sanitize cases")
	}
	return f
}

// TestSanitizeErrorFixtures checks every error case byte for byte.
func TestSanitizeErrorFixtures(t *testing.T) {
	f := loadSanitizeFixtures(t)
	opt := DefaultSanitizeOptions()
	for _, c := range f.Errors {
		t.Run(c.Name, func(t *testing.T) {
			v := SanitizeError(c.Error, opt)
			if v.ModelView != c.ModelView {
				t.Fatalf("model view\n got %q\nwant %q", v.ModelView, c.ModelView)
			}
			if c.TotalChars != nil && v.TotalChars != *c.TotalChars {
				t.Fatalf("total chars %d, want %d", v.TotalChars, *c.TotalChars)
			}
			wantSpilled := c.Spilled != nil && *c.Spilled
			if v.Spilled != wantSpilled {
				t.Fatalf("spilled %v, want %v", v.Spilled, wantSpilled)
			}
			if v.TotalChars != utf8.RuneCountInString(v.Masked) {
				t.Fatalf("total chars %d, masked has %d", v.TotalChars, utf8.RuneCountInString(v.Masked))
			}
			if v.Truncated != strings.HasSuffix(v.ModelView, TruncationMarker) {
				t.Fatalf("truncated=%v for %q", v.Truncated, v.ModelView)
			}
			if MaskSecrets(c.Error) != v.Masked {
				t.Fatalf("masked blob %q is not MaskSecrets of the error", v.Masked)
			}
		})
	}
}

// makeLongOutput builds the fixture's long output exactly as its "make"
// says: 'marker_head', then lines 'row_<i> ' + 80 'x' for i in 0..199, then
// 'marker_tail', joined by newlines.
func makeLongOutput() string {
	lines := []string{"marker_head"}
	for i := 0; i < 200; i++ {
		lines = append(lines, "row_"+strconv.Itoa(i)+" "+strings.Repeat("x", 80))
	}
	lines = append(lines, "marker_tail")
	return strings.Join(lines, "\n")
}

// TestLongOutputFixture applies the long-output rule to the fixture's input.
func TestLongOutputFixture(t *testing.T) {
	f := loadSanitizeFixtures(t)
	lo := f.LongOutput
	if !strings.Contains(lo.Make, "line i (0..199)") || !strings.Contains(lo.Make, "80 'x'") {
		t.Fatalf("the fixture's recipe changed: %q", lo.Make)
	}
	out := makeLongOutput()
	opt := DefaultSanitizeOptions()
	opt.MaxOutputChars = lo.Limit
	full := PrepareOutput(out, opt)
	const ref = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	v := SanitizeOutput(full, ref, opt)
	if n := utf8.RuneCountInString(v.ModelView); n > lo.Expect.ShownMaxChars || n > lo.Limit {
		t.Fatalf("view has %d characters, limit %d", n, lo.Expect.ShownMaxChars)
	}
	for _, s := range lo.Expect.ShownContains {
		if !strings.Contains(v.ModelView, s) {
			t.Errorf("view lacks %q", s)
		}
	}
	for _, s := range lo.Expect.BlobContains {
		if !strings.Contains(full, s) {
			t.Errorf("blob lacks %q", s)
		}
	}
	if strings.Count(v.ModelView, OutputNoticeTag) != 1 || !strings.Contains(v.ModelView, ref) {
		t.Errorf("view must hold exactly one notice naming the blob:\n%s", v.ModelView)
	}
	total := utf8.RuneCountInString(out)
	wantNotice := OutputNoticeTag + strconv.Itoa(v.OmittedChars) + " of " + strconv.Itoa(total) + " characters omitted; full output in blob " + ref + "]"
	if !strings.Contains(v.ModelView, "\n"+wantNotice+"\n") {
		t.Errorf("notice line %q not found in view", wantNotice)
	}
	if !v.Truncated || v.TotalChars != total || v.OmittedChars <= 0 {
		t.Errorf("view %+v", v)
	}
	// 40 % head: the head is what precedes the notice.
	head := v.ModelView[:strings.Index(v.ModelView, OutputNoticeTag)]
	tail := v.ModelView[strings.Index(v.ModelView, OutputNoticeTag)+len(wantNotice)+1:]
	hn, tn := utf8.RuneCountInString(head), utf8.RuneCountInString(tail)
	if hn*100/(hn+tn) < 30 || hn*100/(hn+tn) > 50 {
		t.Errorf("head %d and tail %d characters: head share far from 40%%", hn, tn)
	}
	// The head was cut back to a line end, so its "\n" is output text and
	// the shown characters plus the omitted ones make up the whole output.
	if !strings.HasSuffix(head, "\n") || v.OmittedChars+hn+tn != total {
		t.Errorf("omitted %d does not add up: head %d + tail %d != total %d", v.OmittedChars, hn, tn, total)
	}
	if !strings.HasPrefix(v.ModelView, "marker_head\n") || !strings.HasSuffix(v.ModelView, "marker_tail") {
		t.Errorf("view must start with the head and end with the tail")
	}
	t.Logf("view: %d chars, head %d, tail %d, omitted %d of %d", utf8.RuneCountInString(v.ModelView), hn, tn, v.OmittedChars, total)
}
