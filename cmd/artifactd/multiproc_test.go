package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/store/kv/pgkv"
	"github.com/artifactd/artifactd/store/kv/pgkv/pgtest"
)

// pgTestStore creates a schema of its own in the test database and
// returns a store spec naming it: the DSN with search_path set, which
// every process given it shares. Its records are deleted at cleanup.
func pgTestStore(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	schema := pgtest.NewSchema(t, dsn, "mp")
	d, err := pgkv.Open(ctx, pgkv.Options{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	_ = d.Close()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s: %v", pgtest.EnvDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// mpClient talks JSON to the servers of a multi-process test.
type mpClient struct{ cl *http.Client }

func newMPClient() *mpClient {
	return &mpClient{cl: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// do sends body (nil: none) and decodes the answer into out; it returns
// the status, 0 for a transport error or an answer cut short.
func (c *mpClient) do(method, url string, body, out any) int {
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.cl.Do(req)
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0
	}
	if out != nil && json.Unmarshal(b, out) != nil && res.StatusCode < 300 {
		return 0
	}
	return res.StatusCode
}

// mpHead is GET /hash: the head commit and its context hash.
type mpHead struct {
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
}

func (c *mpClient) head(base string) (mpHead, int) {
	var h mpHead
	st := c.do("GET", base+"/v1/contexts/"+mpCtx+"/hash", nil, &h)
	return h, st
}

// mpAnswer is the part of a write's answer the tests read; Head is a
// 409 stale-parent's current head.
type mpAnswer struct {
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
	Type        string `json:"type"`
	Detail      string `json:"detail"`
	Head        string `json:"head"`
}

// write puts one new artifact, conditional on parent when it is set.
func (c *mpClient) write(base, id, parent string) (mpAnswer, int) {
	body := map[string]any{"id": id, "type": "note", "produced_by": "mp", "data": map[string]any{"text": "written as " + id}}
	if parent != "" {
		body["parent"] = parent
	}
	var a mpAnswer
	st := c.do("POST", base+"/v1/contexts/"+mpCtx+"/artifacts", body, &a)
	return a, st
}

const mpCtx = "mp"

// mpAck is one acknowledged write.
type mpAck struct{ commit, id string }

// mpLedger collects acknowledged writes from many clients.
type mpLedger struct {
	mu   sync.Mutex
	acks []mpAck
	bad  []string
}

func newMPLedger() *mpLedger { return &mpLedger{} }

// report fails t on unexpected answers (a 409 to a write without parent
// among them: the servers must serialise those, never refuse them — nor
// starve a process, whose writes would then give up after waiting).
func (l *mpLedger) report(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("%d unexpected answers, the first: %s", len(l.bad), strings.Join(l.bad, "\n"))
	}
}

func (l *mpLedger) ack(commit, id string) {
	l.mu.Lock()
	l.acks = append(l.acks, mpAck{commit, id})
	l.mu.Unlock()
}

func (l *mpLedger) fail(format string, args ...any) {
	l.mu.Lock()
	if len(l.bad) < 20 {
		l.bad = append(l.bad, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// writeOne makes one acknowledged write of id through base, with or
// without a parent; a conditional write that meets another write first
// reads the head again and retries, as a client of the API does. It
// returns false when the server did not acknowledge (transport error,
// 503), for the caller to retry with a new id; an answer no correct
// server gives is recorded on led.
func writeOne(c *mpClient, base, id string, withParent bool, led *mpLedger) bool {
	ok, _ := writeOneStatus(c, base, id, withParent, led)
	return ok
}

// writeOneStatus is writeOne, also returning the last answer's status and
// detail.
func writeOneStatus(c *mpClient, base, id string, withParent bool, led *mpLedger) (bool, string) {
	for attempt := 0; attempt < 500; attempt++ {
		parent := ""
		if withParent {
			h, st := c.head(base)
			if st != 200 {
				return false, fmt.Sprintf("GET hash: %d", st)
			}
			parent = h.Commit
		}
		a, st := c.write(base, id, parent)
		switch {
		case st == http.StatusCreated && a.Commit != "":
			led.ack(a.Commit, id)
			return true, ""
		case st == 0 || st == http.StatusServiceUnavailable:
			return false, fmt.Sprintf("%d %s", st, a.Detail)
		case st == http.StatusConflict && withParent && strings.HasSuffix(a.Type, "stale-parent"):
			continue
		default:
			led.fail("write %s (parent %q) through %s: %d %+v", id, parent, base, st, a)
			return false, fmt.Sprintf("%d %s", st, a.Detail)
		}
	}
	led.fail("write %s through %s: 500 stale parents in a row", id, base)
	return false, "500 stale parents in a row"
}

// mpCommit is an item of GET /commits.
type mpCommit struct {
	ID        string   `json:"id"`
	Parents   []string `json:"parents"`
	NumOps    int      `json:"num_ops"`
	Artifacts int      `json:"artifacts"`
}

// history reads main's first-parent log through base, newest first.
func (c *mpClient) history(t *testing.T, base string) []mpCommit {
	t.Helper()
	var all []mpCommit
	cursor := ""
	for {
		var page struct {
			Items      []mpCommit `json:"items"`
			NextCursor string     `json:"next_cursor"`
		}
		u := base + "/v1/contexts/" + mpCtx + "/commits?limit=1000"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if st := c.do("GET", u, nil, &page); st != 200 {
			t.Fatalf("GET %s: %d", u, st)
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// checkHistory checks, through every server, that they agree on the head,
// that main's history is one line of one-artifact commits, and that every
// acknowledged commit is on it exactly once with its artifact at version 1
// at the head. With exact, every commit but the first is acknowledged
// (no write was cut short). It returns the head.
func checkHistory(t *testing.T, c *mpClient, bases []string, led *mpLedger, exact bool) mpHead {
	t.Helper()
	head, st := c.head(bases[0])
	if st != 200 {
		t.Fatalf("GET hash: %d", st)
	}
	for _, b := range bases[1:] {
		if h, st := c.head(b); st != 200 || h != head {
			t.Fatalf("%s reports head %+v (%d), %s reports %+v", b, h, st, bases[0], head)
		}
	}
	var first []mpCommit
	for i, b := range bases {
		hist := c.history(t, b)
		if i == 0 {
			first = hist
		} else if fmt.Sprint(hist) != fmt.Sprint(first) {
			t.Fatalf("%s and %s list different histories of main", b, bases[0])
		}
	}
	if len(first) == 0 || first[0].ID != head.Commit {
		t.Fatalf("the history does not start at the head %s", head.Commit)
	}
	pos := map[string]int{}
	for i, cm := range first {
		if _, dup := pos[cm.ID]; dup {
			t.Fatalf("commit %s is listed twice", cm.ID)
		}
		pos[cm.ID] = i
		last := i == len(first)-1
		switch {
		case last && len(cm.Parents) != 0:
			t.Fatalf("the oldest commit %s has parents %v: the log is cut", cm.ID, cm.Parents)
		case !last && (len(cm.Parents) != 1 || cm.Parents[0] != first[i+1].ID):
			t.Fatalf("commit %s has parents %v, want exactly [%s]: main's history is not one line", cm.ID, cm.Parents, first[i+1].ID)
		case !last && (cm.NumOps != 1 || cm.Artifacts != first[i+1].Artifacts+1):
			t.Fatalf("commit %s has %d ops and %d artifacts after its parent's %d: not one whole one-artifact write", cm.ID, cm.NumOps, cm.Artifacts, first[i+1].Artifacts)
		}
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range led.acks {
		if seen[a.commit] {
			t.Fatalf("commit %s was acknowledged to two writes", a.commit)
		}
		seen[a.commit] = true
		if _, ok := pos[a.commit]; !ok {
			t.Fatalf("acknowledged commit %s (artifact %s) is not on main's history", a.commit, a.id)
		}
		var art struct {
			Version int `json:"version"`
		}
		if st := c.do("GET", bases[len(seen)%len(bases)]+"/v1/contexts/"+mpCtx+"/artifacts/"+url.PathEscape(a.id), nil, &art); st != 200 || art.Version != 1 {
			t.Fatalf("acknowledged artifact %s: %d, version %d (want 200, version 1)", a.id, st, art.Version)
		}
	}
	if exact && len(led.acks) != len(first)-1 {
		t.Fatalf("%d writes were acknowledged and main has %d commits after its first", len(led.acks), len(first)-1)
	}
	return head
}

// runBin runs the binary and returns its exit code and output.
func runBin(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return 0, string(out)
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, out := runBin(t, bin, args...)
	if code != 0 {
		t.Fatalf("artifactd %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// stop ends a server with SIGTERM (a graceful shutdown) and waits.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// TestMultiProcessPostgres runs several `artifactd serve` processes on
// one PostgreSQL database, with clients spread over them writing to one
// branch of one context.
func TestMultiProcessPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the multi-process tests take tens of seconds")
	}
	dsn := pgtest.DSN(t)
	bin := buildArtifactd(t)
	t.Run("serialised", func(t *testing.T) { testMPSerialised(t, bin, pgTestStore(t, dsn)) })
	t.Run("sigkill", func(t *testing.T) { testMPKill(t, bin, pgTestStore(t, dsn)) })
}

// testMPSerialised: 3 processes, 16 clients (half with parent), a fixed
// count of writes. Every acknowledged commit is on main's one-line
// history exactly once, the final hash verifies through each process and,
// after migrate back to Badger, offline.
func testMPSerialised(t *testing.T, bin, spec string) {
	const procs, clients, each = 3, 16, 20
	var servers []*server
	var bases []string
	for range procs {
		s := startServeArgs(t, bin, "--store", spec)
		t.Cleanup(s.kill)
		servers = append(servers, s)
		bases = append(bases, s.base)
	}
	c := newMPClient()
	if st := c.do("POST", bases[0]+"/v1/contexts", map[string]any{"id": mpCtx}, nil); st != http.StatusCreated {
		t.Fatalf("create context: %d", st)
	}
	led := newMPLedger()
	// lat holds each process's write latencies (retries of stale parents
	// included): how evenly the processes take turns.
	var latMu sync.Mutex
	lat := make([][]time.Duration, procs)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := bases[i%procs]
			for n := range each {
				id := fmt.Sprintf("c%02d-%03d", i, n)
				start := time.Now()
				if !writeOne(c, base, id, i%2 == 1, led) {
					led.fail("write %s through %s was not acknowledged (no process was stopped)", id, base)
				}
				took := time.Since(start)
				latMu.Lock()
				lat[i%procs] = append(lat[i%procs], took)
				latMu.Unlock()
			}
		}()
	}
	wg.Wait()
	for p, ds := range lat {
		slices.Sort(ds)
		t.Logf("process %d: %d writes, latency p50 %s, p99 %s, max %s", p, len(ds), ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1])
	}
	led.report(t)
	head := checkHistory(t, c, bases, led, true)
	if len(led.acks) != clients*each {
		t.Fatalf("%d acknowledged writes, want %d", len(led.acks), clients*each)
	}
	for _, b := range bases {
		mustRun(t, bin, "replay", "--server", b, "--context", mpCtx, "--verify", head.ContextHash)
	}
	for _, s := range servers {
		s.stop()
	}
	mustRun(t, bin, "fsck", "--store", spec)
	dir := filepath.Join(t.TempDir(), "badger")
	out := mustRun(t, bin, "migrate", "--from", spec, "--to", "badger:"+dir)
	if !strings.Contains(out, "verified:") {
		t.Fatalf("migrate did not report its check:\n%s", out)
	}
	mustRun(t, bin, "replay", "--data", dir, "--context", mpCtx, "--verify", head.ContextHash)
	mustRun(t, bin, "fsck", "--data", dir)
	// And back: a second PostgreSQL store from the Badger copy.
	back := pgTestStore(t, pgtest.DSN(t))
	mustRun(t, bin, "migrate", "--from", dir, "--to", back)
	mustRun(t, bin, "replay", "--store", back, "--context", mpCtx, "--verify", head.ContextHash)
}

// mpSlot is one of the processes of the kill test, replaced on restart.
type mpSlot struct {
	mu sync.Mutex
	s  *server
}

func (sl *mpSlot) base() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.s.base
}

// testMPKill: 3 processes under 16 writing clients; one of them is
// SIGKILLed and restarted, in turn, several times. While one is down the
// others acknowledge writes; afterwards every acknowledged commit is on
// main's one-line history exactly once, every commit on it is one whole
// one-artifact write, fsck is clean and the head verifies.
func testMPKill(t *testing.T, bin, spec string) {
	const procs, clients, kills = 3, 16, 6
	slots := make([]*mpSlot, procs)
	for i := range slots {
		slots[i] = &mpSlot{s: startServeArgs(t, bin, "--store", spec)}
	}
	t.Cleanup(func() {
		for _, sl := range slots {
			sl.s.kill()
		}
	})
	c := newMPClient()
	if st := c.do("POST", slots[0].base()+"/v1/contexts", map[string]any{"id": mpCtx}, nil); st != http.StatusCreated {
		t.Fatalf("create context: %d", st)
	}
	led := newMPLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("c%02d-%05d", i, n) // a new id per attempt
				if !writeOne(c, slots[i%procs].base(), id, i%2 == 1, led) {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	seed := rnd.Uint64()
	t.Logf("kill seed %d", seed)
	rk := rand.New(rand.NewPCG(seed, 0))
	for k := range kills {
		time.Sleep(time.Duration(300+rk.IntN(700)) * time.Millisecond)
		victim := k % procs
		sl := slots[victim]
		sl.mu.Lock()
		sl.s.kill()
		// No kept-alive connection to the killed process may be reused:
		// its port may go to a restarted one, and a POST on a dead
		// connection is not retried by the client.
		c.cl.CloseIdleConnections()
		// The others keep serving while it is down.
		for j, other := range slots {
			if j == victim {
				continue
			}
			id := fmt.Sprintf("probe-%d-%d", k, j)
			if ok, why := writeOneStatus(c, other.base(), id, false, led); !ok {
				sl.mu.Unlock()
				t.Fatalf("kill %d (seed %d): process %d did not acknowledge a write while process %d was down: %s\n%s", k, seed, j, victim, why, tail(other.s.stderr.String(), 3000))
			}
		}
		sl.s = startServeArgs(t, bin, "--store", spec)
		sl.mu.Unlock()
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	led.report(t)
	bases := make([]string, procs)
	for i, sl := range slots {
		bases[i] = sl.base()
	}
	head := checkHistory(t, c, bases, led, false)
	t.Logf("%d acknowledged writes over %d kills", len(led.acks), kills)
	for _, b := range bases {
		mustRun(t, bin, "replay", "--server", b, "--context", mpCtx, "--verify", head.ContextHash)
	}
	for _, sl := range slots {
		sl.s.stop()
	}
	mustRun(t, bin, "fsck", "--store", spec)
	mustRun(t, bin, "replay", "--store", spec, "--context", mpCtx, "--verify", head.ContextHash)
}
