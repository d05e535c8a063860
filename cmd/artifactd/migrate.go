package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
)

// migrateStats is what a migration copied.
type migrateStats struct {
	Contexts int
	Branches int
	Records  int64
	Bytes    int64
	Elapsed  time.Duration
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("migrate", "--from SPEC --to SPEC [--into-nonempty] [--no-verify]", stderr)
	from := fs.String("from", "", "the store to copy: "+specSyntax+" (required)")
	to := fs.String("to", "", "the store to copy into, in the same form (required; created if missing)")
	intoNonempty := fs.Bool("into-nonempty", false, "copy into a store that already holds records: a context both hold must be identical (same branches and heads), and is left as it is")
	noVerify := fs.Bool("no-verify", false, "skip the check at the end (every branch of every copied context at the same commit, its head's state hashing to the same context hash)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "migrate: unexpected argument %q", pos[0])
	}
	if *from == "" || *to == "" {
		return fail(stderr, exitUsage, "migrate: --from SPEC and --to SPEC are required (SPEC: %s)", specSyntax)
	}
	src, err := parseStoreSpec(*from)
	if err != nil {
		return fail(stderr, exitUsage, "migrate: --from: %v", err)
	}
	dst, err := parseStoreSpec(*to)
	if err != nil {
		return fail(stderr, exitUsage, "migrate: --to: %v", err)
	}
	if sameStore(src, dst) {
		return fail(stderr, exitUsage, "migrate: --from and --to name the same store")
	}
	prog := &progress{w: stderr, every: 2 * time.Second}
	stats, snap, err := migrateCopy(ctx, src, dst, *intoNonempty, prog)
	if err != nil {
		return fail(stderr, exitUsage, "migrate: %v", err)
	}
	fmt.Fprintf(stdout, "copied %d contexts (%d branches), %d records, %d bytes in %.1fs (%.0f records/s)\n",
		stats.Contexts, stats.Branches, stats.Records, stats.Bytes, stats.Elapsed.Seconds(), float64(stats.Records)/max(stats.Elapsed.Seconds(), 1e-9))
	if *noVerify {
		return exitOK
	}
	if err := migrateVerify(ctx, src, dst, snap); err != nil {
		return fail(stderr, exitUsage, "migrate: verify: %v", err)
	}
	fmt.Fprintf(stdout, "verified: every branch of the %d contexts is at the same commit in %s, and each head's state hashes to the source's context hash\n", stats.Contexts, dst)
	return exitOK
}

// sameStore reports whether a and b name one store: the same database
// URL, or one directory however it is spelt (relative, with a trailing
// slash, through a symbolic link).
func sameStore(a, b storeSpec) bool {
	if a.isPostgres() || b.isPostgres() {
		return a == b
	}
	return canonicalDir(a.Dir) == canonicalDir(b.Dir)
}

// canonicalDir is dir as an absolute path with its symbolic links
// resolved, or as clean as it can be made when it does not exist.
func canonicalDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return filepath.Clean(dir)
}

// Key prefixes of the store's layout (store/doc.go) that migrate treats
// specially. The records under immutablePrefixes are content-addressed or
// keyed by a commit id, so they are put idempotently; context records and
// refs are written last, a context with its refs in one commit, so that
// the destination never shows a ref whose commit is not there. Every other
// record (seq entries, the format record, the type registry, the spill
// index) is written with a swap that expects it absent.
var (
	immutablePrefixes = [][]byte{[]byte("obj\x00"), []byte("blob\x00"), []byte("node\x00"), []byte("ops\x00"), []byte("cmt\x00")}
	ctxPrefix         = []byte("ctx\x00")
	refPrefix         = []byte("ref\x00")
)

// Batch bounds of a migration's writes.
const (
	migrateRows  = 2000
	migrateBytes = 4 << 20
)

// refSnapshot is the contexts and refs migrate read from the source, in
// the same scan as every other record: what the destination shows at
// the end, and what the verification checks.
type refSnapshot struct {
	// ctx is each context id's record; refs its branches' raw values.
	ctx  map[string][]byte
	refs map[string]map[string][]byte
}

func (s *refSnapshot) ids() []string {
	ids := make([]string, 0, len(s.ctx))
	for id := range s.ctx {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// migrateCopy copies every record of src into dst at the kv level, in one
// consistent scan of src.
func migrateCopy(ctx context.Context, src, dst storeSpec, intoNonempty bool, prog *progress) (migrateStats, *refSnapshot, error) {
	start := time.Now()
	var stats migrateStats
	if !src.isPostgres() {
		if err := mustExist(src.Dir); err != nil {
			return stats, nil, fmt.Errorf("--from: %w", err)
		}
	}
	sd, err := openDriver(ctx, src, false)
	if err != nil {
		return stats, nil, fmt.Errorf("--from: %w", err)
	}
	defer sd.Close()
	if _, err := sd.Get(ctx, formatKey); errors.Is(err, kv.ErrNotFound) {
		return stats, nil, fmt.Errorf("--from: %s holds no artifactd store", src)
	} else if err != nil {
		return stats, nil, fmt.Errorf("--from: %w", err)
	}
	// Refs without their context record cannot be carried over: say so
	// before anything is written, not after every record was copied.
	ctxs := map[string]bool{}
	if err := kv.ScanKeys(ctx, sd, ctxPrefix, nil, 0, func(k []byte) error {
		ctxs[string(k[len(ctxPrefix):])] = true
		return nil
	}); err != nil {
		return stats, nil, fmt.Errorf("--from: %w", err)
	}
	if err := kv.ScanKeys(ctx, sd, refPrefix, nil, 0, func(k []byte) error {
		if id, _, _ := strings.Cut(string(k[len(refPrefix):]), "\x00"); !ctxs[id] {
			return fmt.Errorf("--from: context %q has refs but no context record (run fsck on the source); nothing was written", id)
		}
		return nil
	}); err != nil {
		return stats, nil, err
	}
	dd, err := openDriver(ctx, dst, false)
	if err != nil {
		return stats, nil, fmt.Errorf("--to: %w", err)
	}
	defer dd.Close()
	if !intoNonempty {
		empty := true
		if err := dd.Scan(ctx, nil, nil, 1, func(k, v []byte) error { empty = false; return nil }); err != nil {
			return stats, nil, fmt.Errorf("--to: %w", err)
		}
		if !empty {
			return stats, nil, fmt.Errorf("--to: %s already holds records: give an empty store, or --into-nonempty to add the source's contexts to it", dst)
		}
	} else if err := precheckInto(ctx, sd, dd); err != nil {
		return stats, nil, err
	}

	w := &migrateWriter{dst: dd}
	snap := &refSnapshot{ctx: map[string][]byte{}, refs: map[string]map[string][]byte{}}
	err = sd.Scan(ctx, nil, nil, 0, func(k, v []byte) error {
		stats.Records++
		stats.Bytes += int64(len(k) + len(v))
		prog.tick(stats.Records, stats.Bytes)
		switch {
		case bytes.HasPrefix(k, ctxPrefix):
			snap.ctx[string(k[len(ctxPrefix):])] = bytes.Clone(v)
			return nil
		case bytes.HasPrefix(k, refPrefix):
			id, branch, ok := strings.Cut(string(k[len(refPrefix):]), "\x00")
			if !ok {
				return fmt.Errorf("--from: ref key %q has no branch", k)
			}
			if snap.refs[id] == nil {
				snap.refs[id] = map[string][]byte{}
			}
			snap.refs[id][branch] = bytes.Clone(v)
			return nil
		}
		for _, p := range immutablePrefixes {
			if bytes.HasPrefix(k, p) {
				return w.putImmutable(ctx, k, v)
			}
		}
		return w.putAbsent(ctx, k, v)
	})
	if err != nil {
		return stats, nil, fmt.Errorf("copy: %w", err)
	}
	if err := w.flush(ctx); err != nil {
		return stats, nil, fmt.Errorf("copy: %w", err)
	}
	// The contexts and their refs, last: each context with its branches in
	// one atomic commit.
	for id, refs := range snap.refs {
		if _, ok := snap.ctx[id]; !ok {
			return stats, nil, fmt.Errorf("--from: context %q has refs but no context record (run fsck on the source)", id)
		}
		stats.Branches += len(refs)
	}
	for _, id := range snap.ids() {
		if err := w.putContext(ctx, id, snap.ctx[id], snap.refs[id]); err != nil {
			return stats, nil, err
		}
		stats.Contexts++
	}
	if err := w.flush(ctx); err != nil {
		return stats, nil, fmt.Errorf("copy: %w", err)
	}
	prog.done(stats.Records, stats.Bytes)
	stats.Elapsed = time.Since(start)
	return stats, snap, nil
}

// precheckInto refuses, before anything is written, a copy into a
// non-empty store that holds one of the source's contexts with other
// branches or heads.
func precheckInto(ctx context.Context, sd, dd kv.Driver) error {
	var bad []string
	err := sd.Scan(ctx, refPrefix, nil, 0, func(k, v []byte) error {
		cur, err := dd.Get(ctx, k)
		switch {
		case errors.Is(err, kv.ErrNotFound):
			id, _, _ := strings.Cut(string(k[len(refPrefix):]), "\x00")
			if _, err := dd.Get(ctx, append(bytes.Clone(ctxPrefix), id...)); err == nil {
				bad = append(bad, fmt.Sprintf("%q (a branch the destination lacks)", k[len(refPrefix):]))
			}
			return nil
		case err != nil:
			return err
		case !bytes.Equal(cur, v):
			bad = append(bad, fmt.Sprintf("%q (another head)", bytes.ReplaceAll(k[len(refPrefix):], []byte{0}, []byte{'/'})))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("--into-nonempty: the destination holds contexts of the same id with another history: %s; nothing was copied", strings.Join(bad, ", "))
	}
	return nil
}

// migrateWriter buffers a migration's writes into the destination.
type migrateWriter struct {
	dst     kv.Driver
	imm     []kv.Record
	immSize int
	swaps   []kv.Swap
	swSize  int
}

func (w *migrateWriter) putImmutable(ctx context.Context, k, v []byte) error {
	w.imm = append(w.imm, kv.Record{Key: bytes.Clone(k), Value: bytes.Clone(v)})
	w.immSize += len(k) + len(v)
	if len(w.imm) >= migrateRows || w.immSize >= migrateBytes {
		return w.flushImmutable(ctx)
	}
	return nil
}

func (w *migrateWriter) putAbsent(ctx context.Context, k, v []byte) error {
	w.swaps = append(w.swaps, kv.Swap{Key: bytes.Clone(k), Absent: true, New: bytes.Clone(v)})
	w.swSize += len(k) + len(v)
	if len(w.swaps) >= migrateRows || w.swSize >= migrateBytes {
		return w.flushSwaps(ctx)
	}
	return nil
}

// putContext writes a context's record and refs in one commit (after
// the buffered records, which it flushes first).
func (w *migrateWriter) putContext(ctx context.Context, id string, rec []byte, refs map[string][]byte) error {
	if err := w.flush(ctx); err != nil {
		return err
	}
	names := make([]string, 0, len(refs))
	for b := range refs {
		names = append(names, b)
	}
	sort.Strings(names)
	sw := []kv.Swap{{Key: append(bytes.Clone(ctxPrefix), id...), Absent: true, New: rec}}
	for _, b := range names {
		sw = append(sw, kv.Swap{Key: []byte(string(refPrefix) + id + "\x00" + b), Absent: true, New: refs[b]})
	}
	w.swaps = sw
	if err := w.flushSwaps(ctx); err != nil {
		return fmt.Errorf("context %q: %w", id, err)
	}
	return nil
}

func (w *migrateWriter) flush(ctx context.Context) error {
	if err := w.flushImmutable(ctx); err != nil {
		return err
	}
	return w.flushSwaps(ctx)
}

func (w *migrateWriter) flushImmutable(ctx context.Context) error {
	if len(w.imm) == 0 {
		return nil
	}
	if err := w.dst.PutImmutable(ctx, w.imm); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	w.imm, w.immSize = w.imm[:0], 0
	return nil
}

// flushSwaps commits the buffered swaps. A key the destination already
// holds with the same value is dropped and the rest retried (a copy into
// a store that holds the same records, or a second run after an
// interrupted one); the effect lease key of the destination is kept; any
// other difference fails naming the key.
func (w *migrateWriter) flushSwaps(ctx context.Context) error {
	for len(w.swaps) > 0 {
		err := w.dst.Commit(ctx, kv.Batch{Swaps: w.swaps})
		var ce *kv.ConflictError
		if !errors.As(err, &ce) {
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			break
		}
		drop := map[string]bool{}
		for _, c := range ce.Conflicts {
			if bytes.Equal(c.Key, leaseKeyRecord) {
				drop[string(c.Key)] = true
				continue
			}
			want := w.valueOf(c.Key)
			if !c.Exists || !bytes.Equal(c.Current, want) {
				return fmt.Errorf("--to: the destination holds %q with another value; nothing of it was overwritten", bytes.ReplaceAll(c.Key, []byte{0}, []byte{'/'}))
			}
			drop[string(c.Key)] = true
		}
		kept := w.swaps[:0]
		for _, s := range w.swaps {
			if !drop[string(s.Key)] {
				kept = append(kept, s)
			}
		}
		w.swaps = kept
	}
	w.swaps, w.swSize = w.swaps[:0], 0
	return nil
}

func (w *migrateWriter) valueOf(k []byte) []byte {
	for _, s := range w.swaps {
		if bytes.Equal(s.Key, k) {
			return s.New
		}
	}
	return nil
}

// migrateVerify opens both stores through the store layer and checks,
// for every context migrate copied, that the destination has exactly the
// copied branches at the copied commits, that each head's state (read
// from the destination's state map) hashes to the context hash the
// source records for that commit, and that the context records agree.
func migrateVerify(ctx context.Context, src, dst storeSpec, snap *refSnapshot) error {
	ss, err := openSpec(ctx, src, store.Options{Logger: discardLogger()}, true)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer ss.Close()
	ds, err := openSpec(ctx, dst, store.Options{Logger: discardLogger()}, true)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	defer ds.Close()
	for _, id := range snap.ids() {
		si, err := ss.GetContext(ctx, id)
		if err != nil {
			return fmt.Errorf("--from: %w", err)
		}
		di, err := ds.GetContext(ctx, id)
		if err != nil {
			return fmt.Errorf("--to: %w", err)
		}
		if si != di {
			return fmt.Errorf("context %q: the destination's record %+v differs from the source's %+v", id, di, si)
		}
		brs, err := ds.Branches(ctx, id)
		if err != nil {
			return fmt.Errorf("--to: context %q: %w", id, err)
		}
		if len(brs) != len(snap.refs[id]) {
			return fmt.Errorf("context %q: the destination has %d branches, the source %d", id, len(brs), len(snap.refs[id]))
		}
		for _, b := range brs {
			raw, ok := snap.refs[id][b.Name]
			if !ok || !bytes.Equal(raw, b.Head[:]) {
				return fmt.Errorf("context %q branch %q: the destination is at %s, the source was at %x", id, b.Name, b.Head, raw)
			}
			sc, err := ss.GetCommit(ctx, id, b.Head)
			if err != nil {
				return fmt.Errorf("--from: context %q branch %q: %w", id, b.Name, err)
			}
			var got hashing.Digest
			var at hashing.Digest
			if err := ds.Read(ctx, id, b.Name, func(v *store.View) error {
				got, at = v.State.Hash(), v.Commit.ID
				return nil
			}); err != nil {
				return fmt.Errorf("--to: context %q branch %q: %w", id, b.Name, err)
			}
			if at != sc.ID || got != sc.ContextHash {
				return fmt.Errorf("context %q branch %q: the destination's head %s hashes to %s, the source's commit %s records %s", id, b.Name, at, got, sc.ID, sc.ContextHash)
			}
		}
	}
	return nil
}

// progress prints a line to w every so often during a long copy.
type progress struct {
	w       io.Writer
	every   time.Duration
	start   time.Time
	last    time.Time
	printed bool
}

func (p *progress) tick(records, bytes int64) {
	now := time.Now()
	if p.start.IsZero() {
		p.start, p.last = now, now
		return
	}
	if records%256 != 0 || now.Sub(p.last) < p.every {
		return
	}
	p.last, p.printed = now, true
	el := now.Sub(p.start).Seconds()
	fmt.Fprintf(p.w, "migrate: %d records, %.1f MB, %.0f records/s\n", records, float64(bytes)/1e6, float64(records)/el)
}

func (p *progress) done(records, bytes int64) {
	if !p.printed || p.start.IsZero() {
		return
	}
	el := time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "migrate: %d records, %.1f MB, %.0f records/s (done)\n", records, float64(bytes)/1e6, float64(records)/el)
}
