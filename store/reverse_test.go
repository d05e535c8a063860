package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// linkWith is link with edge attributes.
func linkWith(from, rel, to, attrs string) graph.Op {
	op := link(from, rel, to)
	op.Attrs = json.RawMessage(attrs)
	return op
}

// edgesString renders edges with their attributes in key order, for
// comparison.
func edgesString(es []*graph.Edge) string {
	es = slices.Clone(es)
	slices.SortFunc(es, func(x, y *graph.Edge) int {
		return strings.Compare(x.From+"\x00"+x.Rel+"\x00"+x.To, y.From+"\x00"+y.Rel+"\x00"+y.To)
	})
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s -%s-> %s %s; ", e.From, e.Rel, e.To, e.Attrs)
	}
	return b.String()
}

// TestReverseIndexApart: a map of format 4 holds no reverse edges, and
// the edges arriving at an artifact, read through the context's reverse
// index, are exactly those of the state at each commit — not an edge
// unlinked since, not one of another branch, with the attributes the
// commit gave it.
func TestReverseIndexApart(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	var commits []*replay.Commit
	commits = append(commits, mustCommit(t, s, "c",
		put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		put("c", "claim", map[string]any{"v": 3}), put("d", "claim", map[string]any{"v": 4}),
		linkWith("b", "derived_from", "a", `{"w":1}`), link("c", "derived_from", "a"), link("c", "supported_by", "a")))
	if err := s.CreateBranch(ctx, "c", "side", commits[0].ID); err != nil {
		t.Fatal(err)
	}
	res, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: "side", Author: "t", Message: "m", Ops: []graph.Op{link("d", "derived_from", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	side := res.Commit
	commits = append(commits, mustCommit(t, s, "c",
		graph.Op{Op: graph.OpUnlink, From: "c", Rel: "derived_from", To: "a"}, linkWith("b", "derived_from", "a", `{"w":2}`)))
	commits = append(commits, mustCommit(t, s, "c", graph.Op{Op: graph.OpDelete, ID: "d"}, link("c", "derived_from", "b")))
	commits = append(commits, side)

	cs, err := s.ctxState("c")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range commits {
		if c.Index == nil || !c.Index.ReverseApart {
			t.Fatalf("commit %d: index %+v, want the reverse edges apart", i, c.Index)
		}
		err := trieWalk(s, trieChild{id: c.Root, count: c.RootCount}, func(k, _ []byte) error {
			if k[0] == 'r' {
				return fmt.Errorf("the map holds the reverse edge %q", k)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		whole, err := s.loadState(context.Background(), s, cs.info, c, prefetchWorkers)
		if err != nil {
			t.Fatal(err)
		}
		m := newMapSource(context.Background(), s, "c", c)
		for _, id := range []string{"a", "b", "c", "d", "nobody"} {
			got, want := edgesString(m.In(id)), edgesString(whole.In(id))
			if got != want {
				t.Errorf("commit %d: edges into %q through the reverse index: %s; the state has %s", i, id, got, want)
			}
		}
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The index keeps what was unlinked and what the other branch linked;
	// the reads above skipped them.
	n, recs := 0, 0
	if err := s.kv.Scan(ctx, prefixRev("c", "a"), nil, 0, func(_, v []byte) error {
		recs++
		return decodeRevVal("a", v, func(graph.EdgeKey) { n++ })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 4 || recs != 2 {
		t.Fatalf("the reverse index holds %d edges into a in %d records, want 4 (b, c twice, d on the side branch) in 2 (one per commit that linked them)", n, recs)
	}
	mustCheck(t, s)
}

// TestReverseIndexCheck: fsck finds a reverse-index entry missing at a
// branch head, and a reverse edge left in a map whose record says its
// reverse edges are apart.
func TestReverseIndexCheck(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	first := mustCommit(t, s, "c", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		put("x", "claim", map[string]any{"v": 3}), link("b", "derived_from", "a"), link("x", "derived_from", "a"))
	mustCheck(t, s)
	// The record names x's edge only.
	partial := reverseRecords("c", first.ID, []graph.EdgeKey{{From: "x", Rel: "derived_from", To: "a"}})[0]
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{partial}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Defects, func(d Defect) bool { return strings.Contains(d.Detail, `lacks the edge "b" -derived_from-> "a"`) }) {
		t.Fatalf("fsck did not find the edge missing from its record: %v", rep.Defects)
	}
	// No record at all.
	if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{partial.Key}}); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Defects, func(d Defect) bool { return strings.Contains(d.Detail, "reverse index lacks the edge") }) {
		t.Fatalf("fsck did not find the missing reverse-index entry: %v", rep.Defects)
	}

	// The same commit written as format 3 did, its record then claiming
	// the reverse edges apart.
	s2 := openTest(t, t.TempDir())
	defer s2.Close()
	s2.writeReverseInMap = true
	if _, err := s2.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	c := mustCommit(t, s2, "c", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		link("b", "derived_from", "a"))
	if c.Index.ReverseApart {
		t.Fatal("a store writing as format 3 kept the reverse edges apart")
	}
	mustCheck(t, s2)
	forged := *c
	x := *c.Index
	x.ReverseApart = true
	forged.Index = &x
	rec, err := json.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyCommit("c", c.ID), Value: rec}, reverseRecords("c", c.ID, []graph.EdgeKey{{From: "b", Rel: "derived_from", To: "a"}})[0]}}); err != nil {
		t.Fatal(err)
	}
	rep, err = s2.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Defects, func(d Defect) bool { return bytes.Contains([]byte(d.Detail), []byte("state map")) }) {
		t.Fatalf("fsck did not find the reverse edge left in the map: %v", rep.Defects)
	}
}

// TestFormat3StoreKeepsReverseInMap: a store of format 3 opens stamped 4;
// commits onto its maps keep their reverse edges in the map (one map never
// mixes the two layouts) and read the same, a new context keeps them
// apart, and fsck finds nothing.
func TestFormat3StoreKeepsReverseInMap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	s.writeReverseInMap = true
	if _, err := s.CreateContext(ctx, "old", ModeObserve); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, s, "old", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		link("b", "derived_from", "a"))
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{{Key: keyMetaFormat(), Value: []byte(formatReverseInMap)}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir)
	defer s.Close()
	if v, err := s.kv.Get(ctx, keyMetaFormat()); err != nil || string(v) != FormatVersion {
		t.Fatalf("format after open: %q, %v; want %q", v, err, FormatVersion)
	}
	c := mustCommit(t, s, "old", put("c", "claim", map[string]any{"v": 3}), linkWith("c", "supported_by", "a", `{"w":3}`),
		graph.Op{Op: graph.OpUnlink, From: "b", Rel: "derived_from", To: "a"})
	if c.Index.ReverseApart {
		t.Fatal("a commit onto a map of format 3 moved its reverse edges apart")
	}
	rev := 0
	if err := trieWalk(s, trieChild{id: c.Root, count: c.RootCount}, func(k, _ []byte) error {
		if k[0] == 'r' {
			rev++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rev != 1 {
		t.Fatalf("the map holds %d reverse edges, want 1", rev)
	}
	cs, err := s.ctxState("old")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := s.loadState(context.Background(), s, cs.info, c, prefetchWorkers)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := edgesString(newMapSource(context.Background(), s, "old", c).In("a")), edgesString(whole.In("a")); got != want || want == "" {
		t.Fatalf("edges into a through the map: %s; the state has %s", got, want)
	}
	if _, err := s.CreateContext(ctx, "new", ModeObserve); err != nil {
		t.Fatal(err)
	}
	n := mustCommit(t, s, "new", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		link("b", "derived_from", "a"))
	if !n.Index.ReverseApart {
		t.Fatal("a new context's map keeps its reverse edges in the map")
	}
	mustCheck(t, s)
}

// TestRevValues: a reverse-index record decodes to the edges encoded,
// and a malformed record or key is corruption, never a panic.
func TestRevValues(t *testing.T) {
	edges := []graph.EdgeKey{{From: "b", Rel: "derived_from", To: "a"}, {From: "c-ü", Rel: "derived_from", To: "a"}, {From: "b", Rel: "supported_by", To: "a"}}
	var got []graph.EdgeKey
	if err := decodeRevVal("a", encodeRevVal(edges), func(e graph.EdgeKey) { got = append(got, e) }); err != nil || !slices.Equal(got, edges) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	good := encodeRevVal(edges[:1])
	for _, v := range [][]byte{nil, {0}, {5, 'a'}, good[:len(good)-1], append(slices.Clone(good), 1), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if err := decodeRevVal("a", v, func(graph.EdgeKey) {}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("record %x: %v, want corruption", v, err)
		}
	}
	var id hashing.Digest
	if to, err := revTarget("c", keyRev("c", "a\xff", id)); err != nil || to != "a\xff" {
		t.Fatalf("target of a key: %q, %v", to, err)
	}
	for _, k := range [][]byte{prefixRevs("c"), append(prefixRevs("c"), "a\x00short"...), append(prefixRevs("c"), "a"...)} {
		if _, err := revTarget("c", k); !errors.Is(err, ErrCorrupt) {
			t.Errorf("key %q: %v, want corruption", k, err)
		}
	}
}

// TestReverseIndexCheckAcrossBranches: fsck checks the heads of a
// context's branches against its reverse index together, in one pass or
// in several (a head budget that holds one head, or two). A record lost
// from one branch's commit is a defect of that branch's head alone,
// naming the edge — for a target other records still name (side), and
// for one no record names any more (other, found after the pass); each
// agrees with a plain reference (every record read into one set, each
// head's edges looked up in it). A malformed record after a lost one is
// a defect of every head, except that the head lacking an edge still
// names it.
func TestReverseIndexCheckAcrossBranches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"one pass", 0}, {"a head a pass", 48 << 10}, {"two heads a pass", 96 << 10}} {
		t.Run(tc.name, func(t *testing.T) { reverseIndexAcrossBranches(t, tc.cache) })
	}
}

func reverseIndexAcrossBranches(t *testing.T, cacheBytes int64) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: t.TempDir(), Clock: testClock(), CacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	base := mustCommit(t, s, "c", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}),
		link("b", "derived_from", "a"))
	commits := map[string]*replay.Commit{}
	for _, br := range []string{"side", "other", "third"} {
		if err := s.CreateBranch(ctx, "c", br, base.ID); err != nil {
			t.Fatal(err)
		}
		res, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br, Author: "t", Message: "m", Ops: []graph.Op{
			put("y-"+br, "claim", map[string]any{"v": br}), link("y-"+br, "derived_from", "a"),
			put("t-"+br, "claim", map[string]any{"v": br}), link("y-"+br, "derived_from", "t-"+br)}})
		if err != nil {
			t.Fatal(err)
		}
		commits[br] = res.Commit
	}
	mustCommit(t, s, "c", put("z", "claim", map[string]any{"v": 3}), link("z", "derived_from", "b"))
	mustCheck(t, s)
	heads := []string{"main", "side", "other", "third"}
	revDefects := func() map[string]string {
		t.Helper()
		rep, err := s.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range rep.Defects {
			if !strings.Contains(d.Detail, "reverse") {
				continue
			}
			for _, br := range heads {
				if strings.Contains(d.Detail, fmt.Sprintf("head of branch %q", br)) {
					if _, dup := out[br]; dup {
						t.Fatalf("two reverse-index defects of %s: %v", br, rep.Defects)
					}
					out[br] = d.Detail
				}
			}
		}
		return out
	}
	// reference: the edges each head has that no record names.
	reference := func() map[string][]string {
		t.Helper()
		named := map[graph.EdgeKey]bool{}
		if err := s.kv.Scan(ctx, prefixRevs("c"), nil, 0, func(k, v []byte) error {
			to, err := revTarget("c", k)
			if err != nil {
				return err
			}
			return decodeRevVal(to, v, func(e graph.EdgeKey) { named[e] = true })
		}); err != nil {
			t.Fatal(err)
		}
		cs, err := s.ctxState("c")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, br := range heads {
			st, err := s.loadState(context.Background(), s, cs.info, mustResolve(t, s, "c", br), prefetchWorkers)
			if err != nil {
				t.Fatal(err)
			}
			st.RangeEdges(func(e *graph.Edge) bool {
				if !named[e.Key()] {
					out[br] = append(out[br], fmt.Sprintf("%q -%s-> %q", e.From, e.Rel, e.To))
				}
				return true
			})
		}
		return out
	}
	agree := func(want map[string]string) {
		t.Helper()
		got, ref := revDefects(), reference()
		if len(got) != len(want) || len(ref) != len(want) {
			t.Fatalf("reverse-index defects %v, reference %v, want heads %v", got, ref, want)
		}
		for br, edge := range want {
			if !strings.Contains(got[br], edge) || !slices.ContainsFunc(ref[br], func(e string) bool { return strings.Contains(got[br], e) }) {
				t.Fatalf("head %s: defect %q, want it to name %s, one of %v", br, got[br], edge, ref[br])
			}
		}
	}
	lose := func(br, to string) {
		t.Helper()
		key := keyRev("c", to, commits[br].ID)
		if _, err := s.kv.Get(ctx, key); err != nil {
			t.Fatalf("the record of %s's commit for %s: %v", br, to, err)
		}
		if err := s.kv.Commit(ctx, kv.Batch{Deletes: [][]byte{key}}); err != nil {
			t.Fatal(err)
		}
	}
	// side's commit linked y-side to a, which other records name too.
	lose("side", "a")
	agree(map[string]string{"side": `"y-side" -derived_from-> "a"`})
	// other's commit is the only one to link to t-other.
	lose("other", "t-other")
	agree(map[string]string{"side": `"y-side" -derived_from-> "a"`, "other": `"y-other" -derived_from-> "t-other"`})
	// A malformed record after both, under a target sorting last.
	bad := kv.Record{Key: keyRev("c", "zzz", base.ID), Value: []byte{0xff}}
	if err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{bad}}); err != nil {
		t.Fatal(err)
	}
	got := revDefects()
	if len(got) != len(heads) || !strings.Contains(got["side"], `"y-side" -derived_from-> "a"`) {
		t.Fatalf("with a malformed record: %v, want every head, side still naming its edge", got)
	}
	for _, br := range []string{"main", "other", "third"} {
		if !strings.Contains(got[br], "reverse") || strings.Contains(got[br], "lacks") {
			t.Fatalf("with a malformed record, %s: %q, want the malformed record", br, got[br])
		}
	}
}

// revScanFails is a driver whose scans of a reverse index fail with
// errInjected once fail is set: an I/O error, not corruption.
type revScanFails struct {
	*memkv.Driver
	fail atomic.Bool
}

func (d *revScanFails) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	if d.fail.Load() && bytes.HasPrefix(prefix, []byte(pRev)) {
		return errInjected
	}
	return d.Driver.Scan(ctx, prefix, start, limit, fn)
}

// TestReverseIndexReadFailureFailsTheCheck: a read of the reverse index
// that fails with an I/O error makes fsck fail (the check could not run),
// rather than report the heads as defective.
func TestReverseIndexReadFailureFailsTheCheck(t *testing.T) {
	ctx := context.Background()
	d := &revScanFails{Driver: memkv.New()}
	s := openWithContext(t, Options{Driver: d, ReserveBytes: -1})
	mustCommit(t, s, "c", put("a", "claim", map[string]any{"v": 1}), put("b", "claim", map[string]any{"v": 2}), link("b", "derived_from", "a"))
	mustCheck(t, s)
	d.fail.Store(true)
	rep, err := s.Check(ctx)
	if !errors.Is(err, errInjected) {
		t.Fatalf("check with the reverse index unreadable: %v, defects %v; want the injected error", err, rep.Defects)
	}
}
