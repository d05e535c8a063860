package main

import "testing"

// TestServerProcs: twice the Ps on a small machine that the process may
// use whole; the runtime's choice under a CPU quota, on a big machine, or
// when GOMAXPROCS is set in the environment.
func TestServerProcs(t *testing.T) {
	for _, c := range []struct {
		procs, cpus int
		env         bool
		want        int
	}{
		{1, 1, false, 2},
		{2, 2, false, 4},
		{4, 4, false, 8},
		{8, 8, false, 8},  // a big machine
		{2, 16, false, 2}, // a quota of 2 on 16 CPUs
		{2, 2, true, 2},   // GOMAXPROCS=2 in the environment
		{16, 2, true, 16}, // GOMAXPROCS=16 in the environment
		{5, 5, false, 5},  // above smallMachine
		{3, 4, false, 3},  // a quota of 3 on 4 CPUs
	} {
		if got := serverProcs(c.procs, c.cpus, c.env); got != c.want {
			t.Errorf("serverProcs(%d, %d, %v) = %d, want %d", c.procs, c.cpus, c.env, got, c.want)
		}
	}
}
