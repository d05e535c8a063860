package graph

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/artifactd/artifactd/hashing"
)

func defPut(t *testing.T, d any) Op {
	t.Helper()
	var data json.RawMessage
	var err error
	var op Op
	switch d := d.(type) {
	case TypeDef:
		data, err = d.Data()
		op = Op{Op: OpPut, ID: TypeDefID(d.Name), Type: TypeTypeDef}
	case RelationDef:
		data, err = d.Data()
		op = Op{Op: OpPut, ID: RelationDefID(d.Name), Type: TypeRelationDef}
	}
	if err != nil {
		t.Fatal(err)
	}
	op.Data = data
	return op
}

func dataPut(id, typ, data string) Op {
	c, err := hashing.CanonicalizeObject([]byte(data))
	if err != nil {
		panic(err)
	}
	return Op{Op: OpPut, ID: id, Type: typ, Data: c}
}

func opRule(err error) string {
	var oe *OpError
	if errors.As(err, &oe) {
		return oe.Rule
	}
	return ""
}

// TestDefinitionsDecideTrust: a user type's role and a user relation's
// depends flag come from definition artifacts in the state, so trust is a
// function of the state alone.
func TestDefinitionsDecideTrust(t *testing.T) {
	s := NewState(nil)
	ops := []Op{
		defPut(t, TypeDef{Name: "table", Role: RoleDerived, Schema: json.RawMessage(`{"type":"object"}`)}),
		defPut(t, TypeDef{Name: "spend", Role: RoleSource}),
		defPut(t, RelationDef{Name: "materialized_from", Depends: true}),
		dataPut("spend-1", "spend", `{"usd":3}`),
		dataPut("f", "fetch_verdict", `{"verdict":"FAILED"}`),
		dataPut("t1", "table", `{"rows":1}`),
		{Op: OpLink, From: "t1", Rel: "materialized_from", To: "spend-1"},
		{Op: OpLink, From: "t1", Rel: "materialized_from", To: "f"},
	}
	if _, err := s.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	if r, ok := s.RoleOf("spend"); !ok || r != RoleSource {
		t.Fatalf("RoleOf(spend) = %q %v", r, ok)
	}
	if !s.Relations().Depends("materialized_from") {
		t.Fatal("materialized_from is not a dependency relation")
	}
	rep := ComputeTrust(s, s.Base(nil))
	if got := rep.Trust("t1").Status; got != StatusQuarantined {
		t.Fatalf("t1 = %s, want quarantined through the custom relation", got)
	}
	if got := rep.Trust("spend-1").Status; got != StatusConfirmed {
		t.Fatalf("spend-1 = %s", got)
	}
	// Without the definitions the same artifacts are unknown types.
	bare := ComputeTrust(s, RoleBase(nil, nil))
	if bare.Trust("t1").Status != StatusPoisonRoot {
		t.Fatalf("without definitions t1 should be a poison root, got %s", bare.Trust("t1").Status)
	}
	// Loading the same parts gives the same definitions.
	var arts []*Artifact
	arts = append(arts, s.Artifacts()...)
	ld, err := Load(nil, arts, nil, s.Edges())
	if err != nil {
		t.Fatal(err)
	}
	if ld.Hash() != s.Hash() || !ld.Relations().Depends("materialized_from") {
		t.Fatal("Load lost the definitions")
	}
	if r, _ := ld.RoleOf("spend"); r != RoleSource {
		t.Fatalf("Load: RoleOf(spend) = %q", r)
	}
	// A cycle through the custom dependency relation is refused.
	_, err = s.ApplyOps([]Op{{Op: OpLink, From: "spend-1", Rel: "derived_from", To: "t1"}})
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("cycle across relations: %v", err)
	}
}

func TestDefinitionRules(t *testing.T) {
	base := func(t *testing.T) *State {
		s := NewState(nil)
		if _, err := s.ApplyOps([]Op{
			defPut(t, TypeDef{Name: "table", Role: RoleDerived}),
			defPut(t, RelationDef{Name: "feeds", Depends: false}),
			dataPut("t1", "table", `{}`),
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		ops  func(t *testing.T) []Op
		rule string
	}{
		{"role change", func(t *testing.T) []Op { return []Op{defPut(t, TypeDef{Name: "table", Role: RoleSource})} }, "immutable"},
		{"depends change", func(t *testing.T) []Op { return []Op{defPut(t, RelationDef{Name: "feeds", Depends: true})} }, "immutable"},
		{"builtin type", func(t *testing.T) []Op { return []Op{defPut(t, TypeDef{Name: "claim", Role: RoleSource})} }, "builtin"},
		{"builtin relation", func(t *testing.T) []Op {
			return []Op{defPut(t, RelationDef{Name: "derived_from", Depends: false})}
		}, "builtin"},
		{"fetch_verdict role", func(t *testing.T) []Op {
			return []Op{defPut(t, TypeDef{Name: "x", Role: RoleFetchVerdict})}
		}, "enum"},
		{"delete definition", func(t *testing.T) []Op { return []Op{{Op: OpDelete, ID: TypeDefID("table")}} }, "permanent"},
		{"edge to definition", func(t *testing.T) []Op {
			return []Op{{Op: OpLink, From: "t1", Rel: "derived_from", To: TypeDefID("table")}}
		}, "reserved"},
		{"reserved id", func(t *testing.T) []Op { return []Op{dataPut("artifactd.x", "claim", `{}`)} }, "reserved"},
		{"retype definition", func(t *testing.T) []Op { return []Op{dataPut(TypeDefID("table"), "claim", `{}`)} }, "reserved"},
		{"id mismatch", func(t *testing.T) []Op {
			op := defPut(t, TypeDef{Name: "other", Role: RoleDerived})
			op.ID = TypeDefID("table")
			return []Op{op}
		}, "definition_id"},
		{"unknown member", func(t *testing.T) []Op {
			return []Op{dataPut(TypeDefID("q"), TypeTypeDef, `{"name":"q","role":"derived","extra":1}`)}
		}, "type_definition"},
		{"no data", func(t *testing.T) []Op {
			op := defPut(t, TypeDef{Name: "q", Role: RoleDerived})
			op.ContentHash, op.Data = hashing.ContentHash(op.Data), nil
			return []Op{op}
		}, "definition_data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base(t)
			before := s.Hash()
			_, err := s.ApplyOps(tc.ops(t))
			if got := opRule(err); got != tc.rule {
				t.Fatalf("rule %q (err %v), want %q", got, err, tc.rule)
			}
			if s.Hash() != before || !s.Relations().Known("feeds") || s.Relations().Depends("feeds") {
				t.Fatal("a refused commit changed the state or its definitions")
			}
			if r, _ := s.RoleOf("table"); r != RoleDerived {
				t.Fatal("a refused commit changed a role")
			}
		})
	}
	// A schema and description may change: a new version.
	s := base(t)
	ch, err := s.ApplyOps([]Op{defPut(t, TypeDef{Name: "table", Role: RoleDerived, Description: "rows", Schema: json.RawMessage(`{"type":"object"}`)})})
	if err != nil || ch[0].Next.Version != 2 || s.TypeDef("table").Description != "rows" {
		t.Fatalf("schema change: %v %+v", err, ch)
	}
	s.Undo(ch)
	if s.TypeDef("table").Description != "" {
		t.Fatal("Undo did not restore the definition")
	}
}

// TestLateDefinitionUpdatesTrust: a type defined after artifacts of it
// were written (a context from before definitions were recorded) changes
// their base, and the incremental index agrees with a full pass.
func TestLateDefinitionUpdatesTrust(t *testing.T) {
	s := NewState(nil)
	if _, err := s.ApplyOps([]Op{dataPut("t1", "table", `{}`), dataPut("c", "claim", `{}`),
		{Op: OpLink, From: "c", Rel: "derived_from", To: "t1"}}); err != nil {
		t.Fatal(err)
	}
	idx := NewTrustIndex(s, s.Base(nil))
	if idx.Status("c") != StatusQuarantined {
		t.Fatalf("before: c = %s", idx.Status("c"))
	}
	ch, err := s.ApplyOps([]Op{defPut(t, TypeDef{Name: "table", Role: RoleSource})})
	if err != nil {
		t.Fatal(err)
	}
	idx.Apply(s, ch)
	if idx.Status("c") != StatusConfirmed || idx.Status("t1") != StatusConfirmed {
		t.Fatalf("after: c = %s, t1 = %s", idx.Status("c"), idx.Status("t1"))
	}
	if err := idx.Verify(s); err != nil {
		t.Fatal(err)
	}
	s.Undo(ch)
	idx.Revert(s, ch)
	if idx.Status("c") != StatusQuarantined {
		t.Fatalf("reverted: c = %s", idx.Status("c"))
	}
}

func TestDefinitionOps(t *testing.T) {
	s := NewState(nil)
	td := TypeDef{Name: "table", Role: RoleDerived}
	rd := RelationDef{Name: "feeds", Depends: true}
	ops, err := DefinitionOps(s, []TypeDef{td, td, {Name: "claim", Role: RoleDerived}}, []RelationDef{rd, {Name: "cites"}})
	if err != nil || len(ops) != 2 || ops[0].ID != TypeDefID("table") || ops[1].ID != RelationDefID("feeds") {
		t.Fatalf("first use: %v %+v", err, ops)
	}
	if _, err := s.ApplyOps(ops); err != nil {
		t.Fatal(err)
	}
	if ops, _ := DefinitionOps(s, []TypeDef{td}, []RelationDef{rd}); len(ops) != 0 {
		t.Fatalf("recorded definitions are written again: %+v", ops)
	}
	td.Description = "changed"
	if ops, _ := DefinitionOps(s, []TypeDef{td}, nil); len(ops) != 1 {
		t.Fatalf("a changed definition is not recorded: %+v", ops)
	}
}

func TestRulesetTrailer(t *testing.T) {
	for msg, want := range map[string]string{
		"create context":              RulesetV1,
		RootMessage("builtin/v1"):     "builtin/v1",
		RootMessage("builtin/v9"):     "builtin/v9",
		"x\n\nRuleset: a\nRuleset: b": "b",
	} {
		if got := RulesetOf(msg); got != want {
			t.Errorf("RulesetOf(%q) = %q, want %q", msg, got, want)
		}
	}
	if _, err := LookupRuleset("builtin/v9"); opRule(err) != "known_ruleset" {
		t.Fatalf("unknown ruleset: %v", err)
	}
}
