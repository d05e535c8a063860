package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// heads returns every branch head of every context of the store in dir,
// with its context hash, as "ctx/branch commit hash" lines.
func heads(t *testing.T, sp storeSpec) []string {
	t.Helper()
	ctx := context.Background()
	st, err := openSpec(ctx, sp, store.Options{Logger: discardLogger()}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	infos, err := st.ListContexts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		brs, err := st.Branches(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brs {
			c, err := st.GetCommit(ctx, in.ID, b.Head)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, in.ID+"/"+b.Name+" "+c.ID.String()+" "+c.ContextHash.String())
		}
	}
	return out
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestMigrateBadgerToBadger: a copy has the same heads and hashes, and
// replay verifies on it; a non-empty destination is refused unless
// --into-nonempty, which makes a second run a no-op; a destination with
// another history under the same context id is refused and unchanged.
func TestMigrateBadgerToBadger(t *testing.T) {
	t.Setenv(envStore, "")
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	if code, _, errs := runCmd(t, "demo", "--data", a); code != 0 {
		t.Fatalf("demo: %d %s", code, errs)
	}
	want := heads(t, storeSpec{Dir: a})
	code, out, errs := runCmd(t, "migrate", "--from", "badger:"+a, "--to", b)
	if code != 0 || !strings.Contains(out, "verified:") {
		t.Fatalf("migrate: %d\n%s\n%s", code, out, errs)
	}
	if got := heads(t, storeSpec{Dir: b}); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("heads after migrate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	hash := strings.Fields(want[len(want)-1])[2]
	ctxID := strings.Split(want[len(want)-1], "/")[0]
	if code, out, errs := runCmd(t, "replay", "--data", b, "--context", ctxID, "--verify", hash); code != 0 {
		t.Fatalf("replay on the copy: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runCmd(t, "fsck", "--data", b); code != 0 {
		t.Fatalf("fsck on the copy: %d\n%s%s", code, out, errs)
	}

	held, err := openStore(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCmd(t, "migrate", "--from", a, "--to", filepath.Join(root, "d"))
	held.Close()
	if code != exitUsage || !strings.Contains(errs, "in use by a running artifactd") {
		t.Fatalf("migrate from a served directory: %d %s", code, errs)
	}
	code, _, errs = runCmd(t, "migrate", "--from", a, "--to", b)
	if code != exitUsage || !strings.Contains(errs, "--to: ") || !strings.Contains(errs, "--into-nonempty") {
		t.Fatalf("migrate into a non-empty store: %d %s", code, errs)
	}
	if code, out, errs := runCmd(t, "migrate", "--from", a, "--to", b, "--into-nonempty"); code != 0 {
		t.Fatalf("migrate --into-nonempty of the same contexts: %d\n%s%s", code, out, errs)
	}

	// c holds the demo's contexts with another history of one of them.
	if code, _, errs := runCmd(t, "demo", "--data", c); code != 0 {
		t.Fatalf("demo: %d %s", code, errs)
	}
	other, err := openStore(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	put := graph.Op{Op: graph.OpPut, ID: "diverged", Type: "note", ProducedBy: "t", Data: []byte(`{"text":"another history"}`)}
	if _, err := other.Commit(context.Background(), store.CommitRequest{Context: ctxID, Author: "t", Message: "diverge", Ops: []graph.Op{put}}); err != nil {
		t.Fatal(err)
	}
	other.Close()
	before := heads(t, storeSpec{Dir: c})
	code, _, errs = runCmd(t, "migrate", "--from", a, "--to", c, "--into-nonempty")
	if code != exitUsage || !strings.Contains(errs, ctxID) || !strings.Contains(errs, "another history") {
		t.Fatalf("migrate into a store with another history: %d %s", code, errs)
	}
	if after := heads(t, storeSpec{Dir: c}); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("a refused migrate changed the destination")
	}
}

// TestMigrateUsage: every refusal names what is wrong. A directory
// spelt two ways (a trailing slash, "/.", a symbolic link) is the same
// store; it was refused as in use by a running artifactd, the lock of
// its own --from.
func TestMigrateUsage(t *testing.T) {
	dir := t.TempDir()
	src := newVerifyFixture(t).dir
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate"}, "--from SPEC and --to SPEC are required"},
		{[]string{"migrate", "--from", dir}, "--from SPEC and --to SPEC are required"},
		{[]string{"migrate", "--from", "mysql://x/y", "--to", dir}, "--from: unknown store scheme"},
		{[]string{"migrate", "--from", dir, "--to", "redis://x"}, "--to: unknown store scheme"},
		{[]string{"migrate", "--from", dir, "--to", "badger:" + dir}, "the same store"},
		{[]string{"migrate", "--from", src, "--to", src + string(filepath.Separator)}, "the same store"},
		{[]string{"migrate", "--from", "badger:" + src + "/.", "--to", src}, "the same store"},
		{[]string{"migrate", "--from", src, "--to", link}, "the same store"},
		{[]string{"migrate", "--from", filepath.Join(dir, "none"), "--to", filepath.Join(dir, "b")}, "--from: data directory"},
		{[]string{"migrate", "--from", dir, "--to", filepath.Join(dir, "b")}, "holds no artifactd store"},
	} {
		code, _, errs := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// TestMigrateProgress: a long copy prints records/s lines to stderr.
func TestMigrateProgress(t *testing.T) {
	var w bytes.Buffer
	p := &progress{w: &w, every: time.Nanosecond}
	for i := int64(1); i <= 1024; i++ {
		p.tick(i, i*100)
		time.Sleep(time.Microsecond)
	}
	p.done(1024, 102400)
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "records/s") || !strings.HasSuffix(lines[len(lines)-1], "(done)") {
		t.Fatalf("progress:\n%s", w.String())
	}
	var quiet bytes.Buffer
	q := &progress{w: &quiet, every: time.Hour}
	for i := int64(1); i <= 1024; i++ {
		q.tick(i, i)
	}
	q.done(1024, 1024)
	if quiet.Len() != 0 {
		t.Fatalf("a short copy printed progress: %q", quiet.String())
	}
}

// TestMigratePostgres: Badger to PostgreSQL and back keeps every head and
// hash, and the commands open the PostgreSQL store with --store.
func TestMigratePostgres(t *testing.T) {
	t.Setenv(envStore, "")
	spec := pgTestStore(t, pgtest.DSN(t))
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if code, _, errs := runCmd(t, "demo", "--data", a); code != 0 {
		t.Fatalf("demo: %d %s", code, errs)
	}
	want := heads(t, storeSpec{Dir: a})
	if code, out, errs := runCmd(t, "migrate", "--from", a, "--to", spec); code != 0 {
		t.Fatalf("migrate to PostgreSQL: %d\n%s%s", code, out, errs)
	}
	pg, err := parseStoreSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := heads(t, pg); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("heads on PostgreSQL:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	hash := strings.Fields(want[0])[2]
	ctxID := strings.Split(want[0], "/")[0]
	t.Setenv(envStore, spec) // the variable names the store for every command
	if code, out, errs := runCmd(t, "replay", "--context", ctxID, "--verify", hash); code != 0 {
		t.Fatalf("replay on PostgreSQL ($%s): %d\n%s%s", envStore, code, out, errs)
	}
	if code, out, errs := runCmd(t, "fsck"); code != 0 {
		t.Fatalf("fsck on PostgreSQL: %d\n%s%s", code, out, errs)
	}
	t.Setenv(envStore, "")
	if code, out, errs := runCmd(t, "migrate", "--from", spec, "--to", "badger:"+b); code != 0 {
		t.Fatalf("migrate back: %d\n%s%s", code, out, errs)
	}
	if got := heads(t, storeSpec{Dir: b}); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("heads after the round trip:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A read of a database that holds no store does not pass for one.
	empty := pgTestStore(t, pgtest.DSN(t))
	if code, _, errs := runCmd(t, "log", "--store", empty, "--context", ctxID); code != exitUsage || !strings.Contains(errs, "holds no artifactd store") {
		t.Fatalf("log on an empty database: %d %s", code, errs)
	}
}
