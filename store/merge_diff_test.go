package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestStoreDiffMatchesFullDiff checks the store's diff (state-map diff,
// trust of the touched region only) against replay.Diff of the two whole
// states with two full trust indexes, for pairs of commits of a random
// history: head and non-head, either order.
func TestStoreDiffMatchesFullDiff(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "d", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	var commits []*replay.Commit
	commits = append(commits, mHead(t, s, "d", "main"))
	live := map[string]bool{}
	var ids []string
	for i := 0; i < 60; i++ {
		var ops []graph.Op
		switch k := r.IntN(6); {
		case k < 3 || len(ids) < 4:
			id := fmt.Sprintf("a%03d", i)
			if r.IntN(3) == 0 {
				v := "RETRIEVED"
				if r.IntN(2) == 0 {
					v = "FAILED"
				}
				ops = append(ops, mPut(id, "fetch_verdict", map[string]any{"verdict": v}))
			} else {
				ops = append(ops, mPut(id, "claim", map[string]any{"i": i}))
			}
			for j := 0; j < 2 && len(ids) > 0; j++ {
				to := ids[r.IntN(len(ids))]
				if live[to] {
					ops = append(ops, mLink(id, []string{"derived_from", "mentions"}[r.IntN(2)], to))
				}
			}
			ids = append(ids, id)
			live[id] = true
		case k == 3:
			// Flip or edit an artifact.
			id := ids[r.IntN(len(ids))]
			if !live[id] {
				continue
			}
			var typ string
			_ = s.Read(ctx, "d", "main", func(v *store.View) error { typ = v.State.Artifact(id).Type; return nil })
			if typ == "fetch_verdict" {
				ops = append(ops, mPut(id, typ, map[string]any{"verdict": []string{"RETRIEVED", "FAILED"}[r.IntN(2)], "i": i}))
			} else {
				ops = append(ops, mPut(id, typ, map[string]any{"edit": i}))
			}
		case k == 4:
			// Drop an artifact's outgoing edges, sometimes the artifact.
			id := ids[r.IntN(len(ids))]
			if !live[id] {
				continue
			}
			_ = s.Read(ctx, "d", "main", func(v *store.View) error {
				for _, e := range v.State.Out(id) {
					ops = append(ops, mUnlink(e.From, e.Rel, e.To))
				}
				if len(v.State.In(id)) == 0 && r.IntN(2) == 0 {
					ops = append(ops, mDel(id))
					live[id] = false
				}
				return nil
			})
		default:
			a, b := ids[r.IntN(len(ids))], ids[r.IntN(len(ids))]
			if live[a] && live[b] && a > b {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: a, Rel: "uses", To: b, Attrs: json.RawMessage(fmt.Sprintf(`{"w":%d}`, r.IntN(3)))})
			}
		}
		if len(ops) == 0 {
			continue
		}
		res, err := s.Commit(ctx, store.CommitRequest{Context: "d", Ops: ops})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !res.Noop {
			commits = append(commits, res.Commit)
		}
	}
	full := func(from, to *replay.Commit) string {
		var d *replay.DiffResult
		err := s.ReadCommit(ctx, "d", from, func(fv *store.View) error {
			return s.ReadCommit(ctx, "d", to, func(tv *store.View) error {
				d = replay.Diff(fv.State, tv.State, fv.Trust.Status, tv.Trust.Status)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		d.From, d.To, d.FromHash, d.ToHash = from.ID, to.ID, from.ContextHash, to.ContextHash
		b, _ := json.Marshal(d)
		return string(b)
	}
	head := commits[len(commits)-1]
	n := len(commits)
	pairs := [][2]*replay.Commit{{commits[0], head}, {head, commits[0]}, {commits[5], commits[30]}, {commits[30], commits[5]},
		// Near the head but not at it: trust through main's head.
		{commits[n-6], commits[n-2]}, {commits[n-2], commits[n-6]}, {commits[n-12], commits[n-3]}, {commits[n-3], commits[n-12]}}
	for i := 0; i+7 < len(commits); i += 7 {
		pairs = append(pairs, [2]*replay.Commit{commits[i], commits[i+7]}, [2]*replay.Commit{commits[i], head})
	}
	// Far from main and not a head: both diffs to main's head are larger
	// than a quarter of it, so trust is read at the commit itself.
	if err := s.CreateBranch(ctx, "d", "side", commits[1].ID); err != nil {
		t.Fatal(err)
	}
	var side []*replay.Commit
	for k := range 3 {
		var ops []graph.Op
		for i := range 80 {
			id := fmt.Sprintf("s%d-%02d", k, i)
			ops = append(ops, mPut(id, []string{"claim", "fetch_verdict"}[i%2], map[string]any{"verdict": []string{"RETRIEVED", "FAILED"}[i%3/2], "i": i}))
			if i > 0 {
				ops = append(ops, mLink(id, "derived_from", fmt.Sprintf("s%d-%02d", k, i-1)))
			}
		}
		side = append(side, mCommit(t, s, "d", "side", ops...))
	}
	pairs = append(pairs, [2]*replay.Commit{side[0], side[1]}, [2]*replay.Commit{side[1], side[0]}, [2]*replay.Commit{commits[1], side[1]})
	for _, p := range pairs {
		d, err := s.Diff(ctx, "d", p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d)
		if want := full(p[0], p[1]); string(b) != want {
			t.Fatalf("diff seq %d -> %d:\n got %s\nwant %s", p[0].Seq, p[1].Seq, b, want)
		}
	}
	// The same commit: an empty diff.
	d, err := s.Diff(ctx, "d", head, head)
	if err != nil || !d.Empty() {
		t.Fatalf("self diff: %+v %v", d, err)
	}
}
