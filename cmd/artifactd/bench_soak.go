package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The soak scenario: --clients clients (default 16) run a mixed load of
// reads and writes for --duration (default 10m) over soakContexts
// contexts shared by the clients, while the server's resident size is
// sampled every soakSampleEvery. Every answer must be the one the request
// expects; the only refusals allowed are the intended ones (a write with a
// stale parent, 409 stale-parent; an effect completion whose lease another
// worker took over, 409; a merge overtaken by a write to its target,
// 409 stale-parent, which the client retries), counted apart.

// soakContexts is how many contexts the clients share.
const soakContexts = 4

// soakSampleEvery is the resident-size sampling period.
const soakSampleEvery = 10 * time.Second

// soakKinds are the request kinds of the mix, in report order, with their
// weights.
var soakKinds = []struct {
	name   string
	weight int
}{
	{"artifact", 12}, {"commit", 8}, {"merge", 3}, {"fetch", 6}, {"tool_result", 6},
	{"effect", 4}, {"blob", 3}, {"stale_write", 2},
	{"state", 4}, {"audit", 10}, {"diff", 8}, {"log", 10}, {"artifact_read", 12}, {"blob_read", 4},
}

// soakKind is what the soak measured of one request kind. A kind that
// makes several requests (a merge: branch, write, merge; an effect:
// create, claim, complete; a blob: upload then read) times them together.
type soakKind struct {
	latency
	Errors int64 `json:"errors"`
	// Intended counts the intended 409s.
	Intended int64 `json:"intended_409,omitempty"`
}

// soakFigures are the soak scenario's figures.
type soakFigures struct {
	DurationNS time.Duration       `json:"duration_ns"`
	Contexts   int                 `json:"contexts"`
	Requests   int64               `json:"requests"`
	Intended   int64               `json:"intended_409"`
	Kinds      map[string]soakKind `json:"kinds"`
	// RSS figures (bytes): the first and last samples and the largest.
	RSSStart int64 `json:"rss_start,omitempty"`
	RSSEnd   int64 `json:"rss_end,omitempty"`
	RSSMax   int64 `json:"rss_max,omitempty"`
}

// soakStats collects latencies per kind; it is safe for concurrent use.
type soakStats struct {
	mu       sync.Mutex // guards the maps
	lat      map[string][]time.Duration
	errs     map[string]int64
	intended map[string]int64
}

func (s *soakStats) add(kind string, d time.Duration) {
	s.mu.Lock()
	s.lat[kind] = append(s.lat[kind], d)
	s.mu.Unlock()
}

func (s *soakStats) fail(kind string) {
	s.mu.Lock()
	s.errs[kind]++
	s.mu.Unlock()
}

func (s *soakStats) intend(kind string) {
	s.mu.Lock()
	s.intended[kind]++
	s.mu.Unlock()
}

// errIntended marks an intended 409.
var errIntended = errors.New("intended 409")

// soakContext is one shared context and what the clients learned of it.
type soakContext struct {
	id string
	mu sync.Mutex // guards commits and ids
	// commits are recent commit ids (for diffs), ids recent artifact ids
	// (for reads and audits), blobs recent blob digests it holds.
	commits []string
	ids     []string
	blobs   []string
}

func (c *soakContext) note(commit, id, blob string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := func(s []string, v string) []string {
		if v == "" {
			return s
		}
		s = append(s, v)
		if len(s) > 64 {
			s = s[len(s)-64:]
		}
		return s
	}
	c.commits, c.ids, c.blobs = keep(c.commits, commit), keep(c.ids, id), keep(c.blobs, blob)
}

// pick returns a random recent value of s ("" when none).
func (c *soakContext) pick(rnd *rand.Rand, s *[]string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(*s) == 0 {
		return ""
	}
	return (*s)[rnd.IntN(len(*s))]
}

// scenarioSoak runs the soak.
func scenarioSoak(ctx context.Context, r *scenarioRun) error {
	r.phase("setup")
	ctxs := make([]*soakContext, soakContexts)
	for i := range ctxs {
		ctxs[i] = &soakContext{id: fmt.Sprintf("%s-soak-%d", r.prefix, i)}
		if err := r.c.createContext(ctx, ctxs[i].id, "observe"); err != nil {
			return err
		}
		r.count(1, 1, 0, 0)
	}
	stats := &soakStats{lat: map[string][]time.Duration{}, errs: map[string]int64{}, intended: map[string]int64{}}
	r.phase("soak")
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, r.cfg.duration)
	defer cancel()
	r.sample(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the resident-size curve
		defer wg.Done()
		t := time.NewTicker(soakSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case now := <-t.C:
				r.sample(int64(now.Sub(start) / time.Second))
			}
		}
	}()
	total := 0
	for _, k := range soakKinds {
		total += k.weight
	}
	for g := range r.cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g)+1, 0x50a6))
			for i := 0; sctx.Err() == nil; i++ {
				n := rnd.IntN(total)
				kind := soakKinds[0].name
				for _, k := range soakKinds {
					if n < k.weight {
						kind = k.name
						break
					}
					n -= k.weight
				}
				sc := ctxs[rnd.IntN(len(ctxs))]
				tag := fmt.Sprintf("%d-%d", g, i)
				t0 := time.Now()
				err := soakOne(sctx, r, sc, kind, tag, rnd)
				switch {
				case err == nil:
					stats.add(kind, time.Since(t0))
				case errors.Is(err, errIntended):
					stats.add(kind, time.Since(t0))
					stats.intend(kind)
				case sctx.Err() != nil:
					// cut by the end of the soak: not counted
				default:
					stats.fail(kind)
					r.fail(fmt.Errorf("%s: %w", kind, err))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r.sample(int64(elapsed / time.Second))
	fig := &soakFigures{DurationNS: elapsed, Contexts: len(ctxs), Kinds: map[string]soakKind{}}
	for _, k := range soakKinds {
		sk := soakKind{latency: summarise(stats.lat[k.name]), Errors: stats.errs[k.name], Intended: stats.intended[k.name]}
		fig.Kinds[k.name] = sk
		fig.Requests += int64(sk.N)
		fig.Intended += sk.Intended
	}
	r.res.mu.Lock()
	if n := len(r.res.RSS); n > 0 {
		fig.RSSStart, fig.RSSEnd = r.res.RSS[0].Bytes, r.res.RSS[n-1].Bytes
		for _, s := range r.res.RSS {
			fig.RSSMax = max(fig.RSSMax, s.Bytes)
		}
	}
	r.res.Soak = fig
	r.res.mu.Unlock()
	if ctx.Err() != nil {
		return errCut
	}
	return nil
}

// soakWrite is the part of a write answer the soak keeps.
type soakWrite struct {
	Commit   string `json:"commit"`
	BodyBlob string `json:"body_blob"`
	Artifact struct {
		ID   string `json:"id"`
		Data struct {
			FullBlob string `json:"full_blob"`
		} `json:"data"`
	} `json:"artifact"`
}

// soakPost sends a JSON body and decodes a want answer into out.
func soakPost(ctx context.Context, r *scenarioRun, want int, path string, body any, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	b, err := r.c.expect(ctx, want, "POST", path, raw)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// soakOne runs one request (or small sequence) of kind on context sc.
func soakOne(ctx context.Context, r *scenarioRun, sc *soakContext, kind, tag string, rnd *rand.Rand) error {
	v1 := "/v1/contexts/" + sc.id
	var w soakWrite
	switch kind {
	case "artifact":
		dep := sc.pick(rnd, &sc.ids)
		body := map[string]any{"id": "a-" + tag, "type": "claim", "produced_by": "soak", "data": map[string]any{"text": "claim " + tag}}
		edges := int64(0)
		if dep != "" {
			body["edges"] = []map[string]any{{"rel": "derived_from", "to": dep}}
			edges = 1
		}
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/artifacts", body, &w); err != nil {
			return err
		}
		sc.note(w.Commit, w.Artifact.ID, "")
		r.count(0, 1, 1, edges)
	case "commit":
		x, y := "c1-"+tag, "c2-"+tag
		body := map[string]any{"author": "soak", "message": "two puts and a link", "ops": []map[string]any{
			{"op": "put", "artifact": map[string]any{"id": x, "type": "note", "data": map[string]any{"text": x}}},
			{"op": "put", "artifact": map[string]any{"id": y, "type": "claim", "data": map[string]any{"text": y}}},
			{"op": "link", "from": y, "rel": "derived_from", "to": x},
		}}
		var c struct {
			Commit string `json:"commit"`
		}
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/commits", body, &c); err != nil {
			return err
		}
		sc.note(c.Commit, y, "")
		r.count(0, 1, 2, 1)
	case "merge":
		br := "b-" + tag
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/branches", map[string]any{"name": br}, nil); err != nil {
			return err
		}
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/artifacts", map[string]any{"id": "m-" + tag, "branch": br, "type": "note", "data": map[string]any{"text": tag}}, nil); err != nil {
			return err
		}
		var m struct {
			Commit struct {
				ID string `json:"id"`
			} `json:"commit"`
		}
		// A merge that a write to main overtook is a 409 stale-parent
		// that says "merge again": the client does, and the refusal counts
		// as intended.
		raced := false
		for attempt := 0; ; attempt++ {
			code, b, err := r.c.do(ctx, "POST", v1+"/merge", mustJSON(map[string]any{"theirs": br}))
			if err != nil {
				return err
			}
			if code == http.StatusConflict && attempt < 8 && strings.Contains(string(b), "stale-parent") {
				raced = true
				continue
			}
			if code != http.StatusCreated && code != http.StatusOK {
				return fmt.Errorf("merge: status %d: %s", code, truncate(b, 300))
			}
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			break
		}
		sc.note(m.Commit.ID, "m-"+tag, "")
		r.count(0, 2, 1, 0)
		if raced {
			return errIntended
		}
		return nil
	case "fetch":
		body := map[string]any{"id": "f-" + tag, "url": "https://shop.example/item/" + tag, "status": 200,
			"headers": map[string]string{"content-type": "text/plain"}, "body": "The price of item " + tag + " is 3 EUR, in stock, shipped in two days."}
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/fetches", body, &w); err != nil {
			return err
		}
		sc.note(w.Commit, w.Artifact.ID, w.BodyBlob)
		r.count(0, 1, 1, 0)
	case "tool_result":
		body := map[string]any{"id": "t-" + tag, "tool": "calc", "ok": true, "output": "42 for " + tag}
		if rnd.IntN(3) == 0 {
			body = map[string]any{"id": "t-" + tag, "tool": "calc", "ok": false, "error": "division by zero in step " + tag}
		}
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/tool-results", body, &w); err != nil {
			return err
		}
		sc.note(w.Commit, w.Artifact.ID, w.Artifact.Data.FullBlob)
		r.count(0, 1, 1, 0)
	case "effect":
		worker := "w-" + tag
		if err := soakPost(ctx, r, http.StatusCreated, v1+"/effects", map[string]any{"idempotency_key": "k-" + tag, "kind": "webhook", "target": "https://hooks.example/" + tag}, nil); err != nil {
			return err
		}
		var c struct {
			Effects []struct {
				ID         string `json:"id"`
				LeaseToken string `json:"lease_token"`
			} `json:"effects"`
		}
		if err := soakPost(ctx, r, http.StatusOK, v1+"/effects/claim", map[string]any{"worker": worker, "lease_seconds": 30, "limit": 1}, &c); err != nil {
			return err
		}
		if len(c.Effects) == 0 {
			return nil // another worker claimed every pending effect
		}
		e := c.Effects[0]
		code, b, err := r.c.do(ctx, "POST", v1+"/effects/"+e.ID+"/complete", mustJSON(map[string]any{"worker": worker, "lease_token": e.LeaseToken, "result": map[string]any{"sent": tag}}))
		switch {
		case err != nil:
			return err
		case code == http.StatusConflict:
			return errIntended
		case code != http.StatusOK:
			return fmt.Errorf("complete: status %d: %s", code, truncate(b, 300))
		}
		r.count(0, 3, 1, 0)
	case "blob":
		data := []byte(fmt.Sprintf("uploaded bytes %s %d", tag, rnd.Uint64()))
		b, err := r.c.expect(ctx, http.StatusCreated, "POST", v1+"/blobs", data)
		if err != nil {
			return err
		}
		var up struct {
			Digest string `json:"digest"`
		}
		if err := json.Unmarshal(b, &up); err != nil {
			return err
		}
		sc.note("", "", up.Digest)
	case "stale_write":
		// A compare-and-set write against the root: refused unless the
		// context has no other commit, which it always has.
		root := sc.pick(rnd, &sc.commits)
		if root == "" {
			return nil
		}
		code, b, err := r.c.do(ctx, "POST", v1+"/artifacts", mustJSON(map[string]any{"id": "s-" + tag, "type": "note", "parent": root, "data": map[string]any{"text": tag}}))
		switch {
		case err != nil:
			return err
		case code == http.StatusConflict:
			return errIntended
		case code != http.StatusCreated:
			return fmt.Errorf("stale write: status %d: %s", code, truncate(b, 300))
		}
	case "state":
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/state", nil)
		return err
	case "audit":
		id := sc.pick(rnd, &sc.ids)
		if id == "" {
			return nil
		}
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/audit/"+url.PathEscape(id), nil)
		return err
	case "diff":
		from, to := sc.pick(rnd, &sc.commits), sc.pick(rnd, &sc.commits)
		if from == "" {
			return nil
		}
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/diff?from="+from+"&to="+to, nil)
		return err
	case "log":
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/commits?limit="+strconv.Itoa(1+rnd.IntN(50)), nil)
		return err
	case "artifact_read":
		id := sc.pick(rnd, &sc.ids)
		if id == "" {
			return nil
		}
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/artifacts/"+url.PathEscape(id), nil)
		return err
	case "blob_read":
		d := sc.pick(rnd, &sc.blobs)
		if d == "" {
			return nil
		}
		_, err := r.c.expect(ctx, http.StatusOK, "GET", v1+"/blobs/"+d, nil)
		return err
	}
	return nil
}

// mustJSON marshals a body made of maps, strings and numbers, which
// cannot fail.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
