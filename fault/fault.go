package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Code names the kind of an error. Its values are a closed set (Codes);
// each is the last part of a problem type URI and the door maps it to one
// status.
type Code string

// The closed set of codes. The names say what went wrong; the values are
// the wire names of the problem types and never change.
const (
	// Invalid: a request that breaks a rule of its schema or of the domain.
	Invalid Code = "validation"
	// MalformedJSON: a body that is not JSON.
	MalformedJSON Code = "malformed-json"
	// NonCanonicalJSON: JSON that cannot be canonicalized without loss.
	NonCanonicalJSON Code = "non-canonical-json"
	// InvalidQuery: a query parameter out of its range or set.
	InvalidQuery Code = "invalid-query"
	// InvalidRef: neither a branch name nor a commit id.
	InvalidRef Code = "invalid-ref"
	// AmbiguousRef: a commit prefix that matches several commits.
	AmbiguousRef Code = "ambiguous-ref"
	// Unauthorized: no token, or an unknown one.
	Unauthorized Code = "unauthorized"
	// Forbidden: a token that does not grant the access.
	Forbidden Code = "forbidden"
	// NotFound: no such context, commit, branch, artifact or blob.
	NotFound Code = "not-found"
	// MethodNotAllowed: a route that does not take this method.
	MethodNotAllowed Code = "method-not-allowed"
	// Stale: a parent that is no longer the branch head.
	Stale Code = "stale-parent"
	// Quarantined: a write that rests on an unconfirmed artifact.
	Quarantined Code = "quarantined"
	// Exists: a create of something that is already there.
	Exists Code = "exists"
	// Conflict: a write that lost a compare-and-set, or a state clash.
	Conflict Code = "conflict"
	// MergeConflict: a merge with unresolved conflicts.
	MergeConflict Code = "merge-conflict"
	// TooLarge: a body or a write over its limit.
	TooLarge Code = "payload-too-large"
	// UnsupportedMedia: a body of another content type than JSON.
	UnsupportedMedia Code = "unsupported-media-type"
	// DanglingEdge: an edge to or from an artifact that does not exist.
	DanglingEdge Code = "dangling-edge"
	// DependencyCycle: dependency edges that would close a cycle.
	DependencyCycle Code = "dependency-cycle"
	// UnknownType: an artifact type that is not registered.
	UnknownType Code = "unknown-type"
	// ReservedType: a type only a gate or outbox path may write.
	ReservedType Code = "reserved-type"
	// InvalidSchema: a type schema that does not compile or costs too much.
	InvalidSchema Code = "invalid-schema"
	// Internal: anything else; its cause is logged, never shown.
	Internal Code = "internal"
	// Unavailable: shutting down, cancelled, or refusing writes.
	Unavailable Code = "unavailable"
	// RequestTimeout: a body that did not arrive in time.
	RequestTimeout Code = "request-timeout"
	// HeadersTooLarge: request line and headers over their limit.
	HeadersTooLarge Code = "headers-too-large"
	// HostNotAllowed: a Host an open server does not serve.
	HostNotAllowed Code = "host-not-allowed"
	// CrossOrigin: a browser write from an origin not allowed.
	CrossOrigin Code = "cross-origin"
	// Overloaded: no slot for another large body now.
	Overloaded Code = "overloaded"
	// LeaseToken: a missing or wrong effect lease token.
	LeaseToken Code = "lease-token"
	// Corrupt: stored records that do not verify (ErrCorrupt).
	Corrupt Code = "store-corrupt"
	// NoSpace: not enough free disk space for writes.
	NoSpace Code = "insufficient-storage"
	// Pruned: a blob removed after its retention window.
	Pruned Code = "blob-pruned"
	// Locked: a data directory another process holds.
	Locked Code = "locked"
	// PreconditionFailed: a read whose If-Match names no entity tag of
	// its current representation.
	PreconditionFailed Code = "precondition-failed"
	// OutcomeUnknown: a write whose commit was sent to the database and
	// whose answer was lost; it may or may not have landed.
	OutcomeUnknown Code = "commit-outcome-unknown"
)

// Codes returns every code, in the order of the constants.
func Codes() []Code {
	return []Code{Invalid, MalformedJSON, NonCanonicalJSON, InvalidQuery, InvalidRef, AmbiguousRef,
		Unauthorized, Forbidden, NotFound, MethodNotAllowed, Stale, Quarantined, Exists, Conflict,
		MergeConflict, TooLarge, UnsupportedMedia, DanglingEdge, DependencyCycle, UnknownType,
		ReservedType, InvalidSchema, Internal, Unavailable, RequestTimeout, HeadersTooLarge,
		HostNotAllowed, CrossOrigin, Overloaded, LeaseToken, Corrupt, NoSpace, Pruned, Locked,
		PreconditionFailed, OutcomeUnknown}
}

// FieldError is one entry of an error's field list: where in the request
// (a JSON pointer into the body, or a query, path or header parameter),
// which rule, and what is wrong.
type FieldError struct {
	Pointer   string `json:"pointer"`
	Parameter string `json:"parameter,omitempty"`
	Rule      string `json:"rule"`
	Detail    string `json:"detail"`
}

// MarshalJSON writes "pointer" for body errors and "parameter" (without a
// pointer) for query, path and header errors, without HTML escaping.
func (f FieldError) MarshalJSON() ([]byte, error) {
	if f.Parameter != "" {
		return encode(struct {
			Parameter string `json:"parameter"`
			Rule      string `json:"rule"`
			Detail    string `json:"detail"`
		}{f.Parameter, f.Rule, f.Detail})
	}
	type plain FieldError
	return encode(plain(f))
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Error is an error of the vocabulary: a code, a detail safe to show, the
// fields it is about, extension members, and the cause.
type Error struct {
	Code   Code
	Detail string
	Errors []FieldError
	// Extra holds problem extension members (tainted_by, head, cycle…).
	Extra map[string]any
	// Err is the cause, logged for internal errors and never shown.
	Err error
}

// Error returns the code and the detail (the cause for internal errors).
func (e *Error) Error() string {
	if e.Err != nil && e.Code == Internal {
		return string(e.Code) + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Detail
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Pointer returns the first field's JSON pointer (or parameter), "" when
// the error names no field.
func (e *Error) Pointer() string {
	if len(e.Errors) == 0 {
		return ""
	}
	if f := e.Errors[0]; f.Parameter != "" {
		return f.Parameter
	}
	return e.Errors[0].Pointer
}

// Errorf returns an *Error of code with a formatted detail.
func Errorf(code Code, format string, a ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, a...)}
}

// Field returns an *Error of code about one body field: pointer, rule and
// detail (also the field's detail).
func Field(code Code, pointer, rule, detail string) *Error {
	return &Error{Code: code, Detail: detail, Errors: []FieldError{{Pointer: pointer, Rule: rule, Detail: detail}}}
}

// ErrCorrupt is the one corruption marker: errors.Is(err, ErrCorrupt)
// holds for every error that reports stored records that do not verify,
// whichever layer found it.
var ErrCorrupt = errors.New("corrupt")

// Corruption returns a sentinel error with message msg that is itself
// (errors.Is by identity) and is marked as corruption (errors.Is(err,
// ErrCorrupt)). The store, the storage seam and the core make their
// corruption sentinels with it, so their messages stay as they were.
func Corruption(msg string) error { return &corruption{msg: msg} }

type corruption struct{ msg string }

func (c *corruption) Error() string        { return c.msg }
func (c *corruption) Is(target error) bool { return target == ErrCorrupt }

// IsCorrupt reports whether err is marked as corruption.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// As returns err as an *Error when it is or wraps one.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// PointerToken escapes s as one reference token of a JSON pointer (RFC
// 6901 section 3): "~" as "~0", then "/" as "~1". Pointers into a body, a
// schema or a data diff are built with it.
func PointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
