package pgkv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/artifactd/artifactd/store/kv"
)

// unsent is the error pgx returns for a message it could not send at all
// (the connection had failed already): safe to retry.
type unsent struct{}

func (unsent) Error() string     { return "write failed: connection reset by peer" }
func (unsent) SafeToRetry() bool { return true }

// TestSettleNothingSent: a COMMIT that pgx could not send at all (the
// connection reset between the batch and the COMMIT) left nothing on the
// server to commit: settle says the link failed — so the driver's Commit
// runs the transaction again, and a hold's says nothing was written —
// rather than return the raw error, which the store took for a write
// failure and stopped taking writes until a restart.
func TestSettleNothingSent(t *testing.T) {
	d := &Driver{commitWait: time.Second, resolveFloor: time.Millisecond}
	err := d.settle(context.Background(), 42, func(context.Context) error { return unsent{} })
	if !errors.Is(err, errLinkFailed) || !retryable(err) || errors.Is(err, kv.ErrOutcomeUnknown) {
		t.Fatalf("settle of a COMMIT pgx could not send: %v, want errLinkFailed (retryable, outcome known)", err)
	}
}

// TestResolveGivesUpOnAnAnswerThatCannotChange: a status question the
// server refuses for good — no txid_status on the engine (42883), or an
// id it calls in the future (22023, a server other than the one that ran
// the transaction) — says the outcome is unknown at once instead of
// asking again for the whole wait while the group waits.
func TestResolveGivesUpOnAnAnswerThatCannotChange(t *testing.T) {
	for _, code := range []string{"42883", "22023"} {
		refused := &pgconn.PgError{Severity: "ERROR", Code: code, Message: "refused"}
		if !errors.As(error(refused), new(*pgconn.PgError)) {
			t.Fatal("a PgError is not one")
		}
		if !answerFinal(refused) {
			t.Errorf("a txid_status refused with %s: asked again, want given up on", code)
		}
	}
	if answerFinal(errors.New("dial tcp: connection refused")) {
		t.Error("a question that failed to reach the server: given up on, want asked again")
	}
}
