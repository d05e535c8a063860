package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
)

// Defect is one problem found by Check.
type Defect struct {
	// Kind is "context", "object", "blob", "node", "commit", "ops",
	// "ref", "state" or "checkpoint" (and "type" or "relation" for the
	// registry's records, which the service layer checks).
	// A broken chain is reported on the first commit that does not replay.
	Kind    string `json:"kind"`
	Context string `json:"context,omitempty"`
	// ID names the record: a digest, a branch or a commit.
	ID     string `json:"id"`
	Detail string `json:"detail"`
}

func (d Defect) String() string {
	if d.Context != "" {
		return fmt.Sprintf("%s %s in context %q: %s", d.Kind, d.ID, d.Context, d.Detail)
	}
	return fmt.Sprintf("%s %s: %s", d.Kind, d.ID, d.Detail)
}

// CheckReport is what Check read and found.
type CheckReport struct {
	Contexts int      `json:"contexts"`
	Commits  int      `json:"commits"`
	Ops      int      `json:"ops"`
	Objects  int      `json:"objects"`
	Blobs    int      `json:"blobs"`
	Nodes    int      `json:"nodes"`
	Defects  []Defect `json:"defects"`
}

// checkNode is what Check keeps of a sound state-map node.
type checkNode struct {
	total    int
	children []hashing.Digest
}

// checker is the state of one Check run.
type checker struct {
	s   *Store
	rep *CheckReport
	// created is each context's creation time as its record says, which
	// its root commit's time must be.
	created map[string]string
	objects map[hashing.Digest]struct{} // sound objects
	nodes   map[hashing.Digest]checkNode
	// reached holds the nodes already walked from some commit's root, and
	// reported the missing ones already reported.
	reached  map[hashing.Digest]bool
	reported map[hashing.Digest]bool
	// membersMarked: the store is marked as having the memberships of
	// its gate outputs' blobs recorded (meta blob-members). Until it is —
	// a store written before contexts held blobs, not yet backfilled —
	// no membership is expected.
	membersMarked bool
	// lostHeld are the memberships checkBlobs reported as naming bytes
	// not stored (or unreadable): a gate output naming one of them is
	// not reported again.
	lostHeld map[blobMember]bool
	// lostBytes are the blobs spills reported as neither stored nor
	// pruned: a gate output naming one of them is not reported again.
	lostBytes map[hashing.Digest]bool
	// unreadCtx are the contexts whose record does not decode: their
	// chains are checked all the same, their heads (read with the
	// context's settings) not.
	unreadCtx map[string]bool
	// stored memoizes hasBlob: whether a blob's bytes are stored, for
	// each blob looked up without error.
	stored map[hashing.Digest]bool
}

// hasBlob is HasBlob through k.stored: the memberships, the spills and
// the gate outputs of every branch head that name one blob look its
// bytes up once. A failed look-up is not kept.
func (k *checker) hasBlob(ctx context.Context, d hashing.Digest) (bool, error) {
	if ok, seen := k.stored[d]; seen {
		return ok, nil
	}
	ok, err := k.s.HasBlob(ctx, d)
	if err == nil {
		k.stored[d] = ok
	}
	return ok, err
}

func (k *checker) add(d Defect) { k.rep.Defects = append(k.rep.Defects, d) }

// Check verifies the whole store and collects every defect rather than
// stopping at the first:
//
//   - every object, blob and state-map node is re-hashed against its key
//     (and objects must be canonical JSON, nodes decodable);
//   - every commit of every context is read through the seq index: its
//     record must decode, its id must recompute from its header, its ops
//     must be readable and hash to its ops hash, every payload its puts
//     name must be stored, and its state map must be whole (every node
//     reachable from its root stored and sound, the root's entry count the
//     recorded one);
//   - every commit record of a context must be named by its seq index,
//     which the commit list, log and export walk: a branch head, a parent
//     and a commit no branch reaches any more (its branch reset away from
//     it) alike, each reported once;
//   - each context's chain is replayed from its first commit, and every
//     replayed state must hash to the commit's context hash and have the
//     recorded artifact, edge and state-map entry counts;
//   - every commit's state map must hold the state the replay reached
//     there, at a branch head or not (a read at the commit serves the
//     map, not the chain): the diff of its map against its first
//     parent's (checked before it; an empty map for a root commit) must
//     change exactly the artifact, tombstone and edge entries (and the
//     reverse edges a map of format 3 keeps) that the commit's ops
//     changed, each to the replayed state's value and an artifact's
//     naming the commit as its writer — in time proportional to what the
//     commit changed, not to its state. Trust entries follow from the
//     whole state: they are counted here and compared at branch heads. A
//     commit whose first parent's map is not whole or does not check is
//     not checked either (its parent is reported);
//   - where a commit's map keeps its reverse edges apart (format 4 on),
//     the context's reverse index must name every edge that diff adds
//     (every edge of the map, for the first such map of a chain): a read
//     of the commit over its map finds an artifact's dependents only
//     through the index. An edge is looked for in the commit's own
//     record of its target, then in the target's other records;
//   - every leaf checkpoint must hold sorted leaves that hash to its name
//     (a bad one is never used, but it is corruption);
//   - every ref must point at a commit, and every branch head's state map
//     must load and hash to its commit's context hash (a head whose map
//     was found above not to hold its state is not reported again);
//   - every membership record must name a stored blob, one pruned here
//     or one its context's import listed as pruned (whose records must be
//     well formed: importedPrunes), and,
//     once the store is marked as having its memberships recorded (meta
//     blob-members), each context must hold every blob its fetch
//     verdicts name, in every commit the replay's pass reads
//     (verdictBlobs); not so a tool output's or error's blob, which a
//     client's own put or an import may leave unheld on purpose (see
//     verdictBlobs) — unless the spill index says which context spilled
//     it: until its spill is pruned, that context must hold it and its
//     bytes must be stored or pruned (spills).
//
// A value that fails its hash is read again once, to tell a flaky read
// from real corruption. The error is non-nil only when the check itself
// could not run (I/O, cancelled ctx).
func (s *Store) Check(ctx context.Context) (*CheckReport, error) {
	k := &checker{
		s:        s,
		rep:      &CheckReport{},
		objects:  make(map[hashing.Digest]struct{}),
		nodes:    make(map[hashing.Digest]checkNode),
		reached:  make(map[hashing.Digest]bool),
		reported: make(map[hashing.Digest]bool),
		created:  make(map[string]string),
		lostHeld: make(map[blobMember]bool),

		lostBytes: make(map[hashing.Digest]bool),
		unreadCtx: make(map[string]bool),
		stored:    make(map[hashing.Digest]bool),
	}
	rep := k.rep
	switch _, err := s.kv.Get(ctx, keyMetaBlobMembers()); {
	case err == nil:
		k.membersMarked = true
	case errors.Is(err, kv.ErrNotFound):
	case fault.IsCorrupt(err):
		k.add(Defect{Kind: "blob", ID: "blob-members", Detail: "the store's mark that blob memberships are recorded is unreadable: " + err.Error()})
	default:
		return rep, err
	}
	if err := k.scan(ctx, pObj, "object", func(d hashing.Digest, v []byte) error {
		switch err := hashing.CheckCanonicalObject(v); {
		case errors.Is(err, hashing.ErrNotCanonicalForm):
			return fmt.Errorf("%w, so its content hash is not the data's", err)
		case err != nil:
			return fmt.Errorf("not canonical JSON: %w", err)
		}
		if hashing.ContentHash(v) != d {
			return errors.New("bytes do not match the content hash")
		}
		k.objects[d] = struct{}{}
		return nil
	}, &rep.Objects); err != nil {
		return rep, err
	}
	if err := k.scan(ctx, pBlob, "blob", func(d hashing.Digest, v []byte) error {
		if hashing.Sum(v) != d {
			return errors.New("bytes do not match the digest")
		}
		return nil
	}, &rep.Blobs); err != nil {
		return rep, err
	}
	if err := k.checkBlobs(ctx); err != nil {
		return rep, err
	}
	if err := k.spills(ctx); err != nil {
		return rep, err
	}
	if err := k.scan(ctx, pNode, "node", func(d hashing.Digest, v []byte) error {
		if hashing.Sum(v) != d {
			return errors.New("bytes do not match the node id")
		}
		n, err := decodeNode(v)
		if err != nil {
			return err
		}
		cn := checkNode{total: n.total}
		if !n.leaf {
			for _, c := range n.children {
				if c.count > 0 {
					cn.children = append(cn.children, c.id)
				}
			}
		}
		k.nodes[d] = cn
		return nil
	}, &rep.Nodes); err != nil {
		return rep, err
	}
	if err := k.leafCheckpoints(ctx); err != nil {
		return rep, err
	}
	if err := k.leafTables(ctx); err != nil {
		return rep, err
	}
	if err := k.leafHints(ctx); err != nil {
		return rep, err
	}
	// Drop caches so that the chain checks read from disk.
	s.nodes.clear()
	s.objects.Clear()
	s.states.Clear()

	ctxs, err := k.contexts(ctx)
	if err != nil {
		return rep, err
	}
	for _, id := range ctxs {
		rep.Contexts++
		if err := k.context(ctx, id); err != nil {
			return rep, err
		}
	}
	if err := k.orphanRefs(ctx); err != nil {
		return rep, err
	}
	return rep, nil
}

// orphanRefs reports the contexts that have branches but no context
// record (a lost record: every command then takes the context for absent).
func (k *checker) orphanRefs(ctx context.Context) error {
	seen := map[string]bool{}
	return kv.ScanKeys(ctx, k.s.kv, []byte(pRef), nil, 0, func(key []byte) error {
		id, _, ok := strings.Cut(string(key[len(pRef):]), "\x00")
		if !ok || seen[id] {
			return nil
		}
		seen[id] = true
		if _, known := k.created[id]; !known {
			if _, err := k.s.kv.Get(ctx, keyCtx(id)); errors.Is(err, kv.ErrNotFound) {
				k.add(Defect{Kind: "context", Context: id, ID: id, Detail: "the context has branches but no context record"})
			}
		}
		return nil
	})
}

// contexts lists the contexts whose records read and decode, and reports
// the others.
func (k *checker) contexts(ctx context.Context) ([]string, error) {
	var ids []string
	err := k.scanAll(ctx, []byte(pCtx), func(key, v []byte) error {
		var info ContextInfo
		if id := string(key[len(pCtx):]); json.Unmarshal(v, &info) != nil || info.ID != id {
			k.add(Defect{Kind: "context", ID: fmt.Sprintf("%q", id), Detail: "context record does not decode to this context"})
			if ValidateContextID(id) == nil {
				// Its chain is still checked: one bad record must not
				// hide the rest of the context's damage.
				k.unreadCtx[id] = true
				ids = append(ids, id)
			}
			return nil
		}
		// Its settings as the store writes them: a flipped byte in the
		// quarantine mode turned enforcement off unnoticed.
		if info.Quarantine != ModeEnforce && info.Quarantine != ModeObserve {
			k.add(Defect{Kind: "context", Context: info.ID, ID: info.ID, Detail: fmt.Sprintf("quarantine setting %q is neither %q nor %q", info.Quarantine, ModeEnforce, ModeObserve)})
		}
		if _, err := info.ruleset(); err != nil {
			k.add(Defect{Kind: "context", Context: info.ID, ID: info.ID, Detail: err.Error()})
		}
		k.created[info.ID] = info.Created
		ids = append(ids, info.ID)
		return nil
	}, func(key []byte, why string) {
		k.add(Defect{Kind: "context", ID: fmt.Sprintf("%q", key[len(pCtx):]), Detail: "context record unreadable: " + why})
	})
	return ids, err
}

// scanAll scans prefix as kv.Driver.Scan does, but a record the driver
// cannot read (a *kv.UnreadableError) goes to lost and the scan goes on
// after it.
func (k *checker) scanAll(ctx context.Context, prefix []byte, fn func(key, v []byte) error, lost func(key []byte, why string)) error {
	return scanPast(ctx, k.s.kv, prefix, fn, lost)
}

// scanPast scans prefix of d as kv.Driver.Scan does, but a record the
// driver cannot read (a *kv.UnreadableError) goes to lost and the scan
// goes on after it.
func scanPast(ctx context.Context, d kv.Driver, prefix []byte, fn func(key, v []byte) error, lost func(key []byte, why string)) error {
	var start []byte
	for {
		err := d.Scan(ctx, prefix, start, 0, fn)
		var ue *kv.UnreadableError
		if !errors.As(err, &ue) {
			return err
		}
		if !bytes.HasPrefix(ue.Key, prefix) || bytes.Compare(ue.Key, start) < 0 {
			return err // not a key this scan reached: going on could loop
		}
		lost(ue.Key, ue.Why)
		start = append(bytes.Clone(ue.Key), 0)
	}
}

// scan reads every record under prefix, keyed by a digest, and verifies
// it, reading a failing value once more before calling it a defect. A
// value the driver cannot read at all is a defect too, and the scan goes
// on after it.
func (k *checker) scan(ctx context.Context, prefix, kind string, verify func(d hashing.Digest, v []byte) error, count *int) error {
	lost := func(key []byte, why string) {
		*count++
		id := fmt.Sprintf("%q", key)
		if d, ok := digestKey(key, prefix); ok {
			id = d.String()
		}
		k.add(Defect{Kind: kind, ID: id, Detail: "unreadable: " + why})
	}
	return k.scanAll(ctx, []byte(prefix), func(key, v []byte) error {
		*count++
		d, ok := digestKey(key, prefix)
		if !ok {
			k.add(Defect{Kind: kind, ID: fmt.Sprintf("%q", key), Detail: "malformed key"})
			return nil
		}
		if err := verify(d, v); err != nil {
			// Read once more before calling it corruption.
			if v2, gerr := k.s.kv.Get(ctx, key); gerr == nil && verify(d, v2) == nil {
				return nil
			}
			k.add(Defect{Kind: kind, ID: d.String(), Detail: err.Error()})
		}
		return nil
	}, lost)
}

// digestKey returns the digest that key, under prefix, is named by, or
// false when key is not prefix and 32 bytes.
func digestKey(key []byte, prefix string) (hashing.Digest, bool) {
	if len(key) != len(prefix)+32 {
		return hashing.Digest{}, false
	}
	return hashing.Digest(key[len(prefix):]), true
}

// checkSource is the context's Source for the replay in Check: it also
// checks, as the fold reads each commit's ops, that every payload they
// name is a sound stored object (the object scan re-hashed them all, so
// the fold itself needs to read none).
type checkSource struct {
	k      *checker
	ctxID  string
	failed map[hashing.Digest]bool // commits with a defect already
	// verdicts are the fetch_verdict puts of the commits whose ops were
	// read, one per payload, for verdictBlobs.
	verdicts    []verdictPut
	verdictData map[hashing.Digest]bool
}

// verdictPut is a fetch_verdict put: its artifact, payload and commit.
type verdictPut struct {
	id           string
	data, commit hashing.Digest
}

func (c *checkSource) GetCommit(ctx context.Context, id hashing.Digest) (*replay.Commit, error) {
	return c.k.s.commitRecord(c.ctxID, id)
}

func (c *checkSource) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	return c.k.s.rawObject(d)
}

func (c *checkSource) Ops(ctx context.Context, cm *replay.Commit) ([]graph.Op, error) {
	ops, err := c.k.s.Ops(ctx, c.ctxID, cm)
	if err != nil {
		return nil, err
	}
	for i, op := range ops {
		if op.Op != graph.OpPut {
			continue
		}
		if op.Type == "fetch_verdict" && !c.verdictData[op.ContentHash] {
			c.verdictData[op.ContentHash] = true
			c.verdicts = append(c.verdicts, verdictPut{id: op.ID, data: op.ContentHash, commit: cm.ID})
		}
		if _, ok := c.k.objects[op.ContentHash]; !ok {
			c.failed[cm.ID] = true
			c.k.add(Defect{Kind: "commit", Context: c.ctxID, ID: cm.ID.String(),
				Detail: fmt.Sprintf("op %d puts %q with payload %s, which is missing or corrupt", i, op.ID, op.ContentHash)})
		}
	}
	return ops, nil
}

// parents reports a parent of any of commits (the context's, in seq
// order; failed are those already reported) that is not a readable commit
// of the seq index with a lower seq (seqOf: the index's commits, each with
// its seq): the fold checks first parents as it goes, but a merge's other
// parents only when a walk reaches them, and a replay of the merge
// (replay --verify) would fail on them. It returns the parents it found
// out of the index, each reported once, on its first child.
func (k *checker) parents(ctxID string, commits []*replay.Commit, seqOf map[hashing.Digest]uint64, failed map[hashing.Digest]bool) map[hashing.Digest]bool {
	reported := map[hashing.Digest]bool{}
	for _, c := range commits {
		for i, p := range c.Parents {
			if failed[p] || reported[p] {
				continue
			}
			seq, indexed := seqOf[p]
			var why string
			switch {
			case indexed && seq >= c.Seq:
				why = fmt.Sprintf("its parent %s has seq %d, not below its own %d", p.Short(), seq, c.Seq)
			case !indexed:
				if _, err := k.s.commitRecord(ctxID, p); err != nil {
					why = fmt.Sprintf("its parent %s (%d of %d) cannot be read: %v", p.Short(), i+1, len(c.Parents), err)
				} else {
					why = fmt.Sprintf("its parent %s is not in the context's seq index", p.Short())
				}
				reported[p] = true
			default:
				continue
			}
			failed[c.ID] = true
			k.add(Defect{Kind: "commit", Context: ctxID, ID: c.ID.String(), Detail: why})
		}
	}
	return reported
}

func (k *checker) context(ctx context.Context, ctxID string) error {
	s := k.s
	ids, err := k.seqIndex(ctx, ctxID)
	if err != nil {
		return err
	}
	// seqOf is the seq index's commits, each with its seq: what the
	// parent, head and commit-record checks look commits up in.
	seqOf := make(map[hashing.Digest]uint64, len(ids))
	for _, e := range ids {
		seqOf[e.id] = e.seq
	}
	failed := make(map[hashing.Digest]bool)
	mapBroken := make(map[hashing.Digest]bool) // commits whose state map is not whole
	var commits []*replay.Commit
	for _, e := range ids {
		c, err := s.commitRecord(ctxID, e.id)
		if err != nil {
			if !fault.IsCorrupt(err) && !errors.Is(err, ErrNotFound) {
				return err
			}
			failed[e.id] = true
			k.add(Defect{Kind: "commit", Context: ctxID, ID: e.id.String(), Detail: err.Error()})
			continue
		}
		k.rep.Commits++
		if c.Seq != e.seq {
			failed[c.ID] = true
			k.add(Defect{Kind: "commit", Context: ctxID, ID: c.ID.String(), Detail: fmt.Sprintf("record has seq %d, indexed at %d", c.Seq, e.seq)})
		}
		if got := c.ComputeID(); got != c.ID {
			failed[c.ID] = true
			k.add(Defect{Kind: "commit", Context: ctxID, ID: c.ID.String(), Detail: fmt.Sprintf("its header hashes to %s, not to its id", got)})
		}
		if !k.stateMap(ctxID, c) {
			failed[c.ID] = true
			mapBroken[c.ID] = true
		}
		commits = append(commits, c)
	}
	outParents := k.parents(ctxID, commits, seqOf, failed)
	for _, c := range commits {
		if len(c.Parents) == 0 && !k.unreadCtx[ctxID] && c.Time != k.created[ctxID] {
			k.add(Defect{Kind: "context", Context: ctxID, ID: ctxID, Detail: fmt.Sprintf("context record says created %q, its root commit %s %q", k.created[ctxID], c.ID.Short(), c.Time)})
		}
	}
	if _, err := s.ref(ctxID, DefaultBranch); errors.Is(err, ErrNotFound) {
		// No call removes a context's main branch: its absence is damage.
		k.add(Defect{Kind: "ref", Context: ctxID, ID: DefaultBranch, Detail: "the context has no main branch"})
	}
	// Replay the chain; the fold checks ops, ids and context hashes.
	src := &checkSource{k: k, ctxID: ctxID, failed: failed, verdictData: map[hashing.Digest]bool{}}
	replayed := make(map[hashing.Digest]bool)
	history := newHistoryCheck(ctxID, commits, mapBroken)
	if len(commits) > 0 {
		res, err := replay.FoldCommitsChanges(ctx, src, commits, replay.Options{Objects: replay.ObjectsNone},
			func(c *replay.Commit, st *graph.State, changes []graph.Change) error {
				replayed[c.ID] = true
				entries := st.NumArtifacts() + st.NumEdges() + st.NumTombstones()
				if x := c.Index; x != nil {
					// The index: a 'q' entry per unconfirmed artifact,
					// and in a map of format 3 an 'r' entry per edge
					// (checkMapIndex checks the entries at each branch
					// head, checkReverseIndexOf the index kept apart).
					entries += x.PoisonRoots + x.Quarantined
					if !x.ReverseApart {
						entries += st.NumEdges()
					}
				}
				switch {
				case c.Index != nil && !maps.Equal(c.Index.Types, st.TypeCounts()):
					k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(),
						Detail: fmt.Sprintf("records type counts %v, the replayed state has %v", c.Index.Types, st.TypeCounts())})
				case c.Index != nil && c.Index.Tombstones != st.NumTombstones():
					k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(),
						Detail: fmt.Sprintf("records %d tombstones, the replayed state has %d", c.Index.Tombstones, st.NumTombstones())})
				case c.Artifacts != st.NumArtifacts() || c.Edges != st.NumEdges():
					k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(),
						Detail: fmt.Sprintf("records %d artifacts and %d edges, the replayed state has %d and %d", c.Artifacts, c.Edges, st.NumArtifacts(), st.NumEdges())})
				case c.RootCount != entries:
					k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(),
						Detail: fmt.Sprintf("state map holds %d entries, the replayed state %d", c.RootCount, entries)})
				}
				return k.commitHistory(ctx, history, c, st, changes)
			})
		var ce *replay.ChainError
		switch {
		case errors.As(err, &ce):
			if !failed[ce.Commit] {
				k.add(Defect{Kind: "commit", Context: ctxID, ID: ce.Commit.String(), Detail: ce.Reason})
				failed[ce.Commit] = true
			}
		case err != nil:
			return err
		default:
			k.rep.Ops += res.Ops
		}
	}
	// Commits the replay did not reach still get their ops checked.
	for _, c := range commits {
		if replayed[c.ID] || failed[c.ID] {
			continue
		}
		if reason := checkOps(ctx, src, c); reason != "" {
			k.add(Defect{Kind: "ops", Context: ctxID, ID: c.ID.String(), Detail: reason})
		}
	}
	if err := k.verdictBlobs(ctx, ctxID, src.verdicts); err != nil {
		return err
	}
	branches, err := k.branches(ctx, ctxID)
	if err != nil {
		return err
	}
	heads := make(map[hashing.Digest][]string, len(branches))
	for _, b := range branches {
		heads[b.Head] = append(heads[b.Head], b.Name)
	}
	if err := k.unindexed(ctx, ctxID, seqOf, heads, outParents); err != nil {
		return err
	}
	if len(branches) == 0 {
		return nil
	}
	// The heads whose reverse edges are apart are checked against the
	// context's reverse index together, one pass over it for as many
	// heads as fit the head budget at once, not one pass each.
	type pendingHead struct {
		branch string
		c      *replay.Commit
	}
	var (
		batch       []pendingHead
		batchStates []*graph.State // batch[i]'s state
		batchCost   int64
	)
	// flush checks the batch; a read of the index that fails for a
	// reason other than corruption (I/O, a cancelled ctx) is the check's
	// own failure, not the heads' defect.
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		errs, err := s.checkReverseIndexOf(ctx, ctxID, batchStates)
		if err != nil && !fault.IsCorrupt(err) {
			return fmt.Errorf("read the reverse index of %q: %w", ctxID, err)
		}
		for i, h := range batch {
			bad := errs[i] // else a failed read of the index fails every head's check
			if bad == nil {
				bad = err
			}
			if bad != nil {
				k.add(Defect{Kind: "state", Context: ctxID, ID: h.c.ID.String(), Detail: fmt.Sprintf("head of branch %q: %v", h.branch, bad)})
			}
		}
		clear(batchStates) // let the states go
		batch, batchStates, batchCost = batch[:0], batchStates[:0], 0
		return nil
	}
	for _, b := range branches {
		c, err := s.commitRecord(ctxID, b.Head)
		if err != nil {
			k.add(Defect{Kind: "ref", Context: ctxID, ID: b.Name, Detail: err.Error()})
			continue
		}
		if failed[c.ID] || history.wrong[c.ID] {
			continue // reported on the commit
		}
		cs, err := s.ctxState(ctxID)
		if fault.IsCorrupt(err) {
			if !k.unreadCtx[ctxID] { // else reported with the context records
				k.add(Defect{Kind: "context", ID: fmt.Sprintf("%q", ctxID), Detail: err.Error()})
			}
			return flush()
		}
		if err != nil {
			return err
		}
		apart, cost := c.Index != nil && c.Index.ReverseApart, commitStateCost(c)
		if apart && batchCost+cost > s.headBudget {
			// before the next head loads: the batch and one head at most
			if err := flush(); err != nil {
				return err
			}
		}
		st, err := s.loadState(ctx, s, cs.info, c, prefetchWorkers)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("load the head of branch %q of %q: %w", b.Name, ctxID, ctx.Err())
		}
		if err != nil {
			k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(), Detail: fmt.Sprintf("head of branch %q: %v", b.Name, err)})
			continue
		}
		if err := s.checkMapIndex(ctx, c, st); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("check the index of branch %q of %q: %w", b.Name, ctxID, ctx.Err())
			}
			k.add(Defect{Kind: "state", Context: ctxID, ID: c.ID.String(), Detail: fmt.Sprintf("head of branch %q: %v", b.Name, err)})
		}
		if err := k.gateBlobs(ctx, ctxID, b.Name, st); err != nil {
			return err
		}
		if apart {
			batch = append(batch, pendingHead{branch: b.Name, c: c})
			batchStates = append(batchStates, st)
			batchCost += cost
		}
	}
	return flush()
}

// checkOps reads a commit's ops and compares them with its record.
func checkOps(ctx context.Context, src replay.Source, c *replay.Commit) string {
	ops, err := src.Ops(ctx, c)
	if err != nil {
		return "cannot read its ops: " + err.Error()
	}
	h, _, err := graph.OpsHash(ops)
	switch {
	case err != nil:
		return "its ops cannot be canonicalized: " + err.Error()
	case h != c.OpsHash:
		return fmt.Sprintf("its ops hash to %s, the commit records %s", h, c.OpsHash)
	case len(ops) != c.NumOps:
		return fmt.Sprintf("records %d ops, has %d", c.NumOps, len(ops))
	}
	return ""
}

type seqEntry struct {
	seq uint64
	id  hashing.Digest
}

func (k *checker) seqIndex(ctx context.Context, ctxID string) ([]seqEntry, error) {
	var out []seqEntry
	p := prefixSeq(ctxID)
	lost := func(key []byte, why string) {
		id := fmt.Sprintf("%q", key)
		if len(key) == len(p)+8 {
			id = fmt.Sprintf("seq %d", beUint64(key[len(p):]))
		}
		k.add(Defect{Kind: "commit", Context: ctxID, ID: id, Detail: "seq entry unreadable: " + why})
	}
	err := k.scanAll(ctx, p, func(key, v []byte) error {
		if len(key) != len(p)+8 {
			k.add(Defect{Kind: "commit", Context: ctxID, ID: fmt.Sprintf("%q", key), Detail: "malformed seq key"})
			return nil
		}
		seq := beUint64(key[len(p):])
		if len(v) != 32 {
			k.add(Defect{Kind: "commit", Context: ctxID, ID: fmt.Sprintf("seq %d", seq), Detail: fmt.Sprintf("seq entry holds %d bytes, not a commit id", len(v))})
			return nil
		}
		out = append(out, seqEntry{seq: seq, id: hashing.Digest(v)})
		return nil
	}, lost)
	return out, err
}

// unindexed reports every commit record of the context that no seq entry
// names (seqOf: the seq index's commits): the commit list, log, export and
// backfills walk the index, so they never see it. One finding per
// record: a branch head out of the index on its branch, a parent already
// reported on its child (outParents) not again, any other record — a
// commit a reset left behind, say — on itself. A record whose seq entry is
// there when read again (written since the index was read, by another
// process sharing the store) is no defect. The cost is one scan of the
// context's commit keys, and a read of each record out of the index.
func (k *checker) unindexed(ctx context.Context, ctxID string, seqOf map[hashing.Digest]uint64, heads map[hashing.Digest][]string, outParents map[hashing.Digest]bool) error {
	s := k.s
	p := prefixCommits(ctxID)
	var out []hashing.Digest
	err := kv.ScanKeys(ctx, s.kv, p, nil, 0, func(key []byte) error {
		if len(key) != len(p)+32 {
			k.add(Defect{Kind: "commit", Context: ctxID, ID: fmt.Sprintf("%q", key), Detail: "malformed commit key"})
			return nil
		}
		id := hashing.Digest(key[len(p):])
		if _, indexed := seqOf[id]; !indexed && !outParents[id] {
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the commits of %q: %w", ctxID, err)
	}
	for _, id := range out {
		unreadable := ""
		c, err := s.commitRecord(ctxID, id)
		switch {
		case err == nil:
			v, err := s.kv.Get(ctx, keySeq(ctxID, c.Seq))
			if err == nil && bytes.Equal(v, id[:]) {
				continue // indexed since the scan
			}
			if err != nil && !errors.Is(err, kv.ErrNotFound) && !fault.IsCorrupt(err) {
				return fmt.Errorf("read seq %d of %q: %w", c.Seq, ctxID, err)
			}
		case errors.Is(err, ErrNotFound):
			continue // gone since the scan
		case fault.IsCorrupt(err):
			unreadable = "; its record cannot be read either: " + err.Error()
		default:
			return err
		}
		if names := heads[id]; len(names) > 0 {
			// A head no seq entry names: no parent check meets it, and an
			// export of the context would leave it out.
			branch := "branch " + strconv.Quote(names[0])
			if len(names) > 1 {
				branch = "branches " + quoteAll(names)
			}
			k.add(Defect{Kind: "ref", Context: ctxID, ID: names[0], Detail: fmt.Sprintf("the head %s of %s is not in the context's seq index%s", id.Short(), branch, unreadable)})
			continue
		}
		k.add(Defect{Kind: "commit", Context: ctxID, ID: id.String(),
			Detail: "the commit is not in the context's seq index (no seq entry names it; it is no branch's head and no indexed commit's parent): the commit list, log and export leave it out" + unreadable})
	}
	return nil
}

// quoteAll quotes each name and joins them with commas.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// stateMap checks that the state map of c is whole: every node reachable
// from its root is stored and sound. Nodes already walked from another
// commit are not walked again, and a missing node is reported once.
func (k *checker) stateMap(ctxID string, c *replay.Commit) bool {
	if c.RootCount == 0 {
		if !c.Root.IsZero() {
			k.add(Defect{Kind: "commit", Context: ctxID, ID: c.ID.String(), Detail: "records an empty state map with a root"})
			return false
		}
		return true
	}
	if n, ok := k.nodes[c.Root]; ok && n.total != c.RootCount {
		k.add(Defect{Kind: "commit", Context: ctxID, ID: c.ID.String(),
			Detail: fmt.Sprintf("records %d state-map entries, its root node holds %d", c.RootCount, n.total)})
		return false
	}
	ok := true
	stack := []hashing.Digest{c.Root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if k.reached[id] {
			continue
		}
		k.reached[id] = true
		n, found := k.nodes[id]
		if !found {
			ok = false
			if !k.reported[id] {
				k.reported[id] = true
				k.add(Defect{Kind: "node", Context: ctxID, ID: id.String(),
					Detail: fmt.Sprintf("state-map node of commit %s is missing or corrupt", c.ID.Short())})
			}
			continue
		}
		stack = append(stack, n.children...)
	}
	return ok
}

// gateBlobs reports every gate output of a branch head (fetch_verdict,
// tool_error, tool_output) that names a blob the store does not hold: its
// verdict or cut could no longer be checked against the bytes. A tool
// output's or error's blob pruned here, or listed as pruned by the bundle
// this context was imported from, is not missing; another context's
// import says nothing of it. A blob
// whose loss checkBlobs reported on the context's membership is not
// reported again. It fails
// only when ctx ends: a blob it could not look up then is not reported.
func (k *checker) gateBlobs(ctx context.Context, ctxID, branch string, st *graph.State) error {
	s := k.s
	for _, a := range st.Artifacts() {
		if !gateOutput(a.Type) {
			continue
		}
		data, err := s.object(a.ContentHash)
		if err != nil {
			continue // reported with the objects
		}
		for _, ref := range gate.BlobRefs(a.Type, data) {
			d, err := hashing.ParseDigest(ref)
			if err == nil && (k.lostHeld[blobMember{ctxID, d}] || k.lostBytes[d]) {
				continue // reported with the memberships or the spills, naming the blob
			}
			if err == nil {
				var ok bool
				if ok, err = k.hasBlob(ctx, d); err == nil && ok {
					continue
				}
				if _, pruned := s.blobPrunedIn(ctx, ctxID, d); pruned && a.Type != "fetch_verdict" {
					continue // a spilled output pruned after its window, here or in the store the context was imported from
				}
				if ctx.Err() != nil {
					return fmt.Errorf("look up the blobs of branch %q of %q: %w", branch, ctxID, ctx.Err())
				}
			}
			why := "which is not stored"
			if err != nil {
				why = "which could not be looked up: " + err.Error()
			}
			k.add(Defect{Kind: "blob", Context: ctxID, ID: a.ID,
				Detail: fmt.Sprintf("%s %q at the head of branch %q names blob %s, %s", a.Type, a.ID, branch, ref, why)})
		}
	}
	return nil
}
