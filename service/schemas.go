package service

// JSON Schemas (draft 2020-12) of the built-in artifact types. They are
// compiled once by NewRegistry; TestSchemasCompile
// keeps them valid. Built-in type schemas allow extra members: the gate and
// outbox issues add receipt and status fields without a schema change.

// SchemaDialect is the JSON Schema dialect of every type schema (draft 2020-12).
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// DigestPattern matches a sha256 digest as artifacts name blobs.
const DigestPattern = `^sha256:[0-9a-f]{64}$`

// builtinSchemas holds each built-in type's description and schema.
var builtinSchemas = map[string]struct{ description, schema string }{
	"fetch_verdict": {
		"The gate's verdict on one fetch (RETRIEVED, FAILED or UNKNOWN) with its receipt and the blob of the body it judged. Reserved: only the gate writes it (POST .../fetches), so a client cannot forge a RETRIEVED.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["url","verdict","receipt","body_blob"],
		  "properties":{
		    "verdict":{"enum":["RETRIEVED","FAILED","UNKNOWN"]},
		    "reason":{"type":"string"},
		    "layer":{"enum":["transport","extraction","fingerprint"]},
		    "url":{"type":"string"},
		    "final_url":{"type":"string"},
		    "status":{"type":"integer","minimum":0,"maximum":999},
		    "receipt":{"$ref":"#/$defs/receipt"},
		    "body_blob":{"type":"string","pattern":"` + DigestPattern + `"},
		    "fetched_by":{"enum":["agent","artifactd"]},
		    "rendered_from":{"type":"object","required":["receipt","body_blob"],
		      "properties":{"receipt":{"$ref":"#/$defs/receipt"},"body_blob":{"type":"string","pattern":"` + DigestPattern + `"}}},
		    "render_error":{"type":"string"}},
		  "$defs":{"receipt":{"type":"object","required":["ruleset","verdict","url","status","body_sha256","raw_bytes","layers"],
		    "properties":{
		      "ruleset":{"type":"string"},
		      "verdict":{"enum":["RETRIEVED","FAILED","UNKNOWN"]},
		      "url":{"type":"string"},
		      "redirects":{"type":"array","items":{"type":"object","required":["url","status"]}},
		      "status":{"type":"integer"},
		      "raw_bytes":{"type":"integer","minimum":0},
		      "body_sha256":{"type":"string","pattern":"` + DigestPattern + `"},
		      "layers":{"type":"array","items":{"type":"object","required":["layer","verdict"]}}}}}}`,
	},
	"document": {
		"A document read from a source: its text, or the blob holding its bytes.",
		`{"$schema":"` + SchemaDialect + `","type":"object",
		  "anyOf":[{"required":["text"]},{"required":["blob"]}],
		  "properties":{
		    "url":{"type":"string"},
		    "title":{"type":"string"},
		    "text":{"type":"string"},
		    "content_type":{"type":"string"},
		    "blob":{"type":"string","pattern":"` + DigestPattern + `"}}}`,
	},
	"tool_error": {
		"A tool's error, sanitised for the model (POST .../tool-results: model_view, the full masked text in full_blob). Never confirmed: anything resting on it is quarantined.",
		`{"$schema":"` + SchemaDialect + `","type":"object",
		  "anyOf":[{"required":["model_view"]},{"required":["text"]}],
		  "properties":{
		    "tool":{"type":"string"},
		    "model_view":{"type":"string"},
		    "total_chars":{"type":"integer","minimum":0},
		    "truncated":{"type":"boolean"},
		    "spilled":{"type":"boolean"},
		    "full_blob":{"type":"string","pattern":"` + DigestPattern + `"},
		    "text":{"type":"string"},
		    "blob":{"type":"string","pattern":"` + DigestPattern + `"}}}`,
	},
	"tool_output": {
		"A tool's output, bounded for the model (POST .../tool-results: model_view with head, omission notice and tail; the full masked output in full_blob).",
		`{"$schema":"` + SchemaDialect + `","type":"object",
		  "anyOf":[{"required":["model_view"]},{"required":["text"]}],
		  "properties":{
		    "tool":{"type":"string"},
		    "model_view":{"type":"string"},
		    "total_chars":{"type":"integer","minimum":0},
		    "omitted_chars":{"type":"integer","minimum":0},
		    "truncated":{"type":"boolean"},
		    "full_blob":{"type":"string","pattern":"` + DigestPattern + `"},
		    "text":{"type":"string"},
		    "total_bytes":{"type":"integer","minimum":0},
		    "blob":{"type":"string","pattern":"` + DigestPattern + `"}}}`,
	},
	"effect": {
		"An intended side effect recorded in the outbox (POST .../effects), with its status; every status change is a commit, and replay never sends.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["kind","idempotency_key"],
		  "properties":{
		    "kind":{"type":"string","minLength":1},
		    "target":{"type":"string"},
		    "payload":true,
		    "idempotency_key":{"type":"string","minLength":1},
		    "status":{"enum":["pending","claimed","sent","failed"]},
		    "attempts":{"type":"integer","minimum":0},
		    "worker":{"type":"string"},
		    "lease_until":{"type":"string"},
		    "result":true,
		    "last_error":{"type":"string"},
		    "created_at":{"type":"string"},
		    "updated_at":{"type":"string"}}}`,
	},
	"model_call": {
		"One call to a model: which model, and the blobs or text of its input and output.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["model"],
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
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1}}}`,
	},
	"user_input": {
		"Input a person gave the agent. A source: confirmed by itself.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"}}}`,
	},
	"evidence": {
		"A fact taken from a source, such as a quote or a figure.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"},"locator":{"type":"string"},"url":{"type":"string"}}}`,
	},
	"claim": {
		"A statement the agent derived, optionally with a value.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1},"value":true}}`,
	},
	"answer": {
		"An answer the agent gives.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string","minLength":1}}}`,
	},
	"note": {
		"A free-form note.",
		`{"$schema":"` + SchemaDialect + `","type":"object","required":["text"],
		  "properties":{"text":{"type":"string"}}}`,
	},
}
