package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// CheckRef validates a commit or branch reference typed by a client
// (?at=, ?from=, a cursor…) named name: "" is the default branch. The
// error is an invalid-ref *fault.Error naming the parameter.
func CheckRef(name, v string) error {
	if v == "" || store.ValidateBranch(v) == nil {
		return nil
	}
	if _, err := hashing.HexPrefix(v); err == nil {
		return nil
	}
	return &fault.Error{Code: fault.InvalidRef,
		Detail: fmt.Sprintf("%s=%q is neither a branch name nor a commit id (sha256:<hex>, bare hex, or a unique prefix of at least 8 hex digits)", name, v),
		Errors: []fault.FieldError{{Parameter: name, Rule: "ref", Detail: "not a branch name or commit id"}}}
}

// PointTo moves a query-parameter problem to a body pointer (an invalid
// ref in a body is a validation error).
func PointTo(err error, ptr string) error {
	if e, ok := err.(*fault.Error); ok {
		for i := range e.Errors {
			e.Errors[i].Parameter, e.Errors[i].Pointer = "", ptr
		}
		if e.Code == fault.InvalidRef {
			e.Code = fault.Invalid
		}
	}
	return err
}

// ExistsAt is err, when it says that what a request creates exists
// (store.ErrExists), as a 409 naming the field of the request that names
// it (ptr, a JSON pointer) with rule "unique"; any other error is
// returned as it is.
func ExistsAt(err error, ptr string) error {
	if !errors.Is(err, store.ErrExists) {
		return err
	}
	return &fault.Error{Code: fault.Exists, Detail: stripSentinel(err),
		Errors: []fault.FieldError{{Pointer: ptr, Rule: "unique", Detail: "already exists; choose another"}}}
}

// RefAt is the error of resolving the ref a body gives in member: an
// ambiguous prefix or a ref that names nothing names the member
// (NameRef), and every field error points at /member (PointTo).
func RefAt(err error, member string) error {
	return PointTo(NameRef(err, member), "/"+member)
}

// RuleExists is the rule of a not-found refusal's errors entry: the
// branch, commit, artifact, effect, type or relation that the field or
// parameter names must exist.
const RuleExists = "exists"

// NotFoundParam is the not-found refusal, with detail, of what path or
// query parameter param names: its errors entry names param, rule
// exists.
func NotFoundParam(param, detail string) *fault.Error {
	return &fault.Error{Code: fault.NotFound, Detail: detail,
		Errors: []fault.FieldError{{Parameter: param, Rule: RuleExists, Detail: "no such " + param + " here"}}}
}

// ResolveRef resolves ref, a branch name or commit id that a request
// body gives in member ("" is the default branch), in context ctxID. A
// ref that is neither is a validation error at /member; one that is
// ambiguous names the member (RefAt); one that names no branch or commit
// of the context is a not-found at /member, rule exists.
func (s *Service) ResolveRef(ctx context.Context, ctxID, ref, member string) (*replay.Commit, error) {
	if err := CheckRef(member, ref); err != nil {
		return nil, PointTo(err, "/"+member)
	}
	c, err := s.st.Resolve(ctx, ctxID, ref)
	if err != nil {
		return nil, RefAt(err, member)
	}
	return c, nil
}

// branchMissingAt is err, when it is a not-found of a write on branch
// (given in the body at ptr; "" is the default branch) and the context
// has no such branch, as the not-found of ptr, rule exists (the branch
// list read shows that the context exists).
func (s *Service) branchMissingAt(ctx context.Context, ctxID, branch, ptr string, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if branch == "" {
		branch = store.DefaultBranch
	}
	bs, berr := s.st.Branches(ctx, ctxID)
	if berr != nil {
		return err // the context itself is missing, or unreadable
	}
	for _, b := range bs {
		if b.Name == branch {
			return err // what is missing is something else
		}
	}
	e := Classify(err)
	if e.Code != fault.NotFound || len(e.Errors) > 0 {
		return err
	}
	e.Errors = []fault.FieldError{{Pointer: ptr, Rule: RuleExists, Detail: "the context has no branch of this name"}}
	return e
}

// RuleHead is the rule of a stale-parent refusal's errors entry: the
// expected parent must be the branch head.
const RuleHead = "head"

// staleAt is err, a stale-parent refusal, naming where the request gave
// the parent it expected: the body's /parent, or (ifMatch) the If-Match
// header. Any other error is returned as it is.
func staleAt(err error, ifMatch bool) error {
	if !errors.Is(err, store.ErrStale) {
		if e, ok := fault.As(err); !ok || e.Code != fault.Stale {
			return err
		}
	}
	e := Classify(err)
	fe := fault.FieldError{Pointer: "/parent", Rule: RuleHead, Detail: "not the branch head; head names the current one"}
	if ifMatch {
		fe.Pointer, fe.Parameter = "", "If-Match"
	}
	e.Errors = []fault.FieldError{fe}
	return e
}

// checkBranchField refuses a branch named in a write's body that is not a
// branch name (422 naming ptr), rather than looking it up and answering
// that no such branch exists; "" (the default, main) passes.
func checkBranchField(branch, ptr string) error {
	if branch == "" || store.ValidateBranch(branch) == nil {
		return nil
	}
	return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("%q is not a branch name", branch),
		Errors: []fault.FieldError{{Pointer: ptr, Rule: "pattern", Detail: "1-100 of [A-Za-z0-9._/-], starting with a letter, digit or _"}}}
}

// checkLabel refuses a producer or author name that would not read as it
// renders (graph.CheckLabel: a control, invisible or look-alike
// character), with a validation error naming the field at ptr: the UI,
// logs and audits show such names, and two that look alike must be one.
// Names already in history are not checked again.
func checkLabel(name, ptr, what string) error {
	rule, detail := graph.CheckLabel(name)
	if rule == "" {
		return nil
	}
	return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("%s %q %s", what, name, detail),
		Errors: []fault.FieldError{{Pointer: ptr, Rule: rule, Detail: detail}}}
}

// ResetResult is what a branch reset did: branch Name now at Head, which
// was at Previous.
type ResetResult struct {
	Name     string         `json:"name"`
	Head     hashing.Digest `json:"head"`
	Previous hashing.Digest `json:"previous"`
	// ForgottenEffects are the effects of the outbox the reset took back
	// to before a claim (ResetInput.ForgetEffects), which the next claim
	// sends again.
	ForgottenEffects []string `json:"forgotten_effects,omitempty"`
}

// ResetInput is a branch reset: the commit To names (a branch name or a
// commit id), the head Parent expects when set, and ForgetEffects.
type ResetInput struct {
	To     string
	Parent *hashing.Digest
	// ParentIfMatch says that Parent came from an If-Match header, not a
	// body's parent: a stale-parent refusal names the header.
	ParentIfMatch bool
	// ForgetEffects lets the default branch move back past claims of the
	// outbox: the effects a claim reached that the target does not hold
	// as they are are forgotten, and the next claim sends them again. An
	// operator's deliberate rollback; it is logged with the effects.
	ForgetEffects bool
}

// ResetBranch moves branch of context ctxID to the commit in.To names: a
// checkout or a rollback; the commits left behind stay readable by id.
// in.Parent, when set, must be the branch's head. The default branch is
// the outbox's, and may not move back past a claim (CheckOutboxReset)
// unless in.ForgetEffects; its move then expects the head that was
// checked, and the store checks the head again as it moves the ref.
// Errors are *fault.Error values (not-found for the branch, stale-parent
// with the head in Extra, a validation error or conflict naming /to) or
// the store's.
func (s *Service) ResetBranch(ctx context.Context, ctxID, branch string, in ResetInput) (ResetResult, error) {
	if store.ValidateBranch(branch) != nil {
		return ResetResult{}, NotFoundParam("branch", fmt.Sprintf("no branch %q", branch))
	}
	target, err := s.ResolveRef(ctx, ctxID, in.To, "to")
	if err != nil {
		return ResetResult{}, err
	}
	bs, err := s.st.Branches(ctx, ctxID)
	if err != nil {
		return ResetResult{}, err
	}
	var prev *hashing.Digest
	for _, b := range bs {
		if b.Name == branch {
			prev = &b.Head
		}
	}
	if prev == nil {
		return ResetResult{}, NotFoundParam("branch", fmt.Sprintf("no branch %q in context %q", branch, ctxID))
	}
	parent := in.Parent
	stale := func(head hashing.Digest) error {
		e := staleAt(&fault.Error{Code: fault.Stale, Detail: fmt.Sprintf("parent %s is not the head of %q", parent.Short(), branch)}, in.ParentIfMatch).(*fault.Error)
		e.Extra = map[string]any{"head": head}
		return e
	}
	if parent != nil && *parent != *prev {
		return ResetResult{}, stale(*prev)
	}
	var checked hashing.Digest
	var forgotten []string
	if in.ForgetEffects {
		if checked, forgotten, err = s.outboxBehind(ctx, ctxID, branch, target); err != nil {
			return ResetResult{}, err
		}
	} else if checked, err = s.CheckOutboxReset(ctx, ctxID, branch, target); err != nil {
		return ResetResult{}, err
	}
	if !checked.IsZero() {
		if parent != nil && *parent != checked {
			return ResetResult{}, stale(checked)
		}
		parent, prev = &checked, &checked
	}
	if err := s.st.ResetBranchIf(ctx, ctxID, branch, target.ID, parent); err != nil {
		if in.Parent == nil {
			// The head the outbox check read moved: the request gave no
			// parent to name.
			return ResetResult{}, err
		}
		return ResetResult{}, staleAt(err, in.ParentIfMatch)
	}
	if len(forgotten) > 0 {
		s.log.LogAttrs(ctx, slog.LevelWarn, "branch reset forgot effects of the outbox; the next claim sends them again",
			slog.String("context", ctxID), slog.String("branch", branch), slog.String("from", prev.String()),
			slog.String("to", target.ID.String()), slog.Any("effects", forgotten))
	}
	return ResetResult{Name: branch, Head: target.ID, Previous: *prev, ForgottenEffects: forgotten}, nil
}
