package web

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Page sizes.
const (
	artifactsPerPage = 100
	logPerPage       = 30
)

// minListedIDs and maxListedBytes bound the lists of ids listIDs keeps:
// those of states of at least minListedIDs artifacts, up to
// maxListedBytes in all (idsCost: a million ids of 10 bytes cost 26 MB).
const (
	minListedIDs   = 20_000
	maxListedBytes = 64 << 20
)

// listedContexts bounds the lists (by context and filter) whose last kept
// commit listIDs remembers, to derive the list of a later commit from it.
const listedContexts = 256

// listedIDs is a list of ids listIDs keeps for a commit, under key.
type listedIDs struct {
	commit *replay.Commit
	key    string
	ids    []string
}

// cost is what l costs in the cache: its ids, its key (a filter's text
// can be long) and the entry itself, so that a list that holds nothing
// still counts.
func (l *listedIDs) cost() int64 { return int64(idsCost(l.ids) + len(l.key) + 128) }

// listFilter names a list of ids listIDs makes: the artifacts of a type
// and of a producer ("" for any), or, zero, all of them.
type listFilter struct{ typ, producer string }

// matches reports whether an artifact of type typ produced by producer
// is in the list.
func (f listFilter) matches(typ, producer string) bool {
	return (f.typ == "" || typ == f.typ) && producerMatches(f.producer, producer)
}

// suffix is what f adds to the keys of its lists: nothing for all ids;
// else the type's length, the type and the producer, so that no two
// filters share a suffix whatever bytes they hold.
func (f listFilter) suffix() string {
	if f == (listFilter{}) {
		return ""
	}
	return "\x00" + strconv.Itoa(len(f.typ)) + ":" + f.typ + f.producer
}

// producerMatches reports whether an artifact produced by producer passes
// the producer filter: any producer for "", and for "(none)" — the
// overview's name of the artifacts without one, which its cluster links
// to — those without one as well as those named so.
func producerMatches(filter, producer string) bool {
	return filter == "" || producer == filter || filter == noProducer && producer == ""
}

// contextsPerPage is the page size of the contexts list.
const contextsPerPage = 50

// contextsView is the contexts list.
type contextsView struct {
	Q       string
	Rows    []contextRow
	Total   int // contexts in the store
	Matched int // contexts whose id contains Q
	First   int
	Last    int
	PageNo  int
	Pages   int
	PrevURL string
	NextURL string
}

type contextRow struct {
	ID      string
	Mode    string
	Head    *commitInfo
	Summary graph.TrustSummary
	// Missing is set when ?at= names nothing in this context.
	Missing bool
}

// handleContexts lists the contexts, contextsPerPage at a time (?page=),
// those whose id contains ?q= (case-insensitive), each with its head (or
// the commit ?at= names in it), counts and trust summary. Only the rows
// of the page shown are read.
func (s *server) handleContexts(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	infos, err := s.store.ListContexts(ctx)
	if err != nil {
		s.problem(w, r, storeProblem(err, "context"))
		return
	}
	q := r.URL.Query()
	at := q.Get("at")
	view := contextsView{Q: strings.TrimSpace(q.Get("q")), Total: len(infos)}
	needle := strings.ToLower(view.Q)
	var matched []store.ContextInfo
	for _, info := range infos {
		if needle == "" || strings.Contains(strings.ToLower(info.ID), needle) {
			matched = append(matched, info)
		}
	}
	slices.SortFunc(matched, func(a, b store.ContextInfo) int { return compareIDs(a.ID, b.ID) })
	view.Matched = len(matched)
	pageNo, _ := strconv.Atoi(q.Get("page"))
	view.Pages = max(1, (len(matched)+contextsPerPage-1)/contextsPerPage)
	view.PageNo = min(max(pageNo, 1), view.Pages)
	from := (view.PageNo - 1) * contextsPerPage
	shown := matched[from:min(from+contextsPerPage, len(matched))]
	view.Rows = make([]contextRow, 0, len(shown))
	for _, info := range shown {
		row := contextRow{ID: info.ID, Mode: info.Quarantine}
		err := s.store.Read(ctx, info.ID, at, func(v *store.View) error {
			row.Head = newCommitInfo(v.Commit, v.Branch)
			row.Summary = v.Trust.Summary()
			return nil
		})
		if err != nil {
			if p := storeProblem(err, ""); p.Code == codeInternal {
				s.problem(w, r, p)
				return
			}
			row.Missing = true
		}
		view.Rows = append(view.Rows, row)
	}
	if len(shown) > 0 {
		view.First, view.Last = from+1, from+len(shown)
	}
	pageURL := func(n int) string { return "/" + query("q", view.Q, "at", at, "page", strconv.Itoa(n)) }
	if view.PageNo > 1 {
		view.PrevURL = pageURL(view.PageNo - 1)
	}
	if view.PageNo < view.Pages {
		view.NextURL = pageURL(view.PageNo + 1)
	}
	p := &page{Title: "Contexts", At: at, Nav: "contexts"}
	s.render(w, r, http.StatusOK, "contexts", p, view)
}

// contextView is one context's overview.
type contextView struct {
	Info     store.ContextInfo
	Summary  graph.TrustSummary
	Branches []branchRow
	Log      []logRow
	// LogMore continues the log after its last row ("" at the root).
	LogMore string

	Search     searchQuery
	Types      []typeCount
	Statuses   []statusOption
	Rows       []artifactRow
	Total      int // artifacts in the state
	Matched    int // artifacts matching the search
	First      int // 1-based index of the first row shown
	Last       int
	PageNo     int
	Pages      int
	PrevURL    string
	NextURL    string
	ExactMatch string // id equal to the search text, if it exists
	// TextCapped says the text search stopped reading data at maxTextScan.
	TextCapped bool
}

type branchRow struct {
	Name    string
	Head    hashing.Digest
	Current bool
}

type logRow struct {
	ID      hashing.Digest
	Parent  string // first parent id ("" for the root commit)
	Author  string
	Message string
	Time    string
	Ops     int
	Arts    int
	Current bool
}

type searchQuery struct {
	Q        string
	Type     string
	Status   string
	Producer string
}

type typeCount struct {
	Name     string
	N        int
	Selected bool
}

type statusOption struct {
	Value, Label string
	Selected     bool
}

type artifactRow struct {
	ID         string
	Said       string
	Type       string
	Version    int64
	ProducedBy string
	Status     graph.Status
}

// handleContext shows a context at a commit: branches, the commit log from
// that commit, the trust summary and a paginated, searchable artifact list.
// Query: at, q (id contains, case-insensitive), type, status
// (poison_root, quarantined, confirmed, unconfirmed), producer (or
// producer_pct, percent-encoded, from a form: formParam), page, log (a
// commit to start the log from).
func (s *server) handleContext(w http.ResponseWriter, r *http.Request, ctxID string) {
	q := r.URL.Query()
	at := q.Get("at")
	search := searchQuery{Q: strings.TrimSpace(q.Get("q")), Type: q.Get("type"), Status: q.Get("status"), Producer: formValue(q, "producer")}
	pageNo, _ := strconv.Atoi(q.Get("page"))
	pageNo = max(pageNo, 1)

	view := contextView{Search: search}
	var shown *commitInfo
	var head hashing.Digest
	info, ok := s.read(w, r, ctxID, func(v *store.View) error {
		shown = newCommitInfo(v.Commit, v.Branch)
		head = v.Commit.ID
		view.Summary = v.Trust.Summary()
		s.collectArtifacts(r.Context(), v, &view, pageNo)
		return nil
	})
	if !ok {
		return
	}
	view.Info = info
	ctx := r.Context()
	branches, err := s.store.Branches(ctx, ctxID)
	if err != nil {
		s.problem(w, r, storeProblem(err, "context"))
		return
	}
	for _, b := range branches {
		view.Branches = append(view.Branches, branchRow{Name: b.Name, Head: b.Head, Current: b.Name == shown.Branch})
	}

	// The log starts at the shown commit, or at ?log= when paging on.
	start, err := s.store.GetCommit(ctx, ctxID, head)
	if err == nil && q.Get("log") != "" {
		start, err = s.store.Resolve(ctx, ctxID, q.Get("log"))
	}
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit "+quoteRef(q.Get("log"))))
		return
	}
	commits, err := s.store.Log(ctx, ctxID, start, logPerPage+1)
	if err != nil {
		s.problem(w, r, storeProblem(err, "commit"))
		return
	}
	if len(commits) > logPerPage {
		view.LogMore = ctxURL(ctxID, "") + query("at", at, "log", commits[logPerPage].ID.Hex())
		commits = commits[:logPerPage]
	}
	for _, c := range commits {
		row := logRow{ID: c.ID, Author: c.Author, Message: c.Message, Time: c.Time, Ops: c.NumOps, Arts: c.Artifacts}
		if c.ID == head {
			row.Current = true
		}
		if len(c.Parents) > 0 {
			row.Parent = c.Parents[0].Hex()
		}
		view.Log = append(view.Log, row)
	}

	pageURL := func(n int) string {
		return ctxURL(ctxID, "") + query("at", at, "q", search.Q, "type", search.Type, "status", search.Status, "producer", search.Producer, "page", strconv.Itoa(n))
	}
	if view.PageNo > 1 {
		view.PrevURL = pageURL(view.PageNo - 1)
	}
	if view.PageNo < view.Pages {
		view.NextURL = pageURL(view.PageNo + 1)
	}
	p := &page{Title: ctxID, Ctx: ctxID, Nav: "overview", At: at, Commit: shown,
		Keep: keep(q, "q", "type", "status", "producer")}
	s.render(w, r, http.StatusOK, "context", p, view)
}

// collectArtifacts fills the search options and the requested page of
// matching artifacts, in natural id order (s2 before s10). The search
// text matches the ids of the artifacts the other filters keep (all of
// them) and, when it is not an id fragment of too many, the short texts
// of what they said (up to s.textScan data reads, in id order, among the
// artifacts the filters keep). The artifacts that can match are found in
// one pass (candidates); then only the page's artifacts and those whose
// text is searched are looked up — a state read through its map looks
// each up in the map, and a million such lookups took 7–15 s. The types'
// counts are the state's (State.TypeCounts, from the map's index).
func (s *server) collectArtifacts(ctx context.Context, v *store.View, view *contextView, pageNo int) {
	st, tr := v.State, v.Trust
	search := view.Search
	needle := strings.ToLower(search.Q)
	types := st.TypeCounts()
	cands := s.candidates(ctx, v, search)
	view.Total = st.NumArtifacts()
	// A page past the last shows none; one far past it must not
	// overflow the offset.
	pageNo = min(pageNo, len(cands)/artifactsPerPage+2)
	from := (pageNo - 1) * artifactsPerPage
	data := func(a *graph.Artifact) (json.RawMessage, error) { return v.Data(a) }
	scanned := 0
	for _, id := range cands {
		var a *graph.Artifact // looked up once, when something needs it
		if needle != "" && !strings.Contains(strings.ToLower(id), needle) {
			if scanned >= s.textScan {
				view.TextCapped = true
				continue
			}
			scanned++
			if a = st.Artifact(id); a == nil || !strings.Contains(strings.ToLower(s.said.get(a, data)), needle) {
				continue
			}
		}
		if view.Matched >= from && view.Matched < from+artifactsPerPage {
			if a == nil {
				a = st.Artifact(id)
			}
			if a != nil {
				view.Rows = append(view.Rows, artifactRow{ID: id, Type: a.Type, Version: a.Version, ProducedBy: a.ProducedBy,
					Status: tr.Status(id), Said: cut(s.said.get(a, data), saidRow)})
			}
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

// fillSearchOptions fills the type and trust choices of view's search
// form: the state's types with their counts, by name, and the trust
// filters, each marked when it is the search's.
func fillSearchOptions(view *contextView, types map[string]int) {
	search := view.Search
	for _, t := range slices.Sorted(maps.Keys(types)) {
		view.Types = append(view.Types, typeCount{Name: t, N: types[t], Selected: t == search.Type})
	}
	for _, o := range []statusOption{
		{Value: "", Label: "any trust"},
		{Value: "unconfirmed", Label: "unconfirmed"},
		{Value: string(graph.StatusPoisonRoot), Label: "poison root"},
		{Value: string(graph.StatusQuarantined), Label: "quarantined"},
		{Value: string(graph.StatusConfirmed), Label: "confirmed"},
	} {
		o.Selected = o.Value == search.Status
		view.Statuses = append(view.Statuses, o)
	}
}

// candidates returns, in natural id order, the ids of the artifacts of
// v's state that pass search's type, producer and trust filters (the text
// is matched later, in page order), reading as little as each filter
// needs:
//
//   - a trust filter other than "confirmed" alone: the unconfirmed
//     artifacts the trust index lists, and nothing else;
//   - otherwise the ids of the type and producer asked for, or all of
//     them (listIDs: kept by commit, or derived from another commit's),
//     with the trust filter applied to each — without one, that list
//     itself, which the caller must not change.
//
// A trust filter judges an artifact the index does not list as
// unconfirmed as confirmed, as the index does.
func (s *server) candidates(ctx context.Context, v *store.View, search searchQuery) []string {
	var unconfirmed unconfirmedSet
	if search.Status != "" {
		unconfirmed = unconfirmedOf(v.Trust)
	}
	if unconfirmed != nil && search.Type == "" && search.Producer == "" && !statusMatches(search.Status, graph.StatusConfirmed) {
		var out []string
		for id, status := range unconfirmed {
			if statusMatches(search.Status, status) {
				out = append(out, id)
			}
		}
		slices.SortFunc(out, compareIDs)
		return out
	}
	ids := s.listIDs(ctx, v, listFilter{typ: search.Type, producer: search.Producer})
	if unconfirmed == nil {
		return ids
	}
	var out []string
	for _, id := range ids {
		if statusMatches(search.Status, unconfirmed.status(id)) {
			out = append(out, id)
		}
	}
	return out
}

// sortedIDs returns the ids of v's state in natural order (listIDs of
// them all). The caller must not change the slice.
func (s *server) sortedIDs(ctx context.Context, v *store.View) []string {
	return s.listIDs(ctx, v, listFilter{})
}

// listIDs returns the ids of the artifacts of v's state that f keeps, in
// natural order. The caller must not change the slice: the lists of a
// state of at least s.minListed artifacts are kept by commit and filter
// (a state is immutable, and a commit's id covers its context hash), so
// that paging through a big context's artifacts, or a type's, or
// searching them again, does not pass over the state and sort it again —
// a million took 1.8–2.8 s. The list of another commit of the context is
// derived from the last one kept with the same filter, through the diff
// of their artifacts (Store.DiffArtifactsWithin, which reads the part of
// each map that holds artifacts, where they differ, and stops once too
// many do), when the two differ by at most a quarter of the state's
// artifacts (one, for a state of fewer than four), so that a
// context written to is not listed whole again after each commit. A list
// a failed or cancelled read cut short (v.Err) is not kept.
func (s *server) listIDs(ctx context.Context, v *store.View, f listFilter) []string {
	ctxID := v.ContextID()
	key := string(v.Commit.ID[:]) + f.suffix()
	if l, ok := s.ids.Get(key); ok {
		return l.ids
	}
	ids, from, ok := s.derivedIDs(ctx, ctxID, v.Commit, f)
	if !ok {
		if f == (listFilter{}) {
			ids = v.State.ArtifactIDs()
		} else {
			v.State.RangeArtifacts(func(a *graph.Artifact) bool {
				if f.matches(a.Type, a.ProducedBy) {
					ids = append(ids, a.ID)
				}
				return true
			})
		}
		naturalSort(ids)
		s.listings.Add(1)
	}
	if v.State.NumArtifacts() >= s.minListed && v.Err() == nil {
		// The list derived from gives way to the new one: a context
		// being written to keeps one list per filter, not one a commit.
		if ok {
			s.ids.Drop(from)
		}
		s.ids.Put(key, &listedIDs{commit: v.Commit, key: key, ids: ids})
		s.listedAt.Put(ctxID+f.suffix(), key)
	}
	return ids
}

// derivedIDs returns the ids f keeps of the state at commit c of context
// ctxID in natural order, from the list kept last with f for another
// commit of the context (whose key it returns) and the diff of the two
// commits' artifacts; false when there is no such list, the two differ
// by more than a quarter of the state's artifacts (one, for a state of
// fewer than four), or the diff fails (the caller then lists the state
// whole).
func (s *server) derivedIDs(ctx context.Context, ctxID string, c *replay.Commit, f listFilter) ([]string, string, bool) {
	key, ok := s.listedAt.Get(ctxID + f.suffix())
	if !ok {
		return nil, "", false
	}
	prev, ok := s.ids.Get(key)
	if !ok {
		return nil, "", false
	}
	most := max(prev.commit.Artifacts, c.Artifacts) / 4
	d, ok, err := s.store.DiffArtifactsWithin(ctx, prev.commit, c, most)
	if err != nil {
		// The whole listing then reads the map again and fails where it
		// must; corruption met here is noted all the same.
		s.store.NoteCorruption(err)
		return nil, "", false
	}
	if !ok {
		return nil, "", false
	}
	// What leaves the list and what joins it: for all ids, the removed
	// and the added; for a type or producer, also the changed artifacts
	// that moved out of it or into it.
	removed := map[string]bool{}
	var added []string
	for _, ch := range d.Removed {
		if f.matches(ch.Old.Type, ch.Old.ProducedBy) {
			removed[ch.ID] = true
		}
	}
	for _, ch := range d.Added {
		if f.matches(ch.New.Type, ch.New.ProducedBy) {
			added = append(added, ch.ID)
		}
	}
	for _, ch := range d.Changed {
		was, is := f.matches(ch.Old.Type, ch.Old.ProducedBy), f.matches(ch.New.Type, ch.New.ProducedBy)
		switch {
		case was && !is:
			removed[ch.ID] = true
		case is && !was:
			added = append(added, ch.ID)
		}
	}
	naturalSort(added)
	ids := make([]string, 0, len(prev.ids)-len(removed)+len(added))
	for _, id := range prev.ids {
		if removed[id] {
			continue
		}
		for len(added) > 0 && compareIDs(added[0], id) < 0 {
			ids, added = append(ids, added[0]), added[1:]
		}
		ids = append(ids, id)
	}
	return append(ids, added...), key, true
}

// idsCost is what a list of ids kept by listIDs costs: its strings'
// bytes and headers (a pointer and a length each).
func idsCost(ids []string) int {
	n := len(ids) * 16
	for _, id := range ids {
		n += len(id)
	}
	return n
}

func statusMatches(filter string, st graph.Status) bool {
	switch filter {
	case "":
		return true
	case "unconfirmed":
		return st != graph.StatusConfirmed
	}
	return string(st) == filter
}

// keep returns the named, non-empty query parameters of q, for forms that
// must carry them over.
func keep(q map[string][]string, names ...string) []param {
	var out []param
	for _, n := range names {
		if v := formValue(q, n); v != "" {
			out = append(out, formParam(n, v))
		}
	}
	return out
}

// A form cannot carry a value that is not UTF-8: a browser submits a
// hidden field holding such a byte as U+FFFD, so a list filtered by a
// producer written with one (history from before names were checked)
// would lose its filter, or take another producer's, at the next search.
// Such a value travels percent-encoded in a field of its own, name
// suffixed with encodedSuffix, which formValue reads back; links carry it
// as it is (%FF in a URL is a byte).
const encodedSuffix = "_pct"

// formParam is the hidden field that carries value as name: as it is,
// or percent-encoded under name+encodedSuffix when it is not UTF-8.
func formParam(name, value string) param {
	if utf8.ValidString(value) {
		return param{Name: name, Value: value}
	}
	return param{Name: name + encodedSuffix, Value: url.QueryEscape(value)}
}

// formValue is the first value of name in q, or, when it has none, the
// value formParam sent percent-encoded; "" when neither is there or the
// encoding is broken.
func formValue(q map[string][]string, name string) string {
	if vs := q[name]; len(vs) > 0 && vs[0] != "" {
		return vs[0]
	}
	if vs := q[name+encodedSuffix]; len(vs) > 0 {
		if v, err := url.QueryUnescape(vs[0]); err == nil {
			return v
		}
	}
	return ""
}
