package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// setAffinity pins every thread of this process to the first n CPUs.
func setAffinity(t *testing.T, n int) {
	t.Helper()
	mask := fmt.Sprintf("%x", (1<<n)-1)
	if out, err := exec.Command("taskset", "-a", "-p", mask, fmt.Sprint(os.Getpid())).CombinedOutput(); err != nil {
		if _, lerr := exec.LookPath("taskset"); lerr != nil && os.Getenv("CI") != "" {
			t.Fatalf("taskset (util-linux) is needed: %v", lerr)
		}
		t.Skipf("taskset: %v %s", err, out)
	}
}

// waitProcs waits up to 5 s for GOMAXPROCS to become want.
func waitProcs(want int) int {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := runtime.GOMAXPROCS(0); got == want {
			return got
		}
		x := 0
		for i := range 1_000_000 { // not idle: the runtime updates at most once a second when busy
			x += i
		}
		_ = x
		time.Sleep(50 * time.Millisecond)
	}
	return runtime.GOMAXPROCS(0)
}

// TestRestoreKeepsAutomaticProcs: undoing setServerProcs gives the
// runtime its default GOMAXPROCS back, which follows the CPUs the process
// may use (Go 1.25+); setting the old number back would stop that, and a
// process that ran the bench's in-process server would no longer follow
// a changed CPU set. It changes the process's CPU affinity (taskset).
func TestRestoreKeepsAutomaticProcs(t *testing.T) {
	cpus := runtime.NumCPU()
	if cpus < 2 || os.Getenv("GOMAXPROCS") != "" {
		t.Skip("needs 2+ CPUs and no GOMAXPROCS in the environment")
	}
	defer runtime.SetDefaultGOMAXPROCS()
	defer setAffinity(t, cpus)
	runtime.SetDefaultGOMAXPROCS() // the testing package set GOMAXPROCS (-test.cpu)
	// The runtime follows the affinity mask (control).
	setAffinity(t, 1)
	if got := waitProcs(1); got != 1 {
		t.Skipf("the runtime did not follow the affinity mask here (GOMAXPROCS %d)", got)
	}
	setAffinity(t, cpus)
	if got := waitProcs(cpus); got != cpus {
		t.Skipf("GOMAXPROCS %d after the mask was widened again", got)
	}
	restore := setServerProcs()
	t.Logf("server GOMAXPROCS %d", runtime.GOMAXPROCS(0))
	restore()
	setAffinity(t, 1)
	if got := waitProcs(1); got != 1 {
		t.Fatalf("after setServerProcs()(), GOMAXPROCS stays %d on 1 CPU: automatic updates are off", got)
	}
}
