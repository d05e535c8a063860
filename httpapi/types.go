package httpapi

import (
	"fmt"
	"strings"

	"github.com/artifactd/artifactd/service"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// requestSchemas are the compiled request body schemas, by name.
var requestSchemas = func() map[string]*jsonschema.Schema {
	srcs := requestSources
	out := make(map[string]*jsonschema.Schema, len(srcs))
	for name, src := range srcs {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
		if err != nil {
			panic(fmt.Sprintf("httpapi: request schema %s: %v", name, err))
		}
		sch, err := service.CompileSchema("request-"+name, doc)
		if err != nil {
			panic(fmt.Sprintf("httpapi: request schema %s: %v", name, err))
		}
		out[name] = sch
	}
	return out
}()
