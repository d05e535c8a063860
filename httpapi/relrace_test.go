package httpapi

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// relationPut is one PUT /v1/relations/{name}.
type relationPut struct {
	depends bool
	desc    string
}

func (p relationPut) body() string {
	m := map[string]any{"depends": p.depends}
	if p.desc != "" {
		m["description"] = p.desc
	}
	raw, _ := json.Marshal(m)
	return string(raw)
}

// relationAnswer is what a PUT answered, or what a serial order of the
// same PUTs would have: the status and, on a 2xx, the record's depends,
// description and version.
type relationAnswer struct {
	status  int
	depends bool
	desc    string
	version int
}

func (a relationAnswer) httpStatus() int { return a.status }

func (a relationAnswer) String() string {
	if a.status/100 != 2 {
		return fmt.Sprint(a.status)
	}
	return fmt.Sprintf("%d depends=%t v%d %q", a.status, a.depends, a.version, a.desc)
}

// serialRelationPuts is what PUT /v1/relations/{name} answers, by
// docs/API.md, to puts made one after the other on a relation not yet
// registered, and the record it is left with: a create is 201 version 1;
// an update with another depends is 409 and changes nothing; the same
// description again is 200 and changes nothing; another is 200 and the
// next version.
func serialRelationPuts(puts []relationPut, order []int) ([]relationAnswer, *relationAnswer) {
	out := make([]relationAnswer, len(puts))
	var cur *relationAnswer
	for _, i := range order {
		p := puts[i]
		switch {
		case cur == nil:
			cur = &relationAnswer{status: 200, depends: p.depends, desc: p.desc, version: 1}
			out[i] = *cur
			out[i].status = 201
		case p.depends != cur.depends:
			out[i] = relationAnswer{status: 409}
		case p.desc == cur.desc:
			out[i] = *cur
		default:
			cur = &relationAnswer{status: 200, depends: cur.depends, desc: p.desc, version: cur.version + 1}
			out[i] = *cur
		}
	}
	return out, cur
}

// relationAnswerOf reads a PUT's or a GET's answer.
func relationAnswerOf(status int, body []byte) (relationAnswer, error) {
	a := relationAnswer{status: status}
	if status/100 != 2 {
		return a, nil
	}
	var rec service.RelationRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return a, fmt.Errorf("%d: %v: %s", status, err, body)
	}
	a.depends, a.desc, a.version = rec.Depends, rec.Description, rec.Version
	return a, nil
}

// relationRecords is the relation registry as registryRace races on it: a
// server records a relation's definition when it writes an artifact with
// an edge of the relation (to "target", a note each case writes first).
func relationRecords() registryKind[relationPut, relationAnswer] {
	return registryKind[relationPut, relationAnswer]{
		resource: "relations",
		refusal:  "a change of depends",
		answerOf: relationAnswerOf,
		serial: func(_ *testing.T, puts []relationPut, order []int) ([]relationAnswer, *relationAnswer) {
			return serialRelationPuts(puts, order)
		},
		stored: (*store.Store).GetRelation,
		prepare: func(e *env, path string) {
			e.must(e.post(path, map[string]any{"id": "target", "type": "note", "data": map[string]any{"text": "t"}}), 201)
		},
		artifact: func(id, name string) map[string]any {
			return map[string]any{"id": id, "type": "note", "data": map[string]any{"text": "x"},
				"edges": []any{map[string]any{"rel": name, "to": "target"}}}
		},
		defID: graph.RelationDefID,
		def: func(name string, final relationAnswer, _ []relationPut) ([]byte, error) {
			return graph.RelationDef{Name: name, Depends: final.depends, Description: final.desc}.Data()
		},
	}
}

// TestConcurrentRelationPutsAreSerial: PUTs of one new relation at the
// same time answer what one serial order of them answers, and leave the
// relation (in the store, in every server's registry and in the
// definition a context records) as that order leaves it. Identical puts
// therefore all succeed, one of them 201; puts with different depends
// are refused 409 as a serial order refuses them (all but the first);
// puts of different descriptions all succeed, each a version. So on one
// server over its own store, on one over a shared database, and on two
// servers over one database taking the puts in turn (raceDeployments).
//
// A put over a shared store read the whole registry again and could put
// back a snapshot read before another put's write; and two servers each
// decided on their own registry and wrote over each other: two 201s, or a
// depends flipped under a 201 of the other.
func TestConcurrentRelationPutsAreSerial(t *testing.T) {
	cases := []raceCase[relationPut]{
		{"same", []relationPut{{true, ""}, {true, ""}}},
		{"same4", []relationPut{{false, "d"}, {false, "d"}, {false, "d"}, {false, "d"}}},
		{"depends", []relationPut{{true, ""}, {false, ""}}},
		{"depends-same", []relationPut{{true, ""}, {false, ""}, {true, ""}}},
		{"depends-descs", []relationPut{{true, "a"}, {false, "b"}, {true, "c"}}},
		{"descs", []relationPut{{false, "one"}, {false, "two"}, {false, "three"}}},
	}
	raceDeployments(t, func(t *testing.T, rounds int, servers ...*env) {
		registryRace(t, relationRecords(), cases, rounds, servers...)
	})
}
