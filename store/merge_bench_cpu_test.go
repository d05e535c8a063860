//go:build linux || darwin

package store_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process has used, so
// that a benchmark can report its cost apart from waiting for a CPU on a
// busy machine.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
