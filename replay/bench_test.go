//go:build linux || darwin

package replay_test

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// Fold benchmarks (issue 2): verify a chain of 100 commits of 1,000 ops
// each (puts of new and changed artifacts, links; 60,200 artifacts and
// 20,000 edges at the head). Goal: >= 200k ops/s.
//
//	go test -run '^$' -bench Fold -benchtime 5x ./replay/

const (
	foldCommits      = 100
	foldOpsPerCommit = 1_000
)

// foldOps returns the ops of commit i: 800 puts (new artifacts, and from
// the second commit on 200 of them rewrite earlier ones) and 200 links.
func foldOps(i int) []graph.Op {
	ops := make([]graph.Op, 0, foldOpsPerCommit)
	for j := 0; j < 800; j++ {
		id := fmt.Sprintf("a%03d-%03d", i, j)
		if i > 0 && j < 200 {
			id = fmt.Sprintf("a%03d-%03d", i-1, j+200)
		}
		data := []byte(`{"commit":` + strconv.Itoa(i) + `,"n":` + strconv.Itoa(j) + `,"text":"a claim extracted from a page"}`)
		ops = append(ops, graph.Op{Op: graph.OpPut, ID: id, Type: "claim", ProducedBy: "bench", Data: data})
	}
	for j := 0; j < 200; j++ {
		ops = append(ops, graph.Op{Op: graph.OpLink, From: fmt.Sprintf("a%03d-%03d", i, 400+j), Rel: "derived_from", To: fmt.Sprintf("a%03d-%03d", i, 600+j)})
	}
	return ops
}

// processCPUTime returns the CPU time the process has used: on a busy
// machine the wall clock also counts the time spent waiting for a CPU.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memSource is a replay.Source over maps, to measure the fold without
// storage.
type memSource struct {
	commits map[hashing.Digest]*replay.Commit
	ops     map[hashing.Digest][]graph.Op
	objects map[hashing.Digest][]byte
}

func (m *memSource) GetCommit(ctx context.Context, id hashing.Digest) (*replay.Commit, error) {
	c, ok := m.commits[id]
	if !ok {
		return nil, fmt.Errorf("commit %s missing", id.Short())
	}
	return c, nil
}

func (m *memSource) Ops(ctx context.Context, c *replay.Commit) ([]graph.Op, error) {
	return m.ops[c.ID], nil
}

func (m *memSource) Object(ctx context.Context, d hashing.Digest) ([]byte, error) {
	return m.objects[d], nil
}

func BenchmarkFold(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(ctx, store.Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		b.Fatal(err)
	}
	var head *replay.Commit
	t0 := time.Now()
	for i := 0; i < foldCommits; i++ {
		res, err := st.Commit(ctx, store.CommitRequest{Context: "c", Author: "bench", Message: "m", Ops: foldOps(i)})
		if err != nil {
			b.Fatal(err)
		}
		head = res.Commit
	}
	b.Logf("fixture: %d commits, %d artifacts, %d edges, built in %v", foldCommits+1, head.Artifacts, head.Edges, time.Since(t0).Round(time.Millisecond))

	mem := &memSource{commits: map[hashing.Digest]*replay.Commit{}, ops: map[hashing.Digest][]graph.Op{}, objects: map[hashing.Digest][]byte{}}
	src := st.Source("c")
	err = st.Commits(ctx, "c", 0, func(c *replay.Commit) error {
		mem.commits[c.ID] = c
		ops, err := src.Ops(ctx, c)
		mem.ops[c.ID] = ops
		for _, op := range ops {
			if op.Op == graph.OpPut {
				if mem.objects[op.ContentHash], err = src.Object(ctx, op.ContentHash); err != nil {
					return err
				}
			}
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}

	run := func(b *testing.B, src replay.Source, objects replay.ObjectCheck) {
		ops := 0
		var spent, cpuSpent time.Duration
		for b.Loop() {
			t0, cpu0 := time.Now(), processCPUTime()
			res, err := replay.Fold(ctx, src, head.ID, replay.Options{Objects: objects})
			spent += time.Since(t0)
			cpuSpent += processCPUTime() - cpu0
			if err != nil {
				b.Fatal(err)
			}
			if res.State.Hash() != head.ContextHash {
				b.Fatal("fold does not verify")
			}
			ops += res.Ops
		}
		b.ReportMetric(float64(ops)/spent.Seconds(), "ops/s")
		b.ReportMetric(float64(ops)/cpuSpent.Seconds(), "ops/cpu-s")
	}
	// What `artifactd replay --verify` does: ops from the store, the final
	// state's payloads re-hashed.
	b.Run("store", func(b *testing.B) { run(b, st.Source("c"), replay.ObjectsFinal) })
	// fsck's fold: every put's payload re-hashed.
	b.Run("store-all-objects", func(b *testing.B) { run(b, st.Source("c"), replay.ObjectsAll) })
	// The fold alone, from memory.
	b.Run("memory", func(b *testing.B) { run(b, mem, replay.ObjectsNone) })
}
