package httpapi

// JSON Schemas (draft 2020-12) of the built-in artifact types and of the
// request bodies. They are compiled once at start-up; TestSchemasCompile
// keeps them valid. Built-in type schemas allow extra members: the gate and
// outbox issues add receipt and status fields without a schema change.

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

const digestPattern = `^sha256:[0-9a-f]{64}$`

// builtinSchemas holds each built-in type's description and schema.
var builtinSchemas = map[string]struct{ description, schema string }{
	"fetch_verdict": {
		"The gate's verdict on one fetch (RETRIEVED, FAILED or UNKNOWN) with its receipt. Reserved: only the gate writes it, so a client cannot forge a RETRIEVED.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["url","verdict"],
		  "properties":{
		    "url":{"type":"string","minLength":1},
		    "final_url":{"type":"string"},
		    "status":{"type":"integer","minimum":0,"maximum":999},
		    "verdict":{"enum":["RETRIEVED","FAILED","UNKNOWN"]},
		    "reason":{"type":"string"},
		    "ruleset":{"type":"string"},
		    "content_type":{"type":"string"},
		    "redirects":{"type":"array","items":{"type":"string"}},
		    "raw_bytes":{"type":"integer","minimum":0},
		    "extracted_bytes":{"type":"integer","minimum":0},
		    "body_sha256":{"type":"string","pattern":"` + digestPattern + `"},
		    "body_blob":{"type":"string","pattern":"` + digestPattern + `"}}}`,
	},
	"document": {
		"A document read from a source: its text, or the blob holding its bytes.",
		`{"$schema":"` + draft2020 + `","type":"object",
		  "anyOf":[{"required":["text"]},{"required":["blob"]}],
		  "properties":{
		    "url":{"type":"string"},
		    "title":{"type":"string"},
		    "text":{"type":"string"},
		    "content_type":{"type":"string"},
		    "blob":{"type":"string","pattern":"` + digestPattern + `"}}}`,
	},
	"tool_error": {
		"A tool's error, sanitised for the model. Never confirmed: anything resting on it is quarantined.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{
		    "tool":{"type":"string"},
		    "text":{"type":"string"},
		    "blob":{"type":"string","pattern":"` + digestPattern + `"}}}`,
	},
	"tool_output": {
		"A tool's output, bounded for the model; the full output may live in a blob.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{
		    "tool":{"type":"string"},
		    "text":{"type":"string"},
		    "truncated":{"type":"boolean"},
		    "total_bytes":{"type":"integer","minimum":0},
		    "blob":{"type":"string","pattern":"` + digestPattern + `"}}}`,
	},
	"effect": {
		"An intended side effect recorded in the outbox, with its status.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["kind","idempotency_key"],
		  "properties":{
		    "kind":{"type":"string","minLength":1},
		    "target":{"type":"string"},
		    "payload":true,
		    "idempotency_key":{"type":"string","minLength":1},
		    "status":{"enum":["pending","claimed","sent","failed"]},
		    "attempts":{"type":"integer","minimum":0},
		    "result":true}}`,
	},
	"model_call": {
		"One call to a model: which model, and the blobs or text of its input and output.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["model"],
		  "properties":{
		    "model":{"type":"string","minLength":1},
		    "provider":{"type":"string"},
		    "input":{"type":"string"},
		    "output":{"type":"string"},
		    "tokens_in":{"type":"integer","minimum":0},
		    "tokens_out":{"type":"integer","minimum":0}}}`,
	},
	"question": {
		"The question an agent run answers. A source: confirmed by itself.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1}}}`,
	},
	"user_input": {
		"Input a person gave the agent. A source: confirmed by itself.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"}}}`,
	},
	"evidence": {
		"A fact taken from a source, such as a quote or a figure.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"},"locator":{"type":"string"},"url":{"type":"string"}}}`,
	},
	"claim": {
		"A statement the agent derived, optionally with a value.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1},"value":true}}`,
	},
	"answer": {
		"An answer the agent gives.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1}}}`,
	},
	"note": {
		"A free-form note.",
		`{"$schema":"` + draft2020 + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"}}}`,
	},
}

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

	// schemaCommitRequest is POST /v1/contexts/{ctx}/commits.
	schemaCommitRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["ops"],
	  "properties":{
	    "branch":{"type":"string","minLength":1},
	    "parent":` + parentSchema + `,
	    "author":{"type":"string"},
	    "message":{"type":"string"},
	    "quarantine":{"enum":["enforce","observe"]},
	    "ops":{"type":"array","items":{"$ref":"#/$defs/op"}}},
	  "$defs":{
	    "op":{"type":"object","required":["op"],
	      "properties":{"op":{"enum":["put","delete","link","unlink"]}},
	      "allOf":[
	        {"if":{"properties":{"op":{"const":"put"}}},
	         "then":{"additionalProperties":false,"required":["artifact"],"properties":{"op":true,
	           "artifact":{"type":"object","additionalProperties":false,"required":["type","data"],"properties":{` + artifactFields + `}}}}},
	        {"if":{"properties":{"op":{"const":"delete"}}},
	         "then":{"additionalProperties":false,"required":["id"],"properties":{"op":true,"id":{"type":"string","minLength":1}}}},
	        {"if":{"properties":{"op":{"const":"link"}}},
	         "then":{"additionalProperties":false,"required":["from","rel","to"],"properties":{"op":true,
	           "from":{"type":"string","minLength":1},"rel":{"type":"string","minLength":1},"to":{"type":"string","minLength":1},"attrs":{"type":"object"}}}},
	        {"if":{"properties":{"op":{"const":"unlink"}}},
	         "then":{"additionalProperties":false,"required":["from","rel","to"],"properties":{"op":true,
	           "from":{"type":"string","minLength":1},"rel":{"type":"string","minLength":1},"to":{"type":"string","minLength":1}}}}]}}}`

	// schemaContextRequest is POST /v1/contexts.
	schemaContextRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["id"],
	  "properties":{
	    "id":{"type":"string","pattern":"^[A-Za-z0-9._-]{1,128}$","not":{"enum":[".",".."]}},
	    "quarantine":{"enum":["enforce","observe"]}}}`

	// schemaBranchRequest is POST /v1/contexts/{ctx}/branches.
	schemaBranchRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["name"],
	  "properties":{"name":{"type":"string","minLength":1},"at":{"type":"string","minLength":1}}}`

	// schemaResetRequest is POST /v1/contexts/{ctx}/branches/{branch}/reset.
	schemaResetRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["to"],
	  "properties":{"to":{"type":"string","minLength":1},"parent":` + parentSchema + `}}`

	// schemaMergeRequest is POST /v1/contexts/{ctx}/merge.
	schemaMergeRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["theirs"],
	  "properties":{
	    "ours":{"type":"string","minLength":1},
	    "theirs":{"type":"string","minLength":1},
	    "author":{"type":"string"},
	    "message":{"type":"string"},
	    "resolutions":{"type":"object","additionalProperties":{"type":"object","additionalProperties":false,
	      "properties":{"take":{"enum":["ours","theirs"]},"value":{"type":"object"},"type":{"type":"string"},"produced_by":{"type":"string"}}}}}}`

	// schemaTypeRequest is PUT /v1/types/{name}.
	schemaTypeRequest = `{"$schema":"` + draft2020 + `","type":"object","additionalProperties":false,
	  "required":["schema"],
	  "properties":{
	    "role":{"enum":["source","derived","never"]},
	    "description":{"type":"string"},
	    "schema":{"type":["object","boolean"]}}}`
)
