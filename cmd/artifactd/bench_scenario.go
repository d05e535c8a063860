package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// scenarioConfig is what `artifactd bench --scenario NAME` was asked.
// Zero sizes take the scenario's default (scenarioDefaults).
type scenarioConfig struct {
	name      string
	addr      string
	dataDir   string
	token     string
	store     benchStore // the in-process server's store options
	pid       int
	clients   int // 0: the scenario's default
	runs      int
	artifacts int
	depth     int
	batch     int
	// chainBatch is the hub scenario's commit size for the chain its
	// deep audit reads (0: the chain scenario's 2000).
	chainBatch int
	timeout    time.Duration
	duration   time.Duration // soak: how long the load runs (0: 10m)
	// memProfile, when set, receives the heap profile taken when the
	// scenario ends, before the in-process server stops (bench
	// --memprofile): the live heap with the server's caches in it.
	memProfile string
}

func (c *scenarioConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.name, "scenario", "", "run one of the core scenarios instead of the commit load: runs, cold, big, chain, hub, soak, or disk (the data directory's synced-write latency, alone and during bulk writes: the floor of a durable commit) (prints JSON)")
	fs.IntVar(&c.pid, "pid", 0, "scenarios with --addr: the server's process id, to read its resident size from /proc/PID/status")
	fs.IntVar(&c.runs, "runs", 0, "runs scenario: agent runs (default 6000)")
	fs.IntVar(&c.artifacts, "artifacts", 0, "runs: artifacts per run (default 101); cold: artifacts in the context (default 100000); big: artifacts (default 1000000)")
	fs.IntVar(&c.depth, "depth", 0, "chain and hub scenarios: depth of the derivation chain (default 100000)")
	fs.IntVar(&c.batch, "batch", 0, "artifacts per bulk commit, each with its edge (defaults: cold and big 5000, chain 2000, hub 10000)")
	fs.IntVar(&c.chainBatch, "chain-batch", 0, "hub scenario: artifacts per commit of the chain its deep audit reads (default 2000; at 10000 each commit's new records pass 1 MiB and are packed)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "scenarios: stop after this long and report what was measured, marked cut")
}

// defaults fills in the sizes the issue names for each scenario.
func (c *scenarioConfig) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	switch c.name {
	case "runs":
		def(&c.runs, 6000)
		def(&c.artifacts, 101)
		def(&c.clients, 4)
	case "cold":
		def(&c.artifacts, 100_000)
		def(&c.batch, 5000)
	case "big":
		def(&c.artifacts, 1_000_000)
		def(&c.batch, 5000)
	case "chain":
		def(&c.depth, 100_000)
		def(&c.batch, 2000)
	case "hub":
		def(&c.depth, 100_000)
		def(&c.batch, 10_000)
		def(&c.chainBatch, 2000)
	case "soak":
		def(&c.clients, 16)
		if c.duration == 0 {
			c.duration = 10 * time.Minute
		}
	case "disk":
		if c.duration == 0 {
			c.duration = 10 * time.Second
		}
	}
	def(&c.clients, 1)
}

// scenarioParams echoes the sizes a scenario ran with.
type scenarioParams struct {
	Runs            int `json:"runs,omitempty"`
	ArtifactsPerRun int `json:"artifacts_per_run,omitempty"`
	Artifacts       int `json:"artifacts,omitempty"`
	Depth           int `json:"depth,omitempty"`
	Batch           int `json:"batch,omitempty"`
	ChainBatch      int `json:"chain_batch,omitempty"`
	Clients         int `json:"clients"`
	// Store is the in-process server's store options other than the
	// defaults (absent: serve's defaults, or --addr).
	Store *benchStore `json:"store,omitempty"`
	// TimeoutNS is the --timeout the run was given.
	TimeoutNS time.Duration `json:"timeout_ns"`
}

// rssSample is the server's resident set size after At units of work
// (runs, or artifacts written, as the scenario says).
type rssSample struct {
	At    int64 `json:"at"`
	Bytes int64 `json:"bytes"`
	// Anon and File split Bytes into anonymous memory (heaps) and mapped
	// file pages (Badger maps its tables; the kernel may drop those pages
	// under pressure).
	Anon int64 `json:"anon_bytes,omitempty"`
	File int64 `json:"file_bytes,omitempty"`
	// Go is the in-process server's Go memory at the sample (absent with
	// --addr): what of Anon the heap holds live, what it may grow to
	// before it collects, and what it holds free.
	Go *goMemory `json:"go,omitempty"`
}

// goMemory is the Go runtime's view of an in-process server's memory
// (runtime/metrics), and what the store's caches estimate they hold. A
// resident size follows the heap goal more than the live heap: the heap
// grows to the goal before a collection, and freed pages stay resident
// until the runtime returns them.
type goMemory struct {
	// Live is the heap live after the last collection.
	Live int64 `json:"heap_live_bytes"`
	// Goal is the heap size at which the next collection starts.
	Goal int64 `json:"heap_goal_bytes"`
	// Free is free heap memory not yet returned to the OS (resident).
	Free int64 `json:"heap_free_bytes"`
	// Released is heap memory returned to the OS (not resident).
	Released int64 `json:"heap_released_bytes"`
	// Total is all the memory the runtime has mapped, released or not.
	Total int64 `json:"total_bytes"`
	// Limit is the soft memory limit in force (limitMemory).
	Limit int64 `json:"limit_bytes"`
	// Cached is the store's estimate of its caches (Store.CachedBytes).
	Cached int64 `json:"cached_bytes"`
}

// readGoMemory reads the runtime's memory metrics; cached is the store's
// estimate of its caches.
func readGoMemory(cached int64) *goMemory {
	names := []string{"/gc/heap/live:bytes", "/gc/heap/goal:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/total:bytes", "/gc/gomemlimit:bytes"}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	v := func(i int) int64 { return metricBytes(samples[i]) }
	return &goMemory{Live: v(0), Goal: v(1), Free: v(2), Released: v(3), Total: v(4), Limit: v(5), Cached: cached}
}

// scenarioResult is what a scenario measured. Counts are of acknowledged
// requests; a figure that was not reached (the run was cut or failed) is
// absent or zero.
type scenarioResult struct {
	Scenario string         `json:"scenario"`
	Target   string         `json:"target"`
	Params   scenarioParams `json:"params"`
	// Cut says the --timeout (or an interrupt) ended the run early; CutIn
	// names the phase that was running.
	Cut     bool          `json:"cut"`
	CutIn   string        `json:"cut_in,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// CPU is the server process's CPU time over the run (user + system,
	// in steps of 10 ms; with the in-process server it includes the
	// client), absent when it cannot be read. On a loaded machine it is
	// steadier than wall time.
	CPU       time.Duration `json:"cpu_ns"`
	Contexts  int64         `json:"contexts"`
	Commits   int64         `json:"commits"`
	Artifacts int64         `json:"artifacts"`
	Edges     int64         `json:"edges"`
	Errors    int64         `json:"errors"`
	FirstErr  string        `json:"first_error,omitempty"`
	// RSSNote says why there are no resident-size figures, when there are
	// none (--addr without --pid, or no /proc).
	RSSNote string      `json:"rss_note,omitempty"`
	RSS     []rssSample `json:"rss,omitempty"`
	// RSSPeak is the server's highest resident size (VmHWM), read when
	// the run ends: the samples are taken between units of work, and a
	// memory limit meets what lies between them too (a bulk commit's
	// decision). With the in-process server it includes the client.
	RSSPeak int64 `json:"rss_peak_bytes,omitempty"`
	// RSSPeakSince says what RSSPeak covers: "run" when the high-water
	// mark was reset as the run began (/proc/PID/clear_refs), "process"
	// when it could not be and counts from the server's start.
	RSSPeakSince string `json:"rss_peak_since,omitempty"`

	Runs  *runsFigures  `json:"runs,omitempty"`
	Cold  *coldFigures  `json:"cold,omitempty"`
	Big   *bigFigures   `json:"big,omitempty"`
	Chain *chainFigures `json:"chain,omitempty"`
	Hub   *hubFigures   `json:"hub,omitempty"`
	Disk  *diskFigures  `json:"disk,omitempty"`
	Soak  *soakFigures  `json:"soak,omitempty"`

	mu sync.Mutex // guards Errors and FirstErr from concurrent clients
}

// latency summarises a set of request latencies.
type latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

func summarise(d []time.Duration) latency {
	if len(d) == 0 {
		return latency{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return latency{N: len(s), P50: at(0.50), P99: at(0.99), Max: s[len(s)-1]}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// errCut marks a scenario phase ended by the scenario's deadline.
var errCut = errors.New("scenario cut by --timeout")

// benchClient is a keep-alive HTTP client for one target. Its methods are
// safe for concurrent use.
type benchClient struct {
	base  func() string // the current target (it changes when the in-process server restarts)
	token string
	http  *http.Client
	tr    *http.Transport
}

func newBenchClient(base func() string, token string, conns int) *benchClient {
	tr := &http.Transport{MaxIdleConns: conns + 2, MaxIdleConnsPerHost: conns + 2, DisableCompression: true, IdleConnTimeout: time.Minute}
	// No client timeout: a scenario's deadline bounds every request, and a
	// commit that takes minutes is a figure, not an error.
	return &benchClient{base: base, token: token, tr: tr, http: &http.Client{Transport: tr}}
}

// do sends one request and returns the status and body; a transport error
// after the context ended is errCut.
func (c *benchClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	res, err := c.send(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil && ctx.Err() != nil {
		return 0, nil, errCut
	}
	return res.StatusCode, b, err
}

// send sends a request (a JSON body when body is not nil) and returns the
// response, whose body the caller closes; a request the context ended is
// errCut.
func (c *benchClient) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errCut
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return res, nil
}

// drain sends a GET and counts the bytes of its body without keeping
// them, refusing any status but 200: the in-process server shares its
// heap with this client, and a body of tens of megabytes held here would
// be the server's collector's work too.
func (c *benchClient) drain(ctx context.Context, path string) (int64, error) {
	res, err := c.send(ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		return 0, fmt.Errorf("GET %s: status %d (want 200): %s", path, res.StatusCode, truncate(bytes.TrimSpace(b), 300))
	}
	n, err := io.Copy(io.Discard, res.Body)
	if err != nil && ctx.Err() != nil {
		return n, errCut
	}
	return n, err
}

// expect sends a request and refuses any status but want.
func (c *benchClient) expect(ctx context.Context, want int, method, path string, body []byte) ([]byte, error) {
	code, b, err := c.do(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if code != want {
		return nil, fmt.Errorf("%s %s: status %d (want %d): %s", method, path, code, want, truncate(bytes.TrimSpace(b), 300))
	}
	return b, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// createContext creates a context in the given quarantine mode.
func (c *benchClient) createContext(ctx context.Context, id, mode string) error {
	body, _ := json.Marshal(map[string]string{"id": id, "quarantine": mode})
	_, err := c.expect(ctx, http.StatusCreated, "POST", "/v1/contexts", body)
	return err
}

// putArtifact is one one-artifact commit through the one-call path, with
// a derived_from edge to dep when dep is not empty.
func (c *benchClient) putArtifact(ctx context.Context, ctxID, id, typ, dep string) error {
	b := fmt.Appendf(nil, `{"id":%q,"type":%q,"produced_by":"bench","data":{"text":"%s %s"}`, id, typ, typ, id)
	if dep != "" {
		b = fmt.Appendf(b, `,"edges":[{"rel":"derived_from","to":%q}]`, dep)
	}
	b = append(b, '}')
	_, err := c.expect(ctx, http.StatusCreated, "POST", "/v1/contexts/"+ctxID+"/artifacts", b)
	return err
}

// bulkItem is one artifact of a bulk commit and the artifacts it is
// derived_from.
type bulkItem struct {
	id, typ string
	deps    []string
}

// bulkCommit writes items as one commit of puts followed by their links.
func (c *benchClient) bulkCommit(ctx context.Context, ctxID string, items []bulkItem) error {
	b := make([]byte, 0, 160*len(items)+64)
	b = append(b, `{"author":"bench","message":"bulk","ops":[`...)
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	for _, it := range items {
		sep()
		b = fmt.Appendf(b, `{"op":"put","artifact":{"id":%q,"type":%q,"produced_by":"bench","data":{"text":"%s %s"}}}`, it.id, it.typ, it.typ, it.id)
	}
	for _, it := range items {
		for _, d := range it.deps {
			sep()
			b = fmt.Appendf(b, `{"op":"link","from":%q,"rel":"derived_from","to":%q}`, it.id, d)
		}
	}
	b = append(b, "]}"...)
	_, err := c.expect(ctx, http.StatusCreated, "POST", "/v1/contexts/"+ctxID+"/commits", b)
	return err
}

// rssReader reads the server's resident set size.
type rssReader struct {
	path string // /proc/self/status or /proc/PID/status; empty: not available
}

// read returns VmRSS in bytes, or 0 when resident sizes are not available.
func (r rssReader) read() int64 { return r.field("VmRSS:") }

// peak returns VmHWM, the highest resident size since the process
// started or since resetPeak, in bytes (0: not available).
func (r rssReader) peak() int64 { return r.field("VmHWM:") }

// resetPeak sets the process's high-water mark to its resident size now
// (Linux 4.0 and later: "5" into /proc/PID/clear_refs, which needs the
// right to trace it) and reports whether it could.
func (r rssReader) resetPeak() bool {
	if r.path == "" {
		return false
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(r.path), "clear_refs"), os.O_WRONLY, 0)
	if err != nil {
		return false
	}
	_, err = f.WriteString("5")
	return errors.Join(err, f.Close()) == nil
}

// field returns one kB field of /proc/PID/status (VmRSS:, RssAnon:,
// RssFile:) in bytes, or 0 when it cannot be read.
func (r rssReader) field(name string) int64 {
	if r.path == "" {
		return 0
	}
	f, err := os.Open(r.path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// cpuReader reads the server's CPU time (user + system, all threads).
type cpuReader struct {
	path string // /proc/self/stat or /proc/PID/stat; empty: not available
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

// read returns the process's CPU time so far, or 0 when not available.
func (c cpuReader) read() time.Duration {
	if c.path == "" {
		return 0
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+s) * time.Second / clockTicks
}

// scenarioRun is the state one scenario works with.
type scenarioRun struct {
	cfg    scenarioConfig
	c      *benchClient
	server *benchServer // nil with --addr
	rss    rssReader
	cpu    cpuReader
	res    *scenarioResult
	// prefix makes context ids unique per run, so --addr can be reused.
	prefix string
	// current names the phase running, reported as CutIn when cut.
	current string
}

// sample records the server's resident size after at units of work. It
// is safe for concurrent use.
func (r *scenarioRun) sample(at int64) int64 {
	b := r.rss.read()
	if b > 0 {
		anon, file := r.rss.field("RssAnon:"), r.rss.field("RssFile:")
		var gm *goMemory
		if r.server != nil && r.server.st != nil {
			gm = readGoMemory(r.server.st.CachedBytes())
		}
		r.res.mu.Lock()
		r.res.RSS = append(r.res.RSS, rssSample{At: at, Bytes: b, Anon: anon, File: file, Go: gm})
		r.res.mu.Unlock()
	}
	return b
}

// count adds acknowledged work to the result. It is safe for concurrent
// use.
func (r *scenarioRun) count(contexts, commits, artifacts, edges int64) {
	r.res.mu.Lock()
	defer r.res.mu.Unlock()
	r.res.Contexts += contexts
	r.res.Commits += commits
	r.res.Artifacts += artifacts
	r.res.Edges += edges
}

func (r *scenarioRun) fail(err error) {
	r.res.mu.Lock()
	defer r.res.mu.Unlock()
	r.res.Errors++
	if r.res.FirstErr == "" {
		r.res.FirstErr = err.Error()
	}
}

// scenarioNames lists the scenarios for usage messages.
const scenarioNames = "runs, cold, big, chain, hub, soak, disk"

// scenarioBody returns the body of a scenario (nil for an unknown name).
// A body returns errCut when the deadline ended it, another error when a
// request failed.
func scenarioBody(name string) func(context.Context, *scenarioRun) error {
	switch name {
	case "runs":
		return scenarioRuns
	case "cold":
		return scenarioCold
	case "big":
		return scenarioBig
	case "chain":
		return scenarioChain
	case "hub":
		return scenarioHub
	case "soak":
		return scenarioSoak
	case "disk":
		return scenarioDisk
	}
	return nil
}

// loopbackAddr refuses a target that is not on this machine: the scenarios
// are load generators.
func loopbackAddr(addr string) error {
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--addr %q is not an http(s) URL", addr)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--addr %q: scenarios run against loopback addresses only", addr)
}

// runScenario runs one scenario and prints its result as JSON. It exits
// 0 when every request succeeded (also when the run was cut by
// --timeout: the result says so), 1 when a request failed, 2 on usage.
func runScenario(ctx context.Context, cfg scenarioConfig, stdout, stderr io.Writer) int {
	body := scenarioBody(cfg.name)
	if body == nil {
		return fail(stderr, exitUsage, "bench: unknown --scenario %q (one of %s)", cfg.name, scenarioNames)
	}
	cfg.defaults()
	switch {
	case cfg.runs < 0 || cfg.artifacts < 0 || cfg.depth < 0 || cfg.batch < 0 || cfg.chainBatch < 0 || cfg.pid < 0:
		return fail(stderr, exitUsage, "bench: sizes must not be negative")
	case cfg.chainBatch != 0 && cfg.name != "hub":
		return fail(stderr, exitUsage, "bench: --chain-batch is for the hub scenario")
	case cfg.clients < 1 || cfg.clients > 256:
		return fail(stderr, exitUsage, "bench: --clients must be 1..256 for a scenario")
	case cfg.timeout <= 0:
		return fail(stderr, exitUsage, "bench: --timeout must be positive")
	case cfg.duration < 0:
		return fail(stderr, exitUsage, "bench: --duration must not be negative")
	case cfg.name == "runs" && cfg.artifacts < 2:
		return fail(stderr, exitUsage, "bench: runs needs --artifacts ≥ 2 (a question and an answer)")
	case cfg.name == "runs" && cfg.runs > 1_000_000, cfg.artifacts > 10_000_000, cfg.depth > 10_000_000, cfg.batch > 50_000, cfg.chainBatch > 50_000:
		return fail(stderr, exitUsage, "bench: sizes are bounded (runs ≤ 1e6, artifacts and depth ≤ 1e7, batch and chain-batch ≤ 50000)")
	case cfg.addr != "" && (cfg.dataDir != "" || cfg.store != benchStore{}):
		return fail(stderr, exitUsage, "bench: --data, --nosync, --cache-bytes, --mapped-bytes, --value-threshold and --table-bytes are for the in-process server; not with --addr")
	case cfg.addr == "" && cfg.pid != 0:
		return fail(stderr, exitUsage, "bench: --pid names the server of --addr")
	case cfg.addr != "" && cfg.name == "cold":
		return fail(stderr, exitUsage, "bench: the cold scenario restarts the in-process server; it cannot restart --addr")
	case cfg.addr != "" && cfg.name == "disk":
		return fail(stderr, exitUsage, "bench: the disk scenario measures the in-process server's data directory; not with --addr")
	}
	run := &scenarioRun{cfg: cfg, prefix: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	run.res = &scenarioResult{Scenario: cfg.name, Params: scenarioParams{Clients: cfg.clients, TimeoutNS: cfg.timeout}}
	if cfg.store != (benchStore{}) {
		run.res.Params.Store = &cfg.store
	}
	if cfg.addr != "" {
		if err := loopbackAddr(cfg.addr); err != nil {
			return fail(stderr, exitUsage, "bench: %v", err)
		}
		base := strings.TrimSuffix(cfg.addr, "/")
		run.c = newBenchClient(func() string { return base }, cfg.token, cfg.clients)
		if cfg.pid != 0 {
			run.rss.path = "/proc/" + strconv.Itoa(cfg.pid) + "/status"
			run.cpu.path = "/proc/" + strconv.Itoa(cfg.pid) + "/stat"
		} else {
			run.res.RSSNote = "no --pid: the server's resident size is not measured"
		}
	} else {
		srv, err := newBenchServer(ctx, cfg.dataDir, cfg.store)
		if err != nil {
			return fail(stderr, exitUsage, "bench: %v", err)
		}
		defer func() {
			if err := srv.close(); err != nil {
				fmt.Fprintf(stderr, "artifactd: bench: stopping the server: %v\n", err)
			}
		}()
		run.server = srv
		run.c = newBenchClient(func() string { return srv.base }, "", cfg.clients)
		run.rss.path = "/proc/self/status"
		run.cpu.path = "/proc/self/stat"
	}
	defer run.c.tr.CloseIdleConnections()
	if run.rss.path != "" && run.rss.read() == 0 {
		run.res.RSSNote = "cannot read VmRSS from " + run.rss.path
		run.rss.path, run.cpu.path = "", ""
	}
	if run.rss.path != "" {
		run.res.RSSPeakSince = "process"
		if run.rss.resetPeak() {
			run.res.RSSPeakSince = "run"
		}
	}
	cpu0 := run.cpu.read()
	run.res.Target = run.c.base()

	sctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	start := time.Now()
	err := body(sctx, run)
	run.res.Elapsed = time.Since(start)
	if run.cpu.path != "" {
		run.res.CPU = run.cpu.read() - cpu0
	}
	if run.rss.path != "" {
		run.res.RSSPeak = run.rss.peak()
	}
	if cfg.memProfile != "" {
		if perr := writeHeapProfile(cfg.memProfile); perr != nil {
			fmt.Fprintf(stderr, "artifactd: bench: %v\n", perr)
		}
	}
	code := exitOK
	switch {
	case err == nil:
	case errors.Is(err, errCut) || sctx.Err() != nil:
		run.res.Cut = true
		run.res.CutIn = cmp.Or(run.current, "setup")
		fmt.Fprintf(stderr, "artifactd: bench: %s cut by --timeout %s during %s\n", cfg.name, cfg.timeout, run.res.CutIn)
	default:
		run.fail(err)
		code = exitMismatch
	}
	// The result is printed before the in-process server stops: stopping
	// waits for a commit still running when the run was cut.
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(run.res); err != nil {
		return fail(stderr, exitUsage, "bench: %v", err)
	}
	if f, ok := stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
	return code
}

// phase names what a scenario is doing, for the cut report.
func (r *scenarioRun) phase(name string) { r.current = name }
