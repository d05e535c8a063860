package store

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// onEachDriver runs fn on a new store of each driver the test can reach:
// Badger in a temporary directory, memory, and PostgreSQL (a schema of
// the test's own, emptied at its end) when ARTIFACTD_TEST_POSTGRES names
// a database.
func onEachDriver(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Run("badger", func(t *testing.T) {
		s := openTest(t, t.TempDir())
		defer s.Close()
		fn(t, s)
	})
	t.Run("memory", func(t *testing.T) {
		s, err := Open(context.Background(), Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		ctx := context.Background()
		schema := pgtest.NewSchema(t, dsn, "check_lost")
		drv, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, Options{Driver: drv, Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			_ = drv.Close()
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
}

// lose deletes records through the driver, as a lost write would, and
// drops the cached heads so that the check reads what is stored.
func lose(t *testing.T, s *Store, keys ...[]byte) {
	t.Helper()
	if err := s.kv.Commit(context.Background(), kv.Batch{Deletes: keys}); err != nil {
		t.Fatal(err)
	}
	forgetHeads(s)
}

// checkDefects runs Check and returns its defects.
func checkDefects(t *testing.T, s *Store) []Defect {
	t.Helper()
	rep, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep.Defects
}

// seqShapes is a context with a commit no branch reaches any more (a
// branch reset away from it: left, and its parent below), a merge and two
// branches at one head; healthy, it has no defect.
type seqShapes struct {
	base, below, left, merged, head *replay.Commit
}

func newSeqShapes(t *testing.T, s *Store) seqShapes {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	commit := func(branch, id string) *replay.Commit {
		t.Helper()
		r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: branch, Author: "a", Message: "m", Ops: []graph.Op{notePut(id, 0, id)}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Commit
	}
	var sh seqShapes
	sh.base = commit("main", "q")
	for _, b := range []string{"gone", "side"} {
		if err := s.CreateBranch(ctx, "c", b, sh.base.ID); err != nil {
			t.Fatal(err)
		}
	}
	sh.below = commit("gone", "g1")
	sh.left = commit("gone", "g2")
	// The branch is rolled back: its two commits stay stored, indexed,
	// and reached by no branch.
	if err := s.ResetBranch(ctx, "c", "gone", sh.base.ID); err != nil {
		t.Fatal(err)
	}
	sh.merged = commit("side", "s1")
	commit("main", "q2")
	mr, err := s.Merge(ctx, "c", "main", "side", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sh.head = mr.Commit
	if err := s.CreateBranch(ctx, "c", "twin", sh.head.ID); err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestCheckFindsEveryCommitOutOfTheSeqIndex: every commit record whose
// seq entry is lost is reported, once — also one that is no branch's
// head and no commit's parent (fsck passed it as sound before: the
// commit list, log and export leave it out) — and a healthy context with
// such commits has no defect.
func TestCheckFindsEveryCommitOutOfTheSeqIndex(t *testing.T) {
	cases := []struct {
		name string
		// lost is the commit whose seq entry is lost; want the one
		// finding's kind and id, and what its detail says.
		lost       func(sh seqShapes) *replay.Commit
		kind       string
		id, detail func(sh seqShapes) string
	}{
		{"left by a reset", func(sh seqShapes) *replay.Commit { return sh.left }, "commit",
			func(sh seqShapes) string { return sh.left.ID.String() },
			func(sh seqShapes) string { return "not in the context's seq index" }},
		{"head of two branches", func(sh seqShapes) *replay.Commit { return sh.head }, "ref",
			func(sh seqShapes) string { return DefaultBranch },
			func(sh seqShapes) string {
				return sh.head.ID.Short() + ` of branches "main", "twin" is not in the context's seq index`
			}},
		{"parent of an indexed commit", func(sh seqShapes) *replay.Commit { return sh.below }, "commit",
			func(sh seqShapes) string { return sh.left.ID.String() },
			func(sh seqShapes) string {
				return "its parent " + sh.below.ID.Short() + " is not in the context's seq index"
			}},
		{"second parent of a merge", func(sh seqShapes) *replay.Commit { return sh.merged }, "commit",
			func(sh seqShapes) string { return sh.head.ID.String() },
			func(sh seqShapes) string {
				return "its parent " + sh.merged.ID.Short() + " is not in the context's seq index"
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				sh := newSeqShapes(t, s)
				mustCheck(t, s)
				lost := c.lost(sh)
				lose(t, s, keySeq("c", lost.Seq))
				defects := checkDefects(t, s)
				if len(defects) != 1 {
					t.Fatalf("%d defects, want one: %v", len(defects), defects)
				}
				d := defects[0]
				if d.Kind != c.kind || d.Context != "c" || d.ID != c.id(sh) || !strings.Contains(d.Detail, c.detail(sh)) {
					t.Fatalf("defect %v; want a %s defect of %s saying %q", d, c.kind, c.id(sh), c.detail(sh))
				}
			})
		})
	}
}

// TestCheckPassesACommitIndexedSinceItsScan: a commit record whose seq
// entry appears after Check read the index (another process committing
// to a shared store) is read again, not reported.
func TestCheckPassesACommitIndexedSinceItsScan(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	sh := newSeqShapes(t, s)
	k := &checker{s: s, rep: &CheckReport{}}
	seqOf := map[hashing.Digest]uint64{}
	ids, err := k.seqIndex(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ids {
		if e.id != sh.left.ID {
			seqOf[e.id] = e.seq
		}
	}
	if err := k.unindexed(ctx, "c", seqOf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(k.rep.Defects) != 0 {
		t.Fatalf("defects %v", k.rep.Defects)
	}
}

// verdictOf returns the data of the fetch_verdict the gate records for a
// page fetched with body page.
func verdictOf(t *testing.T, url string, page []byte) map[string]any {
	t.Helper()
	res := gate.Classify(gate.Evidence{URL: url, Status: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: page})
	raw, err := json.Marshal(gate.NewVerdictData(res, gate.FetchedByAgent))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// blobShapes is a marked store (as serve leaves a new one) whose context
// run holds the blobs its gate outputs recorded: a verdict at its head,
// one on a branch reset away from it and a tool output, both by the gate
// path (the commit holds their blobs), and a tool output run's client
// recorded itself, naming a blob only another context holds. Its import
// as copy holds what the bundle carried. Healthy, it has no defect.
type blobShapes struct {
	page, reset hashing.Digest // the two verdicts' bodies
}

func newBlobShapes(t *testing.T, s *Store) blobShapes {
	t.Helper()
	ctx := context.Background()
	if n, err := s.BackfillBlobMembers(ctx); n != 0 || err != nil {
		t.Fatalf("backfill of a new store: %d %v", n, err)
	}
	for _, id := range []string{"run", "other"} {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(branch string, op graph.Op, held ...hashing.Digest) *replay.Commit {
		t.Helper()
		r, err := s.Commit(ctx, CommitRequest{Context: "run", Branch: branch, Author: "gate", Message: "put " + op.ID, Ops: []graph.Op{op}, Blobs: held})
		if err != nil {
			t.Fatal(err)
		}
		return r.Commit
	}
	store := func(data string) hashing.Digest {
		t.Helper()
		d, err := s.PutBlob(ctx, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	var sh blobShapes
	page, reset := `{"price":3,"currency":"EUR"}`, `{"price":4,"currency":"EUR"}`
	sh.page, sh.reset = store(page), store(reset)
	base := commit(DefaultBranch, put("f", "fetch_verdict", verdictOf(t, "https://example.org/p", []byte(page))), sh.page)
	full := store("the whole output of a tool")
	commit(DefaultBranch, put("o", "tool_output", map[string]any{"model_view": "the whole…", "full_blob": full.String()}), full)
	if err := s.CreateBranch(ctx, "run", "try", base.ID); err != nil {
		t.Fatal(err)
	}
	commit("try", put("f2", "fetch_verdict", verdictOf(t, "https://example.org/q", []byte(reset))), sh.reset)
	if err := s.ResetBranch(ctx, "run", "try", base.ID); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.Export(ctx, "run", "", &buf); err != nil {
		t.Fatal(err)
	}
	b, err := replay.ReadBundle(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, b, "copy"); err != nil {
		t.Fatal(err)
	}
	secret, err := s.PutContextBlob(ctx, "other", []byte("other's bytes"))
	if err != nil {
		t.Fatal(err)
	}
	commit(DefaultBranch, put("mine", "tool_output", map[string]any{"model_view": "my own record", "full_blob": secret.String()}))
	return sh
}

// TestCheckFindsALostBlobMembership: a context that no longer holds a
// blob one of its fetch verdicts names — at a branch head or in a commit
// no branch reaches — is reported once, naming the context and the blob
// (fsck said ok, and the context could no longer read the bytes its
// verdict was judged from); a healthy store of that shape has no defect.
func TestCheckFindsALostBlobMembership(t *testing.T) {
	for _, c := range []struct {
		name string
		lost func(sh blobShapes) hashing.Digest
		// verdict is the artifact the finding names.
		verdict string
	}{
		{"verdict at the head", func(sh blobShapes) hashing.Digest { return sh.page }, `fetch_verdict "f"`},
		{"verdict of a reset branch", func(sh blobShapes) hashing.Digest { return sh.reset }, `fetch_verdict "f2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				sh := newBlobShapes(t, s)
				mustCheck(t, s)
				d := c.lost(sh)
				lose(t, s, keyBlobMember("run", d))
				defects := checkDefects(t, s)
				if len(defects) != 1 {
					t.Fatalf("%d defects, want one: %v", len(defects), defects)
				}
				if f := defects[0]; f.Kind != "blob" || f.Context != "run" || f.ID != d.String() ||
					!strings.Contains(f.Detail, c.verdict) || !strings.Contains(f.Detail, "does not hold") {
					t.Fatalf("defect %v; want a blob defect of run naming %s and the %s", f, d, c.verdict)
				}
			})
		})
	}
}

// TestCheckExpectsMembershipsOnceBackfilled: a store written before
// contexts held blobs (its verdict's context holds no blob, and the store
// is not marked) has no defect, nor after an upgrade of its format; once
// the backfill has run, a lost membership is reported.
func TestCheckExpectsMembershipsOnceBackfilled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	asBeforeMemberships(t, s)
	if _, err := s.CreateContext(ctx, "run", ModeObserve); err != nil {
		t.Fatal(err)
	}
	page := []byte(`{"price":3,"currency":"EUR"}`)
	pd, err := s.PutBlob(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "run", put("f", "fetch_verdict", verdictOf(t, "https://example.org/p", page)))
	mustCheck(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade(t, dir, formatUnindexed, "run")
	s = openTest(t, dir)
	defer s.Close()
	mustCheck(t, s)
	if n, err := s.BackfillBlobMembers(ctx); n != 1 || err != nil {
		t.Fatalf("backfill: %d %v", n, err)
	}
	mustCheck(t, s)
	lose(t, s, keyBlobMember("run", pd))
	defects := checkDefects(t, s)
	if len(defects) != 1 || defects[0].Kind != "blob" || defects[0].Context != "run" || defects[0].ID != pd.String() {
		t.Fatalf("defects %v; want one naming run's blob %s", defects, pd)
	}
}

// TestCheckReportsALostHeldBlobOnce: the lost bytes of a blob that a
// verdict at a branch head names are reported once for each context that
// holds them, on its membership, and not a second time on the verdict.
func TestCheckReportsALostHeldBlobOnce(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		sh := newBlobShapes(t, s)
		mustCheck(t, s)
		lose(t, s, keyBlob(sh.page))
		defects := checkDefects(t, s)
		holders := map[string]bool{}
		for _, d := range defects {
			if d.Kind != "blob" || d.ID != sh.page.String() || !strings.Contains(d.Detail, "not stored") {
				t.Errorf("defect %v; want only the memberships of %s naming bytes not stored", d, sh.page)
			}
			holders[d.Context] = true
		}
		if len(defects) != 2 || !holders["run"] || !holders["copy"] {
			t.Fatalf("defects %v; want one for run and one for copy (its import)", defects)
		}
	})
}

// spillOutput records, as the tool-results path does, a tool output or
// error (typ) of context ctxID on branch whose full text was cut for the
// model's view: the bytes stored first, then the artifact committed with
// the context coming to hold them and the spill noted (CommitRequest's
// Blobs and Spills). It returns the blob's digest.
func spillOutput(t *testing.T, s *Store, ctxID, branch, id, typ, text string) hashing.Digest {
	t.Helper()
	ctx := context.Background()
	d, err := s.PutBlob(ctx, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"tool": "t", "model_view": "…", "total_chars": len(text), "truncated": true, "full_blob": d.String()}
	if typ == "tool_error" {
		data["spilled"] = true
	} else {
		data["omitted_chars"] = len(text) - 1
	}
	if _, err := s.Commit(ctx, CommitRequest{Context: ctxID, Branch: branch, Author: "gate", Message: "put " + id,
		Ops: []graph.Op{put(id, typ, data)}, Blobs: []hashing.Digest{d}, Spills: []hashing.Digest{d}}); err != nil {
		t.Fatal(err)
	}
	return d
}

// unheldAs fails unless context ctxID does not hold blob d, and d is
// stored and pruned as stored and pruned say: the state a case must
// reach for its check to mean anything.
func unheldAs(t *testing.T, s *Store, ctxID string, d hashing.Digest, stored, pruned bool) {
	t.Helper()
	ctx := context.Background()
	held, err := s.BlobMember(ctx, ctxID, d)
	if err != nil || held {
		t.Fatalf("context %q holds blob %s: %v %v", ctxID, d.Short(), held, err)
	}
	has, err := s.HasBlob(ctx, d)
	if err != nil || has != stored {
		t.Fatalf("blob %s stored: %v %v, want %v", d.Short(), has, err, stored)
	}
	if _, p := s.BlobPruned(ctx, d); p != pruned {
		t.Fatalf("blob %s pruned: %v, want %v", d.Short(), p, pruned)
	}
}

// TestCheckExpectsNoToolOutputMembership: fsck does not expect a tool
// output's or error's blob (a spilled output's full text) to be held by
// its context, as it does a fetch verdict's — not because the gate path
// leaves it unheld (it holds it with the output's commit, an import holds
// what its bundle carries, the backfill what older stores' gate outputs
// name), but because two ways of writing leave such a blob unheld on
// purpose, neither stored nor pruned apart from another context's use: a
// client's own put of a tool output naming any digest, and an import of a
// bundle listing as pruned a blob this store keeps for another context.
// Nothing stored tells either from a lost membership, so fsck reporting
// one would report these healthy stores; with spilled outputs healthy,
// pruned, or in a store not yet marked, it reports nothing either.
func TestCheckExpectsNoToolOutputMembership(t *testing.T) {
	ctx := context.Background()
	newContexts := func(t *testing.T, s *Store, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T, s *Store)
	}{
		{"spilled outputs, healthy", func(t *testing.T, s *Store) {
			newContexts(t, s, "run")
			out := spillOutput(t, s, "run", DefaultBranch, "o", "tool_output", "the whole output of a tool")
			head, err := s.Resolve(ctx, "run", DefaultBranch)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CreateBranch(ctx, "run", "try", head.ID); err != nil {
				t.Fatal(err)
			}
			spillOutput(t, s, "run", "try", "e", "tool_error", "the whole error of a tool")
			if err := s.ResetBranch(ctx, "run", "try", head.ID); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := s.Export(ctx, "run", "", &buf); err != nil {
				t.Fatal(err)
			}
			b, err := replay.ReadBundle(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, b, "copy"); err != nil {
				t.Fatal(err)
			}
			if held, err := s.BlobMember(ctx, "copy", out); !held || err != nil {
				t.Fatalf("the import does not hold the spilled output it carried: %v %v", held, err)
			}
		}},
		{"spilled output pruned, its membership lost", func(t *testing.T, s *Store) {
			newContexts(t, s, "run")
			d := spillOutput(t, s, "run", DefaultBranch, "o", "tool_output", "the whole output of a tool")
			at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
			if n, err := s.PruneSpills(ctx, at, at, 0); n != 1 || err != nil {
				t.Fatalf("prune: %d %v", n, err)
			}
			lose(t, s, keyBlobMember("run", d))
			unheldAs(t, s, "run", d, false, true)
		}},
		{"store not marked", func(t *testing.T, s *Store) {
			asBeforeMemberships(t, s)
			newContexts(t, s, "run")
			d, err := s.PutBlob(ctx, []byte("the whole output of a tool"))
			if err != nil {
				t.Fatal(err)
			}
			// As a store written before contexts held blobs did.
			mustCommit(t, s, "run", put("o", "tool_output", map[string]any{"model_view": "…", "full_blob": d.String()}))
			unheldAs(t, s, "run", d, true, false)
		}},
		{"a client's own tool output naming another context's blob", func(t *testing.T, s *Store) {
			newContexts(t, s, "run", "other")
			d := spillOutput(t, s, "other", DefaultBranch, "o", "tool_output", "other's output")
			// What a client's plain put of a tool_output writes: the
			// artifact alone, its context holding nothing new.
			mustCommit(t, s, "run", put("mine", "tool_output", map[string]any{"model_view": "…", "full_blob": d.String()}))
			unheldAs(t, s, "run", d, true, false)
		}},
		{"an import listing as pruned a blob another context holds", func(t *testing.T, s *Store) {
			// The bundle comes from a store that pruned the spill.
			src, err := Open(ctx, Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			newContexts(t, src, "run")
			text := "the whole output of a tool"
			d := spillOutput(t, src, "run", DefaultBranch, "o", "tool_output", text)
			at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
			if n, err := src.PruneSpills(ctx, at, at, 0); n != 1 || err != nil {
				t.Fatalf("prune: %d %v", n, err)
			}
			var buf bytes.Buffer
			h, err := src.Export(ctx, "run", "", &buf)
			if err != nil || h.Pruned != 1 {
				t.Fatalf("export: %d pruned, %v", h.Pruned, err)
			}
			b, err := replay.ReadBundle(&buf)
			if err != nil {
				t.Fatal(err)
			}
			// Here the same bytes are another context's: they stay its.
			newContexts(t, s, "other")
			if _, err := s.PutContextBlob(ctx, "other", []byte(text)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, b, "copy"); err != nil {
				t.Fatal(err)
			}
			unheldAs(t, s, "copy", d, true, false)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				c.build(t, s)
				forgetHeads(s)
				mustCheck(t, s)
			})
		})
	}
}
