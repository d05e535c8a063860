package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	// Only to damage a data directory the way a disk would: the store's
	// key layout (store/doc.go) is read and one byte of a value flipped.
	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// flipByte opens the data directory with Badger directly and flips one
// byte of the value stored under key: at the index pick returns, or in the
// middle of the value when pick is nil.
func flipByte(t *testing.T, dir string, key []byte, pick func(v []byte) int) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		i := len(v) / 2
		if pick != nil {
			i = pick(v)
		}
		v[i] ^= 0x01
		return txn.Set(key, v)
	})
	if err != nil {
		t.Fatalf("corrupt %q: %v", key, err)
	}
}

// Keys of the store's layout (store/doc.go, format version 1).
func objKey(d hashing.Digest) []byte { return append([]byte("obj\x00"), d[:]...) }
func nodeKey(d hashing.Digest) []byte {
	return append([]byte("node\x00"), d[:]...)
}
func commitKey(ctx string, id hashing.Digest) []byte {
	return append([]byte("cmt\x00"+ctx+"\x00"), id[:]...)
}
func opsKey(ctx string, id hashing.Digest, chunk uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte("ops\x00"+ctx+"\x00"), id[:]...), chunk)
}

// inMessage picks a byte of a commit record's message text, so that the
// record still decodes and only its id stops matching.
func inMessage(v []byte) int {
	return strings.Index(string(v), `"message":"`) + len(`"message":"`) + 1
}

type fsckDefect struct {
	Kind, Context, ID, Detail string
}

// fsckDefects runs `fsck --json` and returns its exit code and defects.
func fsckDefects(t *testing.T, dir string) (int, []fsckDefect, string) {
	t.Helper()
	code, out, errOut := runArtifactd(t, "fsck", "--data", dir, "--json")
	noCrash(t, out, errOut)
	var rep struct{ Defects []fsckDefect }
	// The report is the first JSON value (a clean run prints "ok" after it).
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("fsck --json: %v\n%s\n%s", err, out, errOut)
	}
	return code, rep.Defects, errOut
}

// wantDefect fails unless defects has one of kind naming id.
func wantDefect(t *testing.T, defects []fsckDefect, kind string, id hashing.Digest) {
	t.Helper()
	for _, d := range defects {
		if d.Kind == kind && d.ID == id.String() {
			return
		}
	}
	t.Errorf("fsck did not report the %s %s; it found %+v", kind, id, defects)
}

func TestFsckClean(t *testing.T) {
	f := newVerifyFixture(t)
	code, out, errOut := runArtifactd(t, "fsck", "--data", f.dir)
	if code != 0 || !strings.Contains(out, "ok") || !strings.Contains(out, "checked 1 contexts, 4 commits") {
		t.Fatalf("fsck of a sound store: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, defects, _ := fsckDefects(t, f.dir); code != 0 || len(defects) != 0 {
		t.Fatalf("fsck --json: exit %d, defects %+v", code, defects)
	}
}

// TestFsckCorruptObject flips one byte of an artifact's payload: fsck
// names the object and exits 1 (it ran and found damage), and replay refuses to verify the head
// with exit 2 (a broken chain, not a mismatch and not a crash).
func TestFsckCorruptObject(t *testing.T) {
	f := newVerifyFixture(t)
	d := hashing.ContentHash(f.payloads["c1"])
	flipByte(t, f.dir, objKey(d), nil)

	code, out, errOut := runArtifactd(t, "fsck", "--data", f.dir)
	noCrash(t, out, errOut)
	if code != 1 || !strings.Contains(out, "DEFECT object "+d.String()) {
		t.Fatalf("fsck: exit %d, want 1 naming object %s\n%s\n%s", code, d, out, errOut)
	}
	_, defects, _ := fsckDefects(t, f.dir)
	wantDefect(t, defects, "object", d)

	code, out, errOut = runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--verify", f.head().ContextHash.String())
	noCrash(t, out, errOut)
	if code != 2 || !strings.Contains(errOut, "does not verify") || !strings.Contains(errOut, `"c1"`) {
		t.Fatalf("replay: exit %d, want 2 naming the payload of c1\n%s\n%s", code, out, errOut)
	}
}

// TestFsckCorruptCommitRecord changes one byte of a commit's message: its
// id no longer recomputes. fsck names the commit; replay through it fails.
func TestFsckCorruptCommitRecord(t *testing.T) {
	f := newVerifyFixture(t)
	c := f.commits[1]
	flipByte(t, f.dir, commitKey("c", c.ID), inMessage)

	code, defects, _ := fsckDefects(t, f.dir)
	if code != 1 {
		t.Fatalf("fsck: exit %d, want 1", code)
	}
	wantDefect(t, defects, "commit", c.ID)
	code, out, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--verify", f.head().ContextHash.String())
	noCrash(t, out, errOut)
	if code != 2 || !strings.Contains(errOut, c.ID.String()) {
		t.Fatalf("replay: exit %d, want 2 naming commit %s\n%s", code, c.ID, errOut)
	}
	// The commit before it still verifies.
	first := f.commits[0]
	if code, _, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--at", first.ID.Hex(), "--verify", first.ContextHash.String()); code != 0 {
		t.Fatalf("replay of the commit before the damage: exit %d\n%s", code, errOut)
	}
}

// TestFsckCorruptUndecodableCommit damages a commit record so that it no
// longer decodes at all.
func TestFsckCorruptUndecodableCommit(t *testing.T) {
	f := newVerifyFixture(t)
	c := f.commits[2]
	flipByte(t, f.dir, commitKey("c", c.ID), func(v []byte) int { return 0 }) // '{' -> 'z'
	code, defects, _ := fsckDefects(t, f.dir)
	if code != 1 {
		t.Fatalf("fsck: exit %d, want 1", code)
	}
	wantDefect(t, defects, "commit", c.ID)
	code, out, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c")
	noCrash(t, out, errOut)
	if code != 2 {
		t.Fatalf("replay: exit %d, want 2\n%s", code, errOut)
	}
}

// TestFsckCorruptTrieNode flips a byte of the head's state-map root.
func TestFsckCorruptTrieNode(t *testing.T) {
	f := newVerifyFixture(t)
	root := f.head().Root
	flipByte(t, f.dir, nodeKey(root), nil)
	code, defects, _ := fsckDefects(t, f.dir)
	if code != 1 {
		t.Fatalf("fsck: exit %d, want 1", code)
	}
	wantDefect(t, defects, "node", root)
	// The state map is derived data: the chain itself still replays.
	if code, _, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--verify", f.head().ContextHash.String()); code != 0 {
		t.Fatalf("replay: exit %d\n%s", code, errOut)
	}
}

// TestFsckCorruptOpsChunk flips a byte of a commit's recorded ops.
func TestFsckCorruptOpsChunk(t *testing.T) {
	f := newVerifyFixture(t)
	c := f.commits[1]
	flipByte(t, f.dir, opsKey("c", c.ID, 0), nil)
	code, defects, _ := fsckDefects(t, f.dir)
	if code != 1 {
		t.Fatalf("fsck: exit %d, want 1", code)
	}
	wantDefect(t, defects, "commit", c.ID)
	code, out, errOut := runArtifactd(t, "replay", "--data", f.dir, "--context", "c", "--verify", f.head().ContextHash.String())
	noCrash(t, out, errOut)
	if code != 2 || !strings.Contains(errOut, c.ID.String()) {
		t.Fatalf("replay: exit %d, want 2 naming commit %s\n%s", code, c.ID, errOut)
	}
}

// TestFsckCollectsEveryDefect damages one record of each kind at once:
// fsck reports all of them, not only the first.
func TestFsckCollectsEveryDefect(t *testing.T) {
	f := newVerifyFixture(t)
	obj := hashing.ContentHash(f.payloads["q"])
	var second, third *replay.Commit = f.commits[1], f.commits[2]
	node := f.commits[0].Root
	flipByte(t, f.dir, objKey(obj), nil)
	flipByte(t, f.dir, nodeKey(node), nil)
	flipByte(t, f.dir, commitKey("c", third.ID), inMessage)
	flipByte(t, f.dir, opsKey("c", second.ID, 0), nil)

	code, defects, errOut := fsckDefects(t, f.dir)
	if code != 1 || !strings.Contains(errOut, "defect(s) found") {
		t.Fatalf("fsck: exit %d, want 1\n%s", code, errOut)
	}
	wantDefect(t, defects, "object", obj)
	wantDefect(t, defects, "node", node)
	wantDefect(t, defects, "commit", third.ID)
	wantDefect(t, defects, "commit", second.ID)
}

// TestFsckCorruptPack changes one byte of a payload that a bulk commit
// wrote to a pack file (store format 5): fsck names the object and exits
// 2, and replay refuses to verify the head with exit 2.
func TestFsckCorruptPack(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(ctx, store.Options{Dir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	var damaged hashing.Digest
	for i := range 300 { // 256 payloads and more go to a pack
		canon, err := hashing.CanonicalizeObject(fmt.Appendf(nil, `{"text":"pack-payload-%04d-%s"}`, i, strings.Repeat("x", 200)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			damaged = hashing.ContentHash(canon)
		}
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: fmt.Sprintf("a%04d", i), Type: "note", ProducedBy: "agent", Data: canon})
	}
	res, err := s.Commit(ctx, store.CommitRequest{Context: "c", Author: "agent", Message: "bulk", Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if code, defects, _ := fsckDefects(t, dir); code != 0 || len(defects) != 0 {
		t.Fatalf("fsck of a sound store with a pack: exit %d, defects %+v", code, defects)
	}
	packs, err := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte("pack-payload-0150-")
	found := false
	for _, p := range packs {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(raw, marker); i >= 0 {
			raw[i+len(marker)] ^= 0x01
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("payload 150 is in no pack (%v)", packs)
	}
	code, defects, _ := fsckDefects(t, dir)
	if code != 1 {
		t.Fatalf("fsck: exit %d, want 1", code)
	}
	wantDefect(t, defects, "object", damaged)
	code, out, errOut := runArtifactd(t, "replay", "--data", dir, "--context", "c", "--verify", res.Commit.ContextHash.String())
	noCrash(t, out, errOut)
	if code != 2 {
		t.Fatalf("replay --verify: exit %d, want 2\n%s\n%s", code, out, errOut)
	}
}

// deleteKey deletes one record of a stopped store, as lost data would.
func deleteKey(t *testing.T, dir string, key []byte) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(key) }); err != nil {
		t.Fatal(err)
	}
}

// TestFsckChecksTheContextRecord: fsck reports a context record whose
// quarantine mode or creation time is not what the store wrote, and a
// context without its main branch. Each passed as sound before: the
// first turned enforcement off, the second made the context's export
// refuse to import, the third made every read of the context fail.
func TestFsckChecksTheContextRecord(t *testing.T) {
	has := func(defects []fsckDefect, kind, detail string) bool {
		for _, d := range defects {
			if d.Kind == kind && strings.Contains(d.Detail, detail) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name, kind, detail string
		damage             func(dir string)
	}{
		{"quarantine mode", "context", "quarantine setting", func(dir string) {
			flipByte(t, dir, []byte("ctx\x00c"), func(v []byte) int { return bytes.Index(v, []byte(`"quarantine":"`)) + len(`"quarantine":"`) + 2 })
		}},
		{"creation time", "context", "its root commit", func(dir string) {
			flipByte(t, dir, []byte("ctx\x00c"), func(v []byte) int { return bytes.Index(v, []byte(`"created":"`)) + len(`"created":"20`) + 1 })
		}},
		{"main branch", "ref", "no main branch", func(dir string) { deleteKey(t, dir, []byte("ref\x00c\x00main")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newVerifyFixture(t)
			c.damage(f.dir)
			code, defects, _ := fsckDefects(t, f.dir)
			if code == 0 || !has(defects, c.kind, c.detail) {
				t.Errorf("fsck: exit %d, defects %+v; want a %s defect saying %q", code, defects, c.kind, c.detail)
			}
		})
	}
}

// TestLostContextRecord: a context whose record is lost while its
// branches remain is reported by fsck (it said "checked 0 contexts … ok"),
// and migrate refuses the source before writing anything into the
// destination (it copied every record first, then refused).
func TestLostContextRecord(t *testing.T) {
	f := newVerifyFixture(t)
	deleteKey(t, f.dir, []byte("ctx\x00c"))
	code, defects, _ := fsckDefects(t, f.dir)
	found := false
	for _, d := range defects {
		found = found || d.Kind == "context" && strings.Contains(d.Detail, "no context record")
	}
	if code == 0 || !found {
		t.Errorf("fsck: exit %d, defects %+v", code, defects)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if code, _, errOut := runArtifactd(t, "migrate", "--from", f.dir, "--to", dst); code == 0 || !strings.Contains(errOut, "nothing was written") {
		t.Errorf("migrate: exit %d %s", code, errOut)
	}
	if ents, _ := os.ReadDir(dst); len(ents) > 0 {
		if code, _, errOut := runArtifactd(t, "migrate", "--from", f.dir, "--to", dst); strings.Contains(errOut, "already holds records") {
			t.Errorf("the refused migrate left records in the destination (%d entries): %d %s", len(ents), code, errOut)
		}
	}
}

// TestFsckFindsAHeadOutOfTheSeqIndex: a branch head whose seq entry is
// lost is reported (fsck said ok, and the context's export then left the
// head out and neither replayed nor imported).
func TestFsckFindsAHeadOutOfTheSeqIndex(t *testing.T) {
	f := newVerifyFixture(t)
	head := f.head()
	deleteKey(t, f.dir, binary.BigEndian.AppendUint64([]byte("seq\x00c\x00"), head.Seq))
	code, defects, _ := fsckDefects(t, f.dir)
	found := false
	for _, d := range defects {
		found = found || d.Kind == "ref" && strings.Contains(d.Detail, "not in the context's seq index")
	}
	if code == 0 || !found {
		t.Errorf("fsck: exit %d, defects %+v", code, defects)
	}
	if code, _, errOut := runArtifactd(t, "log", "--data", f.dir, "--context", "c", "-n", "-1"); code == 0 {
		t.Errorf("log -n -1 was taken: %s", errOut)
	}
}

// TestFsckFindsACommitOutOfTheSeqIndex: a commit that no branch reaches
// any more (its branch was reset away from it) and whose seq entry is lost
// is reported (fsck said ok: it is no head and no commit's parent, and
// the commit list, log and export leave it out); the same store before
// the loss is sound.
func TestFsckFindsACommitOutOfTheSeqIndex(t *testing.T) {
	ctx := context.Background()
	f := newVerifyFixture(t)
	s, err := store.Open(ctx, store.Options{Dir: f.dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	head := f.head()
	if err := s.CreateBranch(ctx, "c", "try", head.ID); err != nil {
		t.Fatal(err)
	}
	canon, err := hashing.CanonicalizeObject([]byte(`{"text":"a draft"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(ctx, store.CommitRequest{Context: "c", Branch: "try", Author: "agent", Message: "draft",
		Ops: []graph.Op{{Op: graph.OpPut, ID: "d", Type: "note", ProducedBy: "agent", Data: canon}}})
	if err != nil {
		t.Fatal(err)
	}
	left := res.Commit
	if err := s.ResetBranch(ctx, "c", "try", head.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if code, defects, _ := fsckDefects(t, f.dir); code != 0 || len(defects) != 0 {
		t.Fatalf("fsck of a sound store with a commit left by a reset: exit %d, defects %+v", code, defects)
	}
	deleteKey(t, f.dir, binary.BigEndian.AppendUint64([]byte("seq\x00c\x00"), left.Seq))
	code, defects, _ := fsckDefects(t, f.dir)
	if code != 1 || len(defects) != 1 {
		t.Fatalf("fsck: exit %d, defects %+v; want exit 1 and one defect", code, defects)
	}
	wantDefect(t, defects, "commit", left.ID)
	if d := defects[0]; d.Context != "c" || !strings.Contains(d.Detail, "not in the context's seq index") {
		t.Errorf("defect %+v", d)
	}
}

// TestFsckFindsALostBlobMembership: a context that no longer holds the
// body blob its fetch verdict names (its membership record is lost) is
// reported, naming the context and the blob (fsck said ok, and the
// context could no longer read the bytes its verdict was judged from);
// the same store before the loss is sound.
func TestFsckFindsALostBlobMembership(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(ctx, store.Options{Dir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// As serve marks a new store.
	if _, err := s.BackfillBlobMembers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	page := []byte(`{"price":3,"currency":"EUR"}`)
	body, err := s.PutBlob(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	res := gate.Classify(gate.Evidence{URL: "https://example.org/p", Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: page})
	raw, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	canon, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The gate's write: the commit makes the context hold the body.
	if _, err := s.Commit(ctx, store.CommitRequest{Context: "c", Author: "gate", Message: "put f",
		Ops:   []graph.Op{{Op: graph.OpPut, ID: "f", Type: "fetch_verdict", ProducedBy: "gate", Data: canon}},
		Blobs: []hashing.Digest{body}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if code, defects, _ := fsckDefects(t, dir); code != 0 || len(defects) != 0 {
		t.Fatalf("fsck of a sound store with a verdict: exit %d, defects %+v", code, defects)
	}
	deleteKey(t, dir, append([]byte("cblob\x00c\x00"), body[:]...))
	code, defects, _ := fsckDefects(t, dir)
	if code != 1 || len(defects) != 1 {
		t.Fatalf("fsck: exit %d, defects %+v; want exit 1 and one defect", code, defects)
	}
	wantDefect(t, defects, "blob", body)
	if d := defects[0]; d.Context != "c" || !strings.Contains(d.Detail, `fetch_verdict "f"`) {
		t.Errorf("defect %+v", d)
	}
}

// TestFsckReportsABrokenTypeRecord: a type record that no longer decodes
// keeps `serve` from starting; fsck names it (kind type) and exits 1,
// where it said ok before.
func TestFsckReportsABrokenTypeRecord(t *testing.T) {
	f := newVerifyFixture(t)
	ctx := context.Background()
	s, err := store.Open(ctx, store.Options{Dir: f.dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTypeIf(ctx, "ledger", nil, []byte(`{"name":"ledger","role":"sou`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	code, defects, errOut := fsckDefects(t, f.dir)
	if code != 1 || len(defects) != 1 || defects[0].Kind != "type" || defects[0].ID != "ledger" {
		t.Fatalf("fsck: exit %d, defects %+v, want exit 1 and the type ledger\n%s", code, defects, errOut)
	}
}
