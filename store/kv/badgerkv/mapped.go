package badgerkv

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultMappedBytes is the default of Options.MappedBytes.
const DefaultMappedBytes = 64 << 20

// trimEvery is how often the driver compares the process's resident
// file-backed pages with Options.MappedBytes.
const trimEvery = time.Second

// Badger v4 reads its tables, write-ahead logs and value logs through
// memory maps and writes new tables into them. Every page it touched
// stays mapped, so the process's resident size grows with the data (about
// 200 MB per 1,000 agent runs) although the kernel could drop those pages
// at any time: they are page cache, not memory the process owns. Monitors
// and memory limits count them all the same. The trimmer bounds them:
// once a second it reads the process's resident file-backed size, less
// what it was when the driver opened (the binary's own pages, shared
// libraries), and when that passes the budget it asks the kernel to page
// out every mapping of a file in the data directory (madvise
// MADV_PAGEOUT, Linux 5.4 and later; see pageOut). Paging out is advice,
// never a change of contents: a page Badger reads again is read back from
// the file, and a range that Badger unmapped meanwhile (or that the
// runtime mapped anew) loses nothing. Badger's block cache and the
// store's caches above it keep what is read often.

// trimmer pages out the data directory's mapped files (see above).
type trimmer struct {
	dir    string // cleaned, absolute, symbolic links resolved (as the kernel names mappings)
	budget int64
	// base is the resident file-backed size when the trimmer started:
	// pages that are not the data directory's.
	base int64
	log  *slog.Logger
	stop chan struct{}
	done sync.WaitGroup
}

// startTrimmer starts the trimmer of dir's mappings, or returns nil when
// the budget is negative or the platform cannot page mappings out.
func startTrimmer(dir string, budget int64, log *slog.Logger) *trimmer {
	if budget < 0 || !canPageOut {
		return nil
	}
	if budget == 0 {
		budget = DefaultMappedBytes
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	base, err := residentFileBytes()
	if err != nil {
		log.Warn("badgerkv: cannot read the resident size; mapped files will not be paged out", "err", err)
		return nil
	}
	t := &trimmer{dir: abs, budget: budget, base: base, log: log, stop: make(chan struct{})}
	t.done.Add(1)
	go t.loop()
	return t
}

func (t *trimmer) loop() {
	defer t.done.Done()
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		advised, err := t.trim()
		switch {
		case errors.Is(err, errPageOutUnsupported):
			// An old kernel or a sandbox refuses every time; the store
			// works without it, and reading the maps each second would
			// only cost.
			t.log.Warn("badgerkv: the kernel cannot page out mapped files; resident size will include them", "err", err)
			return
		case err != nil && !warned:
			warned = true
			t.log.Warn("badgerkv: paging out mapped files failed", "err", err)
		case err == nil && advised < 0 && !warned:
			warned = true
			t.log.Warn("badgerkv: resident file-backed memory is over Options.MappedBytes, but no mapping of the data directory was found", "dir", t.dir)
		}
	}
}

// trim pages out the data directory's mappings when the resident
// file-backed size (less t.base) is over the budget, and says how many
// bytes of mappings it advised: -1 when it was over but found none.
func (t *trimmer) trim() (int64, error) {
	resident, err := residentFileBytes()
	if err != nil || resident-t.base <= t.budget {
		return 0, err
	}
	maps, err := readSelfMaps()
	if err != nil {
		return 0, err
	}
	spans := mappingsUnder(maps, t.dir)
	if len(spans) == 0 {
		return -1, nil
	}
	var advised int64
	for _, s := range spans {
		if err := pageOut(s); err != nil {
			return advised, err
		}
		advised += int64(s.end - s.start)
	}
	return advised, nil
}

// close stops the trimmer and waits for it.
func (t *trimmer) close() {
	if t == nil {
		return
	}
	close(t.stop)
	t.done.Wait()
}

// errPageOutUnsupported marks a platform or kernel that cannot page
// mappings out.
var errPageOutUnsupported = errors.New("paging out mappings is not supported")

// span is an address range [start, end) of a mapping.
type span struct{ start, end uintptr }

// mappingsUnder returns the ranges of the mappings in maps (the format of
// /proc/PID/maps) whose file lies in dir or below it. Lines it cannot
// read are skipped: a mapping it misses is only not paged out.
func mappingsUnder(maps []byte, dir string) []span {
	prefix := []byte(dir + string(filepath.Separator))
	var out []span
	for len(maps) > 0 {
		line := maps
		if i := bytes.IndexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		// address perms offset dev inode pathname: the path is what
		// follows the fifth field's blanks (and may itself hold blanks).
		fields, rest := 0, line
		for fields < 5 && len(rest) > 0 {
			rest = bytes.TrimLeft(rest, " ")
			i := bytes.IndexByte(rest, ' ')
			if i < 0 {
				rest = nil
				break
			}
			rest = rest[i:]
			fields++
		}
		path := bytes.TrimLeft(rest, " ")
		if fields < 5 || !bytes.HasPrefix(path, prefix) || bytes.HasSuffix(path, []byte(" (deleted)")) {
			continue
		}
		addr, _, _ := bytes.Cut(line, []byte(" "))
		lo, hi, ok := bytes.Cut(addr, []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, span{uintptr(start), uintptr(end)})
	}
	return out
}
