package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServerProcs: twice the Ps on a small machine that the process may
// use whole; the runtime's choice under a CPU quota, on a big machine, or
// when GOMAXPROCS is set in the environment.
func TestServerProcs(t *testing.T) {
	for _, c := range []struct {
		procs, cpus int
		quota, env  bool
		want        int
	}{
		{1, 1, false, false, 2},
		{2, 2, false, false, 4},
		{4, 4, false, false, 8},
		{8, 8, false, false, 8},  // a big machine
		{5, 5, false, false, 5},  // above smallMachine
		{2, 16, false, false, 2}, // affinity or a quota below the CPUs
		{3, 4, false, false, 3},  // the same on a small machine
		{2, 2, true, false, 2},   // a quota of one CPU, which the runtime rounds up to two
		{2, 2, false, true, 2},   // GOMAXPROCS=2 in the environment
		{16, 2, false, true, 16}, // GOMAXPROCS=16 in the environment
	} {
		if got := serverProcs(c.procs, c.cpus, c.quota, c.env); got != c.want {
			t.Errorf("serverProcs(%d, %d, quota %v, env %v) = %d, want %d", c.procs, c.cpus, c.quota, c.env, got, c.want)
		}
	}
}

// TestCPUQuota reads cgroup v1 and v2 layouts written under a temporary
// root: a limit in the process's cgroup or one above it counts, "max" and
// -1 do not, nor a limit on another controller's hierarchy.
func TestCPUQuota(t *testing.T) {
	write := func(t *testing.T, root, name, body string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const v2info = "30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	const v1info = "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"v2 own limit", map[string]string{
			"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "proc/self/mountinfo": v2info,
			"sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "100000 100000\n"}, true},
		{"v2 parent limit", map[string]string{
			"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "proc/self/mountinfo": v2info,
			"sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "max 100000\n",
			"sys/fs/cgroup/kubepods/pod1/cpu.max":    "50000 100000\n"}, true},
		{"v2 none", map[string]string{
			"proc/self/cgroup": "0::/user.slice\n", "proc/self/mountinfo": v2info,
			"sys/fs/cgroup/user.slice/cpu.max": "max 100000\n", "sys/fs/cgroup/cpu.max": "max 100000\n"}, false},
		{"v2 in a namespace", map[string]string{
			"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": v2info,
			"sys/fs/cgroup/cpu.max": "150000 100000\n"}, true},
		{"v1 limit", map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", "proc/self/mountinfo": v1info,
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n"}, true},
		{"v1 none", map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", "proc/self/mountinfo": v1info,
			"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1\n",
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":            "-1\n"}, false},
		{"v1 limit on memory only", map[string]string{
			"proc/self/cgroup": "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", "proc/self/mountinfo": v1info,
			"sys/fs/cgroup/memory/docker/abc/cpu.cfs_quota_us": "50000\n"}, false},
		{"no cgroup files", map[string]string{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range c.files {
				write(t, root, name, body)
			}
			if got := cpuQuota(root); got != c.want {
				t.Errorf("cpuQuota = %v, want %v", got, c.want)
			}
		})
	}
}

// TestApplyProcsRestoresDefault: a server's GOMAXPROCS is undone by giving
// the runtime its default back, never by setting the old number (which
// would stop the runtime following the CPUs the process may use); when
// nothing changed, nothing is set either way.
func TestApplyProcsRestoresDefault(t *testing.T) {
	var sets []int
	defaults := 0
	set := func(n int) { sets = append(sets, n) }
	setDefault := func() { defaults++ }

	restore := applyProcs(2, 4, set, setDefault)
	if len(sets) != 1 || sets[0] != 4 || defaults != 0 {
		t.Fatalf("applying 4 over 2: set %v, default %d times", sets, defaults)
	}
	restore()
	if len(sets) != 1 || defaults != 1 {
		t.Fatalf("undoing it: set %v (want only the 4), default %d times (want 1)", sets, defaults)
	}

	sets, defaults = nil, 0
	applyProcs(2, 2, set, setDefault)()
	if len(sets) != 0 || defaults != 0 {
		t.Fatalf("no change: set %v, default %d times", sets, defaults)
	}
}
