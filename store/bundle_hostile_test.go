package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// A bundle is untrusted input: these tests edit a real export line by
// line, as someone handing over a bundle could, and check that verify or
// import refuses it and that a refused import leaves the store as it was.

// bundleLines exports ctxID and returns its lines as JSON objects
// (numbers kept as written).
func bundleLines(t *testing.T, s *store.Store, ctxID string) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.Export(context.Background(), ctxID, "", &buf); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// readLines reads lines back as a bundle.
func readLines(t *testing.T, lines []map[string]any) *replay.Bundle {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refusedCleanly imports b into a new store and checks that it is
// refused with ErrInvalid (or a bundle error) and that nothing was
// written: no context, no blob.
func refusedCleanly(t *testing.T, b *replay.Bundle, ctxID string) {
	t.Helper()
	ctx := context.Background()
	dst := mOpen(t, t.TempDir())
	_, err := dst.Import(ctx, b, "")
	if err == nil || (!errors.Is(err, store.ErrInvalid) && !errors.Is(err, replay.ErrBundle) && !errors.As(err, new(*replay.ChainError))) {
		t.Fatalf("import: %v, want a refusal", err)
	}
	if _, gerr := dst.GetContext(ctx, ctxID); gerr == nil {
		t.Fatalf("a refused import (%v) left context %q behind", err, ctxID)
	}
	for _, d := range b.Blobs() {
		if has, _ := dst.HasBlob(ctx, d); has {
			t.Fatalf("a refused import (%v) left blob %s", err, d.Short())
		}
	}
}

// TestImportChecksAVerdictBehindTheSameData: a forged RETRIEVED verdict
// (FAILED evidence edited) is refused even when a tool output with the
// same data comes first in its commit.
func TestImportChecksAVerdictBehindTheSameData(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	if _, err := src.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	res := gate.Classify(gate.Evidence{URL: "https://shop.example/p", Status: 200})
	if res.Verdict != gate.Failed {
		t.Fatalf("fixture: %s", res.Verdict)
	}
	d := gate.NewVerdictData(res, gate.FetchedByAgent)
	d.Verdict, d.Reason, d.Layer = gate.Retrieved, "", ""
	d.Receipt.Verdict, d.Receipt.Reason, d.Receipt.Layer = gate.Retrieved, "", ""
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var forged map[string]any
	if err := json.Unmarshal(raw, &forged); err != nil {
		t.Fatal(err)
	}
	mCommit(t, src, "run", "main", mPut("decoy", "tool_output", forged), mPut("f", "fetch_verdict", forged))
	b := readLines(t, bundleLines(t, src, "run"))
	if err := store.CheckBundle(ctx, b, nil); err == nil || !strings.Contains(err.Error(), `fetch_verdict "f"`) {
		t.Fatalf("CheckBundle: %v", err)
	}
	refusedCleanly(t, b, "run")
}

// TestImportPrunedLines: a bundle may list as pruned only a blob one of
// its tool outputs names, and a blob the importing store holds for
// another context is neither granted to the imported one nor marked
// pruned.
func TestImportPrunedLines(t *testing.T) {
	ctx := context.Background()
	victim := mOpen(t, t.TempDir())
	if _, err := victim.CreateContext(ctx, "secret", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	d, err := victim.PutContextBlob(ctx, "secret", []byte("api-key=hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	pruned := func(lines []map[string]any) []map[string]any {
		lines[0]["pruned"] = 1
		return append(lines, map[string]any{"type": "pruned", "hash": d.String(), "pruned_at": "2026-01-01T00:00:00Z"})
	}
	// Named by nothing in the bundle: refused.
	src := mOpen(t, t.TempDir())
	if _, err := src.CreateContext(ctx, "evil", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	mCommit(t, src, "evil", "main", mPut("n", "note", map[string]any{"x": 1}))
	b := readLines(t, pruned(bundleLines(t, src, "evil")))
	if _, err := victim.Import(ctx, b, ""); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "pruned") {
		t.Fatalf("a pruned line no tool output names: %v", err)
	}
	// Named by a tool output: imported, but the victim's bytes stay its.
	if _, err := src.CreateContext(ctx, "evil2", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	mCommit(t, src, "evil2", "main", mPut("t", "tool_output", map[string]any{"tool": "t", "model_view": "…", "total_chars": 15, "full_blob": d.String()}))
	b = readLines(t, pruned(bundleLines(t, src, "evil2")))
	if _, err := victim.Import(ctx, b, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := victim.GetContextBlob(ctx, "evil2", d); err == nil {
		t.Fatalf("the imported context reads another's blob: %q", got)
	}
	if _, ok := victim.BlobPruned(ctx, d); ok {
		t.Fatal("a blob the store holds was marked pruned")
	}
	if got, err := victim.GetContextBlob(ctx, "secret", d); err != nil || string(got) != "api-key=hunter2" {
		t.Fatalf("the owner's read: %q %v", got, err)
	}
	// Nor do they leave with the imported context's own export.
	noForeignBytes(t, victim, "evil2", "api-key=hunter2")
}

// noForeignBytes fails when the export of ctxID from s carries secret.
func noForeignBytes(t *testing.T, s *store.Store, ctxID, secret string) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := s.Export(context.Background(), ctxID, "", &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), secret) || strings.Contains(buf.String(), base64.StdEncoding.EncodeToString([]byte(secret))) {
		t.Fatalf("the export of %q carries another context's bytes %q", ctxID, secret)
	}
}

// TestExportCarriesOnlyHeldBlobs: a tool output put naming another
// context's blob (a client may put one with any digest) does not make
// that blob's bytes leave with the bundle of the context that names it;
// the blobs the context holds do.
func TestExportCarriesOnlyHeldBlobs(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	for _, id := range []string{"secret", "thief"} {
		if _, err := s.CreateContext(ctx, id, store.ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	theirs, err := s.PutContextBlob(ctx, "secret", []byte("api-key=hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := s.PutContextBlob(ctx, "thief", []byte("my own tool output"))
	if err != nil {
		t.Fatal(err)
	}
	mCommit(t, s, "thief", "main",
		mPut("stolen", "tool_output", map[string]any{"tool": "t", "model_view": "…", "total_chars": 15, "full_blob": theirs.String()}),
		mPut("own", "tool_output", map[string]any{"tool": "t", "model_view": "…", "total_chars": 18, "full_blob": mine.String()}))
	noForeignBytes(t, s, "thief", "api-key=hunter2")
	var buf bytes.Buffer
	h, err := s.Export(ctx, "thief", "", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Blobs != 1 {
		t.Fatalf("the bundle carries %d blobs, want the context's own one", h.Blobs)
	}
}

// TestImportRefusesAmbiguousOrDisorderedHistory: a header naming a branch
// twice (which head is the branch?), and a parent listed after its child
// (a chain the importing store could not fold), fail verification, and
// import writes nothing.
func TestImportRefusesAmbiguousOrDisorderedHistory(t *testing.T) {
	ctx := context.Background()
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	head := func(lines []map[string]any, name string) any {
		for _, br := range lines[0]["branches"].([]any) {
			if br.(map[string]any)["name"] == name {
				return br.(map[string]any)["head"]
			}
		}
		t.Fatalf("no branch %s", name)
		return nil
	}
	for _, c := range []struct {
		name string
		edit func(lines []map[string]any)
	}{
		{"exp twice", func(lines []map[string]any) {
			lines[0]["branches"] = append(lines[0]["branches"].([]any), map[string]any{"name": "exp", "head": head(lines, "exp")})
		}},
		{"main twice", func(lines []map[string]any) {
			lines[0]["branches"] = append(lines[0]["branches"].([]any), map[string]any{"name": "main", "head": head(lines, "exp")})
		}},
		{"a merge's parent after it", func(lines []map[string]any) {
			at := map[string]map[string]any{}
			var merge map[string]any
			for _, l := range lines {
				if l["type"] == "commit" {
					at[l["id"].(string)] = l
					if len(l["parents"].([]any)) == 2 {
						merge = l
					}
				}
			}
			seq, _ := merge["seq"].(json.Number).Int64()
			at[merge["parents"].([]any)[1].(string)]["seq"] = json.Number(strings.TrimSpace(string(must(json.Marshal(seq + 100)))))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := bundleLines(t, src, "run-1")
			c.edit(lines)
			b := readLines(t, lines)
			if _, err := b.Verify(ctx, "", replay.Options{}); err == nil {
				t.Fatal("the bundle verifies")
			}
			refusedCleanly(t, b, "run-1")
		})
	}
}

// TestRefusedImportLeavesNothing: a bundle whose root commit cannot be
// recreated (the header's unhashed creation time edited) is refused
// before any blob is written.
func TestRefusedImportLeavesNothing(t *testing.T) {
	src := mOpen(t, t.TempDir())
	mBundleFixture(t, src)
	lines := bundleLines(t, src, "run-1")
	lines[0]["settings"].(map[string]any)["created"] = "2001-01-01T00:00:00Z"
	b := readLines(t, lines)
	if len(b.Blobs()) == 0 {
		t.Fatal("fixture: the bundle carries no blob")
	}
	refusedCleanly(t, b, "run-1")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestBundleRefusesNonCanonicalObjects: a put whose payload is not in
// canonical form (keys out of order, a number written otherwise, a key
// twice), with a content hash computed over those very bytes, fails
// verification: HASHING.md §2 hashes the canonical JSON, so nobody could
// reproduce that content hash from the data.
func TestBundleRefusesNonCanonicalObjects(t *testing.T) {
	for _, raw := range []string{`{"b": 1, "a": 2.50}`, `{"a":1,"a":2}`, `{"a":1.0}`, `{"a":"\u0041"}`} {
		t.Run(raw, func(t *testing.T) {
			ctx := context.Background()
			src := mOpen(t, t.TempDir())
			if _, err := src.CreateContext(ctx, "x", store.ModeObserve); err != nil {
				t.Fatal(err)
			}
			root := mHead(t, src, "x", "main")
			data := []byte(raw)
			h := hashing.ContentHash(data)
			ops := []graph.Op{{Op: graph.OpPut, ID: "n", Type: "note", Version: 1, ContentHash: h}}
			rs, err := graph.LookupRuleset("")
			if err != nil {
				t.Fatal(err)
			}
			st := graph.NewStateFor(rs)
			if _, err := st.ApplyOps(ops); err != nil {
				t.Fatal(err)
			}
			c, err := replay.NewCommit([]hashing.Digest{root.ID}, ops, st.Hash(), "t", "m", "2026-05-06T07:08:10Z")
			if err != nil {
				t.Fatal(err)
			}
			c.Seq = root.Seq + 1
			var buf bytes.Buffer
			bw, err := replay.NewBundleWriter(&buf, replay.BundleHeader{Context: "x", Settings: replay.BundleSettings{Quarantine: "observe", Created: root.Time},
				Branches: []replay.BundleBranch{{Name: "main", Head: c.ID}}, Commits: 2, Objects: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{bw.Commit(root, nil), bw.Commit(c, ops), bw.Object(h, data), bw.Close()} {
				if err != nil {
					t.Fatal(err)
				}
			}
			b, err := replay.ReadBundle(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Verify(ctx, "", replay.Options{}); err == nil || !strings.Contains(err.Error(), "canonical") {
				t.Fatalf("verify: %v", err)
			}
			refusedCleanly(t, b, "x")
		})
	}
}

// TestImportRefusesTheZeroTime: a commit stamped 0001-01-01T00:00:00Z
// verifies (its id covers that string), but the store reads a zero time
// as "use the clock", so it cannot write that commit again. Import must
// refuse such a bundle before writing anything, whether the zero time is
// on the root commit or on a later one.
func TestImportRefusesTheZeroTime(t *testing.T) {
	const zero = "0001-01-01T00:00:00Z"
	ctx := context.Background()
	rs, err := graph.LookupRuleset("")
	if err != nil {
		t.Fatal(err)
	}
	src := mOpen(t, t.TempDir())
	if _, err := src.CreateContext(ctx, "x", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	made := mHead(t, src, "x", "main")
	for _, c := range []struct{ name, rootTime, commitTime string }{
		{"on the root commit", zero, "2026-05-06T07:08:10Z"},
		{"on a later commit", made.Time, zero},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, err := replay.NewCommit(nil, nil, hashing.EmptyContextHash(), made.Author, made.Message, c.rootTime)
			if err != nil {
				t.Fatal(err)
			}
			root.Seq = 1
			blob := []byte("bytes carried along")
			data := []byte(`{"body":"` + hashing.Sum(blob).String() + `"}`)
			h := hashing.ContentHash(data)
			ops := []graph.Op{{Op: graph.OpPut, ID: "n", Type: "note", Version: 1, ContentHash: h}}
			st := graph.NewStateFor(rs)
			if _, err := st.ApplyOps(ops); err != nil {
				t.Fatal(err)
			}
			next, err := replay.NewCommit([]hashing.Digest{root.ID}, ops, st.Hash(), "t", "m", c.commitTime)
			if err != nil {
				t.Fatal(err)
			}
			next.Seq, next.Artifacts = 2, 1
			var buf bytes.Buffer
			bw, err := replay.NewBundleWriter(&buf, replay.BundleHeader{Context: "x",
				Settings: replay.BundleSettings{Quarantine: "observe", Created: c.rootTime},
				Branches: []replay.BundleBranch{{Name: "main", Head: next.ID}}, Commits: 2, Objects: 1, Blobs: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{bw.Commit(root, nil), bw.Commit(next, ops), bw.Object(h, data), bw.Blob(hashing.Sum(blob), blob), bw.Close()} {
				if err != nil {
					t.Fatal(err)
				}
			}
			b, err := replay.ReadBundle(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Verify(ctx, "", replay.Options{}); err != nil {
				t.Fatalf("fixture: the bundle does not verify: %v", err)
			}
			if err := store.CheckBundle(ctx, b, nil); err == nil || !strings.Contains(err.Error(), zero) {
				t.Errorf("CheckBundle: %v, want a refusal naming %s", err, zero)
			}
			refusedCleanly(t, b, "x")
		})
	}
}

// TestImportKeepsTheStoresPruneTime: a pruned line's time is covered by
// no hash. A bundle that lists as pruned a blob this store pruned itself
// must not rewrite when the store says it was pruned: that answer belongs
// to the context whose spill it was.
func TestImportKeepsTheStoresPruneTime(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "run", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	text := []byte("the whole output of a tool")
	d, err := s.PutBlob(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"tool": "t", "model_view": "…", "total_chars": len(text), "truncated": true, "omitted_chars": len(text) - 1, "full_blob": d.String()}
	if _, err := s.Commit(ctx, store.CommitRequest{Context: "run", Author: "gate", Message: "put o",
		Ops: []graph.Op{mPut("o", "tool_output", data)}, Blobs: []hashing.Digest{d}, Spills: []hashing.Digest{d}}); err != nil {
		t.Fatal(err)
	}
	pruned := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if n, err := s.PruneSpills(ctx, pruned.Add(time.Hour), pruned, 0); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	want, ok := s.BlobPruned(ctx, d)
	if !ok || want != hashing.FormatTime(pruned) {
		t.Fatalf("fixture: pruned %v at %q", ok, want)
	}
	lines := bundleLines(t, s, "run")
	edited := false
	for _, l := range lines {
		if l["type"] == "pruned" {
			l["pruned_at"], edited = "2001-02-03T04:05:06Z", true
		}
	}
	if !edited {
		t.Fatal("fixture: the bundle lists no pruned blob")
	}
	if _, err := s.Import(ctx, readLines(t, lines), "copy"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.BlobPruned(ctx, d); got != want {
		t.Fatalf("after the import the store says blob %s was pruned at %q; it pruned it at %q", d.Short(), got, want)
	}
	if _, err := s.GetContextBlob(ctx, "run", d); !errors.Is(err, store.ErrPruned) || !strings.Contains(err.Error(), want) {
		t.Fatalf("the owner's read: %v, want pruned at %s", err, want)
	}
}

// TestBundleRefusesOpsNotInRecordedForm: the ops hash covers a commit's
// ops as its record writes them, and a store records every op resolved:
// a put with its version, a link whose attrs are absent when empty. A
// bundle whose ops are in another form (a put of version 0, attrs "{ }"),
// with every hash computed over that form, replays to the right state but
// names an ops hash no store writes, so no store can write the commit
// again. It fails verification, naming the commit, and import writes
// nothing.
func TestBundleRefusesOpsNotInRecordedForm(t *testing.T) {
	ctx := context.Background()
	rs, err := graph.LookupRuleset("")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"text":"x"}`)
	h := hashing.ContentHash(data)
	put := func(id string, version int64) graph.Op {
		return graph.Op{Op: graph.OpPut, ID: id, Type: "note", Version: version, ContentHash: h}
	}
	for _, c := range []struct {
		name string
		ops  []graph.Op
		// edit turns the bundle's bytes into the form the hashes cover.
		edit func(b []byte) []byte
	}{
		{"a put of version 0", []graph.Op{put("n", 0)}, nil},
		{"attrs written as { }", []graph.Op{put("a", 1), put("b", 1), {Op: graph.OpLink, From: "a", Rel: "derived_from", To: "b", Attrs: []byte("{ }")}},
			func(b []byte) []byte { return bytes.Replace(b, []byte(`"attrs":{}`), []byte(`"attrs":{ }`), 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := mOpen(t, t.TempDir())
			if _, err := src.CreateContext(ctx, "x", store.ModeObserve); err != nil {
				t.Fatal(err)
			}
			root := mHead(t, src, "x", "main")
			st := graph.NewStateFor(rs)
			if _, err := st.ApplyOps(c.ops); err != nil {
				t.Fatal(err)
			}
			next, err := replay.NewCommit([]hashing.Digest{root.ID}, c.ops, st.Hash(), "t", "m", "2026-05-06T07:08:10Z")
			if err != nil {
				t.Fatal(err)
			}
			next.Seq = root.Seq + 1
			var buf bytes.Buffer
			bw, err := replay.NewBundleWriter(&buf, replay.BundleHeader{Context: "x", Settings: replay.BundleSettings{Quarantine: "observe", Created: root.Time},
				Branches: []replay.BundleBranch{{Name: "main", Head: next.ID}}, Commits: 2, Objects: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{bw.Commit(root, nil), bw.Commit(next, c.ops), bw.Object(h, data), bw.Close()} {
				if err != nil {
					t.Fatal(err)
				}
			}
			raw := buf.Bytes()
			if c.edit != nil {
				if raw = c.edit(raw); bytes.Equal(raw, buf.Bytes()) {
					t.Fatal("fixture: the edit changed nothing")
				}
			}
			b, err := replay.ReadBundle(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			var ce *replay.ChainError
			if _, err := b.Verify(ctx, "", replay.Options{}); !errors.As(err, &ce) || ce.Commit != next.ID {
				t.Fatalf("verify: %v, want a broken chain at %s", err, next.ID.Short())
			}
			refusedCleanly(t, b, "x")
		})
	}
}
