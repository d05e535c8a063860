package badgerkv

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
// it before and after Badger runs them and fail from then on (see
// Driver.checkSync).
//
// A failure that persists makes Badger repeat itself — a failed
// compaction every 50 ms per compactor, a failed memtable flush every
// second — so each of its messages (by format) is logged at most once
// every logEvery, with a count of the lines dropped since.
type badgerLog struct {
	log *slog.Logger
	// syncFailed holds the first failed value-log sync Badger reported.
	syncFailed atomic.Pointer[string]
	// now is the clock (time.Now; tests set their own).
	now func() time.Time

	mu sync.Mutex
	// seen is, per format string, when it was last logged and how many
	// lines of it were dropped since.
	seen map[string]logSeen
}

type logSeen struct {
	at      time.Time
	dropped int
}

// logEvery is how often one of Badger's messages may be logged.
const logEvery = 10 * time.Second

// valueLogSyncFailure is how Badger's logged message about a failed
// value-log sync begins.
const valueLogSyncFailure = "Error while curlf sync"

func newBadgerLog(log *slog.Logger) *badgerLog {
	return &badgerLog{log: log, now: time.Now, seen: make(map[string]logSeen)}
}

func (l *badgerLog) Errorf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.HasPrefix(msg, valueLogSyncFailure) {
		l.syncFailed.CompareAndSwap(nil, &msg)
	}
	l.emit(slog.LevelError, format, msg)
}

func (l *badgerLog) Warningf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.Contains(msg, "might be too small") || strings.HasPrefix(msg, "Cache life expectancy") {
		// Badger's advice, once a minute, on a block cache the driver
		// keeps small on purpose (Options.BlockCacheBytes).
		return
	}
	l.emit(slog.LevelWarn, format, msg)
}

func (l *badgerLog) Infof(string, ...any) {}

func (l *badgerLog) Debugf(string, ...any) {}

// emit logs msg, made from format, unless a line of format was logged
// less than logEvery ago.
func (l *badgerLog) emit(level slog.Level, format, msg string) {
	t := l.now()
	l.mu.Lock()
	s := l.seen[format]
	if !s.at.IsZero() && t.Sub(s.at) < logEvery {
		s.dropped++
		l.seen[format] = s
		l.mu.Unlock()
		return
	}
	l.seen[format] = logSeen{at: t}
	l.mu.Unlock()
	var attrs []any
	if s.dropped > 0 {
		attrs = append(attrs, "repeated", s.dropped)
	}
	l.log.Log(context.Background(), level, "badgerkv: badger: "+msg, attrs...)
}

// failure returns the value-log sync failure Badger reported, if any.
func (l *badgerLog) failure() error {
	if msg := l.syncFailed.Load(); msg != nil {
		return fmt.Errorf("badgerkv: a value-log sync failed, so a write may not be durable (restart and run fsck): %s", *msg)
	}
	return nil
}
