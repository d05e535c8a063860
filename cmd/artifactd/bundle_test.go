package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// cliFixture writes context "run-1" into a new data directory: a fetch,
// a claim and an answer on main, a side branch "exp" merged back, and a
// blob. It returns the directory and main's head.
func cliFixture(t *testing.T) (string, *replay.Commit) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	clock := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	s, err := store.Open(ctx, store.Options{Dir: dir, NoSync: true, Logger: discardLogger(),
		Clock: func() time.Time { clock = clock.Add(time.Millisecond); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "run-1", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	page := []byte(`{"price":3,"currency":"EUR"}`)
	if _, err := s.PutContextBlob(ctx, "run-1", page); err != nil {
		t.Fatal(err)
	}
	res := gate.Classify(gate.Evidence{URL: "https://shop.example/p", Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: page})
	verdict, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	commit := func(branch string, ops ...graph.Op) *replay.Commit {
		t.Helper()
		res, err := s.Commit(ctx, store.CommitRequest{Context: "run-1", Branch: branch, Author: "agent", Message: "step", Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return res.Commit
	}
	c1 := commit("main", cliPut("q", "question", `{"text":"price?"}`),
		cliPut("f", "fetch_verdict", string(verdict)),
		cliLink("f", "derived_from", "q"))
	if err := s.CreateBranch(ctx, "run-1", "exp", c1.ID); err != nil {
		t.Fatal(err)
	}
	commit("exp", cliPut("c", "claim", `{"text":"3 EUR"}`), cliLink("c", "extracted_from", "f"))
	commit("main", cliPut("n", "note", `{"n":1}`))
	if _, err := s.Merge(ctx, "run-1", "main", "exp", nil, "", ""); err != nil {
		t.Fatal(err)
	}
	head := commit("main", cliPut("a", "answer", `{"text":"3 EUR"}`), cliLink("a", "supported_by", "c"))
	return dir, head
}

func cliPut(id, typ, data string) graph.Op {
	canon, err := hashing.CanonicalizeObject([]byte(data))
	if err != nil {
		panic(err)
	}
	return graph.Op{Op: graph.OpPut, ID: id, Type: typ, ProducedBy: "agent", Data: canon}
}

func cliLink(from, rel, to string) graph.Op {
	return graph.Op{Op: graph.OpLink, From: from, Rel: rel, To: to}
}

// runCLI runs the binary's Run with args and returns the exit code and
// outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCLIExportReplayImport(t *testing.T) {
	dir, head := cliFixture(t)
	bundle := filepath.Join(t.TempDir(), "run-1.jsonl")
	if code, out, errOut := runCLI(t, "export", "--data", dir, "--context", "run-1", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s %s", code, out, errOut)
	}
	// Export to stdout gives the same bytes.
	code, stdout, _ := runCLI(t, "export", "--data", dir, "--context", "run-1")
	file, _ := os.ReadFile(bundle)
	if code != 0 || stdout != string(file) {
		t.Fatal("export to stdout differs from export to a file")
	}
	hash := head.ContextHash.String()
	// Verify with no store at all: full hash, bare prefix, wrong hash.
	for _, verify := range []string{hash, head.ContextHash.Hex()[:12]} {
		if code, out, errOut := runCLI(t, "replay", bundle, "--verify", verify); code != 0 || !strings.Contains(out, "verify:       OK") {
			t.Fatalf("replay --verify %s: %d\n%s\n%s", verify, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "replay", bundle, "--verify", strings.Repeat("ab", 32)); code != 1 || !strings.Contains(errOut, "mismatch") {
		t.Fatalf("wrong hash: %d %s", code, errOut)
	}
	if code, _, _ := runCLI(t, "replay", bundle, "--context", "run-1", "--at", "exp", "--json"); code != 0 {
		t.Fatalf("replay --at exp: %d", code)
	}
	if code, _, errOut := runCLI(t, "replay", bundle, "--context", "other", "--verify", hash); code != 2 || !strings.Contains(errOut, `"run-1"`) {
		t.Fatalf("wrong context: %d %s", code, errOut)
	}

	// Import into an empty store: same head, same hash; replay from it.
	dir2 := filepath.Join(t.TempDir(), "data2")
	if code, out, errOut := runCLI(t, "import", "--data", dir2, bundle); code != 0 || !strings.Contains(out, "imported context run-1") {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, "replay", "--data", dir2, "--context", "run-1", "--verify", hash, "--json"); code != 0 || !strings.Contains(out, head.ID.String()) {
		t.Fatalf("replay the import: %d %s", code, out)
	}
	code, out, _ := runCLI(t, "log", "--data", dir2, "--context", "run-1", "-n", "1", "--json")
	if code != 0 || !strings.Contains(out, head.ID.String()) {
		t.Fatalf("imported head: %s", out)
	}
	// Again: refused, with a hint; --as works.
	if code, _, errOut := runCLI(t, "import", "--data", dir2, bundle); code != 2 || !strings.Contains(errOut, "--as") {
		t.Fatalf("second import: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "import", "--data", dir2, "--as", "run-2", bundle); code != 0 {
		t.Fatalf("import --as: %d %s", code, errOut)
	}
	// Under an --as id that is taken too, the hint says so, not to give
	// the flag that was given.
	if code, _, errOut := runCLI(t, "import", "--data", dir2, "--as", "run-2", bundle); code != 2 || !strings.Contains(errOut, `"run-2" is taken`) || strings.Contains(errOut, "with --as NEWID") {
		t.Fatalf("import --as a taken id: %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "fsck", "--data", dir2); code != 0 {
		t.Fatalf("fsck after import: %s", errOut)
	}
}

// TestCLIImportQuarantine: a bundle's quarantine setting travels in its
// header, which no hash covers, so a changed one still verifies; import
// keeps it unless --quarantine says otherwise, and says which it used. A
// setting that is neither enforce nor observe is refused before anything
// is written.
func TestCLIImportQuarantine(t *testing.T) {
	dir, _ := cliFixture(t) // run-1 is created in observe mode
	bundle := filepath.Join(t.TempDir(), "run-1.jsonl")
	if code, out, errOut := runCLI(t, "export", "--data", dir, "--context", "run-1", "-o", bundle); code != 0 {
		t.Fatalf("export: %d %s %s", code, out, errOut)
	}
	mode := func(dir, ctxID string) string {
		t.Helper()
		s, err := store.Open(t.Context(), store.Options{Dir: dir, NoSync: true, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, err := s.GetContext(t.Context(), ctxID)
		if err != nil {
			t.Fatal(err)
		}
		return c.Quarantine
	}
	dst := filepath.Join(t.TempDir(), "data")
	cases := []struct {
		as, flag, want, says string
	}{
		{"kept", "", store.ModeObserve, "quarantine observe (the bundle's setting)"},
		{"enforced", "--quarantine=enforce", store.ModeEnforce, "quarantine enforce (--quarantine)"},
		{"observed", "--quarantine=observe", store.ModeObserve, "quarantine observe (--quarantine)"},
	}
	for _, tc := range cases {
		args := []string{"import", "--data", dst, "--as", tc.as}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		code, out, errOut := runCLI(t, append(args, bundle)...)
		if code != 0 || !strings.Contains(out, tc.says) {
			t.Fatalf("%v: %d %q %s", args, code, out, errOut)
		}
		if got := mode(dst, tc.as); got != tc.want {
			t.Errorf("%v: the context's quarantine is %q, want %q", args, got, tc.want)
		}
	}
	// The header's setting changed: the bundle still verifies, and the
	// import without --quarantine takes the changed setting.
	raw, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	header, rest, _ := bytes.Cut(raw, []byte("\n"))
	changed := bytes.Replace(header, []byte(`"quarantine":"observe"`), []byte(`"quarantine":"enforce"`), 1)
	if bytes.Equal(changed, header) {
		t.Fatalf("no observe setting in the header %s", header)
	}
	edited := filepath.Join(t.TempDir(), "edited.jsonl")
	if err := os.WriteFile(edited, append(append(changed, '\n'), rest...), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "import", "--data", dst, "--as", "edited", edited); code != 0 || !strings.Contains(out, "quarantine enforce (the bundle's setting)") {
		t.Fatalf("import of the edited bundle: %d %q %s", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "other")
	code, _, errOut := runCLI(t, "import", "--data", other, "--quarantine", "off", bundle)
	if code != 2 || !strings.Contains(errOut, `--quarantine "off"`) {
		t.Fatalf("--quarantine off: %d %s", code, errOut)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a refused --quarantine left %s behind (stat: %v)", other, err)
	}
}

// TestCLIReplayTamperedBundle: each tampering makes `replay BUNDLE
// --verify` exit 2 and name the first bad commit.
func TestCLIReplayTamperedBundle(t *testing.T) {
	dir, head := cliFixture(t)
	code, raw, _ := runCLI(t, "export", "--data", dir, "--context", "run-1")
	if code != 0 {
		t.Fatal("export")
	}
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	var commits []struct {
		ID  hashing.Digest `json:"id"`
		Seq uint64         `json:"seq"`
	}
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, `{"type":"commit"`) {
			var c struct {
				ID  hashing.Digest `json:"id"`
				Seq uint64         `json:"seq"`
			}
			if err := json.Unmarshal([]byte(l), &c); err != nil {
				t.Fatal(err)
			}
			commits = append(commits, c)
		}
	}
	// commits: 0 root, 1 q+f, 2 exp c, 3 n, 4 merge, 5 a.
	if len(commits) != 6 {
		t.Fatalf("%d commits", len(commits))
	}
	find := func(prefix, substr string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) && strings.Contains(l, substr) {
				return i
			}
		}
		t.Fatalf("no line %s...%s", prefix, substr)
		return -1
	}
	cases := []struct {
		name string
		edit func([]string) []string
		bad  int // index in commits of the commit the error must name
	}{
		{"one op changed", func(ls []string) []string {
			i := find(`{"type":"commit"`, `"id":"n"`)
			ls[i] = strings.Replace(ls[i], `"id":"n","type":"note","version":1`, `"id":"n","type":"note","version":7`, 1)
			return ls
		}, 3},
		{"one object byte flipped", func(ls []string) []string {
			i := find(`{"type":"object"`, `"text":"3 EUR"`)
			ls[i] = strings.Replace(ls[i], "3 EUR", "4 EUR", 1)
			return ls
		}, 2},
		{"a commit line removed", func(ls []string) []string {
			i := find(`{"type":"commit"`, `"id":"n"`)
			return append(ls[:i], ls[i+1:]...)
		}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls := tc.edit(append([]string(nil), lines...))
			path := filepath.Join(t.TempDir(), "tampered.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := runCLI(t, "replay", path, "--verify", head.ContextHash.String())
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errOut)
			}
			if want := commits[tc.bad].ID.String(); !strings.Contains(errOut, want) {
				t.Fatalf("error does not name commit %s (seq %d):\n%s", want, commits[tc.bad].Seq, errOut)
			}
		})
	}
}

// hexBranchBundle exports run-1 of dir and adds to its header, which no
// hash covers, a branch for each name at head (as a hand edit, or an
// older store, could). It returns the bundle's path.
func hexBranchBundle(t *testing.T, dir string, head *replay.Commit, names ...string) string {
	t.Helper()
	code, raw, errOut := runCLI(t, "export", "--data", dir, "--context", "run-1")
	if code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	main := `{"name":"main","head":"` + head.ID.String() + `"}`
	added := main
	for _, n := range names {
		added += `,{"name":"` + n + `","head":"` + head.ID.String() + `"}`
	}
	if !strings.Contains(raw, main) {
		t.Fatalf("no %s in the bundle's header", main)
	}
	path := filepath.Join(t.TempDir(), "hex.jsonl")
	if err := os.WriteFile(path, []byte(strings.Replace(raw, main, added, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCLIImportRefusesAHexBranch: `artifactd branch` refuses a name of 8
// to 64 hex digits (rule not_commit_id), but `artifactd import` created
// one that a bundle's header named. The import is refused, exit 2, naming
// the branch, the rule and the ways on, with nothing written: no data
// directory it would have made, no context in a store that exists. Then
// the ways on: --rename-branch OLD=NEW, or --keep-hex-branches for an
// older store's export.
func TestCLIImportRefusesAHexBranch(t *testing.T) {
	dir, head := cliFixture(t)
	digits := head.Parents[0].Hex()[:8]
	bundle := hexBranchBundle(t, dir, head, digits)
	if code, out, errOut := runCLI(t, "replay", bundle); code != 0 {
		t.Fatalf("replay of the edited bundle: %d %s %s", code, out, errOut)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	for _, args := range [][]string{
		{"import", "--data", fresh, bundle},
		{"import", "--data", dir, "--as", "run-2", bundle},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 2 {
			t.Fatalf("%v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
		for _, want := range []string{`"` + digits + `"`, "not_commit_id", "read as a commit id", "nothing was imported", "--rename-branch " + digits + "=", "--keep-hex-branches"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("%v: the refusal does not say %q:\n%s", args, want, errOut)
			}
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a refused import left data directory %s (stat: %v)", fresh, err)
	}
	if code, _, errOut := runCLI(t, "log", "--data", dir, "--context", "run-2"); code != 2 || !strings.Contains(errOut, "run-2") {
		t.Errorf("log of the refused import's context: exit %d %s, want 2 (no such context)", code, errOut)
	}
	if code, out, errOut := runCLI(t, "fsck", "--data", dir); code != 0 {
		t.Errorf("fsck after the refused import: %d %s %s", code, out, errOut)
	}

	// The ways on: a rename for the import, or the older store's name kept.
	code, out, errOut := runCLI(t, "import", "--data", fresh, "--as", "renamed", "--rename-branch", digits+"=old-"+digits, bundle)
	if code != 0 || !strings.Contains(out, "old-"+digits) || strings.Contains(out, " "+digits+" ") {
		t.Fatalf("import --rename-branch: %d %s %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "import", "--data", fresh, "--as", "kept", "--keep-hex-branches", bundle)
	if code != 0 || !strings.Contains(out, "  "+digits+" ") {
		t.Fatalf("import --keep-hex-branches: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "log", "--data", fresh, "--context", "kept", "--at", digits); code != 2 || !strings.Contains(errOut, "both a branch") {
		t.Errorf("log --at %s in the kept context: exit %d %s, want 2 naming the branch and the commit", digits, code, errOut)
	}
	for _, c := range []struct{ flag, says string }{
		{digits, "want OLD=NEW"},
		{"=x", "want OLD=NEW"},
		{digits + "=deadbeef", "read as a commit id"},
		{"main=trunk", `cannot rename branch "main"`},
		{"nope=x", "no branch of that name"},
	} {
		if code, _, errOut := runCLI(t, "import", "--data", fresh, "--as", "bad", "--rename-branch", c.flag, bundle); code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("--rename-branch %s: exit %d %s, want 2 saying %q", c.flag, code, errOut, c.says)
		}
	}
	if code, _, errOut := runCLI(t, "import", "--data", fresh, "--as", "bad", "--rename-branch", digits+"=a", "--rename-branch", digits+"=b", bundle); code != 2 || !strings.Contains(errOut, "renamed twice") {
		t.Errorf("a branch renamed twice: exit %d %s", code, errOut)
	}
	if code, out, errOut := runCLI(t, "fsck", "--data", fresh); code != 0 {
		t.Errorf("fsck after the imports: %d %s %s", code, out, errOut)
	}
}
