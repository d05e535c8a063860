package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/fault"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// ArtifactInput is the one-call write (POST /v1/contexts/{ctx}/artifacts):
// an artifact and its outgoing edges, committed together.
type ArtifactInput struct {
	// ID defaults to "<type>:<first 16 hex digits of the content hash>".
	ID         string          `json:"id,omitempty"`
	Type       string          `json:"type"`
	ProducedBy string          `json:"produced_by,omitempty"`
	Data       json.RawMessage `json:"data"`
	Edges      []EdgeInput     `json:"edges,omitempty"`
	// Parent, when set, must be the branch head (else 409 stale-parent).
	Parent string `json:"parent,omitempty"`
	// Branch defaults to main.
	Branch string `json:"branch,omitempty"`
	// Quarantine "enforce" refuses this write if it rests on an
	// unconfirmed artifact even in an observe context; "observe" cannot
	// loosen an enforce context.
	Quarantine string `json:"quarantine,omitempty"`
}

// EdgeInput is one outgoing edge of an ArtifactInput.
type EdgeInput struct {
	Rel   string          `json:"rel"`
	To    string          `json:"to"`
	Attrs json.RawMessage `json:"attrs,omitempty"`
}

// ArtifactView is an artifact as reads and writes return it.
type ArtifactView struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Version     int64           `json:"version"`
	ContentHash hashing.Digest  `json:"content_hash"`
	ProducedBy  string          `json:"produced_by"`
	Data        json.RawMessage `json:"data,omitempty"`
	Trust       *graph.Trust    `json:"trust,omitempty"`
	// WrittenIn is the commit that wrote this version (single reads).
	WrittenIn *hashing.Digest `json:"written_in,omitempty"`
}

// ArtifactWrite is the answer to a one-call write.
type ArtifactWrite struct {
	Commit      hashing.Digest `json:"commit"`
	ContextHash hashing.Digest `json:"context_hash"`
	// Noop is set when identical content was put again: nothing changed and
	// Commit is the unchanged head.
	Noop     bool         `json:"noop"`
	Artifact ArtifactView `json:"artifact"`
	// TrustAt is the commit the artifact's trust was read at: the new
	// commit, or a later head when other writers were faster.
	TrustAt hashing.Digest `json:"trust_at"`
	// Tainted lists, in observe mode, the new dependency edges that rest on
	// unconfirmed artifacts: stored, and flagged here.
	Tainted []TaintView `json:"tainted,omitempty"`
}

// CommitInput is a general commit (POST /v1/contexts/{ctx}/commits).
type CommitInput struct {
	Branch     string    `json:"branch,omitempty"`
	Parent     string    `json:"parent,omitempty"`
	Author     string    `json:"author,omitempty"`
	Message    string    `json:"message,omitempty"`
	Quarantine string    `json:"quarantine,omitempty"`
	Ops        []OpInput `json:"ops"`
}

// OpInput is one op of a CommitInput: {"op":"put","artifact":{...}},
// {"op":"delete","id"}, {"op":"link","from","rel","to","attrs"?} or
// {"op":"unlink","from","rel","to"}.
type OpInput struct {
	Op       string          `json:"op"`
	Artifact *PutInput       `json:"artifact,omitempty"`
	ID       string          `json:"id,omitempty"`
	From     string          `json:"from,omitempty"`
	Rel      string          `json:"rel,omitempty"`
	To       string          `json:"to,omitempty"`
	Attrs    json.RawMessage `json:"attrs,omitempty"`
}

// PutInput is the artifact of a put op.
type PutInput struct {
	ID         string          `json:"id,omitempty"`
	Type       string          `json:"type"`
	ProducedBy string          `json:"produced_by,omitempty"`
	Data       json.RawMessage `json:"data"`
}

// CommitWrite is the answer to a general commit.
type CommitWrite struct {
	Commit      hashing.Digest   `json:"commit"`
	Parents     []hashing.Digest `json:"parents"`
	ContextHash hashing.Digest   `json:"context_hash"`
	Noop        bool             `json:"noop"`
	// Ops is the number of ops recorded (no-ops are dropped).
	Ops     int         `json:"ops"`
	Tainted []TaintView `json:"tainted,omitempty"`
}

// indexedError is a refusal of one op of a commit, located by the caller.
type indexedError struct {
	index int
	field string
	err   *fault.Error
}

func (e *indexedError) Error() string { return fmt.Sprintf("op %d: %v", e.index, e.err) }

// locate turns a refused commit's error into an *fault.Error whose field
// pointer names the op in the request body (ptr maps an op index and a
// field relative to the op to a pointer).
func locate(err error, ptr func(index int, field string) string) error {
	var ie *indexedError
	if errors.As(err, &ie) {
		e := *ie.err
		e.Errors = []fault.FieldError{{Pointer: ptr(ie.index, ie.field), Rule: ie.err.Errors[0].Rule, Detail: ie.err.Detail}}
		return &e
	}
	var oe *graph.OpError
	var cy *graph.CycleError
	var te *graph.TaintError
	index, field, rule := -1, "", ""
	switch {
	case errors.As(err, &te):
		index, rule = te.Index, "confirmed"
	case errors.As(err, &cy):
		index, rule = cy.Index, "acyclic"
	case errors.As(err, &oe):
		index, field, rule = oe.Index, oe.Field, oe.Rule
		if field != "" && !strings.HasPrefix(field, "/") {
			field = "/" + field
		}
		if rule == "" {
			rule = "invalid"
		}
	default:
		return err
	}
	e := Classify(err)
	// The pointer says which op; the "op N: " prefix of graph's messages
	// counts ops of the store commit, not of the request.
	e.Detail = opPrefix.ReplaceAllString(e.Detail, "")
	if index >= 0 {
		e.Errors = []fault.FieldError{{Pointer: ptr(index, field), Rule: rule, Detail: e.Detail}}
	}
	return e
}

var opPrefix = regexp.MustCompile(`^op \d+: `)

// reservedWriters names, for each reserved type, the only path that may
// write it: a client could otherwise forge a RETRIEVED verdict or an
// effect already "sent".
var reservedWriters = map[string]string{
	TypeFetchVerdict: "the gate (POST .../fetches)",
	TypeEffect:       "the outbox (POST .../effects)",
}

// gateOwned are the types of the gate's outputs other than fetch_verdict
// (which is reserved outright): a client may record one, but once it
// exists only a gate path (POST .../tool-results) supersedes it. Without
// this a tool_error poison root would become a confirmed claim with one
// plain put of the same id.
var gateOwned = map[string]string{
	"tool_error":  "the tool-results path (POST .../tool-results)",
	"tool_output": "the tool-results path (POST .../tool-results)",
}

// reservedType returns a refusal when a client names a reserved type.
func reservedType(typ, pointer string) error {
	writer, ok := reservedWriters[typ]
	if !ok {
		return nil
	}
	return &fault.Error{Code: fault.ReservedType, Detail: fmt.Sprintf("%s is reserved: only %s writes it", typ, writer),
		Errors: []fault.FieldError{{Pointer: pointer, Rule: "reserved", Detail: "reserved type"}}}
}

// reservedCheck returns a commit check that refuses any op writing,
// overwriting or deleting an artifact of a reserved type other than
// allowed ("" allows none), or linking or unlinking an edge from one (an
// effect's provenance is what the outbox recorded with it). It runs
// inside the commit pipeline on the state after the ops, so it also sees
// artifacts written by earlier commits.
func reservedCheck(allowed string) func(*graph.State, []graph.Change) error {
	return func(st *graph.State, changes []graph.Change) error {
		for i, ch := range changes {
			if ch.Noop {
				continue
			}
			if ch.Op.Op == graph.OpLink || ch.Op.Op == graph.OpUnlink {
				from := st.Artifact(ch.Op.From)
				if from == nil || reservedWriters[from.Type] == "" || from.Type == allowed {
					continue
				}
				detail := fmt.Sprintf("clients cannot %s an edge from the %s %q: only %s writes its edges", ch.Op.Op, from.Type, ch.Op.From, reservedWriters[from.Type])
				return &indexedError{index: i, field: "/from", err: &fault.Error{Code: fault.ReservedType, Detail: detail, Errors: []fault.FieldError{{Rule: "reserved"}}}}
			}
			if err := effectIDCheck(i, ch); err != nil {
				return err
			}
			var what, field, typ string
			switch {
			case ch.Next != nil && reservedWriters[ch.Next.Type] != "" && ch.Next.Type != allowed:
				what, field, typ = "write", "/type", ch.Next.Type
			case ch.Prev != nil && reservedWriters[ch.Prev.Type] != "" && ch.Prev.Type != allowed && ch.Op.Op == graph.OpPut:
				what, field, typ = "overwrite", "/id", ch.Prev.Type
			case ch.Prev != nil && reservedWriters[ch.Prev.Type] != "" && ch.Prev.Type != allowed && ch.Op.Op == graph.OpDelete:
				what, field, typ = "delete", "/id", ch.Prev.Type
			case ch.Prev != nil && gateOwned[ch.Prev.Type] != "" && (ch.Op.Op == graph.OpPut || ch.Op.Op == graph.OpDelete):
				what = "overwrite"
				if ch.Op.Op == graph.OpDelete {
					what = "delete"
				} else if ch.Next.Type != ch.Prev.Type {
					what = "retype"
				}
				detail := fmt.Sprintf("clients cannot %s the %s %q: a gate output is superseded only by a new gate result from %s", what, ch.Prev.Type, ch.Op.ID, gateOwned[ch.Prev.Type])
				return &indexedError{index: i, field: "/id", err: &fault.Error{Code: fault.ReservedType, Detail: detail, Errors: []fault.FieldError{{Rule: "gate_owned"}}}}
			default:
				continue
			}
			detail := fmt.Sprintf("clients cannot %s a %s (%q): only %s writes it", what, typ, ch.Op.ID, reservedWriters[typ])
			return &indexedError{index: i, field: field, err: &fault.Error{Code: fault.ReservedType, Detail: detail, Errors: []fault.FieldError{{Rule: "reserved"}}}}
		}
		return nil
	}
}

// effectIDCheck refuses a put of an artifact that is not an effect at an
// id of the outbox's (EffectID: effect: and 32 hex digits of a key's
// digest): it would take the id of the effect that key names, and the
// outbox could never record it.
func effectIDCheck(i int, ch graph.Change) error {
	if ch.Op.Op != graph.OpPut || ch.Next == nil || ch.Next.Type == TypeEffect || !isEffectID(ch.Op.ID) {
		return nil
	}
	detail := fmt.Sprintf("ids of the form %s<32 hex digits> are the outbox's (an idempotency key's effect): a %s cannot take %q", effectPrefix, ch.Next.Type, ch.Op.ID)
	return &indexedError{index: i, field: "/id", err: &fault.Error{Code: fault.ReservedType, Detail: detail, Errors: []fault.FieldError{{Rule: "reserved"}}}}
}

// isEffectID reports whether id has the form of EffectID's ids.
func isEffectID(id string) bool {
	hex, ok := strings.CutPrefix(id, effectPrefix)
	if !ok || len(hex) != 32 {
		return false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// clientCheck is the commit check of every client write: no reserved type.
var clientCheck = reservedCheck("")

// commitMode resolves the quarantine mode of a write: the context's, or
// enforce when the request asks for it. A request cannot loosen enforce.
func (s *Service) commitMode(ctx context.Context, ctxID, asked string) (string, error) {
	info, err := s.st.GetContext(ctx, ctxID)
	if err != nil {
		return "", err
	}
	switch asked {
	case "", info.Quarantine:
		return "", nil
	case store.ModeEnforce:
		return store.ModeEnforce, nil
	}
	return "", &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("context %q enforces quarantine; a write cannot ask for %q", ctxID, asked),
		Errors: []fault.FieldError{{Pointer: "/quarantine", Rule: "cannot_loosen", Detail: "the context enforces quarantine"}}}
}

// commitError names the field of a write's refused commit that the
// refusal is about: a stale-parent refusal gets the current head and
// names /parent, or the If-Match header when the parent came from it
// (ifMatch); a not-found of the branch the body names, /branch.
func (s *Service) commitError(ctx context.Context, ctxID, branch string, ifMatch bool, err error) error {
	if !errors.Is(err, store.ErrStale) {
		return s.branchMissingAt(ctx, ctxID, branch, "/branch", err)
	}
	e := staleAt(err, ifMatch).(*fault.Error)
	if c, rerr := s.st.Resolve(ctx, ctxID, branch); rerr == nil {
		e.Extra = map[string]any{"head": c.ID}
	}
	return e
}

// checkIfMatch refuses, as commitError does, a gate write whose If-Match
// (ifMatch, nil for none) is not the head of branch before the write
// stores a blob or makes a fetch: the commit checks it again, so a write
// that lands meanwhile still makes it stale.
func (s *Service) checkIfMatch(ctx context.Context, ctxID, branch string, ifMatch *hashing.Digest) error {
	if ifMatch == nil || checkBranchField(branch, "/branch") != nil {
		return nil // the write refuses a bad branch name itself
	}
	c, err := s.st.Resolve(ctx, ctxID, branch)
	if err != nil || c.ID == *ifMatch {
		return nil // a missing branch is the write's refusal too
	}
	name := branch
	if name == "" {
		name = store.DefaultBranch
	}
	// commitError's refusal, with the head this read found.
	e := staleAt(fmt.Errorf("%w: parent %s is not the head of %q (head is %s)", store.ErrStale, ifMatch.Short(), name, c.ID.Short()), true).(*fault.Error)
	e.Extra = map[string]any{"head": c.ID}
	return e
}

// DerivedID is the id the server gives an artifact sent without one.
func DerivedID(typ string, contentHash hashing.Digest) string {
	return typ + ":" + contentHash.Hex()[:16]
}

// PutArtifact is the one-call write with the client's rules: the data is
// canonicalized and validated against its type's schema, reserved types
// are refused, and the artifact and its edges are committed atomically.
// Errors are *fault.Error values.
func (s *Service) PutArtifact(ctx context.Context, ctxID string, in ArtifactInput) (*ArtifactWrite, error) {
	return s.putArtifactGo(ctx, ctxID, in, false, nil, nil)
}

// GatePutArtifact is PutArtifact for the gate: it may write reserved types
// (fetch_verdict). No client request reaches it; POST .../fetches reaches
// it through RecordFetch. A fetch_verdict is refused (422) unless its data
// bears out its verdict: a gate/v1 receipt that the verdict repeats, a
// body_blob that is the receipt's body_sha256 and is stored with the
// receipt's size, and, for RETRIEVED, the same verdict classified again
// from that blob and receipt (see verifyVerdict). A fetch_verdict never
// replaces an artifact of another type (409).
func (s *Service) GatePutArtifact(ctx context.Context, ctxID string, in ArtifactInput) (*ArtifactWrite, error) {
	if in.Type == TypeFetchVerdict {
		if err := s.verifyVerdict(ctx, ctxID, in.Data, true); err != nil {
			return nil, err
		}
	}
	return s.putArtifactGo(ctx, ctxID, in, true, nil, nil)
}

// heldBlobs are the blobs a gate write makes its context hold with its
// artifact's commit (a tool output's full text, a fetched body): their
// bytes are stored in the commit's own write (store.CommitRequest.BlobData)
// and the context comes to hold them with it, so a refused write stores
// none of them and leaves the context holding nothing new.
type heldBlobs struct {
	blobs, spills []hashing.Digest
	data          [][]byte // the bytes of blobs, in order
}

// put keeps data as a blob the write's commit stores and makes the
// context hold, and returns its digest.
func (h *heldBlobs) put(data []byte) hashing.Digest {
	d := hashing.Sum(data)
	if !slices.Contains(h.blobs, d) {
		h.blobs = append(h.blobs, d)
		h.data = append(h.data, data)
	}
	return d
}

// putArtifactGo writes in (gate: with the gate's rules); held, when not
// nil, are blobs its commit makes the context hold.
func (s *Service) putArtifactGo(ctx context.Context, ctxID string, in ArtifactInput, gate bool, held *heldBlobs, ifMatch *hashing.Digest) (*ArtifactWrite, error) {
	canon, err := hashing.CanonicalizeObject(in.Data)
	if err != nil {
		return nil, classifyAt(err, "/data")
	}
	in.Data = canon
	for i, e := range in.Edges {
		if len(e.Attrs) == 0 {
			continue
		}
		if in.Edges[i].Attrs, err = hashing.CanonicalizeObject(e.Attrs); err != nil {
			return nil, classifyAt(err, "/edges/"+strconv.Itoa(i)+"/attrs")
		}
	}
	doc, err := hashing.DecodeCanonical(canon)
	if err != nil {
		return nil, err
	}
	parent := ifMatch
	if in.Parent != "" {
		d, err := ParseParent(in.Parent)
		if err != nil {
			return nil, err
		}
		parent = &d
	}
	return s.writeArtifact(ctx, ctxID, &in, doc, parent, gate, held)
}

// ParseParent reads the parent commit a write expects its branch's head
// to be: a full commit id, with or without its "sha256:" prefix, as the
// request schemas admit. The error is a 422 naming /parent.
func ParseParent(v string) (hashing.Digest, error) {
	if !strings.HasPrefix(v, "sha256:") {
		v = "sha256:" + v
	}
	d, err := hashing.ParseDigest(v)
	if err != nil {
		return d, &fault.Error{Code: fault.Invalid, Detail: "parent must be a full commit id",
			Errors: []fault.FieldError{{Pointer: "/parent", Rule: "commit_id", Detail: "want sha256:<64 lower-case hex digits>"}}}
	}
	return d, nil
}

// classifyAt classifies a canonicalisation error found in a member of the
// request, prefixing its pointer.
func classifyAt(err error, prefix string) error {
	e := Classify(err)
	for i := range e.Errors {
		e.Errors[i].Pointer = prefix + e.Errors[i].Pointer
	}
	return e
}

// PutDecoded is PutArtifact for a door that has already canonicalized
// the request: in.Data is canonical JSON, data is the same value decoded
// for schema validation (hashing.DecodeCanonical) and parent is the
// parsed in.Parent (nil for none). Its rules and errors are PutArtifact's.
func (s *Service) PutDecoded(ctx context.Context, ctxID string, in *ArtifactInput, data any, parent *hashing.Digest) (*ArtifactWrite, error) {
	return s.writeArtifact(ctx, ctxID, in, data, parent, false, nil)
}

// writeArtifact commits one artifact and its edges. in.Data is canonical
// and data is the same value decoded for schema validation.
func (s *Service) writeArtifact(ctx context.Context, ctxID string, in *ArtifactInput, data any, parent *hashing.Digest, gate bool, held *heldBlobs) (*ArtifactWrite, error) {
	if err := checkBranchField(in.Branch, "/branch"); err != nil {
		return nil, err
	}
	if err := checkLabel(in.ProducedBy, "/produced_by", "produced_by"); err != nil {
		return nil, err
	}
	if !gate || in.Type != TypeFetchVerdict {
		if err := reservedType(in.Type, "/type"); err != nil {
			return nil, err
		}
	}
	if err := s.types.Refresh(ctx, s.st); err != nil {
		return nil, err
	}
	use := typeUse{}
	if err := s.types.validateIn(use, in.Type, data, "/data"); err != nil {
		return nil, err
	}
	if s.validated != nil {
		s.validated()
	}
	mode, err := s.commitMode(ctx, ctxID, in.Quarantine)
	if err != nil {
		return nil, err
	}
	id := in.ID
	if id == "" {
		id = DerivedID(in.Type, hashing.ContentHash(in.Data))
	}
	ops := make([]graph.Op, 0, 1+len(in.Edges))
	ops = append(ops, graph.Op{Op: graph.OpPut, ID: id, Type: in.Type, ProducedBy: in.ProducedBy, Data: in.Data})
	for _, e := range in.Edges {
		ops = append(ops, graph.Op{Op: graph.OpLink, From: id, Rel: e.Rel, To: e.To, Attrs: e.Attrs})
	}
	author := in.ProducedBy
	if author == "" {
		author = "api"
	}
	req := store.CommitRequest{
		Context: ctxID, Branch: in.Branch, Parent: parent, Author: author,
		Message: "put " + id, Ops: ops, Mode: mode,
	}
	req.Types, req.Relations = s.types.definitions(ops, use)
	if held != nil {
		req.BlobData, req.Spills = held.data, held.spills
	}
	req.Check = clientCheck
	if gate {
		req.Check = gateCheck
	}
	res, err := s.st.Commit(ctx, req)
	if err != nil {
		err = s.commitError(ctx, ctxID, in.Branch, parent != nil && in.Parent == "", err)
		return nil, locate(err, func(i int, field string) string {
			if i == 0 {
				return field
			}
			if field == "/from" {
				field = ""
			}
			return "/edges/" + strconv.Itoa(i-1) + field
		})
	}
	if res.Noop && held != nil {
		// The artifact was there already: the context holds its blobs as
		// the write that made it did (or does now: a client's own record
		// of a gate output may name bytes no context held, or none
		// stored).
		for _, data := range held.data {
			if _, err := s.st.PutContextBlob(ctx, ctxID, data); err != nil {
				return nil, err
			}
		}
	}
	s.countWrite(res.Noop)
	out := &ArtifactWrite{Commit: res.Commit.ID, ContextHash: res.Commit.ContextHash, Noop: res.Noop, Tainted: taintViews(res.Tainted)}
	var put *graph.Artifact
	if len(res.Changes) > 0 {
		if put = res.Changes[0].Next; put == nil {
			// A no-op put: the artifact is unchanged.
			put = &graph.Artifact{ID: id, Type: in.Type, Version: res.Changes[0].Op.Version, ContentHash: res.Changes[0].Op.ContentHash, ProducedBy: in.ProducedBy}
		}
	}
	out.Artifact = ArtifactView{ID: id, Type: in.Type, ProducedBy: in.ProducedBy, Data: in.Data}
	if put != nil {
		out.Artifact.Version, out.Artifact.ContentHash = put.Version, put.ContentHash
	}
	if t, ok := s.newArtifactTrust(id, in, res); ok {
		out.Artifact.Trust, out.TrustAt = &t, res.Commit.ID
		return out, nil
	}
	// Otherwise read the trust at the head (which waits for the commit
	// group in flight, if any, to be durable).
	err = s.st.Read(ctx, ctxID, in.Branch, func(v *store.View) error {
		t := v.Trust.Explain(v.State, id)
		out.Artifact.Trust, out.TrustAt = &t, v.Commit.ID
		return nil
	})
	if err != nil {
		s.log.Warn("read trust after write", "context", ctxID, "err", err)
	}
	return out, nil
}

// newArtifactTrust decides, without reading the state, the trust of an
// artifact that a one-call write just created: every dependency edge it
// has is new in this commit, so the store judged each of them
// (res.Tainted, or a refusal in enforce mode). It is a poison root when
// its base is false, confirmed when its base is true and no new edge of it
// rests on an unconfirmed artifact, exactly as TrustIndex.Explain would say
// at res.Commit. Updates of existing artifacts and quarantined results
// (whose path needs the graph) are left to a read: ok is false.
func (s *Service) newArtifactTrust(id string, in *ArtifactInput, res store.CommitResult) (graph.Trust, bool) {
	if res.Noop || len(res.Changes) == 0 {
		return graph.Trust{}, false
	}
	ch := res.Changes[0]
	if ch.Noop || ch.Next == nil || ch.Prev != nil {
		return graph.Trust{}, false
	}
	base := graph.RoleBase(s.types.RoleOf, nil)
	if ok, reason := base(&graph.Artifact{ID: id, Type: in.Type, Data: in.Data}); !ok {
		return graph.Trust{ID: id, Status: graph.StatusPoisonRoot, Reason: reason}, true
	}
	for _, te := range res.Tainted {
		if te.Edge.From == id {
			return graph.Trust{}, false
		}
	}
	return graph.Trust{ID: id, Status: graph.StatusConfirmed}, true
}

func taintViews(ts []*graph.TaintError) []TaintView {
	if len(ts) == 0 {
		return nil
	}
	out := make([]TaintView, len(ts))
	for i, t := range ts {
		out[i] = taintView(t)
	}
	return out
}

func (s *Service) countWrite(noop bool) {
	if noop {
		s.noops.Add(1)
	} else {
		s.commits.Add(1)
	}
}

// Commit applies a general commit with the client's rules (see
// handleCommit). Errors are *fault.Error values.
func (s *Service) Commit(ctx context.Context, ctxID string, in CommitInput) (*CommitWrite, error) {
	docs := make([]any, len(in.Ops))
	for i := range in.Ops {
		op := &in.Ops[i]
		if op.Artifact != nil {
			canon, err := hashing.CanonicalizeObject(op.Artifact.Data)
			if err != nil {
				return nil, classifyAt(err, "/ops/"+strconv.Itoa(i)+"/artifact/data")
			}
			op.Artifact.Data = canon
			if docs[i], err = hashing.DecodeCanonical(canon); err != nil {
				return nil, err
			}
		}
	}
	var parent *hashing.Digest
	if in.Parent != "" {
		d, err := ParseParent(in.Parent)
		if err != nil {
			return nil, err
		}
		parent = &d
	}
	return s.commit(ctx, ctxID, &in, docs, parent)
}

// CommitDecoded is Commit for a door that has already canonicalized the
// request: each put's data is canonical JSON, docs[i] is op i's artifact
// data decoded for schema validation (nil for other ops) and parent is
// the parsed in.Parent. Its rules and errors are Commit's.
func (s *Service) CommitDecoded(ctx context.Context, ctxID string, in *CommitInput, docs []any, parent *hashing.Digest) (*CommitWrite, error) {
	return s.commit(ctx, ctxID, in, docs, parent)
}

// commit applies in; docs[i] is op i's artifact data decoded for schema
// validation.
func (s *Service) commit(ctx context.Context, ctxID string, in *CommitInput, docs []any, parent *hashing.Digest) (*CommitWrite, error) {
	if err := checkBranchField(in.Branch, "/branch"); err != nil {
		return nil, err
	}
	if err := s.types.Refresh(ctx, s.st); err != nil {
		return nil, err
	}
	use := typeUse{}
	ops := make([]graph.Op, len(in.Ops))
	for i, op := range in.Ops {
		at := "/ops/" + strconv.Itoa(i)
		switch op.Op {
		case graph.OpPut:
			a := op.Artifact
			if a == nil {
				return nil, &fault.Error{Code: fault.Invalid, Detail: "a put needs an artifact", Errors: []fault.FieldError{{Pointer: at + "/artifact", Rule: "required", Detail: "missing artifact"}}}
			}
			if err := reservedType(a.Type, at+"/artifact/type"); err != nil {
				return nil, err
			}
			if err := checkLabel(a.ProducedBy, at+"/artifact/produced_by", "produced_by"); err != nil {
				return nil, err
			}
			if err := s.types.validateIn(use, a.Type, docs[i], at+"/artifact/data"); err != nil {
				return nil, err
			}
			id := a.ID
			if id == "" {
				id = DerivedID(a.Type, hashing.ContentHash(a.Data))
			}
			ops[i] = graph.Op{Op: graph.OpPut, ID: id, Type: a.Type, ProducedBy: a.ProducedBy, Data: a.Data}
		case graph.OpDelete:
			ops[i] = graph.Op{Op: graph.OpDelete, ID: op.ID}
		case graph.OpLink, graph.OpUnlink:
			ops[i] = graph.Op{Op: op.Op, From: op.From, Rel: op.Rel, To: op.To, Attrs: op.Attrs}
		default:
			return nil, &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("unknown op %q", op.Op), Errors: []fault.FieldError{{Pointer: at + "/op", Rule: "enum", Detail: "want put, delete, link or unlink"}}}
		}
	}
	if s.validated != nil {
		s.validated()
	}
	mode, err := s.commitMode(ctx, ctxID, in.Quarantine)
	if err != nil {
		return nil, err
	}
	if err := checkLabel(in.Author, "/author", "author"); err != nil {
		return nil, err
	}
	author := in.Author
	if author == "" {
		author = "api"
	}
	types, rels := s.types.definitions(ops, use)
	res, err := s.st.Commit(ctx, store.CommitRequest{
		Context: ctxID, Branch: in.Branch, Parent: parent, Author: author, Message: in.Message,
		Ops: ops, Mode: mode, Check: clientCheck, Types: types, Relations: rels,
	})
	if err != nil {
		err = s.commitError(ctx, ctxID, in.Branch, parent != nil && in.Parent == "", err)
		return nil, locate(err, func(i int, field string) string {
			at := "/ops/" + strconv.Itoa(i)
			if i < len(in.Ops) && in.Ops[i].Op == graph.OpPut && field != "" {
				return at + "/artifact" + field
			}
			return at + field
		})
	}
	s.countWrite(res.Noop)
	return &CommitWrite{
		Commit: res.Commit.ID, Parents: nonNil(res.Commit.Parents), ContextHash: res.Commit.ContextHash,
		Noop: res.Noop, Ops: recordedOps(res), Tainted: taintViews(res.Tainted),
	}, nil
}

// recordedOps is how many ops a commit recorded: none for a no-op (whose
// Commit is the unchanged head).
func recordedOps(res store.CommitResult) int {
	if res.Noop {
		return 0
	}
	return res.Commit.NumOps
}
