package kvtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv"
)

// CrashTarget tells RunCrash how to reach a durable driver's storage from
// two processes.
type CrashTarget struct {
	// Fresh returns the location of new, empty storage (a directory, a
	// database schema). It is called once, in the test process.
	Fresh func(t *testing.T) string
	// Open opens the driver on the storage at loc. It is called in the
	// test process and in the writer it re-executes.
	Open func(ctx context.Context, loc string) (kv.Driver, error)
	// Settle, when set, runs after each kill and before the storage is
	// reopened. A client-server driver waits there until the server has
	// finished the killed writer's sessions: a COMMIT the writer sent just
	// before dying may still be applied, and the checks must see the end
	// state, not one that changes under them.
	Settle func(ctx context.Context, loc string) error
}

// Environment of the crash test. The seed and the number of rounds may be
// set by whoever runs the test:
//
//	KVTEST_CRASH_SEED=42 KVTEST_CRASH_ROUNDS=30 go test -run TestCrash -v ./store/kv/badgerkv/
const (
	envLoc    = "KVTEST_CRASH_LOC" // set only in the writer
	envSeed   = "KVTEST_CRASH_SEED"
	envRounds = "KVTEST_CRASH_ROUNDS"
	envRound  = "KVTEST_CRASH_ROUND"
)

// crashWorkers is how many goroutines of the writer commit, each moving
// its own ref.
const crashWorkers = 3

// RunCrash is the crash test. It must be called from a top-level test
// function, which it re-executes (go test's -test.run with that name) as
// the writer: the writer's goroutines each commit in a loop — immutable
// records, then one Commit that sets a commit record and a seq entry and
// swaps the goroutine's ref from its previous commit — and print each
// commit they begin and each the driver acknowledged. The test SIGKILLs
// the writer at a seeded random moment, reopens the storage and checks
// that every acknowledged commit is present with all its records, that
// every begun one is wholly present or wholly absent, and that each ref
// ends a gapless chain of seq entries. Several rounds run on the same
// storage; the seed is logged.
func RunCrash(t *testing.T, target CrashTarget) {
	if loc := os.Getenv(envLoc); loc != "" {
		os.Exit(crashWriter(loc, target.Open))
	}
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv(envRounds)); err == nil && n > 0 {
		rounds = n
	}
	t.Logf("crash seed %d, %d rounds (rerun: %s=%d %s=%d)", seed, rounds, envSeed, seed, envRounds, rounds)
	rng := rand.New(rand.NewPCG(seed, 0))
	loc := target.Fresh(t)
	h := &crashHistory{begun: map[string]int{}, acked: map[string]bool{}}
	for round := 0; round < rounds; round++ {
		// Mostly short runs (kills early in a commit's life), some long.
		delay := time.Duration(20+rng.IntN(400)) * time.Millisecond
		if rng.IntN(4) == 0 {
			delay += time.Duration(rng.IntN(1500)) * time.Millisecond
		}
		out, stderr := runWriter(t, loc, seed+uint64(round), round, delay)
		h.read(t, out)
		if target.Settle != nil {
			if err := target.Settle(context.Background(), loc); err != nil {
				t.Fatalf("round %d: settle after the kill: %v", round, err)
			}
		}
		d, err := target.Open(context.Background(), loc)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v\nwriter stderr:\n%s", round, err, stderr)
		}
		h.check(t, round, d)
		if err := d.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d); writer stderr:\n%s", round, seed, stderr)
		}
	}
	t.Logf("%d commits begun, %d acknowledged over %d rounds", len(h.begun), len(h.acked), rounds)
	if len(h.acked) == 0 {
		t.Errorf("no commit was acknowledged in %d rounds: the test checked nothing", rounds)
	}
}

// runWriter runs one writer until READY, lets it run for delay, kills it
// and returns its stdout lines and stderr.
func runWriter(t *testing.T, loc string, seed uint64, round int, delay time.Duration) ([]string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), envLoc+"="+loc, envSeed+"="+strconv.FormatUint(seed, 10), envRound+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start writer: %v", err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	ready := time.After(60 * time.Second)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("round %d: writer exited before READY: %s", round, stderr.String())
			}
			if l == "READY" {
				break wait
			}
			out = append(out, l)
		case <-ready:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: writer not ready after 60s: %s", round, stderr.String())
		}
	}
	kill := time.After(delay)
	exited := false
collect:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				exited = true
				break collect
			}
			out = append(out, l)
		case <-kill:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill writer: %v", err)
			}
			kill = nil
		}
	}
	err = cmd.Wait()
	if exited && kill != nil {
		t.Fatalf("round %d: writer exited by itself (%v): %s", round, err, stderr.String())
	}
	return out, stderr.String()
}

// crashRecord is the i-th immutable record of commit tag: 200 bytes, or
// 3,000 for every third one, so that a driver that keeps large values
// apart from small ones (Badger's value log) has both in every commit.
func crashRecord(tag string, i int) kv.Record {
	size := 200
	if i%3 == 2 {
		size = 3000
	}
	v := fmt.Appendf(nil, "%s/%d/", tag, i)
	for len(v) < size {
		v = append(v, byte('a'+len(v)%26))
	}
	sum := sha256.Sum256(v)
	return kv.Record{Key: append([]byte("obj\x00"), sum[:]...), Value: v}
}

func crashRefKey(w int) []byte         { return fmt.Appendf(nil, "ref\x00w%d", w) }
func crashCommitKey(tag string) []byte { return []byte("cmt\x00" + tag) }
func crashSeqPrefix(w int) []byte      { return fmt.Appendf(nil, "seq\x00w%d\x00", w) }
func crashSeqKey(w int, i uint64) []byte {
	return binary.BigEndian.AppendUint64(crashSeqPrefix(w), i)
}

// crashWriter is the re-executed process. Its stdout, one line per event:
//
//	READY
//	BEGIN <tag> <records>
//	ACK <tag>
//
// where tag is r<round>w<worker>c<index>; ACK is printed only after Commit
// returned nil.
func crashWriter(loc string, open func(context.Context, string) (kv.Driver, error)) int {
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	round := os.Getenv(envRound)
	ctx := context.Background()
	d, err := open(ctx, loc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		line := fmt.Sprintf(format+"\n", a...)
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.WriteString(line) // unbuffered: one write per line
	}
	type resume struct {
		ref  []byte
		next uint64
	}
	var starts [crashWorkers]resume
	for w := range starts {
		ref, err := d.Get(ctx, crashRefKey(w))
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			fmt.Fprintln(os.Stderr, "read ref:", err)
			return 3
		}
		starts[w].ref = ref
		err = d.Scan(ctx, crashSeqPrefix(w), nil, 0, func(k, v []byte) error {
			starts[w].next++
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "scan seq:", err)
			return 3
		}
	}
	say("READY")
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) }) // never outlive a parent that failed to kill us
	var wg sync.WaitGroup
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			ref, seq := starts[w].ref, starts[w].next
			for c := 0; ; c++ {
				tag := fmt.Sprintf("r%sw%dc%d", round, w, c)
				n := 1 + rng.IntN(40)
				switch roll := rng.IntN(100); {
				case roll < 4:
					n = 20_000 + rng.IntN(10_000) // beyond one Badger transaction
				case roll < 20:
					n = 500 + rng.IntN(2000)
				}
				recs := make([]kv.Record, n)
				for i := range recs {
					recs[i] = crashRecord(tag, i)
				}
				say("BEGIN %s %d", tag, n)
				if err := d.PutImmutable(ctx, recs); err != nil {
					fmt.Fprintln(os.Stderr, "put:", err)
					os.Exit(5)
				}
				sw := kv.Swap{Key: crashRefKey(w), New: []byte(tag)}
				if ref == nil {
					sw.Absent = true
				} else {
					sw.Old = ref
				}
				err := d.Commit(ctx, kv.Batch{
					Sets: []kv.Record{
						{Key: crashCommitKey(tag), Value: fmt.Appendf(nil, "%d", n)},
						{Key: crashSeqKey(w, seq), Value: []byte(tag)},
					},
					Swaps: []kv.Swap{sw},
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, "commit:", err)
					os.Exit(5)
				}
				say("ACK %s", tag)
				ref, seq = []byte(tag), seq+1
			}
		}(w)
	}
	wg.Wait()
	return 0
}

// crashHistory is what the writers said over every round.
type crashHistory struct {
	begun map[string]int // tag -> immutable records
	acked map[string]bool
	// latest are the tags begun in the last round read: only their
	// immutable records are read back (records never change once put).
	latest []string
}

func (h *crashHistory) read(t *testing.T, lines []string) {
	t.Helper()
	h.latest = h.latest[:0]
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "BEGIN":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("bad writer line %q", l)
			}
			h.begun[f[1]] = n
			h.latest = append(h.latest, f[1])
		case len(f) == 2 && f[0] == "ACK":
			if _, ok := h.begun[f[1]]; !ok {
				t.Fatalf("writer acknowledged %s before beginning it", f[1])
			}
			h.acked[f[1]] = true
		default:
			t.Fatalf("bad writer line %q", l)
		}
	}
}

// check verifies the reopened storage against everything said so far.
func (h *crashHistory) check(t *testing.T, round int, d kv.Driver) {
	t.Helper()
	ctx := context.Background()
	inSeq := map[string]bool{}
	for w := 0; w < crashWorkers; w++ {
		var chain []string
		var next uint64
		err := d.Scan(ctx, crashSeqPrefix(w), nil, 0, func(k, v []byte) error {
			if i := binary.BigEndian.Uint64(k[len(k)-8:]); i != next {
				return fmt.Errorf("worker %d: seq entry %d where %d was expected (a gap)", w, i, next)
			}
			next++
			chain = append(chain, string(v))
			inSeq[string(v)] = true
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ref, err := d.Get(ctx, crashRefKey(w))
		switch {
		case errors.Is(err, kv.ErrNotFound) && len(chain) == 0:
		case err != nil:
			t.Fatalf("round %d: worker %d: ref: %v (chain of %d)", round, w, err, len(chain))
		case len(chain) == 0 || string(ref) != chain[len(chain)-1]:
			t.Errorf("round %d: worker %d: ref %q is not the end of its seq chain (%d entries)", round, w, ref, len(chain))
		}
	}
	tags := make([]string, 0, len(h.begun))
	keys := make([][]byte, 0, len(h.begun))
	for tag := range h.begun {
		tags = append(tags, tag)
		keys = append(keys, crashCommitKey(tag))
	}
	vals, err := d.GetMany(ctx, keys)
	if err != nil {
		t.Fatalf("round %d: read commit records: %v", round, err)
	}
	present := map[string]bool{}
	for i, tag := range tags {
		n, v := h.begun[tag], vals[i]
		present[tag] = v != nil
		switch {
		case h.acked[tag] && v == nil:
			t.Errorf("round %d: acknowledged commit %s is missing", round, tag)
		case (v != nil) != inSeq[tag]:
			t.Errorf("round %d: commit %s half applied: record present %v, seq entry present %v", round, tag, v != nil, inSeq[tag])
		case v != nil && string(v) != strconv.Itoa(n):
			t.Errorf("round %d: commit %s records %q, want %d", round, tag, v, n)
		}
	}
	for _, tag := range h.latest {
		if !present[tag] {
			continue
		}
		n := h.begun[tag]
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = crashRecord(tag, i).Key
		}
		vals, err := d.GetMany(ctx, keys)
		if err != nil {
			t.Fatalf("round %d: read records of %s: %v", round, tag, err)
		}
		for i, v := range vals {
			if want := crashRecord(tag, i).Value; !bytes.Equal(v, want) {
				t.Errorf("round %d: commit %s is visible but its record %d is %q", round, tag, i, v)
				break
			}
		}
	}
	for tag := range inSeq {
		if _, ok := h.begun[tag]; !ok {
			t.Errorf("round %d: seq names %s, which no writer began", round, tag)
		}
	}
}
