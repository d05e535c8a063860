package cores

import "runtime"

// Count returns how many goroutines a task that keeps each busy should
// spread over: the smaller of GOMAXPROCS and the CPUs the process may run
// on, and at least one. A CPU quota, which the runtime's default
// GOMAXPROCS already follows, stays the bound when it is the smaller.
func Count() int { return max(1, min(runtime.GOMAXPROCS(0), runtime.NumCPU())) }
