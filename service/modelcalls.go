package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// Recorded model calls. A client records one call to a model as a
// model_call artifact whose id is ModelCallID(request hash) and whose data
// holds the request, its hash and the response:
//
//	{"model": "…", "request_hash": "sha256:…",
//	 "request": {"model", "parameters"?, "messages"?, "tools"?},
//	 "response": …}
//
// The request hash is SHA-256 of the RFC 8785 canonical JSON of the request
// object exactly as recorded (no defaults are added). A replaying client
// asks GET /v1/contexts/{ctx}/model-calls/{request_hash} and answers from
// the record instead of calling the model.

// ModelCallIDPrefix starts the id of every recorded model call.
const ModelCallIDPrefix = "model_call:"

// ModelCallID is the artifact id of the model call whose request hashes to
// requestHash.
func ModelCallID(requestHash hashing.Digest) string { return ModelCallIDPrefix + requestHash.Hex() }

// ModelCallRequestHash returns the request hash of a model request: SHA-256
// of its canonical JSON. The request must be a JSON object.
func ModelCallRequestHash(request json.RawMessage) (hashing.Digest, error) {
	canon, err := hashing.CanonicalizeObject(request)
	if err != nil {
		return hashing.Digest{}, err
	}
	return hashing.Sum(canon), nil
}

// ModelCallView is the body of GET /v1/contexts/{ctx}/model-calls/{request_hash}.
type ModelCallView struct {
	RequestHash hashing.Digest  `json:"request_hash"`
	Artifact    string          `json:"artifact"`
	Model       string          `json:"model"`
	Request     json.RawMessage `json:"request"`
	Response    json.RawMessage `json:"response"`
	WrittenIn   hashing.Digest  `json:"written_in"`
	Commit      hashing.Digest  `json:"commit"`
}

// ModelCallAt returns the recorded model call whose request hashes to
// want in view v of context ctxID: a not-found error naming the path
// parameter request_hash (rule exists) when there is none,
// a conflict naming request_hash (rule replayable) when the artifact
// under that id is not a model_call record
// whose request hashes to want and that holds a response — such a record
// is never answered, since replaying it would not be the call asked for.
func (s *Service) ModelCallAt(ctx context.Context, ctxID string, v *store.View, want hashing.Digest) (*ModelCallView, error) {
	id := ModelCallID(want)
	meta := v.State.Artifact(id)
	if meta == nil {
		return nil, NotFoundParam("request_hash", fmt.Sprintf("no model call with request hash %s at commit %s", want, v.Commit.ID.Short()))
	}
	if meta.Type != "model_call" {
		return nil, unreplayable(fmt.Sprintf("artifact %q has type %q, not model_call", id, meta.Type))
	}
	a, wrote, err := s.st.ArtifactAt(ctx, ctxID, v.Commit, id)
	if err != nil {
		return nil, err
	}
	var rec struct {
		Model       string          `json:"model"`
		RequestHash string          `json:"request_hash"`
		Request     json.RawMessage `json:"request"`
		Response    json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(a.Data, &rec); err != nil {
		return nil, unreplayable(fmt.Sprintf("model call %q is not a record: %v", id, err))
	}
	got, err := ModelCallRequestHash(rec.Request)
	if err != nil || got != want || rec.RequestHash != want.String() {
		return nil, unreplayable(fmt.Sprintf("model call %q does not record a request hashing to %s; it cannot be replayed", id, want))
	}
	if rec.Response == nil {
		return nil, unreplayable(fmt.Sprintf("model call %q records no response", id))
	}
	return &ModelCallView{RequestHash: want, Artifact: id, Model: rec.Model, Request: rec.Request, Response: rec.Response,
		WrittenIn: wrote, Commit: v.Commit.ID}, nil
}

// RuleReplayable is the rule a model call's request hash breaks when the
// artifact under it cannot be replayed.
const RuleReplayable = "replayable"

// unreplayable is the conflict of a request hash whose record cannot be
// replayed, naming the path parameter request_hash.
func unreplayable(detail string) *fault.Error {
	return &fault.Error{Code: fault.Conflict, Detail: detail,
		Errors: []fault.FieldError{{Parameter: "request_hash", Rule: RuleReplayable, Detail: detail}}}
}
