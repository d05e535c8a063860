package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// seen is what TestLegacyStoreUpgrades reads at a commit.
type seen struct {
	hash    hashing.Digest
	history []Version
	diff    *replay.DiffResult
}

// String renders s, its diff as JSON (every list sorted).
func (s seen) String() string {
	d, err := json.Marshal(s.diff)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("hash %s\nhistory %+v\ndiff %s\n", s.hash, s.history, d)
}

// downgrade rewrites the store at dir as a binary of format 1 or 2 left
// it: every commit's state map without its index (format 3), in the
// hashed layout for format 1 (its Root moved to the new trie; commit ids
// do not cover Root), commit records without Index, and the format stamp.
func downgrade(t *testing.T, dir, format string, ctxIDs ...string) {
	t.Helper()
	ctx := context.Background()
	s := openTest(t, dir)
	defer s.Close()
	var b kv.Batch
	w := newTrieWriter(s)
	for _, ctxID := range ctxIDs {
		if err := s.Commits(ctx, ctxID, 0, func(c *replay.Commit) error {
			root := trieChild{id: c.Root, count: c.RootCount}
			var entries []trieEntry
			if err := trieWalk(s, root, func(k, v []byte) error {
				switch k[0] {
				case 'r', 'q':
				default:
					entries = append(entries, trieEntry{key: slices.Clone(k), val: slices.Clone(v)})
				}
				return nil
			}); err != nil {
				return err
			}
			cc := *c
			cc.Index = nil
			switch {
			case len(entries) == 0:
				cc.Root, cc.RootCount = hashing.Digest{}, 0
			case format == formatLegacy:
				legacy := legacyBuild(w, entries)
				cc.Root, cc.RootCount = legacy.id, legacy.count
			default:
				ordered := w.build(entries, 0)
				cc.Root, cc.RootCount = ordered.id, ordered.count
			}
			rec, err := json.Marshal(&cc)
			if err != nil {
				return err
			}
			b.Sets = append(b.Sets, kv.Record{Key: keyCommit(ctxID, c.ID), Value: rec})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, enc := range w.written {
		b.Sets = append(b.Sets, kv.Record{Key: keyNode(id), Value: enc})
	}
	b.Sets = append(b.Sets, kv.Record{Key: keyMetaFormat(), Value: []byte(format)})
	if err := s.kv.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// TestLegacyStoreUpgrades opens a store of format 1 (hashed state maps)
// and one of format 2 (ordered maps without their index): each is stamped
// 3, every old commit reads as before (artifacts at a commit, history,
// diffs, whole states), the first commit onto each head rebuilds its map
// in the ordered layout (format 1) and adds its index, diffs across the
// upgrade are exact, fsck finds nothing, and a reopened store reads the
// same.
func TestLegacyStoreUpgrades(t *testing.T) {
	for _, format := range []string{formatLegacy, formatUnindexed} {
		t.Run("format-"+format, func(t *testing.T) { testStoreUpgrades(t, format) })
	}
}

func testStoreUpgrades(t *testing.T, format string) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 120 {
		ops = append(ops, put(fmt.Sprintf("step-%03d", i), "note", map[string]any{"n": i}))
		if i > 0 {
			ops = append(ops, link(fmt.Sprintf("step-%03d", i), "derived_from", fmt.Sprintf("step-%03d", i-1)))
		}
	}
	c1 := mustCommit(t, s, "c", ops...)
	c2 := mustCommit(t, s, "c", put("step-003", "note", map[string]any{"n": "three"}),
		graph.Op{Op: graph.OpUnlink, From: "step-119", Rel: "derived_from", To: "step-118"},
		graph.Op{Op: graph.OpDelete, ID: "step-119"},
		graph.Op{Op: graph.OpUnlink, From: "step-050", Rel: "derived_from", To: "step-049"})
	if err := s.CreateBranch(ctx, "c", "side", c1.ID); err != nil {
		t.Fatal(err)
	}
	look := func(s *Store, c *replay.Commit) seen {
		t.Helper()
		var out seen
		if err := s.ReadCommit(ctx, "c", c, func(v *View) error { out.hash = v.State.Hash(); return nil }); err != nil {
			t.Fatal(err)
		}
		h, err := s.History(ctx, "c", c, "step-003")
		if err != nil {
			t.Fatal(err)
		}
		out.history = h
		if out.diff, err = s.DiffStates(ctx, c1, c); err != nil {
			t.Fatal(err)
		}
		// The artifacts alone, through the artifacts' part of each map
		// (a legacy map's whole, which keeps no key range together).
		arts, ok, err := s.DiffArtifactsWithin(ctx, c1, c, 1000)
		if err != nil || !ok {
			t.Fatalf("DiffArtifactsWithin: %v, %v", ok, err)
		}
		got, _ := json.Marshal([]any{arts.Added, arts.Removed, arts.Changed})
		want, _ := json.Marshal([]any{out.diff.Added, out.diff.Removed, out.diff.Changed})
		if string(got) != string(want) {
			t.Fatalf("the artifacts' diff %s, the whole diff's artifacts %s", got, want)
		}
		return out
	}
	before := map[hashing.Digest]seen{c1.ID: look(s, c1), c2.ID: look(s, c2)}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	downgrade(t, dir, format, "c")
	s = openTest(t, dir)
	if v, err := s.kv.Get(ctx, keyMetaFormat()); err != nil || string(v) != FormatVersion {
		t.Fatalf("format after open: %q, %v; want %q", v, err, FormatVersion)
	}
	for _, c := range []*replay.Commit{c1, c2} {
		got, err := s.GetCommit(ctx, "c", c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if legacy, err := newTrieWriter(s).isLegacy(trieChild{id: got.Root, count: got.RootCount}); err != nil || legacy != (format == formatLegacy) || got.Index != nil {
			t.Fatalf("commit %s: state map legacy %v, %v, index %+v; the fixture is not of format %s", c.ID.Short(), legacy, err, got.Index, format)
		}
		if now := look(s, got); now.String() != before[c.ID].String() {
			t.Fatalf("commit %s reads differently from its legacy state map:\n%s\nwas\n%s", c.ID.Short(), now, before[c.ID])
		}
	}
	mustCheck(t, s)

	// The first commits onto each head rebuild their maps.
	c3 := mustCommit(t, s, "c", put("step-200", "note", map[string]any{"n": 200}), link("step-200", "derived_from", "step-118"))
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "side", Author: "t", Message: "m", Ops: []graph.Op{put("side-1", "note", map[string]any{"n": 1})}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*replay.Commit{c3, res.Commit} {
		if legacy, err := newTrieWriter(s).isLegacy(trieChild{id: c.Root, count: c.RootCount}); err != nil || legacy || c.Index == nil {
			t.Fatalf("commit %s after the upgrade: legacy %v, %v, index %+v", c.ID.Short(), legacy, err, c.Index)
		}
	}
	diff, err := s.DiffStates(ctx, c2, c3)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range diff.Added {
		names = append(names, "added "+a.ID)
	}
	for _, a := range append(diff.Removed, diff.Changed...) {
		names = append(names, "removed or changed "+a.ID)
	}
	for _, e := range diff.EdgesAdded {
		names = append(names, "edge added "+graph.EdgeKey{From: e.From, Rel: e.Rel, To: e.To}.String())
	}
	for _, e := range append(diff.EdgesRemoved, diff.EdgesChanged...) {
		names = append(names, "edge removed or changed "+graph.EdgeKey{From: e.From, Rel: e.Rel, To: e.To}.String())
	}
	want := []string{"added step-200", "edge added step-200 -derived_from-> step-118"}
	if !slices.Equal(names, want) {
		t.Fatalf("diff across the upgrade: %q, want %q", names, want)
	}
	if a, _, err := s.ArtifactAt(ctx, "c", c3, "step-003"); err != nil || a.Version != 2 {
		t.Fatalf("step-003 after the upgrade: %+v, %v", a, err)
	}
	if a, _, err := s.ArtifactAt(ctx, "c", c3, "step-119"); err == nil {
		t.Fatalf("deleted step-119 found after the upgrade: %+v", a)
	}
	// The rebuilt map is the one the state would have from scratch.
	var hashC3 hashing.Digest
	if err := s.ReadCommit(ctx, "c", c3, func(v *View) error { hashC3 = v.State.Hash(); return nil }); err != nil {
		t.Fatal(err)
	}
	if hashC3 != c3.ContextHash {
		t.Fatalf("state of c3 hashes to %s, its commit says %s", hashC3.Short(), c3.ContextHash.Short())
	}
	mustCheck(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir)
	defer s.Close()
	if now := look(s, c2); fmt.Sprint(now) != fmt.Sprint(before[c2.ID]) {
		t.Fatal("a legacy commit reads differently after a reopen")
	}
	mustCheck(t, s)
}

// racingStamp is a shared driver on which another process stamps the
// store right after this one read the stamp, once.
type racingStamp struct {
	sharedMem
	raced     bool
	conflicts int
}

func (d *racingStamp) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := d.sharedMem.Get(ctx, key)
	if string(key) == string(keyMetaFormat()) && !d.raced {
		d.raced = true
		if cerr := d.sharedMem.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyMetaFormat(), Value: []byte(FormatVersion)}}}); cerr != nil {
			return nil, cerr
		}
	}
	return v, err
}

func (d *racingStamp) Commit(ctx context.Context, b kv.Batch) error {
	err := d.sharedMem.Commit(ctx, b)
	if errors.Is(err, kv.ErrConflict) {
		d.conflicts++
	}
	return err
}

// TestFormatStampRace: two processes opening a store of format 1 (or a
// new one) at once both open it; the one whose compare-and-swap of the
// stamp loses reads the winner's.
func TestFormatStampRace(t *testing.T) {
	ctx := context.Background()
	for _, start := range []string{formatLegacy, formatUnindexed, formatReverseInMap, formatUnpacked, ""} {
		d := &racingStamp{sharedMem: sharedMem{memkv.New()}}
		if start != "" {
			if err := d.sharedMem.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyMetaFormat(), Value: []byte(start)}}}); err != nil {
				t.Fatal(err)
			}
		}
		s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatalf("open with the stamp %q raced: %v", start, err)
		}
		if d.conflicts != 1 {
			t.Fatalf("stamp %q: %d conflicts, want the one the race made", start, d.conflicts)
		}
		if v, err := d.sharedMem.Get(ctx, keyMetaFormat()); err != nil || string(v) != FormatVersion {
			t.Fatalf("stamp %q: now %q, %v", start, v, err)
		}
		s.Close()
	}
	// A stamp this binary does not know is refused, not upgraded.
	d := sharedMem{memkv.New()}
	if err := d.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyMetaFormat(), Value: []byte("6")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1}); err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("open of a store of format 6: %v", err)
	}
}
