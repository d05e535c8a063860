package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	rtrace "runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rssEvery is how often (in runs) the runs scenario samples the server's
// resident size.
const rssEvery = 500

// hubCommits is how many bulk commits the hub scenario makes onto its hub.
const hubCommits = 5

// runsFigures are the runs scenario's figures: the server's resident size
// after half the runs and after all of them.
type runsFigures struct {
	RunsDone int64 `json:"runs_done"`
	// Half is the run count of the first figure (runs/2: 3,000 of 6,000).
	Half     int     `json:"half"`
	RSSHalf  int64   `json:"rss_at_half_bytes"`
	RSSFull  int64   `json:"rss_at_full_bytes"`
	Ratio    float64 `json:"rss_ratio_full_to_half"`
	Commits1 latency `json:"one_artifact_commits"`
}

// scenarioRuns: N agent runs, each a new context and one-artifact commits
// of a question, claims each derived_from the previous artifact, and an
// answer derived_from the last claim; --clients runs proceed at once.
func scenarioRuns(ctx context.Context, r *scenarioRun) error {
	cfg := r.cfg
	r.res.Params.Runs, r.res.Params.ArtifactsPerRun = cfg.runs, cfg.artifacts
	f := &runsFigures{Half: cfg.runs / 2}
	r.res.Runs = f
	r.phase("runs")
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		lat        []time.Duration
		firstErr   error
		errOnce    sync.Once
		wg         sync.WaitGroup
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	oneRun := func(i int64, mine *[]time.Duration) error {
		id := fmt.Sprintf("%s-run-%d", r.prefix, i)
		if err := r.c.createContext(wctx, id, "enforce"); err != nil {
			return err
		}
		r.count(1, 0, 0, 0)
		prev := ""
		for k := 0; k < cfg.artifacts; k++ {
			aid, typ := fmt.Sprintf("c%d", k), "claim"
			switch k {
			case 0:
				aid, typ = "q", "question"
			case cfg.artifacts - 1:
				aid, typ = "answer", "answer"
			}
			t0 := time.Now()
			if err := r.c.putArtifact(wctx, id, aid, typ, prev); err != nil {
				return err
			}
			*mine = append(*mine, time.Since(t0))
			edges := int64(0)
			if prev != "" {
				edges = 1
			}
			r.count(0, 1, 1, edges)
			prev = aid
		}
		return nil
	}
	for w := 0; w < cfg.clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1024)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for wctx.Err() == nil {
				i := next.Add(1)
				if i > int64(cfg.runs) {
					return
				}
				if err := oneRun(i, &mine); err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				n := done.Add(1)
				if n%rssEvery == 0 || n == int64(f.Half) || n == int64(cfg.runs) {
					r.sample(n)
				}
			}
		}()
	}
	wg.Wait()
	f.RunsDone = done.Load()
	f.Commits1 = summarise(lat)
	slices.SortFunc(r.res.RSS, func(a, b rssSample) int { return int(a.At - b.At) })
	for _, s := range r.res.RSS {
		if s.At == int64(f.Half) {
			f.RSSHalf = s.Bytes
		}
		if s.At == int64(cfg.runs) {
			f.RSSFull = s.Bytes
		}
	}
	f.Ratio = ratio(float64(f.RSSFull), float64(f.RSSHalf))
	if ctx.Err() != nil {
		return errCut
	}
	return firstErr
}

// timed runs fn and returns its wall time and the server's CPU time
// over it (0 when not available).
func (r *scenarioRun) timed(fn func() error) (wall, cpu time.Duration, err error) {
	c0, t0 := r.cpu.read(), time.Now()
	err = fn()
	wall = time.Since(t0)
	if r.cpu.path != "" {
		cpu = r.cpu.read() - c0
	}
	return wall, cpu, err
}

// treeItems returns artifacts [from, to) of a random recursive tree:
// artifact 0 is a question, artifact i > 0 a claim derived_from one
// earlier artifact chosen by a seeded generator (so n artifacts carry
// n-1 edges and the tree is about ln n deep).
func treeItems(rng *rand.Rand, from, to int) []bulkItem {
	items := make([]bulkItem, 0, to-from)
	for i := from; i < to; i++ {
		if i == 0 {
			items = append(items, bulkItem{id: "a0", typ: "question"})
			continue
		}
		items = append(items, bulkItem{id: fmt.Sprintf("a%d", i), typ: "claim", deps: []string{fmt.Sprintf("a%d", rng.IntN(i))}})
	}
	return items
}

// ingestTree writes n tree artifacts into ctxID in commits of batch,
// calling each after every commit with its artifact count, latency and
// CPU time.
func ingestTree(ctx context.Context, r *scenarioRun, ctxID string, rng *rand.Rand, n, batch int, each func(artifacts int, d, cpu time.Duration)) error {
	for from := 0; from < n; from += batch {
		to := min(n, from+batch)
		items := treeItems(rng, from, to)
		d, cpu, err := r.timed(func() error { return r.c.bulkCommit(ctx, ctxID, items) })
		if err != nil {
			return err
		}
		edges := int64(to - from)
		if from == 0 {
			edges--
		}
		r.count(0, 1, int64(to-from), edges)
		each(to, d, cpu)
	}
	return nil
}

// coldFigures are the cold scenario's figures. Each "first" is the first
// request after its own restart of the store.
type coldFigures struct {
	Artifacts      int64         `json:"artifacts"`
	LoadNS         time.Duration `json:"load_ns"`
	RSSLoaded      int64         `json:"rss_loaded_bytes"`
	RestartNS      time.Duration `json:"restart_ns"`
	FirstCommitNS  time.Duration `json:"first_commit_ns"`
	FirstCommitCPU time.Duration `json:"first_commit_cpu_ns"`
	NextCommitNS   time.Duration `json:"second_commit_ns"`
	RSSAfterCommit int64         `json:"rss_after_first_commit_bytes"`
	FirstReadNS    time.Duration `json:"first_read_ns"`
	FirstReadCPU   time.Duration `json:"first_read_cpu_ns"`
	NextReadNS     time.Duration `json:"second_read_ns"`
	RSSAfterRead   int64         `json:"rss_after_first_read_bytes"`
}

// scenarioCold: one context of N artifacts in bulk commits; then, after a
// restart of the in-process store, a one-artifact commit (timed, then a
// second one), and after another restart a point read (timed, then a
// second one), with the resident size after each first request.
func scenarioCold(ctx context.Context, r *scenarioRun) error {
	cfg := r.cfg
	r.res.Params.Artifacts, r.res.Params.Batch = cfg.artifacts, cfg.batch
	f := &coldFigures{}
	r.res.Cold = f
	id := r.prefix + "-cold"
	r.phase("load")
	if err := r.c.createContext(ctx, id, "enforce"); err != nil {
		return err
	}
	r.count(1, 0, 0, 0)
	rng := rand.New(rand.NewPCG(10, 1))
	t0 := time.Now()
	if err := ingestTree(ctx, r, id, rng, cfg.artifacts, cfg.batch, func(n int, _, _ time.Duration) { f.Artifacts = int64(n) }); err != nil {
		return err
	}
	f.LoadNS = time.Since(t0)
	f.RSSLoaded = r.sample(f.Artifacts)

	restart := func() error {
		r.c.tr.CloseIdleConnections()
		t0 := time.Now()
		if err := r.server.restart(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		f.RestartNS = time.Since(t0)
		return nil
	}
	timedPut := func(aid string) (time.Duration, time.Duration, error) {
		d, cpu, err := r.timed(func() error {
			return r.c.putArtifact(ctx, id, aid, "claim", fmt.Sprintf("a%d", rng.IntN(cfg.artifacts)))
		})
		if err == nil {
			r.count(0, 1, 1, 1)
		}
		return d, cpu, err
	}
	timedGet := func() (time.Duration, time.Duration, error) {
		return r.timed(func() error {
			_, err := r.c.expect(ctx, http.StatusOK, "GET", fmt.Sprintf("/v1/contexts/%s/artifacts/a%d", id, rng.IntN(cfg.artifacts)), nil)
			return err
		})
	}
	r.phase("restart")
	if err := restart(); err != nil {
		return err
	}
	r.phase("first commit")
	var err error
	if f.FirstCommitNS, f.FirstCommitCPU, err = timedPut("cold-1"); err != nil {
		return err
	}
	f.RSSAfterCommit = r.sample(f.Artifacts + 1)
	if f.NextCommitNS, _, err = timedPut("cold-2"); err != nil {
		return err
	}
	r.phase("restart")
	if err := restart(); err != nil {
		return err
	}
	r.phase("first read")
	if f.FirstReadNS, f.FirstReadCPU, err = timedGet(); err != nil {
		return err
	}
	f.RSSAfterRead = r.sample(f.Artifacts + 2)
	f.NextReadNS, _, err = timedGet()
	return err
}

// bigFigures are the big scenario's figures. Ingest rates are artifacts
// over the summed latency of the first and the last fifth of the bulk
// commits.
type bigFigures struct {
	Artifacts      int64           `json:"artifacts"`
	CommitNS       []time.Duration `json:"commit_ns"`
	CommitCPU      []time.Duration `json:"commit_cpu_ns"`
	FifthCommits   int             `json:"fifth_commits"`
	FirstFifthRate float64         `json:"first_fifth_artifacts_per_s"`
	LastFifthRate  float64         `json:"last_fifth_artifacts_per_s"`
	RateRatio      float64         `json:"rate_ratio_last_to_first"`
	// The same rates per CPU-second of the server (absent without CPU
	// times): steadier than wall time on a loaded machine.
	FirstFifthCPURate float64 `json:"first_fifth_artifacts_per_cpu_s"`
	LastFifthCPURate  float64 `json:"last_fifth_artifacts_per_cpu_s"`
	RSSEnd            int64   `json:"rss_end_bytes"`
	TipCommits        latency `json:"one_artifact_commits"`
	// Then 200 more one-artifact commits into the big context, each
	// followed by one into one of three small contexts (agent runs of
	// 101 artifacts) in turn: a big context written between other
	// tenants' writes (AltCommits), and theirs (OtherCommits).
	AltCommits      latency `json:"one_artifact_commits_between_others"`
	OtherCommits    latency `json:"other_context_commits"`
	artifactsCommit []int
}

// bigOthers is how many small contexts the big scenario writes to between
// its last one-artifact commits.
const bigOthers = 3

// scenarioBig: one context growing to N artifacts and N-1 edges in bulk
// commits, then 200 one-artifact commits, each derived_from a random
// earlier artifact, then 200 more, each followed by a one-artifact commit
// into one of bigOthers small contexts.
func scenarioBig(ctx context.Context, r *scenarioRun) error {
	cfg := r.cfg
	r.res.Params.Artifacts, r.res.Params.Batch = cfg.artifacts, cfg.batch
	f := &bigFigures{}
	r.res.Big = f
	id := r.prefix + "-big"
	r.phase("ingest")
	if err := r.c.createContext(ctx, id, "enforce"); err != nil {
		return err
	}
	r.count(1, 0, 0, 0)
	rng := rand.New(rand.NewPCG(20, 2))
	tenth := max(1, cfg.artifacts/10)
	last := 0
	err := ingestTree(ctx, r, id, rng, cfg.artifacts, cfg.batch, func(n int, d, cpu time.Duration) {
		f.CommitNS = append(f.CommitNS, d)
		if r.cpu.path != "" {
			f.CommitCPU = append(f.CommitCPU, cpu)
		}
		f.artifactsCommit = append(f.artifactsCommit, n-last)
		if n/tenth != last/tenth {
			r.sample(int64(n))
		}
		last = n
		f.Artifacts = int64(n)
	})
	total := (cfg.artifacts + cfg.batch - 1) / cfg.batch
	f.FifthCommits = max(1, (total+2)/5)
	rate := func(times []time.Duration, lo, hi int) float64 {
		if len(times) < hi {
			return 0
		}
		var a int
		var d time.Duration
		for i := lo; i < hi; i++ {
			a += f.artifactsCommit[i]
			d += times[i]
		}
		return ratio(float64(a), d.Seconds())
	}
	f.FirstFifthRate = rate(f.CommitNS, 0, f.FifthCommits)
	f.FirstFifthCPURate = rate(f.CommitCPU, 0, f.FifthCommits)
	if err != nil {
		return err
	}
	n := len(f.CommitNS)
	f.LastFifthRate = rate(f.CommitNS, n-f.FifthCommits, n)
	f.LastFifthCPURate = rate(f.CommitCPU, n-f.FifthCommits, n)
	f.RateRatio = ratio(f.LastFifthRate, f.FirstFifthRate)
	if k := len(r.res.RSS); k > 0 && r.res.RSS[k-1].At == f.Artifacts {
		f.RSSEnd = r.res.RSS[k-1].Bytes // sampled after the last commit
	} else {
		f.RSSEnd = r.sample(f.Artifacts)
	}
	r.phase("one-artifact commits")
	lat, err := tipCommits(ctx, r, 200, func(k int) (string, string) {
		return fmt.Sprintf("tip-%d", k), fmt.Sprintf("a%d", rng.IntN(cfg.artifacts))
	}, id)
	f.TipCommits = summarise(lat)
	if err != nil {
		return err
	}
	r.phase("one-artifact commits between other contexts'")
	others := make([]string, bigOthers)
	for k := range others {
		others[k] = fmt.Sprintf("%s-other-%d", r.prefix, k)
		if err := r.c.createContext(ctx, others[k], "enforce"); err != nil {
			return err
		}
		r.count(1, 0, 0, 0)
		if err := ingestTree(ctx, r, others[k], rng, 101, 101, func(int, time.Duration, time.Duration) {}); err != nil {
			return err
		}
	}
	var alt, other []time.Duration
	for k := range 200 {
		l, err := tipCommits(ctx, r, 1, func(int) (string, string) {
			return fmt.Sprintf("alt-%d", k), fmt.Sprintf("a%d", rng.IntN(cfg.artifacts))
		}, id)
		alt = append(alt, l...)
		if err != nil {
			return err
		}
		l, err = tipCommits(ctx, r, 1, func(int) (string, string) {
			return fmt.Sprintf("alt-%d", k), fmt.Sprintf("a%d", rng.IntN(101))
		}, others[k%bigOthers])
		other = append(other, l...)
		if err != nil {
			return err
		}
	}
	f.AltCommits, f.OtherCommits = summarise(alt), summarise(other)
	return nil
}

// tipCommits makes n one-artifact commits in ctxID; next names the k-th
// artifact and what it derives from.
func tipCommits(ctx context.Context, r *scenarioRun, n int, next func(k int) (id, dep string), ctxID string) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for k := 0; k < n; k++ {
		aid, dep := next(k)
		t0 := time.Now()
		if err := r.c.putArtifact(ctx, ctxID, aid, "claim", dep); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(t0))
		r.count(0, 1, 1, 1)
	}
	return lat, nil
}

// chainItems returns links [from, to) of a linear chain: artifact 0 a
// question, artifact i > 0 a claim derived_from artifact i-1.
func chainItems(from, to int) []bulkItem {
	items := make([]bulkItem, 0, to-from)
	for i := from; i < to; i++ {
		if i == 0 {
			items = append(items, bulkItem{id: "s0", typ: "question"})
			continue
		}
		items = append(items, bulkItem{id: fmt.Sprintf("s%d", i), typ: "claim", deps: []string{fmt.Sprintf("s%d", i-1)}})
	}
	return items
}

// buildChain writes a chain of depth artifacts into ctxID in commits of
// batch, calling each with the depth reached and the commit's latency and
// CPU time.
func buildChain(ctx context.Context, r *scenarioRun, ctxID string, depth, batch int, each func(depth int, d, cpu time.Duration)) error {
	for from := 0; from < depth; from += batch {
		to := min(depth, from+batch)
		d, cpu, err := r.timed(func() error { return r.c.bulkCommit(ctx, ctxID, chainItems(from, to)) })
		if err != nil {
			return err
		}
		edges := int64(to - from)
		if from == 0 {
			edges--
		}
		r.count(0, 1, int64(to-from), edges)
		each(to, d, cpu)
	}
	return nil
}

// chainFigures are the chain scenario's figures.
type chainFigures struct {
	Depth      int64           `json:"depth"`
	CommitNS   []time.Duration `json:"commit_ns"`
	CommitCPU  []time.Duration `json:"commit_cpu_ns"`
	FirstNS    time.Duration   `json:"first_commit_ns"`
	LastNS     time.Duration   `json:"last_commit_ns"`
	Ratio      float64         `json:"ratio_last_to_first"`
	TipCommits latency         `json:"tip_commits"`
}

// scenarioChain: a linear derivation chain to depth D in bulk commits,
// then 100 one-artifact commits extending it at its tip.
func scenarioChain(ctx context.Context, r *scenarioRun) error {
	cfg := r.cfg
	r.res.Params.Depth, r.res.Params.Batch = cfg.depth, cfg.batch
	f := &chainFigures{}
	r.res.Chain = f
	id := r.prefix + "-chain"
	r.phase("chain")
	if err := r.c.createContext(ctx, id, "enforce"); err != nil {
		return err
	}
	r.count(1, 0, 0, 0)
	err := buildChain(ctx, r, id, cfg.depth, cfg.batch, func(depth int, d, cpu time.Duration) {
		f.CommitNS = append(f.CommitNS, d)
		if r.cpu.path != "" {
			f.CommitCPU = append(f.CommitCPU, cpu)
		}
		f.Depth = int64(depth)
		f.LastNS = d
	})
	if len(f.CommitNS) > 0 {
		f.FirstNS = f.CommitNS[0]
		f.Ratio = ratio(float64(f.LastNS), float64(f.FirstNS))
	}
	if err != nil {
		return err
	}
	r.phase("tip commits")
	tip := int(f.Depth)
	lat, err := tipCommits(ctx, r, 100, func(k int) (string, string) {
		return fmt.Sprintf("s%d", tip+k), fmt.Sprintf("s%d", tip+k-1)
	}, id)
	f.TipCommits = summarise(lat)
	f.Depth += int64(len(lat))
	return err
}

// hubCommit is one bulk commit onto the hub; a commit the deadline cut
// has Cut set, its time is how long it had run, and it added nothing.
type hubCommit struct {
	Dependents int64         `json:"dependents_after"`
	NS         time.Duration `json:"ns"`
	CPU        time.Duration `json:"cpu_ns"`
	Cut        bool          `json:"cut,omitempty"`
}

// hubFigures are the hub scenario's figures: the bulk commits onto the hub,
// and one-artifact writes to an unrelated context during the last of them
// and during an audit read of a deep chain's tip.
type hubFigures struct {
	Commits      []hubCommit   `json:"hub_commits"`
	Dependents   int64         `json:"dependents"`
	DuringCommit latency       `json:"unrelated_during_last_commit"`
	ChainDepth   int64         `json:"chain_depth"`
	ChainBuildNS time.Duration `json:"chain_build_ns"`
	AuditNS      time.Duration `json:"audit_ns"`
	AuditCPU     time.Duration `json:"audit_cpu_ns"`
	AuditBytes   int           `json:"audit_bytes"`
	DuringAudit  latency       `json:"unrelated_during_audit"`
	// SameDuringAudit are one-artifact writes to the audited context
	// itself while the audit reads it.
	SameDuringAudit latency `json:"same_context_during_audit"`
	UnrelatedTotal  int64   `json:"unrelated_writes"`
}

// unrelatedWriter writes one-artifact commits to its own context until
// stopped, keeping their latencies.
type unrelatedWriter struct {
	r     *scenarioRun
	ctxID string
	n     int64 // writes attempted so far, for ids
	ok    int64 // writes acknowledged
}

// during runs fn while writing (at least one write, the first starting as
// fn starts), and returns the latencies of the writes made while fn ran
// (the last one may end just after it) and fn's error.
func (w *unrelatedWriter) during(ctx context.Context, fn func() error) ([]time.Duration, error) {
	stop := make(chan struct{})
	var (
		lat  []time.Duration
		werr error
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for { // at least one write, then until stopped
			w.n++
			t0 := time.Now()
			var err error
			// A region of its own, so that an execution trace of the
			// scenario (--trace) shows each write's window.
			rtrace.WithRegion(ctx, "unrelated-write", func() {
				err = w.r.c.putArtifact(ctx, w.ctxID, fmt.Sprintf("n%d", w.n), "note", "")
			})
			if err != nil {
				werr = err
				return
			}
			lat = append(lat, time.Since(t0))
			w.r.count(0, 1, 1, 0)
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	err := fn()
	close(stop)
	wg.Wait()
	switch {
	case err != nil || werr == nil:
	case errors.Is(werr, errCut):
		err = werr
	default:
		err = fmt.Errorf("unrelated writer: %w", werr)
	}
	w.ok += int64(len(lat))
	return lat, err
}

// scenarioHub: in an observe context, a quarantined hub (a claim derived
// from a FAILED fetch verdict), then bulk commits of claims each
// derived_from the hub, with an unrelated context's
// writer running during the last one; then a chain of depth D in another
// context, built in commits of --chain-batch links, and the same writer,
// and one writing to the chain's context, running during an audit read of
// its tip.
func scenarioHub(ctx context.Context, r *scenarioRun) error {
	cfg := r.cfg
	r.res.Params.Depth, r.res.Params.Batch, r.res.Params.ChainBatch = cfg.depth, cfg.batch, cfg.chainBatch
	f := &hubFigures{}
	r.res.Hub = f
	hubCtx, otherCtx, chainCtx := r.prefix+"-hub", r.prefix+"-unrelated", r.prefix+"-deep"
	r.phase("setup")
	for _, c := range []struct{ id, mode string }{{hubCtx, "observe"}, {otherCtx, "enforce"}, {chainCtx, "enforce"}} {
		if err := r.c.createContext(ctx, c.id, c.mode); err != nil {
			return err
		}
		r.count(1, 0, 0, 0)
	}
	// An empty 200 is FAILED (transport.empty_body): a poison root. The
	// hub is a claim derived_from it, so the hub is quarantined and every
	// edge onto it is tainted (stored and flagged in observe mode).
	if _, err := r.c.expect(ctx, http.StatusCreated, "POST", "/v1/contexts/"+hubCtx+"/fetches",
		[]byte(`{"id":"poison","url":"https://hub.example/","status":200,"headers":{"content-type":"text/html"},"body":""}`)); err != nil {
		return err
	}
	r.count(0, 1, 1, 0)
	if err := r.c.putArtifact(ctx, hubCtx, "hub", "claim", "poison"); err != nil {
		return err
	}
	r.count(0, 1, 1, 1)
	w := &unrelatedWriter{r: r, ctxID: otherCtx}
	defer func() { f.UnrelatedTotal = w.ok }()
	if _, err := w.during(ctx, func() error { return nil }); err != nil { // a first write: connections warm
		return err
	}
	r.phase("hub commits")
	for k := 0; k < hubCommits; k++ {
		items := make([]bulkItem, cfg.batch)
		for i := range items {
			items[i] = bulkItem{id: fmt.Sprintf("h%d-%d", k, i), typ: "claim", deps: []string{"hub"}}
		}
		var d, cpu time.Duration
		commit := func() error {
			var err error
			d, cpu, err = r.timed(func() error { return r.c.bulkCommit(ctx, hubCtx, items) })
			return err
		}
		var err error
		if k == hubCommits-1 {
			var lat []time.Duration
			lat, err = w.during(ctx, commit)
			f.DuringCommit = summarise(lat)
		} else {
			err = commit()
		}
		if err != nil {
			if errors.Is(err, errCut) {
				f.Commits = append(f.Commits, hubCommit{Dependents: f.Dependents, NS: d, CPU: cpu, Cut: true})
			}
			return err
		}
		r.count(0, 1, int64(cfg.batch), int64(cfg.batch))
		f.Dependents += int64(cfg.batch)
		f.Commits = append(f.Commits, hubCommit{Dependents: f.Dependents, NS: d, CPU: cpu})
	}
	r.phase("deep chain")
	t0 := time.Now()
	if err := buildChain(ctx, r, chainCtx, cfg.depth, min(cfg.depth, cfg.chainBatch), func(depth int, _, _ time.Duration) { f.ChainDepth = int64(depth) }); err != nil {
		return err
	}
	f.ChainBuildNS = time.Since(t0)
	r.phase("audit")
	same := &unrelatedWriter{r: r, ctxID: chainCtx}
	var sameLat []time.Duration
	lat, err := w.during(ctx, func() error {
		var err error
		sameLat, err = same.during(ctx, func() error {
			var err error
			f.AuditNS, f.AuditCPU, err = r.timed(func() error {
				n, err := r.c.drain(ctx, fmt.Sprintf("/v1/contexts/%s/audit/s%d?format=json", chainCtx, f.ChainDepth-1))
				f.AuditBytes = int(n)
				return err
			})
			return err
		})
		return err
	})
	f.DuringAudit, f.SameDuringAudit = summarise(lat), summarise(sameLat)
	return err
}
