package service

import (
	"encoding/json"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// TestMergeDefinitionConflictTakesASide: when both branches recorded a
// different definition of one type, the conflict is settled by taking a
// side. A value resolution of a definition — with or without a type — is
// refused 422 at the resolution's value, rule reserved (the ids of
// definitions are reserved; the registry records them), not sent to
// register a type named "artifactd.type" nor failed on the merged ops; and
// nothing is written. Taking a side merges.
func TestMergeDefinitionConflictTakesASide(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	st := s.st
	put := func(branch, id, data string) { t.Helper(); putOn(t, s, branch, id, "reading", data) }
	define := func(schema string) {
		t.Helper()
		if _, _, err := s.types.Put(ctx, st, "reading", graph.RoleDerived, "", []byte(schema)); err != nil {
			t.Fatal(err)
		}
	}
	define(`{"type":"object"}`)
	put("main", "r0", `{"v":1}`)
	head, _ := st.Resolve(ctx, "o", "main")
	if err := st.CreateBranch(ctx, "o", "side", head.ID); err != nil {
		t.Fatal(err)
	}
	define(`{"type":"object","required":["v"]}`)
	put("side", "r1", `{"v":1}`)
	define(`{"type":"object","required":["w"]}`)
	put("main", "r2", `{"v":1,"w":2}`)

	key := graph.TypeDefID("reading")
	before, _ := st.Resolve(ctx, "o", "main")
	for name, res := range map[string]replay.Resolution{
		"a definition's data":    {Value: json.RawMessage(`{"name":"reading","role":"derived"}`)},
		"a value of a user type": {Value: json.RawMessage(`{"text":"x"}`), Type: "note"},
	} {
		_, err := s.Merge(ctx, "o", MergeInput{Theirs: "side", Resolutions: map[string]replay.Resolution{key: res}})
		p := Classify(err)
		if p.Code != fault.Invalid || len(p.Errors) != 1 || p.Errors[0].Pointer != "/resolutions/artifactd.type~1reading/value" || p.Errors[0].Rule != "reserved" {
			t.Fatalf("%s: %v %+v", name, err, p.Errors)
		}
		if after, _ := st.Resolve(ctx, "o", "main"); after.ID != before.ID {
			t.Fatalf("%s: a refused merge moved main", name)
		}
	}
	if _, err := s.Merge(ctx, "o", MergeInput{Theirs: "side", Resolutions: map[string]replay.Resolution{key: {Take: replay.TakeTheirs}}}); err != nil {
		t.Fatalf("take theirs: %v", err)
	}
}
