package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// smallMachine is the most cores on which a server runs with more Ps
// than cores (serverProcs).
const smallMachine = 4

// serverProcs returns the GOMAXPROCS a server runs with, given the one the
// runtime chose (procs), the CPUs the process may run on, whether a CPU
// quota applies to it (cpuQuota) and whether GOMAXPROCS is set in the
// environment: twice the cores on a machine of up to smallMachine cores
// without a quota, else procs. With as many Ps as cores, a goroutine
// woken while every P runs a long task — a one-artifact commit's handler
// beside a bulk commit's hashing, Badger's writer and the collector —
// waits for the scheduler's 10 ms preemption, once per hand-over; with
// more Ps the kernel shares the cores at a finer grain. On the 2-core
// machine of docs/BENCHMARKS.md the largest wait of another context's
// writes during the hub scenario's bulk commit fell from a median of 33
// to 16 ms (none of 25 runs above 50 ms, against 4 of 25). The work that
// spreads over goroutines is sized by the cores (internal/cores), not by
// the Ps. A quota is left alone: more runnable threads than it allows are
// throttled, not shared.
func serverProcs(procs, cpus int, quota, envSet bool) int {
	if envSet || quota || procs < cpus || cpus > smallMachine {
		return procs
	}
	return 2 * procs
}

// setServerProcs sets GOMAXPROCS for a server (serverProcs) and returns
// what undoes it (applyProcs).
func setServerProcs() (restore func()) {
	_, envSet := os.LookupEnv("GOMAXPROCS")
	was := runtime.GOMAXPROCS(0)
	set := func(n int) { runtime.GOMAXPROCS(n) }
	return applyProcs(was, serverProcs(was, runtime.NumCPU(), cpuQuota("/"), envSet), set, runtime.SetDefaultGOMAXPROCS)
}

// applyProcs moves GOMAXPROCS from was to n with set, when they differ,
// and returns what undoes it: setDefault, the runtime's default again,
// which it keeps following as the CPUs the process may use change —
// setting the old number back would stop that (Go 1.25 and later) — or
// nothing when nothing changed.
func applyProcs(was, n int, set func(int), setDefault func()) (restore func()) {
	if n == was {
		return func() {}
	}
	set(n)
	return setDefault
}

// cpuQuota reports whether a cgroup CPU limit applies to this process,
// reading the file system under root ("/" but in tests): a cpu.max other
// than "max" (cgroup v2) or a positive cpu.cfs_quota_us (v1) in its
// cgroup or one above it. The runtime's own GOMAXPROCS rounds a quota up
// to at least two, so a quota of one CPU on a two-CPU machine looks like
// none from GOMAXPROCS alone.
func cpuQuota(root string) bool {
	cg, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return false
	}
	mi, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(cg)) {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		v2 := parts[0] == "0" && parts[1] == ""
		if !v2 && !slices.Contains(strings.Split(parts[1], ","), "cpu") {
			continue
		}
		mount, mroot, ok := cgroupMount(string(mi), v2)
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(parts[2], mroot)
		if !ok {
			continue
		}
		file := "cpu.cfs_quota_us"
		if v2 {
			file = "cpu.max"
		}
		for dir := filepath.Join(root, mount, rel); ; dir = filepath.Dir(dir) {
			if limited(filepath.Join(dir, file), v2) {
				return true
			}
			if dir == filepath.Join(root, mount) || dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return false
}

// cgroupMount returns where the cgroup hierarchy that holds the cpu
// controller (v1) or the unified one (v2) is mounted, and the path within
// the hierarchy that mount shows, from the lines of a mountinfo file.
func cgroupMount(mountinfo string, v2 bool) (mount, root string, ok bool) {
	for line := range strings.Lines(mountinfo) {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, found := strings.Cut(strings.TrimSpace(line), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		if v2 && g[0] == "cgroup2" || !v2 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "cpu") {
			return f[4], f[3], true
		}
	}
	return "", "", false
}

// limited reports whether the quota file name sets a limit.
func limited(name string, v2 bool) bool {
	b, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	if v2 {
		return f[0] != "max"
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	return err == nil && q > 0
}
