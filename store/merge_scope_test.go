package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// randomSideOps returns a batch of random ops on state st: new artifacts
// (under prefix, which both sides share so that both add some of the same
// ids), changed artifacts, deletions (with the artifact's edges), links
// with and without attrs (from the larger id to the smaller, so that no
// side closes a cycle), and unlinks. A batch that does not apply (a link
// to an artifact it deleted) is drawn again by the caller.
func randomSideOps(r *rand.Rand, st *graph.State, prefix string, n int) []graph.Op {
	ids := st.ArtifactIDs()
	edges := st.Edges()
	// Half the picks among a few ids, so that the sides touch the same
	// ones: edits of both, and edges of one to what the other deleted.
	pick := func() string {
		if r.IntN(2) == 0 {
			return ids[r.IntN(min(len(ids), 10))]
		}
		return ids[r.IntN(len(ids))]
	}
	var ops []graph.Op
	for range n {
		switch k := r.IntN(10); {
		case k < 3 || len(ids) < 2:
			ops = append(ops, put(fmt.Sprintf("%s%d", prefix, r.IntN(8)), "note", map[string]any{"v": r.IntN(3)}))
		case k < 5:
			ops = append(ops, put(pick(), "note", map[string]any{"v": r.IntN(1000)}))
		case k < 6:
			id := pick()
			for _, e := range append(st.Out(id), st.In(id)...) {
				ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
			}
			ops = append(ops, graph.Op{Op: graph.OpDelete, ID: id})
		case k < 9:
			from, to := pick(), pick()
			if from == to {
				continue
			}
			// Mostly from the larger id to the smaller; the other way
			// round a side may close a cycle (its batch is refused and
			// drawn again) or, merged, the sides may.
			if from < to && r.IntN(4) > 0 {
				from, to = to, from
			}
			op := link(from, []string{"derived_from", "cites"}[r.IntN(2)], to)
			if r.IntN(2) == 0 {
				op.Attrs = json.RawMessage(fmt.Sprintf(`{"w":%d}`, r.IntN(3)))
			}
			ops = append(ops, op)
		case len(edges) > 0:
			e := edges[r.IntN(len(edges))]
			ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
		}
	}
	return ops
}

// commitRandom commits a random batch of ops on branch, drawing again
// until one applies.
func commitRandom(t *testing.T, s *Store, branch, prefix string, r *rand.Rand, n int) {
	t.Helper()
	ctx := context.Background()
	for range 50 {
		var ops []graph.Op
		if err := s.Read(ctx, "c", branch, func(v *View) error {
			ops = randomSideOps(r, v.State, prefix, n)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: branch, Author: "t", Message: "m", Ops: ops}); err == nil {
			return
		}
	}
	t.Fatal("no random batch applied in 50 draws")
}

// mergeOutcome renders what a merge returned, for comparison.
func mergeOutcome(t *testing.T, ops []graph.Op, hash hashing.Digest, resolved []replay.Conflict, unused []string, err error) string {
	var ce *replay.ConflictError
	switch {
	case errors.As(err, &ce):
		b, _ := json.Marshal(ce.Conflicts)
		return "conflicts " + string(b)
	case err != nil:
		return "error " + err.Error()
	}
	// Ops as the commit records them: without payloads.
	ops = append([]graph.Op(nil), ops...)
	for i := range ops {
		ops[i].Data = nil
	}
	b, _ := json.Marshal(map[string]any{"ops": ops, "hash": hash, "resolved": resolved, "unused": unused})
	return string(b)
}

// TestStoreMergeAgreesWithWholeMerge merges random branches of a context
// of a few hundred artifacts (a state map of several levels) and checks
// that the store's merge, which reads the sides' diffs and their states
// through their maps, returns what replay.Merge returns on the three
// states loaded whole: the same conflicts, and with resolutions the same
// ops, the same merged hash and the same settled conflicts. Half the
// cases reopen the store first, so the heads are read over their maps.
func TestStoreMergeAgreesWithWholeMerge(t *testing.T) {
	ctx := context.Background()
	kinds := map[replay.ConflictKind]int{}
	for seed := uint64(1); seed <= 16; seed++ {
		dir := t.TempDir()
		s, err := Open(ctx, Options{Dir: dir, Clock: testClock(), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 11))
		var seedOps []graph.Op
		for i := range 300 {
			seedOps = append(seedOps, put(fmt.Sprintf("a%03d", i), "note", map[string]any{"i": i}))
			if i > 0 {
				seedOps = append(seedOps, link(fmt.Sprintf("a%03d", i), "derived_from", fmt.Sprintf("a%03d", r.IntN(i))))
			}
		}
		base := mustCommit(t, s, "c", seedOps...)
		if err := s.CreateBranch(ctx, "c", "exp", base.ID); err != nil {
			t.Fatal(err)
		}
		for step := range 3 {
			for _, br := range []string{"main", "exp"} {
				commitRandom(t, s, br, fmt.Sprintf("n%d-", step), r, 8)
			}
		}
		if seed%3 == 0 {
			// The sides derive two artifacts from each other, each one
			// way round: merged, a cycle.
			for _, br := range [][3]string{{"main", "cy-a", "cy-b"}, {"exp", "cy-b", "cy-a"}} {
				if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br[0], Ops: []graph.Op{
					put("cy-a", "note", map[string]any{}), put("cy-b", "note", map[string]any{}), link(br[1], "derived_from", br[2])}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if seed%2 == 0 {
			s.Close()
			if s, err = Open(ctx, Options{Dir: dir, Clock: testClock(), NoSync: true}); err != nil {
				t.Fatal(err)
			}
		}
		ours, theirs := mustResolve(t, s, "c", "main"), mustResolve(t, s, "c", "exp")
		whole := func(c *replay.Commit) *graph.State {
			var st *graph.State
			if err := s.ReadCommit(ctx, "c", c, func(v *View) error { st = v.State; return nil }); err != nil {
				t.Fatal(err)
			}
			return st
		}
		// The oracle: replay.Merge over the three states loaded whole.
		bs, os, ts := whole(base), whole(ours), whole(theirs)
		resolutions := []map[string]replay.Resolution{nil}
		var ce *replay.ConflictError
		if _, err := replay.Merge(bs, os, ts, nil); errors.As(err, &ce) {
			res := map[string]replay.Resolution{}
			for _, c := range ce.Conflicts {
				res[c.Key] = replay.Resolution{Take: []string{replay.TakeOurs, replay.TakeTheirs}[r.IntN(2)]}
				if c.Kind != replay.ConflictCycle && c.ID != "" && r.IntN(3) == 0 {
					res[c.Key] = replay.Resolution{Value: json.RawMessage(fmt.Sprintf(`{"resolved":%d}`, r.IntN(100)))}
				}
				kinds[c.Kind]++
			}
			resolutions = append(resolutions, res)
		}
		for i, res := range resolutions {
			p, err := replay.Merge(bs, os, ts, res)
			want := "error"
			if err != nil {
				want = mergeOutcome(t, nil, hashing.Digest{}, nil, nil, err)
			} else {
				want = mergeOutcome(t, p.Ops, p.ContextHash, p.Resolved, p.Unused, nil)
			}
			got, err := s.Merge(ctx, "c", "main", "exp", res, "", "")
			gotS := ""
			if err != nil {
				gotS = mergeOutcome(t, nil, hashing.Digest{}, nil, nil, err)
			} else {
				gotS = mergeOutcome(t, got.Ops, got.Commit.ContextHash, got.Resolved, got.Unused, nil)
			}
			if gotS != want {
				t.Fatalf("seed %d, resolutions %d: the store merged\n%s\nreplay.Merge of the whole states\n%s", seed, i, gotS, want)
			}
			if err == nil && i < len(resolutions)-1 {
				t.Fatalf("seed %d: merged without the resolutions of its conflicts", seed)
			}
		}
		mustCheck(t, s)
		s.Close()
	}
	for _, k := range []replay.ConflictKind{replay.ConflictEditEdit, replay.ConflictDeleteEdit, replay.ConflictDanglingEdge, replay.ConflictCycle} {
		if kinds[k] == 0 {
			t.Errorf("no %s conflict in any case: the cases do not exercise it", k)
		}
	}
}

// TestPlanningSeesItsGroup runs a commit and a commit planned in the
// committer (OpsFrom) as one group: the plan's DiffFrom of the earlier
// head names what the first commit changed, though that commit's nodes
// are not yet written, and Head is that commit.
func TestPlanningSeesItsGroup(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 200 {
		ops = append(ops, put(fmt.Sprintf("a%03d", i), "note", map[string]any{"i": i}))
	}
	before := mustCommit(t, s, "c", ops...)
	req := func(r *writeReq) *writeReq {
		r.ctx, r.resp = ctx, make(chan writeResp, 1)
		return r
	}
	first := req(&writeReq{kind: reqCommit, ctxID: "c", branch: "main",
		commit: CommitRequest{Context: "c", Branch: "main", Ops: []graph.Op{put("a100", "note", map[string]any{"i": "changed"}), put("new", "note", map[string]any{})}}})
	var seen *replay.DiffResult
	var head *replay.Commit
	planned := req(&writeReq{kind: reqCommit, ctxID: "c", branch: "main",
		commit: CommitRequest{Context: "c", Branch: "main", OpsFrom: func(st *graph.State, p Planning) ([]graph.Op, error) {
			d, err := p.DiffFrom(before)
			seen, head = d, p.Head
			if err != nil {
				return nil, err
			}
			return []graph.Op{put("later", "note", map[string]any{})}, nil
		}}})
	s.processBatch([]*writeReq{first, planned}, nil)
	for _, r := range []*writeReq{first, planned} {
		if resp := <-r.resp; resp.err != nil {
			t.Fatalf("request: %v", resp.err)
		} else {
			r.resp <- resp
		}
	}
	c1 := (<-first.resp).res.Commit
	if head == nil || head.ID != c1.ID {
		t.Fatalf("the plan's head is not the group's first commit")
	}
	if seen == nil || len(seen.Added) != 1 || seen.Added[0].ID != "new" || len(seen.Changed) != 1 || seen.Changed[0].ID != "a100" {
		t.Fatalf("DiffFrom in the group: %+v", seen)
	}
	mustCheck(t, s)
}

// errInjected is the I/O error failingReads reports.
var errInjected = errors.New("injected read failure")

// readHook is a driver that calls on, once set, before each read of key
// (Get, or a key of GetMany); an error on returns fails the read.
type readHook struct {
	*memkv.Driver
	key atomic.Pointer[[]byte]
	on  func() error
}

func (d *readHook) before(key []byte) error {
	if k := d.key.Load(); k != nil && bytes.Equal(*k, key) {
		return d.on()
	}
	return nil
}

func (d *readHook) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := d.before(key); err != nil {
		return nil, err
	}
	return d.Driver.Get(ctx, key)
}

func (d *readHook) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	for _, k := range keys {
		if err := d.before(k); err != nil {
			return nil, err
		}
	}
	return d.Driver.GetMany(ctx, keys)
}

// leafKey returns the key of the leaf node of the state map of commit c
// that holds artifact id.
func leafKey(t *testing.T, s *Store, c *replay.Commit, id string) []byte {
	t.Helper()
	at := c.Root
	for {
		n, err := s.node(at)
		if err != nil {
			t.Fatal(err)
		}
		if n.leaf {
			return keyNode(at)
		}
		at = n.children[keyNibble(tkArtifact(id), n.depth)].id
	}
}

// hookedMergeStore opens a store over a readHook driver whose node cache
// holds nothing (every node read reaches the driver), with a context "c"
// of 300 artifacts a000… on main and a branch "exp" at that commit.
func hookedMergeStore(t *testing.T) (*Store, *readHook) {
	t.Helper()
	ctx := context.Background()
	d := &readHook{Driver: memkv.New()}
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1, CacheBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var ops []graph.Op
	for i := range 300 {
		ops = append(ops, put(fmt.Sprintf("a%03d", i), "note", map[string]any{"i": i}))
	}
	base := mustCommit(t, s, "c", ops...)
	if err := s.CreateBranch(ctx, "c", "exp", base.ID); err != nil {
		t.Fatal(err)
	}
	return s, d
}

// TestMergeReadFailureCommitsNothing: when the plan of a merge cannot
// read a node of theirs (read once by the diff, failing when the plan
// reads it again; the node cache holds nothing), the merge fails and no
// merge commit lands — a plan made on an artifact that only looked absent
// would delete it. With the reads working again, the merge takes theirs'
// change.
func TestMergeReadFailureCommitsNothing(t *testing.T) {
	ctx := context.Background()
	s, d := hookedMergeStore(t)
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "exp", Ops: []graph.Op{put("a200", "note", map[string]any{"i": "theirs"})}})
	if err != nil {
		t.Fatal(err)
	}
	ours := mustCommit(t, s, "c", put("a010", "note", map[string]any{"i": "ours"}))
	key := leafKey(t, s, res.Commit, "a200")
	s.nodes.clear()
	var reads atomic.Int32
	d.on = func() error {
		if reads.Add(1) > 1 {
			return errInjected
		}
		return nil
	}
	d.key.Store(&key)
	if _, err := s.Merge(ctx, "c", "main", "exp", nil, "", ""); !errors.Is(err, errInjected) {
		t.Fatalf("merge with a read of theirs failing: %v", err)
	}
	if reads.Load() < 2 {
		t.Fatalf("the node was read %d times: the test did not fail the plan's read", reads.Load())
	}
	if head := mustResolve(t, s, "c", "main"); head.ID != ours.ID {
		t.Fatalf("a merge that failed to read theirs moved main to %s", head.ID.Short())
	}
	d.key.Store(nil)
	got, err := s.Merge(ctx, "c", "main", "exp", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ops) != 1 || got.Ops[0].Op != graph.OpPut || got.Ops[0].ID != "a200" {
		t.Fatalf("merge ops %+v", got.Ops)
	}
}

// TestMergePlansOnTheHeadItLandsOn: a commit deleting a100 lands on main
// after the merge read main's head and before the merge is planned (it is
// made while the merge's diff of theirs reads theirs' leaf). Theirs linked
// an artifact to a100: the plan, made against the head it lands on, sees
// the deletion (the diff from the base to that head), and the merge is a
// dangling_edge conflict — not a merge that drops theirs' edge unasked.
func TestMergePlansOnTheHeadItLandsOn(t *testing.T) {
	ctx := context.Background()
	s, d := hookedMergeStore(t)
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "exp", Ops: []graph.Op{
		put("t1", "note", map[string]any{"by": "theirs"}), link("t1", "cites", "a100")}})
	if err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "c", put("a010", "note", map[string]any{"i": "ours"}))
	key := leafKey(t, s, res.Commit, "t1")
	s.nodes.clear()
	var moved atomic.Bool
	d.on = func() error {
		if !moved.Swap(true) {
			mustCommit(t, s, "c", graph.Op{Op: graph.OpDelete, ID: "a100"})
		}
		return nil
	}
	d.key.Store(&key)
	_, err = s.Merge(ctx, "c", "main", "exp", nil, "", "")
	if !moved.Load() {
		t.Fatal("the hook did not run: main did not move during the merge")
	}
	var ce *replay.ConflictError
	if !errors.As(err, &ce) || len(ce.Conflicts) != 1 || ce.Conflicts[0].Kind != replay.ConflictDanglingEdge || ce.Conflicts[0].ID != "a100" {
		t.Fatalf("merge after main deleted a100: %v, want one dangling_edge conflict on a100", err)
	}
}

// TestMergeFromTheRoot merges two branches whose merge base is the
// context's root commit, whose state is empty: the diffs are the sides
// whole, and the merge takes theirs' artifacts and edges.
func TestMergeFromTheRoot(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	root := mustResolve(t, s, "c", "main")
	if err := s.CreateBranch(ctx, "c", "exp", root.ID); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "c", put("o", "note", map[string]any{}))
	if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "exp", Ops: []graph.Op{
		put("t", "note", map[string]any{}), put("u", "note", map[string]any{}), link("u", "cites", "t")}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Merge(ctx, "c", "main", "exp", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Base != root.ID || len(res.Ops) != 3 || res.Commit.Artifacts != 3 || res.Commit.Edges != 1 {
		t.Fatalf("merge from the root: base %s, %d ops, %d artifacts, %d edges", res.Base.Short(), len(res.Ops), res.Commit.Artifacts, res.Commit.Edges)
	}
	mustCheck(t, s)
}
