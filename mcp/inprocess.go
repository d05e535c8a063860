package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// InProcess is the Backend over the service layer and its store in this
// process: writes go through the service (the same rules as the HTTP
// handlers, which call it too), reads through store views and the graph
// queries the read handlers use. It does no authorization: use it where
// the caller owns the data directory (`artifactd mcp --data DIR`) or in
// tests. It is safe for concurrent use.
type InProcess struct {
	svc *service.Service
	st  *store.Store
	log *slog.Logger
}

// NewInProcess returns the Backend over svc and its store. A nil logger
// discards the internal errors it logs.
func NewInProcess(svc *service.Service, log *slog.Logger) *InProcess {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &InProcess{svc: svc, st: svc.Store(), log: log}
}

// PutArtifact implements Backend.
func (b *InProcess) PutArtifact(ctx context.Context, ctxID string, in ArtifactBody) (*ArtifactWrite, error) {
	hin, err := request[service.ArtifactInput](b, in, "artifact")
	if err != nil {
		return nil, err
	}
	out, err := b.svc.PutArtifact(ctx, ctxID, *hin)
	return answer[ArtifactWrite](b, out, err)
}

// Commit implements Backend.
func (b *InProcess) Commit(ctx context.Context, ctxID string, in CommitBody) (*CommitWrite, error) {
	hin, err := request[service.CommitInput](b, in, "commit")
	if err != nil {
		return nil, err
	}
	out, err := b.svc.Commit(ctx, ctxID, *hin)
	return answer[CommitWrite](b, out, err)
}

// RecordFetch implements Backend.
func (b *InProcess) RecordFetch(ctx context.Context, ctxID string, in FetchBody) (*FetchWrite, error) {
	hin, err := request[service.FetchInput](b, in, "fetch")
	if err != nil {
		return nil, err
	}
	out, err := b.svc.RecordFetch(ctx, ctxID, *hin)
	return answer[FetchWrite](b, out, err)
}

// RecordToolResult implements Backend.
func (b *InProcess) RecordToolResult(ctx context.Context, ctxID string, in ToolResultBody) (*ArtifactWrite, error) {
	hin, err := request[service.ToolResultInput](b, in, "tool-result")
	if err != nil {
		return nil, err
	}
	out, err := b.svc.RecordToolResult(ctx, ctxID, *hin)
	return answer[ArtifactWrite](b, out, err)
}

// Verify implements Backend.
func (b *InProcess) Verify(ctx context.Context, ctxID string, in VerifyBody) (*VerifyResult, error) {
	hin, err := request[service.VerifyInput](b, in, "verify")
	if err != nil {
		return nil, err
	}
	out, err := b.svc.Verify(ctx, ctxID, *hin)
	return answer[VerifyResult](b, out, err)
}

// Artifact implements Backend: the artifact at at with its data, its
// explained trust and the commit that wrote its version.
func (b *InProcess) Artifact(ctx context.Context, ctxID, id, at string) (*ArtifactView, error) {
	out, err := read(ctx, b, ctxID, at, func(v *store.View) (*service.ArtifactView, error) {
		return b.svc.ArtifactAt(ctx, ctxID, v, id)
	})
	return answer[ArtifactView](b, out, err)
}

// Provenance implements Backend.
func (b *InProcess) Provenance(ctx context.Context, ctxID string, q ProvenanceQuery) (*Provenance, error) {
	sq := service.ProvenanceQuery{Depth: -1, MaxNodes: q.MaxNodes, Format: q.Format}
	if q.Depth != nil {
		sq.Depth = *q.Depth
	}
	if sq.MaxNodes == 0 {
		sq.MaxNodes = graph.DefaultMaxNodes
	}
	// The query is checked before the read checks the ref, in the HTTP
	// door's order, so that both name the same parameter.
	sq, err := sq.Check()
	if err != nil {
		return nil, b.problem(err)
	}
	p, err := read(ctx, b, ctxID, q.At, func(v *store.View) (*service.Provenance, error) {
		return service.ProvenanceAt(v, q.ID, sq)
	})
	if err != nil {
		return nil, b.problem(err)
	}
	out := &Provenance{ID: p.ID, Commit: p.Commit.String(), Format: p.Format, Truncated: p.Truncated, Text: p.Text}
	if p.Format != service.FormatJSON {
		return out, nil
	}
	conv, err := convert[struct {
		Nodes []ArtifactView `json:"nodes"`
		Edges []Edge         `json:"edges"`
	}](p)
	if err != nil {
		return nil, b.problem(err)
	}
	out.Nodes, out.Edges = conv.Nodes, conv.Edges
	return out, nil
}

// Audit implements Backend.
func (b *InProcess) Audit(ctx context.Context, ctxID string, q AuditQuery) (*Audit, error) {
	// The format is checked before the read checks the ref, in the HTTP
	// door's order.
	format, err := service.CheckEnum("format", q.Format, service.AuditJSON, service.AuditMarkdown)
	if err != nil {
		return nil, b.problem(err)
	}
	var md string
	rep, err := read(ctx, b, ctxID, q.At, func(v *store.View) (*graph.AuditReport, error) {
		rep, err := service.AuditAt(ctx, v, q.ID)
		if err == nil && format == service.AuditMarkdown {
			md = rep.Markdown()
		}
		return rep, err
	})
	out, err := answer[Audit](b, rep, err)
	if err != nil {
		return nil, err
	}
	out.Markdown = md
	return out, nil
}

// Diff implements Backend.
func (b *InProcess) Diff(ctx context.Context, ctxID, from, to string) (*Diff, error) {
	sides, err := b.svc.DiffSides(ctx, ctxID, from, to)
	if err != nil {
		return nil, b.problem(err)
	}
	d, err := b.st.Diff(ctx, ctxID, sides[0], sides[1])
	return answer[Diff](b, d, err)
}

// read runs fn on the view of context ctxID at at (a branch or commit
// reference, checked and named in refusals as the HTTP door checks ?at=)
// and returns its result.
func read[T any](ctx context.Context, b *InProcess, ctxID, at string, fn func(v *store.View) (T, error)) (T, error) {
	var out T
	if err := service.CheckRef("at", at); err != nil {
		return out, err
	}
	err := b.st.Read(ctx, ctxID, at, func(v *store.View) error {
		var err error
		out, err = fn(v)
		return err
	})
	return out, service.NameRef(err, "at")
}

// request checks in, the body the remote backend would send, as the HTTP
// door checks a request's body (httpapi.DecodeRequest: its size, canonical
// JSON, the request schema of route schema), and decodes it into the
// service's input: the two backends refuse the same requests alike.
func request[T any](b *InProcess, in any, schema string) (*T, error) {
	raw, err := encode(in)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", in, err)
	}
	out := new(T)
	if err := httpapi.DecodeRequest(raw, 0, schema, out); err != nil {
		return nil, b.problem(err)
	}
	return out, nil
}

// answer converts a result of the server or the store into the tools'
// type, or its error into a *Problem.
func answer[T any](b *InProcess, v any, err error) (*T, error) {
	if err != nil {
		return nil, b.problem(err)
	}
	return convert[T](v)
}

// problem maps an error to a *Problem through the one vocabulary: the
// service's classification (service.Classify) and the HTTP door's status
// of its code (httpapi.StatusOf), so a tool answers what the HTTP handler
// would. An internal error is logged and its text not shown; a cancelled
// call stays an error of the call.
func (b *InProcess) problem(err error) error {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("mcp: %w", err)
	}
	he := service.Classify(err)
	if he.Code == fault.Corrupt {
		// As the HTTP door does: the store refuses writes from now on
		// and reports itself unready; the record is named in the log, not
		// in the answer (service.CorruptDetail).
		b.st.NoteCorruption(err)
		b.log.Error("mcp: stored records do not verify", "err", err)
	}
	if he.Code == fault.Internal {
		b.log.Error("mcp: internal error", "err", err)
		return &Problem{Status: httpapi.StatusOf(he.Code), Code: string(he.Code), Detail: "the server could not complete the request; the error was logged"}
	}
	return problemOf(he)
}

// problemOf is the *Problem of a classified refusal, with the status the
// HTTP door answers it with.
func problemOf(he *fault.Error) *Problem {
	p := &Problem{Status: httpapi.StatusOf(he.Code), Code: string(he.Code), Detail: he.Detail}
	for _, f := range he.Errors {
		p.Errors = append(p.Errors, FieldError{Pointer: f.Pointer, Parameter: f.Parameter, Rule: f.Rule, Detail: f.Detail})
	}
	if tv, ok := he.Extra["tainted_by"]; ok {
		if t, err := convert[Taint](tv); err == nil {
			p.TaintedBy = t
		}
	}
	return p
}
