package main

import (
	"os"
	"runtime"
)

// smallMachine is the most cores on which a server runs with more Ps
// than cores (serverProcs).
const smallMachine = 4

// serverProcs returns the GOMAXPROCS a server runs with, given the one the
// runtime chose (procs: the CPUs the process may run on, or a CPU quota
// below them), those CPUs, and whether GOMAXPROCS is set in the
// environment: twice the cores on a machine of up to smallMachine cores
// without a quota, else procs. With as many Ps as cores, a goroutine
// woken while every P runs a long task — a one-artifact commit's handler
// beside a bulk commit's hashing, Badger's writer and the collector —
// waits for the scheduler's 10 ms preemption, once per hand-over; with
// more Ps the kernel shares the cores at a finer grain. On the 2-core
// machine of docs/BENCHMARKS.md the largest wait of another context's
// writes during the hub scenario's bulk commit fell from a median of 33
// to 17 ms (none of 25 runs above 50 ms, against 4 of 25). The work that
// spreads over goroutines is sized by the cores (internal/cores), not by
// the Ps. A quota is left alone: more runnable threads than it allows
// are throttled, not shared.
func serverProcs(procs, cpus int, envSet bool) int {
	if envSet || procs < cpus || cpus > smallMachine {
		return procs
	}
	return 2 * procs
}

// setServerProcs sets GOMAXPROCS for a server (serverProcs) and returns
// what restores the one before.
func setServerProcs() (restore func()) {
	_, envSet := os.LookupEnv("GOMAXPROCS")
	was := runtime.GOMAXPROCS(0)
	if n := serverProcs(was, runtime.NumCPU(), envSet); n != was {
		runtime.GOMAXPROCS(n)
	}
	return func() { runtime.GOMAXPROCS(was) }
}
