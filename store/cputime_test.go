//go:build linux || darwin

package store

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) this process has
// used, so that benchmarks can report their cost apart from the time spent
// waiting for a CPU on a busy machine.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
