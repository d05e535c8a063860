package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/badgerkv"
)

// Benchmarks of the commit and read paths (issue 2). Commits are durable
// (one fsync per group) unless a name says otherwise. Results and the
// commands that produced them are in docs/BENCHMARKS.md.
//
//	go test -run '^$' -bench . -benchtime 2s ./store/

// benchFixtures holds data directories shared by benchmarks of one run;
// TestMain removes them.
var benchFixtures struct {
	mu   sync.Mutex
	dirs []string
}

func benchDir(b *testing.B, name string) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "artifactd-bench-"+name+"-")
	if err != nil {
		b.Fatal(err)
	}
	benchFixtures.mu.Lock()
	benchFixtures.dirs = append(benchFixtures.dirs, dir)
	benchFixtures.mu.Unlock()
	return dir
}

func removeBenchFixtures() {
	benchFixtures.mu.Lock()
	defer benchFixtures.mu.Unlock()
	for _, d := range benchFixtures.dirs {
		os.RemoveAll(d)
	}
}

// notePut is a put of a small note whose canonical data is built directly
// (the fixtures need hundreds of thousands of them).
func notePut(id string, n int, text string) graph.Op {
	data := []byte(`{"n":` + strconv.Itoa(n) + `,"text":"` + text + `"}`)
	return graph.Op{Op: graph.OpPut, ID: id, Type: "note", ProducedBy: "bench", Data: data}
}

func bulkOps(prefix string, n int) []graph.Op {
	ops := make([]graph.Op, n)
	for i := range ops {
		ops[i] = notePut(fmt.Sprintf("%s%06d", prefix, i), i, "a note of some length, like an extracted claim")
	}
	return ops
}

func benchOpen(b *testing.B, dir string, noSync bool) *Store {
	b.Helper()
	s, err := Open(context.Background(), Options{Dir: dir, Clock: testClock(), NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchCommit(b *testing.B, s *Store, ctxID string, ops ...graph.Op) *replay.Commit {
	res, err := s.Commit(context.Background(), CommitRequest{Context: ctxID, Author: "bench", Message: "m", Ops: ops})
	if err != nil {
		b.Fatal(err)
	}
	return res.Commit
}

// cpuMeter reports, next to a benchmark's wall-clock figures, the CPU
// time the whole process used over the timed loop (the committer, Badger's
// writer and compactions, the GC), per unit of work.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := processCPUTime()
	return cpuMeter{start: t, ok: ok}
}

// report adds "cpu-µs/<unit>" for n units of work.
func (m cpuMeter) report(b *testing.B, n int, unit string) {
	end, ok := processCPUTime()
	if !m.ok || !ok || n == 0 {
		return
	}
	b.ReportMetric(float64(end-m.start)/float64(time.Microsecond)/float64(n), "cpu-µs/"+unit)
}

// settle waits (up to 30 s) until the process is nearly idle, so that
// Badger's flushes and compactions of a fixture's bulk load do not run
// inside the timed loop.
func settle(b *testing.B) {
	b.Helper()
	runtime.GC()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		c0, ok := processCPUTime()
		if !ok {
			time.Sleep(2 * time.Second)
			return
		}
		time.Sleep(250 * time.Millisecond)
		if c1, _ := processCPUTime(); c1-c0 < 10*time.Millisecond {
			return
		}
	}
	b.Log("the process did not settle in 30 s: background work may be measured")
}

// BenchmarkCommitSingle is the latency of a durable one-artifact commit
// (an update of an existing artifact) in contexts of 1k, 10k and 100k
// artifacts. Goal: within 1.2x of each other.
func BenchmarkCommitSingle(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		name := fmt.Sprintf("%dk", n/1000)
		dir := benchDir(b, "single-"+name)
		s := benchOpen(b, dir, false)
		if _, err := s.CreateContext(context.Background(), "c", ModeObserve); err != nil {
			b.Fatal(err)
		}
		benchCommit(b, s, "c", bulkOps("doc:", n)...)
		// Reopen, so that every size starts with an empty memtable (Close
		// writes it to a table), and compact the tables now, so that the
		// loop does not pay for flushing or compacting the fixture; then
		// load the head.
		s.Close()
		s = benchOpen(b, dir, false)
		if err := s.kv.(*badgerkv.Driver).Flatten(2); err != nil {
			b.Fatal(err)
		}
		benchCommit(b, s, "c", notePut("doc:000000", -1, "warm-up"))
		settle(b)
		// seq keeps counting across the runs of the sub-benchmark that
		// -count makes on this store, so that no put repeats the content
		// it replaces (a no-op commit writes nothing).
		seq := 0
		b.Run(name, func(b *testing.B) {
			i := 0
			var cpu cpuMeter
			for b.Loop() {
				if i == 0 {
					cpu = startCPU()
				}
				c := benchCommit(b, s, "c", notePut(fmt.Sprintf("doc:%06d", (seq*7919)%n), seq, "updated"))
				if c.Artifacts != n {
					b.Fatalf("head has %d artifacts", c.Artifacts)
				}
				i++
				seq++
			}
			cpu.report(b, i, "commit")
		})
		s.Close()
		os.RemoveAll(dir)
	}
}

// BenchmarkCommitBulk10k commits 10,000 new artifacts in one commit, each
// iteration in a fresh context and with payloads not stored before (as an
// agent's new results are). Goal: >= 150k artifacts/s.
func BenchmarkCommitBulk10k(b *testing.B) {
	const n = 10_000
	s := benchOpen(b, b.TempDir(), false)
	defer s.Close()
	i := 0
	var spent, cpuSpent time.Duration
	for b.Loop() {
		b.StopTimer()
		ctxID := fmt.Sprintf("bulk-%d", i)
		ops := make([]graph.Op, n)
		for k := range ops {
			ops[k] = notePut(fmt.Sprintf("doc:%06d", k), k, "bulk payload of iteration "+strconv.Itoa(i))
		}
		i++
		if _, err := s.CreateContext(context.Background(), ctxID, ModeObserve); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		cpu0, _ := processCPUTime()
		c := benchCommit(b, s, ctxID, ops...)
		cpu1, _ := processCPUTime()
		spent += time.Since(t0)
		cpuSpent += cpu1 - cpu0
		if c.Artifacts != n {
			b.Fatalf("commit has %d artifacts", c.Artifacts)
		}
	}
	b.ReportMetric(float64(n*i)/spent.Seconds(), "artifacts/s")
	if cpuSpent > 0 {
		b.ReportMetric(float64(n*i)/cpuSpent.Seconds(), "artifacts/cpu-s")
	}
}

// BenchmarkCommitStoredPayloads commits, each iteration into a new
// context, 500 artifacts whose 16 KiB payloads another context stored
// already — an agent run again in a context of its own, its documents
// unchanged. The committer writes only payloads it does not find stored,
// so what this measures beyond a bulk commit is how it finds them.
func BenchmarkCommitStoredPayloads(b *testing.B) {
	const n, size = 500, 16 << 10
	s := benchOpen(b, b.TempDir(), false)
	defer s.Close()
	ops := make([]graph.Op, n)
	for k := range ops {
		text := strings.Repeat(fmt.Sprintf("document %d of a run, ", k), size/16)
		ops[k] = notePut(fmt.Sprintf("doc:%04d", k), k, text[:size])
	}
	ctx := context.Background()
	create := func(id string) {
		if _, err := s.CreateContext(ctx, id, ModeObserve); err != nil {
			b.Fatal(err)
		}
	}
	create("first")
	benchCommit(b, s, "first", ops...)
	i := 0
	for b.Loop() {
		b.StopTimer()
		ctxID := fmt.Sprintf("again-%d", i)
		create(ctxID)
		i++
		b.StartTimer()
		if c := benchCommit(b, s, ctxID, ops...); c.Artifacts != n {
			b.Fatalf("commit has %d artifacts", c.Artifacts)
		}
	}
}

// BenchmarkGroupCommit runs 16 concurrent committers of one-artifact
// durable commits, on one branch or on 16 contexts. Group commit turns
// them into few fsyncs.
func BenchmarkGroupCommit(b *testing.B) {
	const clients = 16
	for _, shape := range []string{"one-branch", "16-contexts"} {
		b.Run(shape, func(b *testing.B) {
			s := benchOpen(b, b.TempDir(), false)
			defer s.Close()
			ctxOf := func(c int) string {
				if shape == "one-branch" {
					return "c0"
				}
				return fmt.Sprintf("c%d", c)
			}
			for c := 0; c < clients; c++ {
				if c == 0 || shape != "one-branch" {
					if _, err := s.CreateContext(context.Background(), ctxOf(c), ModeObserve); err != nil {
						b.Fatal(err)
					}
				}
			}
			var next atomic.Int64
			var client atomic.Int64
			procs := runtime.GOMAXPROCS(0)
			b.SetParallelism((clients + procs - 1) / procs)
			b.ResetTimer()
			t0 := time.Now()
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				c := int(client.Add(1)-1) % clients
				for pb.Next() {
					i := next.Add(1)
					op := notePut(fmt.Sprintf("w%d-%d", c, i), int(i), "x")
					if _, err := s.Commit(context.Background(), CommitRequest{Context: ctxOf(c), Ops: []graph.Op{op}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "commits/s")
			cpu.report(b, b.N, "commit")
		})
	}
}

// BenchmarkCommitSerial is one client committing one artifact at a time,
// durably: the single-client commit rate.
func BenchmarkCommitSerial(b *testing.B) {
	s := benchOpen(b, b.TempDir(), false)
	defer s.Close()
	if _, err := s.CreateContext(context.Background(), "c", ModeObserve); err != nil {
		b.Fatal(err)
	}
	i := 0
	var t0 time.Time
	var cpu cpuMeter
	for b.Loop() {
		if i == 0 {
			t0, cpu = time.Now(), startCPU()
		}
		benchCommit(b, s, "c", notePut(fmt.Sprintf("a%d", i), i, "x"))
		i++
	}
	b.ReportMetric(float64(i)/time.Since(t0).Seconds(), "commits/s")
	cpu.report(b, i, "commit")
}

// BenchmarkSync measures the floor of a durable commit on this disk.
// "badger" is a one-artifact group's write at the driver: a Commit of 15
// records of 280 bytes (the records such a group writes into a 1M
// context: commit record, seq entry, ops chunk, payload and a dozen
// state-map nodes), synced; "badger-nosync" the same without syncs, so
// the difference is what the syncs cost. "fsync" is a 4 KiB write and an
// fsync of one file; "fsync+clean" the same followed by an fsync of a
// second file nothing was written to. A synced Badger write makes both
// calls: it syncs its value log whether the write put anything there or
// not, then its memtable log, and a file system may flush the device's
// cache even for a file with nothing dirty.
func BenchmarkSync(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		name := "badger"
		if noSync {
			name = "badger-nosync"
		}
		b.Run(name, func(b *testing.B) {
			s := benchOpen(b, b.TempDir(), noSync)
			defer s.Close()
			val := make([]byte, 280)
			i := 0
			for b.Loop() {
				recs := make([]kv.Record, 15)
				for j := range recs {
					binary.BigEndian.PutUint64(val, uint64(i*len(recs)+j))
					recs[j] = kv.Record{Key: fmt.Appendf(nil, "bench-sync-%d-%d", i, j), Value: bytes.Clone(val)}
				}
				if err := s.kv.Commit(context.Background(), kv.Batch{Sets: recs}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	create := func(b *testing.B, name string) *os.File {
		f, err := os.Create(filepath.Join(b.TempDir(), name))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	for _, clean := range []bool{false, true} {
		name := "fsync"
		if clean {
			name = "fsync+clean"
		}
		b.Run(name, func(b *testing.B) {
			f, other := create(b, "f"), create(b, "g")
			buf := make([]byte, 4096)
			for b.Loop() {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if clean {
					if err := other.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// oldFixture is a 100k-artifact context with 10,000 one-artifact commits
// on top, built once per run and shared by the sub-benchmarks.
var oldFixture struct {
	once  sync.Once
	dir   string
	old   hashing.Digest // the commit 10,000 commits before the head
	id    string         // an artifact changed right at old
	ver   int64          // its version at old
	build time.Duration
	err   error
}

const (
	oldArtifacts = 100_000
	oldCommits   = 10_000
)

func buildOldFixture(b *testing.B) {
	f := &oldFixture
	f.once.Do(func() {
		t0 := time.Now()
		f.dir = benchDir(b, "old")
		s, err := Open(context.Background(), Options{Dir: f.dir, Clock: testClock(), NoSync: true})
		if err != nil {
			f.err = err
			return
		}
		defer s.Close()
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
			f.err = err
			return
		}
		if _, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: bulkOps("doc:", oldArtifacts)}); err != nil {
			f.err = err
			return
		}
		for i := 0; i <= oldCommits; i++ {
			id := fmt.Sprintf("doc:%06d", (i*7919)%oldArtifacts)
			res, err := s.Commit(ctx, CommitRequest{Context: "c", Ops: []graph.Op{notePut(id, i, "rev")}})
			if err != nil {
				f.err = err
				return
			}
			if i == 0 {
				f.old, f.id, f.ver = res.Commit.ID, id, 2
			}
		}
		f.build = time.Since(t0)
	})
	if f.err != nil {
		b.Fatal(f.err)
	}
}

// BenchmarkArtifactAtOld reads one artifact at the commit 10,000 commits
// before the head of a 100k-artifact context: resolve the commit by an
// 8-digit prefix, then a point lookup in its state map and the payload.
// "cold" empties the store's node and object caches before every read (the
// first read after opening the store); "warm" does not. Goal: <= 10 ms.
func BenchmarkArtifactAtOld(b *testing.B) {
	buildOldFixture(b)
	f := &oldFixture
	b.Logf("fixture: %d artifacts, %d commits, built in %v", oldArtifacts, oldCommits+2, f.build.Round(time.Millisecond))
	s := benchOpen(b, f.dir, true)
	defer s.Close()
	settle(b)
	ctx := context.Background()
	head := mustResolve(b, s, "c", "main")
	if head.Seq-oldCommits != mustResolve(b, s, "c", f.old.Hex()).Seq {
		b.Fatalf("fixture: old commit is not %d commits back", oldCommits)
	}
	read := func(b *testing.B) {
		c, err := s.Resolve(ctx, "c", f.old.Hex()[:8])
		if err != nil {
			b.Fatal(err)
		}
		a, _, err := s.ArtifactAt(ctx, "c", c, f.id)
		if err != nil || a.Version != f.ver || len(a.Data) == 0 {
			b.Fatalf("artifact at old commit: %+v %v", a, err)
		}
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			n := 0
			var cpu cpuMeter
			for b.Loop() {
				if mode == "cold" {
					b.StopTimer()
					s.nodes.clear()
					s.objects.Clear()
					b.StartTimer()
				}
				if n == 0 {
					cpu = startCPU()
				}
				read(b)
				n++
			}
			cpu.report(b, n, "read")
		})
	}
}

// BenchmarkCheckBranches runs fsck (Store.Check) over one context of
// 20,000 artifacts and as many edges, in commits of 5,000, with 32
// branches from its head, each one commit of its own: the heads are
// checked against the context's reverse index in as few passes as the
// head budget allows (about six heads a pass at the default budget).
func BenchmarkCheckBranches(b *testing.B) {
	ctx := context.Background()
	s := benchOpen(b, b.TempDir(), true)
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		b.Fatal(err)
	}
	var head *replay.Commit
	for lo := 0; lo < 20_000; lo += 5000 {
		var ops []graph.Op
		for i := lo; i < lo+5000; i++ {
			id := fmt.Sprintf("n%05d", i)
			ops = append(ops, notePut(id, i, "node"))
			if i > 0 {
				ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: "derived_from", To: fmt.Sprintf("n%05d", i/2)})
			}
		}
		head = benchCommit(b, s, "c", ops...)
	}
	for k := range 32 {
		br := fmt.Sprintf("b%02d", k)
		if err := s.CreateBranch(ctx, "c", br, head.ID); err != nil {
			b.Fatal(err)
		}
		id := "x-" + br
		if _, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: br, Author: "bench", Message: "m",
			Ops: []graph.Op{notePut(id, k, "x"), {Op: graph.OpLink, From: id, Rel: "derived_from", To: "n00000"}}}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		rep, err := s.Check(ctx)
		if err != nil || len(rep.Defects) != 0 {
			b.Fatalf("check: %v %v", err, rep.Defects)
		}
	}
}
