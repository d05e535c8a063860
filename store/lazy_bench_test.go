package store

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// BenchmarkAuditChainHead audits the tip of a 20,000-deep derivation
// chain at a branch head (the provenance walk, each artifact's trust, its
// payload), the head opened over its state map after a restart: the cost
// of a long read on a head that is not a copy of the state.
func BenchmarkAuditChainHead(b *testing.B) {
	const depth = 20_000
	ctx := context.Background()
	dir := b.TempDir()
	s := benchOpen(b, dir, true)
	if _, err := s.CreateContext(ctx, "chain", ModeObserve); err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < depth; lo += 2000 {
		var ops []graph.Op
		for i := lo; i < lo+2000; i++ {
			ops = append(ops, notePut(fmt.Sprintf("step-%06d", i), i, "step"))
			if i > 0 {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("step-%06d", i), Rel: "derived_from", To: fmt.Sprintf("step-%06d", i-1)})
			}
		}
		benchCommit(b, s, "chain", ops...)
	}
	s.Close()
	s = benchOpen(b, dir, true)
	defer s.Close()
	tip := fmt.Sprintf("step-%06d", depth-1)
	b.ResetTimer()
	for b.Loop() {
		if err := s.Read(ctx, "chain", "", func(v *View) error {
			rep, err := graph.Audit(v.State, tip, v.Trust.Explainer(v.State), v.DataOf(ctx), graph.AuditMeta{})
			if err == nil && len(rep.Artifacts) != depth {
				err = fmt.Errorf("audit reached %d artifacts", len(rep.Artifacts))
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditShallowBig audits an artifact with a short provenance
// (17 or 18 artifacts: artifact i derives from artifact i/2) at the head of a
// context of 100,000 artifacts, the head opened over its state map after
// a restart: what an audit costs when it reads little of a big context.
func BenchmarkAuditShallowBig(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, true)
	defer s.Close()
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		i := n/2 + (k*7919)%(n/2)
		leaf := treeID(i)
		if err := s.Read(ctx, "big", "", func(v *View) error {
			rep, _, err := v.Audit(ctx, leaf)
			if err == nil && len(rep.Artifacts) != bits.Len(uint(i))+1 {
				err = fmt.Errorf("audit reached %d artifacts", len(rep.Artifacts))
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDependentsOfHub reads the 50,000 edges into one artifact (a
// hub's dependents) at a head opened over its state map: cold, the store
// opened again before each read (untimed); warm, the same head read again.
func BenchmarkDependentsOfHub(b *testing.B) {
	const n = 50_000
	ctx := context.Background()
	dir := b.TempDir()
	s := benchOpen(b, dir, true)
	if _, err := s.CreateContext(ctx, "hub", ModeObserve); err != nil {
		b.Fatal(err)
	}
	benchCommit(b, s, "hub", notePut("hub", 0, "hub"))
	for lo := 0; lo < n; lo += 5000 {
		var ops []graph.Op
		for i := lo; i < lo+5000; i++ {
			id := fmt.Sprintf("d-%06d", i)
			ops = append(ops, notePut(id, i, "dependent"), graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: "hub"})
		}
		benchCommit(b, s, "hub", ops...)
	}
	s.Close()
	read := func(s *Store) {
		if err := s.Read(ctx, "hub", "", func(v *View) error {
			if !v.State.IsLazy() {
				return fmt.Errorf("the head was loaded whole")
			}
			if got := len(v.State.In("hub")); got != n {
				return fmt.Errorf("%d edges into the hub", got)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			s := benchOpen(b, dir, true)
			b.StartTimer()
			read(s)
			b.StopTimer()
			s.Close()
			b.StartTimer()
		}
	})
	b.Run("warm", func(b *testing.B) {
		s := benchOpen(b, dir, true)
		defer s.Close()
		read(s)
		for b.Loop() {
			read(s)
		}
	})
}

// treeID names artifact i of bigTree.
func treeID(i int) string { return fmt.Sprintf("t-%06d", i) }

// bigTree writes a context "big" of n artifacts t-000000… in commits of
// 5,000, artifact i derived_from artifact i/2, into a new store, and
// returns its directory and the commits.
func bigTree(b *testing.B, n int) (string, []*replay.Commit) {
	ctx := context.Background()
	dir := b.TempDir()
	s := benchOpen(b, dir, true)
	defer s.Close()
	if _, err := s.CreateContext(ctx, "big", ModeObserve); err != nil {
		b.Fatal(err)
	}
	id := treeID
	var commits []*replay.Commit
	for lo := 0; lo < n; lo += 5000 {
		var ops []graph.Op
		for i := lo; i < lo+5000; i++ {
			ops = append(ops, notePut(id(i), i, "node"))
			if i > 0 {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: id(i), Rel: "derived_from", To: id(i / 2)})
			}
		}
		commits = append(commits, benchCommit(b, s, "big", ops...))
	}
	return dir, commits
}

// BenchmarkReadAtOld reads one artifact and its trust at the commit
// before the head of a context of 100,000 artifacts (the state at that
// commit holds 95,000): what a GET …/artifacts/{id}?at= of an older commit
// costs.
func BenchmarkReadAtOld(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	dir, commits := bigTree(b, n)
	old := commits[len(commits)-2].ID.String()
	s := benchOpen(b, dir, true)
	defer s.Close()
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		id := treeID((k * 7919) % (n - 5000))
		if err := s.Read(ctx, "big", old, func(v *View) error {
			if v.State.Artifact(id) == nil {
				return fmt.Errorf("%s missing", id)
			}
			if tr := v.Trust.Explain(v.State, id); tr.Status != graph.StatusConfirmed {
				return fmt.Errorf("%s: %s", id, tr.Status)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAtOldWhole lists every artifact of the commit before the
// head of a context of 100,000 artifacts with its trust status: a whole
// read of an older commit (an export, a listing of every page).
func BenchmarkReadAtOldWhole(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	dir, commits := bigTree(b, n)
	old := commits[len(commits)-2].ID.String()
	s := benchOpen(b, dir, true)
	defer s.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Read(ctx, "big", old, func(v *View) error {
			seen := 0
			for _, a := range v.State.Artifacts() {
				if v.Trust.Status(a.ID) == graph.StatusConfirmed {
					seen++
				}
			}
			if seen != n-5000 || len(v.State.Edges()) != n-5001 {
				return fmt.Errorf("%d confirmed artifacts", seen)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditDeepBig audits, through View.Audit, the tip of a
// 20,000-deep chain hanging from the root of a 100,000-artifact tree, at
// the head opened over its map: a provenance past a 64th of the state, so
// the audit loads the state whole (View.Whole).
func BenchmarkAuditDeepBig(b *testing.B) {
	const n, depth = 100_000, 20_000
	ctx := context.Background()
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, true)
	step := func(i int) string { return fmt.Sprintf("c-%06d", i) }
	for lo := 0; lo < depth; lo += 5000 {
		var ops []graph.Op
		for i := lo; i < lo+5000; i++ {
			to := treeID(0)
			if i > 0 {
				to = step(i - 1)
			}
			ops = append(ops, notePut(step(i), i, "step"), graph.Op{Op: graph.OpLink, From: step(i), Rel: "derived_from", To: to})
		}
		benchCommit(b, s, "big", ops...)
	}
	s.Close()
	s = benchOpen(b, dir, true)
	defer s.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := s.Read(ctx, "big", "", func(v *View) error {
			rep, w, err := v.Audit(ctx, step(depth-1))
			if err == nil && (len(rep.Artifacts) != depth+1 || w.State.IsLazy()) {
				err = fmt.Errorf("audit reached %d artifacts, lazy %v", len(rep.Artifacts), w.State.IsLazy())
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerge merges a branch into main in a context of 5,000 and of
// 100,000 artifacts, each side having changed ten artifacts and added ten
// since they forked (one commit each, not timed): what a merge costs when
// it changes little of a context, small or big; and in the big one with
// 2,500 changed and 2,500 added a side, a merge of much. The store is
// reopened first, so the states are read as a restarted server reads
// them.
func BenchmarkMerge(b *testing.B) {
	for _, c := range []struct{ n, changes int }{{5_000, 10}, {100_000, 10}, {100_000, 2_500}} {
		b.Run(fmt.Sprintf("artifacts=%d/changes=%d", c.n, c.changes), func(b *testing.B) { benchMerge(b, c.n, c.changes) })
	}
}

func benchMerge(b *testing.B, n, changes int) {
	ctx := context.Background()
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, true)
	defer s.Close()
	side := func(k int, branch string, at int) []graph.Op {
		var ops []graph.Op
		for j := range changes {
			ops = append(ops, notePut(treeID((at+j*7919)%n), k, branch),
				notePut(fmt.Sprintf("%s-%d-%d", branch, k, j), j, "new"))
		}
		return ops
	}
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		b.StopTimer()
		head := benchCommit(b, s, "big", notePut("tick", k, "tick"))
		feature := fmt.Sprintf("f-%d", k)
		if err := s.CreateBranch(ctx, "big", feature, head.ID); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: "big", Branch: feature, Author: "bench", Message: "m", Ops: side(k, feature, k*31)}); err != nil {
			b.Fatal(err)
		}
		benchCommit(b, s, "big", side(k, "main", k*31+n/2)...)
		b.StartTimer()
		res, err := s.Merge(ctx, "big", DefaultBranch, feature, nil, "", "")
		if err != nil {
			b.Fatal(err)
		}
		if res.Kind != replay.MergeThreeWay || len(res.Ops) != 2*changes {
			b.Fatalf("merge %s with %d ops", res.Kind, len(res.Ops))
		}
	}
}

// BenchmarkCommitUnderReaders commits one artifact at a time to the head
// of a context of 100,000 artifacts, opened over its map after a restart,
// while reads keep overlapping commits (each reader holds its snapshot
// across the next two commits): the head is layered over the readers'
// states, and every few commits it must drop its layers.
func BenchmarkCommitUnderReaders(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, true)
	defer s.Close()
	var holds []chan struct{}
	errs := make(chan error, 4)
	release := func(upTo int) {
		for len(holds) > upTo {
			close(holds[0])
			holds = holds[1:]
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		hold, in := make(chan struct{}), make(chan struct{})
		holds = append(holds, hold)
		go func() {
			errs <- s.Read(ctx, "big", "", func(v *View) error {
				close(in)
				<-hold
				if v.State.Artifact(treeID(k%n)) == nil {
					return fmt.Errorf("%s missing", treeID(k%n))
				}
				return nil
			})
		}()
		<-in
		benchCommit(b, s, "big", notePut(fmt.Sprintf("r-%d", k), k, "under readers"),
			graph.Op{Op: graph.OpLink, From: fmt.Sprintf("r-%d", k), Rel: "derived_from", To: treeID((k * 7919) % n)})
		release(2)
	}
	b.StopTimer()
	release(0)
}

// BenchmarkCommitOneAtMillion makes one-artifact commits, each linked to
// a random earlier artifact, with every write synced, into a context of
// 1,000,000 artifacts and 999,999 edges built in commits of 5,000 just
// before (so Badger is still compacting what the build wrote, as after an
// agent's bulk load): the store's share of the one-artifact commit of the
// issue's 1M scenario, without HTTP. It reports the median and the 90th
// percentile besides the mean.
func BenchmarkCommitOneAtMillion(b *testing.B) {
	const n = 1_000_000
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, false)
	defer s.Close()
	var lat []time.Duration
	b.ResetTimer()
	for k := 0; b.Loop(); k++ {
		t0 := time.Now()
		benchCommit(b, s, "big", notePut(fmt.Sprintf("one-%d", k), k, "one"),
			graph.Op{Op: graph.OpLink, From: fmt.Sprintf("one-%d", k), Rel: "derived_from", To: treeID((k * 104729) % n)})
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
}

// BenchmarkBulkAtMillion commits 5,000 new artifacts, each derived_from
// a random one of the million before it, into the context
// BenchmarkCommitOneAtMillion builds (synced, while Badger still compacts
// the build): the store's share of a commit of the 1M scenario's last
// fifth, whose 5,000 lookups of random targets read leaves and branches
// of a map many times the node cache. Besides the time a commit it
// reports the process's CPU a commit (Badger's compactions included),
// which another tenant of the machine disturbs less.
func BenchmarkBulkAtMillion(b *testing.B) {
	const n = 1_000_000
	dir, _ := bigTree(b, n)
	s := benchOpen(b, dir, false)
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var cpu time.Duration
	k := 0
	for ; b.Loop(); k++ {
		b.StopTimer()
		ops := make([]graph.Op, 0, 10_000)
		for i := range 5000 {
			id := fmt.Sprintf("bulk-%d-%04d", k, i)
			ops = append(ops, notePut(id, i, "bulk"),
				graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: treeID(rng.IntN(n))})
		}
		b.StartTimer()
		cpu0, _ := processCPUTime()
		benchCommit(b, s, "big", ops...)
		cpu1, _ := processCPUTime()
		cpu += cpu1 - cpu0
	}
	if cpu > 0 && k > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(k), "cpu-ms/commit")
	}
}

// BenchmarkIngestMillion is the store's share of the 1M scenario's ingest
// (artifactd bench --scenario big) without HTTP: one context grown to
// 1,000,000 artifacts in synced commits of 5,000, artifact i derived_from
// a random earlier one (the scenario's seed and draws, other ids), in an
// enforce-mode context. Each iteration is the whole ingest into a new
// store; it reports the median commit of the first and the last fifth and
// their ratio, the ingest rates of the two fifths and the ratio of those
// rates (the scenario's rate_ratio_last_to_first), the process's CPU per
// artifact over each fifth, and the bytes the process wrote per commit
// over each fifth (/proc/self/io, where there is one: what the value log,
// the memtable logs and the compactions put on the disk). Run it with
// -benchtime 1x; it takes about a minute here.
func BenchmarkIngestMillion(b *testing.B) {
	const n, batch = 1_000_000, 5000
	commits := n / batch
	fifth := commits / 5
	for b.Loop() {
		ctx := context.Background()
		s := benchOpen(b, b.TempDir(), false)
		if _, err := s.CreateContext(ctx, "big", ModeEnforce); err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(20, 2))
		lat := make([]time.Duration, 0, commits)
		type mark struct {
			cpu     time.Duration
			cpuOK   bool
			written int64
			at      time.Duration
		}
		var marks []mark // at the start of each fifth and at the end
		took := time.Duration(0)
		for c := range commits {
			if c%fifth == 0 {
				cpu, ok := processCPUTime()
				marks = append(marks, mark{cpu, ok, writtenBytes(), took})
			}
			ops := make([]graph.Op, 0, 2*batch)
			for i := c * batch; i < (c+1)*batch; i++ {
				ops = append(ops, notePut(treeID(i), i, "node"))
				if i > 0 {
					ops = append(ops, graph.Op{Op: graph.OpLink, From: treeID(i), Rel: "derived_from", To: treeID(rng.IntN(i))})
				}
			}
			t0 := time.Now()
			benchCommit(b, s, "big", ops...)
			d := time.Since(t0)
			lat = append(lat, d)
			took += d
		}
		cpu, ok := processCPUTime()
		marks = append(marks, mark{cpu, ok, writtenBytes(), took})
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		median := func(ds []time.Duration) time.Duration {
			ds = slices.Clone(ds)
			slices.Sort(ds)
			return ds[len(ds)/2]
		}
		first, last := median(lat[:fifth]), median(lat[commits-fifth:])
		b.ReportMetric(float64(first.Microseconds())/1000, "first-fifth-p50-ms")
		b.ReportMetric(float64(last.Microseconds())/1000, "last-fifth-p50-ms")
		b.ReportMetric(float64(first)/float64(last), "p50-ratio")
		f, l := marks[0], marks[len(marks)-2]
		end := marks[len(marks)-1]
		rateFirst := float64(fifth*batch) / (marks[1].at - f.at).Seconds()
		rateLast := float64(fifth*batch) / (end.at - l.at).Seconds()
		b.ReportMetric(rateFirst, "first-fifth-artifacts/s")
		b.ReportMetric(rateLast, "last-fifth-artifacts/s")
		b.ReportMetric(rateLast/rateFirst, "rate-ratio")
		if f.cpuOK && end.cpuOK {
			b.ReportMetric(float64(marks[1].cpu-f.cpu)/float64(time.Microsecond)/float64(fifth*batch), "first-fifth-cpu-µs/artifact")
			b.ReportMetric(float64(end.cpu-l.cpu)/float64(time.Microsecond)/float64(fifth*batch), "last-fifth-cpu-µs/artifact")
		}
		if end.written > 0 {
			b.ReportMetric(float64(marks[1].written-f.written)/float64(fifth)/1e6, "first-fifth-MB-written/commit")
			b.ReportMetric(float64(end.written-l.written)/float64(fifth)/1e6, "last-fifth-MB-written/commit")
		}
	}
}

// writtenBytes is the bytes this process has caused to be written to
// storage (write_bytes of /proc/self/io), or 0 where there is no such
// file.
func writtenBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
