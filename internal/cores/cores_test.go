package cores

import (
	"runtime"
	"testing"
)

// TestCount: the fan-out follows GOMAXPROCS below the CPUs and stops at
// the CPUs above them. Not parallel: it changes GOMAXPROCS.
func TestCount(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	cpus := runtime.NumCPU()
	for _, procs := range []int{1, cpus, cpus + 1, 2 * cpus, 4 * cpus} {
		runtime.GOMAXPROCS(procs)
		if got, want := Count(), min(procs, cpus); got != want {
			t.Errorf("GOMAXPROCS %d on %d CPUs: Count() = %d, want %d", procs, cpus, got, want)
		}
	}
}
