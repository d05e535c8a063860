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

// pageOut drops the range's pages from the process's page tables
// (madvise MADV_DONTNEED). Every mapping the driver passes is a shared
// file mapping (Badger maps its files MAP_SHARED), so nothing is lost:
// the pages stay in the kernel's page cache, a dirty one stays dirty and
// is written back as before (msync, fsync or the kernel's writeback), and
// touching the range again maps the cached page back without reading the
// disk. MADV_PAGEOUT, which this used before, also evicted the pages from
// the page cache: each later read of a paged-out block was a disk read,
// and reclaiming them cost the trimmer more than the reads it saved. A
// range no longer mapped (ENOMEM) is not an error: Badger closed the file
// meanwhile.
func pageOut(s span) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED)
	switch errno {
	case 0, unix.ENOMEM:
		return nil
	case unix.ENOSYS:
		return fmt.Errorf("%w: madvise(MADV_DONTNEED): %w", errPageOutUnsupported, errno)
	}
	return fmt.Errorf("madvise(MADV_DONTNEED): %w", errno)
}
