package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
)

// testClock is a settable clock for the outbox.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time { return c.now }

// newService opens a store in a temporary directory and returns the
// service over it with a settable clock, and context "o" created.
func newService(t *testing.T) (*Service, *testClock) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := NewRegistry()
	st, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := reg.Load(ctx, st); err != nil {
		t.Fatal(err)
	}
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := New(Options{Store: st, Types: reg, Logger: log, Clock: clock.Now, LeaseKey: make([]byte, 32)})
	if _, err := st.CreateContext(ctx, "o", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	return s, clock
}

// TestOutboxTransitions walks the outbox state machine through every
// transition, allowed and refused, checking the status (and that a
// refusal changes nothing) after each step.
func TestOutboxTransitions(t *testing.T) {
	type step struct {
		do       string // create, claim, complete, fail, retry, wait
		worker   string
		badToken bool
		code     fault.Code // the refusal expected, "" for none
		status   string     // the effect's status after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"claim then complete", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "complete", worker: "A", status: EffectSent}}},
		{"fail with retry returns to pending", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "retry", worker: "A", status: EffectPending}, {do: "claim", worker: "B", status: EffectClaimed}}},
		{"fail without retry is final", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "fail", worker: "A", status: EffectFailed}, {do: "claim", worker: "B", status: EffectFailed}}},
		{"complete without a claim is refused", []step{{do: "create", status: EffectPending}, {do: "complete", worker: "A", code: fault.Conflict, status: EffectPending}}},
		{"a wrong lease token is refused", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "complete", worker: "A", badToken: true, code: fault.LeaseToken, status: EffectClaimed}}},
		{"another worker cannot complete", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "complete", worker: "B", code: fault.Conflict, status: EffectClaimed}}},
		{"an expired lease is claimed again", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "wait"}, {do: "claim", worker: "B", status: EffectClaimed}, {do: "complete", worker: "B", status: EffectSent}}},
		{"fail again returns the recorded effect", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "fail", worker: "A", status: EffectFailed}, {do: "fail", worker: "A", status: EffectFailed}}},
		{"retry again returns the recorded effect", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "retry", worker: "A", status: EffectPending}, {do: "retry", worker: "A", status: EffectPending}, {do: "claim", worker: "B", status: EffectClaimed}}},
		{"fail again by another worker is refused", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "fail", worker: "A", status: EffectFailed}, {do: "fail", worker: "B", code: fault.Conflict, status: EffectFailed}}},
		{"fail again with a wrong token is refused", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "retry", worker: "A", status: EffectPending}, {do: "retry", worker: "A", badToken: true, code: fault.LeaseToken, status: EffectPending}}},
		{"a fail after a retry and another claim is refused", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "retry", worker: "A", status: EffectPending}, {do: "claim", worker: "B", status: EffectClaimed}, {do: "fail", worker: "A", code: fault.Conflict, status: EffectClaimed}}},
		{"create again returns the recorded effect", []step{{do: "create", status: EffectPending}, {do: "claim", worker: "A", status: EffectClaimed}, {do: "create", status: EffectClaimed}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, clock := newService(t)
			ctx := t.Context()
			id := EffectID("k")
			token := ""
			for i, st := range tc.steps {
				before, _ := s.readEffect(ctx, "o", id)
				var err error
				switch st.do {
				case "create":
					_, err = s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "email"})
				case "claim":
					var cw *ClaimWrite
					cw, err = s.ClaimEffects(ctx, "o", ClaimInput{Worker: st.worker, LeaseSeconds: 60})
					if err == nil && len(cw.Effects) == 1 {
						token = cw.Effects[0].LeaseToken
					}
				case "complete", "fail", "retry":
					tok := token
					if st.badToken {
						tok = "x" + tok
					}
					if st.do == "complete" {
						_, err = s.CompleteEffect(ctx, "o", id, CompleteInput{Worker: st.worker, LeaseToken: tok})
					} else {
						_, err = s.FailEffect(ctx, "o", id, FailInput{Worker: st.worker, Error: "smtp down", Retry: st.do == "retry", LeaseToken: tok})
					}
				case "wait":
					clock.now = clock.now.Add(2 * time.Minute)
					continue
				}
				switch {
				case st.code == "" && err != nil:
					t.Fatalf("step %d %s: %v", i, st.do, err)
				case st.code != "" && Classify(err).Code != st.code:
					t.Fatalf("step %d %s: got %v, want a %s refusal", i, st.do, err, st.code)
				}
				got, rerr := s.readEffect(ctx, "o", id)
				if rerr != nil {
					t.Fatalf("step %d: read: %v", i, rerr)
				}
				if got.Status != st.status {
					t.Fatalf("step %d %s: status %s, want %s", i, st.do, got.Status, st.status)
				}
				if st.code != "" && got.ContentHash != before.ContentHash {
					t.Fatalf("step %d %s: a refused transition changed the effect", i, st.do)
				}
			}
		})
	}
}

// TestEffectCompareAndSet: a status change computed from a state that
// another commit has since changed is refused inside the committer, and
// changes nothing.
func TestEffectCompareAndSet(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	w, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "job"})
	if err != nil {
		t.Fatal(err)
	}
	id := w.Effect.ID
	stale, err := s.readEffect(ctx, "o", id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "A"}); err != nil {
		t.Fatal(err)
	}
	head := func() hashing.Digest {
		c, err := s.st.Resolve(ctx, "o", "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ContextHash
	}
	before := head()
	d := stale.EffectData
	d.Status, d.Worker = EffectClaimed, "B"
	raw, err := canonicalData(d)
	if err != nil {
		t.Fatal(err)
	}
	ops := []graph.Op{{Op: graph.OpPut, ID: id, Type: TypeEffect, ProducedBy: "outbox", Data: raw}}
	if _, err := s.commitEffects(ctx, "o", "B", "stale claim", ops, map[string]hashing.Digest{id: stale.ContentHash}); !errors.Is(err, errCASConflict) {
		t.Fatalf("stale claim: %v", err)
	}
	// Expecting absence where something exists is refused too.
	if _, err := s.commitEffects(ctx, "o", "B", "stale create", ops, map[string]hashing.Digest{id: {}}); !errors.Is(err, errCASConflict) {
		t.Fatalf("stale create: %v", err)
	}
	if head() != before {
		t.Fatal("a refused compare-and-set changed the state")
	}
	if got, _ := s.readEffect(ctx, "o", id); got.Worker != "A" {
		t.Fatalf("worker %q", got.Worker)
	}
}

// TestClassify: every sentinel and typed error of store, graph, replay,
// gate, hashing and store/kv gets one code, wrapped or not; every
// corruption marker gives the one corruption code.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		code fault.Code
	}{
		{store.ErrNotFound, fault.NotFound},
		{graph.ErrNotFound, fault.NotFound},
		{store.ErrExists, fault.Exists},
		{store.ErrStale, fault.Stale},
		{store.ErrInvalid, fault.Invalid},
		{store.ErrAmbiguous, fault.AmbiguousRef},
		{store.ErrCorrupt, fault.Corrupt},
		{graph.ErrCorrupt, fault.Corrupt},
		{kv.ErrCorrupt, fault.Corrupt},
		{replay.ErrBroken, fault.Corrupt},
		{&replay.ChainError{Err: errors.New("ops hash differs")}, fault.Corrupt},
		{store.ErrClosed, fault.Unavailable},
		{store.ErrWriteFailed, fault.Unavailable},
		{store.ErrLocked, fault.Locked},
		{store.ErrNoSpace, fault.NoSpace},
		{&store.PrunedError{}, fault.Pruned},
		{&store.HexBranchError{Branches: []store.HexBranch{{Name: "deadbeef"}}}, fault.Invalid},
		{replay.ErrResolution, fault.Invalid},
		{replay.ErrNoMergeBase, fault.Invalid},
		{&replay.ConflictError{}, fault.MergeConflict},
		{&graph.TaintError{}, fault.Quarantined},
		{&graph.CycleError{}, fault.DependencyCycle},
		{&graph.OpError{Err: graph.ErrDangling}, fault.DanglingEdge},
		{&graph.OpError{Err: graph.ErrInvalid}, fault.Invalid},
		{&hashing.CanonError{Err: hashing.ErrSyntax}, fault.MalformedJSON},
		{&hashing.CanonError{Err: hashing.ErrDuplicateKey}, fault.NonCanonicalJSON},
		{&gate.VerdictError{Pointer: "/verdict", Rule: "verdict"}, fault.Invalid},
		{&gate.SecretError{Index: 1, Reason: "too short"}, fault.Invalid},
		{gate.ErrRules, fault.Invalid},
		{gate.ErrUnknownRuleset, fault.Invalid},
		{kv.ErrConflict, fault.Conflict},
		{kv.ErrTooLarge, fault.TooLarge},
		{kv.ErrClosed, fault.Unavailable},
		{context.Canceled, fault.Unavailable},
		{context.DeadlineExceeded, fault.Unavailable},
		{kv.ErrNotFound, fault.Internal},
		{errors.New("disk on fire"), fault.Internal},
		{fault.Errorf(fault.LeaseToken, "x"), fault.LeaseToken},
	}
	for _, c := range cases {
		for _, err := range []error{c.err, fmt.Errorf("while serving: %w", c.err)} {
			got := Classify(err)
			if got == nil || got.Code != c.code {
				t.Errorf("Classify(%v) = %v, want code %s", err, got, c.code)
			}
		}
	}
	if e := Classify(&gate.VerdictError{Pointer: "/verdict", Rule: "verdict"}); e.Pointer() != "/data/verdict" {
		t.Errorf("a refused verdict points at %q, want /data/verdict", e.Pointer())
	}
	// A bundle's branch refused for its name: each by its place in the
	// header, with the rule POST …/branches reports.
	hb := &store.HexBranchError{Context: "c", Branches: []store.HexBranch{{Index: 1, Name: "deadbeef"}, {Index: 3, Name: "cafef00d"}}}
	if e := Classify(fmt.Errorf("import: %w", hb)); len(e.Errors) != 2 || e.Pointer() != "/branches/1/name" || e.Errors[1].Pointer != "/branches/3/name" ||
		e.Errors[0].Rule != "not_commit_id" || e.Errors[1].Rule != "not_commit_id" || !strings.HasPrefix(e.Detail, "the bundle's branches") || !strings.Contains(e.Detail, `"cafef00d"`) {
		t.Errorf("a refused hex branch classifies as %+v", e)
	}
}

// TestEnsureContext: absent → created; the same mode again → the record;
// another mode → an exists refusal naming /quarantine, nothing changed.
func TestEnsureContext(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	for i, c := range []struct {
		id, mode      string
		created       bool
		code, pointer string
	}{
		{"e", "", true, "", ""},
		{"e", store.ModeEnforce, false, "", ""},
		{"e", store.ModeObserve, false, string(fault.Exists), "/quarantine"},
		{"o", store.ModeObserve, false, "", ""},
	} {
		info, created, err := s.EnsureContext(ctx, c.id, c.mode)
		if c.code != "" {
			e := Classify(err)
			if string(e.Code) != c.code || e.Pointer() != c.pointer {
				t.Fatalf("%d: got %v (pointer %q), want %s at %s", i, err, e.Pointer(), c.code, c.pointer)
			}
			continue
		}
		if err != nil || created != c.created || info.ID != c.id {
			t.Fatalf("%d: info %+v created %v err %v", i, info, created, err)
		}
	}
	if info, err := s.st.GetContext(ctx, "e"); err != nil || info.Quarantine != store.ModeEnforce {
		t.Fatalf("a refused ensure changed the context: %+v %v", info, err)
	}
}

// TestClaimInputOutOfRange: the outbox refuses a claim it cannot keep
// (no worker, a lease past a day, so long that its end overflows, or
// negative, a limit past 100) with a validation error naming the field,
// whatever door called it, and changes nothing. A lease whose end
// overflowed was in the past: the next claim took the effect while its
// holder was still sending it.
func TestClaimInputOutOfRange(t *testing.T) {
	cases := []struct {
		name string
		in   ClaimInput
		ptr  string
	}{
		{"no worker", ClaimInput{}, "/worker"},
		{"lease overflows", ClaimInput{Worker: "A", LeaseSeconds: 1 << 34}, "/lease_seconds"},
		{"lease past a day", ClaimInput{Worker: "A", LeaseSeconds: 86401}, "/lease_seconds"},
		{"negative lease", ClaimInput{Worker: "A", LeaseSeconds: -5}, "/lease_seconds"},
		{"limit past 100", ClaimInput{Worker: "A", Limit: 101}, "/limit"},
		{"negative limit", ClaimInput{Worker: "A", Limit: -1}, "/limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t)
			ctx := t.Context()
			if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "email"}); err != nil {
				t.Fatal(err)
			}
			head, err := s.st.Resolve(ctx, "o", "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.ClaimEffects(ctx, "o", tc.in)
			if err == nil && len(got.Effects) == 1 {
				if b, berr := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "B"}); berr == nil && len(b.Effects) == 1 {
					t.Fatalf("claim %+v was accepted with lease_until %s, and B claimed the same effect at once", tc.in, got.Effects[0].LeaseUntil)
				}
			}
			fe := Classify(err)
			if fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != tc.ptr {
				t.Fatalf("claim %+v: got %v, want a validation error at %s", tc.in, err, tc.ptr)
			}
			after, err := s.st.Resolve(ctx, "o", "")
			if err != nil {
				t.Fatal(err)
			}
			if after.ID != head.ID {
				t.Fatalf("a refused claim made commit %s", after.ID)
			}
			// The effect is still there for a claim that keeps its lease.
			a, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "A", LeaseSeconds: 86400})
			if err != nil || len(a.Effects) != 1 {
				t.Fatalf("claim A: %v %v", a, err)
			}
			if b, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "B"}); err != nil || len(b.Effects) != 0 {
				t.Fatalf("B claimed an effect A holds: %v %v", b, err)
			}
		})
	}
}

// TestCreateEffectInputRules: the outbox refuses, whatever door called
// it, an effect whose idempotency key, kind or target is not UTF-8 (the
// stored JSON would carry U+FFFD in its place, so the same request sent
// again no longer matched what was recorded and was refused as a 409), or
// that has no key or kind, with a validation error naming the request's
// field, and commits nothing. A duplicate key in an edge's attrs is
// refused at its place in that edge's attrs, as an artifact write's is.
func TestCreateEffectInputRules(t *testing.T) {
	cases := []struct {
		name string
		in   EffectInput
		ptr  string
		rule string
		code fault.Code // Invalid when unset
	}{
		{"key not UTF-8", EffectInput{IdempotencyKey: "order-\xff", Kind: "email"}, "/idempotency_key", "utf8", ""},
		{"kind not UTF-8", EffectInput{IdempotencyKey: "k", Kind: "e\xc3"}, "/kind", "utf8", ""},
		{"target not UTF-8", EffectInput{IdempotencyKey: "k", Kind: "email", Target: "\xfe"}, "/target", "utf8", ""},
		{"no key", EffectInput{Kind: "email"}, "/idempotency_key", "required", ""},
		{"no kind", EffectInput{IdempotencyKey: "k"}, "/kind", "required", ""},
		{"duplicate key in an edge's attrs", EffectInput{IdempotencyKey: "k", Kind: "email",
			Edges: []EdgeInput{{Rel: "derived_from", To: "q"}, {Rel: "derived_from", To: "q", Attrs: []byte(`{"a":1,"a":2}`)}}},
			"/edges/1/attrs/a", "duplicate_key", fault.NonCanonicalJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t)
			ctx := t.Context()
			head, err := s.st.Resolve(ctx, "o", "")
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.CreateEffect(ctx, "o", tc.in)
			if err == nil {
				_, again := s.CreateEffect(ctx, "o", tc.in)
				t.Fatalf("create %+v was accepted (key stored as %q); the same request again: %v", tc.in, w.Effect.IdempotencyKey, again)
			}
			fe, code := Classify(err), tc.code
			if code == "" {
				code = fault.Invalid
			}
			if fe.Code != code || len(fe.Errors) != 1 || fe.Errors[0].Pointer != tc.ptr || fe.Errors[0].Rule != tc.rule {
				t.Fatalf("create %+v: got %v %+v, want a %s error at %s, rule %s", tc.in, err, fe.Errors, code, tc.ptr, tc.rule)
			}
			after, err := s.st.Resolve(ctx, "o", "")
			if err != nil {
				t.Fatal(err)
			}
			if after.ID != head.ID {
				t.Fatalf("a refused create made commit %s", after.ID)
			}
		})
	}
}

// TestListEffectsLimitAtLeastOne: a page of no effects with more left
// gives its caller no id to go on from (the HTTP door indexed the page's
// last item), so a limit under 1 is refused, naming limit; a limit of 1
// pages through every effect.
func TestListEffectsLimitAtLeastOne(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	for _, k := range []string{"k1", "k2"} {
		if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: k, Kind: "email"}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(cursor string, limit int) (items []EffectView, more bool, err error) {
		rerr := s.st.Read(ctx, "o", "main", func(v *store.View) error {
			all, rerr := EffectsAt(v)
			if rerr != nil {
				return rerr
			}
			items, more, err = ListEffectsIn(all, "", cursor, limit, s.Now())
			return nil
		})
		if rerr != nil {
			t.Fatal(rerr)
		}
		return items, more, err
	}
	for _, limit := range []int{0, -1} {
		items, more, err := read("", limit)
		fe := Classify(err)
		if fe.Code != fault.InvalidQuery || len(fe.Errors) != 1 || fe.Errors[0].Parameter != "limit" {
			t.Fatalf("limit %d: %d items, more %v, err %v; want an invalid query naming limit", limit, len(items), more, err)
		}
	}
	var seen []string
	for cursor := ""; ; {
		items, more, err := read(cursor, 1)
		if err != nil || len(items) != 1 {
			t.Fatalf("after %q: %d items, %v", cursor, len(items), err)
		}
		seen = append(seen, items[0].IdempotencyKey)
		if !more {
			break
		}
		cursor = items[0].ID
	}
	if len(seen) != 2 {
		t.Fatalf("paged through %v, want both effects", seen)
	}
}

// TestResetBranchKeepsTheOutbox: the service's reset, which every door
// calls, refuses to move main back past a claim (conflict naming /to,
// main unmoved), refuses a stale parent with the head, and moves main to
// a commit that holds the effect as it is; with ForgetEffects it moves
// back past the claim, names the effect, and the effect is claimed again.
func TestResetBranchKeepsTheOutbox(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	created, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "email"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "A"})
	if err != nil || claimed.Commit == nil {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}
	_, err = s.ResetBranch(ctx, "o", "main", ResetInput{To: created.Commit.String()})
	fe := Classify(err)
	if fe.Code != fault.Conflict || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "/to" || fe.Errors[0].Rule != "outbox" {
		t.Fatalf("reset past the claim: %v, want a conflict naming /to, rule outbox", err)
	}
	head, err := s.st.Resolve(ctx, "o", "main")
	if err != nil || head.ID != *claimed.Commit {
		t.Fatalf("a refused reset moved main to %v (%v)", head.ID, err)
	}
	stale := created.Commit
	_, err = s.ResetBranch(ctx, "o", "main", ResetInput{To: claimed.Commit.String(), Parent: &stale})
	if fe := Classify(err); fe.Code != fault.Stale || fe.Extra["head"] != *claimed.Commit {
		t.Fatalf("stale parent: %v, want stale-parent with the head", err)
	}
	res, err := s.ResetBranch(ctx, "o", "main", ResetInput{To: claimed.Commit.String(), Parent: claimed.Commit})
	if err != nil || res.Head != *claimed.Commit || res.Previous != *claimed.Commit || res.Name != "main" || res.ForgottenEffects != nil {
		t.Fatalf("reset to the claim's commit: %+v, %v", res, err)
	}

	// On purpose, with forget_effects: main moves back past the claim,
	// the answer names the effect, and the next claim takes it again.
	res, err = s.ResetBranch(ctx, "o", "main", ResetInput{To: created.Commit.String(), ForgetEffects: true})
	if err != nil || res.Head != created.Commit || len(res.ForgottenEffects) != 1 || res.ForgottenEffects[0] != created.Effect.ID {
		t.Fatalf("reset forgetting the effect: %+v, %v", res, err)
	}
	again, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "B"})
	if err != nil || len(again.Effects) != 1 || again.Effects[0].ID != created.Effect.ID {
		t.Fatalf("claim after the forgetting reset: %+v, %v", again, err)
	}
}

// TestFailEffectRepeat: a worker that lost the answer to its fail sends
// it again and gets the recorded effect — the same commit, attempts
// counted once — with or without retry; a different error is a new
// request, refused since the effect is no longer claimed.
func TestFailEffectRepeat(t *testing.T) {
	for _, retry := range []bool{false, true} {
		s, _ := newService(t)
		ctx := t.Context()
		if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "email"}); err != nil {
			t.Fatal(err)
		}
		cw, err := s.ClaimEffects(ctx, "o", ClaimInput{Worker: "A", LeaseSeconds: 60})
		if err != nil || len(cw.Effects) != 1 {
			t.Fatalf("claim: %+v %v", cw, err)
		}
		in := FailInput{Worker: "A", LeaseToken: cw.Effects[0].LeaseToken, Error: "smtp 451 password=hunter2", Retry: retry}
		first, err := s.FailEffect(ctx, "o", cw.Effects[0].ID, in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.FailEffect(ctx, "o", cw.Effects[0].ID, in)
		if err != nil {
			t.Fatalf("retry %v: the repeat: %v", retry, err)
		}
		if again.Commit != first.Commit || again.Effect.Attempts != 1 || again.Effect.ContentHash != first.Effect.ContentHash || again.Effect.LastError != first.Effect.LastError {
			t.Fatalf("retry %v: the repeat %+v, the first %+v", retry, again, first)
		}
		in.Error = "smtp 550"
		if _, err := s.FailEffect(ctx, "o", cw.Effects[0].ID, in); Classify(err).Code != fault.Conflict {
			t.Fatalf("retry %v: another error after the fail: %v", retry, err)
		}
	}
}

// TestClaimWorkerFollowsTheLabelRules: a claim's worker is the author of
// the commit the claim makes (and of the effect's complete or fail), so
// it is held to the rules of names as every other author: a zero-width,
// bidi or control character is refused with a validation error at
// /worker naming the rule, and so is a worker of spaces only (no name a
// reader can tell), and nothing is written.
func TestClaimWorkerFollowsTheLabelRules(t *testing.T) {
	for _, tc := range []struct{ worker, rule string }{
		{"work\u200ber", "visible"},
		{"work\u202eer", "visible"},
		{"work\ner", "printable"},
		{" ", "required"},
		{"\u00a0", "visible"},
	} {
		s, _ := newService(t)
		ctx := t.Context()
		if _, err := s.CreateEffect(ctx, "o", EffectInput{IdempotencyKey: "k", Kind: "email"}); err != nil {
			t.Fatal(err)
		}
		head, err := s.st.Resolve(ctx, "o", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.ClaimEffects(ctx, "o", ClaimInput{Worker: tc.worker})
		fe := Classify(err)
		if fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "/worker" || fe.Errors[0].Rule != tc.rule {
			t.Fatalf("claim by %q: got %v, want a validation error at /worker (rule %s)", tc.worker, err, tc.rule)
		}
		after, err := s.st.Resolve(ctx, "o", "")
		if err != nil {
			t.Fatal(err)
		}
		if after.ID != head.ID {
			t.Fatalf("a refused claim by %q made commit %s (author %q)", tc.worker, after.ID, after.Author)
		}
	}
}
