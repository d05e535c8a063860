package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
)

// canonRules names the rule of each canonicalisation refusal.
var canonRules = []struct {
	err  error
	rule string
}{
	{hashing.ErrSyntax, "syntax"},
	{hashing.ErrDuplicateKey, "duplicate_key"},
	{hashing.ErrInvalidUTF8, "invalid_utf8"},
	{hashing.ErrLoneSurrogate, "lone_surrogate"},
	{hashing.ErrNonFinite, "non_finite"},
	{hashing.ErrUnsafeInteger, "unsafe_integer"},
	{hashing.ErrTooDeep, "too_deep"},
	{hashing.ErrNotObject, "not_object"},
}

// CorruptDetail is the detail of every corrupt problem. It names no
// record: the one that does not verify may be another context's (once a
// read found it, every write is refused with it), and the caller's token
// may not cover that context. The error itself, which names it, is for
// the server log and `artifactd fsck`.
const CorruptDetail = "the stored records do not verify and the server stopped taking writes; stop it and run `artifactd fsck` on its data directory (the server log names the record)"

// NotWrittenDetail is the detail of every write refused because the
// storage driver could not run it (kv.ErrNotWritten): no commit of it was
// made — a commit's own batch was not written, or the records or hold
// before it were not all put or taken — and sending it again is safe:
// 503 unavailable.
const NotWrittenDetail = "the write did not complete and no commit of it was made (the database could not be reached, or rolled it back each time it ran); send it again later"

// OutcomeUnknownDetail is the detail of every commit-outcome-unknown
// problem: the write may have landed, and only what it changes tells.
const OutcomeUnknownDetail = "the write was sent to the database and its answer was lost, so it may or may not have been made; read the branch head (or what else the write changes) before retrying, and retry a commit with the head you read as its parent, so that one that landed is refused as stale rather than applied twice"

// Classify is the one function that maps any error to the vocabulary: a
// *fault.Error passes through; the typed errors and sentinels of hashing,
// graph, replay, gate, store and store/kv get their code here (every
// corruption, whichever layer found it, by the one marker
// fault.ErrCorrupt); a cancelled context is unavailable; anything else is
// internal. It never returns nil for a non-nil err. The door adds only its
// own transport errors (body limits and deadlines) before calling it.
func Classify(err error) *fault.Error {
	var e *fault.Error
	if errors.As(err, &e) {
		return e
	}
	var ce *hashing.CanonError
	if errors.As(err, &ce) {
		rule := "canonical_json"
		for _, cr := range canonRules {
			if errors.Is(ce.Err, cr.err) {
				rule = cr.rule
			}
		}
		code := fault.NonCanonicalJSON
		if rule == "syntax" {
			code = fault.MalformedJSON
		}
		return &fault.Error{Code: code, Detail: ce.Error(), Errors: []fault.FieldError{{Pointer: ce.Pointer, Rule: rule, Detail: ce.Detail}}}
	}
	var te *graph.TaintError
	if errors.As(err, &te) {
		return &fault.Error{Code: fault.Quarantined, Detail: te.Error(), Extra: map[string]any{"tainted_by": taintView(te)}}
	}
	var cy *graph.CycleError
	if errors.As(err, &cy) {
		return &fault.Error{Code: fault.DependencyCycle, Detail: cy.Error(), Extra: map[string]any{"cycle": cy.Cycle}}
	}
	var oe *graph.OpError
	if errors.As(err, &oe) {
		code := fault.Invalid
		if errors.Is(oe, graph.ErrDangling) {
			code = fault.DanglingEdge
		}
		rule := oe.Rule
		if rule == "" {
			rule = "invalid"
		}
		return &fault.Error{Code: code, Detail: oe.Detail, Errors: []fault.FieldError{{Pointer: oe.Field, Rule: rule, Detail: oe.Detail}}}
	}
	var mc *replay.ConflictError
	if errors.As(err, &mc) {
		return &fault.Error{Code: fault.MergeConflict, Detail: fmt.Sprintf("%d unresolved conflict(s); nothing was changed: settle each with a resolution keyed by its key", len(mc.Conflicts)),
			Extra: map[string]any{"conflicts": mc.Conflicts}}
	}
	var ve *gate.VerdictError
	if errors.As(err, &ve) {
		return verdictError(ve.Pointer, ve.Rule, ve.Detail)
	}
	var se *gate.SecretError
	if errors.As(err, &se) {
		return &fault.Error{Code: fault.Invalid, Detail: "refused secret: " + se.Reason,
			Errors: []fault.FieldError{{Pointer: fmt.Sprintf("/secrets/%d", se.Index), Rule: "secret", Detail: se.Reason}}}
	}
	var hb *store.HexBranchError
	if errors.As(err, &hb) {
		// Each refused branch, by its place in the bundle header's
		// branches, with the rule POST …/branches reports for /name.
		fields := make([]fault.FieldError, len(hb.Branches))
		for i, br := range hb.Branches {
			fields[i] = fault.FieldError{Pointer: fmt.Sprintf("/branches/%d/name", br.Index), Rule: store.NotCommitIDRule,
				Detail: fmt.Sprintf("branch name %q must be %s", br.Name, store.CommitIDRule)}
		}
		return &fault.Error{Code: fault.Invalid, Detail: stripSentinel(hb), Errors: fields}
	}
	var pruned *store.PrunedError
	switch {
	case errors.Is(err, replay.ErrResolution), errors.Is(err, replay.ErrNoMergeBase):
		return &fault.Error{Code: fault.Invalid, Detail: err.Error()}
	case errors.Is(err, store.ErrStale):
		return &fault.Error{Code: fault.Stale, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrNotFound), errors.Is(err, graph.ErrNotFound):
		return &fault.Error{Code: fault.NotFound, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrExists):
		return &fault.Error{Code: fault.Exists, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrAmbiguous):
		return &fault.Error{Code: fault.AmbiguousRef, Detail: stripSentinel(err)}
	case errors.Is(err, store.ErrInvalid):
		return &fault.Error{Code: fault.Invalid, Detail: stripSentinel(err)}
	case errors.As(err, &pruned):
		return &fault.Error{Code: fault.Pruned, Detail: pruned.Error() + "; the artifact that names it keeps its digest", Extra: map[string]any{"pruned_at": pruned.PrunedAt}}
	case errors.Is(err, store.ErrNoSpace):
		return &fault.Error{Code: fault.NoSpace, Detail: err.Error() + "; reads go on", Err: err}
	case fault.IsCorrupt(err):
		return &fault.Error{Code: fault.Corrupt, Detail: CorruptDetail, Err: err}
	case errors.Is(err, kv.ErrOutcomeUnknown):
		// Before the cancelled-context case: a COMMIT that got no answer
		// in time wraps a deadline too.
		return &fault.Error{Code: fault.OutcomeUnknown, Detail: OutcomeUnknownDetail, Err: err}
	case errors.Is(err, kv.ErrNotWritten):
		// Before the cancelled-context case: the driver's last failure
		// may wrap a deadline of its own.
		return &fault.Error{Code: fault.Unavailable, Detail: NotWrittenDetail, Err: err}
	case errors.Is(err, store.ErrWriteFailed):
		return &fault.Error{Code: fault.Unavailable, Detail: "the store stopped taking writes after a write failure; restart artifactd and run fsck", Err: err}
	case errors.Is(err, store.ErrLocked):
		return &fault.Error{Code: fault.Locked, Detail: "the data directory is held by another process (a running artifactd serve): stop it, or talk to it with --server", Err: err}
	case errors.Is(err, kv.ErrConflict):
		return &fault.Error{Code: fault.Conflict, Detail: "another writer moved the ref first; read again and retry", Err: err}
	case errors.Is(err, kv.ErrTooLarge):
		return &fault.Error{Code: fault.TooLarge, Detail: "the write is too large for one atomic commit of the storage driver; split it into smaller commits", Err: err}
	case errors.Is(err, gate.ErrRules), errors.Is(err, gate.ErrUnknownRuleset), errors.Is(err, gate.ErrVerdict), errors.Is(err, gate.ErrBadSecret):
		return &fault.Error{Code: fault.Invalid, Detail: err.Error(), Err: err}
	case errors.Is(err, store.ErrClosed), errors.Is(err, kv.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &fault.Error{Code: fault.Unavailable, Detail: "the server is shutting down or the request was cancelled", Err: err}
	}
	// kv.ErrNotFound and kv.ErrInvalid stay inside the store, which turns
	// them into its own sentinels; one that escapes is a bug: internal.
	return &fault.Error{Code: fault.Internal, Err: err}
}

// stripSentinel returns the message of a store error, which names only
// what the client sent (ids, refs) and never internal state.
func stripSentinel(err error) string {
	msg := err.Error()
	for _, s := range []error{store.ErrNotFound, store.ErrExists, store.ErrStale, store.ErrInvalid, store.ErrAmbiguous} {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	return msg
}

// TaintView is the tainted_by member of a quarantine refusal (409) and of
// the flags a write gets in observe mode.
type TaintView struct {
	Edge    graph.EdgeKey `json:"edge"`
	Roots   []string      `json:"roots"`
	Reasons []string      `json:"reasons"`
	Path    []string      `json:"path"`
}

func taintView(te *graph.TaintError) TaintView {
	return TaintView{Edge: te.Edge, Roots: nonNil(te.Roots), Reasons: nonNil(te.Reasons), Path: nonNil(te.Path)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
