package httpapi

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// answerLosingDriver commits its armed Commit and then answers
// kv.ErrOutcomeUnknown, as a database driver does whose connection broke
// after the server committed and before its answer arrived.
type answerLosingDriver struct {
	*memkv.Driver
	armed atomic.Bool
}

func (d *answerLosingDriver) Commit(ctx context.Context, b kv.Batch) error {
	if !d.armed.Swap(false) {
		return d.Driver.Commit(ctx, b)
	}
	if err := d.Driver.Commit(ctx, b); err != nil {
		return err
	}
	return fmt.Errorf("%w: injected: the connection was reset after COMMIT was sent", kv.ErrOutcomeUnknown)
}

// withDriver runs the store over d instead of the backend the tests run
// on.
func withDriver(d kv.Driver) envOption {
	return func(_ *Options, so *store.Options) {
		so.Dir, so.Driver, so.ReserveBytes = "", d, -1
	}
}

// TestCommitOutcomeUnknownIs503: a write whose commit the storage driver
// sent and then lost the answer to is 503 commit-outcome-unknown, a
// problem whose detail tells the client to read the branch head before
// sending it again, with no Retry-After (sending it again blindly could
// apply it twice). The head read then shows the commit, which landed, and
// the server goes on taking writes on it.
func TestCommitOutcomeUnknownIs503(t *testing.T) {
	d := &answerLosingDriver{Driver: memkv.New()}
	e := newEnv(t, withDriver(d))
	e.createContext("c", "observe")
	q := func(id string) map[string]any {
		return map[string]any{"id": id, "type": "question", "data": map[string]any{"text": "How far is " + id + "?"}}
	}
	e.must(e.post("/v1/contexts/c/artifacts", q("q1")), 201)
	before := e.must(e.get("/v1/contexts/c/hash"), 200)["commit"].(string)

	d.armed.Store(true)
	body := q("q2")
	body["parent"] = before
	r := e.post("/v1/contexts/c/artifacts", body)
	p := e.must(r, 503)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if p["type"] != ProblemTypePrefix+CodeOutcomeUnknown || p["status"] != float64(503) || p["title"] != "Commit outcome unknown" {
		t.Fatalf("problem %s, want type %s%s, status 503", r.body, ProblemTypePrefix, CodeOutcomeUnknown)
	}
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "read the branch head") {
		t.Errorf("detail %q does not tell the client to read the branch head before retrying", detail)
	}
	if ra := r.header.Get("Retry-After"); ra != "" {
		t.Errorf("Retry-After %q on a write whose outcome is unknown", ra)
	}

	// The head says what happened: the commit landed.
	head := e.must(e.get("/v1/contexts/c/hash"), 200)["commit"].(string)
	if head == before {
		t.Fatal("the head did not move: the store kept the head from before the commit that landed")
	}
	e.must(e.get("/v1/contexts/c/artifacts/q2"), 200)

	// The server still takes writes, on the head read.
	body = q("q3")
	body["parent"] = head
	e.must(e.post("/v1/contexts/c/artifacts", body), 201)
}

// notWrittenDriver answers its armed Commit with kv.ErrNotWritten, having
// written nothing, as a database driver does whose connection broke
// before COMMIT was sent and that then found the server unreachable.
type notWrittenDriver struct {
	*memkv.Driver
	armed atomic.Bool
}

func (d *notWrittenDriver) Commit(ctx context.Context, b kv.Batch) error {
	if d.armed.Swap(false) {
		return fmt.Errorf("%w: injected: the connection broke before COMMIT was sent", kv.ErrNotWritten)
	}
	return d.Driver.Commit(ctx, b)
}

// TestCommitNotWrittenIs503: a write the storage driver could not make
// and knows it did not is 503 unavailable, and the same write sent again
// is taken.
func TestCommitNotWrittenIs503(t *testing.T) {
	d := &notWrittenDriver{Driver: memkv.New()}
	e := newEnv(t, withDriver(d))
	e.createContext("c", "observe")
	body := map[string]any{"id": "q1", "type": "question", "data": map[string]any{"text": "How far?"}}
	d.armed.Store(true)
	r := e.post("/v1/contexts/c/artifacts", body)
	p := e.must(r, 503)
	if p["type"] != ProblemTypePrefix+CodeUnavailable {
		t.Fatalf("problem %s, want type %s%s", r.body, ProblemTypePrefix, CodeUnavailable)
	}
	if detail, _ := p["detail"].(string); !strings.Contains(detail, "no commit of it was made") {
		t.Errorf("detail %q does not say nothing was written", detail)
	}
	e.must(e.post("/v1/contexts/c/artifacts", body), 201)
}
