package httpapi

import (
	"testing"

	"github.com/artifactd/artifactd/fault"
)

// TestProblemTable: the one mapping of the vocabulary to HTTP has a row for
// every code of package fault, and the API's code names are fault's.
func TestProblemTable(t *testing.T) {
	for _, c := range fault.Codes() {
		if _, ok := problemTable[c]; !ok {
			t.Errorf("no HTTP status for code %q", c)
		}
	}
	if len(problemTable) != len(fault.Codes()) {
		t.Errorf("problemTable has %d rows for %d codes", len(problemTable), len(fault.Codes()))
	}
	for name, pair := range map[string][2]fault.Code{
		"invalid": {CodeValidation, fault.Invalid}, "not-found": {CodeNotFound, fault.NotFound},
		"exists": {CodeExists, fault.Exists}, "stale": {CodeStaleParent, fault.Stale},
		"quarantined": {CodeQuarantined, fault.Quarantined}, "too-large": {CodeTooLarge, fault.TooLarge},
		"pruned": {CodeGone, fault.Pruned}, "no-space": {CodeNoSpace, fault.NoSpace},
		"unavailable": {CodeUnavailable, fault.Unavailable}, "corrupt": {CodeStoreCorrupt, fault.Corrupt},
		"internal": {CodeInternal, fault.Internal}, "locked": {CodeLocked, fault.Locked},
		"lease": {CodeLeaseToken, fault.LeaseToken}, "conflict": {CodeConflict, fault.Conflict},
		"outcome-unknown": {CodeOutcomeUnknown, fault.OutcomeUnknown},
		"precondition":    {CodePreconditionFailed, fault.PreconditionFailed},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: httpapi says %q, fault %q", name, pair[0], pair[1])
		}
	}
	// The statuses every client depends on.
	for code, want := range map[fault.Code]int{
		fault.Invalid: 422, fault.NotFound: 404, fault.Exists: 409, fault.Stale: 409, fault.Quarantined: 409,
		fault.TooLarge: 413, fault.Pruned: 410, fault.NoSpace: 507, fault.Unavailable: 503, fault.Corrupt: 500,
		fault.Internal: 500, fault.Locked: 423, fault.MalformedJSON: 400, fault.Unauthorized: 401, fault.Forbidden: 403,
		fault.OutcomeUnknown: 503, fault.PreconditionFailed: 412,
	} {
		if got := StatusOf(code); got != want {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, want)
		}
	}
	if StatusOf("no-such-code") != 500 || TitleOf("no-such-code") != "Internal server error" {
		t.Error("an unknown code must map to 500 internal")
	}
}
