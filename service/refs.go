package service

import (
	"fmt"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/hashing"
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
