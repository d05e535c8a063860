package testenv

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that records how the test ended.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = args[0].(string) }
func (r *recorder) Skip(args ...any)  { r.skip = args[0].(string) }

// TestMissing: with CI set a missing dependency fails the test, naming
// it; without, it skips.
func TestMissing(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Missing(r, "no %s here", "chromium")
		switch {
		case ci != "" && (r.skip != "" || !strings.Contains(r.fatal, "no chromium here")):
			t.Errorf("CI=%q: fatal %q, skip %q; want a failure", ci, r.fatal, r.skip)
		case ci == "" && (r.fatal != "" || r.skip != "no chromium here"):
			t.Errorf("CI unset: fatal %q, skip %q; want a skip", r.fatal, r.skip)
		}
	}
}
