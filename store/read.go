package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// errEnough stops a scan that found what it needs.
var errEnough = errors.New("enough")

// Branch is a named ref.
type Branch struct {
	Name string         `json:"name"`
	Head hashing.Digest `json:"head"`
}

// Branches lists a context's branches sorted by name.
func (s *Store) Branches(ctx context.Context, ctxID string) ([]Branch, error) {
	if _, err := s.ctxState(ctxID); err != nil {
		return nil, err
	}
	var out []Branch
	p := prefixRefs(ctxID)
	err := s.kv.Scan(ctx, p, nil, 0, func(k, v []byte) error {
		b, ok := refBranch(p, k, v)
		if !ok {
			return fmt.Errorf("%w: ref %q has %d bytes", ErrCorrupt, b.Name, len(v))
		}
		out = append(out, b)
		return nil
	})
	return out, err
}

// refBranch reads the ref record k, v under prefixRefs p; false, with the
// branch's name only, when v is not a commit id.
func refBranch(p, k, v []byte) (Branch, bool) {
	b := Branch{Name: string(k[len(p):])}
	if len(v) != len(b.Head) {
		return b, false
	}
	copy(b.Head[:], v)
	return b, true
}

func (s *Store) ref(ctxID, branch string) (hashing.Digest, error) {
	var d hashing.Digest
	v, err := s.kv.Get(context.Background(), keyRef(ctxID, branch))
	if errors.Is(err, kv.ErrNotFound) {
		return d, fmt.Errorf("branch %q of context %q: %w", branch, ctxID, ErrNotFound)
	}
	if err != nil {
		return d, err
	}
	if len(v) != 32 {
		return d, fmt.Errorf("%w: ref %q", ErrCorrupt, branch)
	}
	copy(d[:], v)
	return d, err
}

// GetCommit returns a commit record.
func (s *Store) GetCommit(ctx context.Context, ctxID string, id hashing.Digest) (*replay.Commit, error) {
	if _, err := s.ctxState(ctxID); err != nil {
		return nil, err
	}
	return s.commitRecord(ctxID, id)
}

func (s *Store) commitRecord(ctxID string, id hashing.Digest) (*replay.Commit, error) {
	var c replay.Commit
	v, err := s.kv.Get(context.Background(), keyCommit(ctxID, id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("commit %s in context %q: %w", id.Short(), ctxID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, fmt.Errorf("%w: commit record %s: %v", ErrCorrupt, id.Short(), err)
	}
	if c.ID != id {
		return nil, fmt.Errorf("%w: commit record under %s claims id %s", ErrCorrupt, id.Short(), c.ID.Short())
	}
	return &c, nil
}

// linkedCommit reads a commit that another record names (a ref, a parent
// link, the commit index): its absence is corruption, not a miss.
func (s *Store) linkedCommit(ctxID string, id hashing.Digest, from string) (*replay.Commit, error) {
	c, err := s.commitRecord(ctxID, id)
	return c, missingIsCorrupt(err, ctxID, id, from)
}

// missingIsCorrupt turns a commit lookup's ErrNotFound into ErrCorrupt:
// the commit was named by another record (from), so its absence is
// damage, not a miss.
func missingIsCorrupt(err error, ctxID string, id hashing.Digest, from string) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s names commit %s of context %q, which is missing (run artifactd fsck)", ErrCorrupt, from, id.Short(), ctxID)
	}
	return err
}

// Resolve turns a reference into a commit: "" (the main head), a branch
// name, a full "sha256:<hex>" id, bare hex, or a unique prefix of at least
// 8 hex digits. New branches may not have names that read as commit ids
// (ValidateNewBranch); for a branch an older store has with such a name,
// a full id (64 hex digits) of a commit of the context is that commit,
// and digits that are the branch's name and a prefix of another commit's
// id are a *BranchOrCommitError (ErrAmbiguous) naming both, never one of
// them silently: a proof of a commit's hash cannot be pointed at another
// commit. "sha256:<digits>" is always a commit. A ref that names nothing
// of an existing context is an *UnknownRefError (ErrNotFound); a prefix
// that matches several commits is ErrAmbiguous.
func (s *Store) Resolve(ctx context.Context, ctxID, ref string) (*replay.Commit, error) {
	if _, err := s.ctxState(ctxID); err != nil {
		return nil, err
	}
	if ref == "" {
		ref = DefaultBranch
	}
	if prefix, err := hashing.HexPrefix(ref); err == nil && len(prefix) == 64 {
		// A full id is its commit whatever a branch is named: one point
		// read, not the branch lookup and a scan of the commit index.
		d, _ := hashing.ParseDigest("sha256:" + prefix)
		if c, err := s.commitRecord(ctxID, d); err == nil || !errors.Is(err, ErrNotFound) {
			return c, err
		}
	}
	head, ok, err := s.namedBranch(ctx, ctxID, ref)
	if err != nil {
		return nil, err
	}
	if ok {
		return s.linkedCommit(ctxID, head, "branch "+ref)
	}
	prefix, err := hashing.HexPrefix(ref)
	if err != nil {
		return nil, &UnknownRefError{Context: ctxID, Ref: ref,
			Why: fmt.Sprintf("%q is neither a branch of context %q nor a commit id (want sha256:<hex>, bare hex or a prefix of at least 8 hex digits)", ref, ctxID)}
	}
	matches, err := s.commitsByPrefix(ctx, ctxID, prefix)
	if err != nil {
		return nil, err
	}
	switch len(matches) {
	case 0:
		return nil, &UnknownRefError{Context: ctxID, Ref: ref, Why: fmt.Sprintf("no commit of context %q starts with %s", ctxID, prefix)}
	case 1:
		return s.linkedCommit(ctxID, matches[0], "the commit index")
	}
	return nil, fmt.Errorf("%w: %s matches more than one commit of context %q; give more digits", ErrAmbiguous, prefix, ctxID)
}

// UnknownRefError is the ErrNotFound of Resolve (and of Read) when the
// context exists and Ref names none of its branches or commits: what the
// client must change is the ref, not the context. Why says which.
type UnknownRefError struct {
	Context string
	Ref     string
	Why     string
}

// Error is ErrNotFound's text followed by Why.
func (e *UnknownRefError) Error() string { return fmt.Sprintf("%v: %s", ErrNotFound, e.Why) }

// Unwrap returns ErrNotFound.
func (e *UnknownRefError) Unwrap() error { return ErrNotFound }

// BranchOrCommitError is the ErrAmbiguous of a ref that is the name of a
// branch (one made before ValidateNewBranch) and a prefix of the id of
// another commit than the branch's head: Resolve picks neither.
type BranchOrCommitError struct {
	Context string
	Ref     string         // the branch's name, the digits
	Head    hashing.Digest // the branch's head
	Commit  hashing.Digest // a commit whose id starts with Ref
}

// Error names both candidates and how to name each unambiguously.
func (e *BranchOrCommitError) Error() string {
	return fmt.Sprintf("%v: %s of context %q is both a branch (at %s) and a prefix of commit %s; give sha256:%s for the commit, or the branch's head %s",
		ErrAmbiguous, e.Ref, e.Context, e.Head.Short(), e.Commit.Short(), e.Ref, e.Head.Short())
}

// Unwrap returns ErrAmbiguous.
func (e *BranchOrCommitError) Unwrap() error { return ErrAmbiguous }

// namedBranch returns the head of the branch ref names; ok is false when
// ref names no branch, or a branch whose name is also the full id of a
// commit of the context (the commit wins). A branch named with digits
// that another commit's id starts with is a *BranchOrCommitError; the
// commit index is read only for a branch whose name reads as a commit id
// (ReadsAsCommitID).
func (s *Store) namedBranch(ctx context.Context, ctxID, ref string) (head hashing.Digest, ok bool, err error) {
	if ValidateBranch(ref) != nil {
		return head, false, nil
	}
	head, err = s.ref(ctxID, ref)
	if errors.Is(err, ErrNotFound) {
		return head, false, nil
	}
	if err != nil {
		return head, false, err
	}
	prefix, perr := hashing.HexPrefix(ref)
	if perr != nil {
		return head, true, nil
	}
	matches, err := s.commitsByPrefix(ctx, ctxID, prefix)
	if err != nil {
		return head, false, err
	}
	var other hashing.Digest
	for _, m := range matches {
		if m != head {
			other = m
		}
	}
	switch {
	case other.IsZero():
		return head, true, nil
	case len(prefix) == 64:
		return head, false, nil
	}
	return head, false, &BranchOrCommitError{Context: ctxID, Ref: ref, Head: head, Commit: other}
}

// commitsByPrefix returns the ids of the commits of context ctxID that
// start with prefix (lowercase hex), at most two: enough to tell none,
// one and several apart.
func (s *Store) commitsByPrefix(ctx context.Context, ctxID, prefix string) ([]hashing.Digest, error) {
	raw, _ := hex.DecodeString(prefix[:len(prefix)/2*2])
	var matches []hashing.Digest
	err := kv.ScanKeys(ctx, s.kv, append(prefixCommits(ctxID), raw...), nil, 0, func(k []byte) error {
		var d hashing.Digest
		copy(d[:], k[len(k)-32:])
		if strings.HasPrefix(d.Hex(), prefix) {
			matches = append(matches, d)
			if len(matches) == 2 {
				return errEnough
			}
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return matches, err
}

// head returns the in-memory head of a branch for a reader, loading it
// from the state map when needed. The committer uses group.head instead.
//
// A loaded head is cached only when the committer dropped no head while it
// loaded and moves no ref of this branch in the group it is writing:
// otherwise the ref read may be older than the one about to be written,
// and a cached stale head would become the parent of the next commit. An
// uncached head is still a consistent snapshot for this one read.
func (s *Store) head(ctxID, branch string) (*head, error) {
	key := headKey(ctxID, branch)
	s.mu.Lock()
	h := s.heads[key]
	gen := s.headGen
	s.mu.Unlock()
	if h != nil {
		s.touch(h)
		return h, nil
	}
	id, err := s.ref(ctxID, branch)
	if err != nil {
		return nil, err
	}
	c, err := s.linkedCommit(ctxID, id, "branch "+branch)
	if err != nil {
		return nil, err
	}
	cs, err := s.ctxState(ctxID)
	if err != nil {
		return nil, err
	}
	opened := s.openingHead(ctxID)
	st, trust, base, err := s.openHead(s, cs.info, c, true)
	if err != nil {
		opened()
		return nil, err
	}
	h = s.newHead(ctxID, branch, c, st, trust, base)
	s.touch(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.openedLocked(ctxID) // cached by now, or left to the reader
	if existing := s.heads[key]; existing != nil {
		return existing, nil
	}
	// Cache the head only if it is still the branch's durable head: a
	// commit group may have moved the ref since it was read (and its own
	// head may since have been evicted from the cache).
	if cur, err := s.ref(ctxID, branch); err == nil && cur == c.ID && s.headGen == gen && s.moving[key] == 0 {
		s.heads[key] = h
		s.evictHeadsLocked()
	}
	return h, nil
}

// dropHead removes h from the head cache unless a commit group holds it.
func (s *Store) dropHead(h *head) {
	key := headKey(h.ctx, h.branch)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heads[key] == h && !h.inGroup.Load() {
		delete(s.heads, key)
	}
}

// loadState materializes the state of a commit of context info from its
// state map (read through src, its nodes prefetched up to workers parts at
// once, under ctx; metadata only: artifact Data is nil but for
// definitions) and checks it against the commit's context hash.
func (s *Store) loadState(ctx context.Context, src nodeSource, info ContextInfo, c *replay.Commit, workers int) (*graph.State, error) {
	rs, err := info.ruleset()
	if err != nil {
		return nil, err
	}
	arts := make([]*graph.Artifact, 0, c.Artifacts)
	edges := make([]*graph.Edge, 0, c.Edges)
	var tombs []graph.Tombstone
	root := trieChild{id: c.Root, count: c.RootCount}
	if src, err = s.prefetchTrie(ctx, src, root, workers); err != nil {
		return nil, fmt.Errorf("load state of commit %s: %w", c.ID.Short(), err)
	}
	err = trieWalk(src, root, func(k, v []byte) error {
		if len(k) == 0 {
			return fmt.Errorf("%w: empty state key", ErrCorrupt)
		}
		switch k[0] {
		case 'a':
			av, err := decodeArtifactVal(v)
			if err != nil {
				return err
			}
			a := av.artifact(string(k[1:]))
			if graph.IsDefinitionType(a.Type) {
				if a.Data, err = s.object(a.ContentHash); err != nil {
					return fmt.Errorf("definition %q: %w", a.ID, err)
				}
			}
			arts = append(arts, a)
		case 't':
			ver, err := decodeTombVal(v)
			if err != nil {
				return err
			}
			tombs = append(tombs, graph.Tombstone{ID: string(k[1:]), Version: ver})
		case 'e':
			ek, err := splitEdgeKey(k)
			if err != nil {
				return err
			}
			attrs := decodeEdgeVal(v)
			edges = append(edges, &graph.Edge{From: ek.From, Rel: ek.Rel, To: ek.To, Attrs: append([]byte(nil), attrs...)})
		case 'r', 'q':
			// The index (format 3): derived from the rest, which a whole
			// state recomputes; fsck checks that they agree.
		default:
			return fmt.Errorf("%w: unknown state key kind %q", ErrCorrupt, k[0])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load state of commit %s: %w", c.ID.Short(), err)
	}
	st, err := graph.Load(rs, arts, tombs, edges)
	if err != nil {
		return nil, fmt.Errorf("%w: load state of commit %s: %w", ErrCorrupt, c.ID.Short(), err)
	}
	if got := st.Hash(); got != c.ContextHash {
		return nil, fmt.Errorf("%w: state map of commit %s hashes to %s, the commit records %s", ErrCorrupt, c.ID.Short(), got, c.ContextHash)
	}
	return st, nil
}

// View is a read-only look at the state at one commit. It is valid only
// inside the callback that received it.
type View struct {
	Commit *replay.Commit
	State  *graph.State
	Trust  *graph.TrustIndex
	// Branch is set when the view is a branch head.
	Branch string
	store  *Store
	ctxID  string
}

// ContextID returns the id of the context the view reads.
func (v *View) ContextID() string { return v.ctxID }

// Data returns an artifact's canonical data.
func (v *View) Data(a *graph.Artifact) (json.RawMessage, error) {
	if a.Data != nil {
		return a.Data, nil
	}
	return v.store.object(a.ContentHash)
}

// DataMany returns the canonical data of arts, in order: what the
// object cache holds, the rest read in batches (one GetMany a part, one
// part at a time) rather than one lookup each, for a read that needs the
// data of thousands of artifacts (an audit). A missing or altered payload
// is corruption.
func (v *View) DataMany(ctx context.Context, arts []*graph.Artifact) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(arts))
	var want []hashing.Digest
	at := map[hashing.Digest]int{} // index in want
	for i, a := range arts {
		if a.Data != nil {
			out[i] = a.Data
			continue
		}
		if _, ok := at[a.ContentHash]; ok {
			continue
		}
		if b, ok := v.store.objects.Get(a.ContentHash); ok {
			out[i] = b
			continue
		}
		at[a.ContentHash] = len(want)
		want = append(want, a.ContentHash)
	}
	if len(want) == 0 {
		return out, nil
	}
	// One part at a time: a long read leaves the other core to commits.
	got, err := readMany(ctx, v.store, want, 1, keyObj, v.store.checkedObject)
	if err != nil {
		return nil, err
	}
	for i, a := range arts {
		if out[i] == nil {
			out[i] = got[at[a.ContentHash]]
		}
	}
	return out, nil
}

// DataOf returns DataMany under ctx as a graph.DataFunc, for graph.Audit.
func (v *View) DataOf(ctx context.Context) graph.DataFunc {
	return func(arts []*graph.Artifact) ([]json.RawMessage, error) { return v.DataMany(ctx, arts) }
}

// Base returns the trust base function used for this view.
func (v *View) Base() graph.BaseFunc { return v.store.baseFor(v.State) }

type materialized struct {
	state *graph.State
	trust *graph.TrustIndex
}

// view is a view of m, the state of commit c of context ctxID.
func (m *materialized) view(s *Store, ctxID string, c *replay.Commit) *View {
	return &View{Commit: c, State: m.state, Trust: m.trust, store: s, ctxID: ctxID}
}

// Read calls fn with a view of the state at ref (see Resolve). At a branch
// head it reads the in-memory head as a snapshot: commits to the branch
// that land while fn runs do not change what fn sees, and fn does not
// hold them up. At any other commit it reads the commit's state map
// (ReadAt). fn must not retain the view or mutate the state.
func (s *Store) Read(ctx context.Context, ctxID, ref string, fn func(v *View) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.ctxState(ctxID); err != nil {
		return err
	}
	branch := ref
	if branch == "" {
		branch = DefaultBranch
	}
	cur, ok, err := s.namedBranch(ctx, ctxID, branch)
	if err != nil {
		return err
	}
	if ok {
		for {
			h, err := s.head(ctxID, branch)
			if err != nil {
				return err
			}
			h.mu.RLock()
			if h.dropped { // a failed group changed it: load it again
				h.mu.RUnlock()
				continue
			}
			if s.shared && h.commit.ID != cur {
				// Another process moved the ref: the cached head is
				// not the one read. Read the ref's commit instead,
				// and let the next use reload the head.
				h.mu.RUnlock()
				s.dropHead(h)
				c, err := s.linkedCommit(ctxID, cur, "branch "+branch)
				if err != nil {
					return err
				}
				return s.ReadAt(ctx, ctxID, c, fn)
			}
			// Pin the head's state and read it without the lock: a
			// commit group that lands meanwhile leaves a pinned state
			// as it is (headFork.advance), so a long read neither
			// waits for commits nor holds them up.
			v := &View{Commit: h.commit, State: h.state, Trust: h.trust, Branch: branch, store: s, ctxID: ctxID}
			pins := h.pins
			pins.Add(1)
			h.mu.RUnlock()
			defer pins.Add(-1)
			err = s.viewErr(v, fn(v), fmt.Sprintf("branch %q", branch))
			if v.Err() != nil {
				s.dropHead(h) // load it afresh
			}
			return err
		}
	}
	c, err := s.Resolve(ctx, ctxID, ref)
	if err != nil {
		return err
	}
	return s.ReadAt(ctx, ctxID, c, fn)
}

// ReadAt is Read at commit c of context ctxID, never at a cached branch
// head. A state that fits the old-state cache, or a map written before
// format 3, is loaded whole and cached (ReadCommit): repeated reads of a
// small old commit read memory. A bigger state never fitted the cache
// and was loaded again on every read; it is read through its state map
// instead (openAt): the view costs a few lookups to open, and each read
// what it reads — a read of one artifact of a million-artifact context
// at an old commit does not load the million. fn must not retain the
// view or mutate the state.
func (s *Store) ReadAt(ctx context.Context, ctxID string, c *replay.Commit, fn func(v *View) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !indexed(c) || commitStateCost(c) <= s.states.Max() {
		return s.ReadCommit(ctx, ctxID, c, fn)
	}
	return s.readMap(ctx, ctxID, c, fn)
}

// ReadSparse calls fn with a view of commit c's state that reads what fn
// reads: a state already loaded whole and cached, else one over c's
// state map (readMap). For reads that look at a few entries (a merge's
// base and far side, the producers a comparison names): unlike ReadAt,
// it does not load a small state whole to look at a few of its entries,
// nor fill the old-state cache with it — except for a map written before
// format 3, which holds no index to read it by and is loaded whole
// (ReadCommit). fn must not retain the view or mutate the state.
//
// Errors: ErrNotFound for an unknown context; the first failed read of
// the map (View.Err) once fn returns, which is ErrCorrupt (and noted as
// corruption) for a node that is gone or does not verify, and ctx's error
// when ctx ended while fn walked the map; else fn's error.
func (s *Store) ReadSparse(ctx context.Context, ctxID string, c *replay.Commit, fn func(v *View) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := stateKey(ctxID, c)
	if m, ok := s.states.Get(key); ok {
		return fn(m.view(s, ctxID, c))
	}
	if !indexed(c) {
		return s.readWhole(ctx, ctxID, c, key, fn)
	}
	return s.readMap(ctx, ctxID, c, fn)
}

// readMap calls fn with a view of commit c's state over its state map
// (openAt); c's map must hold its index (indexed). A view that does not
// open, or that fails a read fn made, notes corruption.
func (s *Store) readMap(ctx context.Context, ctxID string, c *replay.Commit, fn func(v *View) error) error {
	cs, err := s.ctxState(ctxID)
	if err != nil {
		return err
	}
	st, trust, err := s.openAt(ctx, cs.info, c)
	if err != nil {
		s.NoteCorruption(err)
		return err
	}
	v := &View{Commit: c, State: st, Trust: trust, store: s, ctxID: ctxID}
	return s.viewErr(v, fn(v), "commit "+c.ID.Short())
}

// viewErr is what a read through view v returns once its fn returned
// ferr: when a read of v's state failed, what fn saw may lack entries
// that are stored but could not be read, so the read fails with that
// error (what names the state read), noted as corruption; else ferr.
func (s *Store) viewErr(v *View, ferr error, what string) error {
	if rerr := v.Err(); rerr != nil {
		s.NoteCorruption(rerr)
		return fmt.Errorf("read the state of %s: %w", what, rerr)
	}
	return ferr
}

// stateKey is the key of commit c of context ctxID in the old-state
// cache (ReadCommit).
func stateKey(ctxID string, c *replay.Commit) string { return ctxID + "\x00" + string(c.ID[:]) }

// ReadCommit calls fn with a view of commit c's state loaded whole
// (cached for a few recent commits, within 15 % of the cache budget): for
// reads that walk most of a small state, and tests that compare with a
// whole load; ReadAt uses it for the old commits whose states fit the
// cache. Merges and diffs read through the maps (ReadSparse, DiffStates),
// using a state loaded here only when it is cached.
func (s *Store) ReadCommit(ctx context.Context, ctxID string, c *replay.Commit, fn func(v *View) error) error {
	key := stateKey(ctxID, c)
	if m, ok := s.states.Get(key); ok {
		return fn(m.view(s, ctxID, c))
	}
	return s.readWhole(ctx, ctxID, c, key, fn)
}

// readWhole loads commit c's state whole under ctx, caches it in the
// old-state cache under key (stateKey; the caller found nothing there)
// and calls fn with a view of it. A load cut short by ctx caches nothing.
func (s *Store) readWhole(ctx context.Context, ctxID string, c *replay.Commit, key string, fn func(v *View) error) error {
	cs, err := s.ctxState(ctxID)
	if err != nil {
		return err
	}
	st, err := s.loadState(ctx, s, cs.info, c, readerWorkers())
	if err != nil {
		return err
	}
	m := &materialized{state: st, trust: graph.NewTrustIndexFor(st, s.baseFor)}
	st.Share() // readers clone it concurrently (a merge's plan)
	s.states.Put(key, m)
	return fn(m.view(s, ctxID, c))
}

// ArtifactAt returns one artifact (with Data) at a commit by a point lookup
// in the commit's state map: it never loads the whole state. It returns
// ErrNotFound when the artifact does not exist at that commit, and the
// commit that wrote the version.
func (s *Store) ArtifactAt(ctx context.Context, ctxID string, c *replay.Commit, id string) (*graph.Artifact, hashing.Digest, error) {
	v, err := trieGet(s, trieChild{id: c.Root, count: c.RootCount}, tkArtifact(id))
	if err != nil {
		return nil, hashing.Digest{}, err
	}
	if v == nil {
		return nil, hashing.Digest{}, fmt.Errorf("artifact %q at commit %s: %w", id, c.ID.Short(), ErrNotFound)
	}
	av, err := decodeArtifactVal(v)
	if err != nil {
		return nil, hashing.Digest{}, err
	}
	a := av.artifact(id)
	if a.Data, err = s.object(a.ContentHash); err != nil {
		return nil, hashing.Digest{}, err
	}
	return a, av.commit, nil
}

// Version is one version of an artifact in its history.
type Version struct {
	Version     int64          `json:"version"`
	Type        string         `json:"type"`
	ContentHash hashing.Digest `json:"content_hash"`
	ProducedBy  string         `json:"produced_by"`
	Commit      hashing.Digest `json:"commit"`
	Time        string         `json:"time"`
}

// History returns the versions of an artifact reachable from commit c
// along first parents, newest first. Each step is a point lookup: the cost
// is proportional to the number of versions, not to the history length.
func (s *Store) History(ctx context.Context, ctxID string, c *replay.Commit, id string) ([]Version, error) {
	var out []Version
	cur := c
	for cur != nil {
		v, err := trieGet(s, trieChild{id: cur.Root, count: cur.RootCount}, tkArtifact(id))
		if err != nil {
			return nil, err
		}
		if v == nil {
			break
		}
		av, err := decodeArtifactVal(v)
		if err != nil {
			return nil, err
		}
		wrote, err := s.linkedCommit(ctxID, av.commit, "artifact "+id)
		if err != nil {
			return nil, err
		}
		out = append(out, Version{Version: av.version, Type: av.typ, ContentHash: av.contentHash, ProducedBy: av.producedBy, Commit: av.commit, Time: wrote.Time})
		if len(wrote.Parents) == 0 {
			break
		}
		if cur, err = s.linkedCommit(ctxID, wrote.Parents[0], "commit "+wrote.ID.Short()); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("artifact %q at commit %s: %w", id, c.ID.Short(), ErrNotFound)
	}
	return out, nil
}

// Log returns up to limit commits reachable from c along first parents,
// newest first, starting at c.
func (s *Store) Log(ctx context.Context, ctxID string, c *replay.Commit, limit int) ([]*replay.Commit, error) {
	var out []*replay.Commit
	cur := c
	for cur != nil && (limit <= 0 || len(out) < limit) {
		out = append(out, cur)
		if len(cur.Parents) == 0 {
			break
		}
		next, err := s.linkedCommit(ctxID, cur.Parents[0], "commit "+cur.ID.Short())
		if err != nil {
			return out, err
		}
		cur = next
	}
	return out, nil
}

// Commits calls fn for every commit of a context in insertion order (Seq
// ascending: parents before children), starting after seq after.
func (s *Store) Commits(ctx context.Context, ctxID string, after uint64, fn func(c *replay.Commit) error) error {
	if _, err := s.ctxState(ctxID); err != nil {
		return err
	}
	var ids []hashing.Digest
	var seqs []uint64
	const page = 1024
	for {
		ids, seqs = ids[:0], seqs[:0]
		err := s.kv.Scan(ctx, prefixSeq(ctxID), keySeq(ctxID, after+1), page, func(k, v []byte) error {
			if len(v) != 32 || len(k) < 8 {
				return fmt.Errorf("%w: seq record %q", ErrCorrupt, k)
			}
			ids = append(ids, hashing.Digest(v))
			seqs = append(seqs, beUint64(k[len(k)-8:]))
			return nil
		})
		if err != nil {
			return err
		}
		for i, id := range ids {
			c, err := s.linkedCommit(ctxID, id, "the commit index")
			if err != nil {
				return err
			}
			if c.Seq != seqs[i] {
				return fmt.Errorf("%w: commit %s has seq %d, indexed at %d", ErrCorrupt, id.Short(), c.Seq, seqs[i])
			}
			if err := fn(c); err != nil {
				return err
			}
			after = seqs[i]
		}
		if len(ids) < page {
			return nil
		}
	}
}

// Ops returns the recorded ops of a commit.
func (s *Store) Ops(ctx context.Context, ctxID string, c *replay.Commit) ([]graph.Op, error) {
	ops := make([]graph.Op, 0, c.NumOps)
	for chunk := uint32(0); len(ops) < c.NumOps; chunk++ {
		v, err := s.kv.Get(ctx, keyOps(ctxID, c.ID, chunk))
		if errors.Is(err, kv.ErrNotFound) {
			return nil, fmt.Errorf("%w: ops chunk %d of commit %s is missing", ErrCorrupt, chunk, c.ID.Short())
		}
		if err != nil {
			return nil, err
		}
		part, err := decodeOps(v)
		if err != nil {
			return nil, fmt.Errorf("%w: ops chunk %d of commit %s: %v", ErrCorrupt, chunk, c.ID.Short(), err)
		}
		if len(part) == 0 {
			return nil, fmt.Errorf("%w: ops chunk %d of commit %s is empty", ErrCorrupt, chunk, c.ID.Short())
		}
		ops = append(ops, part...)
	}
	if len(ops) != c.NumOps {
		return nil, fmt.Errorf("%w: commit %s records %d ops, found %d", ErrCorrupt, c.ID.Short(), c.NumOps, len(ops))
	}
	return ops, nil
}

// everyCheck returns a look at ctx that looks every afterCheck-th call:
// a diff calls it for each entry that differs, a walk for each entry it
// yields.
func everyCheck(ctx context.Context) func() error {
	seen := 0
	return func() error {
		if seen++; seen%afterCheck == 0 {
			return ctx.Err()
		}
		return nil
	}
}
