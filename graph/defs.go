package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/artifactd/artifactd/hashing"
)

// Definitions travel with a context. The types (role, schema) and the
// relations (depends) a context uses are recorded in its own history as
// definition artifacts, so that trust and validation at a commit are a
// function of the chain up to that commit: the same in the server, the
// offline tools and an imported copy. Built-in definitions are not
// recorded one by one; the context names the Ruleset that holds them.
//
// A definition artifact is an ordinary artifact (leaf, version, content
// hash: HASHING.md is unchanged) with a reserved type and id:
//
//	type artifactd.type      id artifactd.type/<name>      data TypeDef
//	type artifactd.relation  id artifactd.relation/<name>  data RelationDef
//
// The rules the state enforces on them, whoever writes the ops:
//   - the id names the definition (artifactd.type/<data.name>);
//   - a built-in of the ruleset cannot be redefined;
//   - a type's role and a relation's depends flag cannot change once
//     defined (trust already rests on them); schema and description can;
//   - definitions are never deleted and take no edges;
//   - every other id starting with "artifactd." is reserved.

// The reserved definition types.
const (
	TypeTypeDef     = "artifactd.type"
	TypeRelationDef = "artifactd.relation"
)

// ReservedIDPrefix starts the ids of definition artifacts; no other
// artifact may use it.
const ReservedIDPrefix = "artifactd."

// TypeDefID returns the id of the definition artifact of type name.
func TypeDefID(name string) string { return TypeTypeDef + "/" + name }

// RelationDefID returns the id of the definition artifact of relation name.
func RelationDefID(name string) string { return TypeRelationDef + "/" + name }

// IsDefinitionType reports whether typ is one of the reserved definition
// types, whose puts must carry their data.
func IsDefinitionType(typ string) bool { return typ == TypeTypeDef || typ == TypeRelationDef }

// TypeDef is the data of an artifactd.type artifact: a user type as it was
// in force from the commit that recorded it. Schema is the canonical JSON
// of a draft 2020-12 JSON Schema for the data of artifacts of the type
// (absent: any object).
type TypeDef struct {
	Name        string          `json:"name"`
	Role        Role            `json:"role"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
}

// RelationDef is the data of an artifactd.relation artifact: a user
// relation and whether it is a dependency relation (carries trust, must
// stay acyclic).
type RelationDef struct {
	Name        string `json:"name"`
	Depends     bool   `json:"depends"`
	Description string `json:"description,omitempty"`
}

// Data returns the canonical data of the definition.
func (d TypeDef) Data() (json.RawMessage, error) { return canonicalDef(d) }

// Data returns the canonical data of the definition.
func (d RelationDef) Data() (json.RawMessage, error) { return canonicalDef(d) }

func canonicalDef(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return hashing.CanonicalizeObject(raw)
}

// Equal reports whether two type definitions record the same thing.
func (d TypeDef) Equal(o TypeDef) bool {
	return d.Name == o.Name && d.Role == o.Role && d.Description == o.Description && bytes.Equal(d.Schema, o.Schema)
}

// Ruleset is a named, immutable set of built-in definitions. A context
// records the name of its ruleset when it is created (a trailer of its root
// commit's message, see RulesetTrailer); a later version of the built-ins
// gets a new name, so it never changes how an old context is judged.
type Ruleset struct {
	Name      string
	roles     map[string]Role
	relations Relations
}

// RulesetV1 is the name of the first ruleset: the built-in types and
// relations of DESIGN.md. A context created before rulesets were recorded
// uses it.
const RulesetV1 = "builtin/v1"

// rulesetV1 returns a fresh copy of builtin/v1.
func rulesetV1() *Ruleset {
	roles := map[string]Role{}
	for _, t := range BuiltinTypes() {
		r, _ := BuiltinRoles(t)
		roles[t] = r
	}
	return &Ruleset{Name: RulesetV1, roles: roles, relations: DefaultRelations()}
}

// LookupRuleset returns the ruleset with the given name ("" is
// RulesetV1), or an error naming the known ones.
func LookupRuleset(name string) (*Ruleset, error) {
	switch name {
	case "", RulesetV1:
		return rulesetV1(), nil
	}
	return nil, &OpError{Index: -1, Field: "/ruleset", Rule: "known_ruleset", Err: ErrCorrupt,
		Detail: fmt.Sprintf("unknown ruleset %q; this build knows %s", name, RulesetV1)}
}

// Role returns the built-in role of typ in the ruleset.
func (r *Ruleset) Role(typ string) (Role, bool) { role, ok := r.roles[typ]; return role, ok }

// Types returns the names of the ruleset's built-in types, sorted.
func (r *Ruleset) Types() []string {
	out := make([]string, 0, len(r.roles))
	for t := range r.roles {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Relations returns a copy of the ruleset's built-in relations.
func (r *Ruleset) Relations() Relations {
	out := make(Relations, len(r.relations))
	for k, v := range r.relations {
		out[k] = v
	}
	return out
}

// RulesetTrailer is the trailer key, in a root commit's message, that
// names the context's ruleset: "create context\n\nRuleset: builtin/v1".
const RulesetTrailer = "Ruleset"

// RootMessage returns the message of a context's root commit that records
// the ruleset.
func RootMessage(ruleset string) string {
	return "create context\n\n" + RulesetTrailer + ": " + ruleset
}

// RulesetOf returns the ruleset name a root commit's message records: the
// value of its last "Ruleset:" trailer line, or RulesetV1 when there is
// none (contexts made before rulesets were recorded).
func RulesetOf(message string) string {
	name := RulesetV1
	for _, ln := range strings.Split(message, "\n") {
		if v, ok := strings.CutPrefix(ln, RulesetTrailer+": "); ok {
			name = strings.TrimSpace(v)
		}
	}
	return name
}

// defError builds the OpError of a refused definition op.
func defError(field, rule, format string, args ...any) *OpError {
	return &OpError{Index: -1, Field: field, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// checkReservedID refuses a reserved id for an artifact that is not the
// definition it names.
func checkReservedID(id, typ string) error {
	if !strings.HasPrefix(id, ReservedIDPrefix) && !IsDefinitionType(typ) {
		return nil
	}
	if !IsDefinitionType(typ) {
		return defError("/id", "reserved", "artifact id %q: ids starting with %q are reserved for definitions", id, ReservedIDPrefix)
	}
	if !strings.HasPrefix(id, typ+"/") {
		return defError("/id", "definition_id", "a %s artifact must have the id %s/<name>, not %q", typ, typ, id)
	}
	return nil
}

// parseTypeDef decodes and checks the data of a type definition put.
func (s *State) parseTypeDef(id string, data json.RawMessage) (*TypeDef, error) {
	var d TypeDef
	if err := strictDecode(data, &d); err != nil {
		return nil, defError("/data", "type_definition", "type definition %q: %v", id, err)
	}
	if err := ValidateName("type", d.Name); err != nil {
		return nil, prefixField(err, "/data/name")
	}
	if id != TypeDefID(d.Name) {
		return nil, defError("/id", "definition_id", "type definition of %q must have the id %q, not %q", d.Name, TypeDefID(d.Name), id)
	}
	if IsDefinitionType(d.Name) {
		return nil, defError("/data/name", "reserved", "%q is a reserved type", d.Name)
	}
	if _, ok := s.ruleset.Role(d.Name); ok {
		return nil, defError("/data/name", "builtin", "%q is a built-in type of ruleset %s and cannot be redefined", d.Name, s.ruleset.Name)
	}
	switch d.Role {
	case RoleSource, RoleDerived, RoleNever:
	default:
		return nil, defError("/data/role", "enum", "type %q: role %q; want source, derived or never", d.Name, d.Role)
	}
	if prev := s.types[d.Name]; prev != nil && prev.Role != d.Role {
		return nil, defError("/data/role", "immutable", "type %q has role %q; a role cannot change once defined (trust already rests on it): define a new type name instead", d.Name, prev.Role)
	}
	return &d, nil
}

// parseRelationDef decodes and checks the data of a relation definition put.
func (s *State) parseRelationDef(id string, data json.RawMessage) (*RelationDef, error) {
	var d RelationDef
	if err := strictDecode(data, &d); err != nil {
		return nil, defError("/data", "relation_definition", "relation definition %q: %v", id, err)
	}
	if err := ValidateName("relation", d.Name); err != nil {
		return nil, prefixField(err, "/data/name")
	}
	if id != RelationDefID(d.Name) {
		return nil, defError("/id", "definition_id", "relation definition of %q must have the id %q, not %q", d.Name, RelationDefID(d.Name), id)
	}
	if _, ok := s.ruleset.relations[d.Name]; ok {
		return nil, defError("/data/name", "builtin", "%q is a built-in relation of ruleset %s and cannot be redefined", d.Name, s.ruleset.Name)
	}
	if prev, ok := s.relDefs[d.Name]; ok && prev.Depends != d.Depends {
		return nil, defError("/data/depends", "immutable", "relation %q has depends=%t; it cannot change once defined (trust and acyclicity rest on it): define a new relation name instead", d.Name, prev.Depends)
	}
	return &d, nil
}

// strictDecode decodes a JSON object refusing unknown members.
func strictDecode(data json.RawMessage, v any) error {
	if len(data) == 0 {
		return fmt.Errorf("the put carries no data")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Ruleset returns the ruleset of the state's context.
func (s *State) Ruleset() *Ruleset { return s.ruleset }

// RoleOf returns the role of typ at this state: the definition types are
// sources, then the ruleset's built-ins, then the type definitions
// recorded in the state. ok is false for a type the chain does not define.
// Its signature fits the roleOf argument of RoleBase.
func (s *State) RoleOf(typ string) (Role, bool) {
	if IsDefinitionType(typ) {
		return RoleSource, true
	}
	if r, ok := s.ruleset.Role(typ); ok {
		return r, true
	}
	if d := s.types[typ]; d != nil {
		return d.Role, true
	}
	return "", false
}

// TypeDef returns the user type definition in force at this state, or nil.
func (s *State) TypeDef(name string) *TypeDef { return s.types[name] }

// RelationDef returns the user relation definition in force, or false.
func (s *State) RelationDef(name string) (RelationDef, bool) {
	d, ok := s.relDefs[name]
	return d, ok
}

// TypeDefs returns the user type definitions in force, sorted by name.
func (s *State) TypeDefs() []TypeDef {
	out := make([]TypeDef, 0, len(s.types))
	for _, d := range s.types {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RelationDefs returns the user relation definitions in force, sorted.
func (s *State) RelationDefs() []RelationDef {
	out := make([]RelationDef, 0, len(s.relDefs))
	for _, d := range s.relDefs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Base returns the BaseFunc of DESIGN.md for this state: roles come from
// RoleOf, so they are the definitions in force at the state (RoleBase with
// s.RoleOf). verdictOf is as for RoleBase. The function follows the state
// as it changes.
func (s *State) Base(verdictOf func(a *Artifact) (verdict, reason string)) BaseFunc {
	return RoleBase(s.RoleOf, verdictOf)
}

// defChange is what a definition put changed, for Undo and for the trust
// index.
type defChange struct {
	// typ is the user type whose definition the put set; prevType the
	// definition before (nil when it was first defined).
	typ      string
	prevType *TypeDef
	// rel is the relation whose definition the put set; prevRel the one
	// before and hadRel whether there was one.
	rel     string
	prevRel RelationDef
	hadRel  bool
}

// applyDefinition records the definition a put writes. It is called after
// the put's checks passed and before the artifact is inserted.
func (s *State) applyDefinition(a *Artifact, d any) *defChange {
	s.gen++
	switch d := d.(type) {
	case *TypeDef:
		dc := &defChange{typ: d.Name, prevType: s.types[d.Name]}
		s.types = cloneMap(s.types)
		s.types[d.Name] = d
		return dc
	case *RelationDef:
		prev, had := s.relDefs[d.Name]
		dc := &defChange{rel: d.Name, prevRel: prev, hadRel: had}
		s.relDefs = cloneMap(s.relDefs)
		s.relDefs[d.Name] = *d
		s.rels = cloneMap(s.rels)
		s.rels[d.Name] = d.Depends
		return dc
	}
	return nil
}

// undoDefinition reverts applyDefinition.
func (s *State) undoDefinition(dc *defChange) {
	if dc == nil {
		return
	}
	s.gen++
	if dc.typ != "" {
		s.types = cloneMap(s.types)
		if dc.prevType == nil {
			delete(s.types, dc.typ)
		} else {
			s.types[dc.typ] = dc.prevType
		}
	}
	if dc.rel != "" {
		s.relDefs = cloneMap(s.relDefs)
		s.rels = cloneMap(s.rels)
		if dc.hadRel {
			s.relDefs[dc.rel] = dc.prevRel
			s.rels[dc.rel] = dc.prevRel.Depends
		} else {
			delete(s.relDefs, dc.rel)
			delete(s.rels, dc.rel)
		}
	}
}

// cloneMap copies a map; definitions are few, and copying on write lets
// Clone share them.
func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// loadDefinition records a definition artifact of a state built by Load.
// Its Data must be set.
func (s *State) loadDefinition(a *Artifact) error {
	d, err := s.parseDefinition(a.ID, a.Type, a.Data)
	if err != nil {
		return err
	}
	s.applyDefinition(a, d)
	return nil
}

// parseDefinition parses the data of a definition artifact.
func (s *State) parseDefinition(id, typ string, data json.RawMessage) (any, error) {
	if typ == TypeTypeDef {
		return s.parseTypeDef(id, data)
	}
	return s.parseRelationDef(id, data)
}

// idsOfType returns the ids of the live artifacts of type typ, sorted. It
// scans the state; callers use it only when a type is first defined after
// it was used.
func (s *State) idsOfType(typ string) []string {
	var ids []string
	for id, a := range s.allArtifacts() {
		if a.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// DefinitionOps returns the puts that record, before a commit's own ops,
// each of types and rels that s does not hold exactly as given: a
// definition used for the first time, or changed since it was recorded.
// It is the commit decision's part in keeping definitions in the chain;
// the caller (the writer) passes the definitions it validated the ops
// against. Built-in types and relations of the state's ruleset are
// skipped: the ruleset pins them. The ops are in name order, types first.
func DefinitionOps(s *State, types []TypeDef, rels []RelationDef) ([]Op, error) {
	var ops []Op
	seen := map[string]bool{}
	sorted := append([]TypeDef(nil), types...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, d := range sorted {
		if seen["t"+d.Name] {
			continue
		}
		seen["t"+d.Name] = true
		if _, ok := s.ruleset.Role(d.Name); ok {
			continue
		}
		if cur := s.types[d.Name]; cur != nil && cur.Equal(d) {
			continue
		}
		data, err := d.Data()
		if err != nil {
			return nil, fmt.Errorf("graph: type definition %q: %w", d.Name, err)
		}
		ops = append(ops, Op{Op: OpPut, ID: TypeDefID(d.Name), Type: TypeTypeDef, ProducedBy: "artifactd", Data: data})
	}
	sortedRels := append([]RelationDef(nil), rels...)
	sort.Slice(sortedRels, func(i, j int) bool { return sortedRels[i].Name < sortedRels[j].Name })
	for _, d := range sortedRels {
		if seen["r"+d.Name] {
			continue
		}
		seen["r"+d.Name] = true
		if _, ok := s.ruleset.relations[d.Name]; ok {
			continue
		}
		if cur, ok := s.relDefs[d.Name]; ok && cur == d {
			continue
		}
		data, err := d.Data()
		if err != nil {
			return nil, fmt.Errorf("graph: relation definition %q: %w", d.Name, err)
		}
		ops = append(ops, Op{Op: OpPut, ID: RelationDefID(d.Name), Type: TypeRelationDef, ProducedBy: "artifactd", Data: data})
	}
	return ops, nil
}
