package service

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/artifactd/artifactd/fault"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// The outbox. An effect is an artifact of type effect on the main branch
// whose data records an intended side effect and its status; every status
// change is a commit, so replay reads effects as state and never sends
// anything. Its id derives from the idempotency key (EffectID): asking
// again returns the recorded effect, not a second one.
//
// Status changes are compare-and-set: a handler reads the effects it will
// change at the head, computes their new data, and commits with a
// CommitRequest.Check that runs in the committer deciding the context's
// writes (one at a time, in order) and
// refuses the commit unless every one of them still has the content hash
// it read (casCheck). A refused commit changes nothing; the handler reads
// again and decides again (a bounded number of times). So two workers
// never claim the same effect, and a late complete never overwrites a
// newer claim.
//
// A claim does not fight the other claims over the same oldest effects:
// it reads a pool of the oldest claimable effects (claimPool: 32 times
// its limit, doubled after each lost round), and the committer takes,
// on the head the claim lands on, the first limit of them that no commit
// changed since they were read (CommitRequest.OpsFrom). Effects that
// other claims took meanwhile are passed over and the claim is filled
// from the next ones; a round is lost only when other claims took the
// whole pool (or, from a pool cut short, all but fewer than limit). After
// casAttempts lost rounds the claim is refused: 409 conflict naming the
// body, rule contended.
//
//	pending ──claim──▶ claimed ──complete──▶ sent
//	   ▲                  │ └──fail, retry──▶ pending (attempts+1)
//	   └──lease expires───┘ └──fail─────────▶ failed (attempts+1)
//
// An expired lease is not a commit of its own: a claimed effect whose
// lease_until has passed counts as pending (lease_expired in reads) and the
// next claim takes it.
//
// Lease tokens. A claim answers each effect with a lease_token that
// complete and fail must present (403 lease-token when it is missing or
// wrong), so a writer cannot complete a claim it does not hold by naming
// its worker. The token is not random and not stored: it is
// HMAC-SHA256(Options.LeaseKey, ctx, effect id, content hash of the
// claimed version). The claimed version's data (worker, lease_until,
// updated_at, attempts) differs from claim to claim, so every claim has its
// own token, and a token ends with its claim; the key is secret, so a
// token cannot be guessed from what a reader sees. Nothing of it reaches
// the effect's data, an id, a commit or a hash: the outbox's commits are
// what they were, two replays of a chain are identical, and an exported
// bundle carries no lease secret. serve keeps the key in the data
// directory (lease.key), so leases survive a restart.

// TypeEffect is the type of outbox effects.
const TypeEffect = "effect"

// Effect statuses.
const (
	EffectPending = "pending"
	EffectClaimed = "claimed"
	EffectSent    = "sent"
	EffectFailed  = "failed"
)

// Outbox limits.
const (
	defaultLeaseSeconds = 60
	maxLeaseSeconds     = 86400
	maxClaimLimit       = 100
	// casAttempts bounds how often a status change is recomputed after a
	// concurrent change won the compare-and-set.
	casAttempts = 32
)

// effectPrefix starts the id of every effect (EffectID).
const effectPrefix = "effect:"

// EffectID returns the id of the effect with an idempotency key:
// "effect:" and the first 32 hex digits of the key's SHA-256.
func EffectID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return effectPrefix + hex.EncodeToString(sum[:16])
}

// EffectInput is POST /v1/contexts/{ctx}/effects.
type EffectInput struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Kind           string          `json:"kind"`
	Target         string          `json:"target,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	ProducedBy     string          `json:"produced_by,omitempty"`
	// Edges are outgoing edges of the effect (what it rests on); in an
	// enforce context an effect that rests on an unconfirmed artifact is
	// refused, so poison cannot reach a side effect.
	Edges []EdgeInput `json:"edges,omitempty"`
	// IfMatch, when set, is the head the write expects main to
	// have (an If-Match header; never read from the body): the write is
	// refused as stale, naming If-Match, when the head is another.
	IfMatch *hashing.Digest `json:"-"`
}

// ClaimInput is POST .../effects/claim.
type ClaimInput struct {
	Worker       string `json:"worker"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	Limit        int    `json:"limit,omitempty"`
}

// CompleteInput is POST .../effects/{id}/complete.
type CompleteInput struct {
	Worker string          `json:"worker"`
	Result json.RawMessage `json:"result,omitempty"`
	// LeaseToken is the token the claim returned for this effect.
	LeaseToken string `json:"lease_token,omitempty"`
}

// FailInput is POST .../effects/{id}/fail.
type FailInput struct {
	Worker string `json:"worker"`
	Error  string `json:"error,omitempty"`
	Retry  bool   `json:"retry,omitempty"`
	// LeaseToken is the token the claim returned for this effect.
	LeaseToken string `json:"lease_token,omitempty"`
}

// EffectData is the data of an effect artifact. Times are RFC 3339 in UTC
// from Options.Clock.
type EffectData struct {
	IdempotencyKey string          `json:"idempotency_key"`
	Kind           string          `json:"kind"`
	Target         string          `json:"target,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Status         string          `json:"status"`
	// Attempts counts failed attempts (fail, with or without retry).
	Attempts int `json:"attempts"`
	// Worker and LeaseUntil are the holder of a claim and its end; Worker
	// stays set on sent and failed effects.
	Worker     string          `json:"worker,omitempty"`
	LeaseUntil string          `json:"lease_until,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	// LastError is the last failure's text, secret-masked.
	LastError string `json:"last_error,omitempty"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// EffectView is an effect as the outbox answers it.
type EffectView struct {
	ID          string         `json:"id"`
	Version     int64          `json:"version"`
	ContentHash hashing.Digest `json:"content_hash"`
	EffectData
	// LeaseExpired is set on a claimed effect whose lease has passed: it
	// counts as pending.
	LeaseExpired bool `json:"lease_expired,omitempty"`
	// LeaseToken is set only in a claim's answer: what complete and fail
	// must present. It is never stored.
	LeaseToken string `json:"lease_token,omitempty"`
}

// EffectWrite is the answer to a create, complete or fail: the effect and
// the commit that wrote it (the head, when nothing changed).
type EffectWrite struct {
	Effect EffectView     `json:"effect"`
	Commit hashing.Digest `json:"commit"`
	// Created is set when the request made a new effect (201); otherwise
	// the effect was there already and is returned as recorded (200).
	Created bool `json:"created,omitempty"`
}

// ClaimWrite is the answer to a claim: the effects now leased to the
// worker (none when there was nothing to claim).
type ClaimWrite struct {
	Effects []EffectView    `json:"effects"`
	Commit  *hashing.Digest `json:"commit,omitempty"`
}

var (
	errEffectExists = errors.New("effect exists")
	errCASConflict  = errors.New("compare-and-set lost")
)

func (s *Service) now() time.Time { return s.clock().UTC() }

// casCheck is the compare-and-set of an outbox commit: every put must
// find its artifact with the content hash the handler read (absent when
// expected holds the zero digest), or the commit is refused with
// errCASConflict.
func casCheck(expected map[string]hashing.Digest) func(*graph.State, []graph.Change) error {
	return func(_ *graph.State, changes []graph.Change) error {
		for _, ch := range changes {
			want, ok := expected[ch.Op.ID]
			if ch.Op.Op != graph.OpPut || !ok {
				continue
			}
			var prior hashing.Digest
			switch {
			case ch.Noop:
				prior = ch.Op.ContentHash
			case ch.Prev != nil:
				prior = ch.Prev.ContentHash
			}
			if prior != want {
				return errCASConflict
			}
		}
		return nil
	}
}

// readEffect returns the effect with id at main's head, or a 404.
func (s *Service) readEffect(ctx context.Context, ctxID, id string) (EffectView, error) {
	var out EffectView
	err := s.st.Read(ctx, ctxID, "", func(v *store.View) error {
		a := v.State.Artifact(id)
		if a == nil || a.Type != TypeEffect {
			return NotFoundParam("id", fmt.Sprintf("no effect %q", id))
		}
		ev, err := effectView(v, a)
		out = ev
		return err
	})
	return out, err
}

func effectView(v *store.View, a *graph.Artifact) (EffectView, error) {
	raw, err := v.Data(a)
	if err != nil {
		return EffectView{}, err
	}
	ev := EffectView{ID: a.ID, Version: a.Version, ContentHash: a.ContentHash}
	if err := json.Unmarshal(raw, &ev.EffectData); err != nil {
		return EffectView{}, &fault.Error{Code: fault.Conflict, Detail: fmt.Sprintf("artifact %q is an effect the outbox cannot read (%v)", a.ID, err)}
	}
	return ev, nil
}

// leaseExpired reports whether a claimed effect's lease has passed at now.
func leaseExpired(d EffectData, now time.Time) bool {
	if d.Status != EffectClaimed {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, d.LeaseUntil)
	return err != nil || !now.Before(t)
}

// commitEffects commits puts of effects under the compare-and-set of
// expected, on main.
func (s *Service) commitEffects(ctx context.Context, ctxID, author, msg string, ops []graph.Op, expected map[string]hashing.Digest) (store.CommitResult, error) {
	return s.st.Commit(ctx, store.CommitRequest{Context: ctxID, Author: author, Message: msg, Ops: ops,
		Check: effectsCASCheck(expected)})
}

// effectsCASCheck is the check of a commit of effects: effectCheck, then
// the compare-and-set of expected (casCheck).
func effectsCASCheck(expected map[string]hashing.Digest) func(*graph.State, []graph.Change) error {
	cas := casCheck(expected)
	return func(st *graph.State, changes []graph.Change) error {
		if err := effectCheck(st, changes); err != nil {
			return err
		}
		return cas(st, changes)
	}
}

// unconfirmed reports whether st, a trust index's status ("" for an
// artifact it does not list), is other than confirmed.
func unconfirmed(st graph.Status) bool { return st != "" && st != graph.StatusConfirmed }

// errHeld refuses a claim whose effects came to rest on an unconfirmed
// artifact after they were picked: the claim is decided again.
var errHeld = errors.New("an effect being claimed rests on an unconfirmed artifact now")

func (s *Service) viewOf(id string, d EffectData, res store.CommitResult, now time.Time) EffectView {
	ev := EffectView{ID: id, EffectData: d, LeaseExpired: leaseExpired(d, now)}
	for _, ch := range res.Changes {
		if ch.Op.Op == graph.OpPut && ch.Op.ID == id {
			ev.Version, ev.ContentHash = ch.Op.Version, ch.Op.ContentHash
		}
	}
	return ev
}

// CreateEffect records an intended side effect as pending, or returns the
// effect its idempotency key already names (created false) when the kind,
// target and payload are the same. The same key with a different kind,
// target or payload is a 409. Concurrent calls with one key make exactly
// one effect. Errors are *fault.Error values.
func (s *Service) CreateEffect(ctx context.Context, ctxID string, in EffectInput) (*EffectWrite, error) {
	if err := checkEffectInput(in); err != nil {
		return nil, err
	}
	payload, err := canonicalPayload(in.Payload, "/payload")
	if err != nil {
		return nil, err
	}
	in.Payload = payload
	id := EffectID(in.IdempotencyKey)
	now := s.now()
	ts := hashing.FormatTime(now)
	d := EffectData{IdempotencyKey: in.IdempotencyKey, Kind: in.Kind, Target: in.Target, Payload: in.Payload,
		Status: EffectPending, CreatedAt: ts, UpdatedAt: ts}
	raw, err := canonicalData(d)
	if err != nil {
		return nil, err
	}
	if err := s.types.Validate(TypeEffect, mustDecode(raw), "/data"); err != nil {
		return nil, err
	}
	if err := checkLabel(in.ProducedBy, "/produced_by", "produced_by"); err != nil {
		return nil, err
	}
	producer := in.ProducedBy
	if producer == "" {
		producer = "outbox"
	}
	ops := []graph.Op{{Op: graph.OpPut, ID: id, Type: TypeEffect, ProducedBy: producer, Data: raw}}
	for i, e := range in.Edges {
		attrs := e.Attrs
		if len(attrs) > 0 {
			if attrs, err = hashing.CanonicalizeObject(attrs); err != nil {
				return nil, classifyAt(err, fmt.Sprintf("/edges/%d/attrs", i))
			}
		}
		ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: e.Rel, To: e.To, Attrs: attrs})
	}
	res, err := s.st.Commit(ctx, store.CommitRequest{Context: ctxID, Author: producer, Message: "effect " + id + " pending", Ops: ops, Parent: in.IfMatch,
		Check: func(st *graph.State, changes []graph.Change) error {
			if ch := changes[0]; ch.Noop || ch.Prev != nil {
				return errEffectExists
			}
			return effectCheck(st, changes)
		}})
	switch {
	case errors.Is(err, store.ErrStale):
		return nil, s.commitError(ctx, ctxID, "", true, err)
	case errors.Is(err, errEffectExists):
		old, err := s.readEffect(ctx, ctxID, id)
		if err != nil {
			var e *fault.Error
			if errors.As(err, &e) && e.Code == fault.NotFound {
				return nil, &fault.Error{Code: fault.Conflict, Detail: fmt.Sprintf("artifact %q exists and is not an effect; use another idempotency key", id),
					Errors: []fault.FieldError{{Pointer: "/idempotency_key", Rule: "unique", Detail: "the effect id it derives is held by an artifact of another type"}}}
			}
			return nil, err
		}
		if diff := effectDiff(old.EffectData, in); len(diff) > 0 {
			return nil, &fault.Error{Code: fault.Conflict,
				Detail: fmt.Sprintf("idempotency key %q already names effect %s with a different kind, target or payload; use a new key for a new effect", in.IdempotencyKey, id),
				Errors: diff, Extra: map[string]any{"effect": old}}
		}
		old.LeaseExpired = leaseExpired(old.EffectData, now)
		c, err := s.st.Resolve(ctx, ctxID, "")
		if err != nil {
			return nil, err
		}
		return &EffectWrite{Effect: old, Commit: c.ID}, nil
	case err != nil:
		return nil, locate(err, func(i int, field string) string {
			if i == 0 {
				return field
			}
			return fmt.Sprintf("/edges/%d%s", i-1, strings.TrimPrefix(field, "/from"))
		})
	}
	s.countWrite(false)
	return &EffectWrite{Effect: s.viewOf(id, d, res, now), Commit: res.Commit.ID, Created: true}, nil
}

// checkEffectInput refuses, with a validation error naming the field, an
// effect without an idempotency key or kind, or whose key, kind or target
// is not UTF-8: its stored JSON would carry U+FFFD in place of the bad
// bytes, and the same request sent again would no longer match what was
// recorded.
func checkEffectInput(in EffectInput) error {
	for _, f := range []struct {
		ptr, v   string
		required bool
	}{{"/idempotency_key", in.IdempotencyKey, true}, {"/kind", in.Kind, true}, {"/target", in.Target, false}} {
		var fe fault.FieldError
		switch {
		case f.required && f.v == "":
			fe = fault.FieldError{Pointer: f.ptr, Rule: "required", Detail: "a non-empty string"}
		case !utf8.ValidString(f.v):
			fe = fault.FieldError{Pointer: f.ptr, Rule: "utf8", Detail: "not valid UTF-8"}
		default:
			continue
		}
		return refusedField("effect", fe)
	}
	return nil
}

// refusedField is the validation error of a field of what (an effect, a
// claim) that breaks fe's rule.
func refusedField(what string, fe fault.FieldError) error {
	return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("the %s's %s breaks rule %s: %s", what, strings.TrimPrefix(fe.Pointer, "/"), fe.Rule, fe.Detail),
		Errors: []fault.FieldError{fe}}
}

// effectDiff names, in the request's field order, each field in which a
// create differs from the effect its idempotency key already names (none
// when it asks for the same effect again).
func effectDiff(old EffectData, in EffectInput) []fault.FieldError {
	var out []fault.FieldError
	differs := func(ptr string) {
		out = append(out, fault.FieldError{Pointer: ptr, Rule: "idempotent", Detail: "differs from the effect recorded under this idempotency key"})
	}
	if old.IdempotencyKey != in.IdempotencyKey {
		differs("/idempotency_key")
	}
	if old.Kind != in.Kind {
		differs("/kind")
	}
	if old.Target != in.Target {
		differs("/target")
	}
	if !sameJSON(old.Payload, in.Payload) {
		differs("/payload")
	}
	return out
}

// ClaimEffects leases up to in.Limit claimable effects (pending, or claimed
// with an expired lease), oldest first, to in.Worker in one commit. In an
// enforce context an effect that rests on an unconfirmed artifact is held
// back: what it rests on became poisoned or quarantined after it was
// recorded (a fetch read again and FAILED), and a side effect must not
// go out on it; it is claimable again once its trust is confirmed.
func (s *Service) ClaimEffects(ctx context.Context, ctxID string, in ClaimInput) (*ClaimWrite, error) {
	if err := checkClaimInput(in); err != nil {
		return nil, err
	}
	if in.LeaseSeconds == 0 {
		in.LeaseSeconds = defaultLeaseSeconds
	}
	if in.Limit == 0 {
		in.Limit = 1
	}
	info, err := s.st.GetContext(ctx, ctxID)
	if err != nil {
		return nil, err
	}
	enforce := info.Quarantine == store.ModeEnforce
	for round := range casAttempts {
		now := s.now()
		var picked []EffectView
		err := s.st.Read(ctx, ctxID, "", func(v *store.View) error {
			all, err := EffectsAt(v)
			if err != nil {
				return err
			}
			for _, e := range all {
				if e.Status != EffectPending && !leaseExpired(e.EffectData, now) {
					continue
				}
				if enforce && unconfirmed(v.Trust.Status(e.ID)) {
					continue
				}
				picked = append(picked, e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(picked) == 0 {
			return &ClaimWrite{Effects: []EffectView{}}, nil
		}
		oldestFirst(picked)
		// The pool: the oldest candidates, more of them after each lost
		// round. The committer takes the first in.Limit of them that no
		// commit has changed since they were read.
		size := claimPool(in.Limit, round)
		truncated := len(picked) > size
		if truncated {
			picked = picked[:size]
		}
		lease := hashing.FormatTime(now.Add(time.Duration(in.LeaseSeconds) * time.Second))
		read := make(map[string]hashing.Digest, len(picked))
		claimed := make([]claimedEffect, len(picked))
		for i, e := range picked {
			d := e.EffectData
			d.Status, d.Worker, d.LeaseUntil, d.UpdatedAt = EffectClaimed, in.Worker, lease, hashing.FormatTime(now)
			raw, err := canonicalData(d)
			if err != nil {
				return nil, err
			}
			read[e.ID] = e.ContentHash
			claimed[i] = claimedEffect{id: e.ID, read: e.ContentHash, data: d, raw: raw}
		}
		var chosen []claimedEffect
		// The message cannot count the effects: the committer picks them.
		req := store.CommitRequest{Context: ctxID, Author: in.Worker, Message: "claim effect(s) for " + in.Worker,
			OpsFrom: func(st *graph.State, _ store.Planning) ([]graph.Op, error) {
				chosen = unchangedFirst(st, claimed, in.Limit)
				if len(chosen) == 0 || (len(chosen) < in.Limit && truncated) {
					// Other claims took the pool: read again, with a
					// bigger one.
					return nil, errCASConflict
				}
				ops := make([]graph.Op, len(chosen))
				for i, c := range chosen {
					ops[i] = graph.Op{Op: graph.OpPut, ID: c.id, Type: TypeEffect, ProducedBy: "outbox", Data: c.raw}
				}
				return ops, nil
			},
			Check: effectsCASCheck(read)}
		if enforce {
			// Checked again on the head the claim lands on.
			req.CheckTrust = func(status func(string) graph.Status) error {
				for _, c := range chosen {
					if unconfirmed(status(c.id)) {
						return errHeld
					}
				}
				return nil
			}
		}
		if s.claiming != nil {
			s.claiming()
		}
		res, err := s.st.Commit(ctx, req)
		if errors.Is(err, errCASConflict) || errors.Is(err, errHeld) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.countWrite(res.Noop)
		out := &ClaimWrite{Effects: make([]EffectView, len(chosen)), Commit: &res.Commit.ID}
		for i, c := range chosen {
			ev := s.viewOf(c.id, c.data, res, now)
			ev.LeaseToken = s.leaseToken(ctxID, c.id, ev.ContentHash)
			out.Effects[i] = ev
		}
		return out, nil
	}
	return nil, &fault.Error{Code: fault.Conflict,
		Detail: fmt.Sprintf("the outbox is busy: other claims took every effect this claim picked, %d times in a row; claim again", casAttempts),
		Errors: []fault.FieldError{{Pointer: "", Rule: "contended", Detail: "other claims kept taking the effects this claim picked"}}}
}

// claimedEffect is a candidate of a claim: the effect's id, the content
// hash it was read with, and its data as the claim would write it.
type claimedEffect struct {
	id   string
	read hashing.Digest
	data EffectData
	raw  []byte
}

// claimPool is how many of the oldest candidates a claim of limit
// offers the committer in round (0 first): 32 times the limit, doubled
// after each lost round, so that the claims landing between its read and
// its commit (one per concurrent claimer, each taking up to its own
// limit) rarely take the whole pool, and never for long.
func claimPool(limit, round int) int {
	return limit * 32 << min(round, 16)
}

// unchangedFirst returns the first limit of pool, in order, that st
// holds as they were read: what another commit changed since (claimed
// by another worker, failed, completed) is left out, and the claim is
// filled from the next ones.
func unchangedFirst(st *graph.State, pool []claimedEffect, limit int) []claimedEffect {
	var out []claimedEffect
	for _, c := range pool {
		if len(out) == limit {
			break
		}
		if a := st.Artifact(c.id); a != nil && a.Type == TypeEffect && a.ContentHash == c.read {
			out = append(out, c)
		}
	}
	return out
}

// checkClaimInput refuses, with a validation error naming the field, a
// claim the outbox cannot keep: no worker (or one of spaces only), a lease of under a second or
// over a day (a longer one's end could overflow into the past, where the
// next claim would take the effect from its holder), a limit over
// maxClaimLimit, a worker that would not read as it renders (checkLabel:
// it is the author of the claim's commit). Zero lease_seconds and limit
// take their defaults.
func checkClaimInput(in ClaimInput) error {
	var fe fault.FieldError
	switch {
	case strings.Trim(in.Worker, " ") == "":
		// Spaces only name no worker a reader can tell apart.
		fe = fault.FieldError{Pointer: "/worker", Rule: "required", Detail: "the worker the effects are leased to, not blank"}
	case in.LeaseSeconds < 0:
		fe = fault.FieldError{Pointer: "/lease_seconds", Rule: "minimum", Detail: "at least 1"}
	case in.LeaseSeconds > maxLeaseSeconds:
		fe = fault.FieldError{Pointer: "/lease_seconds", Rule: "maximum", Detail: fmt.Sprintf("at most %d", maxLeaseSeconds)}
	case in.Limit < 0:
		fe = fault.FieldError{Pointer: "/limit", Rule: "minimum", Detail: "at least 1"}
	case in.Limit > maxClaimLimit:
		fe = fault.FieldError{Pointer: "/limit", Rule: "maximum", Detail: fmt.Sprintf("at most %d", maxClaimLimit)}
	default:
		return checkLabel(in.Worker, "/worker", "worker")
	}
	return refusedField("claim", fe)
}

// oldestFirst sorts effects by when they were recorded, stably, each
// time parsed once: by the time, not the text, since RFC 3339 with its
// trailing zeros cut does not sort as a string within a second. An
// effect whose created_at does not parse comes first.
func oldestFirst(effects []EffectView) {
	type timed struct {
		at time.Time
		e  EffectView
	}
	ts := make([]timed, len(effects))
	for i, e := range effects {
		at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if err != nil {
			at = time.Time{}
		}
		ts[i] = timed{at, e}
	}
	slices.SortStableFunc(ts, func(a, b timed) int { return a.at.Compare(b.at) })
	for i := range ts {
		effects[i] = ts[i].e
	}
}

// EffectsAt returns every effect of view v, sorted by id: what
// ListEffectsIn pages and ExpiredLeases counts, so that a list and its
// ETag share one read. It reads the ids from effectPrefix's place on
// (State.ArtifactsFrom), so a claim in a big context reads its effects,
// not every artifact.
func EffectsAt(v *store.View) ([]EffectView, error) {
	var out []EffectView
	add := func(a *graph.Artifact) error {
		if a.Type != TypeEffect {
			return nil
		}
		e, err := effectView(v, a)
		if err != nil {
			var ae *fault.Error
			if errors.As(err, &ae) {
				return nil // not an outbox effect (written by hand)
			}
			return err
		}
		out = append(out, e)
		return nil
	}
	for a := range v.State.ArtifactsFrom(effectPrefix) {
		if !strings.HasPrefix(a.ID, effectPrefix) {
			break
		}
		if err := add(a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CompleteEffect records that in.Worker sent effect id, with its result.
// Only the worker holding an unexpired lease may complete it (else 409);
// completing again with the same worker and result returns the recorded
// effect.
func (s *Service) CompleteEffect(ctx context.Context, ctxID, id string, in CompleteInput) (*EffectWrite, error) {
	result, err := canonicalPayload(in.Result, "/result")
	if err != nil {
		return nil, err
	}
	return s.finishEffect(ctx, ctxID, id, in.Worker, in.LeaseToken, func(d *EffectData) (bool, error) {
		if d.Status == EffectSent && d.Worker == in.Worker && sameJSON(d.Result, result) {
			return false, nil
		}
		d.Status, d.Result, d.LeaseUntil = EffectSent, result, ""
		return true, nil
	})
}

// FailEffect records a failed attempt by the lease holder: with retry the
// effect returns to pending for another claim, else it is failed. Either
// way attempts grows by one and the error (secret-masked) is kept.
// Failing again with the token of the claim the effect was failed under,
// the same error and the same retry returns the recorded effect (no new
// commit, attempts unchanged), so a worker that lost the answer may send
// the request again.
func (s *Service) FailEffect(ctx context.Context, ctxID, id string, in FailInput) (*EffectWrite, error) {
	msg := truncateChars(s.sanitizeOptions().Mask(in.Error), gate.DefaultMaxErrorChars)
	return s.finishEffect(ctx, ctxID, id, in.Worker, in.LeaseToken, func(d *EffectData) (bool, error) {
		// A repeat: the effect is as this fail left it. A retry clears the
		// worker, so the token (checked against the claim before this
		// version) is what ties the repeat to its claim.
		failed := !in.Retry && d.Status == EffectFailed && d.Worker == in.Worker
		retried := in.Retry && d.Status == EffectPending
		if (failed || retried) && d.Attempts > 0 && d.LastError == msg {
			return false, nil
		}
		d.Attempts++
		d.LastError, d.LeaseUntil = msg, ""
		if in.Retry {
			d.Status, d.Worker = EffectPending, ""
		} else {
			d.Status = EffectFailed
		}
		return true, nil
	})
}

// finishEffect applies change to an effect that worker holds with token,
// under the compare-and-set. change reports false when the effect is
// already in the state asked for (an idempotent repeat, which must present
// the token of the claim that led to it).
//
// A lost compare-and-set reads the effect again. A write that changed it
// for good changes the version the token is checked against, so the next
// round refuses the token (lease-token) or the status (conflict, rule
// claimed); only an effect put back to its claimed version before every
// read (same content hash) keeps the token good, and casAttempts such
// rounds end in 409 conflict "kept changing", rule contended on the
// parameter id. The outbox's own writes never put a version back, so that
// takes a writer beneath the service (TestFinishThatCannotWinNamesTheRule
// plays one through the finishing hook).
func (s *Service) finishEffect(ctx context.Context, ctxID, id, worker, token string, change func(d *EffectData) (bool, error)) (*EffectWrite, error) {
	for range casAttempts {
		if s.finishing != nil {
			s.finishing(false)
		}
		e, err := s.readEffect(ctx, ctxID, id)
		if err != nil {
			return nil, err
		}
		now := s.now()
		d := e.EffectData
		changed, err := change(&d)
		if err != nil {
			return nil, err
		}
		if !changed {
			c, err := s.st.Resolve(ctx, ctxID, "")
			if err != nil {
				return nil, err
			}
			if err := s.heldBefore(ctx, ctxID, c, e, token); err != nil {
				return nil, err
			}
			return &EffectWrite{Effect: e, Commit: c.ID}, nil
		}
		if err := s.holds(ctxID, e, worker, token, now); err != nil {
			return nil, err
		}
		d.UpdatedAt = hashing.FormatTime(now)
		raw, err := canonicalData(d)
		if err != nil {
			return nil, err
		}
		ops := []graph.Op{{Op: graph.OpPut, ID: id, Type: TypeEffect, ProducedBy: "outbox", Data: raw}}
		if s.finishing != nil {
			s.finishing(true)
		}
		res, err := s.commitEffects(ctx, ctxID, worker, "effect "+id+" "+d.Status, ops, map[string]hashing.Digest{id: e.ContentHash})
		if errors.Is(err, errCASConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.countWrite(res.Noop)
		return &EffectWrite{Effect: s.viewOf(id, d, res, now), Commit: res.Commit.ID}, nil
	}
	return nil, &fault.Error{Code: fault.Conflict, Detail: fmt.Sprintf("effect %q kept changing; try again", id),
		Errors: []fault.FieldError{{Parameter: "id", Rule: "contended", Detail: fmt.Sprintf("other writes changed the effect %d times in a row", casAttempts)}}}
}

// leaseToken is the lease token of the claim that wrote the version of
// effect id with content hash claimed (see "Lease tokens" above).
func (s *Service) leaseToken(ctxID, id string, claimed hashing.Digest) string {
	m := hmac.New(sha256.New, s.leaseKey)
	_, _ = m.Write([]byte("artifactd/lease/v1\x00" + ctxID + "\x00" + id + "\x00"))
	_, _ = m.Write(claimed[:])
	return "lease_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkToken compares a presented lease token with the claim's, in
// constant time.
func (s *Service) checkToken(ctxID string, e EffectView, claimed hashing.Digest, token string) error {
	if token == "" {
		return &fault.Error{Code: fault.LeaseToken, Detail: fmt.Sprintf("send the lease_token that the claim of effect %s returned", e.ID),
			Errors: []fault.FieldError{{Pointer: "/lease_token", Rule: "required", Detail: "the claim's lease token"}}}
	}
	if !hmac.Equal([]byte(token), []byte(s.leaseToken(ctxID, e.ID, claimed))) {
		return &fault.Error{Code: fault.LeaseToken, Detail: fmt.Sprintf("the lease_token is not the one of the current claim of effect %s", e.ID),
			Errors: []fault.FieldError{{Pointer: "/lease_token", Rule: "lease", Detail: "not the current claim's token"}}}
	}
	return nil
}

// heldBefore checks, for an idempotent repeat of a finished effect, that
// token is the one of the claim the effect was finished under: the version
// before the current one.
func (s *Service) heldBefore(ctx context.Context, ctxID string, at *replay.Commit, e EffectView, token string) error {
	vs, err := s.st.History(ctx, ctxID, at, e.ID)
	if err != nil {
		return err
	}
	var claimed hashing.Digest
	if len(vs) > 1 {
		claimed = vs[1].ContentHash
	}
	return s.checkToken(ctxID, e, claimed, token)
}

// holds checks that worker holds the lease of e at now, with token.
func (s *Service) holds(ctxID string, e EffectView, worker, token string, now time.Time) error {
	conflict := func(fe fault.FieldError, detail string) error {
		return &fault.Error{Code: fault.Conflict, Detail: detail, Errors: []fault.FieldError{fe}, Extra: map[string]any{"effect": e}}
	}
	if e.Status != EffectClaimed {
		return conflict(fault.FieldError{Parameter: "id", Rule: "claimed", Detail: "the effect is " + e.Status},
			fmt.Sprintf("effect %s is %s, not claimed: only a claimed effect can be completed or failed", e.ID, e.Status))
	}
	if err := s.checkToken(ctxID, e, e.ContentHash, token); err != nil {
		return err
	}
	switch {
	case e.Worker != worker:
		return conflict(fault.FieldError{Pointer: "/worker", Rule: "lease_holder", Detail: "not the worker holding the lease"},
			fmt.Sprintf("effect %s is claimed by another worker", e.ID))
	case leaseExpired(e.EffectData, now):
		return conflict(fault.FieldError{Pointer: "/lease_token", Rule: "lease_expired", Detail: "the lease ended at " + e.LeaseUntil},
			fmt.Sprintf("the lease of effect %s ended at %s; claim it again", e.ID, e.LeaseUntil))
	}
	return nil
}

// canonicalPayload canonicalizes an optional JSON value of a request.
func canonicalPayload(raw json.RawMessage, ptr string) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	c, err := hashing.Canonicalize(raw)
	if err != nil {
		return nil, classifyAt(err, ptr)
	}
	return c, nil
}

func sameJSON(a, b json.RawMessage) bool {
	ca, err1 := canonicalPayload(a, "")
	cb, err2 := canonicalPayload(b, "")
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// mustDecode decodes JSON that the server itself made for schema
// validation (nil, which fails validation, if it does not decode).
func mustDecode(raw []byte) any {
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	return v
}

// ---- handlers ----

// effectCheck is the commit check of outbox writes: effects yes, any other
// reserved type no.
var effectCheck = reservedCheck(TypeEffect)

// Now is the outbox's clock (UTC).
func (s *Service) Now() time.Time { return s.now() }

// ListEffectsIn returns the effects of all (EffectsAt: sorted by id)
// after cursor (an id; "" from the first), at most limit of them (at
// least 1, or an invalid-query error naming limit), each with
// LeaseExpired as of now; status, when set, keeps one status, where a
// claimed effect whose lease has expired counts as pending. more says
// whether effects are left after the last one returned.
func ListEffectsIn(all []EffectView, status, cursor string, limit int, now time.Time) (items []EffectView, more bool, err error) {
	if err := CheckEffectStatus(status); err != nil {
		return nil, false, err
	}
	if limit < 1 {
		// A page of none with more left would give a caller no cursor
		// to go on from.
		return nil, false, &fault.Error{Code: fault.InvalidQuery, Detail: fmt.Sprintf("limit must be at least 1, not %d", limit),
			Errors: []fault.FieldError{{Parameter: "limit", Rule: "minimum", Detail: "at least 1"}}}
	}
	items = []EffectView{}
	for _, e := range all {
		if cursor != "" && e.ID <= cursor {
			continue
		}
		e.LeaseExpired = leaseExpired(e.EffectData, now)
		effective := e.Status
		if e.LeaseExpired {
			effective = EffectPending
		}
		if status != "" && effective != status {
			continue
		}
		if len(items) == limit {
			return items, true, nil
		}
		items = append(items, e)
	}
	return items, false, nil
}

// ExpiredLeases returns how many of effects all (EffectsAt) are claimed with a
// lease that has passed as of now (or whose lease_until does not parse,
// which counts as passed). It is all that ListEffectsIn's answer over them
// depends on of the clock: the effects claimed at v have fixed leases,
// and they pass in the order of their lease_until, so the number that
// has passed says which have. A read keyed on it (the list's ETag)
// changes when a lease passes, not when the clock merely moves.
func ExpiredLeases(all []EffectView, now time.Time) int {
	n := 0
	for _, e := range all {
		if leaseExpired(e.EffectData, now) {
			n++
		}
	}
	return n
}

// CheckEffectStatus refuses a status filter that is none of the four
// (an invalid-query error naming the parameter status); "" keeps all.
func CheckEffectStatus(status string) error {
	switch status {
	case "", EffectPending, EffectClaimed, EffectSent, EffectFailed:
		return nil
	}
	return &fault.Error{Code: fault.InvalidQuery, Detail: "status must be pending, claimed, sent or failed",
		Errors: []fault.FieldError{{Parameter: "status", Rule: "enum", Detail: "want pending, claimed, sent or failed"}}}
}

// CheckOutboxReset refuses, with a 409 naming /to (rule outbox), a move
// of branch to commit to that would take an effect of the outbox back:
// every effect at the branch's head that a claim has reached (claimed,
// sent, failed, or pending again after a failed attempt) must be at to
// as it is, or the next claim would send it again. The outbox works on
// the default branch; other branches are not checked (head is then the
// zero digest). It returns the head it checked, which the move must
// expect. Errors are *fault.Error values.
func (s *Service) CheckOutboxReset(ctx context.Context, ctxID, branch string, to *replay.Commit) (head hashing.Digest, err error) {
	head, behind, err := s.outboxBehind(ctx, ctxID, branch, to)
	if err != nil || len(behind) == 0 {
		return head, err
	}
	return hashing.Digest{}, &fault.Error{Code: fault.Conflict,
		Detail: fmt.Sprintf("moving %s to %s would take %d effect(s) of the outbox back to before a claim, and the next claim would send them again: move it to a commit that holds them as they are, write on another branch, or, to have them sent again on purpose, reset with forget_effects", branch, to.ID.Short(), len(behind)),
		Errors: []fault.FieldError{{Pointer: "/to", Rule: "outbox", Detail: "holds an effect of the outbox as it was before a claim, or not at all"}},
		Extra:  map[string]any{"effects": behind}}
}

// outboxBehind returns the head of branch it checked and the effects
// there that a claim has reached and that to does not hold as they are
// (CheckOutboxReset); none, and the zero head, for a branch other than
// the default one.
func (s *Service) outboxBehind(ctx context.Context, ctxID, branch string, to *replay.Commit) (head hashing.Digest, behind []string, err error) {
	if branch != store.DefaultBranch {
		return hashing.Digest{}, nil, nil
	}
	var reached []EffectView
	err = s.st.Read(ctx, ctxID, branch, func(v *store.View) error {
		head = v.Commit.ID
		all, err := EffectsAt(v)
		for _, e := range all {
			if e.Status != EffectPending || e.Attempts > 0 {
				reached = append(reached, e)
			}
		}
		return err
	})
	if err != nil || len(reached) == 0 {
		return head, nil, err
	}
	// One view of to for all of them, reading their entries, not their
	// payloads: what a claim reached must be there as it is.
	err = s.st.ReadSparse(ctx, ctxID, to, func(v *store.View) error {
		for _, e := range reached {
			if a := v.State.Artifact(e.ID); a == nil || a.Type != TypeEffect || a.ContentHash != e.ContentHash {
				behind = append(behind, e.ID)
			}
		}
		return nil
	})
	if err != nil {
		return hashing.Digest{}, nil, err
	}
	return head, behind, nil
}
