package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/artifactd/artifactd/internal/testenv"
)

// The crash harness runs the real artifactd binary: `artifactd serve` on
// a temporary data directory and a loopback port, under concurrent HTTP
// load of every write kind (artifacts, commits, branch + merge, fetches,
// tool results, the outbox: create, claim, complete), SIGKILLed at seeded
// random moments and restarted. After every kill, with the server down:
// `artifactd fsck` must be clean and `artifactd replay --at C --verify H`
// must re-derive the context hash of an acknowledged commit; after every
// restart every acknowledged write must be there, and no effect may have
// been completed under two claims. Runs of more than 20 cycles keep each
// cycle's cost flat: they check new writes and a sample of older ones
// after each restart and everything every 20 cycles and at the end, and
// run fsck (which replays every chain) after every 10th kill.
//
//	go test ./cmd/artifactd -run CrashHarness -v                          # 10 cycles (CI)
//	ARTIFACTD_CRASH_CYCLES=200 go test ./cmd/artifactd -run CrashHarness -v -timeout 30m
//	ARTIFACTD_CRASH_SEED=42 ...                                            # replay one run's kill times

const crashCtx = "crash"

// ledger is what the clients were told: every acknowledged write.
type ledger struct {
	mu sync.Mutex
	// artifacts maps an acknowledged artifact id on main to its content
	// hash ("" when the answer did not carry it); order lists the ids in
	// the order they were acknowledged, and checked how many of them a
	// previous check covered.
	artifacts map[string]string
	order     []string
	checked   int
	// commits are acknowledged commits on main with their context hash.
	commits [][2]string
	// completes maps an effect id to the lease tokens of its acknowledged
	// completes and the result each recorded.
	completes map[string]map[string]string
	acks      int
}

func (l *ledger) artifact(id, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.artifacts[id]; !ok {
		l.order = append(l.order, id)
	}
	l.artifacts[id] = hash
	l.acks++
}

func (l *ledger) commit(id, hash string) {
	if id == "" || hash == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, [2]string{id, hash})
}

func (l *ledger) complete(effect, token, result string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.completes[effect] == nil {
		l.completes[effect] = map[string]string{}
	}
	l.completes[effect][token] = result
	l.acks++
}

// server is one running `artifactd serve`.
type server struct {
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
}

func buildArtifactd(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "no go command to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "artifactd")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServe starts the binary on dir and waits until /readyz answers.
func startServe(t *testing.T, bin, dir string) *server {
	t.Helper()
	return startServeArgs(t, bin, "--data", dir)
}

// startServeArgs starts the binary's serve with the store flags in args
// and waits until /readyz answers.
func startServeArgs(t *testing.T, bin string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"serve"}, args...), "--addr", "127.0.0.1:0", "--body-timeout", "5s")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "serving http://") {
				lines <- l
			}
		}
		close(lines)
	}()
	var base string
	select {
	case l, ok := <-lines:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("serve exited before serving:\n%s", stderr.String())
		}
		rest := l[strings.Index(l, "http://"):]
		base = strings.Fields(rest)[0]
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("serve did not start in 30s:\n%s", stderr.String())
	}
	s := &server{cmd: cmd, base: base, stderr: stderr}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			t.Fatalf("/readyz did not answer 200 within 20s (%v):\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
}

// post sends a JSON body and decodes a 2xx answer into out; it returns
// the status (0 for a transport error).
func post(cl *http.Client, url string, body any, out any) int {
	raw, _ := json.Marshal(body)
	res, err := cl.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0 // an answer cut by the kill is not an acknowledgement
	}
	if res.StatusCode < 300 && out != nil {
		if json.Unmarshal(b, out) != nil {
			return 0
		}
	}
	return res.StatusCode
}

type writeAnswer struct {
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
	Artifact    struct {
		ID          string `json:"id"`
		ContentHash string `json:"content_hash"`
	} `json:"artifact"`
}

// worker writes until ctx ends, recording every acknowledged write.
// Unexpected answers (a 5xx other than 503, a 4xx other than the 409s of
// outbox races) are reported on bad.
func worker(ctx context.Context, base string, g, cycle int, rnd *rand.Rand, led *ledger, bad chan<- string) {
	cl := &http.Client{Timeout: 10 * time.Second}
	v1 := base + "/v1/contexts/" + crashCtx
	check := func(what string, status int, ok ...int) bool {
		for _, o := range ok {
			if status == o {
				return true
			}
		}
		if status != 0 && status != 503 && status != 409 && ctx.Err() == nil {
			select {
			case bad <- fmt.Sprintf("%s: status %d", what, status):
			default:
			}
		}
		return false
	}
	for i := 0; ctx.Err() == nil; i++ {
		tag := fmt.Sprintf("%d-%d-%d", cycle, g, i)
		var a writeAnswer
		switch rnd.IntN(6) {
		case 0:
			id := "a-" + tag
			if check("artifact", post(cl, v1+"/artifacts", map[string]any{"id": id, "type": "note", "data": map[string]any{"text": tag}}, &a), 201) {
				led.artifact(id, a.Artifact.ContentHash)
				led.commit(a.Commit, a.ContextHash)
			}
		case 1:
			x, y := "c1-"+tag, "c2-"+tag
			body := map[string]any{"ops": []map[string]any{
				{"op": "put", "artifact": map[string]any{"id": x, "type": "note", "data": map[string]any{"text": x}}},
				{"op": "put", "artifact": map[string]any{"id": y, "type": "claim", "data": map[string]any{"text": y}}},
				{"op": "link", "from": y, "rel": "derived_from", "to": x},
			}}
			if check("commit", post(cl, v1+"/commits", body, &a), 201) {
				led.artifact(x, "")
				led.artifact(y, "")
				led.commit(a.Commit, a.ContextHash)
			}
		case 2:
			br, id := "b-"+tag, "m-"+tag
			if !check("branch", post(cl, v1+"/branches", map[string]any{"name": br}, nil), 201) {
				continue
			}
			if !check("branch write", post(cl, v1+"/artifacts", map[string]any{"id": id, "branch": br, "type": "note", "data": map[string]any{"text": id}}, &a), 201) {
				continue
			}
			var m struct {
				ContextHash string `json:"context_hash"`
				Commit      struct {
					ID string `json:"id"`
				} `json:"commit"`
			}
			if st := post(cl, v1+"/merge", map[string]any{"theirs": br}, &m); check("merge", st, 200, 201) {
				led.artifact(id, a.Artifact.ContentHash)
				led.commit(m.Commit.ID, m.ContextHash)
			}
		case 3:
			id := "f-" + tag
			body := map[string]any{"id": id, "url": "https://shop.example/item/" + tag, "status": 200,
				"headers": map[string]string{"content-type": "text/plain"}, "body": "The price of item " + tag + " is 3 EUR, in stock."}
			if check("fetch", post(cl, v1+"/fetches", body, &a), 201) {
				led.artifact(id, a.Artifact.ContentHash)
				led.commit(a.Commit, a.ContextHash)
			}
		case 4:
			id := "t-" + tag
			if check("tool result", post(cl, v1+"/tool-results", map[string]any{"id": id, "tool": "calc", "ok": true, "output": "42 for " + tag}, &a), 201) {
				led.artifact(id, a.Artifact.ContentHash)
				led.commit(a.Commit, a.ContextHash)
			}
		case 5:
			name := fmt.Sprintf("w%d", g)
			if !check("effect", post(cl, v1+"/effects", map[string]any{"idempotency_key": "k-" + tag, "kind": "webhook", "target": "https://hooks.example/" + tag}, nil), 201) {
				continue
			}
			var c struct {
				Effects []struct {
					ID         string `json:"id"`
					LeaseToken string `json:"lease_token"`
				} `json:"effects"`
			}
			if !check("claim", post(cl, v1+"/effects/claim", map[string]any{"worker": name, "lease_seconds": 1}, &c), 200) || len(c.Effects) == 0 {
				continue
			}
			e := c.Effects[0]
			result := map[string]any{"sent_by": name, "n": tag}
			if check("complete", post(cl, v1+"/effects/"+e.ID+"/complete", map[string]any{"worker": name, "lease_token": e.LeaseToken, "result": result}, nil), 200) {
				raw, _ := json.Marshal(result)
				led.complete(e.ID, e.LeaseToken, string(raw))
			}
		}
	}
}

// verifyAcked checks acknowledged writes against the running server: all
// of them when full, else every write acknowledged since the last check
// and a random sample of 300 older ones (so that a long run stays linear).
// Effects are always all checked.
func verifyAcked(t *testing.T, base string, led *ledger, full bool, rnd *rand.Rand) {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
	ids := led.order
	if !full {
		ids = append([]string(nil), led.order[led.checked:]...)
		for range min(300, led.checked) {
			ids = append(ids, led.order[rnd.IntN(led.checked)])
		}
	}
	led.checked = len(led.order)
	cl := &http.Client{Timeout: 10 * time.Second}
	get := func(path string, out any) int {
		res, err := cl.Get(base + "/v1/contexts/" + crashCtx + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == 200 && out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return res.StatusCode
	}
	for _, id := range ids {
		want := led.artifacts[id]
		var got struct {
			ContentHash string `json:"content_hash"`
		}
		if st := get("/artifacts/"+id, &got); st != 200 {
			t.Fatalf("acknowledged artifact %s is missing after a restart (%d)", id, st)
		}
		if want != "" && got.ContentHash != want {
			t.Fatalf("acknowledged artifact %s has content hash %s, acknowledged %s", id, got.ContentHash, want)
		}
	}
	for eff, toks := range led.completes {
		if len(toks) > 1 {
			t.Fatalf("effect %s was completed under %d claims", eff, len(toks))
		}
		var got struct {
			Data struct {
				Status string          `json:"status"`
				Result json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if st := get("/artifacts/"+eff, &got); st != 200 {
			t.Fatalf("completed effect %s is missing (%d)", eff, st)
		}
		for _, res := range toks {
			var a, b any
			_ = json.Unmarshal([]byte(res), &a)
			_ = json.Unmarshal(got.Data.Result, &b)
			if got.Data.Status != "sent" || fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("effect %s is %s with result %s; the acknowledged complete recorded %s", eff, got.Data.Status, got.Data.Result, res)
			}
		}
	}
}

// offlineChecks runs fsck (when fsck is set) and replay --verify on an
// acknowledged commit with the server down.
func offlineChecks(t *testing.T, bin, dir string, led *ledger, rnd *rand.Rand, fsck bool) {
	t.Helper()
	if fsck {
		out, err := exec.Command(bin, "fsck", "--data", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("fsck after a kill: %v\n%s", err, out)
		}
	}
	led.mu.Lock()
	n := len(led.commits)
	var c [2]string
	if n > 0 {
		c = led.commits[n-1-rnd.IntN(min(n, 20))]
	}
	led.mu.Unlock()
	if n == 0 {
		return
	}
	out, err := exec.Command(bin, "replay", "--data", dir, "--context", crashCtx, "--at", c[0], "--verify", c[1]).CombinedOutput()
	if err != nil {
		t.Fatalf("replay --at %s --verify %s: %v\n%s", c[0], c[1], err, out)
	}
}

func TestCrashHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the crash harness builds and kills the binary")
	}
	cycles := 10
	if v := os.Getenv("ARTIFACTD_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ARTIFACTD_CRASH_CYCLES=%q", v)
		}
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ARTIFACTD_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ARTIFACTD_CRASH_SEED=%q", v)
		}
		seed = n
	}
	t.Logf("seed %d (ARTIFACTD_CRASH_SEED=%d repeats the kill times), %d cycles", seed, seed, cycles)
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	bin := buildArtifactd(t)
	dir := filepath.Join(t.TempDir(), "data")
	led := &ledger{artifacts: map[string]string{}, completes: map[string]map[string]string{}}
	start := time.Now()
	const workers = 4
	for cycle := range cycles {
		srv := startServe(t, bin, dir)
		if cycle == 0 {
			if st := post(http.DefaultClient, srv.base+"/v1/contexts", map[string]any{"id": crashCtx, "quarantine": "observe"}, nil); st != 201 {
				srv.kill()
				t.Fatalf("create context: %d", st)
			}
		}
		// A long run checks everything every 20 cycles, and new writes
		// plus a sample in between; fsck (which replays every chain) runs
		// after every kill up to 20 cycles, then after every 10th.
		long := cycles > 20
		verifyAcked(t, srv.base, led, !long || cycle%20 == 0, rnd)
		ctx, cancel := context.WithCancel(context.Background())
		bad := make(chan string, 1)
		var wg sync.WaitGroup
		for g := range workers {
			wrnd := rand.New(rand.NewPCG(seed, uint64(cycle*workers+g)))
			wg.Add(1)
			go func() { defer wg.Done(); worker(ctx, srv.base, g, cycle, wrnd, led, bad) }()
		}
		time.Sleep(time.Duration(100+rnd.IntN(600)) * time.Millisecond)
		srv.kill()
		cancel()
		wg.Wait()
		select {
		case msg := <-bad:
			t.Fatalf("cycle %d: unexpected answer: %s\nserver log:\n%s", cycle, msg, tail(srv.stderr.String(), 4000))
		default:
		}
		offlineChecks(t, bin, dir, led, rnd, !long || cycle%10 == 9)
		if long && cycle%10 == 9 {
			led.mu.Lock()
			t.Logf("cycle %d, %v: %d acknowledged writes so far", cycle+1, time.Since(start).Round(time.Second), led.acks)
			led.mu.Unlock()
		}
	}
	// A last start: everything acknowledged is there, then a clean stop
	// and a verify of the final head.
	srv := startServe(t, bin, dir)
	verifyAcked(t, srv.base, led, true, rnd)
	var h struct {
		Commit      string `json:"commit"`
		ContextHash string `json:"context_hash"`
	}
	res, err := http.Get(srv.base + "/v1/contexts/" + crashCtx + "/hash")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&h)
	res.Body.Close()
	_ = srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.cmd.Wait(); err != nil {
		t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, tail(srv.stderr.String(), 4000))
	}
	led.commit(h.Commit, h.ContextHash)
	offlineChecks(t, bin, dir, &ledger{commits: [][2]string{{h.Commit, h.ContextHash}}}, rnd, true)
	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("%d kill cycles in %v: %d acknowledged writes (%d artifacts, %d effects completed), none lost; fsck clean and replay --verify of an acknowledged commit after every kill (fsck every 10th in runs over 20 cycles)",
		cycles, time.Since(start).Round(time.Millisecond), led.acks, len(led.artifacts), len(led.completes))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
