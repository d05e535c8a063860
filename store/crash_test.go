package store

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// The crash test (issue 2): a child process — this test binary re-executed
// with crashChildEnv set — commits in a loop from several goroutines and
// prints each commit it is about to submit and each it had acknowledged.
// The parent SIGKILLs it at a seeded random moment, reopens the store and
// checks that every acknowledged commit is there and on the main chain,
// that fsck (Store.Check) is clean, that the head replays to its hash, and
// that every commit the child began is wholly there or wholly absent.
//
//	go test -run TestCrashRecovery -v ./store/ -crash.rounds=50 -crash.seed=42

var (
	crashRounds = flag.Int("crash.rounds", 20, "crash test: kill/reopen rounds on one data directory")
	crashSeed   = flag.Uint64("crash.seed", 0, "crash test: seed (0 picks one from the clock; the test logs it)")
)

const (
	crashChildEnv = "ARTIFACTD_CRASH_CHILD" // the data directory; set only in the child
	crashCtx      = "crash"
	crashWorkers  = 4
	crashBulk     = 20_000
	// crashMemTable is the memtable size of the crash test's opens: small,
	// so that each open is quick and memtables are flushed to L0 tables
	// while the child runs (a bulk commit still outgrows one transaction).
	crashMemTable = 16 << 20
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	flag.Parse()
	code := m.Run()
	removeBenchFixtures()
	os.Exit(code)
}

// crashChild is the writer. Its stdout protocol, one line per write:
//
//	READY
//	BEGIN <tag> put=<id,...> link=<from|rel|to,...> del=<id,...>
//	BEGIN <tag> bulk=<prefix> n=<count>
//	ACK <tag> <commit hex> <context hash hex> <artifacts> <edges>
//
// An ACK is printed only after Commit returned, that is after the fsync.
func crashChild(dir string) int {
	seed, _ := strconv.ParseUint(os.Getenv("ARTIFACTD_CRASH_SEED"), 10, 64)
	round := os.Getenv("ARTIFACTD_CRASH_ROUND")
	bulkAt, _ := strconv.Atoi(os.Getenv("ARTIFACTD_CRASH_BULK_AT"))
	ctx := context.Background()
	s, err := Open(ctx, Options{Dir: dir, memTable: crashMemTable, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	if _, err := s.CreateContext(ctx, crashCtx, ModeObserve); err != nil && !errors.Is(err, ErrExists) {
		fmt.Fprintln(os.Stderr, "create context:", err)
		return 3
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		line := fmt.Sprintf(format+"\n", a...)
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.WriteString(line) // unbuffered: one write per line
	}
	// Load the head before saying READY, so that the kill timer measures
	// commit time, not the rebuild of a large head.
	if err := s.Read(ctx, crashCtx, "", func(*View) error { return nil }); err != nil {
		fmt.Fprintln(os.Stderr, "load head:", err)
		return 3
	}
	say("READY")
	// Never outlive a parent that failed to kill us.
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) })

	var wg sync.WaitGroup
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var plain, linked []string // this worker's acknowledged artifacts
			for i := 0; ; i++ {
				tag := fmt.Sprintf("r%sw%dc%d", round, w, i)
				id := func(k int) string { return fmt.Sprintf("%s-%d", tag, k) }
				var ops []graph.Op
				var puts, dels []string
				var links []graph.EdgeKey
				roll := rng.IntN(100)
				switch {
				case w == 0 && (i == bulkAt || roll == 99 && rng.IntN(8) == 0):
					say("BEGIN %s bulk=%s- n=%d", tag, tag, crashBulk)
					ops = make([]graph.Op, crashBulk)
					for k := range ops {
						ops[k] = notePut(id(k), k, "bulk")
					}
				case roll < 60:
					for k := 0; k <= rng.IntN(3); k++ {
						ops = append(ops, notePut(id(k), k, "small"))
						puts = append(puts, id(k))
					}
				case roll < 90:
					a, b := id(0), id(1)
					ops = append(ops, notePut(a, 0, "claim"), notePut(b, 1, "evidence"),
						graph.Op{Op: graph.OpLink, From: a, Rel: "derived_from", To: b, Attrs: []byte(`{"w":` + strconv.Itoa(i) + `}`)})
					puts = append(puts, a, b)
					links = append(links, graph.EdgeKey{From: a, Rel: "derived_from", To: b})
					if len(linked) > 0 {
						prev := linked[rng.IntN(len(linked))]
						ops = append(ops, graph.Op{Op: graph.OpLink, From: a, Rel: "cites", To: prev})
						links = append(links, graph.EdgeKey{From: a, Rel: "cites", To: prev})
					}
				default:
					if len(plain) == 0 {
						continue
					}
					k := rng.IntN(len(plain))
					victim := plain[k]
					plain = append(plain[:k], plain[k+1:]...)
					ops = append(ops, graph.Op{Op: graph.OpDelete, ID: victim})
					dels = append(dels, victim)
				}
				if len(puts)+len(dels) > 0 {
					var ls []string
					for _, l := range links {
						ls = append(ls, l.From+"|"+l.Rel+"|"+l.To)
					}
					say("BEGIN %s put=%s link=%s del=%s", tag, strings.Join(puts, ","), strings.Join(ls, ","), strings.Join(dels, ","))
				}
				res, err := s.Commit(ctx, CommitRequest{Context: crashCtx, Author: "crash", Message: tag, Ops: ops})
				if err != nil {
					fmt.Fprintln(os.Stderr, "commit:", tag, err)
					os.Exit(3)
				}
				c := res.Commit
				say("ACK %s %s %s %d %d", tag, c.ID.Hex(), c.ContextHash.Hex(), c.Artifacts, c.Edges)
				if len(links) > 0 {
					linked = append(linked, puts...)
				} else if len(ops) <= 3 {
					plain = append(plain, puts...)
				}
			}
		}(w)
	}
	wg.Wait()
	return 0
}

// crashBegun is a commit the child began: what it puts, links and deletes.
type crashBegun struct {
	tag   string
	puts  []string
	links []graph.EdgeKey
	dels  []string
	bulk  string // id prefix of a bulk commit
	acked *crashAck
}

type crashAck struct {
	tag                 string
	commit, contextHash hashing.Digest
	artifacts, edges    int
}

// crashRound is what the parent learnt from one child run.
type crashRound struct {
	begun []*crashBegun
	acks  []*crashAck
}

func (r *crashRound) bulkAcked() bool {
	for _, b := range r.begun {
		if b.bulk != "" && b.acked != nil {
			return true
		}
	}
	return false
}

func parseDigestHex(t *testing.T, s string) hashing.Digest {
	d, err := hashing.ParseDigest("sha256:" + s)
	if err != nil {
		t.Fatalf("child printed a bad digest %q: %v", s, err)
	}
	return d
}

func (r *crashRound) parse(t *testing.T, line string) {
	f := strings.Fields(line)
	switch {
	case len(f) >= 2 && f[0] == "BEGIN":
		b := &crashBegun{tag: f[1]}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			var items []string
			if v != "" {
				items = strings.Split(v, ",")
			}
			switch k {
			case "put":
				b.puts = items
			case "del":
				b.dels = items
			case "link":
				for _, l := range items {
					p := strings.Split(l, "|")
					b.links = append(b.links, graph.EdgeKey{From: p[0], Rel: p[1], To: p[2]})
				}
			case "bulk":
				b.bulk = v
			}
		}
		r.begun = append(r.begun, b)
	case len(f) == 6 && f[0] == "ACK":
		a := &crashAck{tag: f[1], commit: parseDigestHex(t, f[2]), contextHash: parseDigestHex(t, f[3])}
		a.artifacts, _ = strconv.Atoi(f[4])
		a.edges, _ = strconv.Atoi(f[5])
		r.acks = append(r.acks, a)
		for _, b := range r.begun {
			if b.tag == a.tag {
				b.acked = a
			}
		}
	case line == "READY":
	default:
		t.Fatalf("child printed %q", line)
	}
}

// runCrashChild starts the writer, kills it with SIGKILL killAfter after
// it is ready (or, with afterBulk, after it began its bulk commit) and
// returns what it printed.
//
// The child's stdout is read to its end (the kernel closes the pipe when
// the process dies), so every line it wrote before the kill is seen.
// crashPlan chooses how round ends. In some rounds the child begins a
// 20k-artifact commit early and is killed while it may be in flight or a
// little after it was acknowledged; in the others at a random moment
// after it is ready. Every later round's fsck replays each bulk commit
// that landed, so they come late in the run, and fewer under the race
// detector (which makes a 20k commit take tens of seconds).
func crashPlan(round, rounds int, rng *rand.Rand) (killPoint, int, time.Duration) {
	fromEnd := rounds - 1 - round
	inFlight, acked := fromEnd == 5 || fromEnd == 15, fromEnd == 0 || fromEnd == 10
	if raceEnabled {
		inFlight, acked = fromEnd == 1, fromEnd == 0
	}
	switch {
	case inFlight:
		wait := 2000
		if raceEnabled {
			wait = 8000
		}
		return killInBulk, rng.IntN(3), time.Duration(rng.IntN(wait)) * time.Millisecond
	case acked:
		return killAfterBulk, rng.IntN(3), time.Duration(rng.IntN(100)) * time.Millisecond
	}
	return killWhenReady, -1, time.Duration(20+rng.IntN(400)) * time.Millisecond
}

// killPoint is the line of the child's output from which the kill timer
// runs.
type killPoint string

const (
	killWhenReady killPoint = "it was ready"
	killInBulk    killPoint = "its bulk commit began"
	killAfterBulk killPoint = "its bulk commit was acknowledged"
)

func runCrashChild(t *testing.T, dir string, round int, seed uint64, bulkAt int, point killPoint, killAfter time.Duration) *crashRound {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		crashChildEnv+"="+dir,
		"ARTIFACTD_CRASH_SEED="+strconv.FormatUint(seed, 10),
		"ARTIFACTD_CRASH_ROUND="+strconv.Itoa(round),
		"ARTIFACTD_CRASH_BULK_AT="+strconv.Itoa(bulkAt))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	r := &crashRound{}
	var timer <-chan time.Time // nil until the kill point is reached
	deadline := time.After(3 * time.Minute)
	killed := false
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			r.parse(t, line)
			var reached bool
			switch point {
			case killWhenReady:
				reached = line == "READY"
			case killInBulk:
				reached = strings.Contains(line, " bulk=")
			case killAfterBulk:
				reached = r.bulkAcked()
			}
			if reached && !killed && timer == nil {
				timer = time.After(killAfter)
			}
		case <-timer:
			cmd.Process.Signal(syscall.SIGKILL)
			killed, timer = true, nil
		case <-deadline:
			cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("round %d: child did not reach its kill point; stderr:\n%s", round, stderr.String())
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child ended with %v, not by SIGKILL; stderr:\n%s", round, err, stderr.String())
	}
	return r
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("crash test seed %d (rerun with -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	ctx := context.Background()

	var acked []*crashAck
	var begun []*crashBegun
	kills, bulkBegun, bulkAcked, bulkLost := 0, 0, 0, 0
	start := time.Now()
	for round := 0; round < *crashRounds; round++ {
		// Every fourth round kills the child while its 20k-artifact commit
		// may be in flight; the others at a random moment.
		point, bulkAt, kill := crashPlan(round, *crashRounds, rng)
		t0 := time.Now()
		r := runCrashChild(t, dir, round, rng.Uint64(), bulkAt, point, kill)
		tChild := time.Since(t0)
		kills++
		acked = append(acked, r.acks...)
		begun = append(begun, r.begun...)

		s, err := Open(ctx, Options{Dir: dir, memTable: crashMemTable, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		head := mustResolve(t, s, crashCtx, "main")
		chain := map[hashing.Digest]bool{}
		log, err := s.Log(ctx, crashCtx, head, 0)
		if err != nil {
			t.Fatalf("round %d: log: %v", round, err)
		}
		for _, c := range log {
			chain[c.ID] = true
		}
		// Every acknowledged commit, of this round and all before, is there
		// with what it recorded, on the main chain.
		for _, a := range acked {
			c, err := s.GetCommit(ctx, crashCtx, a.commit)
			if err != nil {
				t.Fatalf("round %d: acknowledged commit %s (%s) is lost: %v", round, a.commit.Short(), a.tag, err)
			}
			if c.ContextHash != a.contextHash || c.Artifacts != a.artifacts || c.Edges != a.edges {
				t.Fatalf("round %d: commit %s (%s) differs from what was acknowledged", round, a.commit.Short(), a.tag)
			}
			if !chain[a.commit] {
				t.Fatalf("round %d: acknowledged commit %s (%s) is not on the main chain", round, a.commit.Short(), a.tag)
			}
		}
		tOpen := time.Since(t0) - tChild
		rep, err := s.Check(ctx)
		tCheck := time.Since(t0) - tChild - tOpen
		if err != nil {
			t.Fatalf("round %d: fsck: %v", round, err)
		}
		if len(rep.Defects) > 0 {
			t.Fatalf("round %d: fsck found %d defects, first: %v", round, len(rep.Defects), rep.Defects[0])
		}
		// fsck replayed the whole chain, the head included, comparing every
		// state with its commit's hash and counts. The checks below look at
		// the head state as the store loads it from its state map (checked
		// against the hash too); the last round also replays the head on
		// its own, as `artifactd replay --verify` does.
		var st *graph.State
		err = s.Read(ctx, crashCtx, "main", func(v *View) error {
			st = v.State
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: read head: %v", round, err)
		}
		if round == *crashRounds-1 {
			res, err := replay.Fold(ctx, s.Source(crashCtx), head.ID, replay.Options{})
			if err != nil {
				t.Fatalf("round %d: head does not replay: %v", round, err)
			}
			if res.State.Hash() != head.ContextHash {
				t.Fatalf("round %d: head replays to %s, records %s", round, res.State.Hash(), head.ContextHash)
			}
		}
		if st.Hash() != head.ContextHash || st.NumArtifacts() != head.Artifacts || st.NumEdges() != head.Edges {
			t.Fatalf("round %d: head %s records %d artifacts, %d edges, hash %s; the replay has %d, %d, %s",
				round, head.ID.Short(), head.Artifacts, head.Edges, head.ContextHash.Short(), st.NumArtifacts(), st.NumEdges(), st.Hash().Short())
		}
		// No commit is half-applied: what each began commit puts and links
		// is all at the head or none of it (deletes aside), and all of it
		// when acknowledged.
		maybeDeleted := map[string]bool{}
		for _, b := range begun {
			for _, id := range b.dels {
				maybeDeleted[id] = true
			}
		}
		bulkBegun, bulkAcked, bulkLost = 0, 0, 0
		for _, b := range begun {
			want, have := 0, 0
			if b.bulk != "" {
				bulkBegun++
				want = crashBulk
				for k := 0; k < crashBulk; k++ {
					if st.Artifact(fmt.Sprintf("%s%d", b.bulk, k)) != nil {
						have++
					}
				}
			}
			for _, id := range b.puts {
				if !maybeDeleted[id] {
					want++
					if st.Artifact(id) != nil {
						have++
					}
				}
			}
			for _, e := range b.links {
				want++
				if st.Edge(e) != nil {
					have++
				}
			}
			if have != 0 && have != want || b.acked != nil && have != want {
				t.Fatalf("round %d: commit %s (acknowledged: %v) is half-applied: %d of %d of its artifacts and edges are at the head",
					round, b.tag, b.acked != nil, have, want)
			}
			if b.bulk != "" {
				switch {
				case have == want:
					bulkAcked++
				default:
					bulkLost++
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed %v after %s; %d acknowledged; head seq %d, %d artifacts, %d edges (child %v, reopen %v, fsck %v, rest %v)",
			round, kill, point, len(r.acks), head.Seq, head.Artifacts, head.Edges,
			tChild.Round(time.Millisecond), tOpen.Round(time.Millisecond), tCheck.Round(time.Millisecond), (time.Since(t0) - tChild - tOpen - tCheck).Round(time.Millisecond))
	}
	t.Logf("%d rounds, %d SIGKILLs, %d acknowledged commits checked after every reopen, %d commits begun; %d bulk commits of %d begun: %d there whole, %d absent whole; %v",
		*crashRounds, kills, len(acked), len(begun), bulkBegun, crashBulk, bulkAcked, bulkLost, time.Since(start).Round(time.Millisecond))
}
