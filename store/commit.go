package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
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
	// anything is written; an error refuses the commit. It sees the
	// changes of Ops, not those of recorded definitions.
	Check func(st *graph.State, changes []graph.Change) error
	// OpsFrom, when set, computes the ops in the committer from the
	// branch head the commit is decided on (its state, and what Planning
	// gives), in place of Ops: a merge is planned against the head it
	// lands on, so commits landing on the branch meanwhile do not make it
	// stale. The state must only be read. An error refuses the commit.
	OpsFrom func(st *graph.State, p Planning) ([]graph.Op, error)
	// Types and Relations are the user definitions Ops use, as the writer
	// validated them: each one the head does not hold exactly so is
	// recorded by a put of its definition artifact before Ops, in the same
	// commit (graph.DefinitionOps), so the chain says what its types and
	// relations meant.
	Types     []graph.TypeDef
	Relations []graph.RelationDef
	// Blobs are blobs the commit's artifacts name (a gate output's full
	// text, a fetched body) that the context comes to hold with the
	// commit: their membership is written in the commit's own atomic
	// write, so a refused commit leaves the context holding nothing new.
	// Their bytes must be stored already (PutBlob). Spills are those among
	// them cut for the model's view, noted for PruneSpills at the commit's
	// time. A commit that changes nothing (Noop) records neither.
	Blobs  []hashing.Digest
	Spills []hashing.Digest
	// BlobData are the bytes of blobs the commit's artifacts name that
	// need not be stored yet: they are stored in the commit's own write,
	// as PutBlob would store them, only once the commit is accepted, so a
	// refused commit stores none of them; the context comes to hold them
	// as it does Blobs (their digests need not be listed there). A commit
	// that changes nothing (Noop) stores none of them either.
	BlobData [][]byte
	// CheckTrust, when set, runs after Check, on the trust the commit
	// would leave (status gives an artifact's; "" is confirmed): an error
	// refuses the commit. A rule about trust that the caller read before
	// committing (the outbox's claim of effects) then holds for the head
	// the commit lands on.
	CheckTrust func(status func(id string) graph.Status) error
}

// Planning is what CommitRequest.OpsFrom reads in the committer besides
// the head's state, each seeing the commits of the group not yet
// written.
type Planning struct {
	// Head is the commit the new commit lands on.
	Head *replay.Commit
	// Commit looks up a commit of the context.
	Commit func(hashing.Digest) (*replay.Commit, error)
	// DiffFrom returns what differs between commit c's state and the
	// head's (without trust), reading only the parts of their state maps
	// that differ (DiffStates).
	DiffFrom func(c *replay.Commit) (*replay.DiffResult, error)
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
	// unconfirmed artifacts (they were stored and are flagged). Each
	// one's Index is its link's place among the request's Ops, as that of
	// the TaintError refusing a commit in enforce mode is.
	Tainted []*graph.TaintError
	// Definitions is the number of definition puts recorded before the
	// request's ops.
	Definitions int
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
	target hashing.Digest  // create/reset branch
	expect *hashing.Digest // reset: the head the branch must still have
	at     time.Time       // create context: creation time (zero = clock)
	// message is the root commit's message of a created context.
	message string
	// attempts counts the groups that lost a ref's compare-and-swap to
	// another process with this request in them, since firstLost.
	attempts  int
	firstLost time.Time
	commit    CommitRequest
	// blobs are commit.BlobData laid out (Store.Commit).
	blobs []blobLayout
	resp  chan writeResp
}

type writeResp struct {
	res  CommitResult
	info ContextInfo
	err  error
}

// maxQueued bounds the requests queued for one context: a submit beyond
// it waits (or gives up with its context) until a committer takes the
// context's next group.
const maxQueued = 1024

// bigOps is the size from which a group is big: a group of more ops than
// this in all, or with a merge, holds only the requests of the context it
// took first, so that no other context's write waits for its decision,
// and its committer steps out of the small ones' count meanwhile
// (smallCommitters).
const bigOps = 256

// weight returns r's ops and whether it is a merge (a request other
// than a commit weighs nothing).
func (r *writeReq) weight() (ops int, merge bool) {
	if r.kind != reqCommit {
		return 0, false
	}
	return len(r.commit.Ops), len(r.commit.ExtraParents) > 0
}

// weigh returns the ops of reqs and whether one of them is a merge.
func weigh(reqs []*writeReq) (ops int, merge bool) {
	for _, r := range reqs {
		o, m := r.weight()
		ops, merge = ops+o, merge || m
	}
	return ops, merge
}

// ctxQueue is one context's queued requests, in the order submitted. A
// context with requests queued is either ready (listed in Store.ready,
// waiting for a committer) or owned (a committer is carrying out a group
// of its requests; those submitted meanwhile wait for the next).
type ctxQueue struct {
	reqs []*writeReq
	// room is closed, and replaced, whenever a committer takes requests:
	// a submit waiting for room tries again.
	room         chan struct{}
	ready, owned bool
}

func (s *Store) submit(ctx context.Context, r *writeReq) (writeResp, error) {
	r.ctx = ctx
	r.resp = make(chan writeResp, 1)
	for {
		s.closeMu.Lock()
		if s.closed {
			s.closeMu.Unlock()
			return writeResp{}, ErrClosed
		}
		q := s.queues[r.ctxID]
		if q == nil {
			q = &ctxQueue{room: make(chan struct{})}
			s.queues[r.ctxID] = q
		}
		if len(q.reqs) < maxQueued {
			q.reqs = append(q.reqs, r)
			if !q.ready && !q.owned {
				s.readyLocked(r.ctxID, q)
			}
			s.closeMu.Unlock()
			break
		}
		room := q.room
		s.closeMu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return writeResp{}, ctx.Err()
		}
	}
	// Once queued, the request is carried out even if ctx ends: the caller
	// must learn whether it was committed.
	resp := <-r.resp
	return resp, resp.err
}

// smallCommitters bounds the committers taking groups of small requests
// at once: fewer, fuller groups share a sync among many contexts'
// writers. A committer that takes a big request's group steps out of the
// count while it decides it, so that small groups go on beside it.
const smallCommitters = 4

// bigCommitters bounds the big groups decided at once: each holds its
// head, its trie writer and reads, and (on a shared driver) a hold, so
// that their number, not the number of contexts writing in bulk, bounds
// what they take. A context that would start another waits, ready.
const bigCommitters = 4

// readyLocked lists context id, whose queue q holds requests no committer
// owns, as ready, and wakes a committer for it. Called with closeMu held.
func (s *Store) readyLocked(id string, q *ctxQueue) {
	s.listReadyLocked(id, q)
	s.wakeLocked()
}

// listReadyLocked lists context id as ready without waking a committer.
// Called with closeMu held.
func (s *Store) listReadyLocked(id string, q *ctxQueue) {
	q.ready = true
	s.ready = append(s.ready, id)
}

// wakeLocked starts a committer when fewer than smallCommitters are
// running: every committer running takes groups until no context is
// ready, so a ready context never waits for a committer busy with a big
// request. Called with closeMu held.
func (s *Store) wakeLocked() {
	if s.running < smallCommitters {
		s.running++
		s.committers.Add(1)
		go s.committer()
	}
}

// Commit applies req atomically and durably. It returns after the commit
// is on disk. Errors: ErrNotFound (context or branch), ErrStale, graph
// errors (*graph.OpError, *graph.CycleError, *graph.TaintError in enforce
// mode), ErrInvalid, kv.ErrOutcomeUnknown (the driver lost the answer to
// its write: the commit landed or not, and the branch's head tells which),
// kv.ErrNotWritten (the driver knows nothing was written: the database is
// unreachable for now, and the commit may be sent again), or an I/O
// error. A refused commit changes nothing.
func (s *Store) Commit(ctx context.Context, req CommitRequest) (CommitResult, error) {
	if req.Branch == "" {
		req.Branch = DefaultBranch
	}
	w := &writeReq{kind: reqCommit, ctxID: req.Context, branch: req.Branch, commit: req}
	for _, data := range req.BlobData {
		w.blobs = append(w.blobs, layBlob(hashing.Sum(data), data))
	}
	resp, err := s.submit(ctx, w)
	return resp.res, err
}

// CreateBranch creates branch name at commit at. Errors: ErrInvalid (a
// name ValidateNewBranch refuses), ErrExists, ErrNotFound (context or
// commit), I/O errors.
func (s *Store) CreateBranch(ctx context.Context, ctxID, name string, at hashing.Digest) error {
	if err := ValidateNewBranch(name); err != nil {
		return err
	}
	return s.createBranch(ctx, ctxID, name, at)
}

// createBranch is CreateBranch of a name that may read as a commit id:
// an import recreates the branches an older store made with such names.
func (s *Store) createBranch(ctx context.Context, ctxID, name string, at hashing.Digest) error {
	if err := ValidateBranch(name); err != nil {
		return err
	}
	_, err := s.submit(ctx, &writeReq{kind: reqCreateBranch, ctxID: ctxID, branch: name, target: at})
	return err
}

// ResetBranch moves branch name to commit to (checkout / rollback). The
// commits it leaves stay stored and reachable by id.
func (s *Store) ResetBranch(ctx context.Context, ctxID, name string, to hashing.Digest) error {
	return s.ResetBranchIf(ctx, ctxID, name, to, nil)
}

// ResetBranchIf is ResetBranch as a compare-and-set: when expect is set,
// the branch moves only if its head is still *expect, else ErrStale. The
// check and the move happen in the committer, so no commit can land in
// between.
func (s *Store) ResetBranchIf(ctx context.Context, ctxID, name string, to hashing.Digest, expect *hashing.Digest) error {
	_, err := s.submit(ctx, &writeReq{kind: reqResetBranch, ctxID: ctxID, branch: name, target: to, expect: expect})
	return err
}

// committer carries out groups of queued requests until none is ready:
// it takes a group (takeGroup), decides its requests in order, writes the
// group with one sync and then answers each, and gives its contexts back
// (release). A group holds the requests of several ready contexts when
// they are small, so that concurrent writers of many contexts share a
// sync; a big request (bigOps) is decided in a group of its own context
// alone, and a context whose committer is busy with it holds up no other
// context: their requests become ready and another committer takes them.
// The driver may still join several groups' writes in one sync (Badger's
// writer does). Reads never hold a head for longer than it takes to pin
// its state (Store.Read), so a committer takes a head's lock without
// waiting for reads.
func (s *Store) committer() {
	defer s.committers.Done()
	var retry []*writeReq
	// out: the committer stepped out of the running count (a big group,
	// or a wait for other processes' holds); slot: its group took one of
	// the bigCommitters slots.
	out, slot := false, false
	for {
		batch, ids, big := s.takeGroup(retry, out, slot)
		if len(batch) == 0 {
			return
		}
		out, slot = big, big
		err := s.writeFailure()
		if err == nil {
			err = s.checkSpace()
		}
		if err == nil {
			if p := s.corrupt.Load(); p != nil {
				err = fmt.Errorf("%w: writes are refused since a read found %v; stop artifactd and run artifactd fsck", ErrCorrupt, *p)
			}
		}
		var hold kv.Hold
		if err == nil && s.locker != nil {
			// Other processes may hold the group's contexts for long (a
			// big commit of theirs): the committer steps out of the
			// running count while it waits, as for a big group, so that
			// the writes of the other contexts do not wait with it.
			if !out {
				s.stepOut()
				out = true
			}
			hold, err = s.holdContexts(batch)
			// Requests of the held contexts queued while the hold was
			// awaited join the group: one hold, one commit.
			batch, out, slot = s.joinOwned(ids, batch, err == nil, slot)
		}
		if err != nil {
			for _, r := range batch {
				r.resp <- writeResp{err: err}
			}
			retry = nil
		} else {
			retry = s.processBatch(batch, hold)
		}
		s.release(ids, retry)
	}
}

// takeGroup returns the next group: retry (requests of a group that lost
// a ref's swap to another process, whose contexts this committer still
// owns) and the requests queued behind them, then the requests of ready
// contexts, first come first, up to the group size — while the group is
// small (bigOps in all, no merge), and no context after one that would
// make it big. A context whose requests would make a group big starts
// one only while fewer than bigCommitters big groups are being decided;
// otherwise it stays ready (the committer of a big group takes it when it
// is done) and the small work behind it is taken. It returns the contexts
// the group owns and whether it is big; no requests when there is no
// work, and the committer then ends. wasOut says the committer had
// stepped out of the running count (smallCommitters) and steps back in;
// hadSlot that its last group held a big slot, which it gives back.
func (s *Store) takeGroup(retry []*writeReq, wasOut, hadSlot bool) ([]*writeReq, []string, bool) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if wasOut {
		s.running++
	}
	if hadSlot {
		s.bigRunning--
	}
	var ids []string
	for _, r := range retry {
		if !slices.Contains(ids, r.ctxID) {
			ids = append(ids, r.ctxID)
		}
	}
	// A big retry had a slot, given back above: it takes one again. A
	// small one grows big with its queued requests only into a free slot.
	batch, ops, merge := s.takeOwnedLocked(ids, retry, false)
	big := merge || ops > bigOps
	for i := 0; !big && len(batch) < s.batch && i < len(s.ready); {
		id := s.ready[i]
		q := s.queues[id]
		reqs := q.reqs[:min(len(q.reqs), s.batch-len(batch))]
		n, m := weigh(reqs)
		if m || ops+n > bigOps {
			if len(batch) > 0 {
				break // it would make the group big: it starts one of its own
			}
			if s.bigRunning >= bigCommitters {
				i++ // no big slot free: it waits, the small work behind it does not
				continue
			}
		}
		s.ready = slices.Delete(s.ready, i, i+1)
		q.ready, q.owned = false, true
		ids = append(ids, id)
		batch = append(batch, takeLocked(q, len(reqs))...)
		ops += n
		big = m || ops > bigOps
	}
	if len(batch) == 0 {
		s.running--
		return nil, nil, false
	}
	if big {
		// Deciding it may take long: the small groups go on without this
		// committer.
		s.bigRunning++
		s.stepOutLocked()
	} else if len(s.ready) > 0 {
		// What the group left is for another committer.
		s.wakeLocked()
	}
	return batch, ids, big
}

// stepOutLocked takes the committer out of the running count
// (smallCommitters) while it decides a big group or waits for other
// processes' holds, and wakes another for the contexts ready. Called with
// closeMu held.
func (s *Store) stepOutLocked() {
	s.running--
	if len(s.ready) > 0 {
		s.wakeLocked()
	}
}

// stepOut is stepOutLocked without closeMu held.
func (s *Store) stepOut() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.stepOutLocked()
}

// takeOwnedLocked appends the requests queued for the owned contexts ids
// to batch, in their order, up to the group size. A group of several
// contexts takes them only while it stays small (bigOps in all, no
// merge), so that no context's request waits in it for another context's
// big one: what it leaves is taken once the group gives the context back.
// A group of one context does the same unless it may be big: it is big
// already, holds a bigCommitters slot (slot) or one is free for it. It
// returns the new batch with its ops in all and whether it holds a
// merge. Called with closeMu held.
func (s *Store) takeOwnedLocked(ids []string, batch []*writeReq, slot bool) ([]*writeReq, int, bool) {
	ops, merge := weigh(batch)
	mayBeBig := slot || merge || ops > bigOps || s.bigRunning < bigCommitters
	small := len(ids) > 1 || !mayBeBig
	for _, id := range ids {
		q := s.queues[id]
		n := min(len(q.reqs), max(s.batch-len(batch), 0))
		k := 0
		for ; k < n; k++ {
			o, m := q.reqs[k].weight()
			if small && (merge || m || ops+o > bigOps) {
				break
			}
			ops, merge = ops+o, merge || m
		}
		batch = append(batch, takeLocked(q, k)...)
	}
	return batch, ops, merge
}

// joinOwned appends to batch, when join is set, the requests queued for
// the contexts the group owns since it was taken (takeOwnedLocked), for a
// committer that stepped out of the running count while it waited for
// the group's holds: it steps back in unless the group is big, and
// reports whether it is. slot says the group holds a bigCommitters slot;
// a small group that the queued requests would make big takes one if one
// is free and otherwise takes only what keeps it small, so that groups
// grown while they waited for holds never pass that bound. It returns
// whether the group holds a slot now.
func (s *Store) joinOwned(ids []string, batch []*writeReq, join, slot bool) ([]*writeReq, bool, bool) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	ops, merge := weigh(batch)
	if join {
		batch, ops, merge = s.takeOwnedLocked(ids, batch, slot)
	}
	big := merge || ops > bigOps
	if big && !slot {
		s.bigRunning++
		slot = true
	}
	if !big {
		s.running++
	}
	return batch, big, slot
}

// takeLocked removes the first n requests of q and makes room for more.
func takeLocked(q *ctxQueue, n int) []*writeReq {
	if n == 0 {
		return nil
	}
	out := q.reqs[:n:n]
	q.reqs = append(q.reqs[:0:0], q.reqs[n:]...)
	close(q.room)
	q.room = make(chan struct{})
	return out
}

// release gives back the contexts ids a group owned, but those with
// requests to retry (which stay the committer's, ahead of their queue): a
// context with requests queued meanwhile becomes ready again, one without
// is dropped. The committer takes its next group right after.
func (s *Store) release(ids []string, retry []*writeReq) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	for _, id := range ids {
		if slices.ContainsFunc(retry, func(r *writeReq) bool { return r.ctxID == id }) {
			continue
		}
		q := s.queues[id]
		q.owned = false
		if len(q.reqs) > 0 {
			// Ready again, for this committer's next group (it takes
			// one next) or, if it leaves any, for another it wakes.
			s.listReadyLocked(id, q)
		} else {
			delete(s.queues, id)
		}
	}
}

// writeFailure returns the error that stopped writes, or nil.
func (s *Store) writeFailure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// group is the work of one commit group. Only the committer goroutine
// uses it.
type group struct {
	s  *Store
	tw *trieWriter
	// imm holds the immutable records (objects, op chunks) until flush.
	// Once they and the new trie nodes outgrow what one Commit may hold,
	// the group is spilling: they are put (kv.PutSame, from other
	// goroutines) in parts as they come, before the visible records. A
	// bulk group (bulkGroupBytes) spills at flush, in one part.
	imm      []kv.Record
	immSize  int64
	spilling bool
	// async are the puts of immutable records running in other
	// goroutines (see writeAsync).
	async []chan error
	// sets are the small records that make the group visible: commit
	// records, keyed to write each once.
	sets    []kv.Record
	setKeys map[string]bool
	// absent are records that must not exist yet (seq entries, new
	// context records): written by swaps that expect no value, so that a
	// second process writing the same key loses.
	absent []kv.Record
	// objs are the objects this group already wrote.
	objs map[hashing.Digest]bool
	// blobs are the blobs whose bytes this group writes (BlobData).
	blobs map[hashing.Digest]bool
	// refs are the ref moves of this group (key ctx NUL branch) and commits
	// the commits it made (key ctx NUL id): later requests of the group
	// see them before they are on disk. refWas is what each moved ref held
	// before the group (nil: no ref), the expectation of its swap.
	refs    map[string]hashing.Digest
	refWas  map[string]*hashing.Digest
	commits map[string]*replay.Commit
	// moved lists the head keys dropped because their ref moves.
	moved  []string
	locked map[*head]bool
	// forks are the group's views of the heads it commits to; each head
	// takes its view once the group is durable (headFork.advance).
	forks map[*head]*headFork
	// unreadable are the heads whose stored state failed a read while the
	// group decided on them: dropped from the cache once it is done.
	unreadable map[*head]bool
	// heads are the heads this group holds, by key: later requests of the
	// group build on them even if a reader evicted one from Store.heads.
	heads   map[string]*head
	touched map[*ctxState]uint64 // contexts the group writes to (value: seq before it)
	// fresh are the contexts whose record and sequence counter this group
	// read from the driver (a shared store reads them once per group).
	fresh map[string]bool
	// created holds the contexts created by this group; they are published
	// to Store.ctxs only once the group is durable.
	created map[string]*ctxState
	answers []answer
	// hold, on a shared driver, holds the group's contexts until its
	// visible records are committed through it (see holdContexts).
	hold kv.Hold
}

// answer is how a request of the group learns the group's outcome.
type answer struct {
	r  *writeReq
	fn func(error)
}

// answer queues r's reply for when the group is durable (or failed).
func (g *group) answer(r *writeReq, fn func(error)) {
	g.answers = append(g.answers, answer{r, fn})
}

// refuse answers a request refused with err. Refused before this group
// moved any ref, it is answered at once; refused after, its refusal may
// rest on the group's earlier, not yet durable commits (a branch that
// exists, an artifact an earlier request put), so it is answered with the
// group: with err once the group is durable, decided again if the group
// lost a swap, and with the group's failure if it failed — and a client
// that reads after the refusal sees what it was refused on.
func (g *group) refuse(r *writeReq, err error) {
	if len(g.refs) == 0 {
		r.resp <- writeResp{err: err}
		return
	}
	g.answer(r, func(gerr error) {
		if gerr != nil {
			err = gerr
		}
		r.resp <- writeResp{err: err}
	})
}

// moveRef records a move of ref key (context ctxID, branch) to id,
// remembering what the ref held before the group as its swap's
// expectation.
func (g *group) moveRef(ctxID, branch string, was *hashing.Digest, id hashing.Digest) {
	key := headKey(ctxID, branch)
	if _, ok := g.refWas[key]; !ok {
		g.refWas[key] = was
	}
	g.refs[key] = id
}

// set queues a visible record, once per key.
func (g *group) set(k, v []byte) {
	if g.setKeys[string(k)] {
		return
	}
	g.setKeys[string(k)] = true
	g.sets = append(g.sets, kv.Record{Key: k, Value: v})
}

// ctxState returns a context created earlier in the group or a stored one.
func (g *group) ctxState(id string) (*ctxState, error) {
	if cs := g.created[id]; cs != nil {
		return cs, nil
	}
	if g.s.shared && !g.fresh[id] {
		// Another process may have committed to the context since its
		// sequence counter was cached: read it again once per group.
		g.fresh[id] = true
		g.s.mu.Lock()
		delete(g.s.ctxs, id)
		g.s.mu.Unlock()
	}
	return g.s.ctxState(id)
}

// recordSize is what a record counts against a Commit's limits (key,
// value and, for Badger, two meta bytes and a version).
func recordSize(k, v []byte) int64 { return int64(len(k)+len(v)) + 12 }

func headKey(ctxID, branch string) string { return ctxID + "\x00" + branch }

// maxContention bounds how long a request may keep losing its ref's
// compare-and-swap to other processes before it is refused.
const maxContention = 30 * time.Second

// backoff is the pause after a group's n-th lost swap: up to n
// milliseconds (at most 20), at random.
func backoff(n int) time.Duration {
	return time.Duration(rand.Int64N(int64(min(n, 20))*int64(time.Millisecond) + 1))
}

// processBatch decides and writes one group, committing its visible
// records through hold when there is one (a shared driver: hold holds
// every context of batch, and processBatch ends it). It returns the requests to
// carry to the next group: those of a group that lost a compare-and-swap
// to another process (they are decided again on the new heads).
func (s *Store) processBatch(batch []*writeReq, hold kv.Hold) (retry []*writeReq) {
	g := &group{
		s:          s,
		tw:         newTrieWriter(s),
		setKeys:    make(map[string]bool),
		objs:       make(map[hashing.Digest]bool),
		refs:       make(map[string]hashing.Digest),
		refWas:     make(map[string]*hashing.Digest),
		commits:    make(map[string]*replay.Commit),
		locked:     make(map[*head]bool),
		forks:      make(map[*head]*headFork),
		unreadable: make(map[*head]bool),
		heads:      make(map[string]*head),
		touched:    make(map[*ctxState]uint64),
		fresh:      make(map[string]bool),
		created:    make(map[string]*ctxState),
	}
	g.hold = hold
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
			g.refuse(r, err)
		}
	}
	err := g.flush()
	if g.hold != nil {
		g.hold.Release()
	}
	var conflict *kv.ConflictError
	lost := errors.As(err, &conflict)
	// settled: the group's Commit failed and the driver says it landed
	// whole or not at all (kv.ErrOutcomeUnknown: sent and its answer
	// lost) or that nothing of it was written (kv.ErrNotWritten), so the
	// stored refs tell the truth and no part of the group is on disk.
	settled := !lost && (errors.Is(err, kv.ErrOutcomeUnknown) || errors.Is(err, kv.ErrNotWritten))
	if err == nil {
		// The group is durable: its heads take what it committed, while
		// the group still holds them.
		for _, hf := range g.forks {
			hf.advance()
		}
	}
	s.mu.Lock()
	if err == nil {
		// The group is durable: its new contexts may now be seen. A reader
		// may have cached one from disk meanwhile; the group's record, which
		// carries the sequence counter, replaces it.
		for id, cs := range g.created {
			s.ctxs[id] = cs
		}
	}
	if len(g.moved) > 0 || err != nil {
		s.headGen++
	}
	for _, k := range g.moved {
		if s.moving[k]--; s.moving[k] == 0 {
			delete(s.moving, k)
		}
	}
	for h := range g.unreadable {
		h.dropped = true
		if s.heads[headKey(h.ctx, h.branch)] == h {
			delete(s.heads, headKey(h.ctx, h.branch))
		}
	}
	if err != nil && !lost {
		// The heads are as they were before the group, but the store may
		// hold part of it — or, when the outcome is unknown, all of it:
		// drop them before a reader can see them (Read reloads a dropped
		// head, and the next group one it takes, from the stored refs).
		// After a lost swap nothing was written and they stay cached: the
		// next group catches them up with the other process's commits
		// (catchUp), a reader reads the ref's commit (Store.Read).
		for h := range g.locked {
			h.dropped = true
			if s.heads[headKey(h.ctx, h.branch)] == h {
				delete(s.heads, headKey(h.ctx, h.branch))
			}
		}
	}
	if err != nil {
		// Their sequence counters may be behind.
		for cs := range g.touched {
			delete(s.ctxs, cs.info.ID)
		}
	}
	s.mu.Unlock()
	for h := range g.locked {
		h.cost.Store(headCost(h.state))
		h.mu.Unlock()
		h.inGroup.Store(false)
	}
	s.mu.Lock()
	s.evictHeadsLocked()
	s.mu.Unlock()
	if lost {
		// Another process moved a ref (or took a sequence number) this
		// group expected: nothing was written. Decide its requests again
		// on what is stored now; a request whose own parent is stale then
		// gets ErrStale.
		s.log.Debug("commit group lost a compare-and-swap; deciding again", "err", err)
		for _, a := range g.answers {
			a.r.attempts++
			if a.r.firstLost.IsZero() {
				a.r.firstLost = time.Now()
			}
			if time.Since(a.r.firstLost) > maxContention {
				a.fn(fmt.Errorf("%w: gave up after %d attempts in %s: other processes kept moving the branch (%v)", ErrStale, a.r.attempts, maxContention, err))
				continue
			}
			retry = append(retry, a.r)
		}
		// Back off a little, more after each loss, so that the processes
		// racing on one branch take turns instead of all losing again.
		if len(retry) > 0 {
			time.Sleep(backoff(retry[0].attempts))
		}
		return retry
	}
	if settled {
		// The stored refs tell what became of the group: with its heads
		// and sequence counters dropped, reads and the next groups load
		// them from storage, so the store goes on taking writes. Each
		// request is answered with the error (a client of an unknown
		// outcome reads the branch to learn it).
		s.log.Warn("commit group failed whole: its heads will be read again from storage, and the store goes on taking writes", "err", err)
	} else if err != nil {
		// Part of the group may be on disk (a transaction can commit and
		// the sync after it fail), so its outcome is unknown: stop taking
		// writes rather than build on records of unknown state, and let
		// reads reload contexts from disk. A restart recovers (Badger
		// replays its log; fsck checks the result).
		s.log.Error("commit group failed; the store refuses writes until restarted", "err", err)
		s.mu.Lock()
		s.failed = fmt.Errorf("%w: %w", ErrWriteFailed, err)
		s.mu.Unlock()
		err = s.failed
	}
	for _, a := range g.answers {
		a.fn(err)
	}
	return nil
}

// maxHoldWait bounds how long a group waits for other processes' holds
// of its contexts before its requests are refused.
const maxHoldWait = maxContention

// holdContexts takes the hold of every context the batch writes to (the
// keys of their context records, which no commit rewrites), waiting for
// the groups of other processes that hold one — in the order they asked,
// so that none is passed over again and again.
func (s *Store) holdContexts(batch []*writeReq) (kv.Hold, error) {
	keys := make([][]byte, len(batch)) // Lock takes each key once
	for i, r := range batch {
		keys[i] = keyCtx(r.ctxID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxHoldWait)
	defer cancel()
	hold, err := s.locker.Lock(ctx, keys)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kv.ErrNotWritten) {
		// (A driver that could not reach its engine says so, its own
		// connect timeout in the chain or not: that is not other
		// processes' holds.)
		return nil, fmt.Errorf("%w: gave up after waiting %s for other processes' writes to the context to let go", ErrStale, maxHoldWait)
	}
	if err != nil {
		return nil, fmt.Errorf("hold contexts: %w", err)
	}
	return hold, nil
}

func (g *group) lock(h *head) {
	if !g.locked[h] {
		h.inGroup.Store(true)
		h.mu.Lock()
		g.locked[h] = true
	}
}

// spillParts is the size of the parts in which a spilling group puts its
// immutable records.
const spillParts = 8 << 20

// bulkGroupBytes is the size of a group's immutable records and new trie
// nodes from which flush puts them ahead of the visible records even when
// one Commit could hold them all: a bulk commit's records are then put
// with kv.PutSame, which the Badger driver keeps in a pack (its
// compactions never copy them again), for the cost of one more write in
// a commit that takes a hundred milliseconds and more anyway. Groups of
// small commits stay one Commit, and so do commits of a couple of
// thousand ops: with 256 KiB, which packed those too, one-artifact writes
// during an audit of a 100,000-deep chain built of 2,000-op commits
// waited up to 48–165 ms (18–43 ms unpacked; docs/BENCHMARKS.md).
const bulkGroupBytes = 1 << 20

// addImm queues an immutable record.
func (g *group) addImm(k, v []byte) error {
	g.imm = append(g.imm, kv.Record{Key: k, Value: v})
	g.immSize += recordSize(k, v)
	if g.spilling && g.immSize >= spillParts {
		g.putImm()
	}
	return nil
}

// putImm hands the queued immutable records and trie nodes to another
// goroutine to put.
func (g *group) putImm() {
	recs := g.imm
	for id, enc := range g.tw.written {
		recs = append(recs, kv.Record{Key: keyNode(id), Value: enc})
	}
	g.tw.clearWritten()
	g.imm, g.immSize = nil, 0
	if len(recs) > 0 {
		g.writeAsync(recs)
	}
}

// spill switches the group to putting its immutable records ahead of the
// visible ones once they outgrow one Commit, and keeps putting them in
// parts afterwards.
func (g *group) spill() error {
	if !g.spilling {
		if g.immSize+g.tw.size <= g.s.txnBytes && int64(len(g.imm)+len(g.tw.written)) <= g.s.txnCount {
			return nil
		}
		g.spilling = true
	}
	if g.immSize+g.tw.size >= spillParts {
		g.putImm()
	}
	return nil
}

// flush writes the group. A group that fits in one Commit is written in
// one (a single round trip, atomic as a whole). A larger one puts its
// immutable records first — content-addressed or keyed by commit ids that
// nothing references yet, so a crash in between leaves only unreachable
// records — and then the visible records in one small Commit. Either way
// each commit becomes visible atomically, with its refs moved by a
// compare-and-swap against what the group decided on: a *kv.ConflictError
// means another process moved one first and nothing was written.
func (g *group) flush() error {
	if !g.spilling && g.immSize+g.tw.size >= bulkGroupBytes {
		// A bulk group puts its immutable records first too: with
		// PutSame, which a driver may keep out of its tree (the Badger
		// driver's packs), so that its compactions do not copy them.
		g.spilling = true
	}
	if g.spilling {
		g.putImm()
	}
	wrote := len(g.async) > 0
	if err := g.wait(); err != nil {
		return putsFailed(err)
	}
	b := kv.Batch{Sets: g.sets, Swaps: make([]kv.Swap, 0, len(g.refs)+len(g.absent))}
	for _, e := range g.absent {
		b.Swaps = append(b.Swaps, kv.Swap{Key: e.Key, Absent: true, New: e.Value})
	}
	for key, id := range g.refs {
		ctxID, branch, _ := strings.Cut(key, "\x00")
		sw := kv.Swap{Key: keyRef(ctxID, branch), New: bytes.Clone(id[:])}
		if was := g.refWas[key]; was == nil {
			sw.Absent = true
		} else {
			sw.Old = bytes.Clone(was[:])
		}
		b.Swaps = append(b.Swaps, sw)
	}
	if b.Empty() && !wrote {
		return nil // only no-ops and refusals: nothing to write
	}
	if !g.spilling {
		one := b
		one.Sets = make([]kv.Record, 0, len(g.imm)+len(g.tw.written)+len(b.Sets))
		one.Sets = append(one.Sets, g.imm...)
		for id, enc := range g.tw.written {
			one.Sets = append(one.Sets, kv.Record{Key: keyNode(id), Value: enc})
		}
		one.Sets = append(one.Sets, b.Sets...)
		err := g.commitVisible(one)
		if !errors.Is(err, kv.ErrTooLarge) && !errors.Is(err, kv.ErrInvalid) {
			if err != nil {
				return fmt.Errorf("write commits: %w", err)
			}
			g.cacheNodes()
			return nil
		}
		// The estimate was too low (or an immutable record repeats a
		// key): fall back to two steps.
		g.spilling = true
		g.putImm()
		if err := g.wait(); err != nil {
			return putsFailed(err)
		}
	}
	if err := g.commitVisible(b); err != nil {
		return fmt.Errorf("write commits: %w", err)
	}
	g.cacheNodes()
	return nil
}

// putsFailed returns the error of a group whose puts of immutable
// records failed (err), before its visible records were sent: when the
// driver says the puts wrote nothing (kv.ErrNotWritten) or may have
// landed (kv.ErrOutcomeUnknown), none of the group's commits was made —
// what a put stored is unreachable, as after a crash between the two
// steps — and the error wraps kv.ErrNotWritten alone, so that the store
// goes on and the writers learn that nothing was made. Any other error
// is returned as it is.
func putsFailed(err error) error {
	if errors.Is(err, kv.ErrNotWritten) || errors.Is(err, kv.ErrOutcomeUnknown) {
		return fmt.Errorf("%w: the group's records were not all put, and none of its commits was sent (%v)", kv.ErrNotWritten, err)
	}
	return err
}

// commitVisible commits b through the group's hold, or directly without
// one.
func (g *group) commitVisible(b kv.Batch) error {
	if g.hold != nil {
		return g.hold.Commit(context.Background(), b)
	}
	return g.s.kv.Commit(context.Background(), b)
}

// wait waits for the group's puts in flight.
func (g *group) wait() error {
	var first error
	for _, done := range g.async {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	g.async = nil
	if first != nil {
		return fmt.Errorf("write objects: %w", first)
	}
	return nil
}

// cacheNodes puts the group's new trie nodes in the node cache once they
// are durable.
func (g *group) cacheNodes() {
	for id, n := range g.tw.nodes {
		g.s.nodes.put(id, n)
	}
}

// commitRecord returns a commit made earlier in this group or a stored one.
func (g *group) commitRecord(ctxID string, id hashing.Digest) (*replay.Commit, error) {
	if c := g.commits[ctxID+"\x00"+string(id[:])]; c != nil {
		return c, nil
	}
	return g.s.commitRecord(ctxID, id)
}

// head returns the branch head locked for this group, loading it (at the
// ref this group moved it to, if any) when it is not in memory.
func (g *group) head(ctxID, branch string) (*head, error) {
	s := g.s
	key := headKey(ctxID, branch)
	if h := g.heads[key]; h != nil {
		return h, nil
	}
	s.mu.Lock()
	h := s.heads[key]
	s.mu.Unlock()
	if h != nil {
		g.lock(h)
		// A reader may have evicted h between the lookup and the lock;
		// if so h may be stale, so load the head afresh.
		s.mu.Lock()
		cached := s.heads[key] == h
		s.mu.Unlock()
		if cached && s.shared {
			// Another process may have moved the ref: decide on the
			// stored head (the ref's swap would refuse a stale one).
			cur, err := s.ref(ctxID, branch)
			if err != nil {
				h.inGroup.Store(false)
				delete(g.locked, h)
				h.mu.Unlock()
				return nil, err
			}
			if cur != h.commit.ID && !s.catchUp(context.Background(), h, cur) {
				cached = false
				s.mu.Lock()
				if s.heads[key] == h {
					delete(s.heads, key)
				}
				s.mu.Unlock()
			}
		}
		if cached {
			g.heads[key] = h
			s.touch(h)
			return h, nil
		}
		h.inGroup.Store(false)
		delete(g.locked, h)
		h.mu.Unlock()
	}
	id, ok := g.refs[key]
	if !ok {
		var err error
		if id, err = s.ref(ctxID, branch); err != nil {
			return nil, err
		}
	}
	c, err := g.commitRecord(ctxID, id)
	if err = missingIsCorrupt(err, ctxID, id, "branch "+branch); err != nil {
		return nil, err
	}
	cs, err := g.ctxState(ctxID)
	if err != nil {
		return nil, err
	}
	// A commit this group made is not durable yet: its map is read
	// through the group's writer, whole. A durable one opens lazily.
	_, pending := g.commits[ctxID+"\x00"+string(c.ID[:])]
	opened := s.openingHead(ctxID)
	st, trust, base, err := s.openHead(g.tw, cs.info, c, !pending)
	if err != nil {
		opened()
		return nil, err
	}
	h = s.newHead(ctxID, branch, c, st, trust, base)
	s.touch(h)
	g.lock(h)
	g.heads[key] = h
	s.mu.Lock()
	s.heads[key] = h
	s.openedLocked(ctxID)
	s.evictHeadsLocked()
	s.mu.Unlock()
	return h, nil
}

// maxCatchUp bounds how many commits of other processes catchUp applies
// to a cached head; further behind, the head is loaded again.
const maxCatchUp = 64

// catchUp advances h, locked by the caller, to commit target when target
// descends from h's commit along first parents by at most maxCatchUp
// commits (another process committed them): it applies each one as a
// replay does (replay.ApplyCommit, which checks its ops and context
// hash), so a head that other processes keep moving costs what their
// commits touched, not a reload. The commits are applied to forks of the
// head's state and trust index, which the head takes as a commit group's
// view (head.install): readers' snapshots stay as they are, and a commit
// that fails to apply leaves the head untouched. It reports false when h
// must be loaded again instead.
func (s *Store) catchUp(ctx context.Context, h *head, target hashing.Digest) bool {
	var chain []*replay.Commit
	for id := target; id != h.commit.ID; {
		if len(chain) == maxCatchUp {
			return false
		}
		c, err := s.commitRecord(h.ctx, id)
		if err != nil || len(c.Parents) == 0 {
			return false
		}
		chain = append(chain, c)
		id = c.Parents[0]
	}
	src := s.plainSource(h.ctx)
	state, trust := h.state.Fork(), h.trust.Fork()
	for i := len(chain) - 1; i >= 0; i-- {
		changes, err := replay.ApplyCommit(ctx, src, state, chain[i])
		if err != nil {
			return false
		}
		dropPayloads(changes)
		trust.Apply(state, changes)
	}
	for _, c := range chain[1:] {
		h.changed += c.NumOps // install counts chain[0]'s
	}
	h.install(state, trust, chain[0])
	return true
}

func (g *group) createContext(r *writeReq) error {
	s := g.s
	if _, err := g.ctxState(r.ctxID); err == nil {
		return fmt.Errorf("context %q: %w", r.ctxID, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	when := r.at
	if when.IsZero() {
		when = s.clock()
	}
	now := hashing.FormatTime(when)
	cs := &ctxState{info: ContextInfo{ID: r.ctxID, Quarantine: r.mode, Created: now, Ruleset: graph.RulesetOf(r.message)}}
	g.created[r.ctxID] = cs
	g.touched[cs] = 0

	root, err := replay.NewCommit(nil, nil, hashing.EmptyContextHash(), "artifactd", r.message, now)
	if err != nil {
		return err
	}
	cs.lastSeq = 1
	root.Seq = 1
	info, _ := json.Marshal(cs.info)
	rec, _ := json.Marshal(root)
	g.set(keyCommit(r.ctxID, root.ID), rec)
	g.absent = append(g.absent, kv.Record{Key: keyCtx(r.ctxID), Value: info}, kv.Record{Key: keySeq(r.ctxID, 1), Value: root.ID[:]})
	g.moveRef(r.ctxID, DefaultBranch, nil, root.ID)
	g.commits[r.ctxID+"\x00"+string(root.ID[:])] = root
	g.answer(r, func(err error) { r.resp <- writeResp{info: cs.info, err: err} })
	return nil
}

func (g *group) moveBranch(r *writeReq) error {
	s := g.s
	if _, err := g.ctxState(r.ctxID); err != nil {
		return err
	}
	if _, err := g.commitRecord(r.ctxID, r.target); err != nil {
		return err
	}
	key := headKey(r.ctxID, r.branch)
	cur, exists := g.refs[key]
	if !exists {
		var err error
		cur, err = s.ref(r.ctxID, r.branch)
		switch {
		case err == nil:
			exists = true
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if r.kind == reqCreateBranch && exists {
		return fmt.Errorf("branch %q: %w", r.branch, ErrExists)
	}
	if r.kind == reqResetBranch && !exists {
		return fmt.Errorf("branch %q: %w", r.branch, ErrNotFound)
	}
	if r.expect != nil && cur != *r.expect {
		return fmt.Errorf("%w: branch %q is at %s, not at %s", ErrStale, r.branch, cur.Short(), r.expect.Short())
	}
	// Drop the in-memory head; it is rebuilt at the new target on use.
	// Readers may not cache a head of this branch until the group is
	// written (see Store.head).
	s.mu.Lock()
	delete(s.heads, key)
	s.moving[key]++
	s.mu.Unlock()
	if h := g.heads[key]; h != nil {
		delete(g.forks, h) // the dropped head need not take the group's commits
	}
	delete(g.heads, key)
	g.moved = append(g.moved, key)
	var was *hashing.Digest
	if exists {
		was = &cur
	}
	g.moveRef(r.ctxID, r.branch, was, r.target)
	g.answer(r, func(err error) { r.resp <- writeResp{err: err} })
	return nil
}

// asyncObjects is the number of new payloads from which a commit writes
// them from another goroutine, in parallel with building its state map.
const asyncObjects = 256

// writeAsync puts immutable records from another goroutine; flush waits
// for it before anything refers to them.
func (g *group) writeAsync(recs []kv.Record) {
	done := make(chan error, 1)
	g.async = append(g.async, done)
	go func() {
		// Objects and nodes are content-addressed and op chunks keyed by
		// a commit id nothing refers to yet: a put never changes a value.
		done <- kv.PutSame(context.Background(), g.s.kv, recs)
	}()
}

// objCheckMin is the size from which the committer asks whether an
// object is stored before writing it (Store.unstored): rewriting a small
// object that is already stored is cheaper than the lookup, and harmless
// (same key, same bytes).
const objCheckMin = 1024

func (g *group) commit(r *writeReq) error {
	req := r.commit
	cs, err := g.ctxState(req.Context)
	if err != nil {
		return err
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	h, err := g.head(req.Context, req.Branch)
	if err != nil {
		return err
	}
	hf := g.fork(h)
	m := hf.mapSource()
	if m != nil && len(req.Ops) >= readAheadMin {
		done, err := m.readAhead(req.Ops)
		defer done()
		if err != nil {
			return g.unreadableState(h, req.Branch, err)
		}
	}
	d, err := g.decide(hf, cs, r)
	if m != nil {
		// The reads of the request's later keys, made while it was
		// decided, refuse it as the first ones do when one failed.
		if rerr := m.settleReads(); rerr != nil {
			return g.unreadableState(h, req.Branch, rerr)
		}
	}
	if rerr := hf.readErr(); rerr != nil {
		// The decision may rest on entries that were stored but could
		// not be read.
		return g.unreadableState(h, req.Branch, rerr)
	}
	if err != nil {
		return err
	}
	if len(d.recorded) == 0 && len(req.ExtraParents) == 0 {
		// Every op was a no-op: the head is as it was.
		res := CommitResult{Commit: hf.commit, Noop: true, Changes: d.reqChanges}
		g.answer(r, func(err error) { r.resp <- writeResp{res: res, err: err} })
		return nil
	}
	c, err := g.stage(hf, cs, r, d)
	if err != nil {
		return err
	}
	hf.take(d, c)
	res := CommitResult{Commit: c, Changes: d.reqChanges, Definitions: d.defs}
	if d.mode != ModeEnforce {
		res.Tainted = d.tainted
	}
	g.answer(r, func(err error) { r.resp <- writeResp{res: res, err: err} })
	return nil
}

// unreadableState refuses a request on head h of branch, whose stored
// state could not be read (err): the corruption is noted, and the head is
// loaded afresh next time.
func (g *group) unreadableState(h *head, branch string, err error) error {
	g.unreadable[h] = true
	g.s.NoteCorruption(err)
	return fmt.Errorf("read the state of branch %q: %w", branch, err)
}

// stage writes what commit d records on the group's view hf of a branch
// head into the group: its payloads, op chunks and state-map nodes
// (immutable, content-addressed), its commit record and seq entry, and
// the move of the branch ref. It fails on I/O, or when the recorded ops
// cannot be encoded (an op beyond what a chunk holds); the caller then
// drops d. It returns the new commit.
func (g *group) stage(hf *headFork, cs *ctxState, r *writeReq, d *decision) (*replay.Commit, error) {
	s, req := g.s, r.commit
	enc, err := encodeOps(d.recorded, ChunkOps)
	if err != nil {
		return nil, err
	}
	// Payloads, content-addressed: nothing can refuse the commit from
	// here on but I/O. Many of them are written by another goroutine while
	// this one builds the state map.
	var objs, large []kv.Record // large: those to look for first
	for _, ch := range d.changes {
		if ch.Noop || ch.Op.Op != graph.OpPut || ch.Op.Data == nil {
			continue
		}
		dg := ch.Next.ContentHash
		if g.objs[dg] {
			continue
		}
		g.objs[dg] = true
		rec := kv.Record{Key: keyObj(dg), Value: ch.Op.Data}
		if len(ch.Op.Data) >= objCheckMin {
			large = append(large, rec)
		} else {
			objs = append(objs, rec)
		}
	}
	objs = append(objs, s.unstored(large)...)
	if len(objs) >= asyncObjects {
		g.writeAsync(objs)
	} else {
		for _, o := range objs {
			if err := g.addImm(o.Key, o.Value); err != nil {
				return nil, fmt.Errorf("write object: %w", err)
			}
		}
	}
	when := req.Time
	if when.IsZero() {
		when = s.clock()
	}
	parents := append([]hashing.Digest{hf.commit.ID}, req.ExtraParents...)
	c := &replay.Commit{Parents: parents, ContextHash: d.next.Hash(), OpsHash: enc.hash,
		Author: req.Author, Message: req.Message, Time: hashing.FormatTime(when), NumOps: len(d.recorded)}
	c.ID = c.ComputeID()
	revInMap := s.reverseInMap(hf.commit)
	parentRoot, muts := trieChild{id: hf.commit.Root, count: hf.commit.RootCount}, trieMutations(d.changes, c.ID, d.next, d.trust, revInMap)
	parentRoot, err = s.upgradeStateMap(g.tw, req.Context, parentRoot)
	if err != nil {
		return nil, err
	}
	var revs []graph.EdgeKey
	if hf.commit.Index == nil && parentRoot.count > 0 {
		// The parent's map holds no index (it was written before format
		// 3; its head was loaded whole): the commit adds it.
		muts = append(indexMutations(hf.view(), hf.trust, revInMap), muts...)
		if !revInMap {
			hf.view().RangeEdges(func(e *graph.Edge) bool {
				revs = append(revs, e.Key())
				return true
			})
		}
	}
	if !revInMap {
		// Before the commit is visible, like its payloads: a record of a
		// commit that never lands names edges no map holds.
		for _, r := range reverseRecords(req.Context, c.ID, append(revs, newEdges(d.changes)...)) {
			if err := g.addImm(r.Key, r.Value); err != nil {
				return nil, fmt.Errorf("write reverse index: %w", err)
			}
		}
	}
	cached := s.cachedNode
	if m := hf.mapSource(); m != nil {
		cached = m.cachedNode // and what the decision read ahead
	}
	if err := g.tw.warm(parentRoot, muts, cached, s.readNodesFunc(context.Background(), prefetchWorkers)); err != nil {
		return nil, fmt.Errorf("read state map: %w", err)
	}
	root, err := g.tw.apply(parentRoot, muts)
	if err != nil {
		return nil, fmt.Errorf("update state map: %w", err)
	}
	c.Root, c.RootCount = root.id, root.count
	c.Artifacts, c.Edges = d.next.NumArtifacts(), d.next.NumEdges()
	sum := d.trust.Summary()
	c.Index = &replay.MapIndex{Tombstones: d.next.NumTombstones(), PoisonRoots: sum.PoisonRoots, Quarantined: sum.Quarantined,
		Types: typeCounts(hf.commit, hf.view(), d.next), ReverseApart: !revInMap}
	for i, chunk := range enc.chunks {
		if err := g.addImm(keyOps(req.Context, c.ID, uint32(i)), chunk); err != nil {
			return nil, fmt.Errorf("write ops: %w", err)
		}
	}
	if err := g.addBlobs(r.blobs); err != nil {
		return nil, fmt.Errorf("write blob: %w", err)
	}
	blobs := slices.Clip(req.Blobs)
	for _, b := range r.blobs {
		blobs = append(blobs, b.d)
	}
	if err := g.spill(); err != nil {
		return nil, fmt.Errorf("write state map: %w", err)
	}
	if _, ok := g.touched[cs]; !ok {
		g.touched[cs] = cs.lastSeq
	}
	cs.lastSeq++
	c.Seq = cs.lastSeq
	rec, err := json.Marshal(c)
	if err != nil {
		cs.lastSeq--
		return nil, err
	}
	g.set(keyCommit(req.Context, c.ID), rec)
	g.absent = append(g.absent, kv.Record{Key: keySeq(req.Context, c.Seq), Value: c.ID[:]})
	for _, b := range blobs {
		g.set(keyBlobMember(req.Context, b), []byte{})
	}
	for _, b := range req.Spills {
		g.set(keySpill(when, b), []byte(req.Context))
	}
	// Later requests of the group (a branch reset or a fast-forward merge
	// checking the head it expects) must see this ref move, not the disk's.
	parent := hf.commit.ID
	g.moveRef(req.Context, req.Branch, &parent, c.ID)
	g.commits[req.Context+"\x00"+string(c.ID[:])] = c
	return c, nil
}

// unstored returns the objects of objs that are not stored yet, asking
// the driver in one call that reads none of them (kv.Has). When it
// cannot tell, all are returned: writing an object again writes the same
// bytes under the same key. A stored object whose value is unreadable
// (corruption, which reads and fsck report) is not written again either:
// a commit does not mend the store in passing.
func (s *Store) unstored(objs []kv.Record) []kv.Record {
	if len(objs) == 0 {
		return nil
	}
	keys := make([][]byte, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	found, err := kv.Has(context.Background(), s.kv, keys)
	if err != nil {
		s.log.Debug("could not tell which payloads are stored; writing them all", "err", err)
		return objs
	}
	kept := objs[:0]
	for i, o := range objs {
		if !found[i] {
			kept = append(kept, o)
		}
	}
	return kept
}
