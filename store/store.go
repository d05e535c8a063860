package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/internal/lru"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
)

// Errors returned by the store. They are wrapped with detail; match them
// with errors.Is.
var (
	// ErrNotFound: the context, branch, commit, artifact or blob does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the context or branch already exists.
	ErrExists = errors.New("already exists")
	// ErrStale: the commit named an expected parent that is no longer the
	// head (or PutTypeIf or PutRelationIf expected a record that is no
	// longer stored).
	ErrStale = errors.New("stale parent")
	// ErrInvalid: the request is malformed (bad id, bad branch name…).
	ErrInvalid = errors.New("invalid request")
	// ErrAmbiguous: a hash prefix matches more than one commit.
	ErrAmbiguous = errors.New("ambiguous reference")
	// ErrCorrupt: stored data does not match its hash or cannot be decoded.
	ErrCorrupt = fault.Corruption("store corruption")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store closed")
	// ErrLocked: the data directory is held by another process (a running
	// artifactd serve); Badger allows one process per directory.
	ErrLocked = errors.New("data directory locked by another process")
	// ErrWriteFailed: a commit group could not be written or synced. Its
	// outcome is unknown, so the store refuses every later write until it
	// is reopened; restart the server and run fsck.
	ErrWriteFailed = errors.New("write failed; restart artifactd and run fsck")
)

// Quarantine modes of a context.
const (
	ModeEnforce = "enforce"
	ModeObserve = "observe"
)

// DefaultBranch is the branch created with every context.
const DefaultBranch = "main"

// Options configure Open.
type Options struct {
	// Dir is the data directory of the embedded Badger database (created
	// if missing). It is ignored when Driver is set.
	Dir string
	// Driver is the storage driver to keep the store in (PostgreSQL, in
	// memory…); nil means Badger in Dir. The store closes it on Close.
	// A driver another process may write too (kv.Shared) makes the store
	// check a branch's ref before it trusts a cached head.
	Driver kv.Driver
	// Logger receives operational logs; slog.Default() when nil.
	Logger *slog.Logger
	// Clock gives commit times; time.Now when nil.
	Clock func() time.Time
	// NoSync skips the fsync after each commit group. Only for benchmarks
	// and tests that measure something else: an acknowledged commit may then
	// be lost by an OS crash (not by a process crash).
	NoSync bool
	// CacheBytes bounds the memory of the store's caches, whatever the
	// number of contexts (default DefaultCacheBytes): branch heads get 60 %,
	// materialized old states 15 %, decoded state-map nodes 15 % and
	// payloads 10 %. Sizes are estimates of the Go heap they hold. An
	// evicted head is rebuilt from the state map on its next use.
	CacheBytes int64
	// MappedBytes bounds the resident pages of the files the embedded
	// Badger database maps (0: badgerkv.DefaultMappedBytes, 64 MiB;
	// negative: no bound). They are page cache the kernel may drop, yet
	// count in the process's resident size; past the bound the driver
	// pages them out. Ignored when Driver is set.
	MappedBytes int64
	// ValueThreshold is the size in bytes from which the embedded Badger
	// database keeps a value in its value log rather than in its tree (0:
	// badgerkv.DefaultValueThreshold, 1 KiB, which most state-map nodes
	// are under; negative: every value below 1 MiB in the tree, where
	// compactions copy it again from level to level). Badger syncs both
	// its logs on every write whatever the threshold, and a write that
	// puts something in the value log makes that sync a real one. Ignored
	// when Driver is set.
	ValueThreshold int64
	// TableBytes is the size in bytes of the tables the embedded Badger
	// database writes below level 0 (0: badgerkv.DefaultTableBytes,
	// 512 KiB): smaller tables keep a commit's fsync from waiting long
	// behind a compaction's writes, larger ones keep fewer files open.
	// Ignored when Driver is set.
	TableBytes int64
	// memTable is the size of the embedded Badger database's memtables (0:
	// the driver's default). Tests that reopen a store many times use
	// less, since every open allocates and zeroes a memtable arena of
	// about 1.3 times this size.
	memTable int64
	// MaxBatch bounds how many commit requests one group commit takes
	// (default 256).
	MaxBatch int
	// Rulesets are the gate rulesets import re-derives fetch verdicts
	// with (the receipt names one); gate.BuiltinRulesets when nil. Add the
	// ones a server ran with (serve --gate-rules) to import its bundles.
	Rulesets *gate.Rulesets
	// ReserveBytes is the free space writes leave on the data directory's
	// file system (default DefaultReserveBytes; negative: no check). Below
	// it writes fail with ErrNoSpace and reads go on.
	ReserveBytes int64
}

// Store is the artifactd repository: contexts, branches, commits, ops,
// content-addressed objects, blobs and trie nodes, kept through one
// storage driver (package kv: Badger by default).
// Writes queue per context and are carried out by up to four committer
// goroutines (and at most four big groups beside them, doc.go "Group
// commit"): a context's requests are decided in order, a group is written
// with one sync, and only then are its requests acknowledged. Reads may
// run concurrently with writes. Methods are safe for concurrent use.
type Store struct {
	kv kv.Driver
	// shared is set when other processes may write through the driver
	// (kv.Shared): cached heads are then checked against the ref.
	shared bool
	// locker holds a group's contexts (their context records' keys) on a
	// shared driver while the group decides and commits, so that the
	// processes writing to one context take turns.
	locker kv.Locker
	log    *slog.Logger
	clock  func() time.Time
	noSync bool
	// diffWindow is the most entries a diff of two maps reads ahead at
	// once (diffWindows; tests make it small).
	diffWindow int
	// readPart is how many records readMany asks the driver for at once:
	// prefetchPart (a test makes it smaller, to read a small map in many
	// parts).
	readPart int
	// aheadPart is how many keys of a big request the committer reads
	// ahead before deciding it, and then reads in parts of as many while
	// it decides (mapSource.readAhead): aheadPart, fewer in tests.
	aheadPart int
	batch     int
	// writeReverseInMap makes the store write new state maps as format 3
	// did, each edge again in the map as an 'r' entry (reverseInMap); set
	// only by tests of stores written so.
	writeReverseInMap bool

	// queues holds the requests of each context with writes queued or
	// in flight; ready lists the contexts whose queued requests no
	// committer owns yet, in the order they came (commit.go). closeMu
	// guards them, closed, and committers' Add against submit and Close.
	queues     map[string]*ctxQueue
	ready      []string
	running    int // committers taking small groups (smallCommitters)
	bigRunning int // big groups being decided (bigCommitters)
	committers sync.WaitGroup
	closeMu    sync.RWMutex
	// background counts the leaf checkpoints being written after a head
	// was opened by a walk; Close waits for them.
	background sync.WaitGroup
	// ckptMu orders the writes of leaf checkpoints (writeCheckpoint): a
	// checkpoint's sweep of its context's bucket records must not run
	// between another's bucket records and its table.
	ckptMu    sync.Mutex
	closed    bool
	closeOnce sync.Once
	closeErr  error

	// headBudget bounds the estimated bytes of the cached heads, but for
	// one big head in use (evictHeadsLocked); tick orders their use for
	// eviction, cacheClock tells how long ago a head was used, and
	// warnedBig, guarded by mu, is when the store last warned that it
	// dropped a big head in use.
	headBudget int64
	tick       atomic.Uint64
	cacheClock func() time.Time
	warnedBig  time.Time

	dir      string
	reserve  atomic.Int64
	space    freeSpace // checkSpace's last answer
	rulesets *gate.Rulesets
	// corrupt is the first corruption a read reported (NoteCorruption).
	corrupt atomic.Pointer[error]

	nodes   *nodeCache
	objects *lru.Cache[hashing.Digest, []byte]
	states  *lru.Cache[string, *materialized]

	// txnBytes and txnCount bound what the committer writes in a single
	// Commit (half of the driver's kv.Limits); a larger group puts its
	// immutable records first.
	txnBytes, txnCount int64

	mu sync.Mutex // guards heads, headGen, moving and ctxs
	// heads holds the in-memory state of branch heads, keyed ctx NUL branch.
	heads map[string]*head
	// evicting holds the heads dropped from heads whose checkpoints are
	// still to be written (checkpointEvicted): a sweep keeps what they
	// were opened from. Guarded by mu.
	evicting map[*head]bool
	// opening counts, by context, the heads being opened (openHead) and
	// not cached yet: a checkpoint sweep deletes no table of such a
	// context, which the head may have been opened from. Guarded by mu.
	opening map[string]int
	// headGen counts the times the committer dropped heads; a reader that
	// loaded a head caches it only if no drop happened meanwhile.
	headGen uint64
	// moving counts, per head key, the unwritten ref moves of the current
	// commit group; readers do not cache heads of those branches.
	moving map[string]int
	// failed, once set, is the write error that stopped the committer.
	failed error
	// ctxs caches context records and sequence counters.
	ctxs map[string]*ctxState
}

// ContextInfo describes a context. Ruleset names the built-in
// definitions the context is judged by, as its root commit records it
// (graph.RulesetOf); a record without it is graph.RulesetV1.
type ContextInfo struct {
	ID         string `json:"id"`
	Quarantine string `json:"quarantine"`
	Created    string `json:"created"`
	Ruleset    string `json:"ruleset,omitempty"`
}

// ruleset returns the context's ruleset.
func (i ContextInfo) ruleset() (*graph.Ruleset, error) {
	rs, err := graph.LookupRuleset(i.Ruleset)
	if err != nil {
		return nil, fmt.Errorf("%w: context %q: %w", ErrCorrupt, i.ID, err)
	}
	return rs, nil
}

type ctxState struct {
	info    ContextInfo
	lastSeq uint64
}

// head is the in-memory state of one branch head. The committer goroutine
// mutates it under mu; readers hold mu.RLock.
type head struct {
	mu     sync.RWMutex // guards commit, state, trust, pins, layers, dropped
	ctx    string
	branch string
	commit *replay.Commit
	state  *graph.State
	trust  *graph.TrustIndex
	// pins counts the readers that hold state and trust as a snapshot
	// (Store.Read takes them under the read lock and lets go of the lock
	// while it reads). A commit group never changes a pinned state: the
	// head's new state is then a fork over it (headFork.advance), and
	// layers lists the pinned states below, oldest first, each with its
	// own pins, until their readers are gone and the layers collapse.
	pins   *atomic.Int32
	layers []pinnedLayer
	// dropped is set when a commit group that wrote to the head failed
	// or lost a swap: the head is no longer in Store.heads, and the store
	// may hold commits it does not.
	dropped bool
	// cost is the estimated heap the head holds (stateCost), used the
	// tick of its last use and usedAt its time (Store.cacheClock, Unix
	// nanoseconds), and inGroup is set while a commit group holds it:
	// such a head is never evicted.
	cost    atomic.Int64
	used    atomic.Uint64
	usedAt  atomic.Int64
	inGroup atomic.Bool
	// store opens the head over its newest commit again (head.rebase).
	store *Store
	// ckpt is the context hash of the leaf checkpoint the head was opened
	// from or last wrote (leaves.go; changed under Store.ckptMu once the
	// head is cached), zero when none, and changed about
	// how many of its entries changed since: the diff it was opened with,
	// then the ops of each commit installed.
	ckpt    hashing.Digest
	changed int
}

// pinnedLayer is a state a branch head's current state is a fork over,
// kept unchanged for the readers that pinned it.
type pinnedLayer struct {
	state *graph.State
	trust *graph.TrustIndex
	pins  *atomic.Int32
}

// newHead returns the head of a branch at commit c with state st and
// trust index trust (openHead).
func (s *Store) newHead(ctxID, branch string, c *replay.Commit, st *graph.State, trust *graph.TrustIndex, base leafBase) *head {
	h := &head{ctx: ctxID, branch: branch, commit: c, state: st, trust: trust, pins: new(atomic.Int32), store: s, ckpt: base.ckpt, changed: base.changed}
	h.cost.Store(headCost(st))
	return h
}

// touch marks h as just used.
func (s *Store) touch(h *head) {
	h.used.Store(s.tick.Add(1))
	h.usedAt.Store(s.cacheClock().UnixNano())
}

// bigHeadKeep is how long a big head (one that takes more than half the
// head budget) stays cached after its last use while other heads are
// used. A head is big when it holds most of its context hash's buckets —
// a bulk commit reads every one — and opening it again reads them again
// as its commits touch them (64 MB at a million artifacts), or walks its
// whole map, seconds, when it has no checkpoint yet; dropping it to make
// room for a small head made a big context written between small ones
// reopen on almost every commit (docs/BENCHMARKS.md, "A big context
// written between small ones").
const bigHeadKeep = 30 * time.Second

// evictHeadsLocked drops the least recently used heads, never one a commit
// group holds nor the most recently used one, until the cached heads fit
// in nine tenths of the budget. The most recently used big head (more
// than half the budget), if used within bigHeadKeep, is neither dropped
// nor counted: the others keep the whole budget beside it, so the heads
// hold at most the budget and that one head.
// The caller holds s.mu. A dropped head is a cache entry only: its state is
// on disk, and the next use loads it again.
func (s *Store) evictHeadsLocked() {
	total := s.headsCostLocked()
	if total <= s.headBudget {
		return
	}
	big := s.bigHeadLocked()
	if big != nil {
		total -= big.cost.Load()
		if total <= s.headBudget {
			return
		}
	}
	type cand struct {
		key  string
		h    *head
		used uint64
		cost int64
	}
	cands := make([]cand, 0, len(s.heads))
	for k, h := range s.heads {
		if !h.inGroup.Load() && h != big {
			cands = append(cands, cand{k, h, h.used.Load(), h.cost.Load()})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].used < cands[j].used })
	// The most recently used head stays even when it alone passes the
	// budget: dropping it would make every read of that context load it
	// again.
	if len(cands) > 0 && (big == nil || cands[len(cands)-1].used > big.used.Load()) {
		cands = cands[:len(cands)-1]
	}
	var evicted []*head
	for _, c := range cands {
		if total <= s.headBudget*9/10 {
			break
		}
		delete(s.heads, c.key)
		total -= c.cost
		evicted = append(evicted, c.h)
		s.warnBigDropped(c.h)
	}
	s.checkpointEvicted(evicted)
}

// bigWarnEvery is how often at most the store warns that it dropped a big
// head in use.
const bigWarnEvery = time.Minute

// warnBigDropped warns, at most once every bigWarnEvery, when the head
// cache drops h although it is big and was used within bigHeadKeep: two
// or more big contexts are in use at once, and each will be opened again
// — from a checkpoint and a diff, and its buckets read again as its
// commits touch them — on its next use. The caller holds s.mu.
func (s *Store) warnBigDropped(h *head) {
	now := s.cacheClock()
	if !s.bigInUse(h, now) || !s.warnedBig.IsZero() && now.Sub(s.warnedBig) < bigWarnEvery {
		return
	}
	s.warnedBig = now
	s.log.Warn("head cache too small for the big contexts in use: a head in use was dropped and will be opened again on its next use; raise the cache budget (serve --cache-bytes)",
		"context", h.ctx, "branch", h.branch, "head_bytes", h.cost.Load(), "head_budget_bytes", s.headBudget)
}

var (
	contextIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	branchPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,99}$`)
)

// ValidateContextID checks a context id: 1–128 chars of [A-Za-z0-9._-],
// and not "." or "..".
func ValidateContextID(id string) error {
	if !contextIDPattern.MatchString(id) || id == "." || id == ".." {
		return fmt.Errorf("%w: context id %q must be 1-128 characters of [A-Za-z0-9._-]", ErrInvalid, id)
	}
	return nil
}

// ValidateBranch checks a branch name, of a branch new or old.
func ValidateBranch(name string) error {
	if !branchPattern.MatchString(name) {
		return fmt.Errorf("%w: branch name %q must match %s", ErrInvalid, name, branchPattern)
	}
	return nil
}

// CommitIDRule is the rule ValidateNewBranch adds to ValidateBranch's.
const CommitIDRule = "not 8 to 64 hex digits, which read as a commit id"

// NotCommitIDRule names CommitIDRule where a refusal names its rule (422
// rule not_commit_id).
const NotCommitIDRule = "not_commit_id"

// ReadsAsCommitID reports whether a ref named name is read as a commit id
// too: 8 to 64 hex digits, of either case (hashing.HexPrefix).
func ReadsAsCommitID(name string) bool {
	_, err := hashing.HexPrefix(name)
	return err == nil
}

// ValidateNewBranch checks the name of a branch to create: a branch name
// (ValidateBranch) that does not read as a commit id (ReadsAsCommitID),
// so that a ref never names a branch and a commit at once. Branches that
// an older store made with such names keep them (Resolve).
func ValidateNewBranch(name string) error {
	if err := ValidateBranch(name); err != nil {
		return err
	}
	if ReadsAsCommitID(name) {
		return fmt.Errorf("%w: branch name %q must be %s; add a character that is not a hex digit", ErrInvalid, name, CommitIDRule)
	}
	return nil
}

// Open opens (or creates) the store in opts.Dir. It checks the key layout
// version and starts the committer.
func Open(ctx context.Context, opts Options) (*Store, error) {
	drv := opts.Driver
	if drv == nil {
		if opts.Dir == "" {
			return nil, fmt.Errorf("%w: data directory is required", ErrInvalid)
		}
		bd, err := badgerkv.Open(ctx, badgerkv.Options{Dir: opts.Dir, NoSync: opts.NoSync, MemTableSize: opts.memTable, MappedBytes: opts.MappedBytes, ValueThreshold: opts.ValueThreshold, TableBytes: opts.TableBytes, Logger: opts.Logger})
		if err != nil {
			// Badger reports the directory lock only in its message.
			if strings.Contains(err.Error(), "Cannot acquire directory lock") {
				return nil, fmt.Errorf("open %s: %w", opts.Dir, ErrLocked)
			}
			return nil, err
		}
		drv = bd
	} else {
		opts.Dir = ""
	}
	s := &Store{
		kv:         drv,
		shared:     kv.IsShared(drv),
		log:        opts.Logger,
		clock:      opts.Clock,
		noSync:     opts.NoSync,
		readPart:   prefetchPart,
		aheadPart:  aheadPart,
		diffWindow: diffWindow,
		batch:      opts.MaxBatch,
		nodes:      newNodeCache(cacheBytes(opts) * 15 / 100),
		objects:    lru.New[hashing.Digest](cacheBytes(opts)*10/100, func(b []byte) int64 { return int64(len(b)) + 64 }),
		states:     lru.New[string](cacheBytes(opts)*15/100, func(m *materialized) int64 { return stateCost(m.state) }),
		headBudget: cacheBytes(opts) * 60 / 100,
		dir:        opts.Dir,
		space:      freeSpace{statfs: freeBytes},
		heads:      make(map[string]*head),
		evicting:   make(map[*head]bool),
		opening:    make(map[string]int),
		moving:     make(map[string]int),
		ctxs:       make(map[string]*ctxState),
	}
	if s.shared {
		l, ok := drv.(kv.Locker)
		if !ok {
			return nil, fmt.Errorf("%w: driver %T is shared but has no holds (kv.Locker): writers in several processes would starve each other", ErrInvalid, drv)
		}
		s.locker = l
	}
	s.txnBytes, s.txnCount = kv.LimitsOf(drv)
	s.txnBytes, s.txnCount = s.txnBytes/2, s.txnCount/2
	s.reserve.Store(reserveBytes(opts))
	s.rulesets = opts.Rulesets
	if s.rulesets == nil {
		s.rulesets = gate.BuiltinRulesets()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.cacheClock = time.Now
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.batch <= 0 {
		s.batch = 256
	}
	if s.dir != "" {
		// The directory is the store's own, and Badger's lock on it, held
		// since badgerkv.Open, keeps every other process out: an upload
		// file there is one a crash left.
		removeLeftUploads(s.dir, s.log)
	}
	if err := s.checkFormat(ctx); err != nil {
		drv.Close()
		return nil, err
	}
	s.queues = make(map[string]*ctxQueue)
	return s, nil
}

// Shared reports whether other processes may write to the store's
// database too (kv.Sharer): records a process caches outside the chain —
// the type and relation registry — must then be read again before use.
func (s *Store) Shared() bool { return s.shared }

func reserveBytes(o Options) int64 {
	if o.ReserveBytes == 0 {
		return DefaultReserveBytes
	}
	return o.ReserveBytes
}

// DefaultCacheBytes is the default memory budget of a store's caches:
// enough for a 100k-artifact head and the working heads of a busy server
// (a finished agent run's head is dead weight the cache drops), and half
// the earlier 256 MiB, which was most of a server's heap after many agent
// runs (docs/BENCHMARKS.md, "Bounded memory over many runs").
const DefaultCacheBytes = 128 << 20

// DefaultMappedBytes is the default of Options.MappedBytes.
const DefaultMappedBytes = badgerkv.DefaultMappedBytes

// DefaultTableBytes is the default of Options.TableBytes.
const DefaultTableBytes = badgerkv.DefaultTableBytes

// MinTableBytes and MaxTableBytes bound the table sizes serve and bench
// take (--table-bytes).
const (
	MinTableBytes = 64 << 10
	MaxTableBytes = 64 << 20
)

// DefaultValueThreshold is the default of Options.ValueThreshold.
const DefaultValueThreshold = badgerkv.DefaultValueThreshold

// MaxValueThreshold is the largest value threshold serve and bench take
// (--value-threshold; -1 stands for it).
const MaxValueThreshold = badgerkv.MaxValueThreshold

// MinCacheBytes is the smallest cache budget serve and bench take
// (--cache-bytes).
const MinCacheBytes = 1 << 20

func cacheBytes(o Options) int64 {
	if o.CacheBytes > 0 {
		return o.CacheBytes
	}
	return DefaultCacheBytes
}

// stateCost estimates the heap a materialized state with its trust index
// holds: about 330 bytes an artifact or edge (maps, adjacency, leaves,
// index entry) and a fixed part for the hash buckets and empty maps —
// 1.1–1.5× what TestStateCostEstimate measures on chains, hubs, edgeless
// states and 101-artifact heads.
func stateCost(st *graph.State) int64 {
	return wholeCost(graph.Counts{Artifacts: st.NumArtifacts(), Tombstones: st.NumTombstones(), Edges: st.NumEdges()})
}

// commitStateCost is stateCost of commit c's state loaded whole, from the
// sizes its record keeps.
func commitStateCost(c *replay.Commit) int64 {
	n, _ := countsOf(c)
	return wholeCost(n)
}

// wholeCost is stateCost of a state of sizes n.
func wholeCost(n graph.Counts) int64 {
	return 20<<10 + 330*int64(n.Artifacts+n.Edges+n.Tombstones)
}

// headCost is the estimated heap of a head's state: stateCost for one
// loaded whole; for one over its state map, the context hash's leaves
// (about 40 bytes each in their buckets, with their marks) and the
// changes it holds.
func headCost(st *graph.State) int64 {
	if !st.IsLazy() {
		return stateCost(st)
	}
	return 20<<10 + int64(st.LeafBytes()) + 330*int64(st.OwnEntries())
}

func (s *Store) checkFormat(ctx context.Context) error {
	v, err := s.kv.Get(ctx, keyMetaFormat())
	if errors.Is(err, kv.ErrNotFound) {
		// Several processes may create a new store at once: one wins. A
		// new store has no blob to backfill memberships of: it is marked
		// as having them recorded (BackfillBlobMembers) from the start.
		err = s.kv.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: keyMetaFormat(), Absent: true, New: []byte(FormatVersion)}},
			Sets: []kv.Record{{Key: keyMetaBlobMembers(), Value: []byte("1")}}})
		if errors.Is(err, kv.ErrConflict) {
			return s.checkFormat(ctx)
		}
		return err
	}
	if err != nil {
		return err
	}
	if upgradedFormat(string(v)) {
		// Readable as it is; stamped so that older binaries refuse the
		// state maps this one will write.
		err := s.kv.Commit(ctx, kv.Batch{Swaps: []kv.Swap{{Key: keyMetaFormat(), Old: v, New: []byte(FormatVersion)}}})
		if errors.Is(err, kv.ErrConflict) {
			return s.checkFormat(ctx)
		}
		if err == nil {
			s.log.Info("store stamped with the current layout", "from_format", string(v), "format", FormatVersion)
		}
		return err
	}
	if string(v) != FormatVersion {
		return fmt.Errorf("%w: data directory has layout version %q, this binary reads %q", ErrInvalid, v, FormatVersion)
	}
	return nil
}

// Close stops the committer after the requests already queued and closes
// the database. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		// Every request queued before is carried out: a committer stops
		// only once its context's queue is empty.
		s.committers.Wait()
		s.mu.Lock()
		failed := s.failed
		s.mu.Unlock()
		if failed == nil {
			// The next process opens these heads from a few records.
			s.checkpointCached(context.Background())
		}
		s.background.Wait()
		s.closeErr = s.kv.Close()
	})
	return s.closeErr
}

// baseFor returns the trust base function of a state: roles are the
// definitions in force at the state (graph.State.RoleOf), and a
// fetch_verdict's payload is read from the object store when the state
// does not hold it.
func (s *Store) baseFor(st *graph.State) graph.BaseFunc {
	return st.Base(func(a *graph.Artifact) (string, string) {
		data := a.Data
		if data == nil {
			var err error
			data, err = s.object(a.ContentHash)
			if err != nil {
				return "", "payload unavailable: " + err.Error()
			}
		}
		return graph.VerdictFromData(data)
	})
}

// ---- contexts ----

// CreateContext creates a context with its main branch and an empty root
// commit.
func (s *Store) CreateContext(ctx context.Context, id, quarantine string) (ContextInfo, error) {
	return s.CreateContextAt(ctx, id, quarantine, time.Time{})
}

// CreateContextAt is CreateContext with the creation time (and so the
// root commit's time and id) given instead of read from the clock; the
// zero time means now.
func (s *Store) CreateContextAt(ctx context.Context, id, quarantine string, at time.Time) (ContextInfo, error) {
	return s.createContext(ctx, id, quarantine, at, graph.RootMessage(graph.RulesetV1))
}

// createContext creates a context whose root commit has the given time
// and message (which names its ruleset, graph.RulesetOf). Import uses it
// to reproduce a bundle's root commit.
func (s *Store) createContext(ctx context.Context, id, quarantine string, at time.Time, rootMessage string) (ContextInfo, error) {
	if err := ValidateContextID(id); err != nil {
		return ContextInfo{}, err
	}
	if _, err := graph.LookupRuleset(graph.RulesetOf(rootMessage)); err != nil {
		return ContextInfo{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch quarantine {
	case "":
		quarantine = ModeEnforce
	case ModeEnforce, ModeObserve:
	default:
		return ContextInfo{}, fmt.Errorf("%w: quarantine must be %q or %q, got %q", ErrInvalid, ModeEnforce, ModeObserve, quarantine)
	}
	res, err := s.submit(ctx, &writeReq{kind: reqCreateContext, ctxID: id, mode: quarantine, at: at, message: rootMessage})
	if err != nil {
		return ContextInfo{}, err
	}
	return res.info, nil
}

// GetContext returns a context's record.
func (s *Store) GetContext(ctx context.Context, id string) (ContextInfo, error) {
	cs, err := s.ctxState(id)
	if err != nil {
		return ContextInfo{}, err
	}
	return cs.info, nil
}

// ListContexts returns all contexts sorted by id.
func (s *Store) ListContexts(ctx context.Context) ([]ContextInfo, error) {
	var out []ContextInfo
	err := s.kv.Scan(ctx, []byte(pCtx), nil, 0, func(k, v []byte) error {
		var info ContextInfo
		if err := json.Unmarshal(v, &info); err != nil {
			return fmt.Errorf("%w: context record %q: %v", ErrCorrupt, k, err)
		}
		out = append(out, info)
		return nil
	})
	return out, err
}

func (s *Store) ctxState(id string) (*ctxState, error) {
	s.mu.Lock()
	cs := s.ctxs[id]
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if err := ValidateContextID(id); err != nil {
		return nil, fmt.Errorf("context %q: %w", id, ErrNotFound)
	}
	cs, err := s.loadCtxState(context.Background(), id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if existing := s.ctxs[id]; existing != nil {
		return existing, nil
	}
	s.ctxs[id] = cs
	return cs, nil
}

// loadCtxState reads a context's record and its last sequence number
// from the driver.
func (s *Store) loadCtxState(ctx context.Context, id string) (*ctxState, error) {
	cs := &ctxState{}
	v, err := s.kv.Get(ctx, keyCtx(id))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("context %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(v, &cs.info); err != nil {
		return nil, fmt.Errorf("%w: context record %q: %v", ErrCorrupt, id, err)
	}
	err = s.kv.ScanReverse(ctx, prefixSeq(id), nil, 1, func(k, _ []byte) error {
		if len(k) < 8 {
			return fmt.Errorf("%w: seq key %q", ErrCorrupt, k)
		}
		cs.lastSeq = beUint64(k[len(k)-8:])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cs, nil
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// ---- blobs and objects ----

// Object returns the canonical data of an artifact by content hash,
// checking it against the hash.
func (s *Store) Object(ctx context.Context, d hashing.Digest) ([]byte, error) { return s.object(d) }

func (s *Store) object(d hashing.Digest) ([]byte, error) {
	if b, ok := s.objects.Get(d); ok {
		return b, nil
	}
	return sameChecked(s, keyObj(d), func() error { return nil }, func(raw []byte) ([]byte, error) { return s.checkedObject(d, raw) })
}

// checkedObject checks the stored bytes raw (nil: missing) of object d
// against its content hash, and caches a small one.
func (s *Store) checkedObject(d hashing.Digest, raw []byte) ([]byte, error) {
	if raw == nil {
		return nil, fmt.Errorf("%w: object %s is missing", ErrCorrupt, d)
	}
	if hashing.ContentHash(raw) != d {
		return nil, fmt.Errorf("%w: object %s does not match its content hash", ErrCorrupt, d)
	}
	if len(raw) <= 4096 {
		s.objects.Put(d, raw)
	}
	return raw, nil
}

// ---- types ----

// PutTypeIf stores a type record (opaque JSON owned by the caller),
// durably and with a new registry stamp, if the type's stored record is
// still old (nil: the type has none). When another writer
// changed it first, it writes nothing and returns an error wrapping
// ErrStale: the caller reads the record again and decides anew. Writers
// in several processes that decide from what they read (a type's role
// cannot change) need it: an unconditional put would let the last one
// win.
func (s *Store) PutTypeIf(ctx context.Context, name string, old, record []byte) error {
	return s.putRegistryIf(ctx, "type", name, keyType(name), old, record)
}

// putRegistryIf writes record at key, a registry record (a type's or a
// relation's), with a new registry stamp, if key still holds old (nil:
// nothing); otherwise it writes nothing and returns an error wrapping
// ErrStale. kind and name only word the error. Below the free-space
// reserve it writes nothing and returns an error wrapping ErrNoSpace, as
// every write does.
func (s *Store) putRegistryIf(ctx context.Context, kind, name string, key, old, record []byte) error {
	if err := s.checkSpace(); err != nil {
		return fmt.Errorf("put %s %q: %w", kind, name, err)
	}
	sw := kv.Swap{Key: key, New: record, Absent: old == nil, Old: old}
	err := s.kv.Commit(ctx, kv.Batch{Sets: []kv.Record{registryStamp()}, Swaps: []kv.Swap{sw}})
	if errors.Is(err, kv.ErrConflict) {
		return fmt.Errorf("put %s %q: the stored record changed: %w", kind, name, ErrStale)
	}
	if err != nil {
		return fmt.Errorf("put %s %q: %w", kind, name, err)
	}
	return nil
}

// GetType returns a type record.
func (s *Store) GetType(ctx context.Context, name string) ([]byte, error) {
	return s.getCopy(ctx, keyType(name), func() error { return fmt.Errorf("type %q: %w", name, ErrNotFound) })
}

// registryStamp is a new value of the registry stamp, written with every
// type or relation record: another process that read an older stamp
// knows to read the registry again.
func registryStamp() kv.Record {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return kv.Record{Key: keyMetaRegistry(), Value: b[:]}
}

// RegistryStamp returns the stamp the last PutTypeIf or PutRelationIf wrote
// (nil before the first): a reader of the registry that kept an older one
// reads it again (several processes on one database).
func (s *Store) RegistryStamp(ctx context.Context) ([]byte, error) {
	v, err := s.kv.Get(ctx, keyMetaRegistry())
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// ListTypes returns every stored type record keyed by name.
func (s *Store) ListTypes(ctx context.Context) (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := s.kv.Scan(ctx, []byte(pType), nil, 0, func(k, v []byte) error {
		out[string(k[len(pType):])] = bytes.Clone(v)
		return nil
	})
	return out, err
}

// PutRelationIf stores a relation record (opaque JSON owned by the
// caller) as PutTypeIf stores a type's, if the relation's stored record is
// still old (nil: the relation has none); when another writer changed it
// first, it writes nothing and returns an error wrapping ErrStale (a
// relation's depends cannot change, so writers decide from what they
// read).
func (s *Store) PutRelationIf(ctx context.Context, name string, old, record []byte) error {
	return s.putRegistryIf(ctx, "relation", name, keyRelDef(name), old, record)
}

// GetRelation returns a relation record, or an error wrapping ErrNotFound.
func (s *Store) GetRelation(ctx context.Context, name string) ([]byte, error) {
	return s.getCopy(ctx, keyRelDef(name), func() error { return fmt.Errorf("relation %q: %w", name, ErrNotFound) })
}

// ListRelations returns every stored relation record keyed by name.
func (s *Store) ListRelations(ctx context.Context) (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := s.kv.Scan(ctx, []byte(pRelDef), nil, 0, func(k, v []byte) error {
		out[string(k[len(pRelDef):])] = bytes.Clone(v)
		return nil
	})
	return out, err
}

// RegistryRecord is a type or relation record that fsck's check of the
// registry reads (CheckedRegistry): its raw bytes, or why they could not
// be read.
type RegistryRecord struct {
	Raw []byte
	// Unreadable is why the driver could not read the record ("" when
	// Raw holds it).
	Unreadable string
}

// CheckedRegistry reads every type and relation record as fsck does the
// rest of the store: a record the driver cannot read is returned with
// why, and the reading goes on after it. It fails only when the records
// cannot be scanned (I/O, a cancelled ctx).
func (s *Store) CheckedRegistry(ctx context.Context) (types, rels map[string]RegistryRecord, err error) {
	read := func(prefix string) (map[string]RegistryRecord, error) {
		out := make(map[string]RegistryRecord)
		err := scanPast(ctx, s.kv, []byte(prefix), func(k, v []byte) error {
			out[string(k[len(prefix):])] = RegistryRecord{Raw: bytes.Clone(v)}
			return nil
		}, func(k []byte, why string) {
			out[string(k[len(prefix):])] = RegistryRecord{Unreadable: why}
		})
		return out, err
	}
	if types, err = read(pType); err != nil {
		return nil, nil, fmt.Errorf("read the type records: %w", err)
	}
	if rels, err = read(pRelDef); err != nil {
		return nil, nil, fmt.Errorf("read the relation records: %w", err)
	}
	return types, rels, nil
}

// ---- node source ----

// node reads a trie node through the cache, checking its hash.
func (s *Store) node(id hashing.Digest) (*trieNode, error) {
	if n, ok := s.nodes.get(id); ok {
		return n, nil
	}
	n, err := sameChecked(s, keyNode(id), func() error { return missingNode(id) }, func(raw []byte) (*trieNode, error) { return checkedNode(id, raw) })
	if err != nil {
		return nil, err
	}
	s.nodes.put(id, n)
	return n, nil
}

// missingNode is the error of a node referenced but not stored.
func missingNode(id hashing.Digest) error {
	return fmt.Errorf("%w: %w %s", ErrCorrupt, errNodeMissing, id)
}

// checkedNode decodes the stored encoding of node id after checking that
// it hashes to id.
func checkedNode(id hashing.Digest, raw []byte) (*trieNode, error) {
	if hashing.Sum(raw) != id {
		return nil, fmt.Errorf("%w: trie node %s does not match its hash", ErrCorrupt, id)
	}
	n, err := decodeNode(raw)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", id, err)
	}
	return n, nil
}

// CachedBytes estimates the Go heap the store's caches hold now: the
// cached heads (stateCost) and the node, payload and old-state caches. It
// stays within Options.CacheBytes but for one big head (more than half
// the head budget), kept beside the others while it is in use
// (evictHeadsLocked).
func (s *Store) CachedBytes() int64 {
	s.mu.Lock()
	n := s.headsCostLocked()
	s.mu.Unlock()
	return n + s.nodes.size() + s.objects.Size() + s.states.Size()
}

// bigHeadLocked returns the most recently used cached head that takes
// more than half the head budget, if it was used within bigHeadKeep; else
// nil. The caller holds s.mu.
func (s *Store) bigHeadLocked() *head {
	var big *head
	for _, h := range s.heads {
		if s.isBig(h) && (big == nil || h.used.Load() > big.used.Load()) {
			big = h
		}
	}
	if big == nil || !s.bigInUse(big, s.cacheClock()) {
		return nil
	}
	return big
}

// isBig reports whether h takes more than half the head budget.
func (s *Store) isBig(h *head) bool { return h.cost.Load() > s.headBudget/2 }

// bigInUse reports whether h is big and was used within bigHeadKeep
// before now.
func (s *Store) bigInUse(h *head, now time.Time) bool {
	return s.isBig(h) && now.Sub(time.Unix(0, h.usedAt.Load())) <= bigHeadKeep
}

// headsCostLocked is the estimated heap of the cached heads. The caller
// holds s.mu.
func (s *Store) headsCostLocked() int64 {
	var n int64
	for _, h := range s.heads {
		n += h.cost.Load()
	}
	return n
}

// getCopy returns a copy of the value stored under key, or missing() when
// there is none.
func (s *Store) getCopy(ctx context.Context, key []byte, missing func() error) ([]byte, error) {
	out, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, missing()
	}
	return out, err
}

// getSame is getCopy for a key that names its value (a content-addressed
// record): read with kv.GetSame, so that it does not wait behind writes
// in flight. The driver may read it in a view taken a moment earlier, so
// a caller whose check of the bytes fails reads them again with getCopy
// before it reports corruption (sameChecked): a record damaged and then
// put back right is not reported, nor one put back and then found damaged
// in the view.
func (s *Store) getSame(key []byte, missing func() error) ([]byte, error) {
	vals, err := kv.GetSame(context.Background(), s.kv, [][]byte{key})
	if err != nil {
		return nil, err
	}
	if vals[0] == nil {
		return nil, missing()
	}
	return vals[0], nil
}

// sameChecked reads key with getSame and returns what check makes of its
// bytes (nil: missing, after missing returned nil); when check fails, it
// reads the key afresh with getCopy and checks that instead, so that a
// record is called corrupt only on what the store holds now.
func sameChecked[T any](s *Store, key []byte, missing func() error, check func([]byte) (T, error)) (T, error) {
	raw, err := s.getSame(key, missing)
	if err != nil {
		var zero T
		return zero, err
	}
	if v, err := check(raw); err == nil {
		return v, nil
	}
	if raw, err = s.getCopy(context.Background(), key, missing); err != nil {
		var zero T
		return zero, err
	}
	return check(raw)
}
