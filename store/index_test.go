package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// indexOps returns the ops of one random commit against st: puts of
// claims, questions and fetch verdicts that fail now and then (so that
// poison roots come and go and quarantine spreads and lifts), links and
// unlinks between them (half onto a hub, n0), and deletes.
func indexOps(r *rand.Rand, st *graph.State) []graph.Op {
	const nids = 24
	id := func() string { return "n" + strconv.Itoa(r.IntN(nids)) }
	ids := st.ArtifactIDs()
	existing := func() string {
		if len(ids) > 0 && r.IntN(20) > 0 {
			return ids[r.IntN(len(ids))]
		}
		return id()
	}
	putOp := func(x string) graph.Op {
		switch r.IntN(4) {
		case 0:
			v := [...]string{"RETRIEVED", "FAILED", "BLOCKED"}[r.IntN(3)]
			return put(x, "fetch_verdict", map[string]any{"verdict": v, "reason": "r" + strconv.Itoa(r.IntN(3)), "url": "https://example.test/" + x})
		case 1:
			return put(x, "question", map[string]any{"q": r.IntN(3)})
		}
		return put(x, "claim", map[string]any{"v": r.IntN(3)})
	}
	var ops []graph.Op
	unlinked := map[graph.EdgeKey]bool{}
	for range 1 + r.IntN(6) {
		switch k := r.IntN(10); {
		case k < 3:
			ops = append(ops, putOp(id()))
		case k < 7:
			to := existing()
			if r.IntN(2) == 0 {
				to = "n0"
			}
			if len(ids) < 2 || st.Artifact(to) == nil {
				ops = append(ops, putOp(id()))
				continue
			}
			rel := [...]string{"derived_from", "supported_by", "mentions"}[r.IntN(3)]
			if from := existing(); from != to && st.Artifact(from) != nil {
				ops = append(ops, link(from, rel, to))
			}
		case k < 9:
			if es := st.Edges(); len(es) > 0 {
				if e := es[r.IntN(len(es))]; !unlinked[e.Key()] {
					unlinked[e.Key()] = true
					ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
				}
			}
		default:
			x := existing()
			if x == "n0" || st.Artifact(x) == nil {
				continue // the hub stays
			}
			for _, e := range append(st.Out(x), st.In(x)...) {
				if !unlinked[e.Key()] {
					unlinked[e.Key()] = true
					ops = append(ops, graph.Op{Op: graph.OpUnlink, From: e.From, Rel: e.Rel, To: e.To})
				}
			}
			ops = append(ops, graph.Op{Op: graph.OpDelete, ID: x})
		}
	}
	return ops
}

// TestIndexFollowsCommits: after every commit of random runs — poison
// roots made and lifted, quarantine spreading through a hub, deletes,
// a second branch — the index the commit's state map holds (trust
// entries, and reverse edges in a map of format 3), the context's reverse
// index (format 4) and the sizes its record keeps are exactly those of
// its state computed afresh (checkIndex), and fsck agrees at the end.
func TestIndexFollowsCommits(t *testing.T) {
	ctx := context.Background()
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	unconfirmed := 0
	for seed := range seeds {
		s := openTest(t, t.TempDir())
		// Odd seeds write as format 3 did: reverse edges in the map.
		s.writeReverseInMap = seed%2 == 1
		ctxID := fmt.Sprintf("c%d", seed)
		if _, err := s.CreateContext(ctx, ctxID, ModeObserve); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		commits := []*replay.Commit{mustCommit(t, s, ctxID, put("n0", "fetch_verdict", map[string]any{"verdict": "FAILED", "url": "https://example.test/hub"}))}
		for i := range 60 {
			branch := "main"
			if i >= 30 && i%2 == 1 {
				branch = "side"
			}
			if i == 30 {
				if err := s.CreateBranch(ctx, ctxID, "side", commits[15].ID); err != nil {
					t.Fatal(err)
				}
			}
			ops := []graph.Op{put("n0", "fetch_verdict", map[string]any{"verdict": [...]string{"RETRIEVED", "FAILED"}[r.IntN(2)], "url": "https://example.test/hub"})}
			if r.IntN(4) > 0 {
				ops = nil // the hub's verdict changes now and then
			}
			if err := s.Read(ctx, ctxID, branch, func(v *View) error { ops = append(ops, indexOps(r, v.State)...); return nil }); err != nil {
				t.Fatal(err)
			}
			res, err := s.Commit(ctx, CommitRequest{Context: ctxID, Branch: branch, Author: "t", Message: "m", Ops: ops})
			if err != nil {
				continue // a cycle or a dangling link: refused, as it should be
			}
			c := res.Commit
			commits = append(commits, c)
			cs, err := s.ctxState(ctxID)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.loadState(context.Background(), s, cs.info, c, prefetchWorkers)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.checkIndex(ctx, ctxID, c, st); err != nil {
				t.Fatalf("seed %d commit %d: %v", seed, i, err)
			}
			if c.Index.ReverseApart == s.writeReverseInMap {
				t.Fatalf("seed %d commit %d: reverse edges apart %v, the store writes them in the map: %v", seed, i, c.Index.ReverseApart, s.writeReverseInMap)
			}
			unconfirmed += c.Index.PoisonRoots + c.Index.Quarantined
		}
		if len(commits) < 30 {
			t.Fatalf("seed %d: only %d of 60 commits accepted; the generator is too weak", seed, len(commits))
		}
		mustCheck(t, s)
		s.Close()
	}
	if unconfirmed == 0 {
		t.Fatal("no commit had an unconfirmed artifact; the generator is too weak")
	}
}

// TestIndexValues: trust values and reverse-edge keys decode to what was
// encoded, and malformed ones are corruption, never a panic.
func TestIndexValues(t *testing.T) {
	for _, tc := range []struct {
		e      graph.TrustEntry
		reason string
	}{
		{graph.TrustEntry{Base: false}, "fetch failed: HTTP 503"},
		{graph.TrustEntry{Base: false, Bad: 3}, ""},
		{graph.TrustEntry{Base: true, Bad: 1}, ""},
		{graph.TrustEntry{Base: true, Bad: 1 << 20}, ""},
	} {
		v := encodeTrustVal(tc.e, tc.reason)
		e, reason, err := decodeTrustVal(v)
		if err != nil || e != tc.e || reason != tc.reason {
			t.Fatalf("%+v %q: decoded %+v %q, %v", tc.e, tc.reason, e, reason, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {2, 0}, {1, 0}, {1, 1, 'x'}, {0, 0x80}, {1, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, _, err := decodeTrustVal(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trust value %x: %v, want corruption", bad, err)
		}
	}
	k := graph.EdgeKey{From: "claim-1", Rel: "derived_from", To: "doc-9"}
	if got, err := splitRevKey(tkRev(k)); err != nil || got != k {
		t.Fatalf("reverse key of %s: %v, %v", k, got, err)
	}
	if !bytes.HasPrefix(tkRev(k), append([]byte("r"+k.To), 0)) {
		t.Fatal("a reverse key does not start with the edge's target")
	}
	if _, err := splitRevKey([]byte("rno-separators")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("malformed reverse key: %v", err)
	}
}

// checkIndex is fsck's check of one head of context ctxID at commit c,
// for tests: checkMapIndex, and for a map whose reverse edges are apart
// checkReverseIndex.
func (s *Store) checkIndex(ctx context.Context, ctxID string, c *replay.Commit, st *graph.State) error {
	if c.Index != nil && c.Index.ReverseApart {
		if err := s.checkReverseIndex(ctx, ctxID, st); err != nil {
			return err
		}
	}
	return s.checkMapIndex(ctx, c, st)
}

// checkReverseIndex checks that the reverse index of context ctxID names
// every edge of st, a state of that context loaded whole
// (checkReverseIndexOf of st alone).
func (s *Store) checkReverseIndex(ctx context.Context, ctxID string, st *graph.State) error {
	errs, err := s.checkReverseIndexOf(ctx, ctxID, []*graph.State{st})
	if errs[0] != nil {
		return errs[0]
	}
	return err
}
