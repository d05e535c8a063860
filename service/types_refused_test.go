package service

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
)

// TestLoadKeepsATypeWhoseStoredSchemaIsRefused: a type stored by a
// release that accepted a schema this one refuses ($recursiveRef, which
// the cost bound cannot follow) does not stop the registry from loading —
// the server would not start — and keeps its role; its artifacts are
// refused, naming the type and the rule, until it is registered again.
func TestLoadKeepsATypeWhoseStoredSchemaIsRefused(t *testing.T) {
	s, _ := newService(t)
	ctx := context.Background()
	bomb := json.RawMessage(`{"$defs":{"n":{"anyOf":[{"$recursiveRef":"#"},{"type":"string"}]}},"$ref":"#/$defs/n"}`)
	rec, err := json.Marshal(TypeRecord{Name: "old", Role: graph.RoleSource, Schema: bomb, Version: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.st.PutTypeIf(ctx, "old", nil, rec); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	if err := reg.Load(ctx, s.st); err != nil {
		t.Fatalf("Load: %v, want the type kept as refused", err)
	}
	if why := reg.Refused()["old"]; why == "" {
		t.Fatalf("Refused() = %v, want old", reg.Refused())
	}
	if role, ok := reg.RoleOf("old"); !ok || role != graph.RoleSource {
		t.Fatalf("RoleOf(old) = %q, %v; want its stored role", role, ok)
	}
	fe := Classify(reg.Validate("old", "text", "/ops/0/data"))
	if fe.Code != fault.InvalidSchema || len(fe.Errors) != 1 || fe.Errors[0].Pointer != "/ops/0/type" || fe.Errors[0].Rule != "schema_refused" {
		t.Fatalf("Validate: %+v, want an invalid schema at /ops/0/type, rule schema_refused", fe)
	}
	// Registered again with a schema this release accepts, it validates.
	if _, _, err := reg.Put(ctx, s.st, "old", graph.RoleSource, "", []byte(`{"type":"string"}`)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Validate("old", "text", "/ops/0/data"); err != nil || len(reg.Refused()) != 0 {
		t.Fatalf("after registering again: %v, refused %v", err, reg.Refused())
	}
}
