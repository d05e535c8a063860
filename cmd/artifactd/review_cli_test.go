package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadsRefuseWhatIsNoStore: fsck (a read) refuses a directory that
// holds no store instead of creating one there and reporting it healthy,
// and refuses a store whose MANIFEST is lost instead of opening it, which
// started an empty database over its tables: the store was gone even
// once the MANIFEST was put back.
func TestReadsRefuseWhatIsNoStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "todo.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runArtifactd(t, "fsck", "--data", dir)
	if ents, _ := os.ReadDir(dir); code == 0 || len(ents) != 1 || !strings.Contains(errOut, "holds no artifactd store") {
		t.Errorf("fsck of a directory that is no store: exit %d, %d entries after, %s", code, len(ents), errOut)
	}

	f := newVerifyFixture(t)
	man, err := os.ReadFile(filepath.Join(f.dir, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.dir, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fsck", "--data", f.dir}, {"import", "--data", f.dir, "nothing.jsonl"}} {
		if code, _, errOut := runArtifactd(t, args...); code == 0 {
			t.Errorf("%s on a store without its MANIFEST: exit 0 (%s)", args[0], errOut)
		}
	}
	if err := os.WriteFile(filepath.Join(f.dir, "MANIFEST"), man, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runArtifactd(t, "fsck", "--data", f.dir); code != 0 || !strings.Contains(out, "checked 1 contexts, 4 commits") {
		t.Errorf("the store after its MANIFEST came back: exit %d\n%s%s", code, out, errOut)
	}
}

// TestDataIsNeverAURL: --data with a database URL is refused, naming
// --store; it became a directory called "postgres:" before.
func TestDataIsNeverAURL(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code, _, errOut := runArtifactd(t, "demo", "--data", "postgresql://me@db:5432/prod")
	if ents, _ := os.ReadDir(dir); code == 0 || len(ents) != 0 || !strings.Contains(errOut, "--store") {
		t.Errorf("demo --data postgresql://…: exit %d, %d entries made, %s", code, len(ents), errOut)
	}
}

// TestFetchServerAnswerWithoutTrust: an answer without trust (the server
// leaves it out when its read after the write fails) is printed as
// unknown trust; the command panicked.
func TestFetchServerAnswerWithoutTrust(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"verdict":"RETRIEVED","body_blob":"sha256:00","commit":"sha256:`+strings.Repeat("0", 64)+`","artifact":{"id":"f1","type":"fetch_verdict","version":1}}`)
	}))
	defer srv.Close()
	code, out, errOut := runArtifactd(t, "fetch", "--server", srv.URL, "--context", "c", "https://example.com/")
	if code != 0 || !strings.Contains(out, "RETRIEVED unknown") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestReplayServerChecksTheHashItself: replay --server judges the match
// from the hash the server rebuilt, not from the server's "match": a
// server saying match for another hash was believed.
func TestReplayServerChecksTheHashItself(t *testing.T) {
	got := "sha256:" + strings.Repeat("ab", 32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"match":true,"context_hash":"`+got+`","commit":"sha256:`+strings.Repeat("0", 64)+`","commits":3,"ops":3}`)
	}))
	defer srv.Close()
	if code, out, errOut := runArtifactd(t, "replay", "--server", srv.URL, "--context", "c", "--verify", "sha256:"+strings.Repeat("cd", 32)); code == 0 {
		t.Errorf("replay --verify of another hash: exit 0\n%s%s", out, errOut)
	}
	code, out, errOut := runArtifactd(t, "replay", "--server", srv.URL, "--context", "c", "--verify", got, "--json")
	if code != 0 || strings.Contains(out, `"artifacts"`) {
		t.Errorf("replay --verify of the rebuilt hash: exit %d\n%s%s", code, out, errOut)
	}
}

// TestFullCommitIDIsTheCommit: a branch named with a commit's 64 hex
// digits does not hide that commit from --at: replay --at <id> --verify
// checked the branch's head instead. artifactd branch no longer creates
// a branch of such a name, so the branch here comes from a bundle (an
// older store's export, imported with --keep-hex-branches); digits that
// are a branch and a prefix of another commit are refused naming both
// (they read the branch).
func TestFullCommitIDIsTheCommit(t *testing.T) {
	f := newVerifyFixture(t)
	first, head := f.commits[0], f.head()
	for _, name := range []string{first.ID.Hex(), first.ID.Hex()[:8], "deadbeef"} {
		if code, _, errOut := runArtifactd(t, "branch", "--data", f.dir, "--context", "c", name, "--at", "main"); code != 2 || !strings.Contains(errOut, "read as a commit id") {
			t.Errorf("branch %s: exit %d, %s; want 2 saying the name reads as a commit id", name, code, errOut)
		}
	}
	bundle := filepath.Join(t.TempDir(), "b.jsonl")
	if code, _, errOut := runArtifactd(t, "export", "--data", f.dir, "--context", "c", "-o", bundle); code != 0 {
		t.Fatal(errOut)
	}
	raw, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	main := `{"name":"main","head":"` + head.ID.String() + `"}`
	legacy := main + `,{"name":"` + first.ID.Hex() + `","head":"` + head.ID.String() + `"},{"name":"` + first.ID.Hex()[:8] + `","head":"` + head.ID.String() + `"}`
	if !strings.Contains(string(raw), main) {
		t.Fatalf("no %s in the bundle's header", main)
	}
	if err := os.WriteFile(bundle, []byte(strings.Replace(string(raw), main, legacy, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runArtifactd(t, "import", "--data", f.dir, "--as", "old", "--keep-hex-branches", bundle); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	if code, _, _ := runArtifactd(t, "replay", "--data", f.dir, "--context", "old", "--at", first.ID.Hex(), "--verify", head.ContextHash.String()); code == 0 {
		t.Errorf("replay --at %s verifies the head's hash", first.ID.Short())
	}
	if code, out, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "old", "--at", first.ID.Hex(), "--verify", first.ContextHash.String()); code != 0 {
		t.Errorf("replay --at %s --verify its own hash: exit %d\n%s%s", first.ID.Short(), code, out, errOut)
	}
	if code, _, errOut := runArtifactd(t, "log", "--data", f.dir, "--context", "old", "--at", first.ID.Hex()[:8]); code == 0 || !strings.Contains(errOut, "both a branch") || !strings.Contains(errOut, first.ID.Short()) {
		t.Errorf("log --at %s: exit %d, %s; want a refusal naming the branch and commit %s", first.ID.Hex()[:8], code, errOut, first.ID.Short())
	}
}

// TestRefusedCommandsLeaveNoDataDirectory: a refused import into a data
// directory that did not exist, and mcp with a --gate-rules file that does
// not exist, leave no directory behind (both made an empty store there).
func TestRefusedCommandsLeaveNoDataDirectory(t *testing.T) {
	f := newVerifyFixture(t)
	bundle := filepath.Join(t.TempDir(), "b.jsonl")
	if code, _, errOut := runArtifactd(t, "export", "--data", f.dir, "--context", "c", "-o", bundle); code != 0 {
		t.Fatal(errOut)
	}
	raw, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, raw[:len(raw)-40], 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "typo")
	if code, _, errOut := runArtifactd(t, "import", "--data", dst, bad); code == 0 {
		t.Fatalf("a truncated bundle imported: %s", errOut)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("a refused import left data directory %s", dst)
	}
	mdir := filepath.Join(t.TempDir(), "mcpnew")
	if code, _, _ := runArtifactd(t, "mcp", "--data", mdir, "--gate-rules", filepath.Join(t.TempDir(), "none.json")); code == 0 {
		t.Fatal("mcp with a missing --gate-rules file started")
	}
	if _, err := os.Stat(mdir); err == nil {
		t.Errorf("a refused mcp left data directory %s", mdir)
	}
}

// TestReplayRefusesFlagsItWouldIgnore: a flag replay's chosen source does
// not use is refused, never dropped: --server replayed the final state's
// payloads whatever --all-objects asked and never looked at --data, a
// bundle was replayed whatever --data named, and --gate-rules did nothing
// without a bundle. Each ran and exited 0 as if it had been honoured.
func TestReplayRefusesFlagsItWouldIgnore(t *testing.T) {
	f := newVerifyFixture(t)
	hash := f.head().ContextHash.String()
	bundle := filepath.Join(t.TempDir(), "b.jsonl")
	if code, _, errOut := runArtifactd(t, "export", "--data", f.dir, "--context", "c", "-o", bundle); code != 0 {
		t.Fatal(errOut)
	}
	rules := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(rules, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"match":true,"context_hash":"`+hash+`","commit":"`+f.head().ID.String()+`","commits":3,"ops":9}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--server", srv.URL, "--context", "c", "--verify", hash, "--all-objects"}, "--all-objects"},
		{[]string{"--server", srv.URL, "--context", "c", "--verify", hash, "--data", f.dir}, "--data"},
		{[]string{"--server", srv.URL, "--context", "c", "--verify", hash, "--store", f.dir}, "--store"},
		{[]string{"--server", srv.URL, "--context", "c", "--verify", hash, "--gate-rules", rules}, "--gate-rules"},
		{[]string{bundle, "--verify", hash, "--data", f.dir}, "--data"},
		{[]string{bundle, "--verify", hash, "--token", "t"}, "--token"},
		{[]string{"--data", f.dir, "--context", "c", "--verify", hash, "--gate-rules", rules}, "--gate-rules"},
	} {
		code, out, errOut := runArtifactd(t, append([]string{"replay"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.flag) || out != "" {
			t.Errorf("replay %s: exit %d, want 2 naming %s\n%s%s", strings.Join(tc.args, " "), code, tc.flag, out, errOut)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was asked %d times for a refused command line", n)
	}
	// What each source takes still runs.
	for _, args := range [][]string{
		{"--server", srv.URL, "--context", "c", "--verify", hash, "--at", "main"},
		{bundle, "--verify", hash, "--all-objects"},
		{"--data", f.dir, "--context", "c", "--verify", hash, "--all-objects"},
	} {
		if code, out, errOut := runArtifactd(t, append([]string{"replay"}, args...)...); code != 0 {
			t.Errorf("replay %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestServerCommandsRefuseAStore: compare and fetch with --server ask the
// server and never open a store, so --data or --store beside it is
// refused; both were dropped, and the answer came from the server while
// the operator believed it came from the directory named.
func TestServerCommandsRefuseAStore(t *testing.T) {
	f := newVerifyFixture(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "not here", http.StatusTeapot)
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"compare", "--server", srv.URL, "--context", "c", "--against", "c", "--data", f.dir},
		{"compare", "--server", srv.URL, "--context", "c", "--against", "c", "--store", f.dir},
		{"fetch", "--server", srv.URL, "--context", "c", "https://example.com/", "--data", f.dir},
		{"fetch", "--server", srv.URL, "--context", "c", "https://example.com/", "--store", f.dir},
	} {
		code, out, errOut := runArtifactd(t, args...)
		if code != exitUsage || !strings.Contains(errOut, args[len(args)-2]) || out != "" {
			t.Errorf("%s: exit %d, want 2 naming %s\n%s%s", strings.Join(args, " "), code, args[len(args)-2], out, errOut)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was asked %d times for a refused command line", n)
	}
}
