package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestBranchNameReadAsACommit: a branch named with the first hex digits
// of a commit's id hid that commit wherever a ref is taken, silently:
// ?at=<digits> read the branch, and a reset to the digits moved to its
// head. A new branch may not have a name that reads as a commit id (422
// naming /name); a branch of an older store that has one (here imported
// from a bundle) keeps it, and a ref that names it and a commit is
// ambiguous and names both; sha256:<digits> is always the commit, and
// the branch name alone is the branch while no commit starts with it.
func TestBranchNameReadAsACommit(t *testing.T) {
	e := newEnv(t)
	e.createContext("h", "observe")
	write := func(ctxID, id string) string {
		return e.must(e.post("/v1/contexts/"+ctxID+"/artifacts", map[string]any{"id": id, "type": "note", "data": map[string]any{"text": id}}), 201)["commit"].(string)
	}
	first := write("h", "a")
	head := write("h", "b")
	digits := strings.TrimPrefix(first, "sha256:")[:8]

	// An older store's branch named with the digits, at the head: export
	// and import with the branch added to the bundle's header, keeping
	// the older store's names.
	var buf bytes.Buffer
	if _, err := e.st.Export(context.Background(), "h", "", &buf); err != nil {
		t.Fatal(err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	mainHead, _ := b.Header.Branch("main")
	b.Header.Branches = append(b.Header.Branches, replay.BundleBranch{Name: digits, Head: mainHead}, replay.BundleBranch{Name: "cafef00d", Head: mainHead},
		replay.BundleBranch{Name: strings.TrimPrefix(first, "sha256:"), Head: mainHead})
	// The import refuses such names unless told that the bundle is an
	// older store's export, whose branches keep theirs.
	if _, err := e.st.Import(context.Background(), b, "old"); !errors.As(err, new(*store.HexBranchError)) {
		t.Fatalf("import of the hex branches without KeepHexBranches: %v, want a *store.HexBranchError", err)
	}
	if _, err := e.st.ImportWith(context.Background(), b, store.ImportOptions{As: "old", KeepHexBranches: true}); err != nil {
		t.Fatal(err)
	}
	if w := e.must(e.get("/v1/contexts/old/artifacts/a"), 200)["written_in"]; w != first { // the import keeps commit ids
		t.Fatalf("a written in %v, want %s", w, first)
	}

	// The digits name the branch (at b's commit) and the first commit (before b).
	for _, path := range []string{
		"/v1/contexts/old/artifacts/a?at=" + digits,
		"/v1/contexts/old/state?at=" + digits,
		"/v1/contexts/old/commits/" + digits,
	} {
		r := e.get(path)
		if r.status != 400 || !strings.Contains(r.String(), `problem:ambiguous-ref"`) || !strings.Contains(r.String(), "branch") || !strings.Contains(r.String(), first[7:19]) {
			t.Errorf("GET %s: %d %s, want 400 ambiguous-ref naming the branch and the commit", path, r.status, r)
		}
	}
	if r := e.get("/v1/contexts/old/artifacts/b?at=" + digits); r.status != 400 {
		t.Errorf("GET b at %s: %d %s, want 400 (it read the branch)", digits, r.status, r)
	}
	r := e.post("/v1/contexts/old/branches/main/reset", map[string]any{"to": digits})
	if r.status != 400 || !strings.Contains(r.String(), `"pointer":"/to"`) {
		t.Errorf("reset to %s: %d %s, want 400 naming /to", digits, r.status, r)
	}
	// sha256:<digits> is the commit; the branch is its head's id.
	if r := e.get("/v1/contexts/old/artifacts/b?at=" + url.QueryEscape("sha256:"+digits)); r.status != 404 {
		t.Errorf("GET b at sha256:%s: %d, want 404 (the first commit has no b)", digits, r.status)
	}
	// A full id is the commit, also where a branch has its digits for a name.
	if r := e.get("/v1/contexts/old/artifacts/b?at=" + strings.TrimPrefix(first, "sha256:")); r.status != 404 {
		t.Errorf("GET b at the first commit's full id: %d %s, want 404 (it read the branch of that name)", r.status, r)
	}
	// A branch no commit's id starts with is still the branch.
	e.must(e.get("/v1/contexts/old/artifacts/b?at=cafef00d"), 200)
	e.must(e.post("/v1/contexts/old/artifacts", map[string]any{"id": "c", "branch": digits, "type": "note", "data": map[string]any{"text": "c"}}), 201)

	// No new branch may have such a name.
	for _, name := range []string{digits, "deadbeef", "DEADBEEF00", strings.TrimPrefix(head, "sha256:")} {
		r := e.post("/v1/contexts/h/branches", map[string]any{"name": name})
		if r.status != 422 || !strings.Contains(r.String(), `"pointer":"/name"`) || !strings.Contains(r.String(), `"rule":"not_commit_id"`) {
			t.Errorf("branch %q: %d %s, want 422 naming /name and the rule not_commit_id", name, r.status, r)
		}
	}
	for _, name := range []string{"deadbee", "feature-" + digits, "v" + digits} { // too short, or not all hex
		e.must(e.post("/v1/contexts/h/branches", map[string]any{"name": name}), 201)
	}

}
