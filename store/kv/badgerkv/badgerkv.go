package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/artifactd/artifactd/internal/cores"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/internal/guard"
)

// Options configure Open.
type Options struct {
	// Dir is the data directory (created if missing).
	Dir string
	// NoSync opens Badger without SyncWrites, so no write is synced:
	// commits are then not durable across a machine crash (a killed
	// process loses nothing). Only for benchmarks and tests.
	NoSync bool
	// MemTableSize is Badger's memtable size in bytes (0:
	// DefaultMemTableSize). It also
	// sets the transaction limits: about 15 % of it per Commit.
	MemTableSize int64
	// BlockCacheBytes is the size of Badger's cache of decoded table
	// blocks (0: DefaultBlockCacheBytes; negative: none). Badger's own
	// default, 256 MiB, was most of a long-running server's resident
	// memory; the store keeps its own caches of decoded records above it.
	BlockCacheBytes int64
	// Compress writes new tables with Snappy-compressed blocks (ignored
	// without a block cache, which Badger then requires). Off by default:
	// the large values live in the value log (see DefaultValueThreshold),
	// the tree's keys are mostly digests, and a table builder keeps a
	// compressed copy of every block besides the block itself — at the
	// peak of 3,000 agent runs, 190 MB of buffers that Badger's allocator
	// pool keeps while writes go on. Tables written compressed stay
	// readable either way: each table records how it was written.
	Compress bool
	// MappedBytes bounds the resident pages of the files Badger maps
	// (tables and logs; 0: DefaultMappedBytes; negative: no bound). Past
	// it the driver asks the kernel to page them out (Linux only; see
	// mapped.go): they are page cache, which a process's resident size
	// counts all the same.
	MappedBytes int64
	// ValueThreshold is the size in bytes from which a value is kept in
	// Badger's value log rather than in its tree (0:
	// DefaultValueThreshold; negative: every value below 1 MiB in the
	// tree, as Badger does by default). See DefaultValueThreshold.
	ValueThreshold int64
	// TableBytes is the size in bytes of the tables Badger writes below
	// level 0, at every level (0: DefaultTableBytes). See
	// DefaultTableBytes.
	TableBytes int64
	// Logger receives the driver's rare notices (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultBlockCacheBytes is the default of Options.BlockCacheBytes.
const DefaultBlockCacheBytes = 32 << 20

// DefaultMemTableSize is the default of Options.MemTableSize: half of
// Badger's own. Each memtable is an arena of about 1.3 times it on the Go
// heap, and a table built from one buffers about twice it; at 64 MiB the
// two took more than half of a server's live heap over many agent runs.
const DefaultMemTableSize = 32 << 20

// DefaultValueThreshold is the default of Options.ValueThreshold. The
// store's large values — op chunks, leaf checkpoints, larger payloads,
// blob chunks — are immutable and content-addressed. Kept in the tree, as
// Badger does by default, every compaction copies them again from level
// to level, and the buffers of the tables it builds grow with them. In
// the value log they are written once and the tree holds their keys and
// pointers; a read costs one more lookup in the log's mapping. Small
// records (refs, commit and context records, seq entries, reverse-index
// records) stay in the tree, and so do most state-map nodes (a leaf holds
// at most 32 entries; with short ids every node is under 1 KiB). Badger
// syncs both logs on every write; when a commit puts nothing in the value
// log, that log's sync has nothing to write (it still takes about as long
// as the disk's synced write alone: docs/BENCHMARKS.md, "Where a
// one-artifact commit's millisecond goes"), and a threshold low enough to
// move the nodes (256) would give it data to write in every small commit.
const DefaultValueThreshold = 1 << 10

// DefaultTableBytes is the default of Options.TableBytes: a quarter of
// Badger's base table size, at every level (Badger doubles it at each
// level below its base). A compaction writes each table it builds
// through a mapping and syncs it whole, and a commit's fsync waits behind
// that write on the same disk: with the tables of 2 MiB and more that
// Badger picks, a one-artifact commit into a context of a million
// artifacts waited 13–15 ms at its 90th percentile while compactions ran,
// with tables of 512 KiB 3.5–4.2 ms (docs/BENCHMARKS.md). The store
// holds more files for it — about two per MiB of tree, each open and
// mapped while the store is — which an operator with a low limit on open
// files can trade back with a larger size.
const DefaultTableBytes = 512 << 10

// valueLogGCEvery is how often the driver reclaims the value-log space of
// deleted values (pruned blobs); Badger never does so by itself.
const valueLogGCEvery = 10 * time.Minute

// valueLogDiscard is the share of a value-log file that must be garbage
// before the driver rewrites it.
const valueLogDiscard = 0.5

// numCompactors is how many compactions Badger runs at once (its default
// is 4): each buffers the tables it builds, and more than the machine's
// cores only adds their buffers. Badger needs at least 2.
func numCompactors() int { return min(max(cores.Count(), 2), 4) }

// numMemtables is how many memtables Badger keeps (its default is 5):
// with two, one takes writes while the other is flushed, and a server's
// memory holds at most two of Options.MemTableSize.
const numMemtables = 2

// Driver is the Badger driver. Create it with Open.
type Driver struct {
	db   *badger.DB
	trim *trimmer
	// packs holds the values of bulk PutSame calls (pack.go).
	packs *packs
	log   *slog.Logger
	// blog is Badger's logger; it holds a failed value-log sync.
	blog *badgerLog
	// stop ends the value-log collector bg runs (closed once, by Close).
	stop     chan struct{}
	stopOnce sync.Once
	bg       sync.WaitGroup
	g        guard.Guard
	// commitMu serialises the check-and-write step of Commit.
	commitMu sync.Mutex
	// snaps is the read transaction GetSame shares (snapshot.go).
	snaps *snapshots
	// committing counts the non-empty Commit calls writing, and
	// lastCommit is when the last one began (Unix nanoseconds): while
	// commits are made, a bulk put gives way (putChunkRecords).
	committing, lastCommit atomic.Int64
	// chunkRecords and chunkBytes bound a chunk of a bulk put that gives
	// way, and giveWay is how recent a commit makes it do so (tests set
	// them otherwise).
	chunkRecords, chunkBytes int
	giveWay                  time.Duration
}

var (
	_ kv.Driver     = (*Driver)(nil)
	_ kv.SamePutter = (*Driver)(nil)
	_ kv.SameGetter = (*Driver)(nil)
)

// checkManifest refuses a directory that holds Badger's tables or value
// logs but no MANIFEST: Badger would start an empty database there and
// write its first table over the old one, losing what the tables hold.
func checkManifest(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, pat := range []string{"*.sst", "*.vlog"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return fmt.Errorf("%w: badgerkv: %s holds %s but no MANIFEST: the store is damaged (restore the MANIFEST or the directory from a backup); opening it would start an empty store over its tables",
				kv.ErrCorrupt, dir, filepath.Base(m[0]))
		}
	}
	return nil
}

// Open opens (or creates) a Badger database in opts.Dir.
func Open(ctx context.Context, opts Options) (*Driver, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: badgerkv: data directory is required", kv.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mt := opts.MemTableSize
	if mt <= 0 {
		mt = DefaultMemTableSize
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := checkManifest(opts.Dir); err != nil {
		return nil, err
	}
	if err := RemoveEmptyLogs(opts.Dir, log); err != nil {
		return nil, err
	}
	blog := newBadgerLog(log)
	bo := badger.DefaultOptions(opts.Dir).
		WithLogger(blog).
		WithSyncWrites(!opts.NoSync).
		WithNumVersionsToKeep(1).
		WithMetricsEnabled(false).
		WithMemTableSize(mt).
		WithNumMemtables(numMemtables).
		WithNumCompactors(numCompactors()).
		WithBlockCacheSize(blockCache(opts.BlockCacheBytes)).
		WithDetectConflicts(false).
		WithValueThreshold(valueThreshold(opts.ValueThreshold))
	bo.BaseTableSize, bo.TableSizeMultiplier = tableBytes(opts.TableBytes), 1
	if !opts.Compress || bo.BlockCacheSize == 0 {
		bo = bo.WithCompression(options.None)
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("badgerkv: open %s: %w", opts.Dir, err)
	}
	pk, err := openPacks(opts.Dir, opts.NoSync)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	d := &Driver{db: db, packs: pk, trim: startTrimmer(opts.Dir, opts.MappedBytes, log), log: log, blog: blog, stop: make(chan struct{}), snaps: newSnapshots(db),
		chunkRecords: putChunkRecords, chunkBytes: putChunkBytes, giveWay: giveWayWindow}
	d.bg.Go(func() { d.snaps.run(d.stop) })
	if !opts.NoSync {
		// Without synced writes a collection's rewrite is not durable
		// before the old file goes, so a machine crash could lose old
		// values, not only recent ones: NoSync stores collect only when
		// asked to.
		d.bg.Add(1)
		go d.collectValueLog()
	}
	return d, nil
}

// tableBytes is Options.TableBytes with its default.
func tableBytes(n int64) int64 {
	if n <= 0 {
		return DefaultTableBytes
	}
	return n
}

// MaxValueThreshold is the largest Options.ValueThreshold, Badger's own
// bound: a negative threshold stands for it (every value below 1 MiB in
// the tree).
const MaxValueThreshold = 1 << 20

func valueThreshold(n int64) int64 {
	switch {
	case n == 0:
		return DefaultValueThreshold
	case n < 0:
		return MaxValueThreshold
	}
	return min(n, MaxValueThreshold)
}

// collectValueLog rewrites, every valueLogGCEvery until Close, the value
// log files that are mostly deleted values, one after another while
// Badger finds one.
func (d *Driver) collectValueLog() {
	defer d.bg.Done()
	tick := time.NewTicker(valueLogGCEvery)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		if err := d.CollectValueLog(); err != nil {
			d.log.Warn("badgerkv: value log collection failed", "err", err)
		}
	}
}

// CollectValueLog rewrites the value-log files of which at least half is
// deleted values, until none is left or Close is called. The driver runs
// it every ten minutes; a caller that just deleted much (pruned blobs)
// may run it at once. After a failed value-log sync it does nothing and
// returns that failure: Badger deletes a rewritten file even when the
// rewrite's sync failed.
func (d *Driver) CollectValueLog() error {
	for {
		if !d.g.Enter() {
			return nil
		}
		if err := d.checkSync(); err != nil {
			d.g.Leave()
			return err
		}
		err := d.db.RunValueLogGC(valueLogDiscard)
		d.g.Leave()
		switch {
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return nil
		case err != nil:
			return fmt.Errorf("badgerkv: value log collection: %w", err)
		}
		select {
		case <-d.stop:
			return nil
		default:
		}
	}
}

func blockCache(n int64) int64 {
	switch {
	case n == 0:
		return DefaultBlockCacheBytes
	case n < 0:
		return 0
	}
	return n
}

// Limits implements kv.Limiter: Badger's transaction limits.
func (d *Driver) Limits() (bytes, count int64) {
	return d.db.MaxBatchSize(), d.db.MaxBatchCount()
}

// Flatten compacts every level of the tree into the last one (benchmarks
// use it to start from settled tables).
func (d *Driver) Flatten(workers int) error {
	if !d.g.Enter() {
		return kv.ErrClosed
	}
	defer d.g.Leave()
	return d.db.Flatten(workers)
}

// RemoveEmptyLogs deletes the empty write-ahead (.mem) and value log
// (.vlog) files a crash can leave between creating such a file and sizing
// it. Badger creates both at full size, so an empty one holds nothing;
// Badger v4 refuses to open a directory that has one (upstream issue
// dgraph-io/badger#2207). Without the file the directory is what it would
// be had the crash come a moment earlier.
func RemoveEmptyLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("badgerkv: read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !(strings.HasSuffix(e.Name(), ".mem") || strings.HasSuffix(e.Name(), ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() != 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("badgerkv: remove empty log %s: %w", p, err)
		}
		log.Warn("badgerkv: removed an empty log file left by a crash", "file", p)
	}
	return nil
}

func (d *Driver) enter(ctx context.Context) error {
	if !d.g.Enter() {
		return kv.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		d.g.Leave()
		return err
	}
	return nil
}

// sortedLookups is the fewest keys eachFound looks up in their order
// rather than as given.
const sortedLookups = 16

// ctxEvery is how many records a long loop handles between checks of its
// context.
const ctxEvery = 1024

// PutImmutable implements kv.Driver: it looks each key up in a read
// transaction (one a chunk, see put) and writes the missing ones.
func (d *Driver) PutImmutable(ctx context.Context, recs []kv.Record) error {
	return d.put(ctx, "put immutable", recs, true)
}

// PutSame implements kv.SamePutter: the records go to Badger (one
// WriteBatch a chunk, see put) without a read of each key first, the
// values of a bulk put into a pack (pack.go).
func (d *Driver) PutSame(ctx context.Context, recs []kv.Record) error {
	return d.put(ctx, "put same", recs, false)
}

// Badger writes one batch at a time, and a transaction begun while a
// batch is written waits for it: a commit that arrives during a bulk put
// written as one batch waits for all of it — up to about 30 ms for the
// 12,000 records of a 10,000-artifact commit here. So while commits are
// being made — a non-empty Commit in progress or begun within
// giveWayWindow, whatever its context (the driver does not know whose
// put is whose) — a bulk put gives way: it is written in chunks of at
// most putChunkRecords records and putChunkBytes bytes of keys and values
// (a packed value counts as its pointer), each written and synced before
// the next, and a commit arriving meanwhile waits for one chunk. Each
// chunk costs a sync of its own — a 10,000-artifact bulk commit is 12 %
// slower when every put is chunked, about 10 % for the one that gives way
// in the hub scenario — so a put with no commit about goes as one batch;
// the choice is made again before each chunk, and a commit that arrives
// during a batch waits for all of it (docs/BENCHMARKS.md, "A bulk put
// that gives way").
const (
	putChunkRecords = 1024
	putChunkBytes   = 1 << 20
	giveWayWindow   = 10 * time.Millisecond
)

// commitsAbout reports whether a bulk put should give way (see
// putChunkRecords): a commit is in progress, or one began within window
// before now.
func commitsAbout(inProgress int64, lastBegun, now time.Time, window time.Duration) bool {
	return inProgress > 0 || now.Sub(lastBegun) < window
}

// put writes recs — in chunks while commits are being made, otherwise as
// one batch (putChunkRecords) — each through a WriteBatch; with keep, a
// record whose key is stored already is left out (its stored value
// stays; of two records of one key in different chunks, the first). A
// put that fails may have stored the chunks before the one that failed:
// its records are content-addressed or immutable, so they are records
// nothing refers to yet. what names the call in errors.
func (d *Driver) put(ctx context.Context, what string, recs []kv.Record, keep bool) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := d.checkSync(); err != nil {
		return err
	}
	if err := kv.ValidateRecords(recs); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	var ptrs []packPtr
	if !keep {
		var err error
		if ptrs, err = d.packBulk(recs); err != nil {
			return fmt.Errorf("badgerkv: %s: %w", what, err)
		}
	}
	written := 0
	for lo := 0; lo < len(recs); {
		if lo > 0 {
			if err := d.checkSync(); err != nil { // a chunk's sync failed: stop there
				return err
			}
		}
		hi := len(recs)
		if commitsAbout(d.committing.Load(), time.Unix(0, d.lastCommit.Load()), time.Now(), d.giveWay) {
			hi = chunkEnd(recs, ptrs, lo, d.chunkRecords, d.chunkBytes)
		}
		var part []packPtr
		if ptrs != nil {
			part = ptrs[lo:hi]
		}
		n, err := d.putChunk(ctx, recs[lo:hi], part, keep)
		if err != nil {
			return fmt.Errorf("badgerkv: %s: %w", what, err)
		}
		written += n
		lo = hi
	}
	if written == 0 {
		return nil
	}
	return d.checkSync()
}

// chunkEnd returns the end of the chunk of recs that starts at lo: at
// most maxRecs records and, past its first, maxBytes bytes of keys and
// values as written (ptrs, when not nil, the pointers of packed values).
func chunkEnd(recs []kv.Record, ptrs []packPtr, lo, maxRecs, maxBytes int) int {
	maxRecs = max(1, maxRecs)
	size := 0
	for i := lo; i < len(recs) && i-lo < maxRecs; i++ {
		n := len(recs[i].Key) + len(recs[i].Value)
		if packedAt(ptrs, i) {
			n = len(recs[i].Key) + packPtrSize
		}
		if size += n; size > maxBytes && i > lo {
			return i
		}
	}
	return min(len(recs), lo+maxRecs)
}

// packedAt reports whether record i's value is in a pack (ptrs: a put's
// pack pointers, nil when none is packed).
func packedAt(ptrs []packPtr, i int) bool { return ptrs != nil && ptrs[i].n > 0 }

// putChunk writes recs (ptrs: their pack pointers, or nil) through one
// WriteBatch, which splits them into transactions as large as Badger
// allows, and returns how many it wrote (with keep, those whose keys were
// not stored yet).
func (d *Driver) putChunk(ctx context.Context, recs []kv.Record, ptrs []packPtr, keep bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	wb := d.db.NewWriteBatch()
	defer wb.Cancel() // after a failed Flush, waits for the transactions already sent; a no-op after Flush
	n := 0
	// add sets the records in wb; txn, when not nil, is the read
	// transaction that tells which keys are stored.
	add := func(txn *badger.Txn) error {
		for i, r := range recs {
			if i%ctxEvery == ctxEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if txn != nil {
				_, err := txn.Get(r.Key)
				if err == nil {
					continue
				}
				if !errors.Is(err, badger.ErrKeyNotFound) {
					return err
				}
			}
			var err error
			if packedAt(ptrs, i) {
				err = wb.SetEntry(badger.NewEntry(r.Key, ptrs[i].encode()).WithMeta(metaPacked))
			} else {
				err = wb.Set(r.Key, r.Value)
			}
			if err != nil {
				return err
			}
			n++
		}
		return nil
	}
	var err error
	if keep {
		err = d.db.View(add)
	} else {
		err = add(nil)
	}
	if err == nil && n > 0 {
		err = wb.Flush()
	}
	return n, err
}

// packBulk writes the values of recs that belong in a pack — those of
// packMinValue bytes or more, when they add up to packMinBytes — and
// returns their pointers by index (a zero pointer for a value left in the
// tree), or nil when recs are not a bulk put.
func (d *Driver) packBulk(recs []kv.Record) ([]packPtr, error) {
	var idx []int
	var vals [][]byte
	total := 0
	for i, r := range recs {
		if packable(r.Value) {
			idx = append(idx, i)
			vals = append(vals, r.Value)
			total += len(r.Value)
		}
	}
	if total < packMinBytes {
		return nil, nil
	}
	written, err := d.packs.write(vals)
	if err != nil {
		return nil, err
	}
	ptrs := make([]packPtr, len(recs))
	for j, i := range idx {
		ptrs[i] = written[j]
	}
	return ptrs, nil
}

// resolve returns the record's value for item, whose value in the tree
// is v: v itself, or for a packed record the value its pointer names,
// read from the pack. A pointer that leads nowhere is a
// *kv.UnreadableError.
func (d *Driver) resolve(item *badger.Item, v []byte) ([]byte, error) {
	ptr, packed, err := itemPack(item, v)
	if !packed || err != nil {
		return v, err
	}
	out, err := d.packs.read(ptr)
	return out, unreadable(item.KeyCopy(nil), err)
}

// itemPack reports whether item, whose value in the tree is v, is packed,
// and where: a *kv.UnreadableError when v is not a pointer.
func itemPack(item *badger.Item, v []byte) (packPtr, bool, error) {
	if item.UserMeta()&metaPacked == 0 {
		return packPtr{}, false, nil
	}
	ptr, ok := decodePackPtr(v)
	if !ok {
		return packPtr{}, true, &kv.UnreadableError{Key: item.KeyCopy(nil), Why: fmt.Sprintf("malformed pack pointer (%d bytes)", len(v))}
	}
	return ptr, true, nil
}

// unreadable returns err, the failed read of key's packed value, as
// the driver reports it: errPackRecord as a *kv.UnreadableError naming
// key, any other error as it is.
func unreadable(key []byte, err error) error {
	if errors.Is(err, errPackRecord) {
		return &kv.UnreadableError{Key: key, Why: err.Error()}
	}
	return err
}

// Get implements kv.Driver.
func (d *Driver) Get(ctx context.Context, key []byte) ([]byte, error) {
	vals, err := d.GetMany(ctx, [][]byte{key})
	if err != nil {
		return nil, err
	}
	if vals[0] == nil {
		return nil, kv.ErrNotFound
	}
	return vals[0], nil
}

// GetMany implements kv.Driver. A value the value log cannot give back
// is read once more in a new transaction: a point read does not hold the
// value-log files open, so value-log collection may have moved the value
// and deleted its file between finding the key and reading the value. A
// value still lost then is a *kv.UnreadableError (corruption).
func (d *Driver) GetMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	return d.getManyAgain(ctx, keys)
}

// getManyAgain is GetMany within the driver's guard: a read that meets
// an unreadable value is done once more in a new transaction.
func (d *Driver) getManyAgain(ctx context.Context, keys [][]byte) ([][]byte, error) {
	out, err := d.getMany(ctx, keys)
	var lost *kv.UnreadableError
	if errors.As(err, &lost) {
		out, err = d.getMany(ctx, keys)
	}
	if err != nil {
		return nil, fmt.Errorf("badgerkv: get: %w", err)
	}
	return out, nil
}

// getMany reads keys in a new read transaction.
func (d *Driver) getMany(ctx context.Context, keys [][]byte) ([][]byte, error) {
	var out [][]byte
	err := d.db.View(func(txn *badger.Txn) error {
		var err error
		out, err = d.getIn(ctx, txn, keys)
		return err
	})
	return out, err
}

// getIn reads keys in txn: their values in order, nil for a missing key.
func (d *Driver) getIn(ctx context.Context, txn *badger.Txn, keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	var packed []packedRead
	err := eachFound(ctx, txn, keys, func(i int, item *badger.Item) error {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if v, err = checkedValue(item, v); err != nil {
			return err
		}
		ptr, isPacked, err := itemPack(item, v)
		switch {
		case err != nil:
			return err
		case !isPacked:
			out[i] = v
		default:
			packed = append(packed, packedRead{i: i, ptr: ptr})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The packed values last, in the order of the packs: neighbours in
	// a pack are read together (packs.readMany).
	err = d.packs.readMany(packed, func(i int, v []byte, err error) error {
		out[i] = v
		return unreadable(slices.Clone(keys[i]), err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Has implements kv.Haser: the keys are looked up in one read
// transaction, and no value is read — from the value log or a pack.
func (d *Driver) Has(ctx context.Context, keys [][]byte) ([]bool, error) {
	if err := d.enter(ctx); err != nil {
		return nil, err
	}
	defer d.g.Leave()
	out := make([]bool, len(keys))
	err := d.db.View(func(txn *badger.Txn) error {
		return eachFound(ctx, txn, keys, func(i int, _ *badger.Item) error {
			out[i] = true
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("badgerkv: has: %w", err)
	}
	return out, nil
}

// eachFound looks keys up in txn and calls found with the index and item
// of each one stored — in the order of the keys when there are
// sortedLookups or more — checking ctx every ctxEvery keys; an empty key
// is not stored.
func eachFound(ctx context.Context, txn *badger.Txn, keys [][]byte, found func(i int, item *badger.Item) error) error {
	// In the order of the keys: a batch of many (a walk's level of a
	// state map) then meets each table block once, not at random.
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	if len(keys) >= sortedLookups {
		slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	}
	for n, i := range order {
		k := keys[i]
		if n%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, badger.ErrEmptyKey) {
			continue
		}
		if err != nil {
			return err
		}
		if err := found(i, item); err != nil {
			return err
		}
	}
	return nil
}

// checkedValue returns v, item's value as Badger gave it, or a
// *kv.UnreadableError when Badger gave none for a value that has a size:
// Badger (v4.9.6, iterator.go yieldItemValue) logs a failed value-log
// read and returns no value and no error.
func checkedValue(item *badger.Item, v []byte) ([]byte, error) {
	if len(v) == 0 && item.ValueSize() > 0 {
		return nil, &kv.UnreadableError{Key: item.KeyCopy(nil), Why: "Badger cannot read it from its value log"}
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// errStop carries fn's error out of the read transaction unwrapped.
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }

// Scan implements kv.Driver.
func (d *Driver) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	return d.iterate(ctx, "scan", limit, badger.IteratorOptions{Prefix: prefix},
		func(it *badger.Iterator) { it.Seek(kv.ScanStart(prefix, start)) },
		func([]byte) (skip, end bool) { return false, false }, true, fn)
}

// ScanKeys implements kv.KeyScanner: an iterator that fetches no value,
// so neither the value log nor a pack is read.
func (d *Driver) ScanKeys(ctx context.Context, prefix, start []byte, limit int, fn func(k []byte) error) error {
	return d.iterate(ctx, "scan keys", limit, badger.IteratorOptions{Prefix: prefix},
		func(it *badger.Iterator) { it.Seek(kv.ScanStart(prefix, start)) },
		func([]byte) (skip, end bool) { return false, false }, false, func(k, _ []byte) error { return fn(k) })
}

// ScanReverse implements kv.Driver. It iterates without Badger's prefix
// option, which would end the scan at a seek landing just past the
// prefix, and checks the prefix itself.
func (d *Driver) ScanReverse(ctx context.Context, prefix, end []byte, limit int, fn func(k, v []byte) error) error {
	upper := kv.ScanEnd(prefix, end)
	seek := func(it *badger.Iterator) {
		if upper == nil {
			it.Rewind()
		} else {
			it.Seek(upper) // the largest key <= upper
		}
	}
	within := func(key []byte) (skip, end bool) {
		if upper != nil && bytes.Compare(key, upper) >= 0 {
			return true, false
		}
		return false, !bytes.HasPrefix(key, prefix)
	}
	return d.iterate(ctx, "scan reverse", limit, badger.IteratorOptions{Reverse: true}, seek, within, true, fn)
}

// iterate calls fn, in one read transaction, for the items of an
// iterator with opts from where seek puts it: at most limit of them (0:
// all), passing over those within says to skip and stopping at the first
// it says ends the scan. Without values it fetches none and hands fn a
// nil value. what names the call in errors.
func (d *Driver) iterate(ctx context.Context, what string, limit int, opts badger.IteratorOptions, seek func(*badger.Iterator), within func(key []byte) (skip, end bool), values bool, fn func(k, v []byte) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	opts.PrefetchValues, opts.PrefetchSize = values, 100
	if limit > 0 && limit < opts.PrefetchSize {
		opts.PrefetchSize = limit
	}
	err := d.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(opts)
		defer it.Close()
		calls := 0
		for seek(it); it.Valid(); it.Next() {
			item := it.Item()
			skip, end := within(item.Key())
			if skip {
				continue
			}
			if end {
				break
			}
			if err := ctx.Err(); err != nil {
				return errStop{err}
			}
			var err, lost error
			if !values {
				err = fn(item.Key(), nil)
			} else {
				err = item.Value(func(v []byte) error {
					if v, lost = checkedValue(item, v); lost != nil {
						return lost
					}
					if v, lost = d.resolve(item, v); lost != nil {
						return lost
					}
					return fn(item.Key(), v)
				})
			}
			if lost != nil {
				return lost // an iterator holds its value-log files open: not collection
			}
			if err != nil {
				return errStop{err}
			}
			if calls++; limit > 0 && calls == limit {
				break
			}
		}
		return nil
	})
	var stop errStop
	if errors.As(err, &stop) {
		return stop.err
	}
	if err != nil {
		return fmt.Errorf("badgerkv: %s: %w", what, err)
	}
	return nil
}

// Commit implements kv.Driver.
func (d *Driver) Commit(ctx context.Context, b kv.Batch) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.g.Leave()
	if err := d.checkSync(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	// Every write is synced before Badger returns it (SyncWrites, unless
	// NoSync), so an empty batch has nothing left to make durable.
	if !b.Empty() {
		d.lastCommit.Store(time.Now().UnixNano())
		d.committing.Add(1)
		err := d.apply(ctx, &b)
		d.committing.Add(-1)
		if err != nil {
			return err
		}
		if deletes(&b) {
			d.snaps.drop() // GetSame must not find a deleted key
		}
	}
	return d.checkSync()
}

// deletes reports whether b deletes a key.
func deletes(b *kv.Batch) bool {
	if len(b.Deletes) > 0 {
		return true
	}
	for _, s := range b.Swaps {
		if s.Delete {
			return true
		}
	}
	return false
}

// checkSync returns the value-log sync failure Badger reported (see
// badgerLog), or else a failed sync of a pack (pack.go), if any: a write
// that returned after it may not be durable, so every write fails from
// then on.
func (d *Driver) checkSync() error {
	if err := d.blog.failure(); err != nil {
		return err
	}
	return d.packs.failure()
}

// apply checks b's swaps and writes b in one transaction.
func (d *Driver) apply(ctx context.Context, b *kv.Batch) error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	txn := d.db.NewTransaction(true)
	defer txn.Discard()
	var conflicts []kv.Conflict
	for i := range b.Swaps {
		s := &b.Swaps[i]
		var cur []byte
		exists := true
		item, err := txn.Get(s.Key)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			exists = false
		case err != nil:
			return fmt.Errorf("badgerkv: commit: read %q: %w", s.Key, err)
		default:
			if cur, err = item.ValueCopy(nil); err != nil {
				return fmt.Errorf("badgerkv: commit: read %q: %w", s.Key, err)
			}
			if cur, err = d.resolve(item, cur); err != nil {
				return fmt.Errorf("badgerkv: commit: read %q: %w", s.Key, err)
			}
		}
		if !s.Holds(exists, cur) {
			conflicts = append(conflicts, kv.Conflict{Key: bytes.Clone(s.Key), Exists: exists, Current: nonNil(cur, exists)})
		}
	}
	if conflicts != nil {
		return &kv.ConflictError{Conflicts: conflicts}
	}
	write := func(err error) error {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("%w: %d sets, %d deletes, %d swaps", kv.ErrTooLarge, len(b.Sets), len(b.Deletes), len(b.Swaps))
		}
		return err
	}
	for _, r := range b.Sets {
		if err := txn.Set(r.Key, r.Value); err != nil {
			return write(err)
		}
	}
	for _, k := range b.Deletes {
		if err := txn.Delete(k); err != nil {
			return write(err)
		}
	}
	for _, s := range b.Swaps {
		var err error
		if s.Delete {
			err = txn.Delete(s.Key)
		} else {
			err = txn.Set(s.Key, s.New)
		}
		if err != nil {
			return write(err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("badgerkv: commit: %w", write(err))
	}
	return nil
}

func nonNil(b []byte, exists bool) []byte {
	if exists && b == nil {
		return []byte{}
	}
	return b
}

// Close implements kv.Driver: it waits for calls in flight and closes the
// database.
func (d *Driver) Close() error {
	// The collector stops at the next file first, so that Close waits
	// for at most one file's rewrite.
	d.stopOnce.Do(func() { close(d.stop) })
	if !d.g.Close() {
		return nil
	}
	d.trim.close()
	d.bg.Wait()
	err := d.db.Close()
	if perr := d.packs.close(); err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("badgerkv: close: %w", err)
	}
	return nil
}
