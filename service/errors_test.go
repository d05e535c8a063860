package service

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/store/kv"
)

// TestClassifyOutcomeUnknown: a commit whose outcome the driver does not
// know is commit-outcome-unknown, with the one detail that says to read
// the branch head before retrying — also when the lost answer is a
// deadline (no answer to COMMIT in time), which would otherwise read as
// a cancelled request.
func TestClassifyOutcomeUnknown(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("write commits: pgkv: commit: %w: the connection failed before the answer to COMMIT came: %w", kv.ErrOutcomeUnknown, errors.New("unexpected EOF")),
		fmt.Errorf("write commits: pgkv: commit: %w: no answer to COMMIT within 30s: %w", kv.ErrOutcomeUnknown, context.DeadlineExceeded),
	} {
		e := Classify(err)
		if e.Code != fault.OutcomeUnknown || e.Detail != OutcomeUnknownDetail || !errors.Is(e, kv.ErrOutcomeUnknown) {
			t.Errorf("Classify(%q) = %s (%q), want %s keeping the cause", err, e.Code, e.Detail, fault.OutcomeUnknown)
		}
	}
}

// TestClassifyNotWritten: a write the storage driver knows it did not
// make (kv.ErrNotWritten, the database unreachable) is unavailable, with
// the detail that says nothing was written — also when the driver's last
// failure wraps a deadline.
func TestClassifyNotWritten(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("write commits: pgkv: commit: %w: the connection failed before COMMIT was sent: %w", kv.ErrNotWritten, errors.New("unexpected EOF")),
		fmt.Errorf("write commits: pgkv: commit: %w: failed to connect: %w", kv.ErrNotWritten, context.DeadlineExceeded),
	} {
		e := Classify(err)
		if e.Code != fault.Unavailable || e.Detail != NotWrittenDetail || !errors.Is(e, kv.ErrNotWritten) {
			t.Errorf("Classify(%q) = %s (%q), want %s keeping the cause", err, e.Code, e.Detail, fault.Unavailable)
		}
	}
}
