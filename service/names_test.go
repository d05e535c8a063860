package service

import (
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
)

// TestFetchProducedByFollowsTheLabelRules: a fetch's produced_by names
// who made the read in the verdict's data, which the UI, logs and audits
// show, so it is held to the rules of names as every other producer: a
// control or invisible character is refused at /produced_by naming the
// rule, and nothing is written.
func TestFetchProducedByFollowsTheLabelRules(t *testing.T) {
	for _, tc := range []struct{ by, rule string }{
		{"\u0007", "printable"},
		{"crawl\u200ber", "visible"},
	} {
		s, _ := newService(t)
		ctx := t.Context()
		head, err := s.st.Resolve(ctx, "o", "")
		if err != nil {
			t.Fatal(err)
		}
		body := "hello"
		_, err = s.RecordFetch(ctx, "o", FetchInput{URL: "https://x.example/", Status: 200, Body: &body, ProducedBy: tc.by})
		fe := Classify(err)
		if fe.Code != fault.Invalid || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "/produced_by" || fe.Errors[0].Rule != tc.rule {
			t.Fatalf("fetch produced by %q: got %v %+v, want a validation error at /produced_by (rule %s)", tc.by, err, fe.Errors, tc.rule)
		}
		if after, err := s.st.Resolve(ctx, "o", ""); err != nil || after.ID != head.ID {
			t.Fatalf("a refused fetch moved the head (%v)", err)
		}
	}
}

// TestRelationNamesOfDefinitionsAreReserved: the names of the types a
// context records its definitions as (artifactd.type and
// artifactd.relation) are refused as relation names as they are as type
// names: 422 reserved-type naming the parameter name, rule reserved.
func TestRelationNamesOfDefinitionsAreReserved(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	for _, name := range []string{graph.TypeTypeDef, graph.TypeRelationDef} {
		_, _, err := s.types.PutRelation(ctx, s.st, name, true, "")
		fe := Classify(err)
		if fe.Code != fault.ReservedType || len(fe.Errors) != 1 || fe.Errors[0].Parameter != "name" || fe.Errors[0].Rule != "reserved" {
			t.Errorf("relation %q: got %v %+v, want reserved-type naming the parameter name, rule reserved", name, err, fe.Errors)
		}
		if _, ok := s.types.RelationOf(name); ok {
			t.Errorf("relation %q was registered", name)
		}
	}
}
