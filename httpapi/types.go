package httpapi

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/artifactd/artifactd/internal/cores"
	"github.com/artifactd/artifactd/schema"
	"github.com/artifactd/artifactd/service"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// requestSchema is a compiled request body schema: the library's, which
// explains a refusal with each pointer and rule, and the check of the
// same schema that says only whether a body is valid, without the
// library's cost per value, when the schema has one (schema.Fast).
type requestSchema struct {
	lib  *jsonschema.Schema
	fast *schema.Fast
}

// valid reports whether doc is valid against r.
func (r *requestSchema) valid(doc any) bool {
	if r.fast != nil {
		return r.fast.Valid(doc)
	}
	return r.lib.Validate(doc) == nil
}

// requestSchemas are the compiled request body schemas, by name.
var requestSchemas = func() map[string]*requestSchema {
	out := make(map[string]*requestSchema, len(requestSources))
	for name, src := range requestSources {
		out[name] = mustCompile("request-"+name, src)
	}
	return out
}()

// mustCompile compiles one of the package's own schemas; a failure is a
// bug in its source.
func mustCompile(name, src string) *requestSchema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		panic(fmt.Sprintf("httpapi: schema %s: %v", name, err))
	}
	sch, err := service.CompileSchema(name, doc)
	if err != nil {
		panic(fmt.Sprintf("httpapi: schema %s: %v", name, err))
	}
	return &requestSchema{lib: sch, fast: schema.CompileFast(doc)}
}

// A request schema whose array items pick a subschema by a member's value
// (a commit's ops: "if op is put then …", for each kind) makes the
// validator try every kind on every item, and each kind an item is not
// costs a failed "if" and its error values: most of the CPU and a third
// of the memory a 5,000-artifact commit allocated went there
// (docs/BENCHMARKS.md). A splitSchema validates such a request in parts
// instead — the request with its items only an array, then each item:
// an object whose kind member names one of kinds, valid against that
// kind's subschema alone — which hold exactly when the whole schema does
// (TestSplitSchemaAgreesWithWhole, FuzzCommitDecode). It only ever says
// "valid": a request it does not pass is validated against the whole
// schema, so that a refusal names the same pointers and rules.
type splitSchema struct {
	// shape is the request with its items only an array.
	shape *requestSchema
	// items is the member holding the items; kind the member naming an
	// item's kind; kinds the subschema of each kind.
	items, kind string
	kinds       map[string]*requestSchema
}

// valid reports whether doc, a request body decoded as a generic value
// (hashing.DecodeCanonical), is valid; false when it is not or when it
// could not tell.
func (s *splitSchema) valid(doc any) bool {
	if !s.shape.valid(doc) {
		return false
	}
	// The shape made doc an object with an array of items (or none).
	m, _ := doc.(map[string]any)
	items, _ := m[s.items].([]any)
	parts := min(cores.Count(), len(items)/splitPartItems)
	if parts < 2 {
		return s.validItems(items)
	}
	// A big request's items on several goroutines: compiled schemas are
	// safe for concurrent use.
	var bad atomic.Bool
	var wg sync.WaitGroup
	for p := range parts {
		part := items[p*len(items)/parts : (p+1)*len(items)/parts]
		wg.Go(func() {
			if !s.validItems(part) {
				bad.Store(true)
			}
		})
	}
	wg.Wait()
	return !bad.Load()
}

// splitPartItems is the fewest items a goroutine of splitSchema.valid
// takes: fewer cost more to hand over than to validate.
const splitPartItems = 1024

// validItems reports whether each of items is an object whose kind
// member names one of kinds and is valid against that kind's subschema.
func (s *splitSchema) validItems(items []any) bool {
	for _, it := range items {
		item, _ := it.(map[string]any)
		k, _ := item[s.kind].(string)
		sch := s.kinds[k]
		if sch == nil || !sch.valid(it) {
			return false
		}
	}
	return true
}

// requestSplits are the request schemas validated in parts, by the name
// of their whole schema in requestSchemas.
var requestSplits = map[string]*splitSchema{
	"commit": {
		shape: mustCompile("request-commit-shape", commitShapeRequest),
		items: "ops", kind: "op",
		kinds: map[string]*requestSchema{
			"put":    mustCompile("request-commit-put", `{"$schema":"`+draft2020+`","allOf":[`+opPutSchema+`]}`),
			"delete": mustCompile("request-commit-delete", `{"$schema":"`+draft2020+`","allOf":[`+opDeleteSchema+`]}`),
			"link":   mustCompile("request-commit-link", `{"$schema":"`+draft2020+`","allOf":[`+opLinkSchema+`]}`),
			"unlink": mustCompile("request-commit-unlink", `{"$schema":"`+draft2020+`","allOf":[`+opUnlinkSchema+`]}`),
		},
	},
}

// validateRequest validates doc against request schema name — in parts
// when it has a split, with its fast check when it has one — and names
// each pointer and rule a refusal breaks.
func validateRequest(name string, doc any) error {
	if sp := requestSplits[name]; sp != nil {
		if sp.valid(doc) {
			return nil
		}
	} else if requestSchemas[name].valid(doc) {
		return nil
	}
	return validateWhole(name, doc)
}

// validateWhole validates doc against the whole of request schema name
// with the library, whose refusal names each pointer and rule.
func validateWhole(name string, doc any) error {
	return service.ValidateAgainst(requestSchemas[name].lib, doc, "", "the request body does not have the expected shape")
}
