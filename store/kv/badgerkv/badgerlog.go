package badgerkv

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// badgerLog passes Badger's errors and warnings to the driver's logger
// (its info and debug lines, one per compaction or write, are dropped)
// and watches for the one failure Badger reports only there.
//
// With SyncWrites a write syncs the value-log file it appended to before
// it writes the write-ahead log, but Badger (v4.9.6, value.go
// valueLog.write) logs a failed value-log sync and lets the write go on:
// the transaction would be acknowledged with values that may never reach
// the disk. badgerLog records such a failure; the driver's writes check
// it once Badger returns and fail from then on (see Driver.checkSync).
type badgerLog struct {
	log *slog.Logger
	// syncFailed holds the first failed value-log sync Badger reported.
	syncFailed atomic.Pointer[string]
}

// valueLogSyncFailure is how Badger's logged message about a failed
// value-log sync begins.
const valueLogSyncFailure = "Error while curlf sync"

func (l *badgerLog) Errorf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.HasPrefix(msg, valueLogSyncFailure) {
		l.syncFailed.CompareAndSwap(nil, &msg)
	}
	l.log.Error("badgerkv: badger: " + msg)
}

func (l *badgerLog) Warningf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.Contains(msg, "might be too small") || strings.HasPrefix(msg, "Cache life expectancy") {
		// Badger's advice, once a minute, on a block cache the driver
		// keeps small on purpose (Options.BlockCacheBytes).
		return
	}
	l.log.Warn("badgerkv: badger: " + msg)
}

func (l *badgerLog) Infof(string, ...any) {}

func (l *badgerLog) Debugf(string, ...any) {}

// failure returns the value-log sync failure Badger reported, if any.
func (l *badgerLog) failure() error {
	if msg := l.syncFailed.Load(); msg != nil {
		return fmt.Errorf("badgerkv: a value-log sync failed, so a write may not be durable (restart and run fsck): %s", *msg)
	}
	return nil
}
