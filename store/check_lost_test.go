package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/kv/pgkv"
)

// onEachDriver runs fn on a new store of each driver the test can reach:
// Badger in a temporary directory, memory, and PostgreSQL (a schema of
// the test's own, emptied at its end) when ARTIFACTD_TEST_POSTGRES names
// a database.
func onEachDriver(t *testing.T, fn func(t *testing.T, s *Store)) {
	t.Run("badger", func(t *testing.T) {
		s := openTest(t, t.TempDir())
		defer s.Close()
		fn(t, s)
	})
	t.Run("memory", func(t *testing.T) {
		s, err := Open(context.Background(), Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := os.Getenv("ARTIFACTD_TEST_POSTGRES")
		if dsn == "" {
			t.Skip("ARTIFACTD_TEST_POSTGRES names no database")
		}
		ctx := context.Background()
		schema := fmt.Sprintf("check_lost_%d_%d", time.Now().UnixNano(), rand.Uint32())
		t.Cleanup(func() {
			d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
			if err != nil {
				t.Errorf("clear schema %s: %v", schema, err)
				return
			}
			defer d.Close()
			var keys [][]byte
			err = d.Scan(ctx, nil, nil, 0, func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil })
			for err == nil && len(keys) > 0 {
				n := min(len(keys), 1000)
				err = d.Commit(ctx, kv.Batch{Deletes: keys[:n]})
				keys = keys[n:]
			}
			if err != nil {
				t.Errorf("clear schema %s: %v", schema, err)
			}
		})
		drv, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, Options{Driver: drv, Clock: testClock(), ReserveBytes: -1})
		if err != nil {
			_ = drv.Close()
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
}

// lose deletes records through the driver, as a lost write would, and
// drops the cached heads so that the check reads what is stored.
func lose(t *testing.T, s *Store, keys ...[]byte) {
	t.Helper()
	if err := s.kv.Commit(context.Background(), kv.Batch{Deletes: keys}); err != nil {
		t.Fatal(err)
	}
	forgetHeads(s)
}

// checkDefects runs Check and returns its defects.
func checkDefects(t *testing.T, s *Store) []Defect {
	t.Helper()
	rep, err := s.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep.Defects
}

// seqShapes is a context with a commit no branch reaches any more (a
// branch reset away from it: left, and its parent below), a merge and two
// branches at one head; healthy, it has no defect.
type seqShapes struct {
	base, below, left, merged, head *replay.Commit
}

func newSeqShapes(t *testing.T, s *Store) seqShapes {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	commit := func(branch, id string) *replay.Commit {
		t.Helper()
		r, err := s.Commit(ctx, CommitRequest{Context: "c", Branch: branch, Author: "a", Message: "m", Ops: []graph.Op{notePut(id, 0, id)}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Commit
	}
	var sh seqShapes
	sh.base = commit("main", "q")
	for _, b := range []string{"gone", "side"} {
		if err := s.CreateBranch(ctx, "c", b, sh.base.ID); err != nil {
			t.Fatal(err)
		}
	}
	sh.below = commit("gone", "g1")
	sh.left = commit("gone", "g2")
	// The branch is rolled back: its two commits stay stored, indexed,
	// and reached by no branch.
	if err := s.ResetBranch(ctx, "c", "gone", sh.base.ID); err != nil {
		t.Fatal(err)
	}
	sh.merged = commit("side", "s1")
	commit("main", "q2")
	mr, err := s.Merge(ctx, "c", "main", "side", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	sh.head = mr.Commit
	if err := s.CreateBranch(ctx, "c", "twin", sh.head.ID); err != nil {
		t.Fatal(err)
	}
	return sh
}

// TestCheckFindsEveryCommitOutOfTheSeqIndex: every commit record whose
// seq entry is lost is reported, once — also one that is no branch's
// head and no commit's parent (fsck passed it as sound before: the
// commit list, log and export leave it out) — and a healthy context with
// such commits has no defect.
func TestCheckFindsEveryCommitOutOfTheSeqIndex(t *testing.T) {
	cases := []struct {
		name string
		// lost is the commit whose seq entry is lost; want the one
		// finding's kind and id, and what its detail says.
		lost       func(sh seqShapes) *replay.Commit
		kind       string
		id, detail func(sh seqShapes) string
	}{
		{"left by a reset", func(sh seqShapes) *replay.Commit { return sh.left }, "commit",
			func(sh seqShapes) string { return sh.left.ID.String() },
			func(sh seqShapes) string { return "not in the context's seq index" }},
		{"head of two branches", func(sh seqShapes) *replay.Commit { return sh.head }, "ref",
			func(sh seqShapes) string { return DefaultBranch },
			func(sh seqShapes) string {
				return sh.head.ID.Short() + ` of branches "main", "twin" is not in the context's seq index`
			}},
		{"parent of an indexed commit", func(sh seqShapes) *replay.Commit { return sh.below }, "commit",
			func(sh seqShapes) string { return sh.left.ID.String() },
			func(sh seqShapes) string {
				return "its parent " + sh.below.ID.Short() + " is not in the context's seq index"
			}},
		{"second parent of a merge", func(sh seqShapes) *replay.Commit { return sh.merged }, "commit",
			func(sh seqShapes) string { return sh.head.ID.String() },
			func(sh seqShapes) string {
				return "its parent " + sh.merged.ID.Short() + " is not in the context's seq index"
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			onEachDriver(t, func(t *testing.T, s *Store) {
				sh := newSeqShapes(t, s)
				mustCheck(t, s)
				lost := c.lost(sh)
				lose(t, s, keySeq("c", lost.Seq))
				defects := checkDefects(t, s)
				if len(defects) != 1 {
					t.Fatalf("%d defects, want one: %v", len(defects), defects)
				}
				d := defects[0]
				if d.Kind != c.kind || d.Context != "c" || d.ID != c.id(sh) || !strings.Contains(d.Detail, c.detail(sh)) {
					t.Fatalf("defect %v; want a %s defect of %s saying %q", d, c.kind, c.id(sh), c.detail(sh))
				}
			})
		})
	}
}

// TestCheckPassesACommitIndexedSinceItsScan: a commit record whose seq
// entry appears after Check read the index (another process committing
// to a shared store) is read again, not reported.
func TestCheckPassesACommitIndexedSinceItsScan(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	sh := newSeqShapes(t, s)
	k := &checker{s: s, rep: &CheckReport{}}
	seqOf := map[hashing.Digest]uint64{}
	ids, err := k.seqIndex(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ids {
		if e.id != sh.left.ID {
			seqOf[e.id] = e.seq
		}
	}
	if err := k.unindexed(ctx, "c", seqOf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(k.rep.Defects) != 0 {
		t.Fatalf("defects %v", k.rep.Defects)
	}
}
