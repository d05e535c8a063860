//go:build linux

package badgerkv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// canPageOut says whether this platform has pageOut.
const canPageOut = true

// residentFileBytes reads the process's resident file-backed memory
// (RssFile in /proc/self/status).
func residentFileBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return parseRssFile(b)
}

// parseRssFile returns the RssFile line of a /proc/PID/status in bytes.
func parseRssFile(status []byte) (int64, error) {
	_, rest, ok := bytes.Cut(status, []byte("\nRssFile:"))
	if !ok {
		return 0, errors.New("no RssFile in /proc/self/status")
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	num, unit, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
	kb, err := strconv.ParseInt(string(num), 10, 64)
	if err != nil || string(unit) != "kB" {
		return 0, fmt.Errorf("unreadable RssFile line %q", line)
	}
	return kb << 10, nil
}

func readSelfMaps() ([]byte, error) { return os.ReadFile("/proc/self/maps") }

// pageOut asks the kernel to page the range out (madvise MADV_PAGEOUT,
// Linux 5.4 and later): written back if dirty, then reclaimed. That is
// advice, never a change of contents, whatever the range holds when the
// call lands — and the trimmer cannot know: between its reading of
// /proc/self/maps and this call Badger may unmap a file (a table that a
// compaction replaced) and the Go runtime may map anonymous memory at the
// same address (its metadata: mmap without a hint, top-down, where
// Badger's files are). MADV_DONTNEED would keep the page cache (a later
// read of a trimmed block is a minor fault rather than a disk read, about
// 15 % of the wall time of the 1M-artifact scenario, docs/BENCHMARKS.md),
// but on anonymous memory it discards the contents: that race would zero
// the runtime's memory. TestPageOutKeepsAnonymousMemory keeps it so. A
// range no longer mapped (ENOMEM) is not an error: Badger closed the file
// meanwhile.
func pageOut(s span) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_PAGEOUT)
	switch errno {
	case 0, unix.ENOMEM:
		return nil
	case unix.EINVAL, unix.ENOSYS:
		// MADV_PAGEOUT is Linux 5.4 and later.
		return fmt.Errorf("%w: madvise(MADV_PAGEOUT): %w", errPageOutUnsupported, errno)
	}
	return fmt.Errorf("madvise(MADV_PAGEOUT): %w", errno)
}
