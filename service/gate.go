package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/artifactd/artifactd/fault"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/gate/fetch"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// The fetch gate: POST /v1/contexts/{ctx}/fetches. The server, never the
// client, decides a fetch's verdict: it classifies the evidence with
// gate.Classify and commits a fetch_verdict through the gate path, which
// stores the raw body as a blob (whose digest is the receipt's
// body_sha256) in the verdict's commit. GatePutArtifact, the only path that writes fetch_verdict, checks
// every verdict it is given against its receipt and blob (verifyVerdict),
// so even a Go caller cannot store a verdict its evidence does not bear.

// Fetcher performs a server-side fetch ("perform": true) and returns what
// it saw. An error means nothing may be fetched (the address policy or the
// URL refused it); transport failures are evidence. *fetch.Fetcher
// implements it.
type Fetcher interface {
	Fetch(ctx context.Context, url string) (gate.Evidence, error)
}

// Renderer renders an HTML script shell in a browser: it returns the
// evidence with the rendered document as its body (and an HTML content
// type), to be classified again. *render.Renderer implements it.
type Renderer interface {
	Render(ctx context.Context, ev gate.Evidence) (gate.Evidence, error)
}

// FetchInput is POST /v1/contexts/{ctx}/fetches: the evidence of one fetch
// (the fields of gate.Evidence), or {"id","url","perform":true} to make
// artifactd fetch the URL itself.
type FetchInput struct {
	// ID is the fetch_verdict's id; a new version when it exists. Default
	// "fetch_verdict:<first 16 hex of the content hash>".
	ID string `json:"id,omitempty"`
	// Kind is the read kind: "http" (default), "file" (Path, Size and the
	// body) or "tool" (Tool and the body; URL names the resource). A file
	// or tool read needs no status (gate.Evidence).
	Kind        string `json:"kind,omitempty"`
	Path        string `json:"path,omitempty"`
	Size        *int64 `json:"size,omitempty"`
	Tool        string `json:"tool,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// ProducedBy names who made the read (recorded in the verdict's data;
	// the artifact is produced by the gate).
	ProducedBy string            `json:"produced_by,omitempty"`
	URL        string            `json:"url,omitempty"`
	FinalURL   string            `json:"final_url,omitempty"`
	Redirects  []gate.Redirect   `json:"redirects,omitempty"`
	Status     int               `json:"status,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	// Body is the body as text; BodyBase64 the raw bytes (one at most;
	// neither means an empty body).
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
	// Error is the transport error text (null or absent when none).
	Error *string `json:"error,omitempty"`
	// Perform makes the server fetch URL itself (serve --allow-fetch).
	Perform bool `json:"perform,omitempty"`
	// Edges are outgoing edges of the verdict, committed with it.
	Edges      []EdgeInput `json:"edges,omitempty"`
	Branch     string      `json:"branch,omitempty"`
	Quarantine string      `json:"quarantine,omitempty"`
	// IfMatch, when set, is the head the write expects its branch to
	// have (an If-Match header; never read from the body): the write is
	// refused as stale, naming If-Match, when the head is another.
	IfMatch *hashing.Digest `json:"-"`

	// Claims a client may send and the server ignores (it decides the
	// verdict itself); the answer lists the ones that were present.
	Verdict    json.RawMessage `json:"verdict,omitempty"`
	Reason     json.RawMessage `json:"reason,omitempty"`
	Layer      json.RawMessage `json:"layer,omitempty"`
	Receipt    json.RawMessage `json:"receipt,omitempty"`
	BodySHA256 json.RawMessage `json:"body_sha256,omitempty"`
	BodyBlob   json.RawMessage `json:"body_blob,omitempty"`
}

// FetchWrite is the answer to POST .../fetches: the verdict the server
// decided, then the write of the fetch_verdict (its data holds the
// receipt; its trust says whether it confirms).
type FetchWrite struct {
	Verdict  gate.Verdict `json:"verdict"`
	Layer    gate.Layer   `json:"layer,omitempty"`
	Reason   gate.Reason  `json:"reason,omitempty"`
	BodyBlob string       `json:"body_blob"`
	// Rendered is set when the verdict is the one of a browser rendering
	// of a script shell (serve --render).
	Rendered bool `json:"rendered,omitempty"`
	// Ignored names the verdict claims the request carried (verdict,
	// receipt…): the server never reads them.
	Ignored []string `json:"ignored,omitempty"`
	// Text is the extracted text the verdict judged (for HTML the title
	// and body text), cut to MaxFetchTextChars characters, with the
	// declared secrets masked: what an agent may answer from. TextChars is
	// its whole length, TextTruncated says whether Text was cut, and
	// TextBlob is the blob holding the whole (masked) text ("" when there
	// is none).
	Text          string `json:"text"`
	TextChars     int    `json:"text_chars"`
	TextTruncated bool   `json:"text_truncated,omitempty"`
	TextBlob      string `json:"text_blob,omitempty"`
	ArtifactWrite
}

// MaxFetchTextChars bounds FetchWrite.Text.
const MaxFetchTextChars = 16000

// VerdictData is the data of a fetch_verdict artifact (gate.VerdictData).
type VerdictData = gate.VerdictData

// RenderedFrom is the fetched script shell behind a rendered verdict.
type RenderedFrom = gate.RenderedFrom

// Values of VerdictData.FetchedBy.
const (
	FetchedByAgent     = gate.FetchedByAgent
	FetchedByArtifactd = gate.FetchedByArtifactd
)

// RecordFetch is POST .../fetches as a Go call: it gets the evidence (from
// in, or by fetching in.URL when in.Perform), classifies it, renders a
// script shell when a Renderer is configured, stores the body blob(s) and
// commits the fetch_verdict with in.Edges. Errors are *fault.Error values: 403
// when perform is off or the address policy refuses the URL, 422 for bad
// evidence, and the errors of a write.
func (s *Service) RecordFetch(ctx context.Context, ctxID string, in FetchInput) (*FetchWrite, error) {
	if _, err := s.st.GetContext(ctx, ctxID); err != nil {
		return nil, err
	}
	if err := s.checkIfMatch(ctx, ctxID, in.Branch, in.IfMatch); err != nil {
		return nil, err
	}
	// Who made the read is shown as every producer is (checkLabel).
	if err := checkLabel(in.ProducedBy, "/produced_by", "produced_by"); err != nil {
		return nil, err
	}
	ev, by, err := s.evidence(ctx, in)
	if err != nil {
		return nil, err
	}
	opt := s.sanitizeOptions()
	ev = maskEvidence(ev, opt.Secrets)
	res := gate.ClassifyWith(ev, s.rules)
	data := VerdictData{FetchedBy: by, ProducedBy: truncateChars(opt.Mask(in.ProducedBy), maxToolNameChars)}
	var held heldBlobs // the bodies, held with the verdict's commit
	if s.render != nil && res.Verdict == gate.Unknown && res.Reason == gate.ReasonScriptShell {
		rendered, rerr := s.render.Render(ctx, ev)
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			data.RenderError = opt.Mask(rerr.Error())
			s.log.Warn("render failed", "context", ctxID, "url", res.Receipt.URL, "err", data.RenderError)
		} else {
			shell, err := putBody(ctx, s.st, &held, ev.Body, res.Receipt)
			if err != nil {
				return nil, err
			}
			data.RenderedFrom = &RenderedFrom{Receipt: res.Receipt, BodyBlob: shell}
			ev, res = rendered, gate.ClassifyWith(rendered, s.rules)
		}
	}
	blob, err := putBody(ctx, s.st, &held, ev.Body, res.Receipt)
	if err != nil {
		return nil, err
	}
	data.Verdict, data.Reason, data.Layer = res.Verdict, res.Reason, res.Layer
	data.URL, data.FinalURL, data.Status = res.Receipt.URL, res.Receipt.FinalURL, res.Receipt.Status
	data.Receipt, data.BodyBlob = res.Receipt, blob
	text, textBlob, err := s.fetchText(ctx, opt.Secrets, &held, res.Text)
	if err != nil {
		return nil, err
	}
	raw, err := canonicalData(data)
	if err != nil {
		return nil, err
	}
	if err := s.verifyVerdict(ctx, ctxID, raw, false); err != nil {
		return nil, &fault.Error{Code: fault.Internal, Err: fmt.Errorf("the gate wrote a verdict it refuses: %w", err)}
	}
	aw, err := s.putArtifactGo(ctx, ctxID, ArtifactInput{
		ID: in.ID, Type: TypeFetchVerdict, ProducedBy: "gate", Data: raw,
		Edges: in.Edges, Branch: in.Branch, Quarantine: in.Quarantine,
	}, true, &held, in.IfMatch)
	if err != nil {
		return nil, err
	}
	fw := &FetchWrite{Verdict: res.Verdict, Layer: res.Layer, Reason: res.Reason, BodyBlob: blob,
		Rendered: data.RenderedFrom != nil, Ignored: ignoredClaims(in), ArtifactWrite: *aw}
	if textBlob != "" {
		fw.TextBlob, fw.TextChars = textBlob, utf8.RuneCountInString(text)
		fw.Text = truncateChars(text, MaxFetchTextChars)
		fw.TextTruncated = fw.TextChars > MaxFetchTextChars
	}
	return fw, nil
}

// fetchText masks the extracted text with the declared secrets (sec) and keeps
// the whole as a blob that the verdict's commit stores and makes the
// context hold (held), so that a refused or failed write stores none of
// it. It returns the masked text and its blob ("" for no text).
func (s *Service) fetchText(ctx context.Context, sec gate.Secrets, held *heldBlobs, text string) (string, string, error) {
	if text == "" {
		return "", "", nil
	}
	text = sec.Mask(text)
	return text, held.put([]byte(text)).String(), nil
}

// maskEvidence is ev with the declared secrets masked in what the verdict
// records as it is — the URLs, the redirects, the path, the tool, the
// transport error — before it is classified, so that a re-derivation
// from the stored verdict meets the same text. The body stays as it was
// fetched (it is the evidence); a title read from it is not masked.
func maskEvidence(ev gate.Evidence, sec gate.Secrets) gate.Evidence {
	if sec.Len() == 0 {
		return ev
	}
	ev.URL, ev.FinalURL = sec.Mask(ev.URL), sec.Mask(ev.FinalURL)
	ev.Path, ev.Tool, ev.Error = sec.Mask(ev.Path), sec.Mask(ev.Tool), sec.Mask(ev.Error)
	if len(ev.Redirects) > 0 {
		rs := make([]gate.Redirect, len(ev.Redirects))
		for i, r := range ev.Redirects {
			r.URL = sec.Mask(r.URL)
			rs[i] = r
		}
		ev.Redirects = rs
	}
	return ev
}

// putBody keeps a fetched body, which the verdict's commit stores and
// makes the context hold (held), and checks that its address is the one the
// receipt names.
func putBody(ctx context.Context, st *store.Store, held *heldBlobs, body []byte, rc gate.Receipt) (string, error) {
	d := held.put(body)
	if d.String() != rc.BodySHA256 {
		return "", &fault.Error{Code: fault.Internal, Err: fmt.Errorf("body blob %s but receipt says %s", d, rc.BodySHA256)}
	}
	return d.String(), nil
}

// blockedDetail is the detail of the errors entry of a fetch the fetch
// policy refused: the blocked address class and the address (with the
// host it is the address of, if the URL named a host).
func blockedDetail(be *fetch.BlockedError) string {
	what := be.Addr.String()
	if be.Host != "" {
		what += " (address of " + be.Host + ")"
	}
	return fmt.Sprintf("blocked address class %s: %s", be.Class, what)
}

// evidence returns the evidence of a fetch request and who fetched it.
func (s *Service) evidence(ctx context.Context, in FetchInput) (gate.Evidence, string, error) {
	if in.Perform {
		if !s.allowFetch || s.fetcher == nil {
			return gate.Evidence{}, "", &fault.Error{Code: fault.Forbidden,
				Detail: "server-side fetching is off: start artifactd serve with --allow-fetch, or fetch the URL yourself and POST the evidence",
				Errors: []fault.FieldError{{Pointer: "/perform", Rule: "fetch_enabled", Detail: "server-side fetching is off on this server"}}}
		}
		ev, err := s.fetcher.Fetch(ctx, in.URL)
		var be *fetch.BlockedError
		switch {
		case errors.As(err, &be):
			return gate.Evidence{}, "", &fault.Error{Code: fault.Forbidden,
				Detail: "the fetch policy refuses this target: " + be.Error(),
				Errors: []fault.FieldError{{Pointer: "/url", Rule: "fetch_policy",
					Detail: blockedDetail(be)}},
				Extra: map[string]any{"blocked": map[string]any{"host": be.Host, "address": be.Addr.String(), "class": be.Class}}}
		case errors.Is(err, fetch.ErrURL):
			return gate.Evidence{}, "", &fault.Error{Code: fault.Invalid, Detail: err.Error(),
				Errors: []fault.FieldError{{Pointer: "/url", Rule: "fetchable", Detail: "want an absolute http or https URL"}}}
		case err != nil:
			return gate.Evidence{}, "", err
		}
		return ev, FetchedByArtifactd, nil
	}
	if err := checkEvidenceShape(in); err != nil {
		return gate.Evidence{}, "", err
	}
	ev := gate.Evidence{Kind: in.Kind, URL: in.URL, FinalURL: in.FinalURL, Redirects: in.Redirects, Status: in.Status, Headers: in.Headers,
		Path: in.Path, Size: in.Size, Tool: in.Tool, ContentType: in.ContentType}
	if in.Error != nil {
		ev.Error = *in.Error
	}
	switch {
	case in.Body != nil && in.BodyBase64 != nil:
		return ev, "", &fault.Error{Code: fault.Invalid, Detail: "send the body as body (text) or body_base64 (bytes), not both",
			Errors: []fault.FieldError{{Pointer: "/body_base64", Rule: "oneOf", Detail: "body is set too"}}}
	case in.Body != nil:
		ev.Body = []byte(*in.Body)
	case in.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.BodyBase64)
		if err != nil {
			return ev, "", &fault.Error{Code: fault.Invalid, Detail: "body_base64 is not standard base64 (RFC 4648 §4, with padding)",
				Errors: []fault.FieldError{{Pointer: "/body_base64", Rule: "base64", Detail: err.Error()}}}
		}
		ev.Body = b
	}
	return ev, FetchedByAgent, nil
}

// checkEvidenceShape holds evidence sent by the caller to the rules of
// the fetch request schema, for every door (an MCP client calls the
// service without the HTTP schema): a known kind, a path for a file read
// and a URL for any other, and a status and size in range. Without them
// a body alone, with no address, would be recorded as a read.
func checkEvidenceShape(in FetchInput) error {
	field := func(ptr, rule, detail string) error {
		return &fault.Error{Code: fault.Invalid, Detail: detail, Errors: []fault.FieldError{{Pointer: ptr, Rule: rule, Detail: detail}}}
	}
	switch {
	case in.Kind != "" && in.Kind != gate.ReadHTTP && in.Kind != gate.ReadFile && in.Kind != gate.ReadTool:
		return field("/kind", "enum", fmt.Sprintf("kind must be http, file or tool, not %q", in.Kind))
	case in.Kind == gate.ReadFile && in.Path == "":
		return field("/path", "required", "a file read names its path")
	case in.Kind != gate.ReadFile && in.URL == "":
		return field("/url", "required", "a read names its URL")
	case in.Status < 0 || in.Status > 999:
		return field("/status", "maximum", "status must be 0-999")
	case in.Size != nil && *in.Size < 0:
		return field("/size", "minimum", "size must be at least 0")
	}
	return nil
}

// ignoredClaims lists the verdict claims present in a request.
func ignoredClaims(in FetchInput) []string {
	var out []string
	for _, c := range []struct {
		name string
		v    json.RawMessage
	}{{"body_blob", in.BodyBlob}, {"body_sha256", in.BodySHA256}, {"layer", in.Layer}, {"reason", in.Reason}, {"receipt", in.Receipt}, {"verdict", in.Verdict}} {
		if len(c.v) > 0 {
			out = append(out, c.name)
		}
	}
	return out
}

// canonicalData marshals v as canonical JSON.
func canonicalData(v any) (json.RawMessage, error) {
	raw, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	return hashing.CanonicalizeObject(raw)
}

// verifyVerdict checks a fetch_verdict's data before the gate path
// commits it (gate.CheckVerdict), so that no verdict can be stored that
// its receipt and blob do not bear. With checkBlobs the body blobs are read
// from the store through context ctxID (a blob it does not hold counts as
// missing) and the verdict derived again; RecordFetch skips that for
// the blobs it has just stored from the evidence it has just classified,
// GatePutArtifact checks everything.
func (s *Service) verifyVerdict(ctx context.Context, ctxID string, data json.RawMessage, checkBlobs bool) error {
	var blob gate.BlobFunc
	if checkBlobs {
		blob = func(name string) ([]byte, bool, error) {
			d, err := hashing.ParseDigest(name)
			if err != nil {
				return nil, false, nil
			}
			b, err := s.st.GetContextBlob(ctx, ctxID, d)
			if errors.Is(err, store.ErrNotFound) {
				return nil, false, nil
			}
			return b, err == nil, err
		}
	}
	err := gate.CheckVerdictWith(data, blob, s.rulesets)
	var ve *gate.VerdictError
	if errors.As(err, &ve) {
		return verdictError(ve.Pointer, ve.Rule, ve.Detail)
	}
	return err
}

func verdictError(ptr, rule, detail string) *fault.Error {
	return &fault.Error{Code: fault.Invalid, Detail: "refused fetch verdict: " + detail,
		Errors: []fault.FieldError{{Pointer: "/data" + ptr, Rule: rule, Detail: detail}}}
}

// gateCheck runs inside the commit pipeline for the gate path: a
// fetch_verdict may replace only a fetch_verdict, never an artifact of
// another type that happens to have its id; and no gate output (a tool
// result) may replace an artifact of a reserved type — a FAILED verdict
// would otherwise become a confirmed tool output, or an effect vanish
// from the outbox with its idempotency key spent.
func gateCheck(_ *graph.State, changes []graph.Change) error {
	for i, ch := range changes {
		if ch.Noop || ch.Next == nil {
			continue
		}
		if ch.Prev == nil || ch.Prev.Type == ch.Next.Type {
			if err := effectIDCheck(i, ch); err != nil {
				return err
			}
			continue
		}
		var detail string
		switch {
		case ch.Next.Type == TypeFetchVerdict:
			detail = fmt.Sprintf("artifact %q is a %s; a fetch verdict cannot replace it: use another id", ch.Op.ID, ch.Prev.Type)
		case reservedWriters[ch.Prev.Type] != "":
			detail = fmt.Sprintf("artifact %q is a %s, which only %s writes; a %s cannot replace it: use another id", ch.Op.ID, ch.Prev.Type, reservedWriters[ch.Prev.Type], ch.Next.Type)
		default:
			continue
		}
		return &indexedError{index: i, field: "/id", err: &fault.Error{Code: fault.Conflict, Detail: detail, Errors: []fault.FieldError{{Rule: "type"}}}}
	}
	return nil
}
