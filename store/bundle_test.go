package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// mBundleFixture builds context "run-1" (enforce mode) with a side branch
// merged back, a reset branch, a deleted artifact, a blob named by a
// payload and edge attrs.
func mBundleFixture(t *testing.T, s *store.Store) {
	ctx := context.Background()
	if _, err := s.CreateContext(ctx, "run-1", store.ModeEnforce); err != nil {
		t.Fatal(err)
	}
	page := []byte(`{"price":3,"currency":"EUR"}`)
	if _, err := s.PutContextBlob(ctx, "run-1", page); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "run-1", "main", mPut("q", "question", map[string]any{"text": "price?"}))
	c2 := mCommit(t, s, "run-1", "main",
		mPut("f", "fetch_verdict", mVerdict(t, "https://example.org/p", page)),
		mLink("f", "derived_from", "q"))
	if err := s.CreateBranch(ctx, "run-1", "exp", c2.ID); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "run-1", "exp", mPut("c", "claim", map[string]any{"text": "3 EUR"}), mLink("c", "extracted_from", "f"))
	mCommit(t, s, "run-1", "main", mPut("n", "note", map[string]any{"tmp": true}))
	mCommit(t, s, "run-1", "main", mDel("n"))
	if _, err := s.Merge(ctx, "run-1", "main", "exp", nil, "", ""); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "run-1", "main", mPut("a", "answer", map[string]any{"text": "3 EUR"}),
		graph.Op{Op: graph.OpLink, From: "a", Rel: "supported_by", To: "c", Attrs: []byte(`{"weight":0.5}`)})
	// A branch reset leaves a commit reachable only by id.
	if err := s.CreateBranch(ctx, "run-1", "scratch", c2.ID); err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "run-1", "scratch", mPut("z", "note", map[string]any{}))
	if err := s.ResetBranch(ctx, "run-1", "scratch", c2.ID); err != nil {
		t.Fatal(err)
	}
}

// mVerdict is the data the gate records for a 200 JSON fetch of body: a
// verdict that import can derive again from its receipt and blob.
func mVerdict(t *testing.T, url string, body []byte) map[string]any {
	t.Helper()
	res := gate.Classify(gate.Evidence{URL: url, Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: body})
	raw, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mCommitIDs(t *testing.T, s *store.Store, ctxID string) []hashing.Digest {
	var ids []hashing.Digest
	if err := s.Commits(context.Background(), ctxID, 0, func(c *replay.Commit) error {
		ids = append(ids, c.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestStoreBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	var buf bytes.Buffer
	h, err := src.Export(ctx, "run-1", "", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Commits != 9 || h.Blobs != 1 || len(h.Branches) != 3 || h.Settings.Quarantine != store.ModeEnforce {
		t.Fatalf("header %+v", h)
	}
	raw := append([]byte(nil), buf.Bytes()...)

	// Import into an empty store.
	dst := mOpen(t, t.TempDir())
	b, err := replay.ReadBundle(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	res, err := dst.Import(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Context != "run-1" || res.Commits != 9 || res.Blobs != 1 {
		t.Fatalf("import: %+v", res)
	}
	// Same commit ids in the same order, same branches, same hashes.
	if a, b := mCommitIDs(t, src, "run-1"), mCommitIDs(t, dst, "run-1"); len(a) != len(b) || fmtIDs(a) != fmtIDs(b) {
		t.Fatalf("commit ids differ:\n%s\n%s", fmtIDs(a), fmtIDs(b))
	}
	bs, _ := src.Branches(ctx, "run-1")
	bd, _ := dst.Branches(ctx, "run-1")
	if len(bs) != 3 || fmtBranches(bs) != fmtBranches(bd) {
		t.Fatalf("branches differ: %v %v", bs, bd)
	}
	for _, br := range bs {
		if mHead(t, src, "run-1", br.Name).ContextHash != mHead(t, dst, "run-1", br.Name).ContextHash {
			t.Fatalf("branch %s: context hash differs", br.Name)
		}
	}
	si, _ := src.GetContext(ctx, "run-1")
	di, _ := dst.GetContext(ctx, "run-1")
	if si != di {
		t.Fatalf("context records differ: %+v %+v", si, di)
	}
	// The imported chain folds, payloads and blob included.
	head := mHead(t, dst, "run-1", "main")
	fres, err := replay.Fold(ctx, dst.Source("run-1"), head.ID, replay.Options{Objects: replay.ObjectsAll})
	if err != nil || fres.State.Hash() != head.ContextHash {
		t.Fatalf("fold: %v", err)
	}
	for _, d := range b.Blobs() {
		if ok, _ := dst.HasBlob(ctx, d); !ok {
			t.Fatalf("blob %s not imported", d.Short())
		}
	}
	mFsck(t, dst)
	// Exporting the import gives the same bytes.
	var again bytes.Buffer
	if _, err := dst.Export(ctx, "run-1", "", &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), raw) {
		t.Fatal("re-export differs")
	}
	// The context exists now: import again is refused, under another id
	// it works, in the same store.
	if _, err := dst.Import(ctx, b, ""); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second import: %v", err)
	}
	res, err = dst.Import(ctx, b, "run-2")
	if err != nil || res.Context != "run-2" || fmtIDs(mCommitIDs(t, dst, "run-2")) != fmtIDs(mCommitIDs(t, src, "run-1")) {
		t.Fatalf("import as run-2: %+v %v", res, err)
	}
	// Commits after an import behave as usual.
	mCommit(t, dst, "run-2", "main", mPut("later", "note", map[string]any{}))
	mFsck(t, dst)
}

func fmtIDs(ids []hashing.Digest) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id.Short() + " ")
	}
	return b.String()
}

func fmtBranches(bs []store.Branch) string {
	var b strings.Builder
	for _, br := range bs {
		b.WriteString(br.Name + "=" + br.Head.Short() + " ")
	}
	return b.String()
}

func TestStoreExportAt(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	exp := mHead(t, src, "run-1", "exp")
	var buf bytes.Buffer
	h, err := src.Export(ctx, "run-1", "exp", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Commits != 4 || len(h.Branches) != 1 || h.Branches[0].Head != exp.ID {
		t.Fatalf("header %+v", h)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Verify(ctx, "", replay.Options{})
	if err != nil || res.State.Hash() != exp.ContextHash {
		t.Fatalf("verify: %v", err)
	}
	dst := mOpen(t, t.TempDir())
	if _, err := dst.Import(ctx, b, "copy"); err != nil {
		t.Fatal(err)
	}
	if got := mHead(t, dst, "copy", "main"); got.ID != exp.ID {
		t.Fatalf("imported main = %s, want %s", got.ID.Short(), exp.ID.Short())
	}
}

func TestStoreImportRefusesTamperedBundle(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	var buf bytes.Buffer
	if _, err := src.Export(ctx, "run-1", "", &buf); err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(buf.String(), `"text":"price?"`, `"text":"prize?"`, 1)
	b, err := replay.ReadBundle(strings.NewReader(tampered))
	if err != nil {
		t.Fatal(err)
	}
	dst := mOpen(t, t.TempDir())
	_, err = dst.Import(ctx, b, "")
	var ce *replay.ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("import of a tampered bundle: %v", err)
	}
	if _, err := dst.GetContext(ctx, "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused import created the context: %v", err)
	}
}

// TestImportGivesNoBlobToAContextItDidNotCreate: a context created under
// the import's id while the import runs (after its check that the id is
// free) wins, and the import is refused; the import must not have given
// that context the bundle's blobs first. The test waits until the
// import's first blob is a member of the id, then creates the context.
// An import that writes memberships before it creates the context gives
// the other context blobs it never held; one that creates the context
// first makes the creation fail.
func TestImportGivesNoBlobToAContextItDidNotCreate(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	if _, err := src.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	var blobs []hashing.Digest
	for i := range 300 {
		d, err := src.PutContextBlob(ctx, "run", fmt.Appendf(nil, "page %d of the run's reads", i))
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, d)
	}
	names := make([]string, len(blobs))
	for i, d := range blobs {
		names[i] = d.String()
	}
	mCommit(t, src, "run", "main", mPut("pages", "note", map[string]any{"read": names}))
	var buf bytes.Buffer
	if h, err := src.Export(ctx, "run", "", &buf); err != nil || h.Blobs != len(blobs) {
		t.Fatalf("export: %+v %v", h, err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}

	dst := mOpen(t, t.TempDir())
	done := make(chan error, 1)
	go func() {
		_, err := dst.Import(ctx, b, "taken")
		done <- err
	}()
	var importErr error
	imported := false
	for !imported {
		select {
		case importErr = <-done:
			imported = true
		default:
		}
		if imported {
			break
		}
		held := false
		for _, d := range blobs {
			if ok, err := dst.BlobMember(ctx, "taken", d); err != nil {
				t.Fatal(err)
			} else if ok {
				held = true
				break
			}
		}
		if !held {
			continue
		}
		_, createErr := dst.CreateContext(ctx, "taken", store.ModeEnforce)
		importErr = <-done
		imported = true
		if createErr == nil {
			n := 0
			for _, d := range blobs {
				if ok, _ := dst.BlobMember(ctx, "taken", d); ok {
					n++
				}
			}
			t.Fatalf("the context created during the import holds %d of the bundle's blobs (import: %v)", n, importErr)
		}
		if !errors.Is(createErr, store.ErrExists) {
			t.Fatalf("creation during the import: %v", createErr)
		}
	}
	if importErr != nil {
		t.Fatalf("import: %v", importErr)
	}
	for _, d := range blobs {
		if ok, _ := dst.BlobMember(ctx, "taken", d); !ok {
			t.Fatalf("imported context lacks blob %s", d.Short())
		}
	}
	mFsck(t, dst)
}
