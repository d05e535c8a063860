package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// kvSnapshot returns every record of d.
func kvSnapshot(t *testing.T, d *memkv.Driver) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := d.Scan(context.Background(), nil, nil, 0, func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// hexBranchTarget opens a store on an in-memory driver that holds
// another context ("keep", with a branch), for an import to be refused
// into.
func hexBranchTarget(t *testing.T) (*store.Store, *memkv.Driver) {
	t.Helper()
	d := memkv.New()
	s, err := store.Open(context.Background(), store.Options{Driver: d, Clock: mClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(context.Background(), "keep", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	c := mCommit(t, s, "keep", "main", mPut("k", "note", map[string]any{"text": "kept"}))
	if err := s.CreateBranch(context.Background(), "keep", "side", c.ID); err != nil {
		t.Fatal(err)
	}
	return s, d
}

// withBranches is the bundle of lines with names added to its header's
// branches, each at main's head.
func withBranches(t *testing.T, lines []map[string]any, names ...string) *replay.Bundle {
	t.Helper()
	var head any
	branches := lines[0]["branches"].([]any)
	for _, br := range branches {
		if br.(map[string]any)["name"] == "main" {
			head = br.(map[string]any)["head"]
		}
	}
	edited := append([]map[string]any{}, lines...)
	header := map[string]any{}
	for k, v := range lines[0] {
		header[k] = v
	}
	added := append([]any{}, branches...)
	for _, n := range names {
		added = append(added, map[string]any{"name": n, "head": head})
	}
	header["branches"] = added
	edited[0] = header
	return readLines(t, edited)
}

// TestImportRefusesABranchNamedAsACommitID: the header of a bundle, which
// no hash covers, could name a branch of 8 to 64 hex digits, and import
// created it, so an edited bundle made the branch `artifactd branch` and
// POST …/branches refuse (rule not_commit_id). Such a branch is refused
// by default, before anything is written: the error is ErrInvalid and
// names every such branch, the rule and the way on, and the target store
// (another context in it) is record for record what it was.
func TestImportRefusesABranchNamedAsACommitID(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	ids := mCommitIDs(t, src, "run-1")
	lines := bundleLines(t, src, "run-1")
	if b := withBranches(t, lines); len(b.Header.Branches) < 2 {
		t.Fatalf("fixture: the bundle has branches %v", b.Header.Branches)
	}
	for _, names := range [][]string{
		{ids[1].Hex()[:8]},                      // the first digits of a commit's id
		{"cafef00d"},                            // digits no commit starts with
		{ids[2].Hex()},                          // a full id
		{"DEADBEEF00"},                          // upper case
		{"feature-x", "0123456789", "abcdef01"}, // two of three, after a good one
	} {
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			b := withBranches(t, lines, names...)
			if _, err := b.Verify(ctx, "", replay.Options{}); err != nil {
				t.Fatalf("fixture: the edited bundle does not verify: %v", err)
			}
			dst, d := hexBranchTarget(t)
			before := kvSnapshot(t, d)
			_, err := dst.Import(ctx, b, "")
			if err == nil || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("import: %v, want ErrInvalid", err)
			}
			msg := err.Error()
			for _, n := range names {
				if store.ReadsAsCommitID(n) != strings.Contains(msg, `"`+n+`"`) {
					t.Errorf("the refusal names %q: %v, want %v: %s", n, !store.ReadsAsCommitID(n), store.ReadsAsCommitID(n), msg)
				}
			}
			for _, want := range []string{"not_commit_id", store.CommitIDRule, "nothing was imported", "rename"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q: %s", want, msg)
				}
			}
			if after := kvSnapshot(t, d); len(after) != len(before) {
				t.Errorf("a refused import changed the store: %d records, %d before", len(after), len(before))
			} else {
				for k, v := range before {
					if after[k] != v {
						t.Errorf("a refused import changed record %q", k)
					}
				}
			}
			if _, gerr := dst.GetContext(ctx, "run-1"); !errors.Is(gerr, store.ErrNotFound) {
				t.Errorf("context run-1 after the refusal: %v, want ErrNotFound", gerr)
			}
			if _, gerr := dst.GetCommit(ctx, "run-1", ids[0]); gerr == nil {
				t.Error("a refused import left its root commit")
			}
			for _, bd := range b.Blobs() {
				if has, _ := dst.HasBlob(ctx, bd); has {
					t.Errorf("a refused import left blob %s", bd.Short())
				}
			}
			if got, err := dst.Branches(ctx, "keep"); err != nil || len(got) != 2 {
				t.Errorf("the other context's branches: %v, %v", got, err)
			}
		})
	}
	// The same bundle without the names imports.
	dst, _ := hexBranchTarget(t)
	if _, err := dst.Import(ctx, withBranches(t, lines, "feature-x", "deadbee", "v0123456789"), ""); err != nil {
		t.Fatalf("import with names that do not read as a commit id: %v", err)
	}
}

// TestImportRenamesOrKeepsHexBranches: the two ways on from the refusal.
// A rename creates the branch under a name ValidateNewBranch takes; a
// bundle exported from a store that made a hex-named branch before the
// rule imports with KeepHexBranches and keeps its names (a ref of them
// then follows the older store's rule). A rename that cannot be made is
// refused before anything is written.
func TestImportRenamesOrKeepsHexBranches(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	ids := mCommitIDs(t, src, "run-1")
	lines := bundleLines(t, src, "run-1")
	digits := ids[1].Hex()[:8]
	b := withBranches(t, lines, digits, "cafef00d")
	mainHead, _ := b.Header.Branch("main")
	names := func(s *store.Store, ctxID string) map[string]string {
		t.Helper()
		brs, err := s.Branches(ctx, ctxID)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, br := range brs {
			out[br.Name] = br.Head.String()
		}
		return out
	}

	// Renamed: the rule holds in the new context.
	dst, _ := hexBranchTarget(t)
	res, err := dst.ImportWith(ctx, b, store.ImportOptions{As: "renamed", RenameBranches: map[string]string{digits: "old-" + digits, "cafef00d": "old-cafef00d"}})
	if err != nil {
		t.Fatal(err)
	}
	got := names(dst, "renamed")
	if len(res.Branches) != 5 || got["old-"+digits] != mainHead.String() || got["old-cafef00d"] != mainHead.String() || got[digits] != "" || got["exp"] == "" {
		t.Errorf("renamed import has branches %v", got)
	}
	if c, err := dst.Resolve(ctx, "renamed", digits); err != nil || c.ID != ids[1] {
		t.Errorf("Resolve(%s) after the rename: %v, %v; want commit %s", digits, c, err, ids[1].Short())
	}

	// Kept: an older store's export, names and all.
	if _, err := dst.ImportWith(ctx, b, store.ImportOptions{As: "kept", KeepHexBranches: true}); err != nil {
		t.Fatal(err)
	}
	if got := names(dst, "kept"); got[digits] != mainHead.String() || got["cafef00d"] != mainHead.String() {
		t.Errorf("kept import has branches %v", got)
	}
	if _, err := dst.Resolve(ctx, "kept", digits); !errors.Is(err, store.ErrAmbiguous) {
		t.Errorf("Resolve(%s) in the kept context: %v, want ErrAmbiguous (a branch and commit %s)", digits, err, ids[1].Short())
	}
	if c, err := dst.Resolve(ctx, "kept", "cafef00d"); err != nil || c.ID != mainHead {
		t.Errorf("Resolve(cafef00d) in the kept context: %v, %v; want the branch's head", c, err)
	}
	// Renaming one and keeping the other.
	if _, err := dst.ImportWith(ctx, b, store.ImportOptions{As: "both", KeepHexBranches: true, RenameBranches: map[string]string{digits: "was-" + digits}}); err != nil {
		t.Fatal(err)
	}
	if got := names(dst, "both"); got["was-"+digits] == "" || got["cafef00d"] == "" || got[digits] != "" {
		t.Errorf("import renaming one and keeping the other has branches %v", got)
	}

	// Renames that cannot be made.
	for _, c := range []struct {
		renames map[string]string
		says    string
	}{
		{map[string]string{"nope": "x"}, `no branch of that name`},
		{map[string]string{"main": "trunk"}, `cannot rename branch "main"`},
		{map[string]string{digits: "deadbeef00"}, "not 8 to 64 hex digits"},
		{map[string]string{digits: "-x"}, "must match"},
		{map[string]string{digits: "exp"}, `two branches named "exp"`},
		{map[string]string{digits: "main"}, `two branches named "main"`},
		{map[string]string{digits: "same", "cafef00d": "same"}, `two branches named "same"`},
	} {
		dst, d := hexBranchTarget(t)
		before := kvSnapshot(t, d)
		_, err := dst.ImportWith(ctx, b, store.ImportOptions{RenameBranches: c.renames, KeepHexBranches: true})
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("rename %v: %v, want ErrInvalid saying %q", c.renames, err, c.says)
		}
		if after := kvSnapshot(t, d); len(after) != len(before) {
			t.Errorf("rename %v: a refused import changed the store", c.renames)
		}
	}
}

// TestImportRenamesAtOnce: every rename names a branch as the bundle's
// header has it, and all of them apply at once. Applied one after the
// other, in the order of their old names, a rename that took the name
// another moved away from was found by the second, which moved the wrong
// branch: a chain swapped the two heads and a swap did nothing.
func TestImportRenamesAtOnce(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	lines := bundleLines(t, src, "run-1")
	b := withBranches(t, lines, "cafef00d", "zed")
	mainHead, _ := b.Header.Branch("main")
	expHead, _ := b.Header.Branch("exp")
	if mainHead == expHead {
		t.Fatal("the fixture's main and exp share a head: the test could not tell them apart")
	}
	dst, _ := hexBranchTarget(t)
	for _, c := range []struct {
		name    string
		renames map[string]string
		want    map[string]hashing.Digest
	}{
		{"chain", map[string]string{"cafef00d": "exp", "exp": "exp2", "zed": "zed"},
			map[string]hashing.Digest{"exp": mainHead, "exp2": expHead, "zed": mainHead}},
		{"swap", map[string]string{"cafef00d": "c", "exp": "zed", "zed": "exp"},
			map[string]hashing.Digest{"c": mainHead, "zed": expHead, "exp": mainHead}},
	} {
		if _, err := dst.ImportWith(ctx, b, store.ImportOptions{As: c.name, RenameBranches: c.renames}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		brs, err := dst.Branches(ctx, c.name)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]hashing.Digest{}
		for _, br := range brs {
			got[br.Name] = br.Head
		}
		for name, head := range c.want {
			if got[name] != head {
				t.Errorf("%s %v: branch %q is at %s, want %s (branches %v)", c.name, c.renames, name, got[name].Short(), head.Short(), got)
			}
		}
	}
	// A rename from a name only another rename makes is refused: the
	// bundle has no such branch.
	_, err := dst.ImportWith(ctx, b, store.ImportOptions{As: "via", RenameBranches: map[string]string{"cafef00d": "x", "x": "y"}})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("rename of a name only a rename makes: %v, want ErrInvalid naming \"x\"", err)
	}
}
