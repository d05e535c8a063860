package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchResult is what `artifactd bench` measured.
type benchResult struct {
	Target    string        `json:"target"`
	Clients   int           `json:"clients"`
	Commits   int64         `json:"commits"`
	Errors    int64         `json:"errors"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"commits_per_second"`
	P50       time.Duration `json:"p50_ns"`
	P95       time.Duration `json:"p95_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
	FirstErr  string        `json:"first_error,omitempty"`
}

// startRecording creates path and starts a recording into it (a CPU
// profile, an execution trace); the func it returns stops the recording
// and closes the file.
func startRecording(path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		stop()
		f.Close()
	}, nil
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", "[--addr URL | --data DIR] [--clients N] [--duration D] [--requests N] [--token T] [--json]\n       artifactd bench --scenario runs|cold|big|chain|hub|soak|disk [--addr URL [--pid PID] | --data DIR] [--runs N] [--artifacts N] [--depth N] [--batch N] [--chain-batch N (hub)] [--duration D (soak, disk)] [--timeout D]", stderr)
	addr := fs.String("addr", "", "base URL of a running server, or several separated by commas (processes serving one store; clients are spread over them in turn); default: start one in-process on a loopback port")
	dataDir := fs.String("data", "", "data directory for the in-process server (default: a temporary directory, removed afterwards)")
	clients := fs.Int("clients", 1, "concurrent keep-alive clients")
	duration := fs.Duration("duration", 10*time.Second, "how long to run (ignored when --requests is set)")
	requests := fs.Int64("requests", 0, "stop after this many commits in total (0: run for --duration)")
	token := fs.String("token", os.Getenv("ARTIFACTD_TOKEN"), "bearer token for --addr (default $ARTIFACTD_TOKEN)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var bs benchStore
	bs.flags(fs)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run or scenario (client and in-process server, including its start) to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile (live objects after a collection) to this file at the end of the run, or of the scenario before its in-process server stops")
	traceFile := fs.String("trace", "", "write an execution trace of the run or scenario (client and in-process server; go tool trace reads it) to this file")
	var sc scenarioConfig
	sc.flags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "bench: unexpected argument %q", pos[0])
	}
	if *clients < 1 || *clients > 4096 {
		return fail(stderr, exitUsage, "bench: --clients must be 1..4096")
	}
	if *addr != "" && (*dataDir != "" || bs != benchStore{}) {
		return fail(stderr, exitUsage, "bench: --data, --nosync, --cache-bytes, --mapped-bytes, --value-threshold and --table-bytes are for the in-process server; not with --addr")
	}
	if err := bs.check(); err != nil {
		return fail(stderr, exitUsage, "bench: %v", err)
	}
	if sc.name != "" && strings.Contains(*addr, ",") {
		return fail(stderr, exitUsage, "bench: --scenario takes one --addr")
	}
	for _, rec := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{{*cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {*traceFile, trace.Start, trace.Stop}} {
		if rec.path == "" {
			continue
		}
		done, err := startRecording(rec.path, rec.start, rec.stop)
		if err != nil {
			return fail(stderr, exitUsage, "bench: %v", err)
		}
		defer done()
	}
	if *memProfile != "" && sc.name == "" {
		defer func() {
			if err := writeHeapProfile(*memProfile); err != nil {
				fmt.Fprintf(stderr, "artifactd: bench: %v\n", err)
			}
		}()
	}
	if sc.name != "" {
		sc.addr, sc.dataDir, sc.token, sc.store, sc.memProfile = *addr, *dataDir, *token, bs, *memProfile
		sc.clients = 0
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "clients":
				sc.clients = *clients
			case "duration":
				sc.duration = *duration
			}
		})
		return runScenario(ctx, sc, stdout, stderr)
	}
	var bases []string
	for _, a := range strings.Split(*addr, ",") {
		if a = strings.TrimSuffix(strings.TrimSpace(a), "/"); a != "" {
			bases = append(bases, a)
		}
	}
	if len(bases) == 0 {
		var base string
		var stop func() error
		base, stop, err = startBenchServer(ctx, *dataDir, bs)
		if err != nil {
			return fail(stderr, exitUsage, "bench: %v", err)
		}
		bases = []string{base}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(stderr, "artifactd: bench: stopping the server: %v\n", err)
			}
		}()
	}
	res, err := bench(ctx, bases, *token, *clients, *duration, *requests)
	if err != nil {
		return fail(stderr, exitUsage, "bench: %v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		fmt.Fprintf(stdout, "target:     %s\nclients:    %d\ncommits:    %d in %.2fs (%d errors)\nthroughput: %.0f commits/s\nlatency:    p50 %s  p95 %s  p99 %s  max %s\n",
			res.Target, res.Clients, res.Commits, res.Elapsed.Seconds(), res.Errors, res.PerSecond,
			round(res.P50), round(res.P95), round(res.P99), round(res.Max))
		if res.FirstErr != "" {
			fmt.Fprintf(stdout, "first error: %s\n", res.FirstErr)
		}
	}
	if res.Errors > 0 {
		return exitMismatch
	}
	return exitOK
}

func round(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// startBenchServer serves a store in dir (a new temporary directory when
// empty) on a loopback port, returning its base URL and a stop function
// that also removes a temporary directory.
func startBenchServer(ctx context.Context, dir string, opts benchStore) (string, func() error, error) {
	srv, err := newBenchServer(ctx, dir, opts)
	if err != nil {
		return "", nil, err
	}
	return srv.base, srv.close, nil
}

// bench creates a fresh context (through bases[0]) and has n keep-alive
// clients, client c on bases[c mod len(bases)], POST one new artifact per
// request (one durable commit each) until the duration ends or total
// commits are made.
func bench(ctx context.Context, bases []string, token string, n int, d time.Duration, total int64) (*benchResult, error) {
	tr := &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, MaxConnsPerHost: n, DisableCompression: true, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	do := func(ctx context.Context, base, method, path string, body []byte) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	ctxID := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	body, _ := json.Marshal(map[string]string{"id": ctxID, "quarantine": "enforce"})
	if code, b, err := do(ctx, bases[0], "POST", "/v1/contexts", body); err != nil || code != http.StatusCreated {
		return nil, fmt.Errorf("create context: %d %s %v", code, b, err)
	}
	runCtx := ctx
	if total <= 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var (
		issued, commits, errs atomic.Int64
		firstErr              atomic.Value
		mu                    sync.Mutex
		lat                   []time.Duration
		wg                    sync.WaitGroup
	)
	path := "/v1/contexts/" + ctxID + "/artifacts"
	start := time.Now()
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			for i := 0; runCtx.Err() == nil; i++ {
				if total > 0 && issued.Add(1) > total {
					break
				}
				b := fmt.Appendf(nil, `{"id":"c%d-%d","type":"note","produced_by":"bench","data":{"text":"bench commit %d of client %d"}}`, c, i, i, c)
				t0 := time.Now()
				code, rb, err := do(runCtx, bases[c%len(bases)], "POST", path, b)
				if err != nil && runCtx.Err() != nil {
					break // the run ended during this request
				}
				if err != nil || code != http.StatusCreated {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", code, bytes.TrimSpace(rb), err))
					continue
				}
				mine = append(mine, time.Since(t0))
				commits.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := &benchResult{Target: strings.Join(bases, ","), Clients: n, Commits: commits.Load(), Errors: errs.Load(), Elapsed: elapsed}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstErr = s
	}
	res.PerSecond = float64(res.Commits) / elapsed.Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	res.P50, res.P95, res.P99 = pct(0.50), pct(0.95), pct(0.99)
	if len(lat) > 0 {
		res.Max = lat[len(lat)-1]
	}
	return res, nil
}

// writeHeapProfile writes the live heap, after a collection, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
