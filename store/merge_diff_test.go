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
	full := func(from, to *replay.Commit) string { return wholeDiffJSON(t, s, "d", from, to) }
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

// TestStoreDiffTrustAcrossDefinitions: between commits that define other
// types or relations (a branch defining a type, main a dependency
// relation, the branch the same relation as not one), the store's diff
// reports the trust changes each side's own definitions give — checked
// against replay.Diff of the two whole states with their own trust
// indexes, for every ordered pair, heads and not; DiffWithin with room
// gives the same diff, and with none reports false.
func TestStoreDiffTrustAcrossDefinitions(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "d", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	m0 := mCommit(t, s, "d", "main",
		mPut("f0", "fetch_verdict", map[string]any{"verdict": "FAILED"}), mPut("f1", "fetch_verdict", map[string]any{"verdict": "RETRIEVED"}),
		mPut("y1", "claim", map[string]any{"y": 1}), mLink("y1", "derived_from", "f0"),
		mPut("q1", "claim", map[string]any{"q": 1}), mLink("q1", "derived_from", "f1"), mLink("q1", "supported_by", "y1"),
		mPut("k0", "claim", map[string]any{"k": 0}), mLink("k0", "derived_from", "f1"))
	if err := s.CreateBranch(ctx, "d", "b", m0.ID); err != nil {
		t.Fatal(err)
	}
	commitDefs := func(branch string, types []graph.TypeDef, rels []graph.RelationDef, ops ...graph.Op) *replay.Commit {
		res, err := s.Commit(ctx, store.CommitRequest{Context: "d", Branch: branch, Author: "t", Message: "m", Types: types, Relations: rels, Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		return res.Commit
	}
	m1 := commitDefs("main", nil, []graph.RelationDef{{Name: "rests_on", Depends: true}}, mLink("k0", "rests_on", "f0"))
	b1 := commitDefs("b", []graph.TypeDef{{Name: "mytype", Role: graph.RoleDerived}}, nil,
		mPut("z1", "mytype", map[string]any{"z": 1}), mPut("k1", "claim", map[string]any{"k": 1}), mLink("k1", "derived_from", "z1"),
		mUnlink("y1", "derived_from", "f0"), mLink("y1", "supported_by", "k1"))
	m2 := mCommit(t, s, "d", "main", mPut("c1", "claim", map[string]any{"c": 1}), mLink("c1", "derived_from", "k0"))
	b2 := commitDefs("b", nil, []graph.RelationDef{{Name: "rests_on", Depends: false}}, mLink("k1", "rests_on", "f0"))
	b3 := mCommit(t, s, "d", "b", mPut("c2", "claim", map[string]any{"c": 2}), mLink("c2", "derived_from", "k1"))
	full := func(from, to *replay.Commit) string { return wholeDiffJSON(t, s, "d", from, to) }
	commits := map[string]*replay.Commit{"m0": m0, "m1": m1, "m2": m2, "b1": b1, "b2": b2, "b3": b3}
	trustChanges := 0
	for fn, from := range commits {
		for tn, to := range commits {
			if fn == tn {
				continue
			}
			d, err := s.Diff(ctx, "d", from, to)
			if err != nil {
				t.Fatal(err)
			}
			trustChanges += len(d.Trust)
			got, _ := json.Marshal(d)
			if want := full(from, to); string(got) != want {
				t.Errorf("%s -> %s:\n got %s\nwant %s", fn, tn, got, want)
			}
			w, ok, err := s.DiffWithin(ctx, "d", from, to, 1000)
			if err != nil || !ok {
				t.Fatalf("%s -> %s within 1,000: %v %v", fn, tn, ok, err)
			}
			if again, _ := json.Marshal(w); string(again) != string(got) {
				t.Errorf("%s -> %s within 1,000:\n got %s\nwant %s", fn, tn, again, got)
			}
			if _, ok, err := s.DiffWithin(ctx, "d", from, to, 1); err != nil || ok {
				t.Errorf("%s -> %s within 1: %v %v, want false", fn, tn, ok, err)
			}
		}
	}
	if trustChanges == 0 {
		t.Fatal("no trust changed between any two commits: the test checks nothing")
	}
}

// TestDiffWithinStopsAtABigTrustChange: a one-artifact change that moves
// the trust of many dependents (a gate verdict turned FAILED under a
// thousand claims) is within a limit of two artifacts and edges, but not
// within the trust its dependents would need: DiffWithin reports false,
// and Diff lists all of them.
func TestDiffWithinStopsAtABigTrustChange(t *testing.T) {
	ctx := context.Background()
	s := mOpen(t, t.TempDir())
	if _, err := s.CreateContext(ctx, "d", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	ops := []graph.Op{mPut("hub", "fetch_verdict", map[string]any{"verdict": "RETRIEVED"})}
	for i := range 1000 {
		id := fmt.Sprintf("c%04d", i)
		ops = append(ops, mPut(id, "claim", map[string]any{"i": i}), mLink(id, "derived_from", "hub"))
	}
	before := mCommit(t, s, "d", "main", ops...)
	after := mCommit(t, s, "d", "main", mPut("hub", "fetch_verdict", map[string]any{"verdict": "FAILED"}))
	if _, ok, err := s.DiffWithin(ctx, "d", before, after, 100); err != nil || ok {
		t.Fatalf("within 100: %v %v, want false", ok, err)
	}
	d, ok, err := s.DiffWithin(ctx, "d", before, after, 2000)
	if err != nil || !ok || len(d.Trust) != 1001 {
		t.Fatalf("within 2,000: %v %v, %d trust changes, want 1,001", ok, err, len(d.Trust))
	}
}

// wholeDiffJSON is the oracle of the store's diff: replay.Diff of the
// states at from and to of context ctxID, each loaded whole with its own
// trust index, as JSON.
func wholeDiffJSON(t *testing.T, s *store.Store, ctxID string, from, to *replay.Commit) string {
	t.Helper()
	ctx := context.Background()
	var d *replay.DiffResult
	err := s.ReadCommit(ctx, ctxID, from, func(fv *store.View) error {
		return s.ReadCommit(ctx, ctxID, to, func(tv *store.View) error {
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

// TestDiffWithin: over every pair of commits of a history that puts,
// retypes, deletes, links and unlinks, a bounded diff with limits around
// the size of the diff it bounds gives that diff when it holds at most
// limit entries, and false (no diff) when it holds more:
// DiffStatesWithin bounds DiffStates (artifacts and edges), and
// DiffArtifactsWithin its artifact lists alone (and gives no edges).
func TestDiffWithin(t *testing.T) {
	ctx := context.Background()
	type bounded func(ctx context.Context, from, to *replay.Commit, limit int) (*replay.DiffResult, bool, error)
	for _, c := range []struct {
		name   string
		within func(*store.Store) bounded
		// of is the part of the whole diff the bounded one gives.
		of func(whole *replay.DiffResult) *replay.DiffResult
	}{
		{"states", func(s *store.Store) bounded { return s.DiffStatesWithin }, func(whole *replay.DiffResult) *replay.DiffResult { return whole }},
		{"artifacts", func(s *store.Store) bounded { return s.DiffArtifactsWithin }, func(whole *replay.DiffResult) *replay.DiffResult {
			return &replay.DiffResult{Added: whole.Added, Removed: whole.Removed, Changed: whole.Changed,
				EdgesAdded: []replay.EdgeChange{}, EdgesRemoved: []replay.EdgeChange{}, EdgesChanged: []replay.EdgeChange{}, Trust: whole.Trust}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mOpen(t, t.TempDir())
			if _, err := s.CreateContext(ctx, "d", store.ModeObserve); err != nil {
				t.Fatal(err)
			}
			commits := randomHistory(t, s, "d", rand.New(rand.NewPCG(35, 1)))
			within := c.within(s)
			checked, refused, edges := 0, 0, 0
			for _, from := range commits {
				for _, to := range commits {
					whole, err := s.DiffStates(ctx, from, to)
					if err != nil {
						t.Fatal(err)
					}
					if len(whole.EdgesAdded)+len(whole.EdgesRemoved) > 0 {
						edges++
					}
					want := c.of(whole)
					wantJSON, _ := json.Marshal(want)
					for _, limit := range []int{want.Len() - 1, want.Len(), want.Len() + 1} {
						if limit < 1 {
							continue
						}
						got, ok, err := within(ctx, from, to, limit)
						if err != nil {
							t.Fatal(err)
						}
						if ok != (want.Len() <= limit) {
							t.Fatalf("%s..%s within %d: %v, the diff holds %d", from.ID.Short(), to.ID.Short(), limit, ok, want.Len())
						}
						if !ok {
							refused++
							if got != nil {
								t.Fatalf("a refused diff came with a result")
							}
							continue
						}
						if b, _ := json.Marshal(got); string(b) != string(wantJSON) {
							t.Fatalf("%s..%s within %d:\n got %s\nwant %s", from.ID.Short(), to.ID.Short(), limit, b, wantJSON)
						}
						checked++
					}
				}
			}
			if len(commits) < 20 || refused == 0 || checked == 0 || edges == 0 {
				t.Fatalf("%d commits, %d diffs checked, %d refused, %d with edges: the test needs more", len(commits), checked, refused, edges)
			}
		})
	}
}

// randomHistory makes 60 commits of random puts (two types), links and
// deletes among 40 artifacts in context ctxID, dropping each commit's
// first op until the rest is taken, and returns the head before them and
// every commit that changed something.
func randomHistory(t *testing.T, s *store.Store, ctxID string, r *rand.Rand) []*replay.Commit {
	t.Helper()
	ctx := context.Background()
	commits := []*replay.Commit{mHead(t, s, ctxID, "main")}
	for i := range 60 {
		var ops []graph.Op
		for range 1 + r.IntN(8) {
			id := fmt.Sprintf("a%02d", r.IntN(40))
			switch r.IntN(5) {
			case 0, 1:
				ops = append(ops, mPut(id, []string{"claim", "note"}[r.IntN(2)], map[string]any{"i": i, "r": r.IntN(3)}))
			case 2, 3:
				ops = append(ops, mLink(id, "mentions", fmt.Sprintf("a%02d", r.IntN(40))))
			default:
				ops = append(ops, graph.Op{Op: graph.OpDelete, ID: id})
			}
		}
		for len(ops) > 0 {
			res, err := s.Commit(ctx, store.CommitRequest{Context: ctxID, Author: "t", Message: "m", Ops: ops})
			if err == nil {
				if !res.Noop {
					commits = append(commits, res.Commit)
				}
				break
			}
			ops = ops[1:]
		}
	}
	return commits
}
