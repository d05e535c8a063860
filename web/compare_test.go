package web

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestCompareMatchesOracle compares runs read through their state maps
// (after a restart) with an oracle that looks every artifact and its
// trust up by id, the way the page did before it passed once over each
// side: the rows, their order and cells, and every count agree — with
// more differing artifacts than the page lists, artifacts on one side
// only, changed content and type, and trust that differs alone.
func TestCompareMatchesOracle(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	base := bigOps(t, 1200)
	x := loadContext(t, s, "x", base...)
	y := loadContext(t, s, "y", base...)
	var ops []graph.Op
	for i := range 700 { // only in y, in natural order among the rest
		id := fmt.Sprintf("n%d", i)
		ops = append(ops, putOp(t, id, "note", "other", map[string]any{"text": "note " + id}))
	}
	for i := 3; i < 1200; i += 97 { // retyped or rewritten in y
		id := fmt.Sprintf("a%05d", i)
		if i%2 == 0 {
			ops = append(ops, putOp(t, id, "note", "other", map[string]any{"text": "rewritten " + id}))
		} else {
			ops = append(ops, putOp(t, id, "claim", "other", map[string]any{"text": "retyped " + id}))
		}
	}
	// A poison root confirmed by a new verdict: its dependents' trust
	// differs while their content does not.
	// The same content from another producer.
	ops = append(ops, putOp(t, "a00011", "claim", "someone else", map[string]any{"text": "claim a00011", "n": 11}))
	ops = append(ops, putOp(t, "a00500", "fetch_verdict", "gate/v1", map[string]any{"verdict": "RETRIEVED", "url": "https://example.com/a00500"}))
	commit(t, s, "y", "", "agent", "second", ops...)
	// Rewritten and put back: a later version with the same content,
	// whose trust differs too (it rests on the root confirmed above).
	commit(t, s, "y", "", "agent", "third", putOp(t, "a00505", "claim", "agent", map[string]any{"text": "for a while"}))
	yNext := commit(t, s, "y", "", "agent", "fourth", putOp(t, "a00505", "claim", "agent", map[string]any{"text": "claim a00505", "n": 505}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = store.Open(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := New(Options{Store: s, Logger: quietLogger()}).(*server)

	sides := []struct{ ctx, at string }{{"x", ""}, {"y", ""}, {"y", y.ID.Hex()}, {"x", x.ID.Hex()}, {"y", yNext.ID.Hex()}}
	var seen [5]bool
	for _, a := range sides {
		for _, b := range sides {
			got := compareSides(t, h, a.ctx, a.at, b.ctx, b.at, false)
			want := compareSides(t, h, a.ctx, a.at, b.ctx, b.at, true)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s@%q vs %s@%q: differing %d (more %d, only A %d, only B %d, changed %d, trust %d), rows %d; oracle %d (%d, %d, %d, %d, %d), rows %d",
					a.ctx, a.at, b.ctx, b.at, got.Differing, got.More, got.OnlyA, got.OnlyB, got.Changed, got.TrustDiffs, len(got.Rows),
					want.Differing, want.More, want.OnlyA, want.OnlyB, want.Changed, want.TrustDiffs, len(want.Rows))
			}
			// Across contexts (a pass over each side) and within one (the
			// maps' diff).
			if b.ctx == "y" && b.at == "" && (a.ctx == "x" && a.at == "" || a.ctx == "y" && a.at == y.ID.Hex()) {
				i := slices.IndexFunc(got.Rows, func(r compareRow) bool { return r.ID == "a00505" })
				if i < 0 || got.Rows[i].Kind != "trust differs" || got.Rows[i].A.Version != 1 || got.Rows[i].B.Version != 3 {
					t.Errorf("a later version with the same content and other trust: row %+v; want trust differs, versions 1 and 3", got.Rows[max(i, 0)])
				}
			}
			seen[0] = seen[0] || got.More > 0
			seen[1] = seen[1] || got.OnlyA > 0
			seen[2] = seen[2] || got.OnlyB > 0
			seen[3] = seen[3] || got.Changed > 0
			seen[4] = seen[4] || got.TrustDiffs > 0
		}
	}
	if seen != [5]bool{true, true, true, true, true} {
		t.Fatalf("the pairs had rows past the page's bound, artifacts only in A, only in B, changed, trust differing alone: %v; want each", seen)
	}
}

// compareSides compares a@aAt with b@bAt as handleCompare does
// (server.compare), or as the oracle does.
func compareSides(t *testing.T, h *server, a, aAt, b, bAt string, oracle bool) compareView {
	t.Helper()
	ctx := context.Background()
	view := compareView{A: compareSide{Ctx: a, At: aAt}, B: compareSide{Ctx: b, At: bAt}}
	if !oracle {
		if _, err := h.compare(ctx, &view); err != nil {
			t.Fatal(err)
		}
		return view
	}
	left := map[string]compareEntry{}
	for i, side := range []*compareSide{&view.A, &view.B} {
		err := h.store.Read(ctx, side.Ctx, side.At, func(v *store.View) error {
			if side.At == "" && !v.State.IsLazy() {
				t.Errorf("the head of %s is not read through its state map", side.Ctx)
			}
			side.Commit = newCommitInfo(v.Commit, v.Branch)
			side.Summary = v.Trust.Summary()
			if i == 0 {
				left = oracleEntries(v)
			} else {
				oracleCompareWith(v, left, &view)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	oracleOnlyA(left, &view)
	return view
}

// oracleEntries is side A as the page read it before: every artifact's
// trust looked up by id.
func oracleEntries(v *store.View) map[string]compareEntry {
	out := map[string]compareEntry{}
	for _, id := range v.State.ArtifactIDs() {
		out[id] = compareEntry{ver: replay.VersionOf(v.State.Artifact(id)), status: v.Trust.Status(id)}
	}
	return out
}

// oracleOnlyA appends, as the page did before, the rows of the artifacts
// left in A alone.
func oracleOnlyA(left map[string]compareEntry, view *compareView) {
	var onlyA []string
	for id := range left {
		onlyA = append(onlyA, id)
	}
	naturalSort(onlyA)
	for _, id := range onlyA {
		view.OnlyA++
		view.Differing++
		if len(view.Rows) >= maxCompareRows {
			view.More++
			continue
		}
		e := left[id]
		view.Rows = append(view.Rows, compareRow{ID: id, Kind: "only in A", A: &compareCell{Type: e.ver.Type, Version: e.ver.Version, Hash: e.ver.ContentHash, Status: e.status,
			URL: artifactURL(view.A.Ctx, id, view.A.Commit.ID)}})
	}
}

// oracleCompareWith is side B as the page read it before: its ids sorted
// naturally, each artifact and its trust looked up by id.
func oracleCompareWith(v *store.View, left map[string]compareEntry, view *compareView) {
	ids := v.State.ArtifactIDs()
	naturalSort(ids)
	for _, id := range ids {
		b := v.State.Artifact(id)
		bs := v.Trust.Status(id)
		e, inA := left[id]
		delete(left, id)
		row := compareRow{ID: id}
		switch {
		case !inA:
			row.Kind = "only in B"
			view.OnlyB++
		case e.ver.ContentHash != b.ContentHash || e.ver.Type != b.Type || e.ver.ProducedBy != b.ProducedBy:
			row.Kind = "differs"
			view.Changed++
		case e.status != bs:
			row.Kind = "trust differs"
			view.TrustDiffs++
		default:
			continue
		}
		view.Differing++
		if len(view.Rows) >= maxCompareRows {
			view.More++
			continue
		}
		row.B = &compareCell{Type: b.Type, Version: b.Version, Hash: b.ContentHash, Status: bs, URL: artifactURL(view.B.Ctx, id, v.Commit.ID.Hex())}
		if inA {
			row.A = &compareCell{Type: e.ver.Type, Version: e.ver.Version, Hash: e.ver.ContentHash, Status: e.status,
				URL: artifactURL(view.A.Ctx, id, view.A.Commit.ID)}
		}
		view.Rows = append(view.Rows, row)
	}
}
