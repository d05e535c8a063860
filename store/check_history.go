package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// This file checks, for every commit the replay in Check reaches, what the
// commit's stored state map and the context's reverse index hold — not
// only at branch heads — in time proportional to what each commit
// changed: the diff of the commit's map against its first parent's (the
// parent's already checked, an empty map for a root commit) must change
// exactly the entries the commit's ops changed, each to what the replayed
// state holds there; and every edge the diff adds must be named by the
// reverse index (when the map keeps its reverse edges apart), as a read of
// the commit over its map looks its target's dependents up there.

// wantEntry is what a commit's ops made of one state-map entry: its value
// after the commit (nil: absent) and whether it differs from the value
// before the commit, so the map diff must list it.
type wantEntry struct {
	val     []byte
	changed bool
}

// reverseKeptIn reports whether c's state map keeps its reverse edges in
// the map ('r' entries; a map of format 3 and the commits after it).
func reverseKeptIn(c *replay.Commit) bool { return c.Index != nil && !c.Index.ReverseApart }

// reverseApart reports whether c's state map keeps its reverse edges in
// the context's reverse index (format 4 on).
func reverseApart(c *replay.Commit) bool { return c.Index != nil && c.Index.ReverseApart }

// wantedEntries are the state-map entries the changes of commit c (its
// ops replayed on its first parent's state) touch, each with its value in
// st, the replayed state after c. An artifact's entry names the commit that
// wrote its version: c, for each artifact c changed.
func wantedEntries(c *replay.Commit, st *graph.State, changes []graph.Change) map[string]wantEntry {
	want := make(map[string]wantEntry, 2*len(changes))
	revIn := reverseKeptIn(c)
	// first records an entry at its first change, with whether the value
	// before the commit (the first change's) differs from st's.
	first := func(key []byte, val []byte, changed bool) {
		if _, seen := want[string(key)]; !seen {
			want[string(key)] = wantEntry{val: val, changed: changed}
		}
	}
	artifact := func(id string, prev *graph.Artifact, prevTomb int64) {
		a := st.Artifact(id)
		var val []byte
		if a != nil {
			val = encodeArtifactVal(a, c.ID)
		}
		// Versions only grow: the same version is the same artifact.
		first(tkArtifact(id), val, (prev == nil) != (a == nil) || prev != nil && prev.Version != a.Version)
		var tomb int64
		if a == nil {
			tomb = st.LastVersion(id)
		}
		var tval []byte
		if tomb != 0 {
			tval = encodeTombVal(tomb)
		}
		first(tkTomb(id), tval, prevTomb != tomb)
	}
	edge := func(k graph.EdgeKey, prev *graph.Edge) {
		e := st.Edge(k)
		var val []byte
		if e != nil {
			val = encodeEdgeVal(e.Attrs)
		}
		changed := (prev == nil) != (e == nil) || prev != nil && !bytes.Equal(prev.Attrs, e.Attrs)
		first(tkEdge(k), val, changed)
		if revIn {
			first(tkRev(k), val, changed)
		}
	}
	for _, ch := range changes {
		if ch.Noop {
			continue
		}
		switch ch.Op.Op {
		case graph.OpPut:
			artifact(ch.Next.ID, ch.Prev, ch.PrevTombstone)
		case graph.OpDelete:
			artifact(ch.Prev.ID, ch.Prev, 0) // a deleted artifact has no tombstone
		case graph.OpLink, graph.OpUnlink:
			edge(ch.Op.EdgeKey(), ch.PrevEdge)
		}
	}
	return want
}

// commitMap checks c's state map against st, the replayed state at c,
// through the diff of c's map against parent's (nil: c is a root commit),
// whose map holds the replayed state at parent (checked before). It
// returns why c's map does not hold st ("" when it does) and the edges
// the diff adds. The error is the check's own failure (I/O, ctx).
func (k *checker) commitMap(ctx context.Context, parent, c *replay.Commit, st *graph.State, changes []graph.Change) (string, []graph.EdgeKey, error) {
	want := wantedEntries(c, st, changes)
	// A commit onto a map without the index (written before format 3)
	// adds the whole index: a trust entry per unconfirmed artifact, and,
	// when it keeps them in the map, every reverse edge.
	addsIndex := parent != nil && parent.Index == nil && parent.RootCount > 0 && c.Index != nil
	var (
		bad   int
		first string
		added []graph.EdgeKey
		seen  = make(map[string]bool, len(want))
	)
	differ := func(key []byte, why string) {
		if bad++; first == "" {
			first = entryName(key) + ": " + why
		}
	}
	var from trieChild
	if parent != nil {
		from = rootOf(parent)
	}
	err := k.s.diffWindows(ctx, from, rootOf(c), readerWorkers(), func(key, old, new []byte) error {
		if len(key) == 0 {
			differ(key, "an empty key")
			return nil
		}
		if key[0] == 'e' && old == nil && new != nil {
			if ek, err := splitEdgeKey(key); err == nil {
				added = append(added, ek)
			}
		}
		w, touched := want[string(key)]
		switch {
		case touched:
			seen[string(key)] = true
			if !bytes.Equal(new, w.val) {
				differ(key, "the map holds "+entryValue(key, new)+", the replayed state "+entryValue(key, w.val))
			}
		case key[0] == 'q':
			// Trust entries follow from the whole state: they are checked
			// at each branch head (checkMapIndex), and counted here.
		case key[0] == 'r' && addsIndex && reverseKeptIn(c):
			ek, err := splitRevKey(key)
			var val []byte
			if e := st.Edge(ek); err == nil && e != nil {
				val = encodeEdgeVal(e.Attrs)
			}
			if old != nil || !bytes.Equal(new, val) {
				differ(key, "the map holds "+entryValue(key, new)+", the replayed state "+entryValue(key, val))
			}
		default:
			differ(key, "the map changes it from "+entryValue(key, old)+" to "+entryValue(key, new)+", which the commit's ops do not")
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil || !fault.IsCorrupt(err) {
			return "", nil, fmt.Errorf("diff the state map of commit %s against its parent's: %w", c.ID.Short(), err)
		}
		return "its state map cannot be read against its parent's: " + err.Error(), nil, nil
	}
	var missed []string
	for key, w := range want {
		if w.changed && !seen[key] {
			missed = append(missed, key)
		}
	}
	slices.Sort(missed) // name the least, as the diff's order would
	for _, key := range missed {
		differ([]byte(key), "the commit's ops change it to "+entryValue([]byte(key), want[key].val)+", the map keeps its parent's")
	}
	if bad == 0 {
		return "", added, nil
	}
	what := "1 entry differs"
	if bad > 1 {
		what = strconv.Itoa(bad) + " entries differ"
	}
	return fmt.Sprintf("its state map does not hold the commit's state (%s; a read at the commit serves the map): %s", what, first), added, nil
}

// entryName names a state-map entry by its key.
func entryName(key []byte) string {
	if len(key) == 0 {
		return "entry \"\""
	}
	switch key[0] {
	case 'a':
		return "artifact " + strconv.Quote(string(key[1:]))
	case 't':
		return "tombstone of " + strconv.Quote(string(key[1:]))
	case 'q':
		return "trust entry of " + strconv.Quote(string(key[1:]))
	case 'e', 'r':
		split := splitEdgeKey
		what := "edge"
		if key[0] == 'r' {
			split, what = splitRevKey, "reverse edge"
		}
		if ek, err := split(key); err == nil {
			return fmt.Sprintf("%s %q -%s-> %q", what, ek.From, ek.Rel, ek.To)
		}
	}
	return fmt.Sprintf("entry %q", key)
}

// entryValue describes the value of a state-map entry (nil: absent).
func entryValue(key, v []byte) string {
	if v == nil {
		return "none"
	}
	switch key[0] {
	case 'a':
		av, err := decodeArtifactVal(v)
		if err != nil {
			return "an undecodable value"
		}
		return fmt.Sprintf("version %d (%s, written by commit %s)", av.version, av.contentHash.Short(), av.commit.Short())
	case 't':
		n, err := decodeTombVal(v)
		if err != nil {
			return "an undecodable value"
		}
		return fmt.Sprintf("version %d", n)
	case 'e', 'r':
		if attrs := decodeEdgeVal(v); attrs != nil {
			return "attrs " + string(attrs)
		}
		return "the edge"
	}
	return fmt.Sprintf("%d bytes", len(v))
}

// commitReverse checks that the context's reverse index names every edge
// that c's map holds and its first parent's map (nil: none) did not keep
// apart: the edges the diff of the two maps adds (added), or, when the
// parent's map has no reverse edges apart (c's map is the first to), every
// edge of st, the replayed state at c. A read of c over its map finds an
// artifact's dependents only through the index. It returns why the index
// falls short ("" when it does not); the error is the check's own failure.
// Each edge is looked for in c's own record of its target (the committer
// indexes a new edge there), and, failing that, in every record of its
// target.
func (k *checker) commitReverse(ctx context.Context, ctxID string, parent, c *replay.Commit, st *graph.State, added []graph.EdgeKey) (string, error) {
	if !reverseApart(c) {
		return "", nil
	}
	need := added
	if parent != nil && !reverseApart(parent) && parent.RootCount > 0 {
		need = need[:0:0]
		st.RangeEdges(func(e *graph.Edge) bool {
			need = append(need, e.Key())
			return true
		})
	}
	if len(need) == 0 {
		return "", nil
	}
	slices.SortFunc(need, edgeByTarget)
	var (
		lacking []graph.EdgeKey
		bad     string
		// groups[g] is where the edges of the g-th target start in need,
		// and own[g] that target's record of c, read for a part of
		// revPart targets at a time (ownRecords).
		groups []int
		own    []ownRecord
	)
	for i := range need {
		if i == 0 || need[i].To != need[i-1].To {
			groups = append(groups, i)
		}
	}
	for g, i := range groups {
		if g%revPart == 0 {
			var err error
			if own, err = k.ownRecords(ctx, ctxID, c, need, groups[g:min(g+revPart, len(groups))]); err != nil {
				return "", err
			}
		}
		to := need[i].To
		j := len(need)
		if g+1 < len(groups) {
			j = groups[g+1]
		}
		named := map[graph.EdgeKey]bool{}
		note := func(e graph.EdgeKey) { named[e] = true }
		v, err := own[g%revPart].v, own[g%revPart].err
		switch {
		case err == nil:
			err = decodeRevVal(to, v, note)
		case errors.Is(err, kv.ErrNotFound):
			err = nil
		}
		if err == nil && slices.ContainsFunc(need[i:j], func(e graph.EdgeKey) bool { return !named[e] }) {
			// Not in c's own record: an older record may name it.
			err = k.s.kv.Scan(ctx, prefixRev(ctxID, to), nil, 0, func(_, v []byte) error {
				return decodeRevVal(to, v, note)
			})
		}
		if err != nil {
			if ctx.Err() != nil || !fault.IsCorrupt(err) {
				return "", fmt.Errorf("read the reverse index of %q in %q: %w", to, ctxID, err)
			}
			if bad == "" {
				bad = fmt.Sprintf("the reverse index of %q cannot be read: %v", to, err)
			}
		}
		for _, e := range need[i:j] {
			if !named[e] && err == nil {
				lacking = append(lacking, e)
			}
		}
	}
	if len(lacking) == 0 {
		return bad, nil
	}
	e := lacking[0]
	more := ""
	if len(lacking) > 1 {
		more = fmt.Sprintf(" (and %d more edges)", len(lacking)-1)
	}
	return fmt.Sprintf("the reverse index lacks the edge %q -%s-> %q%s that its state map holds: a read of the commit over its map misses it among %q's dependents",
		e.From, e.Rel, e.To, more, e.To), nil
}

// revPart is how many targets' records of one commit commitReverse reads
// in one call to the driver.
const revPart = prefetchPart

// ownRecord is a target's reverse-index record of one commit, as Get
// gives it: its value, or why there is none (kv.ErrNotFound: not stored).
type ownRecord struct {
	v   []byte
	err error
}

// ownRecords reads c's reverse-index record of each target whose edges
// start at need[i] for each i in starts, in one driver call: what a Get of
// each would give. A part the driver cannot read whole (one record
// unreadable) is read a record at a time, so that the error falls on its
// own target. The error is the check's own failure (I/O, ctx).
func (k *checker) ownRecords(ctx context.Context, ctxID string, c *replay.Commit, need []graph.EdgeKey, starts []int) ([]ownRecord, error) {
	keys := make([][]byte, len(starts))
	for g, i := range starts {
		keys[g] = keyRev(ctxID, need[i].To, c.ID)
	}
	out := make([]ownRecord, len(starts))
	vals, err := k.s.kv.GetMany(ctx, keys)
	switch {
	case err == nil:
		for g, v := range vals {
			out[g] = ownRecord{v: v}
			if v == nil {
				out[g].err = kv.ErrNotFound
			}
		}
	case ctx.Err() != nil || !fault.IsCorrupt(err):
		return nil, fmt.Errorf("read the reverse index of commit %s in %q: %w", c.ID.Short(), ctxID, err)
	default:
		for g, key := range keys {
			out[g].v, out[g].err = k.s.kv.Get(ctx, key)
		}
	}
	return out, nil
}

// newHistoryCheck starts the per-commit checks of context ctxID's
// commits, of which mapBroken have a state map that is not whole (the
// check keeps it as its unsure set and adds to it).
func newHistoryCheck(ctxID string, commits []*replay.Commit, mapBroken map[hashing.Digest]bool) *historyCheck {
	h := &historyCheck{
		ctxID:  ctxID,
		byID:   make(map[hashing.Digest]*replay.Commit, len(commits)),
		unsure: mapBroken,
		wrong:  map[hashing.Digest]bool{},
	}
	for _, c := range commits {
		h.byID[c.ID] = c
	}
	return h
}

// historyCheck is what the per-commit checks of one context's replay
// keep (commitHistory).
type historyCheck struct {
	ctxID string
	byID  map[hashing.Digest]*replay.Commit // the context's commits
	// unsure are the commits whose state map is not known to hold their
	// replayed state: not whole, found wrong, or not checked (its first
	// parent's was unsure). A commit's map is checked by its diff against
	// its first parent's, so a child of one is not checked either.
	unsure map[hashing.Digest]bool
	// wrong are the commits whose map was found not to hold their state
	// (reported): the checks of a branch head's map do not report it again.
	wrong map[hashing.Digest]bool
}

// commitHistory checks, as the replay in Check reaches commit c with st
// (its replayed state) and changes (what its ops changed), c's state map
// and the reverse index it reads through (commitMap, commitReverse), and
// reports what falls short on c. The error is the check's own failure.
func (k *checker) commitHistory(ctx context.Context, h *historyCheck, c *replay.Commit, st *graph.State, changes []graph.Change) error {
	var parent *replay.Commit
	if len(c.Parents) > 0 {
		parent = h.byID[c.Parents[0]]
		if parent == nil || h.unsure[parent.ID] {
			h.unsure[c.ID] = true // no checked map to diff against (reported there)
			return nil
		}
	}
	if h.unsure[c.ID] {
		return nil // its map is not whole (reported with its nodes)
	}
	ctxID := h.ctxID
	why, added, err := k.commitMap(ctx, parent, c, st, changes)
	if err != nil {
		return err
	}
	if why != "" {
		h.unsure[c.ID], h.wrong[c.ID] = true, true
		k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(), Detail: why})
		return nil
	}
	if why, err = k.commitReverse(ctx, ctxID, parent, c, st, added); err != nil {
		return err
	}
	if why != "" {
		k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(), Detail: why})
	}
	return nil
}
