package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func withTestClock(c *testClock) envOption {
	return withOptions(func(o *Options) { o.Clock = c.Now })
}

func newClock() *testClock { return &testClock{now: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)} }

func effect(out map[string]any) map[string]any { return out["effect"].(map[string]any) }

// TestEffectIdempotentConcurrent: the same idempotency key sent 100 times
// at once makes exactly one effect: one 201, 99 × 200 with the same
// effect, one commit.
func TestEffectIdempotentConcurrent(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "")
	head := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]
	body := map[string]any{"idempotency_key": "order-42/confirmation", "kind": "email", "target": "mailto:buyer@example.com",
		"payload": map[string]any{"subject": "Your order", "lines": []any{1, 2}}}
	const n = 100
	statuses := make([]int, n)
	ids := make([]string, n)
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.post("/v1/contexts/o/effects", body)
			statuses[i], bodies[i] = r.status, string(r.body)
			if r.status/100 == 2 {
				ids[i] = effect(r.obj(t))["id"].(string)
			}
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for i, s := range statuses {
		count[s]++
		if ids[i] != EffectID("order-42/confirmation") {
			t.Fatalf("request %d: id %q (status %d: %s)", i, ids[i], statuses[i], bodies[i])
		}
	}
	if count[201] != 1 || count[200] != n-1 {
		t.Fatalf("statuses %v", count)
	}
	list := e.must(e.get("/v1/contexts/o/effects"), 200)["items"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["status"] != "pending" {
		t.Fatalf("effects %v", list)
	}
	log := e.must(e.get("/v1/contexts/o/commits"), 200)["items"].([]any)
	if len(log) != 2 || log[1].(map[string]any)["id"] != head {
		t.Fatalf("%d commits", len(log))
	}
	// The same key with another payload is a conflict; the recorded effect
	// comes with it.
	body["payload"] = map[string]any{"subject": "Other"}
	r := e.post("/v1/contexts/o/effects", body)
	if r.status != 409 || r.obj(t)["effect"] == nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// TestEffectLeaseExpiry: a worker claims and dies; after its lease
// another worker claims and completes the effect exactly once, and the
// first worker's late complete is refused.
func TestEffectLeaseExpiry(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withTestClock(clock))
	e.createContext("o", "")
	created := e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k1", "kind": "webhook", "target": "https://hooks.example/x", "payload": map[string]any{"n": 1}}), 201)
	id := effect(created)["id"].(string)

	a := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "A", "lease_seconds": 30, "limit": 5}), 200)
	claimed := a["effects"].([]any)
	if len(claimed) != 1 || claimed[0].(map[string]any)["worker"] != "A" || claimed[0].(map[string]any)["lease_until"] != "2026-11-30T08:00:30Z" {
		t.Fatalf("claim A: %v", a)
	}
	if b := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "B"}), 200); len(b["effects"].([]any)) != 0 {
		t.Fatalf("B claimed a leased effect: %v", b)
	}
	// A dies. Its lease runs out.
	clock.Advance(31 * time.Second)
	if l := e.must(e.get("/v1/contexts/o/effects?status=pending"), 200)["items"].([]any); len(l) != 1 || l[0].(map[string]any)["lease_expired"] != true {
		t.Fatalf("expired claim not pending: %v", l)
	}
	b := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "B", "lease_seconds": 60}), 200)
	if got := b["effects"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != id {
		t.Fatalf("claim B: %v", b)
	}
	tokA, tokB := claimed[0].(map[string]any)["lease_token"], b["effects"].([]any)[0].(map[string]any)["lease_token"]
	done := e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "B", "lease_token": tokB, "result": map[string]any{"status": 204}}), 200)
	if effect(done)["status"] != "sent" || effect(done)["worker"] != "B" {
		t.Fatalf("%v", done)
	}
	// A comes back: too late.
	r := e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "A", "lease_token": tokA, "result": map[string]any{"status": 200}})
	if r.status != 409 {
		t.Fatalf("late complete: %d %s", r.status, r.body)
	}
	// B repeats its complete (a retry after a lost answer): the recorded
	// effect, no new commit.
	again := e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "B", "lease_token": tokB, "result": map[string]any{"status": 204}}), 200)
	if again["commit"] != done["commit"] {
		t.Fatalf("repeat made a commit: %v", again)
	}
	// Asking for the effect again returns it with its result.
	rec := e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k1", "kind": "webhook", "target": "https://hooks.example/x", "payload": map[string]any{"n": 1}}), 200)
	if effect(rec)["status"] != "sent" || effect(rec)["result"].(map[string]any)["status"] != 204.0 {
		t.Fatalf("%v", rec)
	}
	// Every status change was a commit: create, claim A, claim B, complete.
	hist := e.must(e.get("/v1/contexts/o/artifacts/"+id+"/history"), 200)["versions"].([]any)
	if len(hist) != 4 {
		t.Fatalf("%d versions", len(hist))
	}
	if l := e.must(e.get("/v1/contexts/o/effects?status=sent"), 200)["items"].([]any); len(l) != 1 {
		t.Fatalf("sent: %v", l)
	}
	if r := e.get("/v1/contexts/o/effects?status=done"); r.status != 400 {
		t.Fatalf("bad status: %d", r.status)
	}
}

// TestEffectFail: a failed attempt with retry returns the effect to
// pending; without retry it is failed for good.
func TestEffectFail(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withTestClock(clock))
	e.createContext("o", "")
	id := effect(e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k", "kind": "sms"}), 201))["id"].(string)
	tok := leaseTokenOf(e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200))
	if r := e.post("/v1/contexts/o/effects/"+id+"/fail", map[string]any{"worker": "other", "error": "x"}); r.status != 403 {
		t.Fatalf("a non-holder failed it: %d", r.status)
	}
	if r := e.post("/v1/contexts/o/effects/"+id+"/fail", map[string]any{"worker": "other", "lease_token": tok, "error": "x"}); r.status != 409 {
		t.Fatalf("another worker with the token failed it: %d", r.status)
	}
	f := effect(e.must(e.post("/v1/contexts/o/effects/"+id+"/fail", map[string]any{"worker": "W", "lease_token": tok, "error": "gateway said token=abcdefghijklmnopqrstuvwxyz", "retry": true}), 200))
	if f["status"] != "pending" || f["attempts"] != 1.0 || f["worker"] != nil || f["last_error"] != "gateway said token=abcdef...wxyz" {
		t.Fatalf("%v", f)
	}
	tok = leaseTokenOf(e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200))
	f = effect(e.must(e.post("/v1/contexts/o/effects/"+id+"/fail", map[string]any{"worker": "W", "lease_token": tok, "error": "permanent"}), 200))
	if f["status"] != "failed" || f["attempts"] != 2.0 {
		t.Fatalf("%v", f)
	}
	if c := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W"}), 200); len(c["effects"].([]any)) != 0 {
		t.Fatal("a failed effect was claimed")
	}
	for _, path := range []string{"complete", "fail"} {
		if r := e.post("/v1/contexts/o/effects/"+id+"/"+path, map[string]any{"worker": "W"}); r.status != 409 {
			t.Fatalf("%s on a failed effect: %d", path, r.status)
		}
	}
	if r := e.post("/v1/contexts/o/effects/effect:none/complete", map[string]any{"worker": "W"}); r.status != 404 {
		t.Fatalf("unknown effect: %d", r.status)
	}
	for _, bad := range []map[string]any{{"kind": "x"}, {"idempotency_key": "k"}, {"idempotency_key": "", "kind": "x"}, {"idempotency_key": "k", "kind": "x", "status": "sent"}} {
		if r := e.post("/v1/contexts/o/effects", bad); r.status != 422 {
			t.Errorf("%v: %d", bad, r.status)
		}
	}
	if r := e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W", "limit": 1000}); r.status != 422 {
		t.Errorf("limit: %d", r.status)
	}
}

// TestEffectClaimsDisjoint: workers claiming at the same time never get
// the same effect, and together they get every effect once.
func TestEffectClaimsDisjoint(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "")
	const effects, workers = 40, 8
	for i := range effects {
		e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": fmt.Sprint("k", i), "kind": "job"}), 201)
	}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", w)
			for {
				r := e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": name, "limit": 3})
				if r.status != 200 {
					t.Errorf("%s: %d %s", name, r.status, r.body)
					return
				}
				list := r.obj(t)["effects"].([]any)
				if len(list) == 0 {
					return
				}
				mu.Lock()
				for _, x := range list {
					id := x.(map[string]any)["id"].(string)
					if prev, dup := got[id]; dup {
						t.Errorf("%s claimed by %s and %s", id, prev, name)
					}
					got[id] = name
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != effects {
		t.Fatalf("%d effects claimed, want %d", len(got), effects)
	}
}

// failingTransport fails the test if anything sends a request.
type failingTransport struct{ t *testing.T }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("network call during replay: %s %s", r.Method, r.URL)
	return nil, fmt.Errorf("no network in replay")
}

// failingFetcher fails the test if the server fetches.
type failingFetcher struct{ t *testing.T }

func (f failingFetcher) Fetch(_ context.Context, u string) (gate.Evidence, error) {
	f.t.Errorf("fetch during replay: %s", u)
	return gate.Evidence{}, fmt.Errorf("no network in replay")
}

// TestReplaySendsNothing: a context whose effects were claimed and sent
// replays from its commit chain to the same hash with no network call.
func TestReplaySendsNothing(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.AllowFetch, o.Fetcher = true, failingFetcher{t} }))
	e.createContext("o", "")
	var ids []string
	for i := range 3 {
		out := e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": fmt.Sprint("mail-", i), "kind": "email", "target": "mailto:x@example.com"}), 201)
		ids = append(ids, effect(out)["id"].(string))
	}
	toks := map[string]any{}
	for _, c := range e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "W", "limit": 3}), 200)["effects"].([]any) {
		toks[c.(map[string]any)["id"].(string)] = c.(map[string]any)["lease_token"]
	}
	for _, id := range ids[:2] {
		e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "W", "lease_token": toks[id], "result": map[string]any{"message_id": id}}), 200)
	}
	hash := e.must(e.get("/v1/contexts/o/hash"), 200)
	head, _ := hashing.ParseDigest(hash["commit"].(string))

	saved := http.DefaultTransport
	http.DefaultTransport = failingTransport{t}
	defer func() { http.DefaultTransport = saved }()
	res, err := replay.Fold(t.Context(), e.st.Source("o"), head, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.State.Hash().String(); got != hash["context_hash"] {
		t.Fatalf("replayed hash %s, want %s", got, hash["context_hash"])
	}
	var statuses []string
	for _, id := range ids {
		raw, err := e.st.Object(t.Context(), res.State.Artifact(id).ContentHash)
		if err != nil {
			t.Fatal(err)
		}
		var d EffectData
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, d.Status)
	}
	sort.Strings(statuses)
	if fmt.Sprint(statuses) != "[claimed sent sent]" {
		t.Fatalf("replayed statuses %v", statuses)
	}
}

// TestEffectsOverTheMap: after a restart, the outbox's list and claim
// read the effects from their ids' place in the state map; artifacts
// whose ids sort just before, among and after the effects' ("effect",
// "effect-1", "effect:" and "effect:hand" written by hand, "effects")
// are not effects, and effects made since the restart (above the map)
// are listed and claimed with the others.
func TestEffectsOverTheMap(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "")
	var ops []any
	for _, id := range []string{"a", "effect", "effect-1", "effect9", "effect:", "effect:hand", "effects", "zz"} {
		ops = append(ops, map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": "note", "data": map[string]any{"text": id}}})
	}
	e.must(e.post("/v1/contexts/o/commits", map[string]any{"ops": ops}), 201)
	var want []string
	enqueue := func(from, to int) {
		for i := from; i < to; i++ {
			want = append(want, effect(e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": fmt.Sprint("k", i), "kind": "job"}), 201))["id"].(string))
		}
		sort.Strings(want)
	}
	enqueue(0, 30)
	e.reopen()
	enqueue(30, 35)
	var listed []string
	for _, x := range e.must(e.get("/v1/contexts/o/effects?limit=1000"), 200)["items"].([]any) {
		listed = append(listed, x.(map[string]any)["id"].(string))
	}
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %d effects (%q…), want %d (%q…)", len(listed), firstOf(listed), len(want), firstOf(want))
	}
	var claimed []string
	for _, x := range e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "w", "limit": 100}), 200)["effects"].([]any) {
		claimed = append(claimed, x.(map[string]any)["id"].(string))
	}
	sort.Strings(claimed)
	if !slices.Equal(claimed, want) {
		t.Fatalf("claimed %d effects, want %d", len(claimed), len(want))
	}
}

// TestEffectRestingOnPoisonIsHeld: in an enforce context an effect whose
// support became poisoned after it was recorded is not handed to a
// worker until its trust is confirmed again; and no client may link or
// unlink an edge from an effect, which would rewrite what it rests on.
func TestEffectRestingOnPoisonIsHeld(t *testing.T) {
	e := newEnv(t)
	e.createContext("h", "enforce")
	fetch := func(body string) {
		t.Helper()
		e.must(e.post("/v1/contexts/h/fetches", map[string]any{"id": "f", "url": "https://h.example/", "status": 200, "content_type": "text/plain", "body": body}), 201)
	}
	good := "a report the agent really read, long enough to count as a page of text"
	fetch(good)
	e.must(e.post("/v1/contexts/h/artifacts", map[string]any{"id": "c", "type": "claim", "data": map[string]any{"text": "the price is 3 EUR"},
		"edges": []any{map[string]any{"rel": "derived_from", "to": "f"}}}), 201)
	id := effect(e.must(e.post("/v1/contexts/h/effects", map[string]any{"idempotency_key": "k", "kind": "webhook",
		"edges": []any{map[string]any{"rel": "supported_by", "to": "c"}}}), 201))["id"].(string)
	claim := func() []any {
		t.Helper()
		return e.must(e.post("/v1/contexts/h/effects/claim", map[string]any{"worker": "w", "lease_seconds": 1}), 200)["effects"].([]any)
	}
	fetch("") // read again: FAILED, and the effect rests on it
	if got := claim(); len(got) != 0 {
		t.Fatalf("an effect resting on a FAILED read was claimed: %v", got)
	}
	fetch(good) // read again: RETRIEVED
	if got := claim(); len(got) != 1 || got[0].(map[string]any)["id"] != id {
		t.Fatalf("the effect once its support is confirmed again: %v", got)
	}
	before := e.hash("h")
	for _, op := range []map[string]any{
		{"op": "unlink", "from": id, "rel": "supported_by", "to": "c"},
		{"op": "link", "from": id, "rel": "supported_by", "to": "f"},
	} {
		r := e.post("/v1/contexts/h/commits", map[string]any{"ops": []any{op}})
		p := e.must(r, 422)
		if errs, _ := p["errors"].([]any); p["type"] != ProblemTypePrefix+CodeReservedType || len(errs) != 1 || errs[0].(map[string]any)["pointer"] != "/ops/0/from" {
			t.Errorf("%v: %s", op["op"], r.body)
		}
	}
	if e.hash("h") != before {
		t.Fatal("a refused edge op changed the context")
	}
}

// TestEffectIDsAreTheOutboxs: a client's artifact, a commit's put or a
// tool result at the id an idempotency key's effect will have is refused,
// so the key stays usable; the effect is then created as usual.
func TestEffectIDsAreTheOutboxs(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "observe")
	id := EffectID("k-later")
	for _, r := range []*resp{
		e.post("/v1/contexts/o/artifacts", map[string]any{"id": id, "type": "note", "data": map[string]any{"text": "squatting"}}),
		e.post("/v1/contexts/o/commits", map[string]any{"ops": []any{map[string]any{"op": "put", "artifact": map[string]any{"id": id, "type": "note", "data": map[string]any{"text": "x"}}}}}),
		e.post("/v1/contexts/o/tool-results", map[string]any{"id": id, "tool": "t", "ok": true, "output": "x"}),
	} {
		if p := e.must(r, 422); p["type"] != ProblemTypePrefix+CodeReservedType {
			t.Errorf("a put at %s: %s", id, r.body)
		}
	}
	if got := effect(e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k-later", "kind": "webhook"}), 201))["id"]; got != id {
		t.Fatalf("effect id %v, want %s", got, id)
	}
}

// TestClaimRacesPoison: in an enforce context, a claim racing a tool
// result that turns the effect's support into a tool error never commits
// a lease of an effect that is unconfirmed at the claim's own commit: the
// claim's trust rule is checked again in the committer.
func TestClaimRacesPoison(t *testing.T) {
	e := newEnv(t)
	e.createContext("p", "enforce")
	for i := range 30 {
		w, key := fmt.Sprintf("w%d", i), fmt.Sprintf("k%d", i)
		e.must(e.post("/v1/contexts/p/tool-results", map[string]any{"id": w, "tool": "t", "ok": true, "output": "fine"}), 201)
		id := effect(e.must(e.post("/v1/contexts/p/effects", map[string]any{"idempotency_key": key, "kind": "job",
			"edges": []any{map[string]any{"rel": "uses", "to": w}}}), 201))["id"].(string)
		var wg sync.WaitGroup
		var claimed *resp
		wg.Go(func() {
			claimed = e.post("/v1/contexts/p/effects/claim", map[string]any{"worker": "w", "limit": 100})
		})
		wg.Go(func() {
			e.must(e.post("/v1/contexts/p/tool-results", map[string]any{"id": w, "tool": "t", "ok": false, "error": "it broke"}), 201)
		})
		wg.Wait()
		out := e.must(claimed, 200)
		for _, x := range out["effects"].([]any) {
			if x.(map[string]any)["id"] != id {
				continue
			}
			at := out["commit"].(string)
			a := e.must(e.get("/v1/contexts/p/artifacts/"+id+"?at="+at), 200)
			if st := a["trust"].(map[string]any)["status"]; st != "confirmed" {
				t.Fatalf("race %d: the claim %s leased %s, %v there", i, at, id, st)
			}
		}
	}
}

// TestEffectClaimOldestFirstSubsecond: a claim takes the oldest pending
// effect first even when effects were recorded within one second, where
// RFC 3339 times with their trailing zeros cut do not sort as strings
// ("08:00:00.15Z" sorts before "08:00:00.1Z", "08:00:00.5Z" before
// "08:00:00Z").
func TestEffectClaimOldestFirstSubsecond(t *testing.T) {
	for _, steps := range [][]time.Duration{
		{0, 500 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
		{0, time.Nanosecond, 10 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(steps), func(t *testing.T) {
			clock := newClock()
			e := newEnv(t, withTestClock(clock))
			e.createContext("o", "")
			var want []string
			for i, d := range steps {
				clock.Advance(d)
				out := e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": fmt.Sprintf("k%d", i), "kind": "email"}), 201)
				want = append(want, effect(out)["id"].(string))
			}
			var got []string
			for range steps {
				c := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "w"}), 200)["effects"].([]any)
				if len(c) != 1 {
					t.Fatalf("claim: %v", c)
				}
				got = append(got, c[0].(map[string]any)["id"].(string))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("claimed in the order %v, recorded in the order %v", got, want)
			}
		})
	}
}

// TestEffectKeyConflictNamesTheField: an idempotency key sent again with
// another kind, target or payload is a 409 problem+json that names each
// field that differs from the recorded effect, with its rule, and
// changes nothing.
func TestEffectKeyConflictNamesTheField(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "")
	first := map[string]any{"idempotency_key": "k", "kind": "email", "target": "mailto:a@example.com", "payload": map[string]any{"n": 1}}
	e.must(e.post("/v1/contexts/o/effects", first), 201)
	head := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]
	cases := []struct {
		name     string
		change   map[string]any
		pointers []string
	}{
		{"kind", map[string]any{"kind": "sms"}, []string{"/kind"}},
		{"target", map[string]any{"target": "mailto:b@example.com"}, []string{"/target"}},
		{"payload", map[string]any{"payload": map[string]any{"n": 2}}, []string{"/payload"}},
		{"kind and payload", map[string]any{"kind": "sms", "payload": []any{}}, []string{"/kind", "/payload"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{}
			for k, v := range first {
				body[k] = v
			}
			for k, v := range tc.change {
				body[k] = v
			}
			r := e.post("/v1/contexts/o/effects", body)
			if r.status != 409 || r.header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %s", r.status, r.header.Get("Content-Type"), r.body)
			}
			var ptrs []string
			errs, _ := r.obj(t)["errors"].([]any)
			for _, x := range errs {
				fe := x.(map[string]any)
				if rule, _ := fe["rule"].(string); rule == "" {
					t.Fatalf("errors entry without rule: %s", r.body)
				}
				ptr, _ := fe["pointer"].(string)
				ptrs = append(ptrs, ptr)
			}
			if !slices.Equal(ptrs, tc.pointers) {
				t.Fatalf("errors name %v, want %v: %s", ptrs, tc.pointers, r.body)
			}
			if got := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]; got != head {
				t.Fatalf("a refused create moved the head")
			}
		})
	}
}

// TestEffectFinishConflictsNameTheRule: a complete or fail that the
// outbox refuses with 409 because the effect is not claimed, is claimed
// by another worker or its lease has ended names the field (or path
// parameter) and the rule it breaks, and changes nothing.
func TestEffectFinishConflictsNameTheRule(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withTestClock(clock))
	e.createContext("o", "")
	id := effect(e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k", "kind": "email"}), 201))["id"].(string)
	check := func(what, verb string, body map[string]any, where, rule string) {
		t.Helper()
		head := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]
		r := e.post("/v1/contexts/o/effects/"+id+"/"+verb, body)
		if r.status != 409 || r.obj(t)["effect"] == nil {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		errs, _ := r.obj(t)["errors"].([]any)
		if len(errs) != 1 {
			t.Fatalf("%s: errors %v: %s", what, errs, r.body)
		}
		fe := errs[0].(map[string]any)
		got := fe["pointer"]
		if p, ok := fe["parameter"]; ok {
			got = p
		}
		if got != where || fe["rule"] != rule {
			t.Fatalf("%s: errors name %v, rule %v; want %s, rule %s", what, got, fe["rule"], where, rule)
		}
		if now := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]; now != head {
			t.Fatalf("%s: a refused %s moved the head", what, verb)
		}
	}
	check("complete before a claim", "complete", map[string]any{"worker": "A", "lease_token": "lease_x"}, "id", "claimed")
	c := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "A", "lease_seconds": 30}), 200)["effects"].([]any)
	tok := c[0].(map[string]any)["lease_token"]
	check("complete by another worker", "complete", map[string]any{"worker": "B", "lease_token": tok}, "/worker", "lease_holder")
	check("fail by another worker", "fail", map[string]any{"worker": "B", "lease_token": tok}, "/worker", "lease_holder")
	clock.Advance(31 * time.Second)
	check("complete after the lease", "complete", map[string]any{"worker": "A", "lease_token": tok}, "/lease_token", "lease_expired")
	check("fail after the lease", "fail", map[string]any{"worker": "A", "lease_token": tok, "retry": true}, "/lease_token", "lease_expired")
}

// TestResetMainKeepsTheOutbox: moving main back to a commit from before
// an effect was claimed, sent or failed would make the outbox forget that
// it went out: the next claim would take it and send it again. Such a
// reset is refused with 409 naming /to and changes nothing; a reset that
// leaves every such effect as it is, or of another branch, goes through.
func TestResetMainKeepsTheOutbox(t *testing.T) {
	e := newEnv(t)
	e.createContext("o", "")
	created := e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": "k", "kind": "email"}), 201)
	id := effect(created)["id"].(string)
	c := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "A"}), 200)
	tok := c["effects"].([]any)[0].(map[string]any)["lease_token"]
	sent := e.must(e.post("/v1/contexts/o/effects/"+id+"/complete", map[string]any{"worker": "A", "lease_token": tok}), 200)
	e.must(e.post("/v1/contexts/o/branches", map[string]any{"name": "old", "at": created["commit"]}), 201)
	note := e.must(e.post("/v1/contexts/o/artifacts", map[string]any{"id": "n1", "type": "note", "data": map[string]any{"text": "after"}}), 201)
	for _, to := range []any{created["commit"], c["commit"], "old"} {
		r := e.post("/v1/contexts/o/branches/main/reset", map[string]any{"to": to})
		if r.status != 409 {
			if got := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "B"}), 200)["effects"].([]any); len(got) == 1 {
				t.Fatalf("reset of main to %v: %d, and the sent effect was claimed again: %v", to, r.status, got)
			}
			t.Fatalf("reset of main to %v: %d %s", to, r.status, r.body)
		}
		errs, _ := r.obj(t)["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["pointer"] != "/to" || errs[0].(map[string]any)["rule"] != "outbox" {
			t.Fatalf("reset to %v: %s", to, r.body)
		}
		if head := e.must(e.get("/v1/contexts/o/hash"), 200)["commit"]; head != note["commit"] {
			t.Fatalf("a refused reset moved main to %v", head)
		}
	}
	// Back to the commit that sent it: the effect is as it is.
	e.must(e.post("/v1/contexts/o/branches/main/reset", map[string]any{"to": sent["commit"]}), 200)
	// Another branch may go anywhere: the outbox works on main.
	e.must(e.post("/v1/contexts/o/branches/old/reset", map[string]any{"to": note["commit"]}), 200)
	e.must(e.post("/v1/contexts/o/branches/old/reset", map[string]any{"to": created["commit"]}), 200)
	if got := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "B"}), 200)["effects"].([]any); len(got) != 0 {
		t.Fatalf("claimed again: %v", got)
	}
	// On purpose: forget_effects moves main back past the send, names the
	// effect, and the next claim sends it again.
	res := e.must(e.post("/v1/contexts/o/branches/main/reset", map[string]any{"to": created["commit"], "forget_effects": true}), 200)
	if f, _ := res["forgotten_effects"].([]any); len(f) != 1 || f[0] != created["effect"].(map[string]any)["id"] {
		t.Fatalf("reset forgetting effects: %v", res)
	}
	if got := e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "B"}), 200)["effects"].([]any); len(got) != 1 {
		t.Fatalf("after the forgetting reset, claimed %v", got)
	}
}

// TestEffectsETagFollowsTheLeases: the effects list depends on the clock
// only through which leases have passed. While none passes it answers
// 304 to its ETag however far the clock moves; once a lease passes (the
// body says lease_expired, and the effect counts as pending) it answers
// 200 with a new ETag, and that one is again answered 304; a clock set
// back before the lease changes the body, and the ETag, back.
func TestEffectsETagFollowsTheLeases(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withTestClock(clock))
	e.createContext("o", "")
	for _, k := range []string{"k1", "k2"} {
		e.must(e.post("/v1/contexts/o/effects", map[string]any{"idempotency_key": k, "kind": "webhook", "target": "https://hooks.example/x"}), 201)
	}
	e.must(e.post("/v1/contexts/o/effects/claim", map[string]any{"worker": "A", "lease_seconds": 30, "limit": 1}), 200)
	paths := []string{"/v1/contexts/o/effects", "/v1/contexts/o/effects?status=pending", "/v1/contexts/o/effects?status=claimed"}
	tags := map[string]string{}
	expired := func(r *resp) int {
		n := 0
		for _, it := range r.obj(t)["items"].([]any) {
			if it.(map[string]any)["lease_expired"] == true {
				n++
			}
		}
		return n
	}
	// check asks each path with the ETag it last answered and wants 304
	// (same) or 200 with a new ETag and want expired leases in the body.
	check := func(step string, same bool, want int) {
		t.Helper()
		for _, p := range paths {
			r := e.send(req{method: "GET", path: p, header: map[string]string{"If-None-Match": tags[p]}})
			switch {
			case same && r.status != http.StatusNotModified:
				t.Errorf("%s: GET %s with its ETag: %d, want 304 (nothing it shows changed)", step, p, r.status)
			case !same && r.status != http.StatusOK:
				t.Errorf("%s: GET %s with its old ETag: %d, want 200 (the body changed)", step, p, r.status)
			case !same && p != paths[2] && expired(r) != want:
				t.Errorf("%s: GET %s: %d expired leases, want %d: %s", step, p, expired(r), want, r.body)
			}
			if r.header.Get("ETag") == "" {
				t.Errorf("%s: GET %s: no ETag", step, p)
			}
			tags[p] = r.header.Get("ETag")
		}
	}
	check("first read", false, 0)
	clock.Advance(time.Second)
	check("a second later", true, 0)
	clock.Advance(28 * time.Second)
	check("just before the lease passes", true, 0)
	clock.Advance(2 * time.Second)
	check("the lease passed", false, 1)
	clock.Advance(time.Hour)
	check("an hour later", true, 1)
	clock.Advance(-time.Hour - 31*time.Second)
	check("the clock set back before the lease", false, 0)
}
