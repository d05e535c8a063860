package httpapi

import "github.com/artifactd/artifactd/service"

// The dialect and digest pattern of the request schemas: the ones of the
// built-in type schemas.
const (
	draft2020     = service.SchemaDialect
	digestPattern = service.DigestPattern
)

// Request body schemas. Pointers in validation problems are relative to
// the request body.
const (
	edgeInputSchema = `{"type":"object","additionalProperties":false,"required":["rel","to"],
	  "properties":{"rel":{"type":"string","minLength":1},"to":{"type":"string","minLength":1},"attrs":{"type":"object"}}}`

	parentSchema = `{"type":"string","pattern":"^(sha256:)?[0-9a-f]{64}$"}`

	artifactFields = `"id":{"type":"string","minLength":1},
	    "type":{"type":"string","minLength":1},
	    "produced_by":{"type":"string"},
	    "data":{"type":"object"}`

	// schemaArtifactRequest is POST /v1/contexts/{ctx}/artifacts.
	schemaArtifactRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["type","data"],
	  "properties":{` + artifactFields + `,
	    "edges":{"type":"array","items":` + edgeInputSchema + `},
	    "parent":` + parentSchema + `,
	    "branch":{"type":"string","minLength":1},
	    "quarantine":{"enum":["enforce","observe"]}}}`

	// What a commit op must be to be read by its kind (an object whose
	// "op" names one of four), and what each kind adds (the "then" of its
	// kind in schemaCommitRequest). A commit request is validated an op at
	// a time against these (splitSchema).
	opKindFields = `"type":"object","required":["op"],
	      "properties":{"op":{"enum":["put","delete","link","unlink"]}}`
	opPutSchema = `{"additionalProperties":false,"required":["artifact"],"properties":{"op":true,
	           "artifact":{"type":"object","additionalProperties":false,"required":["type","data"],"properties":{` + artifactFields + `}}}}`
	opDeleteSchema = `{"additionalProperties":false,"required":["id"],"properties":{"op":true,"id":{"type":"string","minLength":1}}}`
	opLinkSchema   = `{"additionalProperties":false,"required":["from","rel","to"],"properties":{"op":true,
	           "from":{"type":"string","minLength":1},"rel":{"type":"string","minLength":1},"to":{"type":"string","minLength":1},"attrs":{"type":"object"}}}`
	opUnlinkSchema = `{"additionalProperties":false,"required":["from","rel","to"],"properties":{"op":true,
	           "from":{"type":"string","minLength":1},"rel":{"type":"string","minLength":1},"to":{"type":"string","minLength":1}}}`

	// commitFields are the commit request's members but its ops.
	commitFields = `"branch":{"type":"string","minLength":1},
	    "parent":` + parentSchema + `,
	    "author":{"type":"string"},
	    "message":{"type":"string"},
	    "quarantine":{"enum":["enforce","observe"]}`

	// schemaCommitRequest is POST /v1/contexts/{ctx}/commits.
	schemaCommitRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["ops"],
	  "properties":{` + commitFields + `,
	    "ops":{"type":"array","items":{"$ref":"#/$defs/op"}}},
	  "$defs":{
	    "op":{` + opKindFields + `,
	      "allOf":[
	        {"if":{"properties":{"op":{"const":"put"}}},"then":` + opPutSchema + `},
	        {"if":{"properties":{"op":{"const":"delete"}}},"then":` + opDeleteSchema + `},
	        {"if":{"properties":{"op":{"const":"link"}}},"then":` + opLinkSchema + `},
	        {"if":{"properties":{"op":{"const":"unlink"}}},"then":` + opUnlinkSchema + `}]}}}`

	// commitShapeRequest is the commit request with its ops only an
	// array: with each op an object whose "op" is one of the four kinds,
	// valid against that kind's schema (opPutSchema and the others), what
	// schemaCommitRequest holds (splitSchema).
	commitShapeRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["ops"],
	  "properties":{` + commitFields + `,
	    "ops":{"type":"array"}}}`

	// schemaContextRequest is POST /v1/contexts.
	schemaContextRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["id"],
	  "properties":{
	    "id":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,128}$","not":{"enum":[".",".."]}},
	    "quarantine":{"enum":["enforce","observe"]}}}`

	// schemaBranchRequest is POST /v1/contexts/{ctx}/branches.
	schemaBranchRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["name"],
	  "properties":{"name":{"type":"string","minLength":1,"description":"1-100 of [A-Za-z0-9._/-], starting with a letter, digit or _; not 8 to 64 hex digits, which read as a commit id (422, rule not_commit_id)"},"at":{"type":"string","minLength":1}}}`

	// schemaResetRequest is POST /v1/contexts/{ctx}/branches/{branch}/reset.
	schemaResetRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["to"],
	  "properties":{"to":{"type":"string","minLength":1},"parent":` + parentSchema + `,"forget_effects":{"type":"boolean"}}}`

	// schemaMergeRequest is POST /v1/contexts/{ctx}/merge.
	schemaMergeRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["theirs"],
	  "properties":{
	    "ours":{"type":"string","minLength":1},
	    "theirs":{"type":"string","minLength":1},
	    "author":{"type":"string"},
	    "message":{"type":"string"},
	    "resolutions":{"type":"object","description":"Resolutions by conflict key, each key copied from the 409's conflicts: an artifact's id, edge:<from> -<rel>-> <to>, cycle:<from> -<rel>-> <to>, or the escaped form of one that would be ambiguous (edge:-> -json-> {…}).","additionalProperties":{"type":"object","additionalProperties":false,
	      "properties":{"take":{"enum":["ours","theirs"]},"value":{"type":"object"},"type":{"type":"string"},"produced_by":{"type":"string"}}}}}}`

	// schemaFetchRequest is POST /v1/contexts/{ctx}/fetches: evidence, or
	// a URL to fetch with "perform": true (then no evidence field). The
	// verdict claims are accepted and ignored.
	schemaFetchRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "properties":{
	    "id":{"type":"string","minLength":1},
	    "kind":{"enum":["http","file","tool"]},
	    "url":{"type":"string","minLength":1},
	    "path":{"type":"string","minLength":1},
	    "size":{"type":"integer","minimum":0},
	    "tool":{"type":"string"},
	    "content_type":{"type":"string"},
	    "produced_by":{"type":"string","maxLength":256},
	    "final_url":{"type":"string"},
	    "redirects":{"type":"array","maxItems":100,"items":{"type":"object","additionalProperties":false,"required":["url","status"],
	      "properties":{"url":{"type":"string"},"status":{"type":"integer","minimum":0,"maximum":999}}}},
	    "status":{"type":"integer","minimum":0,"maximum":999},
	    "headers":{"type":"object","additionalProperties":{"type":"string"}},
	    "body":{"type":"string"},
	    "body_base64":{"type":"string"},
	    "error":{"type":["string","null"]},
	    "perform":{"type":"boolean"},
	    "edges":{"type":"array","items":` + edgeInputSchema + `},
	    "branch":{"type":"string","minLength":1},
	    "quarantine":{"enum":["enforce","observe"]},
	    "verdict":true,"reason":true,"layer":true,"receipt":true,"body_sha256":true,"body_blob":true},
	  "allOf":[
	    {"if":{"required":["perform"],"properties":{"perform":{"const":true}}},
	     "then":{"properties":{"final_url":false,"redirects":false,"status":false,"headers":false,"body":false,"body_base64":false,"error":false,"kind":{"const":"http"}}}},
	    {"if":{"required":["kind"],"properties":{"kind":{"const":"file"}}},"then":{"required":["path"]},"else":{"required":["url"]}}]}`

	// schemaSecretsRequest is POST /v1/admin/secrets.
	schemaSecretsRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["secrets"],
	  "properties":{"secrets":{"type":"array","minItems":1,"maxItems":1000,"items":{"type":"string","minLength":1,"maxLength":4096}}}}`

	// schemaToolResultRequest is POST /v1/contexts/{ctx}/tool-results.
	schemaToolResultRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["ok"],
	  "properties":{
	    "id":{"type":"string","minLength":1},
	    "tool":{"type":"string"},
	    "ok":{"type":"boolean"},
	    "error":{"type":"string"},
	    "output":{"type":"string"},
	    "produced_by":{"type":"string"},
	    "edges":{"type":"array","items":` + edgeInputSchema + `},
	    "branch":{"type":"string","minLength":1},
	    "quarantine":{"enum":["enforce","observe"]}},
	  "if":{"properties":{"ok":{"const":true}}},
	  "then":{"required":["output"],"properties":{"error":false}},
	  "else":{"required":["error"],"properties":{"output":false}}}`

	workerSchema = `{"type":"string","minLength":1,"maxLength":256}`

	// schemaEffectRequest is POST /v1/contexts/{ctx}/effects.
	schemaEffectRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["idempotency_key","kind"],
	  "properties":{
	    "idempotency_key":{"type":"string","minLength":1,"maxLength":1024},
	    "kind":{"type":"string","minLength":1,"maxLength":256},
	    "target":{"type":"string"},
	    "payload":true,
	    "produced_by":{"type":"string"},
	    "edges":{"type":"array","items":` + edgeInputSchema + `}}}`

	// schemaClaimRequest is POST /v1/contexts/{ctx}/effects/claim.
	schemaClaimRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["worker"],
	  "properties":{
	    "worker":` + workerSchema + `,
	    "lease_seconds":{"type":"integer","minimum":1,"maximum":86400},
	    "limit":{"type":"integer","minimum":1,"maximum":100}}}`

	// schemaCompleteRequest is POST /v1/contexts/{ctx}/effects/{id}/complete.
	schemaCompleteRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["worker"],
	  "properties":{"worker":` + workerSchema + `,"result":true,"lease_token":{"type":"string","maxLength":128}}}`

	// schemaFailRequest is POST /v1/contexts/{ctx}/effects/{id}/fail.
	schemaFailRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["worker"],
	  "properties":{"worker":` + workerSchema + `,"error":{"type":"string"},"retry":{"type":"boolean"},"lease_token":{"type":"string","maxLength":128}}}`

	// schemaTypeRequest is PUT /v1/types/{name}.
	schemaTypeRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["schema"],
	  "properties":{
	    "role":{"enum":["source","derived","never"],"description":"omitted: the registered type's role on an update, derived on a create"},
	    "description":{"type":"string"},
	    "schema":{"type":["object","boolean"]}}}`
	schemaRelationRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["depends"],
	  "properties":{
	    "depends":{"type":"boolean"},
	    "description":{"type":"string"}}}`
	schemaVerifyRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["hash"],
	  "properties":{
	    "hash":{"type":"string","minLength":1},
	    "at":{"type":"string"}}}`
)
