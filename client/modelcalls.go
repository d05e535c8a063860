package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/artifactd/artifactd/hashing"
)

func asProblem(err error, p **Problem) bool { return errors.As(err, p) }

// isNoRoute reports whether a 404 problem says the route does not exist
// (rather than a context or artifact).
func isNoRoute(p *Problem) bool { return strings.HasPrefix(p.Detail, "no route for ") }

// ModelRequest is a request to a model as it is recorded and hashed.
// Members that are nil are left out; everything else is hashed as given,
// so an empty parameters object and no parameters are different requests.
type ModelRequest struct {
	Model      string `json:"model"`
	Parameters any    `json:"parameters,omitempty"`
	Messages   any    `json:"messages,omitempty"`
	Tools      any    `json:"tools,omitempty"`
}

// RequestHash returns "sha256:<hex>" of the RFC 8785 canonical JSON of req,
// the key of its record.
func RequestHash(req ModelRequest) (string, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("encode model request: %w", err)
	}
	canon, err := hashing.CanonicalizeObject(raw)
	if err != nil {
		return "", fmt.Errorf("canonicalize model request: %w", err)
	}
	return hashing.Sum(canon).String(), nil
}

// ModelCall is a recorded model call (GET .../model-calls/{request_hash}).
type ModelCall struct {
	RequestHash string          `json:"request_hash"`
	Artifact    string          `json:"artifact"`
	Model       string          `json:"model"`
	Request     json.RawMessage `json:"request"`
	Response    json.RawMessage `json:"response"`
	WrittenIn   string          `json:"written_in"`
	Commit      string          `json:"commit"`
}

// GetModelCall returns the recorded call with that request hash at ref
// ("" for main); a call never recorded is a not-found *Problem.
func (c *Client) GetModelCall(ctx context.Context, ctxID, requestHash, at string) (*ModelCall, error) {
	var out ModelCall
	_, err := c.do(ctx, http.MethodGet, withAt(ctxPath(ctxID, "model-calls", PathEscape(requestHash)), at), nil, &out)
	return &out, err
}

// Mode says what a ModelRecorder does with a call.
type Mode int

const (
	// Record calls the model and records request and response.
	Record Mode = iota
	// Replay answers from the record and never calls the model; a call
	// that was not recorded is an *ErrReplayMiss, and a Source context
	// that does not exist is the server's 404 for it (IsNotFound), not a
	// miss.
	Replay
)

// ErrReplayMiss is the error of a replayed call that was never recorded.
type ErrReplayMiss struct {
	RequestHash string
	Context     string
}

func (e *ErrReplayMiss) Error() string {
	return fmt.Sprintf("replay: no recorded model call %s in context %q; record it first (the model was not called)", e.RequestHash, e.Context)
}

// ModelRecorder records model calls into a context, or replays them.
type ModelRecorder struct {
	Client *Client
	// Context receives a model_call artifact for every call, in both
	// modes, so a replayed run reaches the same state as the recorded one.
	Context string
	// Source is where Replay reads records (Context when empty).
	Source     string
	Mode       Mode
	ProducedBy string
}

// miss is the error of a replayed call whose record was not found (err,
// a 404): an *ErrReplayMiss when the source context exists, else the
// context's own refusal. The API answers a context that does not exist
// and a call never recorded in one with the same problem (404 not-found),
// so the context is asked for; a mistyped Source read as "no recorded
// model call … record it first". A server without the model-calls route
// (404 "no route") is answered as it is.
func (r *ModelRecorder) miss(ctx context.Context, src, h string, err error) error {
	var p *Problem
	if asProblem(err, &p) && isNoRoute(p) {
		return err
	}
	if _, cerr := r.Client.do(ctx, http.MethodGet, ctxPath(src), nil, nil); cerr != nil {
		return fmt.Errorf("replay: source context %q: %w", src, cerr)
	}
	return &ErrReplayMiss{RequestHash: h, Context: src}
}

// Call returns the response to req: in Record mode from call (then
// recorded), in Replay mode from the record (call is never invoked).
// The response must be JSON-encodable; it is returned as recorded.
func (r *ModelRecorder) Call(ctx context.Context, req ModelRequest, call func(ctx context.Context, req ModelRequest) (any, error)) (json.RawMessage, error) {
	h, err := RequestHash(req)
	if err != nil {
		return nil, err
	}
	var response json.RawMessage
	switch r.Mode {
	case Replay:
		src := r.Source
		if src == "" {
			src = r.Context
		}
		rec, err := r.Client.GetModelCall(ctx, src, h, "")
		if IsNotFound(err) {
			return nil, r.miss(ctx, src, h, err)
		}
		if err != nil {
			return nil, err
		}
		response = rec.Response
	default:
		out, err := call(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("model call: %w", err)
		}
		if response, err = encodeJSON(out); err != nil {
			return nil, fmt.Errorf("encode model response: %w", err)
		}
	}
	// The request and the response go as they are: a decode into Go
	// values would round a number past 2^53, and the record would answer
	// another response than the one returned.
	rawReq, err := encodeJSON(req)
	if err != nil {
		return nil, fmt.Errorf("encode model request: %w", err)
	}
	_, err = r.Client.PutArtifact(ctx, r.Context, ArtifactRequest{
		ID: "model_call:" + strings.TrimPrefix(h, "sha256:"), Type: "model_call", ProducedBy: r.ProducedBy,
		Data: map[string]any{"model": req.Model, "request_hash": h, "request": json.RawMessage(rawReq), "response": json.RawMessage(response)},
	})
	if err != nil {
		return nil, fmt.Errorf("record model call: %w", err)
	}
	return response, nil
}
