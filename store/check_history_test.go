package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
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

// unreadableGet is a driver whose point reads (Get, GetMany) of one key
// fail as a value the engine cannot give back; its scans read it.
type unreadableGet struct {
	*memkv.Driver
	key []byte
}

func (d *unreadableGet) Get(ctx context.Context, key []byte) ([]byte, error) {
	if bytes.Equal(key, d.key) {
		return nil, &kv.UnreadableError{Key: bytes.Clone(key), Why: "the test's damage"}
	}
	return d.Driver.Get(ctx, key)
}

func (d *unreadableGet) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		if bytes.Equal(k, d.key) {
			return nil, &kv.UnreadableError{Key: bytes.Clone(k), Why: "the test's damage"}
		}
	}
	return d.Driver.GetMany(ctx, keys)
}

// TestCheckFindsALostReverseRecordBesideAnUnreadableOne: the check reads a
// commit's reverse-index records of all its edges' targets in one driver
// call; when one of them cannot be read, that call fails, and the records
// are read one at a time so that the loss of another target's record in
// the same call is still reported (naming the lost edge), not hidden
// behind the unreadable one.
func TestCheckFindsALostReverseRecordBesideAnUnreadableOne(t *testing.T) {
	d := &unreadableGet{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	c1 := mustCommit(t, s, "c", put("x", "note", map[string]any{"v": 1}), put("p", "note", map[string]any{}), put("q", "note", map[string]any{}),
		link("x", "derived_from", "p"), link("x", "derived_from", "q"))
	mustCommit(t, s, "c", graph.Op{Op: graph.OpUnlink, From: "x", Rel: "derived_from", To: "p"}, graph.Op{Op: graph.OpUnlink, From: "x", Rel: "derived_from", To: "q"})
	mustCheck(t, s)
	if c1.Index == nil || !c1.Index.ReverseApart {
		t.Fatal("the test needs a map whose reverse edges are apart")
	}
	lose(t, s, keyRev("c", "q", c1.ID))
	d.key = keyRev("c", "p", c1.ID)

	defects := checkDefects(t, s)
	if len(defects) != 1 {
		t.Fatalf("want one defect, on %s; got %d: %v", c1.ID.Short(), len(defects), defects)
	}
	got := defects[0]
	t.Log(got)
	if got.Kind != "state" || got.ID != c1.ID.String() || !strings.Contains(got.Detail, `reverse index lacks the edge "x" -derived_from-> "q"`) {
		t.Fatalf("defect %v: want a state defect on %s naming the lost edge x -derived_from-> q", got, c1.ID.Short())
	}
}

// TestCheckFindsALostReverseRecordPastTheFirstPart: the check reads a
// commit's reverse-index records of its edges' targets revPart at a time;
// the loss of a record of a target past the first part is reported.
func TestCheckFindsALostReverseRecordPastTheFirstPart(t *testing.T) {
	s := openWithContext(t, Options{Driver: memkv.New(), ReserveBytes: -1})
	n := revPart + revPart/2
	ops := []graph.Op{put("x", "note", map[string]any{})}
	for i := range n {
		ops = append(ops, put(fmt.Sprintf("t%05d", i), "note", map[string]any{}))
	}
	c0 := mustCommit(t, s, "c", ops...)
	ops = ops[:0]
	for i := range n {
		ops = append(ops, link("x", "derived_from", fmt.Sprintf("t%05d", i)))
	}
	c1 := mustCommit(t, s, "c", ops...)
	lost := fmt.Sprintf("t%05d", n-2)
	// Unlinked after: only c1's map holds the edge, as the head's does not.
	mustCommit(t, s, "c", graph.Op{Op: graph.OpUnlink, From: "x", Rel: "derived_from", To: lost})
	mustCheck(t, s)
	if c0.Index == nil || !c0.Index.ReverseApart || c1.Index == nil || !c1.Index.ReverseApart {
		t.Fatal("the test needs maps whose reverse edges are apart")
	}
	lose(t, s, keyRev("c", lost, c1.ID))

	defects := checkDefects(t, s)
	if len(defects) != 1 {
		t.Fatalf("want one defect, on %s; got %d: %v", c1.ID.Short(), len(defects), defects)
	}
	got := defects[0]
	t.Log(got)
	if got.Kind != "state" || got.ID != c1.ID.String() || !strings.Contains(got.Detail, fmt.Sprintf(`reverse index lacks the edge "x" -derived_from-> %q that`, lost)) {
		t.Fatalf("defect %v: want a state defect on %s naming the lost edge x -derived_from-> %s", got, c1.ID.Short(), lost)
	}
}
