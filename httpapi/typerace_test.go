package httpapi

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// typePut is one PUT /v1/types/{name}: role "" leaves the member out.
type typePut struct {
	role, desc, schema string
}

func (p typePut) body() string {
	m := map[string]any{"schema": json.RawMessage(p.schema)}
	if p.role != "" {
		m["role"] = p.role
	}
	if p.desc != "" {
		m["description"] = p.desc
	}
	raw, _ := json.Marshal(m)
	return string(raw)
}

// typeAnswer is what a PUT answered, or what a serial order of the same
// PUTs would have: the status and, on a 2xx, the record's role,
// description, schema hash and version.
type typeAnswer struct {
	status             int
	role, desc, schema string
	version            int
}

func (a typeAnswer) httpStatus() int { return a.status }

func (a typeAnswer) String() string {
	if a.status/100 != 2 {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d %s v%d %q %.15s", a.status, a.role, a.version, a.desc, a.schema)
}

// serialTypePuts is what PUT /v1/types/{name} answers, by docs/API.md, to
// puts made one after the other on a type not yet registered, and the
// record it is left with: a create is 201 version 1, derived without a
// role; an update without a role keeps the type's role, one with another
// role is 409 and changes nothing; the same schema and description again
// is 200 and changes nothing; another is 200 and the next version.
func serialTypePuts(t *testing.T, puts []typePut, order []int) ([]typeAnswer, *typeAnswer) {
	t.Helper()
	out := make([]typeAnswer, len(puts))
	var cur *typeAnswer
	for _, i := range order {
		p := puts[i]
		canon, err := hashing.Canonicalize([]byte(p.schema))
		if err != nil {
			t.Fatal(err)
		}
		h := hashing.ContentHash(canon).String()
		role := p.role
		switch {
		case cur == nil:
			if role == "" {
				role = string(graph.RoleDerived)
			}
			cur = &typeAnswer{status: 200, role: role, desc: p.desc, schema: h, version: 1}
			out[i] = *cur
			out[i].status = 201
		case role != "" && role != cur.role:
			out[i] = typeAnswer{status: 409}
		case h == cur.schema && p.desc == cur.desc:
			out[i] = *cur
		default:
			cur = &typeAnswer{status: 200, role: cur.role, desc: p.desc, schema: h, version: cur.version + 1}
			out[i] = *cur
		}
	}
	return out, cur
}

// typeAnswerOf reads a PUT's or a GET's answer.
func typeAnswerOf(status int, body []byte) (typeAnswer, error) {
	a := typeAnswer{status: status}
	if status/100 != 2 {
		return a, nil
	}
	var rec service.TypeRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return a, fmt.Errorf("%d: %v: %s", status, err, body)
	}
	a.role, a.desc, a.schema, a.version = string(rec.Role), rec.Description, rec.SchemaHash.String(), rec.Version
	return a, nil
}

// typeRecords is the type registry as registryRace races on it: a server
// records a type's definition when it writes an artifact of the type.
func typeRecords() registryKind[typePut, typeAnswer] {
	return registryKind[typePut, typeAnswer]{
		resource: "types",
		refusal:  "a role change",
		answerOf: typeAnswerOf,
		serial:   serialTypePuts,
		stored:   (*store.Store).GetType,
		artifact: func(id, name string) map[string]any {
			return map[string]any{"id": id, "type": name, "data": map[string]any{}}
		},
		defID: graph.TypeDefID,
		def: func(name string, final typeAnswer, puts []typePut) ([]byte, error) {
			// The schema is the one of the puts whose hash the record holds.
			var schema json.RawMessage
			for _, p := range puts {
				if canon, _ := hashing.Canonicalize([]byte(p.schema)); hashing.ContentHash(canon).String() == final.schema {
					schema = canon
				}
			}
			return graph.TypeDef{Name: name, Role: graph.Role(final.role), Description: final.desc, Schema: schema}.Data()
		},
	}
}

// TestConcurrentTypePutsAreSerial: PUTs of one new type at the same time
// answer what one serial order of them answers, and leave the type (in
// the store, in every server's registry and in the definition a context
// records) as that order leaves it. Compatible puts — identical ones, or
// one with a role and one without — therefore all succeed: a put without
// a role takes the role of the type as it finds it (or derived on a
// create), and an identical put is never refused. Puts with different
// roles may be refused 409, but only as a serial order would refuse them
// (all but the first); puts with different schemas or descriptions all
// succeed, each a version. So on one server over its own store, on one
// over a shared database, and on two servers over one database taking
// the puts in turn (raceDeployments).
//
// A registry over a shared store read the whole registry again on each
// put, and could put back a snapshot read before another put's write; and
// two servers each decided on their own registry and wrote over each
// other: two 201s, or a put without a role that created the type derived
// over the source type another server had just answered 201 for.
func TestConcurrentTypePutsAreSerial(t *testing.T) {
	const s1, s2 = `{"type":"object"}`, `{"type":"object","properties":{"a":{"type":"string"}}}`
	cases := []raceCase[typePut]{
		{"same", []typePut{{"source", "", s1}, {"source", "", s1}}},
		{"same4", []typePut{{"never", "d", s2}, {"never", "d", s2}, {"never", "d", s2}, {"never", "d", s2}}},
		{"same-norole", []typePut{{"", "", s1}, {"", "", s1}, {"", "", s1}}},
		{"role-norole", []typePut{{"source", "", s1}, {"", "", s1}}},
		{"norole-role", []typePut{{"", "", s1}, {"never", "", s1}, {"", "", s1}}},
		{"role-norole-schema", []typePut{{"source", "", s1}, {"", "", s2}}},
		// Controls: a serial order refuses all but the first role ...
		{"roles", []typePut{{"source", "", s1}, {"never", "", s1}, {"derived", "", s1}}},
		// ... and takes every schema or description, each a version.
		{"schemas", []typePut{{"source", "", s1}, {"source", "", s2}}},
		{"descs-norole", []typePut{{"", "one", s1}, {"", "two", s1}, {"", "three", s1}}},
	}
	raceDeployments(t, func(t *testing.T, rounds int, servers ...*env) {
		registryRace(t, typeRecords(), cases, rounds, servers...)
	})
}
