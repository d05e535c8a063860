package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// TestLazyHeadReadsAsWhole: a head opened over its state map after a
// restart reads exactly as the same state loaded whole (View.Whole) —
// hash, sizes, artifacts, edges both ways, trust — and an audit through
// it gives the report an audit of the whole state gives.
func TestLazyHeadReadsAsWhole(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	ops = append(ops, put("src", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/a"}))
	for i := range 300 {
		id := fmt.Sprintf("s%03d", i)
		ops = append(ops, put(id, "claim", map[string]any{"i": i, "url": "https://example.test/" + id}))
		switch {
		case i == 0:
			ops = append(ops, link(id, "derived_from", "src"))
		default:
			ops = append(ops, link(id, "derived_from", fmt.Sprintf("s%03d", i-1)))
		}
		if i%7 == 3 {
			ops = append(ops, link(id, "mentions", "src"))
		}
	}
	mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", graph.Op{Op: graph.OpUnlink, From: "s150", Rel: "derived_from", To: "s149"})
	s.Close()
	s = openTest(t, dir)
	defer s.Close()
	if err := s.Read(ctx, "c", "", func(v *View) error {
		if !v.State.IsLazy() {
			return fmt.Errorf("a head of format 3 was loaded whole")
		}
		w, err := v.Whole(ctx)
		if err != nil {
			return err
		}
		if w.State.IsLazy() || w.State.Hash() != v.State.Hash() {
			return fmt.Errorf("whole view: lazy %v, hash %s vs %s", w.State.IsLazy(), w.State.Hash().Short(), v.State.Hash().Short())
		}
		dump := func(st *graph.State, tr *graph.TrustIndex) string {
			out := fmt.Sprintf("%d %d %d %+v\n", st.NumArtifacts(), st.NumEdges(), st.NumTombstones(), tr.Summary())
			for _, a := range st.Artifacts() {
				out += fmt.Sprintf("%s %s v%d %s in=%d out=%d %s\n", a.ID, a.Type, a.Version, tr.Status(a.ID), len(st.In(a.ID)), len(st.Out(a.ID)), st.Dependents(a.ID))
			}
			return out
		}
		if got, want := dump(v.State, v.Trust), dump(w.State, w.Trust); got != want {
			return fmt.Errorf("the lazy head shows\n%.2000s\nthe whole state\n%.2000s", got, want)
		}
		lazy, err := graph.Audit(v.State, "s299", v.Trust.Explainer(v.State), v.DataOf(ctx), graph.AuditMeta{})
		if err != nil {
			return err
		}
		whole, err := graph.Audit(w.State, "s299", w.Trust.Explainer(w.State), w.DataOf(ctx), graph.AuditMeta{})
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(lazy, whole) || len(lazy.Artifacts) != 150 {
			return fmt.Errorf("audits differ (%d and %d artifacts)", len(lazy.Artifacts), len(whole.Artifacts))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// reopenedDerived returns a store, opened afresh, holding context "c"
// (observe mode) of n claims named by format idFmt, claim i > 0
// derived_from claim from(i), and then extra, in one commit: its head is
// opened over its map, with nothing of it cached.
func reopenedDerived(t *testing.T, n int, idFmt string, from func(i int) int, extra ...graph.Op) *Store {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(context.Background(), "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range n {
		ops = append(ops, put(fmt.Sprintf(idFmt, i), "claim", map[string]any{"i": i}))
		if i > 0 {
			ops = append(ops, link(fmt.Sprintf(idFmt, i), "derived_from", fmt.Sprintf(idFmt, from(i))))
		}
	}
	mustCommit(t, s, "c", append(ops, extra...)...)
	s.Close()
	return openTest(t, dir)
}

// TestReadAheadBigCommit: a commit of hundreds of ops onto a head opened
// over its map (its lookups read ahead) decides and writes what the same
// commit decides on the state loaded whole: the same context hash, an
// index that checks, a refusal where the whole state refuses — with its
// keys read ahead at once, and with most of them read in parts while it
// is decided (aheadPart).
func TestReadAheadBigCommit(t *testing.T) {
	for _, part := range []int{aheadPart, 100} {
		t.Run(fmt.Sprintf("part %d", part), func(t *testing.T) { testReadAheadBigCommit(t, part) })
	}
}

func testReadAheadBigCommit(t *testing.T, part int) {
	ctx := context.Background()
	s := reopenedDerived(t, 3000, "a%04d", func(i int) int { return (i*7919 + 13) % i })
	defer s.Close()
	s.aheadPart = part
	var next []graph.Op
	for i := range 300 {
		id := fmt.Sprintf("b%04d", i)
		next = append(next, put(id, "claim", map[string]any{"i": i}), link(id, "derived_from", fmt.Sprintf("a%04d", (i*104729)%3000)))
	}
	next = append(next, put("a0000", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/0"}))
	var want *graph.State
	if err := s.Read(ctx, "c", "", func(v *View) error {
		if v.State.Source() == nil {
			return fmt.Errorf("the head was loaded whole")
		}
		w, err := v.Whole(ctx)
		if err != nil {
			return err
		}
		want = w.State.Clone()
		_, err = want.ApplyOps(next)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, s, "c", next...)
	if c.ContextHash != want.Hash() {
		t.Fatalf("the commit's context hash %s, the whole state's %s", c.ContextHash.Short(), want.Hash().Short())
	}
	cs, err := s.ctxState("c")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.loadState(context.Background(), s, cs.info, c, prefetchWorkers)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.checkIndex(ctx, "c", c, st); err != nil {
		t.Fatal(err)
	}
	if c.Index.Quarantined == 0 {
		t.Fatal("the failed fetch quarantined nothing")
	}
	// A link that closes a cycle is refused on the head as on the whole state.
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Author: "t", Message: "m", Ops: append(next[:130:130], link("a0000", "derived_from", "b0001"))}); err == nil {
		t.Fatal("a cycle through a big commit was accepted")
	}
	mustCheck(t, s)
}

// TestAuditReadsLittleThroughTheMap: on a head opened over its map, an
// audit of an artifact whose provenance is a small share of the state is
// taken through the map (the view it returns is the lazy one), one whose
// provenance is large on the state loaded whole; both reports equal the
// audit of the whole state, trust (a quarantined branch) and sources
// included.
func TestAuditReadsLittleThroughTheMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	const n, chain = 20_000, 2_000
	tree := func(i int) string { return fmt.Sprintf("t%05d", i) }
	step := func(i int) string { return fmt.Sprintf("c%04d", i) }
	var ops []graph.Op
	ops = append(ops, put("src", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/src"}))
	// A binary tree: t(i) derives from t(i/2), and t05000 from a failed
	// fetch too.
	for i := range n {
		ops = append(ops, put(tree(i), "claim", map[string]any{"i": i, "url": "https://example.test/" + tree(i)}))
		if i > 0 {
			ops = append(ops, graph.Op{Op: graph.OpLink, From: tree(i), Rel: "derived_from", To: tree(i / 2)})
		}
	}
	ops = append(ops, graph.Op{Op: graph.OpLink, From: tree(5_000), Rel: "derived_from", To: "src"})
	// A chain hanging from the tree's root: its tip rests on more than
	// a 64th of the state.
	for i := range chain {
		ops = append(ops, put(step(i), "claim", map[string]any{"i": i}))
		to := tree(0)
		if i > 0 {
			to = step(i - 1)
		}
		ops = append(ops, graph.Op{Op: graph.OpLink, From: step(i), Rel: "derived_from", To: to})
	}
	mustCommit(t, s, "c", ops...)
	s.Close()
	s = openTest(t, dir)
	defer s.Close()
	for _, tc := range []struct {
		id          string
		lazy        bool
		size        int
		quarantined bool
	}{
		{tree(10_001), true, 16, true},
		{tree(19_999), true, 16, false},
		{step(chain - 1), false, chain + 1, false},
	} {
		if err := s.Read(ctx, "c", "", func(v *View) error {
			if !v.State.IsLazy() {
				return fmt.Errorf("a head of format 3 was loaded whole")
			}
			got, w, err := v.Audit(ctx, tc.id)
			if err != nil {
				return err
			}
			if w.State.IsLazy() != tc.lazy {
				return fmt.Errorf("audit of %s: view lazy %v, want %v", tc.id, w.State.IsLazy(), tc.lazy)
			}
			whole, err := v.Whole(ctx)
			if err != nil {
				return err
			}
			want, err := graph.Audit(whole.State, tc.id, whole.Trust.Explainer(whole.State), whole.DataOf(ctx), got.AuditMeta)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("audit of %s differs from the whole state's (%d and %d artifacts)", tc.id, len(got.Artifacts), len(want.Artifacts))
			}
			if len(got.Artifacts) != tc.size || (got.Trust.Status == graph.StatusQuarantined) != tc.quarantined || len(got.Sources) == 0 {
				return fmt.Errorf("audit of %s: %d artifacts, trust %s, %d sources", tc.id, len(got.Artifacts), got.Trust.Status, len(got.Sources))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadAtOldCommitThroughTheMap: a read at a commit that is not a
// branch head, whose state does not fit the old-state cache, goes through
// its state map — the view is lazy — and shows what the same commit
// loaded whole shows: artifacts, edges both ways, trust (a branch
// quarantined at that commit and freed later), counts; its hash, asked
// for, is the commit's context hash. An audit at it whose provenance is
// small stays lazy too. With room in the cache the same read loads the
// state whole, as before. A node of the map gone fails the read.
func TestReadAtOldCommitThroughTheMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// 1 MiB of caches leaves the old-state cache 157 KB: less than the
	// fixture's state (about 280 KB by stateCost).
	open := func() *Store {
		s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), CacheBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	defer func() { s.Close() }()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	ops = append(ops, put("src", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/a"}))
	for i := range 400 {
		id := fmt.Sprintf("s%03d", i)
		ops = append(ops, put(id, "claim", map[string]any{"i": i}))
		to := "src"
		if i > 0 {
			to = fmt.Sprintf("s%03d", i/3)
		}
		ops = append(ops, link(id, "derived_from", to))
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("src", "fetch_verdict", map[string]any{"verdict": "RETRIEVED", "url": "https://example.test/a"}),
		graph.Op{Op: graph.OpUnlink, From: "s150", Rel: "derived_from", To: "s050"},
		graph.Op{Op: graph.OpUnlink, From: "s399", Rel: "derived_from", To: "s133"}, graph.Op{Op: graph.OpDelete, ID: "s399"})
	dump := func(v *View) string {
		st, tr := v.State, v.Trust
		out := fmt.Sprintf("%d %d %d %+v\n", st.NumArtifacts(), st.NumEdges(), st.NumTombstones(), tr.Summary())
		for _, a := range st.Artifacts() {
			out += fmt.Sprintf("%s %s v%d %s in=%d out=%d %v\n", a.ID, a.Type, a.Version, tr.Status(a.ID), len(st.In(a.ID)), len(st.Out(a.ID)), st.Dependents(a.ID))
		}
		return out
	}
	var want string
	if err := s.ReadCommit(ctx, "c", old, func(v *View) error {
		if v.State.IsLazy() {
			return fmt.Errorf("ReadCommit gave a lazy state")
		}
		want = dump(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, "s399 claim v1 quarantined") || commitStateCost(old) <= s.states.Max() {
		t.Fatalf("the fixture is not what the test needs:\n%.500s", want)
	}
	if err := s.Read(ctx, "c", old.ID.String(), func(v *View) error {
		if !v.State.IsLazy() {
			return fmt.Errorf("a read at an old commit loaded its state whole")
		}
		if got := dump(v); got != want {
			return fmt.Errorf("through the map:\n%.1500s\nloaded whole:\n%.1500s", got, want)
		}
		rep, w, err := v.Audit(ctx, "s100")
		if err != nil {
			return err
		}
		if w != v || rep.Trust.Status != graph.StatusQuarantined || len(rep.Artifacts) != 7 {
			return fmt.Errorf("audit at the old commit: lazy %v, trust %s, %d artifacts", w == v, rep.Trust.Status, len(rep.Artifacts))
		}
		if h := v.State.Hash(); h != old.ContextHash {
			return fmt.Errorf("hash %s, the commit records %s", h.Short(), old.ContextHash.Short())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// With the default budget the old commit fits the old-state cache:
	// loaded whole, as before.
	s.Close()
	s = openTest(t, dir)
	if err := s.Read(ctx, "c", old.ID.String(), func(v *View) error {
		if v.State.IsLazy() {
			return fmt.Errorf("a small old commit was read through its map")
		}
		if got := dump(v); got != want {
			return fmt.Errorf("loaded whole:\n%.1500s\nwant:\n%.1500s", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A node of the old map gone (the leaf that holds s399, or its edge
	// to s133, neither of which the head still has): the read that meets
	// it — a point read, the batched lookup of the edges into s133 —
	// fails as corruption, and the store says so; so does opening a view
	// whose root is gone.
	leafOf := func(key []byte) hashing.Digest {
		id := old.Root
		for {
			n, err := s.node(id)
			if err != nil {
				t.Fatal(err)
			}
			if n.leaf {
				return id
			}
			id = n.children[keyNibble(key, n.depth)].id
		}
	}
	artifact := func(v *View) error {
		if v.State.Artifact("s399") != nil {
			return fmt.Errorf("read s399 from a node that is gone")
		}
		return nil
	}
	for _, tc := range []struct {
		gone hashing.Digest
		read func(v *View) error
	}{
		{leafOf(tkArtifact("s399")), artifact},
		{leafOf(tkEdge(graph.EdgeKey{From: "s399", Rel: "derived_from", To: "s133"})), func(v *View) error {
			if n := len(v.State.In("s133")); n != 0 {
				return fmt.Errorf("%d edges into s133 read from a node that is gone", n)
			}
			return nil
		}},
		{old.Root, artifact},
	} {
		gone := tc.gone
		s.Close()
		s = open()
		if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{keyNode(gone)}}); err != nil {
			t.Fatal(err)
		}
		err := s.Read(ctx, "c", old.ID.String(), tc.read)
		if !errors.Is(err, ErrCorrupt) || s.Health() == nil {
			t.Fatalf("node %s gone: read error %v, health %v", gone.Short(), err, s.Health())
		}
	}
}

// TestHeadReadFailureReloadsHead: a read of a branch head opened over
// its map that meets a node it cannot read fails as corruption, and the
// head is dropped, so once the node is back the next read loads the head
// afresh and succeeds — a head whose map source had failed would keep
// failing every read.
func TestHeadReadFailureReloadsHead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 400 {
		ops = append(ops, put(fmt.Sprintf("s%03d", i), "claim", map[string]any{"i": i}))
	}
	head := mustCommit(t, s, "c", ops...)
	s.Close()
	s = openTest(t, dir)
	defer func() { s.Close() }()
	// The head in memory, over its map, read at s000's leaf only.
	if err := s.Read(ctx, "c", "main", func(v *View) error {
		if !v.State.IsLazy() || v.State.Artifact("s000") == nil {
			return fmt.Errorf("the head is not read over its map")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The leaf holding s399, found without caching it.
	id := head.Root
	var raw []byte
	for {
		v, err := s.kv.Get(ctx, keyNode(id))
		if err != nil {
			t.Fatal(err)
		}
		n, err := decodeNode(v)
		if err != nil {
			t.Fatal(err)
		}
		if n.leaf {
			raw = v
			break
		}
		id = n.children[keyNibble(tkArtifact("s399"), n.depth)].id
	}
	if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{keyNode(id)}}); err != nil {
		t.Fatal(err)
	}
	s.nodes.clear() // the head's open read it
	read := func(v *View) error {
		if !v.State.IsLazy() {
			return fmt.Errorf("the head is not read over its map")
		}
		if v.State.Artifact("s399") == nil {
			return fmt.Errorf("s399 not found")
		}
		return nil
	}
	if err := s.Read(ctx, "c", "main", read); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read with the leaf gone: %v, want ErrCorrupt", err)
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyNode(id), Value: raw}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Read(ctx, "c", "main", read); err != nil {
		t.Fatalf("read with the leaf back: %v", err)
	}
}

// TestReadSparseLoadsNothingWhole: ReadSparse at an old commit whose
// state fits the old-state cache reads through the commit's map and
// leaves the cache as it was, where ReadAt loads that state whole and
// caches it; once it is cached, ReadSparse reads the cached state. Each
// sees the same entries.
func TestReadSparseLoadsNothingWhole(t *testing.T) {
	ctx := context.Background()
	s := openWithContext(t, Options{})
	var ops []graph.Op
	for i := range 50 {
		ops = append(ops, put(fmt.Sprintf("a%02d", i), "claim", map[string]any{"i": i}))
		if i > 0 {
			ops = append(ops, link(fmt.Sprintf("a%02d", i), "derived_from", fmt.Sprintf("a%02d", i-1)))
		}
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("a00", "claim", map[string]any{"i": -1}),
		graph.Op{Op: graph.OpUnlink, From: "a49", Rel: "derived_from", To: "a48"}, graph.Op{Op: graph.OpDelete, ID: "a49"})
	if commitStateCost(old) > s.states.Max() {
		t.Fatalf("the fixture's state (%d) does not fit the old-state cache (%d)", commitStateCost(old), s.states.Max())
	}
	look := func(v *View) (string, error) {
		a, b := v.State.Artifact("a00"), v.State.Artifact("a49")
		if a == nil || b == nil {
			return "", fmt.Errorf("a00 %v, a49 %v at the old commit", a, b)
		}
		return fmt.Sprintf("%s v%d %x %s %d", a.ID, a.Version, a.ContentHash[:4], b.ID, len(v.State.In("a10"))), nil
	}
	read := func(name string, rd func(context.Context, string, *replay.Commit, func(*View) error) error, lazy bool) string {
		t.Helper()
		var got string
		if err := rd(ctx, "c", old, func(v *View) error {
			if v.State.IsLazy() != lazy {
				return fmt.Errorf("lazy %v, want %v", v.State.IsLazy(), lazy)
			}
			var err error
			got, err = look(v)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return got
	}
	sparse := read("ReadSparse, nothing cached", s.ReadSparse, true)
	if n := s.states.Size(); n != 0 {
		t.Fatalf("ReadSparse filled the old-state cache: %d bytes", n)
	}
	whole := read("ReadAt", s.ReadAt, false)
	if s.states.Size() == 0 {
		t.Fatal("ReadAt of a small old state did not cache it")
	}
	cached := read("ReadSparse, cached", s.ReadSparse, false)
	if sparse != whole || cached != whole {
		t.Fatalf("ReadSparse %q, ReadAt %q, ReadSparse once cached %q", sparse, whole, cached)
	}
}

// TestOldCommitWalkStopsWithItsRead: a view at an old commit read over
// its map walks the map for the context hash's leaves only when asked,
// under the read's context. Asked after the context ended, the read fails
// with the context's error — not noted as corruption, and without a
// warning that the commit's leaf checkpoint is unreadable (the state is
// big enough to look for one); a read whose context ended before it began
// fails the same way; a read of the branch head whose context ends while
// it reads is not affected (a head outlives its reads); asked with the
// context live, the hash is the commit's.
func TestOldCommitWalkStopsWithItsRead(t *testing.T) {
	ctx := context.Background()
	var logs lockedBuffer
	s := openWithContext(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var ops []graph.Op
	for i := range leafCheckpointMin + 100 {
		ops = append(ops, put(fmt.Sprintf("a%05d", i), "claim", map[string]any{"i": i}))
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("a00000", "claim", map[string]any{"i": -1}))
	if !wantsCheckpoint(old) {
		t.Fatal("the fixture is too small to look for a leaf checkpoint")
	}
	cancelled := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: %v, want context.Canceled", name, err)
		}
		if err := s.Health(); err != nil {
			t.Fatalf("%s: noted as corruption: %v", name, err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	err := s.ReadSparse(rctx, "c", old, func(v *View) error {
		if !v.State.IsLazy() {
			return fmt.Errorf("the view is not over the map")
		}
		cancel()
		_ = v.State.Hash()
		return nil
	})
	cancelled("hash asked after the read's context ended", err)
	if strings.Contains(logs.String(), "checkpoint") {
		t.Fatalf("a cancelled read logged about the leaf checkpoint:\n%s", logs.String())
	}
	cancelled("a read whose context ended before it", s.ReadSparse(rctx, "c", old, func(v *View) error { return nil }))
	hctx, hcancel := context.WithCancel(ctx)
	if err := s.Read(hctx, "c", "main", func(v *View) error {
		hcancel()
		if a := v.State.Artifact("a00042"); a == nil || v.State.NumArtifacts() != len(ops) {
			return fmt.Errorf("the head after its read's context ended: a00042 %v, %d artifacts", a, v.State.NumArtifacts())
		}
		var n int
		for range v.State.Artifacts() {
			n++
		}
		if n != len(ops) {
			return fmt.Errorf("a walk of the head after its read's context ended met %d of %d artifacts", n, len(ops))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got hashing.Digest
	if err := s.ReadSparse(ctx, "c", old, func(v *View) error { got = v.State.Hash(); return nil }); err != nil {
		t.Fatal(err)
	}
	if got != old.ContextHash {
		t.Fatalf("hash %s, the commit records %s", got, old.ContextHash)
	}
}

// TestOldCommitWalkStopsAtItsNextWindow: a walk of an old commit's map
// bigger than one scan window stops at the next window once its read's
// context ends, and the read fails with the context's error.
func TestOldCommitWalkStopsAtItsNextWindow(t *testing.T) {
	ctx := context.Background()
	s := openWithContext(t, Options{NoSync: true})
	const n = scanWindow + 7_232
	ops := make([]graph.Op, 0, n)
	for i := range n {
		ops = append(ops, put(fmt.Sprintf("a%05d", i), "claim", map[string]any{}))
	}
	old := mustCommit(t, s, "c", ops...)
	mustCommit(t, s, "c", put("z", "claim", map[string]any{}))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var met int
	err := s.ReadSparse(rctx, "c", old, func(v *View) error {
		v.State.RangeArtifacts(func(*graph.Artifact) bool {
			if met++; met == 1 {
				cancel()
			}
			return true
		})
		return nil
	})
	if !errors.Is(err, context.Canceled) || met == 0 || met > scanWindow {
		t.Fatalf("a walk of %d artifacts cancelled at the first: met %d (at most one window, %d), err %v", n, met, scanWindow, err)
	}
}

// openWithContext opens a store in a new directory with opts (a test
// clock unless opts has one), closed when the test ends, holding context
// "c" (observe).
func openWithContext(t *testing.T, opts Options) *Store {
	t.Helper()
	opts.Dir = t.TempDir()
	if opts.Clock == nil {
		opts.Clock = testClock()
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(context.Background(), "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s
}

// lockedBuffer is a log sink the store's goroutines may write while a
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestNodeReadAfreshPastAStaleView: the driver may serve a node from a
// view taken a moment earlier (kv.GetSame). A node damaged, seen so in
// that view, and then put back right is read afresh when its check
// fails, not reported as corruption.
func TestNodeReadAfreshPastAStaleView(t *testing.T) {
	ctx := context.Background()
	s := openWithContext(t, Options{})
	var ops []graph.Op
	for i := range 50 {
		ops = append(ops, put(fmt.Sprintf("s%03d", i), "claim", map[string]any{"i": i}))
	}
	head := mustCommit(t, s, "c", ops...)
	key := keyNode(head.Root)
	good, err := s.kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := append(bytes.Clone(good), 'x')
	set := func(v []byte) {
		t.Helper()
		if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: key, Value: v}}}); err != nil {
			t.Fatal(err)
		}
	}
	stale := false
	for attempt := 0; attempt < 20 && !stale; attempt++ {
		set(bad)
		// A delete drops the driver's view; the next read asks for a new
		// one, which holds the damaged node.
		if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{[]byte("unrelated")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.GetSame(ctx, s.kv, [][]byte{key}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		set(good)
		vals, err := kv.GetSame(ctx, s.kv, [][]byte{key})
		if err != nil {
			t.Fatal(err)
		}
		stale = bytes.Equal(vals[0], bad)
	}
	if !stale {
		t.Fatal("the driver never served the damaged node from an earlier view; the test checks nothing")
	}
	s.nodes.clear()
	n, err := s.node(head.Root)
	if err != nil {
		t.Fatalf("a node put back right, read through a view that holds it damaged: %v", err)
	}
	if n.leaf || len(n.children) == 0 {
		t.Fatalf("root node %+v", n)
	}
}

// TestLookupMemoAnswersAsTheMap: while the lookups of a request whose
// paths spread over the map are read ahead, the map keeps what they
// found — present entries and absent ones — and answers again with
// exactly what a walk of the trie finds, also to readers on other
// goroutines; it keeps no more than its room, done drops it, and a
// request whose lookups all walk the same few nodes gets no memo.
func TestLookupMemoAnswersAsTheMap(t *testing.T) {
	ctx := context.Background()
	s := reopenedDerived(t, 400, "a%03d", func(i int) int { return (i * 31) % i },
		put("bad", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/0"}),
		link("a001", "derived_from", "bad"))
	defer s.Close()
	var m *mapSource
	if err := s.Read(ctx, "c", "", func(v *View) error {
		m, _ = v.State.Source().(*mapSource)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if m == nil {
		t.Fatal("the head was loaded whole, not over its map")
	}
	var keys [][]byte
	for i := range 500 { // a400–a499 are absent
		id := fmt.Sprintf("a%03d", i)
		keys = append(keys, tkArtifact(id), tkTomb(id), tkTrust(id))
	}
	keys = append(keys, tkTrust("a001"), tkTrust("bad"), tkEdge(graph.EdgeKey{From: "a001", Rel: "derived_from", To: "bad"}))
	want := make([][]byte, len(keys))
	present := 0
	for i, k := range keys {
		v, err := trieGet(m, m.root, k)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = v
		if v != nil {
			present++
		}
	}
	if present < 400 || present == len(keys) {
		t.Fatalf("%d of %d keys present: the test wants both kinds", present, len(keys))
	}

	var next []graph.Op
	for i := range 200 {
		next = append(next, link(fmt.Sprintf("n%03d", i), "derived_from", fmt.Sprintf("a%03d", i*2)))
	}
	done, err := m.readAhead(next)
	if err != nil {
		t.Fatal(err)
	}
	if nodes := len(m.ahead.Load().nodes); nodes*memoReads < 3*len(next) {
		t.Fatalf("links to 200 artifacts walk %d nodes: the test wants at least one per %d keys", nodes, memoReads)
	} else {
		t.Logf("links to 200 artifacts walk %d nodes for %d keys", nodes, 3*len(next))
	}
	seen := m.ahead.Load().seen
	if seen == nil {
		t.Fatal("no memo while the request's lookups are read ahead")
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for round := range 2 {
				for i := range keys {
					j := (i + g*97) % len(keys)
					if got := m.get(keys[j]); !bytes.Equal(got, want[j]) || (got == nil) != (want[j] == nil) {
						t.Errorf("goroutine %d, round %d: %q is %q through the memo, %q in the map", g, round, keys[j], got, want[j])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i, k := range keys {
		v, ok := seen.lookup(k)
		if !ok {
			t.Fatalf("the memo did not keep %q", k)
		}
		if !bytes.Equal(v, want[i]) || (v == nil) != (want[i] == nil) {
			t.Fatalf("the memo keeps %q as %q, the map holds %q", k, v, want[i])
		}
	}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	done()
	if m.ahead.Load() != nil {
		t.Fatal("done left the memo or the nodes read ahead in place")
	}
	for i, k := range keys {
		if got := m.get(k); !bytes.Equal(got, want[i]) {
			t.Fatalf("after done, %q is %q, the map holds %q", k, got, want[i])
		}
	}
	// A request whose lookups all walk the same few nodes (every link to
	// one artifact) is not memoized: its walks are cheap.
	var hub []graph.Op
	for i := range 200 {
		hub = append(hub, link(fmt.Sprintf("n%03d", i), "derived_from", "a007"))
	}
	done, err = m.readAhead(hub)
	if err != nil {
		t.Fatal(err)
	}
	if nodes := len(m.ahead.Load().nodes); nodes*memoReads >= 3*len(hub) {
		t.Fatalf("the links to one artifact walk %d nodes: the test wants fewer than one per %d keys", nodes, memoReads)
	}
	if m.ahead.Load().seen != nil {
		t.Fatal("a request whose lookups walk a few nodes memoizes them")
	}
	done()

	// A lookup that fails is not kept: the next one walks the map again
	// (and the failure stays the map's Err, for the commit to refuse).
	broken := newMapSource(ctx, s, "c", &replay.Commit{Root: hashing.Sum([]byte("no such node")), RootCount: 3, Index: &replay.MapIndex{}})
	broken.ahead.Store(&readWindow{seen: newLookupMemo(8)})
	if v := broken.get(tkArtifact("a001")); v != nil {
		t.Fatalf("a lookup through a missing root found %q", v)
	}
	if err := broken.Err(); !errors.Is(err, errNodeMissing) {
		t.Fatalf("a lookup through a missing root: Err %v, want the missing node", err)
	}
	if _, ok := broken.ahead.Load().seen.lookup(tkArtifact("a001")); ok {
		t.Fatal("the memo kept a failed lookup")
	}

	// The memo keeps no more than its room.
	small := newLookupMemo(0)
	for i := range small.max + 100 {
		small.keep(fmt.Appendf(nil, "k%d", i), nil)
	}
	if len(small.vals) != small.max {
		t.Fatalf("a memo with room for %d keys keeps %d", small.max, len(small.vals))
	}
	if big := newLookupMemo(10 * memoMaxKeys); big.max != memoMaxKeys {
		t.Fatalf("a memo for a request of %d keys has room for %d, want at most %d", 10*memoMaxKeys, big.max, memoMaxKeys)
	}
}
