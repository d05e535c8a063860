package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// ContextInfo is a context's record.
type ContextInfo struct {
	ID         string `json:"id"`
	Quarantine string `json:"quarantine"`
	Created    string `json:"created"`
}

// Edge is an outgoing edge of an artifact write.
type Edge struct {
	Rel   string         `json:"rel"`
	To    string         `json:"to"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// ArtifactRequest is the body of POST /v1/contexts/{ctx}/artifacts.
type ArtifactRequest struct {
	ID         string         `json:"id,omitempty"`
	Type       string         `json:"type"`
	ProducedBy string         `json:"produced_by,omitempty"`
	Data       map[string]any `json:"data"`
	Edges      []Edge         `json:"edges,omitempty"`
	// Parent, when set, makes the write conditional on the branch head.
	Parent     string `json:"parent,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Quarantine string `json:"quarantine,omitempty"`
}

// Trust is an artifact's trust status.
type Trust struct {
	ID     string   `json:"id"`
	Status string   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	Roots  []string `json:"roots,omitempty"`
	Path   []string `json:"path,omitempty"`
}

// Artifact is an artifact as the server returns it.
type Artifact struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Version     int64           `json:"version"`
	ContentHash string          `json:"content_hash"`
	ProducedBy  string          `json:"produced_by"`
	Data        json.RawMessage `json:"data,omitempty"`
	Trust       *Trust          `json:"trust,omitempty"`
	WrittenIn   string          `json:"written_in,omitempty"`
}

// ArtifactWrite is the answer to an artifact or tool-result write.
type ArtifactWrite struct {
	Commit      string          `json:"commit"`
	ContextHash string          `json:"context_hash"`
	Noop        bool            `json:"noop"`
	Artifact    Artifact        `json:"artifact"`
	Tainted     json.RawMessage `json:"tainted,omitempty"`
}

// FetchRequest is the evidence of one fetch (POST .../fetches): the gate
// judges it and commits a fetch_verdict.
type FetchRequest struct {
	ID         string            `json:"id,omitempty"`
	URL        string            `json:"url"`
	FinalURL   string            `json:"final_url,omitempty"`
	Status     int               `json:"status,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 *string           `json:"body_base64,omitempty"`
	Error      *string           `json:"error,omitempty"`
	Perform    bool              `json:"perform,omitempty"`
	Edges      []Edge            `json:"edges,omitempty"`
	Branch     string            `json:"branch,omitempty"`
}

// FetchWrite is the gate's answer: the verdict and the committed artifact.
type FetchWrite struct {
	Verdict     string   `json:"verdict"`
	Layer       string   `json:"layer,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	BodyBlob    string   `json:"body_blob"`
	Commit      string   `json:"commit"`
	ContextHash string   `json:"context_hash"`
	Noop        bool     `json:"noop"`
	Artifact    Artifact `json:"artifact"`
}

// Hash is a commit and its context hash.
type Hash struct {
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
	Artifacts   int    `json:"artifacts"`
	Edges       int    `json:"edges"`
}

// Audit is what an answer rests on (GET .../audit/{id}).
type Audit struct {
	Context     string     `json:"context"`
	Commit      string     `json:"commit"`
	ContextHash string     `json:"context_hash"`
	Answer      string     `json:"answer"`
	Trust       Trust      `json:"trust"`
	Artifacts   []Artifact `json:"artifacts"`
	Sources     []struct {
		Locator   string   `json:"locator"`
		Artifacts []string `json:"artifacts"`
	} `json:"sources"`
	Summary struct {
		Confirmed   int `json:"confirmed"`
		Quarantined int `json:"quarantined"`
		PoisonRoots int `json:"poison_roots"`
	} `json:"summary"`
}

// Verification is the answer of Verify.
type Verification struct {
	Match       bool   `json:"match"`
	ContextHash string `json:"context_hash"`
	Commit      string `json:"commit"`
	Commits     int    `json:"commits,omitempty"`
	Ops         int    `json:"ops,omitempty"`
	// ByHash is true when the server has no verify route and the match was
	// decided by comparing GET .../hash instead (no replay was run).
	ByHash bool `json:"-"`
}

// CompareSide is one side of a comparison.
type CompareSide struct {
	Context     string `json:"context"`
	Ref         string `json:"ref,omitempty"`
	Commit      string `json:"commit"`
	ContextHash string `json:"context_hash"`
}

// Comparison is the answer of Compare; Divergences is grouped by producer
// (see docs/API.md) and left undecoded.
type Comparison struct {
	Equal       bool            `json:"equal"`
	A           CompareSide     `json:"a"`
	B           CompareSide     `json:"b"`
	Divergences json.RawMessage `json:"divergences"`
}

// EnsureContext creates the context if it does not exist (PUT
// /v1/contexts/{id}); it succeeds when it exists with the same quarantine
// mode ("" means enforce) and fails with code "exists" otherwise.
func (c *Client) EnsureContext(ctx context.Context, id, quarantine string) (*ContextInfo, error) {
	body := map[string]string{}
	if quarantine != "" {
		body["quarantine"] = quarantine
	}
	var out ContextInfo
	_, err := c.do(ctx, http.MethodPut, ctxPath(id), body, &out)
	return &out, err
}

// PutArtifact writes an artifact with its outgoing edges in one commit.
func (c *Client) PutArtifact(ctx context.Context, ctxID string, req ArtifactRequest) (*ArtifactWrite, error) {
	var out ArtifactWrite
	_, err := c.do(ctx, http.MethodPost, ctxPath(ctxID, "artifacts"), req, &out)
	return &out, err
}

// PutArtifactCAS writes with a parent: it reads the head of req.Branch
// (main when empty), calls build with it, and writes build's request
// conditional on that head. When another writer moved the head first
// (stale-parent), it re-reads and calls build again, at most attempts
// times in all; build sees each new head, so it can merge what changed.
func (c *Client) PutArtifactCAS(ctx context.Context, ctxID, branch string, attempts int, build func(head string) (ArtifactRequest, error)) (*ArtifactWrite, error) {
	if attempts < 1 {
		attempts = 1
	}
	var err error
	for i := 0; i < attempts; i++ {
		var h *Hash
		if h, err = c.Hash(ctx, ctxID, branch); err != nil {
			return nil, err
		}
		var req ArtifactRequest
		if req, err = build(h.Commit); err != nil {
			return nil, err
		}
		req.Parent, req.Branch = h.Commit, branch
		var w *ArtifactWrite
		if w, err = c.PutArtifact(ctx, ctxID, req); err == nil {
			return w, nil
		}
		if !IsStale(err) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("after %d attempts: %w", attempts, err)
}

// RecordFetch sends fetch evidence through the gate.
func (c *Client) RecordFetch(ctx context.Context, ctxID string, req FetchRequest) (*FetchWrite, error) {
	var out FetchWrite
	_, err := c.do(ctx, http.MethodPost, ctxPath(ctxID, "fetches"), req, &out)
	return &out, err
}

// GetArtifact reads one artifact with its data and trust at ref ("" for
// main).
func (c *Client) GetArtifact(ctx context.Context, ctxID, id, at string) (*Artifact, error) {
	var out Artifact
	_, err := c.do(ctx, http.MethodGet, withAt(ctxPath(ctxID, "artifacts", PathEscape(id)), at), nil, &out)
	return &out, err
}

// Hash returns the commit and context hash at ref ("" for main).
func (c *Client) Hash(ctx context.Context, ctxID, at string) (*Hash, error) {
	var out Hash
	_, err := c.do(ctx, http.MethodGet, withAt(ctxPath(ctxID, "hash"), at), nil, &out)
	return &out, err
}

// Audit returns what the answer id rests on.
func (c *Client) Audit(ctx context.Context, ctxID, id string) (*Audit, error) {
	var out Audit
	_, err := c.do(ctx, http.MethodGet, ctxPath(ctxID, "audit", PathEscape(id)), nil, &out)
	return &out, err
}

// Verify asks the server to rebuild the state at at ("" for main) from the
// commit chain and compare its hash with hash (POST .../verify). A server
// without that route answers 404 for it: Verify then compares hash with
// GET .../hash and sets ByHash.
func (c *Client) Verify(ctx context.Context, ctxID, hash, at string) (*Verification, error) {
	body := map[string]string{"hash": hash}
	if at != "" {
		body["at"] = at
	}
	var out Verification
	status, err := c.do(ctx, http.MethodPost, ctxPath(ctxID, "verify"), body, &out)
	var p *Problem
	if err != nil && status == http.StatusNotFound && asProblem(err, &p) && p.Code() == "not-found" && isNoRoute(p) {
		h, herr := c.Hash(ctx, ctxID, at)
		if herr != nil {
			return nil, herr
		}
		return &Verification{Match: h.ContextHash == hash, ContextHash: h.ContextHash, Commit: h.Commit, ByHash: true}, nil
	}
	return &out, err
}

// Compare compares two runs, each "CTX" or "CTX@REF".
func (c *Client) Compare(ctx context.Context, a, b string) (*Comparison, error) {
	var out Comparison
	_, err := c.do(ctx, http.MethodGet, "/v1/compare?a="+url.QueryEscape(a)+"&b="+url.QueryEscape(b), nil, &out)
	return &out, err
}
