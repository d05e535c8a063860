package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/internal/testenv"
)

// scenario runs `artifactd bench --scenario ...` in-process and decodes
// its JSON twice: typed, and as a map to check the key set.
func scenario(t *testing.T, args ...string) (int, *scenarioResult, map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := Run(context.Background(), append([]string{"bench"}, args...), &out, &errb)
	if rc == exitUsage {
		return rc, nil, nil, errb.String()
	}
	var res scenarioResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s (stderr %s)", err, out.String(), errb.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return rc, &res, m, errb.String()
}

// keysOf returns the sorted keys of the JSON object at m[name] (m itself
// when name is empty).
func keysOf(t *testing.T, m map[string]any, name string) []string {
	t.Helper()
	obj := m
	if name != "" {
		o, ok := m[name].(map[string]any)
		if !ok {
			t.Fatalf("%q is not an object: %v", name, m[name])
		}
		obj = o
	}
	var ks []string
	for k := range obj {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

var commonKeys = []string{"artifacts", "commits", "contexts", "cpu_ns", "cut", "edges", "elapsed_ns", "errors", "params", "scenario", "target"}

// TestScenarios runs every scenario at a tiny size against the in-process
// server and checks the shape of the result (the keys the benchmark docs
// quote) and that its counts add up. Timings are not asserted.
func TestScenarios(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		figures []string
		check   func(t *testing.T, r *scenarioResult)
	}{
		{"runs", []string{"--runs", "4", "--artifacts", "5", "--clients", "2"},
			[]string{"half", "one_artifact_commits", "rss_at_full_bytes", "rss_at_half_bytes", "rss_ratio_full_to_half", "runs_done"},
			func(t *testing.T, r *scenarioResult) {
				f := r.Runs
				if f.RunsDone != 4 || f.Half != 2 || r.Contexts != 4 || r.Commits != 4*5 || r.Artifacts != 4*5 || r.Edges != 4*4 {
					t.Fatalf("counts: %+v %+v", r, f)
				}
				if f.Commits1.N != 20 || f.RSSHalf <= 0 || f.RSSFull <= 0 || f.Ratio <= 0 {
					t.Fatalf("figures: %+v", f)
				}
				if len(r.RSS) != 2 || r.RSS[0].At != 2 || r.RSS[1].At != 4 {
					t.Fatalf("samples: %+v", r.RSS)
				}
			}},
		{"cold", []string{"--artifacts", "250", "--batch", "100"},
			[]string{"artifacts", "first_commit_cpu_ns", "first_commit_ns", "first_read_cpu_ns", "first_read_ns", "load_ns", "restart_ns", "rss_after_first_commit_bytes", "rss_after_first_read_bytes", "rss_loaded_bytes", "second_commit_ns", "second_read_ns"},
			func(t *testing.T, r *scenarioResult) {
				f := r.Cold
				// 3 bulk commits (100+100+50) and 2 one-artifact commits.
				if f.Artifacts != 250 || r.Commits != 3+2 || r.Artifacts != 252 || r.Edges != 249+2 {
					t.Fatalf("counts: %+v %+v", r, f)
				}
				if f.FirstCommitNS <= 0 || f.FirstReadNS <= 0 || f.RSSAfterCommit <= 0 || f.RSSAfterRead <= 0 || f.RestartNS <= 0 {
					t.Fatalf("figures: %+v", f)
				}
			}},
		{"big", []string{"--artifacts", "550", "--batch", "100"},
			[]string{"artifacts", "commit_cpu_ns", "commit_ns", "fifth_commits", "first_fifth_artifacts_per_cpu_s", "first_fifth_artifacts_per_s", "last_fifth_artifacts_per_cpu_s", "last_fifth_artifacts_per_s", "one_artifact_commits", "one_artifact_commits_between_others", "other_context_commits", "rate_ratio_last_to_first", "rss_end_bytes"},
			func(t *testing.T, r *scenarioResult) {
				f := r.Big
				// 6 bulk commits (5×100 + 50), a fifth of them rounded is 1;
				// 200 one-artifact commits; 3 small contexts of 101
				// artifacts, then 200 pairs of one-artifact commits.
				if f.Artifacts != 550 || r.Contexts != 1+3 || len(f.CommitNS) != 6 || len(f.CommitCPU) != 6 || f.FifthCommits != 1 || r.Commits != 6+200+3+400 || r.Artifacts != 750+303+400 || r.Edges != 549+200+300+400 {
					t.Fatalf("counts: %+v %+v", r, f)
				}
				if f.TipCommits.N != 200 || f.AltCommits.N != 200 || f.OtherCommits.N != 200 || f.FirstFifthRate <= 0 || f.LastFifthRate <= 0 || f.RateRatio <= 0 || f.RSSEnd <= 0 {
					t.Fatalf("figures: %+v", f)
				}
			}},
		{"chain", []string{"--depth", "250", "--batch", "100"},
			[]string{"commit_cpu_ns", "commit_ns", "depth", "first_commit_ns", "last_commit_ns", "ratio_last_to_first", "tip_commits"},
			func(t *testing.T, r *scenarioResult) {
				f := r.Chain
				if f.Depth != 250+100 || len(f.CommitNS) != 3 || r.Commits != 3+100 || r.Artifacts != 350 || r.Edges != 349 {
					t.Fatalf("counts: %+v %+v", r, f)
				}
				if f.FirstNS != f.CommitNS[0] || f.LastNS != f.CommitNS[2] || f.TipCommits.N != 100 || f.Ratio <= 0 {
					t.Fatalf("figures: %+v", f)
				}
			}},
		{"hub", []string{"--depth", "120", "--batch", "50"},
			[]string{"audit_bytes", "audit_cpu_ns", "audit_ns", "chain_build_ns", "chain_depth", "dependents", "hub_commits", "same_context_during_audit", "unrelated_during_audit", "unrelated_during_last_commit", "unrelated_writes"},
			func(t *testing.T, r *scenarioResult) {
				f := r.Hub
				if f.Dependents != 5*50 || len(f.Commits) != 5 || f.Commits[4].Dependents != 250 || f.ChainDepth != 120 || r.Contexts != 3 || r.Params.ChainBatch != 2000 {
					t.Fatalf("counts: %+v %+v", r, f)
				}
				// The verdict and the hub, 5 hub commits, one chain commit (120 ≤ 2000),
				// every unrelated write and every write to the audited context; at
				// least one write per measured window.
				if f.DuringCommit.N < 1 || f.DuringAudit.N < 1 || f.SameDuringAudit.N < 1 || f.UnrelatedTotal < int64(1+f.DuringCommit.N+f.DuringAudit.N) {
					t.Fatalf("writer: %+v", f)
				}
				same := int64(f.SameDuringAudit.N) // the audited context's own writer
				if r.Commits != 2+5+1+f.UnrelatedTotal+same || r.Artifacts != 2+250+120+f.UnrelatedTotal+same || r.Edges != 1+250+119 {
					t.Fatalf("counts: %+v", r)
				}
				if f.AuditNS <= 0 || f.AuditBytes == 0 || !slices.IsSortedFunc(f.Commits, func(a, b hubCommit) int { return int(a.Dependents - b.Dependents) }) {
					t.Fatalf("figures: %+v", f)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, res, m, stderr := scenario(t, append([]string{"--scenario", tc.name, "--data", t.TempDir()}, tc.args...)...)
			if rc != exitOK {
				t.Fatalf("exit %d: %+v %s", rc, res, stderr)
			}
			if res.Scenario != tc.name || res.Cut || res.CutIn != "" || res.Errors != 0 || !strings.HasPrefix(res.Target, "http://127.0.0.1:") {
				t.Fatalf("result %+v", res)
			}
			// The in-process server's resident size is read (Linux), its
			// peak in every scenario, samples where the scenario takes them.
			want := append(slices.Clone(commonKeys), "rss_peak_bytes", "rss_peak_since")
			if _, ok := m["rss"]; ok {
				want = append(want, "rss")
			}
			want = append(want, tc.name)
			slices.Sort(want)
			if got := keysOf(t, m, ""); !slices.Equal(got, want) {
				t.Fatalf("keys %v, want %v", got, want)
			}
			if got := keysOf(t, m, tc.name); !slices.Equal(got, tc.figures) {
				t.Fatalf("%s keys %v, want %v", tc.name, got, tc.figures)
			}
			for i := 1; i < len(res.RSS); i++ {
				if res.RSS[i].At < res.RSS[i-1].At || res.RSS[i].Bytes <= 0 {
					t.Fatalf("samples not in order: %+v", res.RSS)
				}
			}
			// The peak is the high-water mark over the run, reset as it
			// began (a process may reset its own): no sample is above it.
			if res.RSSPeakSince != "run" || res.RSSPeak <= 0 {
				t.Fatalf("peak %d since %q, want one since the run", res.RSSPeak, res.RSSPeakSince)
			}
			for _, s := range res.RSS {
				if s.Bytes > res.RSSPeak {
					t.Fatalf("sample %+v above the peak %d", s, res.RSSPeak)
				}
			}
			// An in-process server's samples carry its Go memory, which
			// is part of its resident size.
			for _, s := range res.RSS {
				g := s.Go
				if g == nil || g.Live <= 0 || g.Goal <= 0 || g.Total < g.Free+g.Released || g.Limit <= 0 || g.Cached < 0 {
					t.Fatalf("Go memory of sample %+v: %+v", s, g)
				}
			}
			tc.check(t, res)
		})
	}
}

// TestScenarioCut: a deadline ends a chain that cannot finish; the result
// says where, and counts only what was acknowledged.
func TestScenarioCut(t *testing.T) {
	rc, res, _, stderr := scenario(t, "--scenario", "chain", "--data", t.TempDir(), "--depth", "1000000", "--batch", "500", "--timeout", "1500ms")
	if rc != exitOK || !res.Cut || res.CutIn != "chain" || !strings.Contains(stderr, "cut by --timeout") {
		t.Fatalf("exit %d: %+v %s", rc, res, stderr)
	}
	f := res.Chain
	if int(f.Depth) != 500*len(f.CommitNS) || res.Commits != int64(len(f.CommitNS)) || res.Artifacts != f.Depth || f.TipCommits.N != 0 {
		t.Fatalf("counts: %+v %+v", res, f)
	}
}

// TestScenarioAddr runs a scenario against a server it did not start, with
// and without the server's pid.
func TestScenarioAddr(t *testing.T) {
	srv, err := newBenchServer(context.Background(), t.TempDir(), benchStore{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.close(); err != nil {
			t.Error(err)
		}
	})
	for _, withPid := range []bool{false, true} {
		args := []string{"--scenario", "chain", "--addr", srv.base + "/", "--depth", "30", "--batch", "10"}
		if withPid {
			args = append(args, "--pid", strconv.Itoa(os.Getpid()))
		}
		rc, res, _, stderr := scenario(t, args...)
		if rc != exitOK || res.Target != srv.base || res.Chain.Depth != 130 || withPid != (len(res.Chain.CommitCPU) == 3) {
			t.Fatalf("exit %d: %+v %s", rc, res, stderr)
		}
		if withPid != (res.RSSNote == "") {
			t.Fatalf("pid %v: note %q", withPid, res.RSSNote)
		}
		if withPid != (res.RSSPeak > 0 && res.RSSPeakSince == "run") || !withPid && res.RSSPeakSince != "" {
			t.Fatalf("pid %v: peak %d since %q", withPid, res.RSSPeak, res.RSSPeakSince)
		}
		// A server elsewhere has its resident size read, not its Go memory.
		for _, s := range res.RSS {
			if s.Go != nil {
				t.Fatalf("pid %v: Go memory of a server elsewhere: %+v", withPid, s)
			}
		}
	}
}

// TestScenarioHubChainBatch: --chain-batch sets the commit size of the
// chain the hub scenario audits (120 links in commits of 40: three
// commits), and --trace writes an execution trace of the scenario.
func TestScenarioHubChainBatch(t *testing.T) {
	tracePath := filepath.Join(t.TempDir(), "hub.trace")
	rc, r, _, stderr := scenario(t, "--scenario", "hub", "--data", t.TempDir(), "--depth", "120", "--batch", "50", "--chain-batch", "40", "--trace", tracePath)
	if rc != exitOK {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	f := r.Hub
	same := int64(f.SameDuringAudit.N)
	if r.Params.ChainBatch != 40 || f.ChainDepth != 120 || r.Commits != 2+5+3+f.UnrelatedTotal+same {
		t.Fatalf("params %+v, chain depth %d, commits %d (unrelated %d, same %d)", r.Params, f.ChainDepth, r.Commits, f.UnrelatedTotal, same)
	}
	b, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	// An execution trace opens with its format's header ("go 1.N trace")
	// and holds the run's events after it.
	if !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 64<<10 {
		t.Fatalf("trace of %d bytes, starting %q", len(b), b[:min(len(b), 16)])
	}
}

// TestScenarioUsage: refused command lines exit 2 and say why.
func TestScenarioUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "nope"}, "unknown --scenario"},
		{[]string{"--scenario", "cold", "--addr", "http://127.0.0.1:1"}, "cannot restart"},
		{[]string{"--scenario", "runs", "--addr", "http://10.1.2.3:7070"}, "loopback"},
		{[]string{"--scenario", "runs", "--addr", "ftp://127.0.0.1:1"}, "not an http"},
		{[]string{"--scenario", "runs", "--pid", "1"}, "--pid names the server"},
		{[]string{"--scenario", "runs", "--artifacts", "1"}, "--artifacts ≥ 2"},
		{[]string{"--scenario", "big", "--batch", "-1"}, "negative"},
		{[]string{"--scenario", "hub", "--chain-batch", "-1"}, "negative"},
		{[]string{"--scenario", "hub", "--chain-batch", "50001"}, "chain-batch ≤ 50000"},
		{[]string{"--scenario", "chain", "--chain-batch", "100"}, "--chain-batch is for the hub scenario"},
		{[]string{"--scenario", "hub", "--trace", "/nonexistent-dir/trace.out"}, "nonexistent-dir"},
		{[]string{"--scenario", "chain", "--timeout", "0s"}, "--timeout"},
		{[]string{"--scenario", "hub", "--clients", "1000"}, "--clients"},
		{[]string{"--scenario", "soak", "--duration", "-1s"}, "--duration must not be negative"},
		{[]string{"--scenario", "runs", "--addr", "http://127.0.0.1:1", "--value-threshold", "256"}, "not with --addr"},
		{[]string{"--scenario", "runs", "--addr", "http://127.0.0.1:1", "--cache-bytes", "1000000"}, "not with --addr"},
		{[]string{"--scenario", "big", "--value-threshold", "2000000"}, "--value-threshold must be"},
		{[]string{"--scenario", "big", "--value-threshold", "-2"}, "--value-threshold must be"},
		{[]string{"--scenario", "big", "--mapped-bytes", "-5"}, "--mapped-bytes must be"},
		{[]string{"--scenario", "big", "--cache-bytes", "-1"}, "--cache-bytes must be"},
		{[]string{"--scenario", "big", "--cache-bytes", "1000"}, "at least 1 MiB"},
		{[]string{"--scenario", "big", "--table-bytes", "65535"}, "--table-bytes must be"},
		{[]string{"--scenario", "big", "--table-bytes", "67108865"}, "--table-bytes must be"},
		{[]string{"--scenario", "runs", "--addr", "http://127.0.0.1:1", "--table-bytes", "1048576"}, "not with --addr"},
	} {
		rc, _, _, stderr := scenario(t, tc.args...)
		if rc != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, rc, stderr, tc.want)
		}
	}
}

// TestScenarioSoak runs the soak for a few seconds: every kind of the mix
// ran and answered as expected (no error but the intended 409s), each kind
// has its latencies, and the RSS curve has its first and last samples.
func TestScenarioSoak(t *testing.T) {
	rc, r, m, stderr := scenario(t, "--scenario", "soak", "--duration", "4s", "--clients", "4")
	if rc != exitOK || r.Errors != 0 || r.Cut {
		t.Fatalf("exit %d, %d errors (%s), cut %v: %s", rc, r.Errors, r.FirstErr, r.Cut, stderr)
	}
	f := r.Soak
	if f == nil || f.Contexts != soakContexts || r.Params.Clients != 4 {
		t.Fatalf("figures %+v", f)
	}
	if got := keysOf(t, m, "soak"); !slices.Equal(got, []string{"contexts", "duration_ns", "intended_409", "kinds", "requests", "rss_end", "rss_max", "rss_start"}) {
		t.Fatalf("soak keys %v", got)
	}
	var n int64
	for _, k := range soakKinds {
		sk, ok := f.Kinds[k.name]
		if !ok || sk.Errors != 0 {
			t.Fatalf("kind %s: %+v", k.name, sk)
		}
		if k.name != "stale_write" && k.name != "merge" && k.name != "effect" && sk.Intended != 0 {
			t.Fatalf("kind %s has intended 409s: %+v", k.name, sk)
		}
		n += int64(sk.N)
	}
	for _, k := range []string{"artifact", "commit", "fetch", "tool_result", "log", "artifact_read"} {
		if sk := f.Kinds[k]; sk.N == 0 || sk.P50 <= 0 || sk.P99 < sk.P50 {
			t.Fatalf("kind %s: %+v", k, sk)
		}
	}
	if n != f.Requests || r.Commits < int64(f.Kinds["commit"].N) || len(r.RSS) < 2 || r.RSS[0].At != 0 || f.RSSMax < f.RSSStart {
		t.Fatalf("requests %d of %d, commits %d, rss %+v", n, f.Requests, r.Commits, r.RSS)
	}
}

// TestRSSReader reads VmRSS from status files of the /proc shape.
func TestRSSReader(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		status string
		want   int64
	}{
		{"Name:\tx\nVmPeak:\t  9 kB\nVmRSS:\t  123456 kB\nThreads: 3\n", 123456 * 1024},
		{"Name:\tx\nVmRSS:\n", 0},
		{"Name:\tx\nVmRSS:\tlots kB\n", 0},
		{"Name:\tx\n", 0},
	} {
		p := filepath.Join(dir, "status")
		if err := os.WriteFile(p, []byte(tc.status), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := (rssReader{path: p}).read(); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.status, got, tc.want)
		}
	}
	if got := (rssReader{path: filepath.Join(dir, "absent")}).read(); got != 0 {
		t.Errorf("absent file: %d", got)
	}
	if got := (rssReader{}).read(); got != 0 {
		t.Errorf("no path: %d", got)
	}
}

// TestCPUReader reads utime + stime from stat files of the /proc shape,
// whose command name may hold spaces and parentheses.
func TestCPUReader(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		stat string
		want time.Duration
	}{
		{"42 (artifactd) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 200\n", 3250 * time.Millisecond},
		{"42 (a (b) c) R 1 42 42 0 -1 0 0 0 0 0 1 2 0 0\n", 30 * time.Millisecond},
		{"42 (short) S 1 2\n", 0},
		{"no parenthesis\n", 0},
		{"42 (x) S 1 42 42 0 -1 0 0 0 0 0 u s\n", 0},
	} {
		p := filepath.Join(dir, "stat")
		if err := os.WriteFile(p, []byte(tc.stat), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := (cpuReader{path: p}).read(); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.stat, got, tc.want)
		}
	}
	if got := (cpuReader{path: "/proc/self/stat"}).read(); got <= 0 {
		testenv.Missing(t, "no /proc/self/stat here (%v)", got)
	}
}

// TestScenarioDisk: the disk scenario times synced appends alone and
// during synced bulk writes, writes nothing through the server, and
// leaves no file in the data directory; it refuses a remote server, whose
// disk it cannot reach.
func TestScenarioDisk(t *testing.T) {
	dir := t.TempDir()
	rc, res, m, stderr := scenario(t, "--scenario", "disk", "--data", dir, "--duration", "400ms")
	if rc != exitOK || res.Cut || res.Errors != 0 || res.Disk == nil {
		t.Fatalf("exit %d: %+v %s", rc, res, stderr)
	}
	if got, want := keysOf(t, m, "disk"), []string{"append_bytes", "bulk_bytes", "bulk_write_and_sync", "sync_alone", "sync_during_bulk"}; !slices.Equal(got, want) {
		t.Fatalf("disk keys %v, want %v", got, want)
	}
	f := res.Disk
	if f.Alone.N == 0 || f.DuringBulk.N == 0 || f.Bulk.N == 0 || f.Alone.P50 <= 0 || f.Alone.Max < f.Alone.P99 || f.Bulk.P50 <= 0 {
		t.Fatalf("figures: %+v", f)
	}
	if f.AppendBytes != diskAppendBytes || f.BulkBytes != diskBulkBytes || res.Commits != 0 || res.Contexts != 0 {
		t.Fatalf("result %+v %+v", res, f)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "disk-probe-") {
			t.Fatalf("the probe left %s in the data directory", e.Name())
		}
	}
	if rc, _, _, stderr := scenario(t, "--scenario", "disk", "--addr", "http://127.0.0.1:1"); rc != exitUsage || !strings.Contains(stderr, "not with --addr") {
		t.Fatalf("with --addr: exit %d, %s", rc, stderr)
	}
}

// TestScenarioStoreOptions: the in-process server opens its store with
// serve's --value-threshold, --mapped-bytes, --cache-bytes and
// --table-bytes, and the result names them. The same chain kept in the
// tree (-1) leaves Badger's value log next to empty; with a 64-byte
// threshold its state-map nodes and op chunks land there. (That every
// flag reaches store.Options is TestBenchStoreOptionsEveryField; that the
// table size reaches Badger is store's TestTableBytes.)
func TestScenarioStoreOptions(t *testing.T) {
	vlogBytes := func(dir string) int64 {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no value log in %s: %v", dir, err)
		}
		var n int64
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
		return n
	}
	sizes := map[string]int64{}
	for _, vt := range []string{"-1", "64"} {
		dir := t.TempDir()
		rc, res, m, stderr := scenario(t, "--scenario", "chain", "--depth", "300", "--batch", "100", "--data", dir,
			"--value-threshold", vt, "--mapped-bytes", "-1", "--cache-bytes", strconv.Itoa(32<<20), "--table-bytes", "131072")
		if rc != exitOK || res.Errors != 0 {
			t.Fatalf("value threshold %s: exit %d: %s", vt, rc, stderr)
		}
		want := benchStore{ValueThreshold: map[string]int64{"-1": -1, "64": 64}[vt], MappedBytes: -1, CacheBytes: 32 << 20, TableBytes: 128 << 10}
		if res.Params.Store == nil || *res.Params.Store != want {
			t.Fatalf("value threshold %s: params.store %+v, want %+v", vt, res.Params.Store, want)
		}
		if got := keysOf(t, m["params"].(map[string]any), "store"); !slices.Equal(got, []string{"cache_bytes", "mapped_bytes", "table_bytes", "value_threshold"}) {
			t.Fatalf("params.store keys %v", got)
		}
		sizes[vt] = vlogBytes(dir)
	}
	t.Logf("value log after the same chain: %d bytes in the tree (-1), %d with a 64-byte threshold", sizes["-1"], sizes["64"])
	if sizes["64"] < 10*sizes["-1"] || sizes["64"] < 100_000 {
		t.Fatalf("value log: %d bytes with every value in the tree, %d with a 64-byte threshold", sizes["-1"], sizes["64"])
	}
	if rc, res, m, _ := scenario(t, "--scenario", "chain", "--depth", "20", "--batch", "10"); rc != exitOK || res.Params.Store != nil || slices.Contains(keysOf(t, m, "params"), "store") {
		t.Fatalf("defaults: exit %d, params %+v", rc, res.Params)
	}
}

// TestBenchStoreOptionsEveryField: each of the in-process server's store
// flags reaches the store.Options field of its name — a field added to
// benchStore and left out of storeOptions fails here, not silently in a
// benchmark that never had the setting it names.
func TestBenchStoreOptionsEveryField(t *testing.T) {
	var o benchStore
	ov := reflect.ValueOf(&o).Elem()
	for i := range ov.NumField() {
		switch f := ov.Field(i); f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(int64(1<<20 + 4096*(i+1))) // distinct, so two fields swapped fail too
		default:
			t.Fatalf("benchStore.%s: kind %s has no test value", ov.Type().Field(i).Name, f.Kind())
		}
	}
	so := o.storeOptions("some-dir")
	sv := reflect.ValueOf(so)
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Name
		f := sv.FieldByName(name)
		if !f.IsValid() {
			t.Fatalf("store.Options has no field %s", name)
		}
		if !f.Equal(ov.Field(i)) {
			t.Errorf("store.Options.%s = %v, want %v (benchStore.%s)", name, f, ov.Field(i), name)
		}
	}
	if so.Dir != "some-dir" || so.Logger == nil {
		t.Errorf("Dir %q, Logger %v: want the server's directory and a logger", so.Dir, so.Logger)
	}
}
