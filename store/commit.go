package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// CommitRequest asks for one atomic commit of ops on a branch.
type CommitRequest struct {
	// Context and Branch name where to commit (Branch defaults to main).
	Context string
	Branch  string
	// Parent, when set, must equal the branch head (optimistic
	// concurrency); otherwise the commit fails with ErrStale.
	Parent *hashing.Digest
	// ExtraParents are appended after the head (merge commits).
	ExtraParents []hashing.Digest
	Author       string
	Message      string
	// Ops are applied in order. Puts carry canonical Data.
	Ops []graph.Op
	// Time overrides the commit time (tests, imports); zero = store clock.
	Time time.Time
	// Mode overrides the context's quarantine mode when set.
	Mode string
	// Check, when set, runs on the state after the ops applied and before
	// anything is written; an error refuses the commit.
	Check func(st *graph.State, changes []graph.Change) error
}

// CommitResult is the outcome of a commit.
type CommitResult struct {
	// Commit is the new head (or the unchanged head when Noop).
	Commit *replay.Commit
	// Noop is set when every op was a no-op: nothing was written.
	Noop bool
	// Changes are the applied changes (no-ops included).
	Changes []graph.Change
	// Tainted lists, in observe mode, the new dependency edges that rest on
	// unconfirmed artifacts (they were stored and are flagged).
	Tainted []*graph.TaintError
}

// ChunkOps is how many recorded ops are stored per key.
const ChunkOps = 4096

type reqKind int

const (
	reqCommit reqKind = iota
	reqCreateContext
	reqCreateBranch
	reqResetBranch
)

type writeReq struct {
	ctx    context.Context
	kind   reqKind
	ctxID  string
	mode   string
	branch string
	target hashing.Digest // create/reset branch
	commit CommitRequest
	resp   chan writeResp
}

type writeResp struct {
	res  CommitResult
	info ContextInfo
	err  error
}

func (s *Store) submit(ctx context.Context, r *writeReq) (writeResp, error) {
	r.ctx = ctx
	r.resp = make(chan writeResp, 1)
	select {
	case <-s.done:
		return writeResp{}, ErrClosed
	default:
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return writeResp{}, ctx.Err()
	}
	// Once queued, the request is carried out even if ctx ends: the caller
	// must learn whether it was committed.
	resp := <-r.resp
	return resp, resp.err
}

// Commit applies req atomically and durably. It returns after the commit
// is on disk. Errors: ErrNotFound (context or branch), ErrStale, graph
// errors (*graph.OpError, *graph.CycleError, *graph.TaintError in enforce
// mode), ErrInvalid, or an I/O error. A refused commit changes nothing.
func (s *Store) Commit(ctx context.Context, req CommitRequest) (CommitResult, error) {
	if req.Branch == "" {
		req.Branch = DefaultBranch
	}
	resp, err := s.submit(ctx, &writeReq{kind: reqCommit, ctxID: req.Context, branch: req.Branch, commit: req})
	return resp.res, err
}

// CreateBranch creates branch name at commit at.
func (s *Store) CreateBranch(ctx context.Context, ctxID, name string, at hashing.Digest) error {
	if err := ValidateBranch(name); err != nil {
		return err
	}
	_, err := s.submit(ctx, &writeReq{kind: reqCreateBranch, ctxID: ctxID, branch: name, target: at})
	return err
}

// ResetBranch moves branch name to commit to (checkout / rollback). The
// commits it leaves stay stored and reachable by id.
func (s *Store) ResetBranch(ctx context.Context, ctxID, name string, to hashing.Digest) error {
	_, err := s.submit(ctx, &writeReq{kind: reqResetBranch, ctxID: ctxID, branch: name, target: to})
	return err
}

// run is the committer: it takes every queued request, applies them in
// order, writes the group with one sync and then answers each.
func (s *Store) run() {
	defer close(s.done)
	for first := range s.reqs {
		batch := []*writeReq{first}
	drain:
		for len(batch) < s.batch {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.processBatch(batch)
	}
}

// group is the work of one commit group.
type group struct {
	s       *Store
	wb      *badger.WriteBatch
	tw      *trieWriter
	sets    []kv // small records written in the final transaction
	objs    map[hashing.Digest]bool
	locked  map[*head]bool
	touched map[*ctxState]uint64 // seq before the group, to restore on failure
	answers []func(error)
	tWB, tTxn, tSync time.Duration
}

var dbgTiming = false

type kv struct{ k, v []byte }

func (s *Store) processBatch(batch []*writeReq) {
	g := &group{
		s:       s,
		wb:      s.db.NewWriteBatch(),
		tw:      newTrieWriter(s),
		objs:    make(map[hashing.Digest]bool),
		locked:  make(map[*head]bool),
		touched: make(map[*ctxState]uint64),
	}
	tStart := time.Now()
	for _, r := range batch {
		var err error
		switch r.kind {
		case reqCommit:
			err = g.commit(r)
		case reqCreateContext:
			err = g.createContext(r)
		case reqCreateBranch, reqResetBranch:
			err = g.moveBranch(r)
		}
		if err != nil {
			r.resp <- writeResp{err: err}
		}
	}
	tApply := time.Since(tStart)
	err := g.flush()
	if dbgTiming {
		s.log.Warn("batch", "n", len(batch), "apply", tApply, "flush", time.Since(tStart)-tApply, "wbflush", g.tWB, "txn", g.tTxn, "sync", g.tSync)
	}
	for h := range g.locked {
		h.mu.Unlock()
	}
	if err != nil {
		s.log.Error("commit group failed; in-memory heads dropped", "err", err)
		for cs, seq := range g.touched {
			cs.lastSeq = seq
		}
		s.mu.Lock()
		for h := range g.locked {
			delete(s.heads, h.ctx+"\x00"+h.branch)
		}
		s.mu.Unlock()
	}
	for _, answer := range g.answers {
		answer(err)
	}
}

func (g *group) lock(h *head) {
	if !g.locked[h] {
		h.mu.Lock()
		g.locked[h] = true
	}
}

func (g *group) flush() error {
	if len(g.answers) == 0 {
		g.wb.Cancel()
		return nil
	}
	for id, enc := range g.tw.written {
		if err := g.wb.Set(keyNode(id), enc); err != nil {
			g.wb.Cancel()
			return fmt.Errorf("write trie node: %w", err)
		}
	}
	// Objects, nodes and op chunks are content-addressed or keyed by a
	// commit id that nothing references yet: a crash here leaves only
	// unreachable records.
	t0 := time.Now()
	if err := g.wb.Flush(); err != nil {
		return fmt.Errorf("write objects: %w", err)
	}
	g.tWB = time.Since(t0)
	t0 = time.Now()
	// The small records that make the group visible go in one transaction.
	err := g.s.db.Update(func(txn *badger.Txn) error {
		for _, e := range g.sets {
			if err := txn.Set(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write commits: %w", err)
	}
	g.tTxn = time.Since(t0)
	t0 = time.Now()
	defer func() { g.tSync = time.Since(t0) }()
	if !g.s.noSync {
		if err := g.s.db.Sync(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	for id, n := range g.tw.nodes {
		g.s.nodes.put(id, n)
	}
	return nil
}

func (g *group) createContext(r *writeReq) error {
	s := g.s
	if _, err := s.ctxState(r.ctxID); err == nil {
		return fmt.Errorf("context %q: %w", r.ctxID, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	s.mu.Lock()
	if s.ctxs[r.ctxID] != nil {
		s.mu.Unlock()
		return fmt.Errorf("context %q: %w", r.ctxID, ErrExists)
	}
	now := hashing.FormatTime(s.clock())
	cs := &ctxState{info: ContextInfo{ID: r.ctxID, Quarantine: r.mode, Created: now}}
	s.ctxs[r.ctxID] = cs
	s.mu.Unlock()
	g.touched[cs] = 0

	root, err := replay.NewCommit(nil, nil, graph.NewState(nil).Hash(), "artifactd", "create context", now)
	if err != nil {
		return err
	}
	cs.lastSeq = 1
	root.Seq = 1
	info, _ := json.Marshal(cs.info)
	rec, _ := json.Marshal(root)
	g.sets = append(g.sets,
		kv{keyCtx(r.ctxID), info},
		kv{keyCommit(r.ctxID, root.ID), rec},
		kv{keySeq(r.ctxID, 1), root.ID[:]},
		kv{keyRef(r.ctxID, DefaultBranch), root.ID[:]})
	g.answers = append(g.answers, func(err error) {
		if err != nil {
			s.mu.Lock()
			delete(s.ctxs, r.ctxID)
			s.mu.Unlock()
		}
		r.resp <- writeResp{info: cs.info, err: err}
	})
	return nil
}

func (g *group) moveBranch(r *writeReq) error {
	s := g.s
	if _, err := s.ctxState(r.ctxID); err != nil {
		return err
	}
	if _, err := s.commitRecord(r.ctxID, r.target); err != nil {
		return err
	}
	key := r.ctxID + "\x00" + r.branch
	s.mu.Lock()
	h := s.heads[key]
	s.mu.Unlock()
	if h != nil {
		g.lock(h)
	}
	exists, err := s.refExists(r.ctxID, r.branch)
	if err != nil {
		return err
	}
	if pending := g.pendingRef(r.ctxID, r.branch); pending {
		exists = true
	}
	if r.kind == reqCreateBranch && exists {
		return fmt.Errorf("branch %q: %w", r.branch, ErrExists)
	}
	if r.kind == reqResetBranch && !exists {
		return fmt.Errorf("branch %q: %w", r.branch, ErrNotFound)
	}
	if h != nil {
		// Drop the in-memory head; it is rebuilt from the state map on use.
		s.mu.Lock()
		delete(s.heads, key)
		s.mu.Unlock()
	}
	target := r.target
	g.sets = append(g.sets, kv{keyRef(r.ctxID, r.branch), target[:]})
	g.answers = append(g.answers, func(err error) { r.resp <- writeResp{err: err} })
	return nil
}

func (g *group) pendingRef(ctxID, branch string) bool {
	k := string(keyRef(ctxID, branch))
	for _, e := range g.sets {
		if string(e.k) == k {
			return true
		}
	}
	return false
}

func (g *group) commit(r *writeReq) error {
	s := g.s
	req := r.commit
	cs, err := s.ctxState(req.Context)
	if err != nil {
		return err
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	h, err := s.head(req.Context, req.Branch)
	if err != nil {
		return err
	}
	g.lock(h)
	if req.Parent != nil && *req.Parent != h.commit.ID {
		return fmt.Errorf("%w: parent %s is not the head of %q (head is %s)", ErrStale, req.Parent.Short(), req.Branch, h.commit.ID.Short())
	}
	changes, err := h.state.ApplyOps(req.Ops)
	if err != nil {
		return err
	}
	undo := func(e error) error {
		h.state.Undo(changes)
		return e
	}
	if req.Check != nil {
		if err := req.Check(h.state, changes); err != nil {
			return undo(err)
		}
	}
	mode := req.Mode
	if mode == "" {
		mode = cs.info.Quarantine
	}
	tainted := graph.TaintedLinks(h.state, h.trust, changes)
	if mode == ModeEnforce && len(tainted) > 0 {
		return undo(tainted[0])
	}
	recorded := graph.RecordedOps(changes)
	if len(recorded) == 0 && len(req.ExtraParents) == 0 {
		res := CommitResult{Commit: h.commit, Noop: true, Changes: changes}
		g.answers = append(g.answers, func(err error) { r.resp <- writeResp{res: res, err: err} })
		return nil
	}
	when := req.Time
	if when.IsZero() {
		when = s.clock()
	}
	parents := append([]hashing.Digest{h.commit.ID}, req.ExtraParents...)
	c, err := replay.NewCommit(parents, recorded, h.state.Hash(), req.Author, req.Message, hashing.FormatTime(when))
	if err != nil {
		return undo(err)
	}
	// Trie mutations: the final value of every key the commit touched.
	muts := make([]trieMut, 0, len(changes)+1)
	for _, ch := range changes {
		if ch.Noop {
			continue
		}
		switch ch.Op.Op {
		case graph.OpPut:
			muts = append(muts, mutFor(tkArtifact(ch.Next.ID), encodeArtifactVal(ch.Next, c.ID)))
			if ch.PrevTombstone != 0 {
				muts = append(muts, mutFor(tkTomb(ch.Next.ID), nil))
			}
		case graph.OpDelete:
			muts = append(muts, mutFor(tkArtifact(ch.Prev.ID), nil), mutFor(tkTomb(ch.Prev.ID), encodeTombVal(ch.Prev.Version)))
		case graph.OpLink:
			muts = append(muts, mutFor(tkEdge(ch.NextEdge.Key()), encodeEdgeVal(ch.NextEdge.Attrs)))
		case graph.OpUnlink:
			muts = append(muts, mutFor(tkEdge(ch.PrevEdge.Key()), nil))
		}
	}
	root, err := g.tw.apply(trieChild{id: h.commit.Root, count: h.commit.RootCount}, muts)
	if err != nil {
		return undo(fmt.Errorf("update state map: %w", err))
	}
	c.Root, c.RootCount = root.id, root.count
	c.Artifacts, c.Edges = h.state.NumArtifacts(), h.state.NumEdges()
	// Payloads, content-addressed.
	for _, ch := range changes {
		if ch.Noop || ch.Op.Op != graph.OpPut || ch.Op.Data == nil {
			continue
		}
		d := ch.Next.ContentHash
		if g.objs[d] {
			continue
		}
		g.objs[d] = true
		if s.hasKey(keyObj(d)) {
			continue
		}
		if err := g.wb.Set(keyObj(d), ch.Op.Data); err != nil {
			return undo(fmt.Errorf("write object: %w", err))
		}
	}
	for i := 0; i < len(recorded); i += ChunkOps {
		end := min(i+ChunkOps, len(recorded))
		raw, err := json.Marshal(recorded[i:end])
		if err != nil {
			return undo(err)
		}
		if err := g.wb.Set(keyOps(req.Context, c.ID, uint32(i/ChunkOps)), raw); err != nil {
			return undo(fmt.Errorf("write ops: %w", err))
		}
	}
	if _, ok := g.touched[cs]; !ok {
		g.touched[cs] = cs.lastSeq
	}
	cs.lastSeq++
	c.Seq = cs.lastSeq
	rec, err := json.Marshal(c)
	if err != nil {
		return undo(err)
	}
	g.sets = append(g.sets,
		kv{keyCommit(req.Context, c.ID), rec},
		kv{keySeq(req.Context, c.Seq), c.ID[:]},
		kv{keyRef(req.Context, req.Branch), c.ID[:]})
	// The payloads now live in the object store; the head keeps metadata.
	for _, ch := range changes {
		if ch.Next != nil {
			ch.Next.Data = nil
		}
	}
	h.trust.Apply(h.state, changes)
	h.commit = c
	res := CommitResult{Commit: c, Changes: changes}
	if mode != ModeEnforce {
		res.Tainted = tainted
	}
	g.answers = append(g.answers, func(err error) { r.resp <- writeResp{res: res, err: err} })
	return nil
}

func (s *Store) hasKey(k []byte) bool {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(k)
		return err
	})
	return err == nil
}
