package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// rewriteCommit edits a stored commit record's JSON through the driver, as
// a damaged write would, and drops the cached heads.
func rewriteCommit(t *testing.T, s *Store, ctxID string, c *replay.Commit, edit func(m map[string]any)) {
	t.Helper()
	ctx := context.Background()
	v, err := s.kv.Get(ctx, keyCommit(ctxID, c.ID))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if v, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyCommit(ctxID, c.ID), Value: v}}}); err != nil {
		t.Fatal(err)
	}
	forgetHeads(s)
}

// TestCheckFindsACommitOverAnotherCommitsStateMap: a commit that is no
// branch's head whose record names another commit's state map of as many
// entries is reported, on that commit and once: its chain of ops still
// replays (the map is not what the replay reads), but a point read at it
// serves the other commit's state. fsck passed it before.
func TestCheckFindsACommitOverAnotherCommitsStateMap(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
			t.Fatal(err)
		}
		c1 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}), put("p", "note", map[string]any{}), link("x", "derived_from", "p"))
		c2 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 2}))
		mustCommit(t, s, "c", put("y", "note", map[string]any{"v": 3}))
		mustCheck(t, s)
		if c1.RootCount != c2.RootCount {
			t.Fatalf("the two maps hold %d and %d entries; the test needs as many", c1.RootCount, c2.RootCount)
		}
		rewriteCommit(t, s, "c", c1, func(m map[string]any) { m["root"] = c2.Root.String() })

		// What a reader of the damaged commit gets: the other state.
		got, err := s.GetCommit(ctx, "c", c1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a, _, err := s.ArtifactAt(ctx, "c", got, "x"); err != nil || a.Version != 2 {
			t.Fatalf("ArtifactAt(c1, x) = %v, %v; the damage should serve version 2", a, err)
		}

		defects := checkDefects(t, s)
		if len(defects) != 1 {
			t.Fatalf("want one defect, on %s; got %d: %v", c1.ID.Short(), len(defects), defects)
		}
		d := defects[0]
		t.Log(d)
		if d.Kind != "state" || d.Context != "c" || d.ID != c1.ID.String() ||
			!strings.Contains(d.Detail, "state map does not hold the commit's state") || !strings.Contains(d.Detail, `"x"`) {
			t.Fatalf("defect %v: want a state defect on %s naming artifact \"x\"", d, c1.ID.Short())
		}
	})
}

// TestCheckFindsALostReverseRecordOfAnOlderCommit: the reverse-index
// record of an edge that only an older commit's map holds (linked, then
// unlinked) is lost. A read of that commit over its map (ReadSparse) no
// longer finds the edge among its target's dependents; fsck reports it on
// the commit that linked it. It checked the index at branch heads only,
// and passed it before.
func TestCheckFindsALostReverseRecordOfAnOlderCommit(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
			t.Fatal(err)
		}
		c1 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}), put("p", "note", map[string]any{}), link("x", "derived_from", "p"))
		mustCommit(t, s, "c", graph.Op{Op: graph.OpUnlink, From: "x", Rel: "derived_from", To: "p"})
		mustCheck(t, s)
		if c1.Index == nil || !c1.Index.ReverseApart {
			t.Fatal("the test needs a map whose reverse edges are apart")
		}
		lose(t, s, keyRev("c", "p", c1.ID))

		got, err := s.GetCommit(ctx, "c", c1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReadSparse(ctx, "c", got, func(v *View) error {
			if n := len(v.State.In("p")); n != 0 {
				t.Fatalf("ReadSparse(c1): In(p) = %d edges; the lost record should hide the edge", n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		defects := checkDefects(t, s)
		if len(defects) != 1 {
			t.Fatalf("want one defect, on %s; got %d: %v", c1.ID.Short(), len(defects), defects)
		}
		d := defects[0]
		t.Log(d)
		if d.Kind != "state" || d.Context != "c" || d.ID != c1.ID.String() ||
			!strings.Contains(d.Detail, `reverse index lacks the edge "x" -derived_from-> "p"`) {
			t.Fatalf("defect %v: want a state defect on %s naming the edge x -derived_from-> p", d, c1.ID.Short())
		}
	})
}

// TestCheckReportsAHeadOverAnotherCommitsStateMapOnce: a branch head whose
// record names another commit's state map is reported once, on the
// commit, and not again as a head whose map does not hash to its commit.
func TestCheckReportsAHeadOverAnotherCommitsStateMapOnce(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
			t.Fatal(err)
		}
		c1 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}))
		c2 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 2}))
		mustCheck(t, s)
		rewriteCommit(t, s, "c", c2, func(m map[string]any) { m["root"] = c1.Root.String() })
		defects := checkDefects(t, s)
		if len(defects) != 1 {
			t.Fatalf("want one defect, on %s; got %d: %v", c2.ID.Short(), len(defects), defects)
		}
		if d := defects[0]; d.Kind != "state" || d.ID != c2.ID.String() || !strings.Contains(d.Detail, "state map does not hold the commit's state") {
			t.Fatalf("defect %v: want a state defect on %s", d, c2.ID.Short())
		}
	})
}
