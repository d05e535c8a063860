package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/artifactd/artifactd/graph"
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
	// ifMatch marks a write that lands on a branch and evaluates an
	// If-Match header against its head (route.ifMatchSupported).
	ifMatch bool
}

// queryParams describes every query parameter the API takes.
var queryParams = map[string]map[string]any{
	"at":        {"description": "Commit id (sha256:<hex>, bare hex, or a unique prefix of at least 8 hex digits) or branch name; default main.", "schema": map[string]any{"type": "string"}},
	"limit":     {"description": "Page size (1-1000, default 100).", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
	"cursor":    {"description": "next_cursor of the previous page.", "schema": map[string]any{"type": "string"}},
	"type":      {"description": "Only artifacts of this type.", "schema": map[string]any{"type": "string"}},
	"rel":       {"description": "Only edges of this relation.", "schema": map[string]any{"type": "string"}},
	"dir":       {"description": "Edge direction relative to the artifact.", "schema": map[string]any{"enum": []string{"out", "in", "both"}}},
	"depth":     {"description": "Most edges away from the artifact (-1: no limit).", "schema": map[string]any{"type": "integer", "minimum": -1, "maximum": graph.MaxProvenanceDepth}},
	"max_nodes": {"description": "Most artifacts in the subgraph (default 500).", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": graph.MaxProvenanceNodes}},
	"format":    {"description": "Response format.", "schema": map[string]any{"type": "string"}},
	"from":      {"description": "Diff: the old commit or branch (required). Edges: only edges leaving this artifact.", "schema": map[string]any{"type": "string"}},
	"to":        {"description": "Diff: the new commit or branch (default main). Edges: only edges arriving at this artifact.", "schema": map[string]any{"type": "string"}},
	"data":      {"description": "Diff: true adds, per changed artifact, the JSON pointers whose data differ with old and new values.", "schema": map[string]any{"enum": []string{"false", "true"}}},
	"status":    {"description": "Only effects with this status.", "schema": map[string]any{"enum": []string{"pending", "claimed", "sent", "failed"}}},
	"a":         {"description": "The first run: CTX or CTX@REF (a commit or branch; default main).", "required": true, "schema": map[string]any{"type": "string"}},
	"b":         {"description": "The second run: CTX or CTX@REF.", "required": true, "schema": map[string]any{"type": "string"}},
}

var (
	docHealthz         = opDoc{id: "healthz", summary: "Liveness", tag: "operations", status: 200, result: "Status"}
	docReadyz          = opDoc{id: "readyz", summary: "Readiness: the store answers and the type registry is loaded", tag: "operations", status: 200, result: "Status"}
	docMetrics         = opDoc{id: "metrics", summary: "Counters in the Prometheus text format", tag: "operations", status: 200, text: []string{"text/plain"}}
	docOpenAPI         = opDoc{id: "openapi", summary: "This document", tag: "operations", status: 200, result: "OpenAPIDocument"}
	docListContexts    = opDoc{id: "listContexts", summary: "List the contexts the token may read", tag: "contexts", query: []string{"limit", "cursor"}, status: 200, result: "ContextPage"}
	docCreateContext   = opDoc{id: "createContext", summary: "Create a context (with its main branch and an empty root commit)", tag: "contexts", body: "context", status: 201, result: "ContextInfo"}
	docDescribeContext = opDoc{id: "describeContext", summary: "Describe a context: branches, head, hash, counts, trust summary", tag: "contexts", query: []string{"at"}, status: 200, result: "ContextView"}
	docCommit          = opDoc{id: "commit", summary: "One atomic commit of ops (200 with the unchanged head when every op is a no-op)", tag: "commits", body: "commit", status: 201, result: "CommitWrite", ifMatch: true}
	docListCommits     = opDoc{id: "listCommits", summary: "First-parent history from a commit or branch, newest first", tag: "commits", query: []string{"at", "limit", "cursor"}, status: 200, result: "CommitPage"}
	docGetCommit       = opDoc{id: "getCommit", summary: "One commit with its recorded ops", tag: "commits", status: 200, result: "Commit"}
	docPutArtifact     = opDoc{id: "putArtifact", summary: "Write an artifact and its outgoing edges in one commit (200 when identical content is put again)", tag: "artifacts", body: "artifact", status: 201, result: "ArtifactWrite", ifMatch: true}
	docListArtifacts   = opDoc{id: "listArtifacts", summary: "Artifacts sorted by id with their trust status", tag: "artifacts", query: []string{"at", "type", "limit", "cursor"}, status: 200, result: "ArtifactPage"}
	docGetArtifact     = opDoc{id: "getArtifact", summary: "One artifact with data and trust", tag: "artifacts", query: []string{"at"}, status: 200, result: "Artifact"}
	docHistory         = opDoc{id: "artifactHistory", summary: "Versions of an artifact, newest first", tag: "artifacts", query: []string{"at"}, status: 200, result: "History"}
	docRelated         = opDoc{id: "related", summary: "Edges of an artifact", tag: "artifacts", query: []string{"at", "rel", "dir"}, status: 200, result: "Related"}
	docProvenance      = opDoc{id: "provenance", summary: "Provenance subgraph (json, mermaid or dot)", tag: "artifacts", query: []string{"at", "depth", "max_nodes", "format"}, status: 200, result: "Provenance", text: []string{"text/vnd.mermaid", "text/vnd.graphviz"}}
	docListEdges       = opDoc{id: "listEdges", summary: "Edges sorted by (from, rel, to)", tag: "state", query: []string{"at", "from", "rel", "to", "limit", "cursor"}, status: 200, result: "EdgePage"}
	docState           = opDoc{id: "state", summary: "The whole state (streamed): enough to recompute the context hash", tag: "state", query: []string{"at"}, status: 200, result: "State"}
	docHash            = opDoc{id: "hash", summary: "Context hash at a commit", tag: "state", query: []string{"at"}, status: 200, result: "Hash"}
	docQuarantine      = opDoc{id: "quarantine", summary: "Poison roots, quarantined artifacts, blast radius", tag: "state", query: []string{"at"}, status: 200, result: "Quarantine"}
	docDiff            = opDoc{id: "diff", summary: "Artifacts, edges and trust that changed between two commits", tag: "state", query: []string{"from", "to", "data"}, status: 200, result: "Diff"}
	docAudit           = opDoc{id: "audit", summary: "What an answer rests on, with trust and sources (json or markdown)", tag: "state", query: []string{"at", "format"}, status: 200, result: "Audit", text: []string{"text/markdown"}}
	docListBranches    = opDoc{id: "listBranches", summary: "Branches and their heads", tag: "branches", status: 200, result: "BranchList"}
	docCreateBranch    = opDoc{id: "createBranch", summary: "Create a branch at any commit", tag: "branches", body: "branch", status: 201, result: "Branch"}
	docResetBranch     = opDoc{id: "resetBranch", summary: "Move a branch to any commit (checkout, rollback)", tag: "branches", body: "reset", status: 200, result: "Reset", ifMatch: true}
	docMerge           = opDoc{id: "merge", summary: "Three-way merge of a branch or commit into a branch; conflicts reported all at once (409), settled by resolutions", tag: "branches", body: "merge", status: 201, result: "Merge", ifMatch: true}
	docListTypes       = opDoc{id: "listTypes", summary: "Artifact types and relations", tag: "types", status: 200, result: "TypeList"}
	docGetType         = opDoc{id: "getType", summary: "One artifact type", tag: "types", status: 200, result: "Type"}
	docPutType         = opDoc{id: "putType", summary: "Register or update a user type (admin on \"*\")", tag: "types", body: "type", status: 201, result: "Type"}
	docListRelations   = opDoc{id: "listRelations", summary: "Relations, built-in and user", tag: "types", status: 200, result: "RelationList"}
	docGetRelation     = opDoc{id: "getRelation", summary: "One relation", tag: "types", status: 200, result: "Relation"}
	docPutRelation     = opDoc{id: "putRelation", summary: "Register or update a user relation (admin on \"*\")", tag: "types", body: "relation", status: 201, result: "Relation"}
	docEval            = opDoc{id: "eval", summary: "Structural evaluation: supported answers, quarantine share", tag: "contexts", query: []string{"at"}, status: 200, result: "Eval"}
	docVerify          = opDoc{id: "verify", summary: "Replay the stored chain and compare its context hash", tag: "contexts", body: "verify", status: 200, result: "Verify"}
	docAddSecrets      = opDoc{id: "addSecrets", summary: "Declare secret values to mask by value in tool results and effect errors (admin on \"*\"); never echoed back", tag: "gate", body: "secrets", status: 200, result: "SecretsWrite"}
	docFetch           = opDoc{id: "recordFetch", summary: "Classify fetch evidence (or, with perform, fetch the URL) and commit the fetch_verdict with its receipt; the body is stored as a blob", tag: "gate", body: "fetch", status: 201, result: "FetchWrite", ifMatch: true}
	docToolResult      = opDoc{id: "recordToolResult", summary: "Sanitise a tool error or output for the model and commit it as tool_error / tool_output; the full masked text is stored as a blob", tag: "gate", body: "tool-result", status: 201, result: "ArtifactWrite", ifMatch: true}
	docCreateEffect    = opDoc{id: "createEffect", summary: "Record an intended side effect as pending (200 with the recorded effect when the idempotency key is known)", tag: "outbox", body: "effect", status: 201, result: "EffectWrite", ifMatch: true}
	docListEffects     = opDoc{id: "listEffects", summary: "Effects sorted by id with their status (a claimed effect whose lease expired counts as pending)", tag: "outbox", query: []string{"at", "status", "limit", "cursor"}, status: 200, result: "EffectPage"}
	docClaimEffects    = opDoc{id: "claimEffects", summary: "Lease up to limit pending (or lease-expired) effects to a worker, atomically", tag: "outbox", body: "claim", status: 200, result: "ClaimWrite"}
	docCompleteEffect  = opDoc{id: "completeEffect", summary: "The lease holder records the effect as sent, with its result (409 otherwise)", tag: "outbox", body: "complete", status: 200, result: "EffectWrite"}
	docFailEffect      = opDoc{id: "failEffect", summary: "The lease holder records a failed attempt: back to pending with retry, else failed (409 otherwise)", tag: "outbox", body: "fail", status: 200, result: "EffectWrite"}
	docEnsureContext   = opDoc{id: "ensureContext", summary: "Create a context if it does not exist (201); 200 when it exists with the same settings, 409 when they differ", tag: "contexts", body: "context-put", status: 201, result: "ContextInfo"}
	docCompare         = opDoc{id: "compare", summary: "Compare two runs: equal context hashes, or the divergences grouped by producer", tag: "state", query: []string{"a", "b"}, status: 200, result: "Comparison"}
	docGetModelCall    = opDoc{id: "getModelCall", summary: "The recorded response of a model call by the SHA-256 of its canonical request (404 when not recorded)", tag: "state", query: []string{"at"}, status: 200, result: "ModelCall"}
	docPutContextBlob  = opDoc{id: "putContextBlob", summary: "Store raw bytes by SHA-256, streamed, and hold them in the context (201 new to the context, 200 when it holds them already, whatever other contexts hold)", tag: "blobs", body: "bytes", status: 201, result: "BlobWrite"}
	docGetContextBlob  = opDoc{id: "getContextBlob", summary: "Read a blob the context holds (uploaded, recorded by its gate outputs, or imported with a bundle); 404 otherwise, whether or not another context holds it", tag: "blobs", status: 200, text: []string{"application/octet-stream"}}
	docPutBlob         = opDoc{id: "putBlob", summary: "Store raw bytes by SHA-256 held by no context (admin on \"*\")", tag: "blobs", body: "bytes", status: 201, result: "BlobWrite"}
	docGetBlob         = opDoc{id: "getBlob", summary: "Read any stored blob (admin on \"*\")", tag: "blobs", status: 200, text: []string{"application/octet-stream"}}
)

// resultSchemas are the response components named by opDoc.result. They
// list every member a response has (extra members are allowed, so adding a
// field is not a breaking change); TestOpenAPIResponsesMatch validates real
// responses against them. Artifact data, edge attrs and other client JSON
// are free-form objects.
var resultSchemas = map[string]string{
	"Digest":          `{"type":"string","pattern":"^sha256:[0-9a-f]{64}$","description":"sha256:<64 lowercase hex digits>"}`,
	"FreeObject":      `{"type":"object","additionalProperties":true,"description":"Any JSON object."}`,
	"Status":          `{"type":"object","required":["status"],"properties":{"status":{"type":"string"},"error":{"type":"string"}}}`,
	"OpenAPIDocument": `{"type":"object","additionalProperties":true,"required":["openapi","info","paths"],"properties":{"openapi":{"type":"string"},"info":{"type":"object","additionalProperties":true},"paths":{"type":"object","additionalProperties":true}}}`,
	"ContextInfo":     `{"type":"object","required":["id","quarantine","created"],"properties":{"id":{"type":"string"},"quarantine":{"enum":["enforce","observe"]},"created":{"type":"string"},"ruleset":{"type":"string"}}}`,
	"ContextPage":     `{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"$ref":"#/components/schemas/ContextInfo"}},"next_cursor":{"type":"string"}}}`,
	"Branch":          `{"type":"object","required":["name","head"],"properties":{"name":{"type":"string"},"head":{"$ref":"#/components/schemas/Digest"}}}`,
	"BranchList":      `{"type":"object","required":["branches"],"properties":{"branches":{"type":"array","items":{"$ref":"#/components/schemas/Branch"}}}}`,
	"Reset":           `{"type":"object","required":["name","head","previous"],"properties":{"name":{"type":"string"},"head":{"$ref":"#/components/schemas/Digest"},"previous":{"$ref":"#/components/schemas/Digest"},"forgotten_effects":{"type":"array","items":{"type":"string"}}}}`,
	"TrustSummary":    `{"type":"object","required":["confirmed","quarantined","poison_roots"],"properties":{"confirmed":{"type":"integer"},"quarantined":{"type":"integer"},"poison_roots":{"type":"integer"}}}`,
	"ContextView": `{"type":"object","required":["id","quarantine","created","head","context_hash","seq","counts"],"properties":{"id":{"type":"string"},"quarantine":{"enum":["enforce","observe"]},"created":{"type":"string"},
	  "branches":{"type":"array","items":{"$ref":"#/components/schemas/Branch"}},"head":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},"seq":{"type":"integer"},
	  "counts":{"type":"object","required":["artifacts","edges"],"properties":{"artifacts":{"type":"integer"},"edges":{"type":"integer"}}},"trust":{"$ref":"#/components/schemas/TrustSummary"}}}`,
	"Op": `{"type":"object","required":["op"],"properties":{"op":{"type":"string","description":"put, delete, link or unlink"},"id":{"type":"string"},"type":{"type":"string"},"version":{"type":"integer"},
	  "content_hash":{"$ref":"#/components/schemas/Digest"},"produced_by":{"type":"string"},"data":{"$ref":"#/components/schemas/FreeObject"},"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"},"attrs":{"$ref":"#/components/schemas/FreeObject"}}}`,
	"Commit": `{"type":"object","required":["id","parents","context_hash","time","seq"],"properties":{"id":{"$ref":"#/components/schemas/Digest"},"parents":{"type":"array","items":{"$ref":"#/components/schemas/Digest"}},
	  "context_hash":{"$ref":"#/components/schemas/Digest"},"ops_hash":{"$ref":"#/components/schemas/Digest"},"author":{"type":"string"},"message":{"type":"string"},"time":{"type":"string"},"seq":{"type":"integer"},
	  "num_ops":{"type":"integer"},"artifacts":{"type":"integer"},"edges":{"type":"integer"},"ops":{"type":"array","items":{"$ref":"#/components/schemas/Op"}}}}`,
	"CommitPage": `{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":{"$ref":"#/components/schemas/Commit"}},"next_cursor":{"type":"string"}}}`,
	"Trust":      `{"type":"object","required":["id","status"],"properties":{"id":{"type":"string"},"status":{"enum":["confirmed","quarantined","poison_root"]},"reason":{"type":"string"},"roots":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}`,
	"Artifact": `{"type":"object","required":["id","type","version","content_hash","produced_by"],"properties":{"id":{"type":"string"},"type":{"type":"string"},"version":{"type":"integer"},"content_hash":{"$ref":"#/components/schemas/Digest"},
	  "produced_by":{"type":"string"},"data":{"$ref":"#/components/schemas/FreeObject"},"trust":{"$ref":"#/components/schemas/Trust"},"written_in":{"$ref":"#/components/schemas/Digest"},"depth":{"type":"integer"}}}`,
	"ArtifactPage":    `{"type":"object","required":["commit","items"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"items":{"type":"array","items":{"$ref":"#/components/schemas/Artifact"}},"next_cursor":{"type":"string"}}}`,
	"ArtifactVersion": `{"type":"object","required":["type","version","content_hash","produced_by"],"properties":{"type":{"type":"string"},"version":{"type":"integer"},"content_hash":{"$ref":"#/components/schemas/Digest"},"produced_by":{"type":"string"}}}`,
	"History": `{"type":"object","required":["commit","id","versions"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"id":{"type":"string"},
	  "versions":{"type":"array","items":{"type":"object","required":["version","type","content_hash","produced_by","commit","time"],"properties":{"version":{"type":"integer"},"type":{"type":"string"},
	  "content_hash":{"$ref":"#/components/schemas/Digest"},"produced_by":{"type":"string"},"commit":{"$ref":"#/components/schemas/Digest"},"time":{"type":"string"}}}}}}`,
	"EdgeKey":    `{"type":"object","required":["from","rel","to"],"properties":{"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"}}}`,
	"Edge":       `{"type":"object","required":["from","rel","to"],"properties":{"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"},"attrs":{"$ref":"#/components/schemas/FreeObject"}}}`,
	"EdgePage":   `{"type":"object","required":["commit","items"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"items":{"type":"array","items":{"$ref":"#/components/schemas/Edge"}},"next_cursor":{"type":"string"}}}`,
	"Related":    `{"type":"object","required":["commit","id","dir","edges"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"id":{"type":"string"},"dir":{"enum":["out","in","both"]},"edges":{"type":"array","items":{"$ref":"#/components/schemas/Edge"}}}}`,
	"Provenance": `{"type":"object","required":["commit","id","nodes","edges","truncated"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"id":{"type":"string"},"nodes":{"type":"array","items":{"$ref":"#/components/schemas/Artifact"}},"edges":{"type":"array","items":{"$ref":"#/components/schemas/Edge"}},"truncated":{"type":"boolean"}}}`,
	"Hash":       `{"type":"object","required":["commit","context_hash","artifacts","edges"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},"artifacts":{"type":"integer"},"edges":{"type":"integer"}}}`,
	"ArtifactChange": `{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"old":{"$ref":"#/components/schemas/ArtifactVersion"},"new":{"$ref":"#/components/schemas/ArtifactVersion"},
	  "data":{"type":"array","description":"With ?data=true, on changed artifacts: the JSON pointers whose values differ.","items":{"$ref":"#/components/schemas/DataChange"}},"data_truncated":{"type":"boolean"},"data_omitted":{"type":"boolean"}}}`,
	"DataChange": `{"type":"object","required":["pointer","kind"],"properties":{"pointer":{"type":"string","description":"RFC 6901 JSON pointer; empty for the whole document"},"kind":{"enum":["added","removed","changed"]},"old":{},"new":{}}}`,
	"EdgeChange": `{"type":"object","required":["from","rel","to"],"properties":{"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"},"old_attrs":{"$ref":"#/components/schemas/FreeObject"},"new_attrs":{"$ref":"#/components/schemas/FreeObject"}}}`,
	"Diff": `{"type":"object","required":["added","removed","changed","edges_added","edges_removed","edges_changed","trust"],"properties":{"from":{"$ref":"#/components/schemas/Digest"},"to":{"$ref":"#/components/schemas/Digest"},
	  "from_context_hash":{"$ref":"#/components/schemas/Digest"},"to_context_hash":{"$ref":"#/components/schemas/Digest"},
	  "added":{"type":"array","items":{"$ref":"#/components/schemas/ArtifactChange"}},"removed":{"type":"array","items":{"$ref":"#/components/schemas/ArtifactChange"}},"changed":{"type":"array","items":{"$ref":"#/components/schemas/ArtifactChange"}},
	  "edges_added":{"type":"array","items":{"$ref":"#/components/schemas/EdgeChange"}},"edges_removed":{"type":"array","items":{"$ref":"#/components/schemas/EdgeChange"}},"edges_changed":{"type":"array","items":{"$ref":"#/components/schemas/EdgeChange"}},
	  "trust":{"type":"array","items":{"type":"object","required":["id","new"],"properties":{"id":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}}}}}}`,
	"Audit": `{"type":"object","required":["context","commit","context_hash","answer","trust","artifacts","edges","sources","summary"],"properties":{"context":{"type":"string"},"commit":{"$ref":"#/components/schemas/Digest"},
	  "context_hash":{"$ref":"#/components/schemas/Digest"},"answer":{"type":"string"},"trust":{"$ref":"#/components/schemas/Trust"},"artifacts":{"type":"array","items":{"$ref":"#/components/schemas/Artifact"}},
	  "edges":{"type":"array","items":{"$ref":"#/components/schemas/Edge"}},"sources":{"type":"array","items":{"type":"object","required":["locator","artifacts"],"properties":{"locator":{"type":"string"},"artifacts":{"type":"array","items":{"type":"string"}}}}},
	  "summary":{"$ref":"#/components/schemas/TrustSummary"}}}`,
	"Merge": `{"type":"object","required":["kind","ours","theirs","commit","context_hash"],"properties":{"kind":{"enum":["up_to_date","fast_forward","merge"]},"base":{"$ref":"#/components/schemas/Digest"},
	  "bases":{"type":"array","description":"Every merge base, base first, when there are several (a criss-cross).","items":{"$ref":"#/components/schemas/Digest"}},
	  "bases_ancestor":{"$ref":"#/components/schemas/Digest"},"ours":{"$ref":"#/components/schemas/Digest"},
	  "theirs":{"$ref":"#/components/schemas/Digest"},"commit":{"$ref":"#/components/schemas/Commit"},"context_hash":{"$ref":"#/components/schemas/Digest"},"ops":{"type":"integer"},
	  "resolved":{"type":"array","description":"The conflicts the resolutions settled, as the 409 lists them.","items":{"$ref":"#/components/schemas/FreeObject"}},
	  "unused":{"type":"array","description":"Resolution keys that matched no conflict.","items":{"type":"string"}}}}`,
	"TypeList":  `{"type":"object","required":["types","relations"],"properties":{"types":{"type":"array","items":{"$ref":"#/components/schemas/Type"}},"relations":{"type":"array","items":{"$ref":"#/components/schemas/Relation"}}}}`,
	"BlobWrite": `{"type":"object","required":["digest","size"],"properties":{"digest":{"$ref":"#/components/schemas/Digest"},"size":{"type":"integer"}}}`,
	"TaintedBy": `{"type":"object","required":["edge","roots","reasons","path"],"properties":{"edge":{"$ref":"#/components/schemas/EdgeKey"},"roots":{"type":"array","items":{"type":"string"}},"reasons":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}`,
	"ArtifactWrite": `{"type":"object","required":["commit","context_hash","artifact"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},"noop":{"type":"boolean"},
	  "artifact":{"$ref":"#/components/schemas/Artifact"},"trust_at":{"$ref":"#/components/schemas/Digest"},"tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"CommitWrite": `{"type":"object","required":["commit","parents","context_hash"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"parents":{"type":"array","items":{"$ref":"#/components/schemas/Digest"}},"context_hash":{"$ref":"#/components/schemas/Digest"},"noop":{"type":"boolean"},"ops":{"type":"integer"},
	  "tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"State": `{"type":"object","required":["commit","context_hash","artifacts","edges"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},
	  "artifacts":{"type":"array","items":{"type":"object","required":["id","type","version","produced_by","content_hash","data"],"properties":{"id":{"type":"string"},"type":{"type":"string"},"version":{"type":"integer"},"produced_by":{"type":"string"},"content_hash":{"$ref":"#/components/schemas/Digest"},"data":{"$ref":"#/components/schemas/FreeObject"}}}},
	  "edges":{"type":"array","items":{"$ref":"#/components/schemas/Edge"}}}}`,
	"Quarantine": `{"type":"object","required":["commit","context_hash","poison_roots","quarantined","blast_radius"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},
	  "poison_roots":{"type":"array","items":{"type":"object","required":["id","reason","blast_radius"],"properties":{"id":{"type":"string"},"reason":{"type":"string"},"blast_radius":{"type":"integer"}}}},
	  "quarantined":{"type":"array","items":{"type":"object","required":["id","roots","path"],"properties":{"id":{"type":"string"},"roots":{"type":"array","items":{"type":"string"}},"path":{"type":"array","items":{"type":"string"}}}}},
	  "blast_radius":{"type":"integer"},"summary":{"$ref":"#/components/schemas/TrustSummary"}}}`,
	"SecretsWrite": `{"type":"object","required":["added","declared"],"properties":{"added":{"type":"integer"},"declared":{"type":"integer"}}}`,
	"FetchWrite": `{"type":"object","required":["verdict","body_blob","commit","context_hash","artifact"],"properties":{"verdict":{"enum":["RETRIEVED","FAILED","UNKNOWN"]},
	  "text":{"type":"string"},"text_chars":{"type":"integer"},"text_truncated":{"type":"boolean"},"text_blob":{"$ref":"#/components/schemas/Digest"},
	  "layer":{"enum":["transport","extraction","fingerprint"]},"reason":{"type":"string"},"body_blob":{"$ref":"#/components/schemas/Digest"},"rendered":{"type":"boolean"},"ignored":{"type":"array","items":{"type":"string"}},
	  "commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},"noop":{"type":"boolean"},"artifact":{"$ref":"#/components/schemas/Artifact"},"trust_at":{"$ref":"#/components/schemas/Digest"},
	  "tainted":{"type":"array","items":{"$ref":"#/components/schemas/TaintedBy"}}}}`,
	"Effect": `{"type":"object","required":["id","version","content_hash","idempotency_key","kind","status","attempts"],"properties":{"id":{"type":"string"},"version":{"type":"integer"},"content_hash":{"$ref":"#/components/schemas/Digest"},
	  "idempotency_key":{"type":"string"},"kind":{"type":"string"},"target":{"type":"string"},"payload":{},"status":{"enum":["pending","claimed","sent","failed"]},"attempts":{"type":"integer"},
	  "worker":{"type":"string"},"lease_until":{"type":"string"},"lease_expired":{"type":"boolean"},"lease_token":{"type":"string","description":"only in a claim answer: what complete and fail must send"},"result":{},"last_error":{"type":"string"},"created_at":{"type":"string"},"updated_at":{"type":"string"}}}`,
	"EffectPage":  `{"type":"object","required":["commit","items"],"properties":{"commit":{"$ref":"#/components/schemas/Digest"},"items":{"type":"array","items":{"$ref":"#/components/schemas/Effect"}},"next_cursor":{"type":"string"}}}`,
	"EffectWrite": `{"type":"object","required":["effect","commit"],"properties":{"effect":{"$ref":"#/components/schemas/Effect"},"commit":{"$ref":"#/components/schemas/Digest"},"created":{"type":"boolean"}}}`,
	"ClaimWrite":  `{"type":"object","required":["effects"],"properties":{"effects":{"type":"array","items":{"$ref":"#/components/schemas/Effect"}},"commit":{"$ref":"#/components/schemas/Digest"}}}`,
	"Type": `{"type":"object","required":["name","version","role","schema","schema_hash","builtin"],"properties":{"name":{"type":"string"},"version":{"type":"integer"},"role":{"enum":["source","derived","fetch_verdict","never"]},
	  "description":{"type":"string"},"schema":{"$ref":"#/components/schemas/FreeObject"},"schema_hash":{"$ref":"#/components/schemas/Digest"},"builtin":{"type":"boolean"},"reserved":{"type":"boolean"}}}`,
	"CompareSide":      `{"type":"object","required":["context","commit","context_hash"],"properties":{"context":{"type":"string"},"ref":{"type":"string"},"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"}}}`,
	"ComparedArtifact": `{"type":"object","required":["id","type","version","content_hash","produced_by"],"properties":{"id":{"type":"string"},"type":{"type":"string"},"version":{"type":"integer"},"content_hash":{"$ref":"#/components/schemas/Digest"},"produced_by":{"type":"string"}}}`,
	"ProducerDivergence": `{"type":"object","required":["producer","only_in_a","only_in_b","changed","edges_only_in_a","edges_only_in_b","edges_changed"],"properties":{"producer":{"type":"string"},
	  "only_in_a":{"type":"array","items":{"$ref":"#/components/schemas/ComparedArtifact"}},"only_in_b":{"type":"array","items":{"$ref":"#/components/schemas/ComparedArtifact"}},
	  "changed":{"type":"array","items":{"type":"object","required":["id","fields","a","b"],"properties":{"id":{"type":"string"},"fields":{"type":"array","items":{"enum":["content_hash","produced_by","type","version"]}},"a":{"$ref":"#/components/schemas/ArtifactVersion"},"b":{"$ref":"#/components/schemas/ArtifactVersion"}}}},
	  "edges_only_in_a":{"type":"array","items":{"$ref":"#/components/schemas/EdgeKey"}},"edges_only_in_b":{"type":"array","items":{"$ref":"#/components/schemas/EdgeKey"}},
	  "edges_changed":{"type":"array","items":{"type":"object","required":["from","rel","to","a_attrs","b_attrs"],"properties":{"from":{"type":"string"},"rel":{"type":"string"},"to":{"type":"string"},
	    "a_attrs":{"oneOf":[{"$ref":"#/components/schemas/FreeObject"},{"type":"null"}]},"b_attrs":{"oneOf":[{"$ref":"#/components/schemas/FreeObject"},{"type":"null"}]}}}}}}`,
	"Comparison": `{"type":"object","required":["equal","a","b","divergences"],"properties":{"equal":{"type":"boolean"},"a":{"$ref":"#/components/schemas/CompareSide"},"b":{"$ref":"#/components/schemas/CompareSide"},
	  "divergences":{"type":"array","items":{"$ref":"#/components/schemas/ProducerDivergence"}}}}`,
	"ModelCall": `{"type":"object","required":["request_hash","artifact","model","request","response","written_in","commit"],"properties":{"request_hash":{"$ref":"#/components/schemas/Digest"},"artifact":{"type":"string"},"model":{"type":"string"},
	  "request":{"$ref":"#/components/schemas/FreeObject"},"response":{"description":"The recorded response, any JSON value."},"written_in":{"$ref":"#/components/schemas/Digest"},"commit":{"$ref":"#/components/schemas/Digest"}}}`,
	"Relation": `{"type":"object","required":["name","version","depends","builtin"],"properties":{"name":{"type":"string"},"version":{"type":"integer"},"depends":{"type":"boolean"},
	  "description":{"type":"string"},"builtin":{"type":"boolean"}}}`,
	"RelationList": `{"type":"object","required":["relations"],"properties":{"relations":{"type":"array","items":{"$ref":"#/components/schemas/Relation"}}}}`,
	"Eval": `{"type":"object","required":["artifacts","quarantined","quarantined_share","poison_roots","answers","supported_answers","supported_share","mean_sources_per_answer","unsupported_answers","dangling_claims"],"properties":{
	  "context":{"type":"string"},"commit":{"$ref":"#/components/schemas/Digest"},"context_hash":{"$ref":"#/components/schemas/Digest"},"artifacts":{"type":"integer"},"quarantined":{"type":"integer"},"quarantined_share":{"type":"number"},"poison_roots":{"type":"integer"},
	  "answers":{"type":"array","items":{"type":"object","required":["id","status","sources","confirmed_sources","supported"],"properties":{"id":{"type":"string"},"status":{"enum":["confirmed","quarantined","poison_root"]},"sources":{"type":"integer"},"confirmed_sources":{"type":"integer"},"supported":{"type":"boolean"}}}},
	  "supported_answers":{"type":"integer"},"supported_share":{"type":"number"},"mean_sources_per_answer":{"type":"number"},"unsupported_answers":{"type":"array","items":{"type":"string"}},"dangling_claims":{"type":"array","items":{"type":"string"}}}}`,
	"Verify": `{"type":"object","required":["match","context_hash","commit","commits","ops"],"properties":{"match":{"type":"boolean"},"context_hash":{"$ref":"#/components/schemas/Digest"},
	  "commit":{"$ref":"#/components/schemas/Digest"},"commits":{"type":"integer"},"ops":{"type":"integer"},"expected":{"type":"string"},"matches_commit":{"$ref":"#/components/schemas/Digest"}}}`,
	"Problem": `{"type":"object","required":["type","title","status","detail"],"properties":{"type":{"type":"string"},"title":{"type":"string"},"status":{"type":"integer"},"detail":{"type":"string"},"instance":{"type":"string"},
	  "errors":{"type":"array","items":{"type":"object","required":["rule","detail"],"properties":{"pointer":{"type":"string"},"parameter":{"type":"string"},"rule":{"type":"string"},"detail":{"type":"string"}}}},
	  "tainted_by":{"$ref":"#/components/schemas/TaintedBy"},"head":{"type":"string"},"cycle":{"type":"array","items":{"type":"string"}},"conflicts":{"type":"array","items":{"$ref":"#/components/schemas/FreeObject"}}}}`,
}

// schemaContextPutRequest is the body of PUT /v1/contexts/{ctx} (optional:
// the handler checks it with the POST /v1/contexts schema after taking the
// id from the path).
const schemaContextPutRequest = `{"type":"object","additionalProperties":false,
  "properties":{"id":{"type":"string","description":"The id in the path, if given."},"quarantine":{"enum":["enforce","observe"]}}}`

// requestComponent names the component schema of each request body.
var requestComponent = map[string]string{
	"artifact": "ArtifactRequest", "commit": "CommitRequest", "context": "ContextRequest",
	"branch": "BranchRequest", "reset": "ResetRequest", "type": "TypeRequest", "merge": "MergeRequest",
	"fetch": "FetchRequest", "tool-result": "ToolResultRequest", "effect": "EffectRequest",
	"claim": "ClaimRequest", "complete": "CompleteRequest", "fail": "FailRequest",
	"relation": "RelationRequest", "verify": "VerifyRequest", "secrets": "SecretsRequest",
	"context-put": "ContextPutRequest",
}

var requestSources = map[string]string{
	"artifact": schemaArtifactRequest, "commit": schemaCommitRequest, "context": schemaContextRequest,
	"branch": schemaBranchRequest, "reset": schemaResetRequest, "type": schemaTypeRequest, "merge": schemaMergeRequest,
	"fetch": schemaFetchRequest, "tool-result": schemaToolResultRequest, "effect": schemaEffectRequest,
	"claim": schemaClaimRequest, "complete": schemaCompleteRequest, "fail": schemaFailRequest,
	"relation": schemaRelationRequest, "verify": schemaVerifyRequest, "secrets": schemaSecretsRequest,
	"context-put": schemaContextPutRequest,
}

var pathParamRE = regexp.MustCompile(`\{([a-z_]+)\}`)

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
		op := operation(rt)
		item[strings.ToLower(rt.method)] = op
		if rt.method == http.MethodGet {
			item["head"] = headOperation(op)
		}
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
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "artifactd",
			"version":     "1",
			"description": "Versioned artifact-graph store for AI agents. Errors are RFC 9457 application/problem+json; problem types are " + ProblemTypePrefix + "<code> (docs/API.md).",
			"license":     map[string]any{"name": "Apache-2.0", "identifier": "Apache-2.0"},
		},
		"servers": []any{
			map[string]any{"url": "http://127.0.0.1:7070", "description": "artifactd serve with its default --addr"},
		},
		// Bearer tokens when the server has them; an open loopback server
		// takes requests without one.
		"security":          []any{map[string]any{"bearer": []string{}}, map[string]any{}},
		"tags":              openAPITags(),
		"jsonSchemaDialect": draft2020,
		"paths":             paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "Tokens with read, write or admin scope on context id patterns; only when the server has tokens."},
			},
			"responses": problemResponses(),
		},
	}
	freeForm(doc)
	return doc
}

// tagDescriptions describes each operation tag.
var tagDescriptions = map[string]string{
	"operations": "Liveness, readiness, metrics and this document.",
	"contexts":   "Contexts: one agent run or session each.",
	"commits":    "The commit history and the general atomic write.",
	"artifacts":  "Artifacts and their edges, versions and provenance.",
	"state":      "Whole-state reads: hash, quarantine, diff, audit, comparison, recorded model calls.",
	"branches":   "Branches, reset and three-way merge.",
	"gate":       "Fetch evidence and tool results, judged and sanitised by the server.",
	"outbox":     "Intended side effects, claimed by workers with leases.",
	"types":      "The artifact type and relation registry.",
	"blobs":      "Raw bytes addressed by SHA-256.",
}

func openAPITags() []any {
	names := make([]string, 0, len(tagDescriptions))
	for n := range tagDescriptions {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "description": tagDescriptions[n]})
	}
	return out
}

// problemStatuses are the error responses the document declares, each an
// RFC 9457 problem.
var problemStatuses = map[int]string{
	400: "Malformed or non-canonical JSON, or an invalid query parameter or reference (errors[] names the pointer or parameter and the rule)",
	401: "Missing or unknown bearer token",
	403: "The token does not grant this scope on this context",
	404: "No such context, commit, artifact or record",
	409: "Stale parent, quarantined dependency, existing id with other settings, or merge conflicts; nothing was changed",
	413: "Request body too large",
	412: "If-Match names no entity tag of the current representation (precondition-failed; errors[] names the parameter If-Match, rule matches_etag); a read that sends no ETag matches only *",
	415: "Unsupported content type",
	422: "The body does not have the expected shape or breaks a rule of the graph (errors[] names each pointer and rule)",
	503: "The server is shutting down or stopped taking writes, or (commit-outcome-unknown) the write's commit went to the database and its answer was lost: read the branch head before retrying",
}

func problemResponses() map[string]any {
	out := map[string]any{}
	for code, desc := range problemStatuses {
		out["Problem"+strconv.Itoa(code)] = map[string]any{
			"description": desc,
			"content":     map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}},
		}
	}
	out["Problem"] = map[string]any{
		"description": "An RFC 9457 problem.",
		"content":     map[string]any{"application/problem+json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Problem"}}},
	}
	return out
}

// freeForm marks every object schema that names no members as open
// ("additionalProperties": true), so that generated clients type it as a
// map of any JSON value rather than an empty object.
func freeForm(v any) {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "object" && x["properties"] == nil && x["additionalProperties"] == nil && x["patternProperties"] == nil {
			x["additionalProperties"] = true
		}
		for _, y := range x {
			freeForm(y)
		}
	case []any:
		for _, y := range x {
			freeForm(y)
		}
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
	for _, code := range problemsOf(rt) {
		responses[strconv.Itoa(code)] = map[string]any{"$ref": "#/components/responses/Problem" + strconv.Itoa(code)}
	}
	if d.status == 201 {
		responses["200"] = map[string]any{"description": "Nothing changed (identical content, existing blob, unchanged type)", "content": content}
	}
	if rt.method == http.MethodGet && !untagged[d.id] {
		responses["304"] = map[string]any{"description": "Not modified (If-None-Match matched the ETag)"}
	}
	op["responses"] = responses
	if rt.scope != ScopeNone {
		op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{}}
		op["x-scope"] = rt.scope.String()
	} else {
		op["security"] = []any{}
	}
	return op
}

// untagged lists the GET operations that answer without an ETag, and so
// never 304; every other GET answers 304 to its ETag in If-None-Match
// (TestOpenAPIDeclaresNotModified).
var untagged = map[string]bool{
	"healthz": true, "readyz": true, "metrics": true, "openapi": true, "listContexts": true, "compare": true,
}

// headOperation is the HEAD twin of a GET operation get: the same
// parameters, statuses and headers, and no body in any answer.
func headOperation(get map[string]any) map[string]any {
	op := map[string]any{}
	for k, v := range get {
		op[k] = v
	}
	op["operationId"] = get["operationId"].(string) + "Head"
	op["summary"] = "The headers of: " + get["summary"].(string)
	responses := map[string]any{}
	for code, r := range get["responses"].(map[string]any) {
		if m, ok := r.(map[string]any); ok && m["content"] != nil {
			r = map[string]any{"description": m["description"].(string) + " (no body)"}
		}
		responses[code] = r
	}
	op["responses"] = responses
	return op
}

// problemsOf lists the error statuses a route can answer with.
func problemsOf(rt route) []int {
	d := rt.doc
	var out []int
	if len(d.query) > 0 || d.body != "" || d.id == "getModelCall" {
		out = append(out, 400)
	}
	if rt.scope != ScopeNone {
		out = append(out, 401, 403)
	}
	if strings.Contains(rt.pattern, "{") || d.id == "compare" {
		out = append(out, 404)
	}
	if rt.method != "GET" || d.id == "getModelCall" {
		if rt.scope != ScopeNone {
			out = append(out, 409)
		}
	}
	if d.body != "" {
		out = append(out, 413, 415)
		if d.body != "bytes" {
			out = append(out, 422)
		}
	}
	if rt.method == "GET" {
		out = append(out, 412) // If-Match (Preconditions)
	} else {
		out = append(out, 503)
	}
	return out
}

func mustJSON(src string) any {
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		panic("httpapi: bad JSON in OpenAPI source: " + err.Error())
	}
	return v
}

// handleOpenAPI is GET /openapi.json: this server's document, built on
// its first request.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	if err := Preconditions(r, ""); err != nil {
		s.writeError(w, r, err) // a list of tags in If-Match: it sends no ETag
		return
	}
	s.openAPIOnce.Do(func() { s.openAPIRaw, _ = json.MarshalIndent(s.OpenAPI(), "", "  ") })
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.openAPIRaw)
}
