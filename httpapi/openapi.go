package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// opDoc is what the OpenAPI document says about one route.
type opDoc struct {
	id, summary, tag string
	// query lists the query parameters (see queryParams).
	query []string
	// body names the request body: a request schema ("artifact", …),
	// "bytes" for raw bytes, or "" for none.
	body string
	// status is the success status; result names the response schema in
	// components ("" for a free-form object); text lists non-JSON content
	// types the route may answer with instead.
	status int
	result string
	text   []string
}

// queryParams describes every query parameter the API takes.
var queryParams = map[string]map[string]any{
	"at":        {"description": "Commit id (sha256:<hex>, bare hex, or a unique prefix of at least 8 hex digits) or branch name; default main.", "schema": map[string]any{"type": "string"}},
	"limit":     {"description": "Page size (1-1000, default 100).", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
	"cursor":    {"description": "next_cursor of the previous page.", "schema": map[string]any{"type": "string"}},
	"type":      {"description": "Only artifacts of this type.", "schema": map[string]any{"type": "string"}},
	"rel":       {"description": "Only edges of this relation.", "schema": map[string]any{"type": "string"}},
	"dir":       {"description": "Edge direction relative to the artifact.", "schema": map[string]any{"enum": []string{"out", "in", "both"}}},
	"depth":     {"description": "Most edges away from the artifact (-1: no limit).", "schema": map[string]any{"type": "integer", "minimum": -1}},
	"max_nodes": {"description": "Most artifacts in the subgraph (default 500).", "schema": map[string]any{"type": "integer", "minimum": 1}},
	"format":    {"description": "Response format.", "schema": map[string]any{"type": "string"}},
	"from":      {"description": "Diff: the old commit or branch (required). Edges: only edges leaving this artifact.", "schema": map[string]any{"type": "string"}},
	"to":        {"description": "Diff: the new commit or branch (default main). Edges: only edges arriving at this artifact.", "schema": map[string]any{"type": "string"}},
	"status":    {"description": "Only effects with this status.", "schema": map[string]any{"enum": []string{"pending", "claimed", "sent", "failed"}}},
}

var (
	docHealthz         = opDoc{id: "healthz", summary: "Liveness", tag: "operations", status: 200}
	docReadyz          = opDoc{id: "readyz", summary: "Readiness: the store answers and the type registry is loaded", tag: "operations", status: 200}
	docMetrics         = opDoc{id: "metrics", summary: "Counters in the Prometheus text format", tag: "operations", status: 200, text: []string{"text/plain"}}
	docOpenAPI         = opDoc{id: "openapi", summary: "This document", tag: "operations", status: 200}
	docListContexts    = opDoc{id: "listContexts", summary: "List the contexts the token may read", tag: "contexts", query: []string{"limit", "cursor"}, status: 200, result: "ContextPage"}
	docCreateContext   = opDoc{id: "createContext", summary: "Create a context (with its main branch and an empty root commit)", tag: "contexts", body: "context", status: 201, result: "ContextInfo"}
	docDescribeContext = opDoc{id: "describeContext", summary: "Describe a context: branches, head, hash, counts, trust summary", tag: "contexts", query: []string{"at"}, status: 200}
	docCommit          = opDoc{id: "commit", summary: "One atomic commit of ops (200 with the unchanged head when every op is a no-op)", tag: "commits", body: "commit", status: 201, result: "CommitWrite"}
	docListCommits     = opDoc{id: "listCommits", summary: "First-parent history from a commit or branch, newest first", tag: "commits", query: []string{"at", "limit", "cursor"}, status: 200}
	docGetCommit       = opDoc{id: "getCommit", summary: "One commit with its recorded ops", tag: "commits", status: 200}
	docPutArtifact     = opDoc{id: "putArtifact", summary: "Write an artifact and its outgoing edges in one commit (200 when identical content is put again)", tag: "artifacts", body: "artifact", status: 201, result: "ArtifactWrite"}
	docListArtifacts   = opDoc{id: "listArtifacts", summary: "Artifacts sorted by id with their trust status", tag: "artifacts", query: []string{"at", "type", "limit", "cursor"}, status: 200}
	docGetArtifact     = opDoc{id: "getArtifact", summary: "One artifact with data and trust", tag: "artifacts", query: []string{"at"}, status: 200, result: "Artifact"}
	docHistory         = opDoc{id: "artifactHistory", summary: "Versions of an artifact, newest first", tag: "artifacts", query: []string{"at"}, status: 200}
	docRelated         = opDoc{id: "related", summary: "Edges of an artifact", tag: "artifacts", query: []string{"at", "rel", "dir"}, status: 200}
	docProvenance      = opDoc{id: "provenance", summary: "Provenance subgraph (json, mermaid or dot)", tag: "artifacts", query: []string{"at", "depth", "max_nodes", "format"}, status: 200, text: []string{"text/vnd.mermaid", "text/vnd.graphviz"}}
	docListEdges       = opDoc{id: "listEdges", summary: "Edges sorted by (from, rel, to)", tag: "state", query: []string{"at", "from", "rel", "to", "limit", "cursor"}, status: 200}
	docState           = opDoc{id: "state", summary: "The whole state (streamed): enough to recompute the context hash", tag: "state", query: []string{"at"}, status: 200, result: "State"}
	docHash            = opDoc{id: "hash", summary: "Context hash at a commit", tag: "state", query: []string{"at"}, status: 200}
	docQuarantine      = opDoc{id: "quarantine", summary: "Poison roots, quarantined artifacts, blast radius", tag: "state", query: []string{"at"}, status: 200, result: "Quarantine"}
	docDiff            = opDoc{id: "diff", summary: "Artifacts, edges and trust that changed between two commits", tag: "state", query: []string{"from", "to"}, status: 200}
	docAudit           = opDoc{id: "audit", summary: "What an answer rests on, with trust and sources (json or markdown)", tag: "state", query: []string{"at", "format"}, status: 200, text: []string{"text/markdown"}}
	docListBranches    = opDoc{id: "listBranches", summary: "Branches and their heads", tag: "branches", status: 200}
	docCreateBranch    = opDoc{id: "createBranch", summary: "Create a branch at any commit", tag: "branches", body: "branch", status: 201}
	docResetBranch     = opDoc{id: "resetBranch", summary: "Move a branch to any commit (checkout, rollback)", tag: "branches", body: "reset", status: 200}
	docMerge           = opDoc{id: "merge", summary: "Three-way merge of a branch or commit into a branch; conflicts reported all at once (409), settled by resolutions", tag: "branches", body: "merge", status: 201}
	docListTypes       = opDoc{id: "listTypes", summary: "Artifact types and relations", tag: "types", status: 200}
	docGetType         = opDoc{id: "getType", summary: "One artifact type", tag: "types", status: 200, result: "Type"}
	docPutType         = opDoc{id: "putType", summary: "Register or update a user type (admin on \"*\")", tag: "types", body: "type", status: 201, result: "Type"}
	docListRelations   = opDoc{id: "listRelations", summary: "Relations, built-in and user", tag: "types", status: 200}
	docGetRelation     = opDoc{id: "getRelation", summary: "One relation", tag: "types", status: 200, result: "Relation"}
	docPutRelation     = opDoc{id: "putRelation", summary: "Register or update a user relation (admin on \"*\")", tag: "types", body: "relation", status: 201, result: "Relation"}
	docEval            = opDoc{id: "eval", summary: "Structural evaluation: supported answers, quarantine share", tag: "contexts", status: 200}
	docVerify          = opDoc{id: "verify", summary: "Replay the stored chain and compare its context hash", tag: "contexts", body: "verify", status: 200, result: "Verify"}
	docFetch           = opDoc{id: "recordFetch", summary: "Classify fetch evidence (or, with perform, fetch the URL) and commit the fetch_verdict with its receipt; the body is stored as a blob", tag: "gate", body: "fetch", status: 201, result: "FetchWrite"}
	docToolResult      = opDoc{id: "recordToolResult", summary: "Sanitise a tool error or output for the model and commit it as tool_error / tool_output; the full masked text is stored as a blob", tag: "gate", body: "tool-result", status: 201, result: "ArtifactWrite"}
	docCreateEffect    = opDoc{id: "createEffect", summary: "Record an intended side effect as pending (200 with the recorded effect when the idempotency key is known)", tag: "outbox", body: "effect", status: 201, result: "EffectWrite"}
	docListEffects     = opDoc{id: "listEffects", summary: "Effects sorted by id with their status (a claimed effect whose lease expired counts as pending)", tag: "outbox", query: []string{"at", "status", "limit", "cursor"}, status: 200}
	docClaimEffects    = opDoc{id: "claimEffects", summary: "Lease up to limit pending (or lease-expired) effects to a worker, atomically", tag: "outbox", body: "claim", status: 200, result: "ClaimWrite"}
	docCompleteEffect  = opDoc{id: "completeEffect", summary: "The lease holder records the effect as sent, with its result (409 otherwise)", tag: "outbox", body: "complete", status: 200, result: "EffectWrite"}
	docFailEffect      = opDoc{id: "failEffect", summary: "The lease holder records a failed attempt: back to pending with retry, else failed (409 otherwise)", tag: "outbox", body: "fail", status: 200, result: "EffectWrite"}
	docPutBlob         = opDoc{id: "putBlob", summary: "Store raw bytes by SHA-256", tag: "blobs", body: "bytes", status: 201}
	docGetBlob         = opDoc{id: "getBlob", summary: "Read a blob", tag: "blobs", status: 200, text: []string{"application/octet-stream"}}
)

// resultSchemas are the response components named by opDoc.result.
var resultSchemas = map[string]string{
	"ContextInfo": `{"type":"object","required":["id","quarantine","created"],"properties":{"id":{"type":"string"},"quarantine":{"enum":["enforce","observe"]},"created":{"type":"string"}}}`,
	"ContextPage": `{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"$ref":"#/components/schemas/ContextInfo"}},"next_cursor":{"type":"string"}}}`,
	"Trust":       `{"type":"object","properties":{"id":{"type":"string"},"status":{"enum":["confirmed","quarantined","poison_root"]},"reason":{"type":"string"},"roots":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}`,
	"Artifact":    `{"type":"object","required":["id","type","version","content_hash","produced_by"],"properties":{"id":{"type":"string"},"type":{"type":"string"},"version":{"type":"integer"},"content_hash":{"type":"string"},"produced_by":{"type":"string"},"data":{"type":"object"},"trust":{"$ref":"#/components/schemas/Trust"},"written_in":{"type":"string"}}}`,
	"TaintedBy":   `{"type":"object","properties":{"edge":{"type":"object"},"roots":{"type":"array","items":{"type":"string"}},"reasons":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}`,
	"ArtifactWrite": `{"type":"object","required":["commit","context_hash","artifact"],"properties":{"commit":{"type":"string"},"context_hash":{"type":"string"},"noop":{"type":"boolean"},
	  "artifact":{"$ref":"#/components/schemas/Artifact"},"trust_at":{"type":"string"},"tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"CommitWrite": `{"type":"object","required":["commit","parents","context_hash"],"properties":{"commit":{"type":"string"},"parents":{"type":"array","items":{"type":"string"}},"context_hash":{"type":"string"},"noop":{"type":"boolean"},"ops":{"type":"integer"},
	  "tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"State": `{"type":"object","required":["commit","context_hash","artifacts","edges"],"properties":{"commit":{"type":"string"},"context_hash":{"type":"string"},
	  "artifacts":{"type":"array","items":{"type":"object","required":["id","type","version","produced_by","content_hash","data"]}},
	  "edges":{"type":"array","items":{"type":"object","required":["from","rel","to"],"properties":{"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"},"attrs":{"type":"object"}}}}}}`,
	"Quarantine": `{"type":"object","required":["poison_roots","quarantined","blast_radius"],"properties":{
	  "poison_roots":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"reason":{"type":"string"},"blast_radius":{"type":"integer"}}}},
	  "quarantined":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"roots":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}},
	  "blast_radius":{"type":"integer"}}}`,
	"FetchWrite": `{"type":"object","required":["verdict","body_blob","commit","context_hash","artifact"],"properties":{"verdict":{"enum":["RETRIEVED","FAILED","UNKNOWN"]},
	  "layer":{"enum":["transport","extraction","fingerprint"]},"reason":{"type":"string"},"body_blob":{"type":"string"},"rendered":{"type":"boolean"},"ignored":{"type":"array","items":{"type":"string"}},
	  "commit":{"type":"string"},"context_hash":{"type":"string"},"noop":{"type":"boolean"},"artifact":{"$ref":"#/components/schemas/Artifact"},"trust_at":{"type":"string"},
	  "tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"Effect": `{"type":"object","required":["id","version","content_hash","idempotency_key","kind","status","attempts"],"properties":{"id":{"type":"string"},"version":{"type":"integer"},"content_hash":{"type":"string"},
	  "idempotency_key":{"type":"string"},"kind":{"type":"string"},"target":{"type":"string"},"payload":{},"status":{"enum":["pending","claimed","sent","failed"]},"attempts":{"type":"integer"},
	  "worker":{"type":"string"},"lease_until":{"type":"string"},"lease_expired":{"type":"boolean"},"lease_token":{"type":"string","description":"only in a claim answer: what complete and fail must send"},"result":{},"last_error":{"type":"string"},"created_at":{"type":"string"},"updated_at":{"type":"string"}}}`,
	"EffectWrite": `{"type":"object","required":["effect","commit"],"properties":{"effect":{"$ref":"#/components/schemas/Effect"},"commit":{"type":"string"},"created":{"type":"boolean"}}}`,
	"ClaimWrite":  `{"type":"object","required":["effects"],"properties":{"effects":{"type":"array","items":{"$ref":"#/components/schemas/Effect"}},"commit":{"type":"string"}}}`,
	"Type": `{"type":"object","required":["name","version","role","schema","schema_hash","builtin"],"properties":{"name":{"type":"string"},"version":{"type":"integer"},"role":{"enum":["source","derived","fetch_verdict","never"]},
	  "description":{"type":"string"},"schema":{},"schema_hash":{"type":"string"},"builtin":{"type":"boolean"},"reserved":{"type":"boolean"}}}`,
	"Relation": `{"type":"object","required":["name","version","depends","builtin"],"properties":{"name":{"type":"string"},"version":{"type":"integer"},"depends":{"type":"boolean"},
	  "description":{"type":"string"},"builtin":{"type":"boolean"}}}`,
	"Verify": `{"type":"object","required":["match","context_hash","commit","commits","ops"],"properties":{"match":{"type":"boolean"},"context_hash":{"type":"string"},
	  "commit":{"type":"string"},"commits":{"type":"integer"},"ops":{"type":"integer"},"expected":{"type":"string"},"matches_commit":{"type":"string"}}}`,
	"Problem": `{"type":"object","required":["type","title","status","detail"],"properties":{"type":{"type":"string"},"title":{"type":"string"},"status":{"type":"integer"},"detail":{"type":"string"},"instance":{"type":"string"},
	  "errors":{"type":"array","items":{"type":"object","required":["pointer","rule","detail"],"properties":{"pointer":{"type":"string"},"parameter":{"type":"string"},"rule":{"type":"string"},"detail":{"type":"string"}}}},
	  "tainted_by":{"$ref":"#/components/schemas/TaintedBy"},"head":{"type":"string"},"cycle":{"type":"array","items":{"type":"string"}}}}`,
}

// requestComponent names the component schema of each request body.
var requestComponent = map[string]string{
	"artifact": "ArtifactRequest", "commit": "CommitRequest", "context": "ContextRequest",
	"branch": "BranchRequest", "reset": "ResetRequest", "type": "TypeRequest", "merge": "MergeRequest",
	"fetch": "FetchRequest", "tool-result": "ToolResultRequest", "effect": "EffectRequest",
	"claim": "ClaimRequest", "complete": "CompleteRequest", "fail": "FailRequest",
	"relation": "RelationRequest", "verify": "VerifyRequest",
}

var requestSources = map[string]string{
	"artifact": schemaArtifactRequest, "commit": schemaCommitRequest, "context": schemaContextRequest,
	"branch": schemaBranchRequest, "reset": schemaResetRequest, "type": schemaTypeRequest, "merge": schemaMergeRequest,
	"fetch": schemaFetchRequest, "tool-result": schemaToolResultRequest, "effect": schemaEffectRequest,
	"claim": schemaClaimRequest, "complete": schemaCompleteRequest, "fail": schemaFailRequest,
	"relation": schemaRelationRequest, "verify": schemaVerifyRequest,
}

var pathParamRE = regexp.MustCompile(`\{([a-z]+)\}`)

// OpenAPI returns the OpenAPI 3.1 document of the API, generated from the
// route table so that the two cannot drift (TestOpenAPICoversRoutes walks
// the router to make sure).
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		item := paths[rt.pattern]
		if item == nil {
			item = map[string]any{}
			paths[rt.pattern] = item
		}
		item[strings.ToLower(rt.method)] = operation(rt)
	}
	schemas := map[string]any{}
	for name, src := range resultSchemas {
		schemas[name] = mustJSON(src)
	}
	for key, name := range requestComponent {
		sch := mustJSON(requestSources[key]).(map[string]any)
		delete(sch, "$schema")
		if _, ok := sch["$defs"]; ok {
			// Refs resolve against the whole document: point them into
			// this component.
			raw, _ := json.Marshal(sch)
			raw = []byte(strings.ReplaceAll(string(raw), `"#/$defs/`, `"#/components/schemas/`+name+`/$defs/`))
			_ = json.Unmarshal(raw, &sch)
		}
		schemas[name] = sch
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "artifactd",
			"version":     "1",
			"description": "Versioned artifact-graph store for AI agents. Errors are RFC 9457 application/problem+json; problem types are " + ProblemTypePrefix + "<code> (docs/API.md).",
		},
		"jsonSchemaDialect": draft2020,
		"paths":             paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "Tokens with read, write or admin scope on context id patterns; only when the server has tokens."},
			},
			"responses": map[string]any{
				"Problem": map[string]any{
					"description": "An RFC 9457 problem.",
					"content":     map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}},
				},
			},
		},
	}
}

func operation(rt route) map[string]any {
	d := rt.doc
	op := map[string]any{"operationId": d.id, "summary": d.summary, "tags": []string{d.tag}}
	var params []any
	for _, m := range pathParamRE.FindAllStringSubmatch(rt.pattern, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"},
			"description": "Percent-encode / and other reserved characters."})
	}
	qs := append([]string(nil), d.query...)
	sort.Strings(qs)
	for _, q := range qs {
		p := map[string]any{"name": q, "in": "query"}
		for k, v := range queryParams[q] {
			p[k] = v
		}
		params = append(params, p)
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	switch {
	case d.body == "bytes":
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"*/*": map[string]any{"schema": map[string]any{"type": "string", "contentMediaType": "application/octet-stream"}}}}
	case d.body != "":
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + requestComponent[d.body]}}}}
	}
	okSchema := map[string]any{"type": "object"}
	if d.result != "" {
		okSchema = map[string]any{"$ref": "#/components/schemas/" + d.result}
	}
	content := map[string]any{"application/json": map[string]any{"schema": okSchema}}
	for _, t := range d.text {
		content[t] = map[string]any{"schema": map[string]any{"type": "string"}}
	}
	if d.id == "metrics" || d.id == "getBlob" {
		delete(content, "application/json")
	}
	responses := map[string]any{
		strconv.Itoa(d.status): map[string]any{"description": http.StatusText(d.status), "content": content},
		"default":              map[string]any{"$ref": "#/components/responses/Problem"},
	}
	if d.status == 201 {
		responses["200"] = map[string]any{"description": "Nothing changed (identical content, existing blob, unchanged type)", "content": content}
	}
	if len(d.query) > 0 && contains(d.query, "at") || d.id == "getCommit" || d.id == "getBlob" {
		responses["304"] = map[string]any{"description": "Not modified (If-None-Match matched the ETag)"}
	}
	op["responses"] = responses
	if rt.scope != ScopeNone {
		op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{}}
		op["x-scope"] = rt.scope.String()
	}
	return op
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func mustJSON(src string) any {
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		panic("httpapi: bad JSON in OpenAPI source: " + err.Error())
	}
	return v
}

var (
	openAPIOnce sync.Once
	openAPIRaw  []byte
)

// handleOpenAPI is GET /openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	openAPIOnce.Do(func() { openAPIRaw, _ = json.MarshalIndent(s.OpenAPI(), "", "  ") })
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIRaw)
}
