package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestSlowCommitHoldsUpNoOtherContext: while one context's long commit
// is decided, one-artifact commits to other contexts are answered —
// whichever contexts they are. "slow" and "quick" are a pair that shared
// a committer when contexts were spread over four by a hash of their ids:
// then every write to "quick" waited for the whole of "slow"'s commit.
func TestSlowCommitHoldsUpNoOtherContext(t *testing.T) {
	ctx := context.Background()
	s := openUnsynced(t)
	others := []string{"quick", "fast", "other", "tenant-b"}
	for _, id := range append([]string{"slow"}, others...) {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	const n = 20000
	ops := make([]graph.Op, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("s%05d", i)
		ops = append(ops, hcPut(id, "claim"))
		if i > 0 {
			ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("s%05d", i/2)})
		}
	}
	slow := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Commit(ctx, CommitRequest{Context: "slow", Ops: ops})
		slow <- err
	}()
	time.Sleep(20 * time.Millisecond) // the slow commit is taken first
	type took struct {
		id    string
		round int
		d     time.Duration
	}
	var lat []took
	for round := range 3 {
		for _, id := range others {
			t0 := time.Now()
			if _, err := s.Commit(ctx, CommitRequest{Context: id, Ops: []graph.Op{hcPut(fmt.Sprintf("q%d", round), "claim")}}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, took{id, round, time.Since(t0)})
		}
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	for _, l := range lat {
		if l.d > d/4 {
			t.Errorf("the commit to %q (round %d) took %v while the slow commit of %d ops took %v: it waited for it",
				l.id, l.round, l.d.Round(time.Millisecond), len(ops), d.Round(time.Millisecond))
		}
	}
}

// TestManyWritersOverContexts: writers on several contexts at once, four
// on each, lose and duplicate no commit: every context ends with each
// artifact written and one commit per write, its log a chain of first
// parents in sequence order.
func TestManyWritersOverContexts(t *testing.T) {
	ctx := context.Background()
	s := openUnsynced(t)
	ids := []string{"a", "b", "c", "d", "e"}
	for _, id := range ids {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	const writers, each = 4, 40
	var wg sync.WaitGroup
	for _, id := range ids {
		for w := range writers {
			wg.Go(func() {
				for k := range each {
					if _, err := s.Commit(ctx, CommitRequest{Context: id, Ops: []graph.Op{hcPut(fmt.Sprintf("w%d-%03d", w, k), "claim")}}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, id := range ids {
		var n int
		var head *replay.Commit
		if err := s.Read(ctx, id, "", func(v *View) error {
			n, head = v.State.NumArtifacts(), v.Commit
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != writers*each {
			t.Fatalf("context %s holds %d artifacts, want %d", id, n, writers*each)
		}
		var log []*replay.Commit
		if err := s.Commits(ctx, id, 0, func(c *replay.Commit) error {
			log = append(log, c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(log) != writers*each+1 || log[len(log)-1].ID != head.ID {
			t.Fatalf("context %s: %d commits, want %d (the root and one a write), the last the head", id, len(log), writers*each+1)
		}
		for i := 1; i < len(log); i++ {
			if len(log[i].Parents) != 1 || log[i].Parents[0] != log[i-1].ID || log[i].Seq != log[i-1].Seq+1 {
				t.Fatalf("context %s: commit %d (seq %d) does not follow commit %d (seq %d)", id, i, log[i].Seq, i-1, log[i-1].Seq)
			}
		}
	}
}

// TestFullQueueWaitsForRoom: a context's queue holds maxQueued requests;
// a submit beyond waits for the committer to take a group (and then
// lands), or gives up with its own context without being committed. The
// queue is filled while a committer owns the context, as a busy one
// would leave it, and then given back.
func TestFullQueueWaitsForRoom(t *testing.T) {
	ctx := context.Background()
	s := openUnsynced(t)
	if _, err := s.CreateContext(ctx, "busy", ModeObserve); err != nil {
		t.Fatal(err)
	}
	q := &ctxQueue{room: make(chan struct{}), owned: true}
	for k := range maxQueued {
		req := CommitRequest{Context: "busy", Branch: DefaultBranch, Ops: []graph.Op{hcPut(fmt.Sprintf("q%04d", k), "claim")}}
		q.reqs = append(q.reqs, &writeReq{ctx: ctx, kind: reqCommit, ctxID: "busy", branch: DefaultBranch, commit: req, resp: make(chan writeResp, 1)})
	}
	queued := q.reqs
	s.closeMu.Lock()
	s.queues["busy"] = q
	s.closeMu.Unlock()

	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Commit(gone, CommitRequest{Context: "busy", Ops: []graph.Op{hcPut("given-up", "claim")}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a submit to a full queue with its context cancelled: %v, want context.Canceled", err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := s.Commit(ctx, CommitRequest{Context: "busy", Ops: []graph.Op{hcPut("waited", "claim")}})
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("a submit to a full queue returned (%v) before the committer took anything", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.closeMu.Lock()
	q.owned = false
	s.readyLocked("busy", q)
	s.closeMu.Unlock()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	for _, r := range queued {
		if resp := <-r.resp; resp.err != nil {
			t.Fatal(resp.err)
		}
	}
	if err := s.Read(ctx, "busy", "", func(v *View) error {
		if got := v.State.NumArtifacts(); got != maxQueued+1 {
			return fmt.Errorf("%d artifacts, want %d", got, maxQueued+1)
		}
		if v.State.Artifact("waited") == nil || v.State.Artifact("given-up") != nil {
			return errors.New("the request that waited is missing, or the one given up was committed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupsTakeSmallRequestsTogether: a group takes the requests of the
// ready contexts in the order they came, several contexts' together while
// the group is small (at most bigOps ops in all, no merge); a context
// whose requests would make it big starts a group of its own, so that no
// other context's write waits for its decision; a group's retries come
// first, followed by their context's queued requests.
func TestGroupsTakeSmallRequestsTogether(t *testing.T) {
	s := openUnsynced(t)
	queue := func(reqs ...*writeReq) {
		s.closeMu.Lock()
		defer s.closeMu.Unlock()
		for _, r := range reqs {
			q := s.queues[r.ctxID]
			if q == nil {
				q = &ctxQueue{room: make(chan struct{})}
				s.queues[r.ctxID] = q
			}
			q.reqs = append(q.reqs, r)
			if !q.ready && !q.owned {
				q.ready = true
				s.ready = append(s.ready, r.ctxID)
			}
		}
	}
	asIfRunning(t, s)
	a1, a2, b1, c1, d1, d2, e1 := req("a", 1, false), req("a", 3, false), req("b", bigOps+1, false), req("c", 1, false), req("d", 2, false), req("d", 1, true), req("e", 1, false)
	g1, h1 := req("g", 200, false), req("h", 100, false)
	queue(a1, a2, b1, c1, d1, d2, e1, g1, h1)
	for i, want := range []struct {
		reqs []*writeReq
		ids  []string
	}{
		{[]*writeReq{a1, a2}, []string{"a"}},      // b is big: not behind a's
		{[]*writeReq{b1}, []string{"b"}},          // b alone
		{[]*writeReq{c1}, []string{"c"}},          // d's merge is big: not behind c's
		{[]*writeReq{d1, d2}, []string{"d"}},      // a context's own requests stay together, the merge last
		{[]*writeReq{e1, g1}, []string{"e", "g"}}, // 1 + 200 ops
		{[]*writeReq{h1}, []string{"h"}},          // 100 more would pass bigOps in all
	} {
		batch, ids, _ := s.takeGroup(nil, false, false)
		if !slices.Equal(batch, want.reqs) || !slices.Equal(ids, want.ids) {
			t.Fatalf("group %d: %d requests of %v, want %d of %v", i, len(batch), ids, len(want.reqs), want.ids)
		}
	}
	if batch, ids, _ := s.takeGroup(nil, false, false); batch != nil || ids != nil {
		t.Fatalf("no work left, got %d requests of %v", len(batch), ids)
	}
	// A retry stays ahead of its context's queue, which joins it; a
	// ready small context joins behind them.
	s.closeMu.Lock()
	s.queues["a"] = &ctxQueue{room: make(chan struct{}), owned: true}
	s.closeMu.Unlock()
	a3, f1 := req("a", 1, false), req("f", 1, false)
	queue(a3, f1)
	batch, ids, _ := s.takeGroup([]*writeReq{a1}, false, false)
	if !slices.Equal(batch, []*writeReq{a1, a3, f1}) || !slices.Equal(ids, []string{"a", "f"}) {
		t.Fatalf("after a retry: %d requests of %v, want a's retry, a's queued and f's", len(batch), ids)
	}
}

// TestHoldWaitHoldsUpNoOtherContext: on a shared driver, committers
// waiting for other processes' holds of their contexts (long groups of
// theirs) step out of the running count: a write to a context nobody
// holds is answered meanwhile, even with every one of the four waiting.
func TestHoldWaitHoldsUpNoOtherContext(t *testing.T) {
	ctx := context.Background()
	d := sharedMem{memkv.New()}
	s, err := Open(ctx, Options{Driver: d, Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held := make([]string, smallCommitters)
	for i := range held {
		held[i] = fmt.Sprintf("held%d", i)
	}
	for _, id := range append(held, "free") {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			t.Fatal(err)
		}
	}
	// Another process is in the middle of a group on each held context.
	var holds []kv.Hold
	for _, id := range held {
		h, err := d.Lock(ctx, [][]byte{keyCtx(id)})
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for _, h := range holds {
			h.Release()
		}
	}()
	for _, id := range held {
		wg.Go(func() {
			if _, err := s.Commit(ctx, CommitRequest{Context: id, Ops: []graph.Op{hcPut("a", "claim")}}); err != nil {
				t.Error(err)
			}
		})
		// Its committer takes it and waits for the hold.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			s.closeMu.Lock()
			q := s.queues[id]
			owned := q != nil && q.owned
			s.closeMu.Unlock()
			if owned {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no committer took %s", id)
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Commit(ctx, CommitRequest{Context: "free", Ops: []graph.Op{hcPut("a", "claim")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a context nobody holds waited for the committers waiting for other processes' holds")
	}
}

// TestOwnedRequestsJoinOnlySmallGroups: a group of several contexts that
// takes its contexts' requests queued since it took them (after a lost
// swap, or once it holds them on a shared driver) takes them only while
// it stays small; a group of one context takes them all, and a committer
// whose group became big stays out of the running count.
func TestOwnedRequestsJoinOnlySmallGroups(t *testing.T) {
	s := openUnsynced(t)
	own := func(id string, reqs ...*writeReq) {
		s.queues[id] = &ctxQueue{room: make(chan struct{}), owned: true, reqs: reqs}
	}
	asIfRunning(t, s)

	// A retried group of x and y: x's queued small request joins, its big
	// one and what follows it wait for the next group.
	x1, y1, x2, x3, x4 := req("x", 1, false), req("y", 1, false), req("x", 10, false), req("x", bigOps, false), req("x", 1, false)
	s.closeMu.Lock()
	own("x", x2, x3, x4)
	own("y")
	s.closeMu.Unlock()
	batch, ids, big := s.takeGroup([]*writeReq{x1, y1}, false, false)
	if !slices.Equal(batch, []*writeReq{x1, y1, x2}) || !slices.Equal(ids, []string{"x", "y"}) || big {
		t.Fatalf("retried group of x and y: %d requests of %v (big %v), want x's and y's retries and x's small request", len(batch), ids, big)
	}
	// Once the holds are taken, a merge queued meanwhile does not join
	// either; the committer steps back in.
	y2 := req("y", 1, true)
	s.closeMu.Lock()
	s.queues["y"].reqs = []*writeReq{y2}
	s.running = fake - 1 // stepped out while it waited
	s.closeMu.Unlock()
	batch, big, slot := s.joinOwned(ids, batch, true, false)
	if !slices.Equal(batch, []*writeReq{x1, y1, x2}) || big || slot || s.running != fake || s.bigRunning != 0 {
		t.Fatalf("held group of x and y: %d requests (big %v, slot %v, running %d, big groups %d), want the same 3, small, no slot, stepped back in", len(batch), big, slot, s.running-fake, s.bigRunning)
	}
	// A group of x alone, with every big slot taken, takes only what
	// keeps it small: x's big request and what follows wait, and the
	// committer steps back in.
	s.closeMu.Lock()
	s.running, s.bigRunning = fake-1, bigCommitters
	s.closeMu.Unlock()
	batch, big, slot = s.joinOwned([]string{"x"}, []*writeReq{x1}, true, false)
	if !slices.Equal(batch, []*writeReq{x1}) || big || slot || s.running != fake || s.bigRunning != bigCommitters || len(s.queues["x"].reqs) != 2 {
		t.Fatalf("held group of x, no big slot free: %d requests (big %v, slot %v, running %d, big groups %d), want x's first alone, small, stepped back in, no slot taken", len(batch), big, slot, s.running-fake, s.bigRunning)
	}
	// With a slot free it takes its whole queue, is then big and takes
	// the slot: its committer stays out.
	s.closeMu.Lock()
	s.running, s.bigRunning = fake-1, bigCommitters-1
	s.closeMu.Unlock()
	batch, big, slot = s.joinOwned([]string{"x"}, []*writeReq{x1}, true, false)
	if !slices.Equal(batch, []*writeReq{x1, x3, x4}) || !big || !slot || s.running != fake-1 || s.bigRunning != bigCommitters {
		t.Fatalf("held group of x: %d requests (big %v, slot %v, running %d, big groups %d), want x's all, big, a slot taken, still stepped out", len(batch), big, slot, s.running-fake, s.bigRunning)
	}
	// A big group that holds its slot already grows without another.
	s.closeMu.Lock()
	s.queues["x"].reqs = []*writeReq{x2}
	s.closeMu.Unlock()
	batch, big, slot = s.joinOwned([]string{"x"}, []*writeReq{x3}, true, true)
	if !slices.Equal(batch, []*writeReq{x3, x2}) || !big || !slot || s.bigRunning != bigCommitters {
		t.Fatalf("held big group of x: %d requests (big %v, slot %v, big groups %d), want x's two, big, its one slot", len(batch), big, slot, s.bigRunning)
	}
}

// TestRetryGrowsBigOnlyIntoAFreeSlot: a retried group of one context that
// its queued requests would make big takes them only when a
// bigCommitters slot is free; a retry big by itself takes back the slot
// its committer just gave up.
func TestRetryGrowsBigOnlyIntoAFreeSlot(t *testing.T) {
	s := openUnsynced(t)
	asIfRunning(t, s)
	x1, x2, x3 := req("x", 1, false), req("x", bigOps, false), req("x", 1, false)
	own := func(reqs ...*writeReq) {
		s.closeMu.Lock()
		s.queues["x"] = &ctxQueue{room: make(chan struct{}), owned: true, reqs: reqs}
		s.closeMu.Unlock()
	}
	own(x2, x3)
	s.closeMu.Lock()
	s.bigRunning = bigCommitters
	s.closeMu.Unlock()
	batch, _, big := s.takeGroup([]*writeReq{x1}, false, false)
	if !slices.Equal(batch, []*writeReq{x1}) || big || s.bigRunning != bigCommitters {
		t.Fatalf("small retry, no big slot free: %d requests (big %v, big groups %d), want the retry alone, small", len(batch), big, s.bigRunning)
	}
	s.closeMu.Lock()
	s.bigRunning = bigCommitters - 1
	s.closeMu.Unlock()
	batch, _, big = s.takeGroup([]*writeReq{x1}, false, false)
	if !slices.Equal(batch, []*writeReq{x1, x2, x3}) || !big || s.bigRunning != bigCommitters {
		t.Fatalf("small retry, a big slot free: %d requests (big %v, big groups %d), want the retry and x's queue, big, the slot taken", len(batch), big, s.bigRunning)
	}
	// Its committer comes back with the big group to retry: every other
	// slot is taken, and the one it gives back is its own again.
	own(x3)
	batch, _, big = s.takeGroup([]*writeReq{x1, x2}, true, true)
	if !slices.Equal(batch, []*writeReq{x1, x2, x3}) || !big || s.bigRunning != bigCommitters {
		t.Fatalf("big retry: %d requests (big %v, big groups %d), want the retry and x's queue, big, its slot again", len(batch), big, s.bigRunning)
	}
}

// TestBigGroupsBounded: with bigCommitters big groups being decided, a
// context whose requests would start another stays ready and the small
// work behind it is taken; once a big group is done (its committer comes
// back for its next group), that context is taken, alone.
func TestBigGroupsBounded(t *testing.T) {
	s := openUnsynced(t)
	asIfRunning(t, s)
	s.closeMu.Lock()
	s.bigRunning = bigCommitters
	big1, small1, small2 := req("bulk", bigOps+1, false), req("a", 1, false), req("b", 2, false)
	for _, r := range []*writeReq{big1, small1, small2} {
		s.queues[r.ctxID] = &ctxQueue{room: make(chan struct{}), ready: true, reqs: []*writeReq{r}}
		s.ready = append(s.ready, r.ctxID)
	}
	s.closeMu.Unlock()
	batch, ids, big := s.takeGroup(nil, false, false)
	if !slices.Equal(batch, []*writeReq{small1, small2}) || big || !slices.Equal(s.ready, []string{"bulk"}) {
		t.Fatalf("with every big slot taken: %d requests of %v (big %v), ready %v; want a's and b's, bulk still ready", len(batch), ids, big, s.ready)
	}
	// A big group's committer comes back: its slot is free again.
	batch, ids, big = s.takeGroup(nil, true, true)
	if !slices.Equal(batch, []*writeReq{big1}) || !big || len(s.ready) != 0 || s.bigRunning != bigCommitters {
		t.Fatalf("after a big group: %d requests of %v (big %v), big groups %d; want bulk's alone, big, %d big groups", len(batch), ids, big, s.bigRunning, bigCommitters)
	}
}

// openUnsynced opens a store without syncs in a new directory, closed
// when the test ends.
func openUnsynced(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// req is a commit request of ops empty ops to context id, a merge's when
// merge is set: what the committers weigh.
func req(id string, ops int, merge bool) *writeReq {
	r := &writeReq{kind: reqCommit, ctxID: id, commit: CommitRequest{Context: id, Ops: make([]graph.Op, ops)}}
	if merge {
		r.commit.ExtraParents = make([]hashing.Digest, 1)
	}
	return r
}

// asIfRunning makes s count more committers running than it ever starts,
// so that a test calling takeGroup and joinOwned itself has none started
// behind its back; when the test ends the counts and queues are put back
// for Close.
func asIfRunning(t *testing.T, s *Store) {
	s.closeMu.Lock()
	s.running = fake
	s.closeMu.Unlock()
	t.Cleanup(func() {
		s.closeMu.Lock()
		s.running, s.bigRunning, s.ready = 0, 0, nil
		clear(s.queues)
		s.closeMu.Unlock()
	})
}

// fake is the running count asIfRunning sets.
const fake = 1 << 20
