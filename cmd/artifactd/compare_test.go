package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/service"
)

// TestCompareCommand: the same run loaded into two contexts compares
// equal (exit 0); a run with one different artifact compares different
// (exit 1) and names the artifact under its producer; bad sides are usage
// errors (exit 2).
func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, reg, err := openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(st, reg, serveConfig{Logger: discardLogger()})
	for _, id := range []string{"one", "two", "three"} {
		if _, err := st.CreateContext(ctx, id, "enforce"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Service().PutArtifact(ctx, id, service.ArtifactInput{ID: "q", Type: "question", ProducedBy: "user", Data: json.RawMessage(`{"text":"6 x 7?"}`)}); err != nil {
			t.Fatal(err)
		}
		answer := `{"text":"42"}`
		if id == "three" {
			answer = `{"text":"41"}`
		}
		if _, err := srv.Service().PutArtifact(ctx, id, service.ArtifactInput{ID: "a", Type: "answer", ProducedBy: "model", Data: json.RawMessage(answer),
			Edges: []service.EdgeInput{{Rel: "responds_to", To: "q"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		rc := Run(ctx, append([]string{"compare", "--data", dir}, args...), &out, &errb)
		return rc, out.String(), errb.String()
	}
	if rc, out, errs := run("--context", "one", "--against", "two@main"); rc != exitOK || !strings.Contains(out, "equal") {
		t.Fatalf("one vs two: %d %s %s", rc, out, errs)
	}
	rc, out, _ := run("--context", "one", "--against", "three", "--json")
	if rc != exitMismatch {
		t.Fatalf("one vs three: exit %d", rc)
	}
	var cmp service.Comparison
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatal(err)
	}
	if cmp.Equal || len(cmp.Divergences) != 1 || cmp.Divergences[0].Producer != "model" || len(cmp.Divergences[0].Changed) != 1 ||
		cmp.Divergences[0].Changed[0].ID != "a" || strings.Join(cmp.Divergences[0].Changed[0].Fields, ",") != "content_hash" {
		t.Fatalf("comparison %s", out)
	}
	for _, args := range [][]string{{"--context", "one"}, {"--context", "no such", "--against", "one"}, {"--context", "one", "--against", "missing"}} {
		if rc, _, _ := run(args...); rc != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, rc, exitUsage)
		}
	}
	// The same through a running server (--server uses the Go client).
	st, reg, err = openAPIStore(ctx, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := httptest.NewServer(newServer(st, reg, serveConfig{Logger: discardLogger()}))
	defer ts.Close()
	remote := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		rc := Run(ctx, append([]string{"compare", "--server", ts.URL}, args...), &out, &errb)
		return rc, out.String(), errb.String()
	}
	if rc, out, errs := remote("--context", "one", "--against", "two"); rc != exitOK || !strings.Contains(out, "equal") {
		t.Fatalf("--server one vs two: %d %s %s", rc, out, errs)
	}
	if rc, out, _ := remote("--context", "one", "--against", "three"); rc != exitMismatch || !strings.Contains(out, "changed    a  (content_hash)") {
		t.Fatalf("--server one vs three: %d %s", rc, out)
	}
	if rc, _, errs := remote("--context", "one", "--against", "missing"); rc != exitUsage || !strings.Contains(errs, "404") {
		t.Fatalf("--server missing: %d %s", rc, errs)
	}
}

// TestHelpAndVersion: asked-for help goes to stdout with exit 0; a bare
// call is a usage error on stderr; version names the Go version.
func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"serve", "--help"}, {"compare", "-h"}} {
		var out, errb bytes.Buffer
		if rc := Run(context.Background(), args, &out, &errb); rc != exitOK || out.Len() == 0 || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q", args, rc, out.Len(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if rc := Run(context.Background(), nil, &out, &errb); rc != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("no args: exit %d", rc)
	}
	out.Reset()
	if rc := Run(context.Background(), []string{"version"}, &out, &errb); rc != exitOK || !regexp.MustCompile(`^artifactd \S+ .*go1\.\d+`).MatchString(out.String()) {
		t.Errorf("version: %d %q", rc, out.String())
	}
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := buildVersion(info, true), "artifactd v1.2.3 (0123456789ab+dirty, 2026-01-02T03:04:05Z) go1.26.0"; got != want {
		t.Errorf("buildVersion = %q, want %q", got, want)
	}
	if got := buildVersion(nil, false); got != "artifactd (no build information)" {
		t.Errorf("no info: %q", got)
	}
}

// TestDemoNextSteps: the demo's next steps name the real address and the
// real context hash of the plan, so they can be pasted as they are.
func TestDemoNextSteps(t *testing.T) {
	var out bytes.Buffer
	if rc := Run(context.Background(), []string{"demo", "--data", t.TempDir()}, &out, &bytes.Buffer{}); rc != exitOK {
		t.Fatalf("demo: exit %d", rc)
	}
	m := regexp.MustCompile(`poison-plan .*\n.*\n\s+context hash (sha256:[0-9a-f]{64})`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no plan hash in:\n%s", out.String())
	}
	next := out.String()[strings.Index(out.String(), "Next:"):]
	for _, want := range []string{"http://" + defaultAddr + "/v1/contexts/poison-plan/verify", `{"hash":"` + m[1] + `"}`, "--verify " + m[1]} {
		if !strings.Contains(next, want) {
			t.Errorf("next steps lack %q:\n%s", want, next)
		}
	}
}
