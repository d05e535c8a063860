package httpapi

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// Page limits of list endpoints.
const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
)

// page is one page of a list. NextCursor is empty on the last page; pass
// it as ?cursor= (with the same query otherwise) for the next one.
type page[T any] struct {
	Commit     *hashing.Digest `json:"commit,omitempty"`
	Items      []T             `json:"items"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// encodeCursor makes an opaque cursor from the last key of a page.
func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

// pageParams reads ?limit= and ?cursor= (decoded to the key it names).
func pageParams(r *http.Request) (int, string, error) {
	limit, err := intQuery(r, "limit", defaultPageLimit, 1, maxPageLimit)
	if err != nil {
		return 0, "", err
	}
	c := r.URL.Query().Get("cursor")
	if c == "" {
		return limit, "", nil
	}
	key, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(key) == 0 {
		return 0, "", &Error{Code: CodeInvalidQuery, Detail: "cursor is not one this server returned",
			Errors: []FieldError{{Parameter: "cursor", Rule: "cursor", Detail: "malformed cursor"}}}
	}
	return limit, string(key), nil
}

func pathEscape(s string) string { return url.PathEscape(s) }

// idParam returns the {id} path parameter as an artifact id.
func idParam(r *http.Request) (string, error) {
	id, err := urlParam(r, "id")
	if err != nil {
		return "", err
	}
	if graph.ValidateID(id) != nil {
		return "", service.NotFoundParam("id", fmt.Sprintf("no artifact %q", id))
	}
	return id, nil
}

func artifactView(a *graph.Artifact) ArtifactView {
	return ArtifactView{ID: a.ID, Type: a.Type, Version: a.Version, ContentHash: a.ContentHash, ProducedBy: a.ProducedBy}
}

func missingArtifact(id string, c *replay.Commit) error {
	return service.NotFoundParam("id", fmt.Sprintf("no artifact %q at commit %s", id, c.ID.Short()))
}

// handleListArtifacts is GET /v1/contexts/{ctx}/artifacts: artifacts sorted
// by id with their trust status (no data), ?type= filter, cursor pages.
func (s *Server) handleListArtifacts(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	typ := r.URL.Query().Get("type")
	s.readView(w, r, func(v *store.View) (any, error) {
		// From the cursor's place: a page of a big state reads about the
		// page, not every id before it (State.ArtifactsAfter). A type
		// filter reads on until the page is full, but not past the
		// state's last artifact of the type when the walk started at the
		// first (the state counts its types from its index), and not at
		// all for a type the state does not hold.
		out := page[ArtifactView]{Commit: &v.Commit.ID, Items: []ArtifactView{}}
		left := -1 // artifacts of the type still to come, when known
		if typ != "" {
			n := v.State.TypeCounts()[typ]
			if n == 0 {
				return out, nil
			}
			if cursor == "" {
				left = n
			}
		}
		for a := range v.State.ArtifactsAfter(cursor) {
			if left == 0 {
				break
			}
			if typ != "" && a.Type != typ {
				continue
			}
			if len(out.Items) == limit {
				out.NextCursor = encodeCursor(out.Items[limit-1].ID)
				break
			}
			av := artifactView(a)
			av.Trust = &graph.Trust{ID: a.ID, Status: v.Trust.Status(a.ID)}
			out.Items = append(out.Items, av)
			if left > 0 {
				left--
			}
		}
		return out, nil
	})
}

// handleGetArtifact is GET /v1/contexts/{ctx}/artifacts/{id}: the artifact
// with its data, trust and the commit that wrote this version.
func (s *Server) handleGetArtifact(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctxID, _ := ctxParam(r)
	s.readView(w, r, func(v *store.View) (any, error) { return s.svc.ArtifactAt(r.Context(), ctxID, v, id) })
}

// resolveAt resolves ?at= to a commit and handles the ETag; ok is false
// when the response was written (error or 304).
func (s *Server) resolveAt(w http.ResponseWriter, r *http.Request, param string) (string, *replay.Commit, string, bool) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return "", nil, "", false
	}
	at := r.URL.Query().Get(param)
	if err := service.CheckRef(param, at); err != nil {
		s.writeError(w, r, err)
		return "", nil, "", false
	}
	c, err := s.st.Resolve(r.Context(), ctxID, at)
	if err != nil {
		s.writeError(w, r, service.NameRef(err, param))
		return "", nil, "", false
	}
	etag := etagFor(c.ID, r, "")
	setCache(w, fixedRef(at, c.ID))
	// "*" waits for the caller's read: what it reads at c may not exist.
	if notModifiedEarly(r, etag) {
		s.respondRead(w, r, etag, nil, NotModified{})
		return "", nil, "", false
	}
	return ctxID, c, etag, true
}

// handleHistory is GET /v1/contexts/{ctx}/artifacts/{id}/history: the
// versions of an artifact along first parents from ?at=, newest first.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctxID, c, etag, ok := s.resolveAt(w, r, "at")
	if !ok {
		return
	}
	vs, err := s.st.History(r.Context(), ctxID, c, id)
	if err != nil {
		s.respondRead(w, r, etag, nil, err)
		return
	}
	s.respondRead(w, r, etag, map[string]any{"id": id, "commit": c.ID, "versions": vs}, nil)
}

// handleRelated is GET /v1/contexts/{ctx}/artifacts/{id}/related?rel=&dir=.
func (s *Server) handleRelated(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	dir, err := graph.ParseDirection(q.Get("dir"))
	if err != nil {
		s.writeError(w, r, &Error{Code: CodeInvalidQuery, Detail: "dir must be out, in or both",
			Errors: []FieldError{{Parameter: "dir", Rule: "enum", Detail: "want out, in or both"}}})
		return
	}
	rel := q.Get("rel")
	s.readView(w, r, func(v *store.View) (any, error) {
		if rel != "" && !v.State.Relations().Known(rel) {
			return nil, &Error{Code: CodeInvalidQuery, Detail: fmt.Sprintf("unknown relation %q; known: %s", rel, strings.Join(v.State.Relations().Names(), ", ")),
				Errors: []FieldError{{Parameter: "rel", Rule: "enum", Detail: "unknown relation"}}}
		}
		if v.State.Artifact(id) == nil {
			return nil, missingArtifact(id, v.Commit)
		}
		edges := graph.Related(v.State, id, rel, dir)
		return map[string]any{"id": id, "commit": v.Commit.ID, "dir": dir.String(), "edges": nonNil(edges)}, nil
	})
}

// handleProvenance is GET /v1/contexts/{ctx}/artifacts/{id}/provenance:
// the subgraph reached from the artifact by following its edges outward,
// as JSON, Mermaid or Graphviz DOT.
func (s *Server) handleProvenance(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	depth, err := intQuery(r, "depth", -1, -1, graph.MaxProvenanceDepth)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	maxNodes, err := intQuery(r, "max_nodes", graph.DefaultMaxNodes, 1, graph.MaxProvenanceNodes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	format, err := enumQuery(r, "format", service.FormatJSON, service.FormatMermaid, service.FormatDOT)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.readView(w, r, func(v *store.View) (any, error) {
		p, err := service.ProvenanceAt(v, id, service.ProvenanceQuery{Depth: depth, MaxNodes: maxNodes, Format: format})
		switch {
		case err != nil:
			return nil, err
		case format == service.FormatMermaid:
			return textBody{"text/vnd.mermaid; charset=utf-8", p.Text}, nil
		case format == service.FormatDOT:
			return textBody{"text/vnd.graphviz; charset=utf-8", p.Text}, nil
		}
		return p, nil
	})
}

// edgeKey is the cursor key of an edge (ids and relations hold no NUL).
func edgeKey(e *graph.Edge) string { return e.From + "\x00" + e.Rel + "\x00" + e.To }

// cursorEdge is the edge key a cursor of the edge list names (edgeKey;
// the zero key for none). A cursor of fewer parts names the key its parts
// begin: the edges after it are those whose edgeKey sorts after it.
func cursorEdge(cursor string) graph.EdgeKey {
	from, rest, _ := strings.Cut(cursor, "\x00")
	rel, to, _ := strings.Cut(rest, "\x00")
	return graph.EdgeKey{From: from, Rel: rel, To: to}
}

// handleListEdges is GET /v1/contexts/{ctx}/edges: edges sorted by (from,
// rel, to), with ?from= ?rel= ?to= filters and cursor pages.
func (s *Server) handleListEdges(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	from, rel, to := q.Get("from"), q.Get("rel"), q.Get("to")
	s.readView(w, r, func(v *store.View) (any, error) {
		// Every edge, or those leaving or reaching one artifact, from the
		// cursor's place: a page of a big state reads about the page
		// (State.EdgesAfter, State.OutAfter), or the artifact's edges in
		// (State.InAfter) — never the whole state to find a few.
		after := cursorEdge(cursor)
		var edges iter.Seq[*graph.Edge]
		switch {
		case from != "":
			edges = v.State.OutAfter(from, after)
		case to != "":
			edges = v.State.InAfter(to, after)
		default:
			edges = v.State.EdgesAfter(after)
		}
		out := page[*graph.Edge]{Commit: &v.Commit.ID, Items: []*graph.Edge{}}
		for e := range edges {
			if (rel != "" && e.Rel != rel) || (to != "" && e.To != to) {
				continue
			}
			if len(out.Items) == limit {
				out.NextCursor = encodeCursor(edgeKey(out.Items[limit-1]))
				break
			}
			out.Items = append(out.Items, e)
		}
		return out, nil
	})
}

// stateArtifact is one artifact of the state export.
type stateArtifact struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Version     int64           `json:"version"`
	ProducedBy  string          `json:"produced_by"`
	ContentHash hashing.Digest  `json:"content_hash"`
	Data        json.RawMessage `json:"data"`
}

// handleState is GET /v1/contexts/{ctx}/state: every artifact (with data,
// sorted by id) and every edge (sorted by from, rel, to) at ?at=, enough
// to recompute the context hash (docs/HASHING.md §7). The response is
// streamed: the store's lock is held only to take the sorted lists of
// (immutable) artifact and edge records, and each payload is read from the
// object store as it is written out. A failure mid-stream aborts the
// connection, so a client never sees a truncated export as complete.
func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	at := r.URL.Query().Get("at")
	if err := service.CheckRef("at", at); err != nil {
		s.writeError(w, r, err)
		return
	}
	var (
		arts   []*graph.Artifact
		edges  []*graph.Edge
		commit *replay.Commit
		etag   string
	)
	err = s.st.Read(r.Context(), ctxID, at, func(v *store.View) error {
		etag = etagFor(v.Commit.ID, r, "")
		setCache(w, fixedRef(at, v.Commit.ID))
		if err := Preconditions(r, etag); err != nil {
			return err
		}
		arts, edges, commit = v.State.Artifacts(), v.State.Edges(), v.Commit
		return nil
	})
	if err != nil {
		s.respondRead(w, r, etag, nil, service.NameRef(err, "at"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("ETag", etag)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // net/http would drop every byte: read no payload for it
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	abort := func(what string, err error) {
		s.log.Error("state export aborted", "context", ctxID, "commit", commit.ID.Short(), "what", what, "err", err)
		panic(http.ErrAbortHandler)
	}
	head, _ := json.Marshal(struct {
		Commit      hashing.Digest `json:"commit"`
		ContextHash hashing.Digest `json:"context_hash"`
	}{commit.ID, commit.ContextHash})
	_, _ = bw.Write(head[:len(head)-1])
	_, _ = bw.WriteString(`,"artifacts":[`)
	for i, a := range arts {
		if i%256 == 0 && r.Context().Err() != nil {
			abort("client gone", r.Context().Err())
		}
		data := a.Data
		if data == nil {
			if data, err = s.st.Object(r.Context(), a.ContentHash); err != nil {
				abort("artifact "+a.ID, err)
			}
		}
		raw, err := marshal(stateArtifact{a.ID, a.Type, a.Version, a.ProducedBy, a.ContentHash, data})
		if err != nil {
			abort("artifact "+a.ID, err)
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(raw[:len(raw)-1]); err != nil {
			abort("write", err)
		}
	}
	s.metrics.stateExport.Add(float64(len(arts)))
	_, _ = bw.WriteString(`],"edges":[`)
	for i, e := range edges {
		raw, err := marshal(e)
		if err != nil {
			abort("edge "+e.Key().String(), err)
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(raw[:len(raw)-1]); err != nil {
			abort("write", err)
		}
	}
	_, _ = bw.WriteString("]}\n")
	if err := bw.Flush(); err != nil {
		abort("flush", err)
	}
}

// handleHash is GET /v1/contexts/{ctx}/hash.
func (s *Server) handleHash(w http.ResponseWriter, r *http.Request) {
	_, c, etag, ok := s.resolveAt(w, r, "at")
	if !ok {
		return
	}
	s.respondRead(w, r, etag, map[string]any{
		"commit": c.ID, "context_hash": c.ContextHash, "artifacts": c.Artifacts, "edges": c.Edges,
	}, nil)
}

// handleQuarantine is GET /v1/contexts/{ctx}/quarantine: poison roots,
// quarantined artifacts with their roots and a path, and the blast radius.
func (s *Server) handleQuarantine(w http.ResponseWriter, r *http.Request) {
	s.readView(w, r, func(v *store.View) (any, error) { return service.QuarantineOf(v), nil })
}

// handleEval is GET /v1/contexts/{ctx}/eval?at=.
func (s *Server) handleEval(w http.ResponseWriter, r *http.Request) {
	ctxID, _ := ctxParam(r)
	s.readView(w, r, func(v *store.View) (any, error) { return s.svc.Eval(r.Context(), ctxID, v), nil })
}

// handleDiff is GET /v1/contexts/{ctx}/diff?from=&to=: what changed from
// one commit to another (to defaults to main): artifacts added, removed and
// changed, edges, and the artifacts whose trust status changed
// (store.Diff, the same result as `artifactd diff --json`). With
// ?data=true every changed artifact also carries "data": the JSON
// pointers whose values differ, with old and new values
// (service.DiffWithData).
func (s *Server) handleDiff(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	data, err := enumQuery(r, "data", "false", "true")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	withData := data == "true"
	sides, err := s.svc.DiffSides(r.Context(), ctxID, q.Get("from"), q.Get("to"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	etag := etagFor(sides[1].ID, r, sides[0].ID.String())
	setCache(w, fixedRef(q.Get("from"), sides[0].ID) && fixedRef(q.Get("to"), sides[1].ID))
	if err := Preconditions(r, etag); err != nil {
		s.respondRead(w, r, etag, nil, err)
		return
	}
	d, err := s.st.Diff(r.Context(), ctxID, sides[0], sides[1])
	if err == nil && withData {
		var out *service.DiffWithData
		out, err = s.svc.DiffData(r.Context(), ctxID, sides, d)
		s.respondRead(w, r, etag, out, err)
		return
	}
	if err != nil {
		s.respondRead(w, r, etag, nil, err)
		return
	}
	// Streamed: a diff of two big states lists millions of changes.
	s.respondRead(w, r, etag, jsonStream(func(w io.Writer) error { return service.WriteDiffJSON(w, d) }), nil)
}

// handleAudit is GET /v1/contexts/{ctx}/audit/{id}?format=json|markdown:
// everything an answer rests on, with trust and sources.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	id, err := idParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	format, err := enumQuery(r, "format", service.AuditJSON, service.AuditMarkdown)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.readView(w, r, func(v *store.View) (any, error) {
		rep, err := service.AuditAt(r.Context(), v, id)
		if err != nil {
			return nil, err
		}
		if format == service.AuditMarkdown {
			return textBody{"text/markdown; charset=utf-8", rep.Markdown()}, nil
		}
		return jsonStream(func(w io.Writer) error { return service.WriteAuditJSON(w, rep) }), nil
	})
}

// CommitView is a commit as the API shows it.
type CommitView struct {
	ID          hashing.Digest   `json:"id"`
	Parents     []hashing.Digest `json:"parents"`
	ContextHash hashing.Digest   `json:"context_hash"`
	OpsHash     hashing.Digest   `json:"ops_hash"`
	Author      string           `json:"author"`
	Message     string           `json:"message"`
	Time        string           `json:"time"`
	Seq         uint64           `json:"seq"`
	NumOps      int              `json:"num_ops"`
	Artifacts   int              `json:"artifacts"`
	Edges       int              `json:"edges"`
	// Ops are the recorded ops (GET /commits/{commit} only).
	Ops []graph.Op `json:"ops,omitempty"`
}

func commitView(c *replay.Commit) CommitView {
	return CommitView{ID: c.ID, Parents: nonNil(c.Parents), ContextHash: c.ContextHash, OpsHash: c.OpsHash,
		Author: c.Author, Message: c.Message, Time: c.Time, Seq: c.Seq, NumOps: c.NumOps, Artifacts: c.Artifacts, Edges: c.Edges}
}

// handleListCommits is GET /v1/contexts/{ctx}/commits: the first-parent
// log from ?at= (default main), newest first, in cursor pages.
func (s *Server) handleListCommits(w http.ResponseWriter, r *http.Request) {
	limit, cursor, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctxID, c, etag, ok := s.resolveAt(w, r, "at")
	if !ok {
		return
	}
	if cursor != "" {
		d, err := hashing.ParseDigest(cursor)
		if err == nil {
			c, err = s.st.GetCommit(r.Context(), ctxID, d)
		}
		if err != nil {
			s.writeError(w, r, &Error{Code: CodeInvalidQuery, Detail: "cursor does not name a commit of this context",
				Errors: []FieldError{{Parameter: "cursor", Rule: "cursor", Detail: "unknown commit"}}})
			return
		}
	}
	log, err := s.st.Log(r.Context(), ctxID, c, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := page[CommitView]{Items: make([]CommitView, 0, len(log))}
	for i, lc := range log {
		if i == limit {
			out.NextCursor = encodeCursor(lc.ID.String())
			break
		}
		out.Items = append(out.Items, commitView(lc))
	}
	s.respondRead(w, r, etag, out, nil)
}

// handleGetCommit is GET /v1/contexts/{ctx}/commits/{commit}: one commit
// (by id, unique prefix or branch) with its recorded ops.
func (s *Server) handleGetCommit(w http.ResponseWriter, r *http.Request) {
	ctxID, err := ctxParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ref, err := urlParam(r, "commit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := service.CheckRef("commit", ref); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.st.Resolve(r.Context(), ctxID, ref)
	if err != nil {
		s.writeError(w, r, service.NameRef(err, "commit"))
		return
	}
	etag := etagFor(c.ID, r, "")
	setCache(w, fixedRef(ref, c.ID))
	if err := Preconditions(r, etag); err != nil {
		s.respondRead(w, r, etag, nil, err)
		return
	}
	ops, err := s.st.Ops(r.Context(), ctxID, c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cv := commitView(c)
	cv.Ops = nonNil(ops)
	s.respondRead(w, r, etag, cv, nil)
}
