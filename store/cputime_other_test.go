//go:build !(linux || darwin)

package store

import "time"

// processCPUTime is not available here: benchmarks report wall time only.
func processCPUTime() (time.Duration, bool) { return 0, false }
