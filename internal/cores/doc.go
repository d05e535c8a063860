// Package cores sizes the work a task spreads over goroutines by the
// processor cores the process may run on, not by GOMAXPROCS alone, which
// artifactd serve sets above the cores on small machines (so that a
// goroutine woken beside long-running ones waits for the kernel's finer
// time slices, not the Go scheduler's 10 ms preemption): a fan-out wider
// than the cores only adds goroutines competing for them.
package cores
