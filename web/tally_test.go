package web

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestTalliedKeepsTheSmallestIDs: after any sequence of adds and removes,
// a tallied key counts its members, its samples are the smallest of them
// in natural order, and remove reports false exactly when fewer than
// min(clusterSamples, n) are left to show — checked against the sorted
// members.
func TestTalliedKeepsTheSmallestIDs(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		var c tallied
		var members []string
		for step := range 200 {
			if len(members) > 0 && r.IntN(3) == 0 {
				id := members[r.IntN(len(members))]
				members = slices.DeleteFunc(members, func(m string) bool { return m == id })
				ok := c.remove(id)
				if want := len(c.samples) >= min(clusterSamples, len(members)); ok != want {
					t.Fatalf("seed %d step %d: remove(%s) = %v with %d samples of %d", seed, step, id, ok, len(c.samples), len(members))
				}
				if !ok {
					break // the caller counts again: nothing more is promised
				}
			} else {
				id := fmt.Sprintf("s%d", r.IntN(1000))
				if slices.Contains(members, id) {
					continue
				}
				members = append(members, id)
				c.add(id)
			}
			naturalSort(members)
			if c.n != len(members) {
				t.Fatalf("seed %d step %d: n %d, %d members", seed, step, c.n, len(members))
			}
			if len(c.samples) > tallySamples || !slices.Equal(c.samples, members[:len(c.samples)]) {
				t.Fatalf("seed %d step %d: samples %v, members begin %v", seed, step, c.samples, members[:min(len(members), tallySamples)])
			}
		}
	}
}

// tallyOps returns a random small commit over a context loadBig(n)
// wrote: new and rewritten claims (another type or producer now and
// then), gate verdicts turned FAILED or RETRIEVED (whose dependents'
// trust changes with them), deletes, links and unlinks.
func tallyOps(t *testing.T, r *rand.Rand, n, k int) []graph.Op {
	id := func() string {
		if r.IntN(4) == 0 {
			return fmt.Sprintf("x%03d", r.IntN(60))
		}
		return fmt.Sprintf("a%05d", r.IntN(n))
	}
	rels := []string{"derived_from", "supported_by", "cites"}
	var ops []graph.Op
	for range 1 + r.IntN(5) {
		switch r.IntN(7) {
		case 0, 1:
			typ := []string{"claim", "note", "summary"}[r.IntN(3)]
			by := []string{"agent", "other", ""}[r.IntN(3)]
			ops = append(ops, putOp(t, id(), typ, by, map[string]any{"k": k, "v": r.IntN(1e6)}))
		case 2:
			verdict, reason := "RETRIEVED", ""
			if r.IntN(2) == 0 {
				verdict, reason = "FAILED", "transport.status_5xx"
			}
			f := fmt.Sprintf("a%05d", r.IntN(n/10)*10)
			ops = append(ops, putOp(t, f, "fetch_verdict", "gate/v1", map[string]any{"verdict": verdict, "reason": reason, "url": "https://example.com/" + f, "k": k}))
		case 3:
			ops = append(ops, graph.Op{Op: graph.OpDelete, ID: id()})
		case 4:
			ops = append(ops, linkOp(id(), rels[r.IntN(len(rels))], id()))
		case 5:
			ops = append(ops, graph.Op{Op: graph.OpUnlink, From: id(), Rel: rels[r.IntN(len(rels))], To: id()})
		case 6:
			// An edge of loadBig's linked again with other attributes:
			// changed, not added or removed.
			i := r.IntN(n/10)*10 + 1 + r.IntN(9)
			op := linkOp(fmt.Sprintf("a%05d", i), "derived_from", fmt.Sprintf("a%05d", i-i%10))
			op.Attrs = json.RawMessage(fmt.Sprintf(`{"w":%d}`, r.IntN(3)))
			ops = append(ops, op)
		}
	}
	return ops
}

// TestDerivedTallyMatchesCounted is the oracle of derivedTally: over a
// context of 2,000 artifacts changed by random small commits (trust
// moving with gate verdicts, artifacts changing type and producer,
// deletes, links, unlinks, edges whose attributes change), the overview
// derived from the tally of an
// earlier or later commit through the diff of the two is the overview
// counted over the whole state, for each grouping — and most of them are
// derived, not counted again.
func TestDerivedTallyMatchesCounted(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const n = 2000
	commits := []*replay.Commit{loadBig(t, st, "c", n)}
	r := rand.New(rand.NewPCG(11, 3))
	for k := 0; len(commits) < 40; k++ {
		res, err := st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: fmt.Sprint(k), Ops: tallyOps(t, r, n, k)})
		if err != nil {
			continue // a cycle, a missing end, a delete of nothing: refused, nothing written
		}
		commits = append(commits, res.Commit)
	}
	attrsChanged := 0
	for i := 1; i < len(commits); i++ {
		d, err := st.DiffStates(ctx, commits[i-1], commits[i])
		if err != nil {
			t.Fatal(err)
		}
		attrsChanged += len(d.EdgesChanged)
	}
	if attrsChanged == 0 {
		t.Fatal("no commit changes an edge's attributes: the oracle does not cover them")
	}
	counted := func(c *replay.Commit, group string) (*tally, *clusterSet) {
		var tl *tally
		var cs *clusterSet
		if err := st.ReadSparse(ctx, "c", c, func(v *store.View) error {
			tl = buildTally(v.State, unconfirmedOf(v.Trust).status, group)
			cs = tl.clusterSet(v.State.Relations())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return tl, cs
	}
	s := New(Options{Store: st, Logger: quietLogger()}).(*server)
	tries, derived := 0, 0
	for _, group := range []string{"type", "producer", "trust"} {
		for i := 1; i < len(commits); i++ {
			// From the commit before, one some commits back, or one after.
			from := commits[i-1]
			switch r.IntN(3) {
			case 1:
				from = commits[max(0, i-1-r.IntN(6))]
			case 2:
				if i+1 < len(commits) {
					from = commits[i+1]
				}
			}
			base, _ := counted(from, group)
			s.tallies.Put("c\x00"+group, &keptTally{commit: from, t: base})
			wantT, want := counted(commits[i], group)
			var got *clusterSet
			var gotT *tally
			ok := false
			if err := st.ReadSparse(ctx, "c", commits[i], func(v *store.View) error {
				gotT, ok = s.derivedTally(ctx, v, group)
				if ok {
					got = gotT.clusterSet(v.State.Relations())
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			tries++
			if !ok {
				continue
			}
			derived++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("group %s, commit %d from %s: derived overview\n%s\ncounted\n%s", group, i, from.ID.Short(), dumpClusters(got), dumpClusters(want))
			}
			if !reflect.DeepEqual(gotT.edges, wantT.edges) || len(gotT.keys) != len(wantT.keys) {
				t.Fatalf("group %s, commit %d: derived tally %d keys, edges %v; counted %d keys, edges %v", group, i, len(gotT.keys), gotT.edges, len(wantT.keys), wantT.edges)
			}
			for key, c := range wantT.keys {
				g := gotT.keys[key]
				if g == nil || g.n != c.n || !slices.Equal(g.samples, c.samples[:len(g.samples)]) {
					t.Fatalf("group %s, commit %d, key %v: derived %+v, counted %+v", group, i, key, g, c)
				}
			}
		}
	}
	if derived < tries*2/3 {
		t.Fatalf("%d of %d overviews derived: the oracle barely ran", derived, tries)
	}
	t.Logf("%d of %d overviews derived", derived, tries)
}

// dumpClusters writes an overview for a failure message.
func dumpClusters(cs *clusterSet) string {
	var b strings.Builder
	for i, c := range cs.clusters {
		fmt.Fprintf(&b, "  %d %v n=%d samples=%v\n", i, c.key, c.n, c.samples)
	}
	for _, e := range cs.edges {
		fmt.Fprintf(&b, "  %d->%d dep=%v n=%d %v\n", e.from, e.to, e.dep, e.n, e.rels)
	}
	return b.String()
}

// TestOverviewDerivedAfterACommit: over HTTP, the overview of a big
// context after a commit is derived from the one drawn before it, and
// counts what the commit added.
func TestOverviewDerivedAfterACommit(t *testing.T) {
	st := openStore(t)
	loadBig(t, st, "big", 600)
	h := New(Options{Store: st, Logger: quietLogger()})
	s := h.(*server)
	_, body := get(t, h, "/ui/contexts/big/graph")
	if !strings.Contains(body, "600 artifacts in") {
		t.Fatalf("no overview:\n%s", excerpt(body, "graph-count"))
	}
	commit(t, st, "big", "", "t", "one more", putOp(t, "z1", "claim", "agent", map[string]any{"z": 1}), linkOp("z1", "derived_from", "a00010"))
	before := s.derivations.Load()
	_, body = get(t, h, "/ui/contexts/big/graph")
	if !strings.Contains(body, "601 artifacts in") {
		t.Fatalf("the overview after a commit:\n%s", excerpt(body, "graph-count"))
	}
	if got := s.derivations.Load() - before; got != 1 {
		t.Fatalf("%d overviews derived after one commit, want 1", got)
	}
	checkHTML(t, "derived overview", body)
}

// TestOverviewNoProducerClusterLists: the overview grouped by producer
// names the artifacts without one "(none)", and its cluster's link lists
// exactly those.
func TestOverviewNoProducerClusterLists(t *testing.T) {
	st := openStore(t)
	var ops []graph.Op
	for i := range 300 {
		by := "agent"
		if i%3 == 0 {
			by = ""
		}
		ops = append(ops, putOp(t, fmt.Sprintf("n%d", i), "claim", by, map[string]any{"i": i}))
	}
	loadContext(t, st, "c", ops...)
	h := New(Options{Store: st, Logger: quietLogger()})
	_, body := get(t, h, "/ui/contexts/c/graph?group=producer")
	link := "producer=%28none%29"
	if !strings.Contains(body, link) {
		t.Fatalf("no link to the (none) cluster's list:\n%s", excerpt(body, "clusters"))
	}
	_, body = get(t, h, "/ui/contexts/c?status=confirmed&"+link)
	if !strings.Contains(body, "Artifacts 1–100 of 100 matching") {
		t.Fatalf("the (none) cluster's list:\n%s", excerpt(body, "list-count"))
	}
}

// TestOverviewProducerNamedOtherClusterLists: a producer may call itself
// "(other)", the name of the overview's merged cluster; its own cluster's
// link still lists exactly its artifacts, not every producer's of its
// trust status.
func TestOverviewProducerNamedOtherClusterLists(t *testing.T) {
	st := openStore(t)
	var ops []graph.Op
	for i := range 300 {
		by := "agent"
		if i%3 == 0 {
			by = otherGroup
		}
		ops = append(ops, putOp(t, fmt.Sprintf("n%d", i), "claim", by, map[string]any{"i": i}))
	}
	loadContext(t, st, "c", ops...)
	h := New(Options{Store: st, Logger: quietLogger()})
	_, body := get(t, h, "/ui/contexts/c/graph?group=producer")
	m := regexp.MustCompile(`<a href="([^"]*)">` + regexp.QuoteMeta(otherGroup) + `</a>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no cluster of the producer %q:\n%s", otherGroup, excerpt(body, "clusters"))
	}
	link := html.UnescapeString(m[1])
	_, body = get(t, h, link)
	if !strings.Contains(body, "Artifacts 1–100 of 100 matching") {
		t.Fatalf("the %q cluster's link %s lists:\n%s", otherGroup, link, excerpt(body, "list-count"))
	}
}

// TestOverviewMergedClusterReadsApart: past maxClusters the smallest
// clusters are merged; the merged one is called by how many it merged
// ("⟨12 other producers⟩"), in the table marked apart (em.merged) and in
// the drawing drawn dashed, while a producer that calls itself
// "(other)" keeps its own plain row.
func TestOverviewMergedClusterReadsApart(t *testing.T) {
	st := openStore(t)
	var ops []graph.Op
	const producers = maxClusters + 10
	for i := range 400 {
		by := fmt.Sprintf("step-%02d", i%producers)
		if i%8 == 0 {
			by = otherGroup
		}
		ops = append(ops, putOp(t, fmt.Sprintf("n%d", i), "claim", by, map[string]any{"i": i}))
	}
	loadContext(t, st, "c", ops...)
	h := New(Options{Store: st, Logger: quietLogger()})
	_, body := get(t, h, "/ui/contexts/c/graph?group=producer")
	merged := regexp.MustCompile(`<em class="merged"[^>]*>⟨(\d+) other producers⟩</em>`).FindStringSubmatch(body)
	if merged == nil {
		t.Fatalf("no merged cluster marked apart:\n%s", excerpt(body, "clusters"))
	}
	// Every producer but the (other) one has fewer artifacts than it; the
	// clusters drawn are maxClusters-3 ranked ones and the merged one.
	if n, _ := strconv.Atoi(merged[1]); n != producers+1-(maxClusters-3) {
		t.Errorf("the merged cluster says %s clusters, want %d", merged[1], producers+1-(maxClusters-3))
	}
	if !regexp.MustCompile(`<a href="[^"]*">` + regexp.QuoteMeta(otherGroup) + `</a>`).MatchString(body) {
		t.Fatalf("the producer %q lost its plain row:\n%s", otherGroup, excerpt(body, "clusters"))
	}
	if !regexp.MustCompile(`other producers[^<]*</text>`).MatchString(body) || !strings.Contains(body, "stroke-dasharray") {
		t.Errorf("the drawing does not show the merged cluster dashed:\n%s", excerpt(body, "<svg"))
	}
}

// TestDerivedTallyAcrossDefinitions: an overview derived between a
// commit that defines a type and one that does not (a branch and main)
// counts the trust each side's own definitions give — the diff's trust
// once judged both sides by one side's, and the derived overview showed
// an artifact confirmed that is quarantined.
func TestDerivedTallyAcrossDefinitions(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	loadBig(t, st, "c", 2000)
	head := commit(t, st, "c", "", "t", "y1",
		putOp(t, "y1", "claim", "agent", map[string]any{"y": 1}), linkOp("y1", "derived_from", "a00000"),
		putOp(t, "q1", "claim", "agent", map[string]any{"q": 1}), linkOp("q1", "derived_from", "a00000"), linkOp("q1", "supported_by", "a00011"))
	if err := st.CreateBranch(ctx, "c", "b", head.ID); err != nil {
		t.Fatal(err)
	}
	res, err := st.Commit(ctx, store.CommitRequest{Context: "c", Branch: "b", Author: "t", Message: "mytype",
		Types: []graph.TypeDef{{Name: "mytype", Role: graph.RoleDerived}},
		Ops: []graph.Op{putOp(t, "z1", "mytype", "agent", map[string]any{"z": 1}), putOp(t, "k1", "claim", "agent", map[string]any{"k": 1}),
			linkOp("k1", "derived_from", "z1"), {Op: graph.OpUnlink, From: "y1", Rel: "derived_from", To: "a00000"}, linkOp("y1", "supported_by", "k1")}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Logger: quietLogger()}).(*server)
	for _, p := range [][2]*replay.Commit{{res.Commit, head}, {head, res.Commit}} {
		for _, group := range []string{"type", "producer", "trust"} {
			var base *tally
			if err := st.ReadSparse(ctx, "c", p[0], func(v *store.View) error {
				base = buildTally(v.State, unconfirmedOf(v.Trust).status, group)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			s.tallies.Put("c\x00"+group, &keptTally{commit: p[0], t: base})
			if err := st.ReadSparse(ctx, "c", p[1], func(v *store.View) error {
				got, ok := s.derivedTally(ctx, v, group)
				if !ok {
					return fmt.Errorf("group %s: not derived", group)
				}
				if want := buildClusters(v.State, unconfirmedOf(v.Trust).status, group); !reflect.DeepEqual(got.clusterSet(v.State.Relations()), want) {
					return fmt.Errorf("group %s, %s -> %s: derived\n%s\ncounted\n%s", group, p[0].ID.Short(), p[1].ID.Short(), dumpClusters(got.clusterSet(v.State.Relations())), dumpClusters(want))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOtherClusterOffersTheFirstSamples: past maxClusters keys the
// smallest merge into one "(other)" cluster per status, which counts
// them all and offers the first clusterSamples of their ids in natural
// order.
func TestOtherClusterOffersTheFirstSamples(t *testing.T) {
	st := graph.NewState(nil)
	var ops []graph.Op
	for k := range 50 {
		for i := range 60 - k { // key k has 60-k artifacts: ranked by count
			ops = append(ops, putOp(t, fmt.Sprintf("p%d-%d", k, i), fmt.Sprintf("type%02d", k), "agent", map[string]any{"i": i}))
		}
	}
	if _, err := st.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	cs := buildClusters(st, func(string) graph.Status { return graph.StatusConfirmed }, "type")
	other := cs.clusters[len(cs.clusters)-1]
	if other.key.value != otherGroup || len(cs.clusters) != maxClusters-2 {
		t.Fatalf("%d clusters, the last %v: want %d, the last (other)", len(cs.clusters), other.key, maxClusters-2)
	}
	var merged []string
	n := 0
	for k := maxClusters - 3; k < 50; k++ {
		for i := range 60 - k {
			merged = append(merged, fmt.Sprintf("p%d-%d", k, i))
		}
		n += 60 - k
	}
	naturalSort(merged)
	if other.n != n || !slices.Equal(other.samples, merged[:clusterSamples]) {
		t.Fatalf("(other): %d artifacts, samples %v; want %d, %v", other.n, other.samples, n, merged[:clusterSamples])
	}
}

// TestTallyEdgesSplitInKeyOrder: over a state map (a view at an old
// commit, and a head with commits layered over its map after a restart),
// buildTally's edge pass is split in two halves of the edges' key order,
// and over a map of at least the store's split size its pass over the
// artifacts too (graph.State.ArtifactHalves); its counts, samples and
// edge counts equal a plain count over every artifact and edge of the
// state, for each grouping — nothing counted twice or left out at a
// split.
func TestTallyEdgesSplitInKeyOrder(t *testing.T) {
	for _, n := range []int{3000, 9000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testTallySplit(t, n) })
	}
}

func testTallySplit(t *testing.T, n int) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *store.Store {
		st, err := store.Open(ctx, store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	loadBig(t, st, "c", n)
	// An id in the second half of the byte order whose natural place is
	// among the first claims': merging the halves' samples must sort.
	first := commit(t, st, "c", "", "agent", "short id", putOp(t, "a05", "claim", "agent", map[string]any{"text": "short"}), linkOp("a05", "derived_from", "a00000"))
	r := rand.New(rand.NewPCG(5, 35))
	for k := 0; k < 30; k++ {
		_, _ = st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: fmt.Sprint(k), Ops: tallyOps(t, r, n, k)})
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open()
	defer st.Close()
	for k := 30; k < 33; k++ { // layers over the reopened head's map
		_, _ = st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: fmt.Sprint(k), Ops: tallyOps(t, r, n, k)})
	}
	check := func(v *store.View, where string) {
		if _, ok := v.State.Source().(graph.Ranger); !ok {
			t.Fatalf("%s: the view does not read a state map in key order; the test needs one", where)
		}
		if _, mid := v.State.ArtifactHalves(); (mid != "") != (n >= 8192) {
			t.Fatalf("%s: %d artifacts split at %q", where, n, mid)
		}
		status := unconfirmedOf(v.Trust).status
		for _, group := range []string{"type", "producer", "trust"} {
			got := buildTally(v.State, status, group)
			want := map[tallyEdge]int{}
			for _, e := range v.State.Edges() {
				from, to := v.State.Artifact(e.From), v.State.Artifact(e.To)
				if from == nil || to == nil {
					continue
				}
				want[tallyEdge{clusterKeyOf(from, status(from.ID), group), clusterKeyOf(to, status(to.ID), group), e.Rel}]++
			}
			if !reflect.DeepEqual(got.edges, want) {
				t.Fatalf("%s, group %s: edges\n got %v\nwant %v", where, group, got.edges, want)
			}
			ids := map[clusterKey][]string{}
			for _, a := range v.State.Artifacts() {
				k := clusterKeyOf(a, status(a.ID), group)
				ids[k] = append(ids[k], a.ID)
			}
			if len(got.keys) != len(ids) {
				t.Fatalf("%s, group %s: %d keys, want %d", where, group, len(got.keys), len(ids))
			}
			for k, l := range ids {
				slices.SortFunc(l, compareIDs)
				c := got.keys[k]
				if c == nil || c.n != len(l) || !slices.Equal(c.samples, l[:min(len(l), tallySamples)]) {
					t.Fatalf("%s, group %s, key %v: %+v, want %d artifacts, samples %v", where, group, k, c, len(l), l[:min(len(l), tallySamples)])
				}
			}
		}
	}
	if err := st.ReadSparse(ctx, "c", first, func(v *store.View) error { check(v, "the first commit"); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.Read(ctx, "c", "", func(v *store.View) error { check(v, "the head"); return nil }); err != nil {
		t.Fatal(err)
	}
}
