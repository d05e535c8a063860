package httpapi

import (
	"strings"
	"testing"
)

// TestDefinitionTypeNamesCannotBeRegistered: artifactd.type and
// artifactd.relation are the types of the definition artifacts a context's
// chain records; the chain refuses any other artifact of them, so the
// registry must not take them as user types (nor store a record for
// them): the answer is 422 reserved-type naming the name parameter.
func TestDefinitionTypeNamesCannotBeRegistered(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"artifactd.type", "artifactd.relation"} {
		r := e.send(req{method: "PUT", path: "/v1/types/" + name, body: `{"schema":{"type":"object"}}`})
		if r.status != 422 || !strings.Contains(r.String(), `"type":"`+ProblemTypePrefix+CodeReservedType+`"`) || !strings.Contains(r.String(), `"parameter":"name"`) {
			t.Errorf("PUT /v1/types/%s: %s", name, r)
		}
		if r := e.get("/v1/types/" + name); r.status != 404 {
			t.Errorf("a refused type was registered: %s", r)
		}
	}
	// Other names under the prefix are ordinary types.
	e.must(e.send(req{method: "PUT", path: "/v1/types/artifactd.x", body: `{"schema":{"type":"object"}}`}), 201)
}
