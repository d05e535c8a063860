package web

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/artifactd/artifactd/internal/lru"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestContextListUnfilteredMatchesFiltered: the context page without a
// search or filter (which looks up only its page's artifacts) lists what
// the same page does with a filter every artifact passes (which looks up
// every artifact) — the rows, their order, the counts, the types — on the
// first, a middle and the last page and one past it, and over the state
// map after a restart as well as on a head made by commits. It reopens
// its store, so it keeps to the embedded backend (a store's Close closes
// the driver it was given) whichever the other tests use.
func TestContextListUnfilteredMatchesFiltered(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*artifactsPerPage + 37
	loadContext(t, s, "claims", claimOps(t, n)...)
	rowsOf := func(body string) string {
		i := strings.Index(body, "<tbody")
		j := strings.Index(body[i:], "</tbody>")
		return body[i : i+j]
	}
	check := func(h http.Handler, what string) {
		for _, page := range []int{1, 2, 3, 4} {
			p := fmt.Sprintf("/ui/contexts/claims?page=%d", page)
			_, all := get(t, h, p)
			_, typed := get(t, h, p+"&type=claim")
			if rowsOf(all) != rowsOf(typed) {
				t.Errorf("%s, page %d: the unfiltered rows differ from the filtered ones", what, page)
			}
			if page <= 3 && !strings.Contains(all, fmt.Sprintf("of %d", n)) {
				t.Errorf("%s, page %d: no count of %d", what, page, n)
			}
			if want := fmt.Sprintf(`<option value="claim">claim (%d)</option>`, n); !strings.Contains(all, want) {
				t.Errorf("%s, page %d: the type list lacks %s", what, page, want)
			}
		}
	}
	check(New(Options{Store: s, Logger: quietLogger()}), "a head made by commits")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(New(Options{Store: s, Logger: quietLogger()}), "after a restart")
}

// TestContextPageHugePageNumber: a page number whose offset would
// overflow renders, past the last page, instead of panicking on a slice
// with a negative bound (or listing the first rows as a page before the
// first, as it once did).
func TestContextPageHugePageNumber(t *testing.T) {
	s := openStore(t)
	loadContext(t, s, "claims", claimOps(t, 150)...)
	h := New(Options{Store: s, Logger: quietLogger()})
	for _, page := range []string{"184467440737095517", "92233720368547760", "9223372036854775807", "3"} {
		for _, filter := range []string{"", "&type=claim"} {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("page=%s%s: panic: %v", page, filter, p)
					}
				}()
				res, body := get(t, h, "/ui/contexts/claims?page="+page+filter)
				if res.StatusCode != http.StatusOK {
					t.Errorf("page=%s%s: status %d", page, filter, res.StatusCode)
				}
				if strings.Contains(body, `<td class="id"`) {
					t.Errorf("page=%s%s: lists artifacts past the last page", page, filter)
				}
			}()
		}
	}
}

// claimOps are n claims s0…s{n-1}, claim i derived_from claim i/2.
func claimOps(t testing.TB, n int) []graph.Op {
	var ops []graph.Op
	for i := range n {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"text": fmt.Sprintf("claim %d", i)}))
		if i > 0 {
			ops = append(ops, linkOp(fmt.Sprintf("s%d", i), "derived_from", fmt.Sprintf("s%d", i/2)))
		}
	}
	return ops
}

// TestContextSearchMatchesOracle: the context page's list — the rows,
// their order and trust, the counts, the pages, the text search's limit
// — is, for every combination of search text, type, producer and trust
// filter and on the first, second and a page past the last, what the
// plain algorithm gives (collectOracle: every id in natural order, each
// looked up and judged by the trust index). It is checked on a context
// with poison roots and what they quarantine, on a head made by commits
// and, after a restart, over the state map at the first commit and at a
// second that deletes, adds and lifts a poison root; by a server that
// keeps no sorted ids at this size, by one that keeps every state's
// (sortedIDs; the same server reads both commits), and by one whose text
// search stops after 40 texts.
func TestContextSearchMatchesOracle(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	ops := bigOps(t, 1200)
	ops = append(ops, putOp(t, "x7", "claim", "other", map[string]any{"text": "a00017 said again"}))
	ops = append(ops, linkOp("x7", "derived_from", "a01000"))
	// Ids whose natural order is not their byte order (n2 before n10),
	// half of them on a poison root.
	for i := range 150 {
		id := fmt.Sprintf("n%d", i)
		ops = append(ops, putOp(t, id, "note", "other", map[string]any{"text": "note " + id}))
		ops = append(ops, linkOp(id, "derived_from", fmt.Sprintf("a%05d", 500*(i%2)+1)))
	}
	first := loadContext(t, s, "big", ops...)
	queries := 0
	check := func(what string, refs ...string) {
		plain := New(Options{Store: s, Logger: quietLogger()}).(*server)
		listing := New(Options{Store: s, Logger: quietLogger()}).(*server)
		listing.minListed = 1
		capped := New(Options{Store: s, Logger: quietLogger()}).(*server)
		capped.textScan = 40
		for _, h := range []*server{plain, listing, capped} {
			for _, ref := range refs {
				err := s.Read(context.Background(), "big", ref, func(v *store.View) error {
					checkAgainstOracle(t, h, v, fmt.Sprintf("%s, at %q, keeping ids from %d, reading %d texts", what, ref, h.minListed, h.textScan))
					queries += 1620
					if _, kept := h.ids.Get(string(v.Commit.ID[:])); kept != (h.minListed == 1) {
						t.Errorf("%s at %q: sorted ids kept: %v, with a minimum of %d", what, ref, kept, h.minListed)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	check("a head made by commits", "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, "big", "", "agent", "second",
		graph.Op{Op: graph.OpUnlink, From: "n3", Rel: "derived_from", To: "a00501"},
		graph.Op{Op: graph.OpDelete, ID: "n3"},
		putOp(t, "n1000", "note", "other", map[string]any{"text": "note n1000"}),
		putOp(t, "a01000", "fetch_verdict", "gate/v1", map[string]any{"verdict": "RETRIEVED", "url": "https://example.com/a01000"}))
	check("after a restart", first.ID.Hex(), "")
	if queries != 9*1620 {
		t.Fatalf("compared %d queries", queries)
	}
}

// checkAgainstOracle compares h's list of v's artifacts with the
// oracle's for 1,620 searches.
func checkAgainstOracle(t *testing.T, h *server, v *store.View, what string) {
	t.Helper()
	rows := h.oracleRows(v)
	if sum := v.Trust.Summary(); sum.PoisonRoots < 2 || sum.Quarantined < 20 {
		t.Fatalf("%s: the fixture has %d poison roots and %d quarantined; the test needs both", what, sum.PoisonRoots, sum.Quarantined)
	}
	for _, q := range []string{"", "a0001", "n1", "claim a0002", "said", "zzz"} {
		for _, typ := range []string{"", "claim", "note", "fetch_verdict", "nope"} {
			for _, status := range []string{"", "unconfirmed", "poison_root", "quarantined", "confirmed", "bogus"} {
				for _, producer := range []string{"", "agent", "other"} {
					for _, page := range []int{1, 2, 40} {
						search := searchQuery{Q: q, Type: typ, Status: status, Producer: producer}
						got, want := contextView{Search: search}, contextView{Search: search}
						h.collectArtifacts(context.Background(), v, &got, page)
						h.collectOracle(v, rows, &want, page)
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("%s, %+v page %d: got %d matched, %d rows (%s), text capped %v; want %d matched, %d rows (%s), text capped %v", what, search, page,
								got.Matched, len(got.Rows), firstRow(got.Rows), got.TextCapped, want.Matched, len(want.Rows), firstRow(want.Rows), want.TextCapped)
						}
					}
				}
			}
		}
	}
}

// cutCtx is a request's context that ends once its Err has been asked
// left times: a client that goes away while a page walks a state map.
type cutCtx struct {
	context.Context
	left atomic.Int64
}

func (c *cutCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestSortedIDsNotKeptFromACutRead: a read of a big commit through its
// state map (at a commit's id, a state past the old-state cache) that
// ends while the ids are listed gets part of them; they are not kept, so
// the next reader of that commit — the branch head, whose commit is the
// same — lists every artifact. Kept, they once made the head's page list
// 22,223 of 70,000.
func TestSortedIDsNotKeptFromACutRead(t *testing.T) {
	so := store.Options{Dir: t.TempDir(), Clock: testClock(), NoSync: true, Logger: quietLogger(), CacheBytes: 1 << 20}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 70_000 // more than two of a map scan's windows
	ops := make([]graph.Op, 0, n)
	for i := range n {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"text": "c"}))
	}
	head := loadContext(t, s, "big", ops...)
	h := New(Options{Store: s, Logger: quietLogger()}).(*server)
	cut := false
	for k := int64(1); k < 400 && !cut; k++ {
		ctx := &cutCtx{Context: context.Background()}
		ctx.left.Store(1 << 40)
		_ = s.Read(ctx, "big", head.ID.Hex(), func(v *store.View) error {
			ctx.left.Store(k)
			if got := len(h.sortedIDs(context.Background(), v)); got >= h.minListed && got < n {
				cut = true
				if v.Err() == nil {
					t.Fatalf("a read that listed %d of %d ids reports no error", got, n)
				}
			}
			return nil
		})
	}
	if !cut {
		t.Fatal("no read was cut short while it listed the ids: the test no longer tests what it says")
	}
	if _, kept := h.ids.Get(string(head.ID[:])); kept {
		t.Error("a cut list of ids was kept")
	}
	err = s.Read(context.Background(), "big", "", func(v *store.View) error {
		view := contextView{}
		h.collectArtifacts(context.Background(), v, &view, 1)
		if view.Matched != n {
			t.Errorf("after a cut read, the head's page lists %d artifacts of %d", view.Matched, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// firstRow names the first of rows, for a failure's message.
func firstRow(rows []artifactRow) string {
	if len(rows) == 0 {
		return "none"
	}
	return fmt.Sprintf("first %s, %s", rows[0].ID, rows[0].Status)
}

// oracleRow is what the plain algorithm knows of an artifact.
type oracleRow struct {
	a      *graph.Artifact
	status graph.Status
	said   string
}

// oracleRows looks every artifact of v up, with its trust and short
// text, in natural id order: the plain algorithm's work, done once for
// all the queries collectOracle answers.
func (s *server) oracleRows(v *store.View) []oracleRow {
	var ids []string
	v.State.RangeArtifacts(func(a *graph.Artifact) bool {
		ids = append(ids, a.ID)
		return true
	})
	slices.SortFunc(ids, func(a, b string) int {
		if c := naturalCompare(a, b); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	data := func(a *graph.Artifact) (json.RawMessage, error) { return v.Data(a) }
	rows := make([]oracleRow, len(ids))
	for i, id := range ids {
		a := v.State.Artifact(id)
		rows[i] = oracleRow{a: a, status: v.Trust.Status(id), said: s.said.get(a, data)}
	}
	return rows
}

// collectOracle is the context page's list by the plain algorithm: every
// id in natural order, each artifact looked up and its trust asked of the
// index (rows, from oracleRows), filtered by type, producer and trust,
// then by text, then paged.
func (s *server) collectOracle(v *store.View, rows []oracleRow, view *contextView, pageNo int) {
	st := v.State
	search := view.Search
	needle := strings.ToLower(search.Q)
	types := st.TypeCounts()
	view.Total = len(rows)
	from := (pageNo - 1) * artifactsPerPage
	scanned := 0
	for _, r := range rows {
		a, status := r.a, r.status
		switch {
		case search.Type != "" && a.Type != search.Type,
			search.Producer != "" && a.ProducedBy != search.Producer,
			search.Status == "unconfirmed" && status == graph.StatusConfirmed,
			search.Status != "" && search.Status != "unconfirmed" && string(status) != search.Status:
			continue
		}
		// The text is searched after the other filters, in id order, in
		// at most s.textScan texts.
		if needle != "" && !strings.Contains(strings.ToLower(a.ID), needle) {
			if scanned >= s.textScan {
				view.TextCapped = true
				continue
			}
			scanned++
			if !strings.Contains(strings.ToLower(r.said), needle) {
				continue
			}
		}
		if view.Matched >= from && view.Matched < from+artifactsPerPage {
			view.Rows = append(view.Rows, artifactRow{ID: a.ID, Type: a.Type, Version: a.Version, ProducedBy: a.ProducedBy,
				Status: status, Said: cut(r.said, saidRow)})
		}
		view.Matched++
	}
	if search.Q != "" && st.Artifact(search.Q) != nil {
		view.ExactMatch = search.Q
	}
	view.Pages = max(1, (view.Matched+artifactsPerPage-1)/artifactsPerPage)
	view.PageNo = min(pageNo, view.Pages)
	if len(view.Rows) > 0 {
		view.First = from + 1
		view.Last = from + len(view.Rows)
	}
	fillSearchOptions(view, types)
}

// TestSortedIDsDerivedFromTheLastKept: the list of ids of a later (or an
// earlier) commit of a context is derived from the list kept last for
// the context, through the diff of the two maps, and equals a listing of
// the whole state; a commit that changes more than a quarter of the ids,
// or a context with no list kept, is listed whole.
func TestSortedIDsDerivedFromTheLastKept(t *testing.T) {
	dir := t.TempDir()
	so := store.Options{Dir: dir, Clock: testClock(), NoSync: true, Logger: quietLogger()}
	s, err := store.Open(context.Background(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []graph.Op
	for i := range 3000 {
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), "claim", "agent", map[string]any{"n": i}))
	}
	first := loadContext(t, s, "c", ops...)
	loadContext(t, s, "other", ops[:100]...)
	ops = nil
	for i := 0; i < 3000; i += 7 { // between the others in natural order, and before and after all
		ops = append(ops, putOp(t, fmt.Sprintf("s%da", i), "note", "agent", map[string]any{"n": i}))
	}
	ops = append(ops, putOp(t, "a", "note", "agent", map[string]any{"n": 0}), putOp(t, "z9", "note", "agent", map[string]any{"n": 0}))
	for i := 3; i < 3000; i += 11 {
		ops = append(ops, graph.Op{Op: graph.OpDelete, ID: fmt.Sprintf("s%d", i)})
	}
	ops = append(ops, putOp(t, "s5", "note", "other", map[string]any{"n": "rewritten"}))
	second := commit(t, s, "c", "", "agent", "changes", ops...)
	ops = nil
	for i := range 1200 {
		ops = append(ops, putOp(t, fmt.Sprintf("t%d", i), "note", "agent", map[string]any{"n": i}))
	}
	third := commit(t, s, "c", "", "agent", "many", ops...)

	list := func(h *server, ctxID string, c *replay.Commit) []string {
		t.Helper()
		var got []string
		err := s.Read(context.Background(), ctxID, c.ID.Hex(), func(v *store.View) error {
			got = h.sortedIDs(context.Background(), v)
			want := v.State.ArtifactIDs()
			naturalSort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s at %s: %d ids listed, want %d", ctxID, c.ID.Short(), len(got), len(want))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	h := New(Options{Store: s, Logger: quietLogger()}).(*server)
	h.minListed = 1
	for _, step := range []struct {
		what     string
		ctxID    string
		c        *replay.Commit
		listings int64
	}{
		{"the first commit, listed whole", "c", first, 1},
		{"the second, derived from the first", "c", second, 1},
		{"the first again, kept", "c", first, 1},
		{"another context, listed whole", "other", first, 2},
		{"the third, a commit of 1,200 new ids (more than a quarter), listed whole", "c", third, 3},
		{"the first, derived back from the second (listed whole anew)", "c", first, 4},
	} {
		c := step.c
		if step.ctxID == "other" {
			err := s.Read(context.Background(), "other", "", func(v *store.View) error { c = v.Commit; return nil })
			if err != nil {
				t.Fatal(err)
			}
		}
		if step.listings == 4 {
			// Only the second's list may serve: drop the others.
			h.ids = lru.New[string](maxListedBytes, (*listedIDs).cost)
			h.listedAt = lru.New[string, string](listedContexts, nil)
			list(h, "c", second)
		}
		list(h, step.ctxID, c)
		if n := h.listings.Load(); n != step.listings {
			t.Errorf("%s: %d whole listings so far, want %d", step.what, n, step.listings)
		}
	}
}

// TestFilteredListsFollowCommits: the list of a type's or a producer's
// ids (or both) is kept by commit and filter, and a later or earlier
// commit's is derived from it through the diff of the two maps —
// artifacts put, deleted, and moved into or out of the filter by a new
// type or producer — and equals the filter applied to the whole state.
// The producer filter "(none)", the overview's group of the artifacts
// without a producer, keeps those.
func TestFilteredListsFollowCommits(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	var ops []graph.Op
	for i := range 2000 {
		typ, by := "claim", "agent"
		switch i % 5 {
		case 1:
			typ = "note"
		case 2:
			by = ""
		case 3:
			by = "other"
		}
		ops = append(ops, putOp(t, fmt.Sprintf("s%d", i), typ, by, map[string]any{"n": i}))
	}
	commits := []*replay.Commit{loadContext(t, st, "c", ops...)}
	r := rand.New(rand.NewPCG(5, 9))
	for k := range 12 {
		ops = nil
		for range 1 + r.IntN(40) {
			id := fmt.Sprintf("s%d", r.IntN(2200))
			switch r.IntN(4) {
			case 0:
				ops = append(ops, graph.Op{Op: graph.OpDelete, ID: id})
			default:
				typ := []string{"claim", "note", "summary"}[r.IntN(3)]
				by := []string{"agent", "other", ""}[r.IntN(3)]
				ops = append(ops, putOp(t, id, typ, by, map[string]any{"k": k}))
			}
		}
		res, err := st.Commit(ctx, store.CommitRequest{Context: "c", Author: "t", Message: fmt.Sprint(k), Ops: ops})
		if err != nil {
			continue // a delete of nothing: refused
		}
		commits = append(commits, res.Commit)
	}
	filters := []listFilter{{typ: "note"}, {producer: "other"}, {typ: "claim", producer: "agent"}, {producer: noProducer}, {}}
	h := New(Options{Store: st, Logger: quietLogger()}).(*server)
	h.minListed = 1
	for _, f := range filters {
		before := h.listings.Load()
		order := r.Perm(len(commits))
		for _, i := range order {
			err := st.ReadSparse(ctx, "c", commits[i], func(v *store.View) error {
				got := h.listIDs(ctx, v, f)
				var want []string
				v.State.RangeArtifacts(func(a *graph.Artifact) bool {
					if (f.typ == "" || a.Type == f.typ) && (f.producer == "" || a.ProducedBy == f.producer || f.producer == noProducer && a.ProducedBy == "") {
						want = append(want, a.ID)
					}
					return true
				})
				naturalSort(want)
				if !slices.Equal(got, want) {
					return fmt.Errorf("filter %+v at commit %d: %d ids listed, want %d", f, i, len(got), len(want))
				}
				if f.producer == noProducer && len(want) == 0 {
					return fmt.Errorf("the (none) filter keeps nothing at commit %d", i)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// The first list is made whole; the others are derived.
		if n := h.listings.Load() - before; n != 1 {
			t.Errorf("filter %+v: %d of %d lists made whole, want 1", f, n, len(commits))
		}
	}
}

// TestKeptListsAreBounded: lists a filter keeps that hold nothing still
// count in the cache, with their filters' text: distinct long filters
// matching nothing do not pile up past the cache's bound.
func TestKeptListsAreBounded(t *testing.T) {
	st := openStore(t)
	loadBig(t, st, "c", 600)
	h := New(Options{Store: st, Logger: quietLogger()}).(*server)
	h.minListed = 100
	h.ids = lru.New[string](1<<20, (*listedIDs).cost)
	pad := strings.Repeat("x", 16<<10)
	for i := range 200 {
		if res, _ := get(t, h, fmt.Sprintf("/ui/contexts/c?type=t%d%s", i, pad)); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
	}
	n, size := h.ids.Len(), h.ids.Size()
	if size > 1<<20 || n >= 200 || n == 0 {
		t.Fatalf("after 200 filters matching nothing the cache holds %d lists costing %d bytes, want some, under 1 MiB", n, size)
	}
}

// TestListFiltersDoNotShareKeys: a type and a producer that hold a NUL
// byte make no filter's key another's.
func TestListFiltersDoNotShareKeys(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	c := loadContext(t, st, "c", putOp(t, "s1", "claim", "p\x00q", map[string]any{"n": 1}), putOp(t, "s2", "claim", "agent", map[string]any{"n": 2}))
	h := New(Options{Store: st, Logger: quietLogger()}).(*server)
	h.minListed = 1
	if err := st.ReadSparse(ctx, "c", c, func(v *store.View) error {
		a := h.listIDs(ctx, v, listFilter{typ: "claim", producer: "p\x00q"})
		b := h.listIDs(ctx, v, listFilter{typ: "claim\x00p", producer: "q"})
		if !slices.Equal(a, []string{"s1"}) || len(b) != 0 {
			return fmt.Errorf("lists %q and %q, want [s1] and none", a, b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
