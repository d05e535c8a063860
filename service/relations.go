package service

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/artifactd/artifactd/fault"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// RelationRecord is a relation as GET /v1/relations/{name} shows it and as
// the store keeps it (store.PutRelation, opaque to the store). Depends
// marks a dependency relation: it carries trust like derived_from and
// takes part in the acyclicity check.
type RelationRecord struct {
	Name        string `json:"name"`
	Version     int    `json:"version"`
	Depends     bool   `json:"depends"`
	Description string `json:"description,omitempty"`
	Builtin     bool   `json:"builtin"`
}

// builtinRelations returns the relations of ruleset builtin/v1.
func builtinRelations() map[string]RelationRecord {
	rels := graph.DefaultRelations()
	out := make(map[string]RelationRecord, len(rels))
	for _, n := range rels.Names() {
		out[n] = RelationRecord{Name: n, Version: 1, Depends: rels.Depends(n), Builtin: true}
	}
	return out
}

// RelationOf returns a registered relation (built-in or user).
func (r *Registry) RelationOf(name string) (RelationRecord, bool) {
	if rec, ok := r.builtinRels[name]; ok {
		return rec, true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	rec, ok := r.userRels[name]
	return rec, ok
}

// Relations returns every relation, sorted by name.
func (r *Registry) Relations() []RelationRecord {
	out := make([]RelationRecord, 0, len(r.builtinRels))
	for _, rec := range r.builtinRels {
		out = append(out, rec)
	}
	r.mu.RLock()
	for _, rec := range r.userRels {
		out = append(out, rec)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PutRelation registers or updates a user relation and stores its record.
// A relation's depends flag cannot change once registered; its
// description can (the version goes up). It returns the record and
// whether anything changed; a refused put writes nothing.
//
// Puts of one relation at the same time, in this process or in several on
// one database, answer and leave what one serial order of them would:
// each decides against the relation's record as the store holds it and
// writes only if that record is still there (store.Store.PutRelationIf),
// deciding again when another put got in first. So identical puts are
// never refused, and depends never changes under a put that answered for
// it.
func (r *Registry) PutRelation(ctx context.Context, st *store.Store, name string, depends bool, description string) (RelationRecord, bool, error) {
	if err := graph.ValidateName("relation", name); err != nil {
		return RelationRecord{}, false, &fault.Error{Code: fault.Invalid, Detail: err.Error(),
			Errors: []fault.FieldError{{Parameter: "name", Rule: "pattern", Detail: err.Error()}}}
	}
	if graph.IsDefinitionType(name) {
		// As for a type (Put): the names of the definitions a context
		// records are the chain's own.
		detail := fmt.Sprintf("%q is reserved for the definitions a context records; choose another relation name", name)
		return RelationRecord{}, false, &fault.Error{Code: fault.ReservedType, Detail: detail,
			Errors: []fault.FieldError{{Parameter: "name", Rule: "reserved", Detail: detail}}}
	}
	if _, ok := r.builtinRels[name]; ok {
		detail := fmt.Sprintf("%q is a built-in relation and cannot be redefined", name)
		return RelationRecord{}, false, &fault.Error{Code: fault.Conflict, Detail: detail,
			Errors: []fault.FieldError{{Parameter: "name", Rule: "builtin", Detail: detail}}}
	}
	rec := RelationRecord{Name: name, Depends: depends, Description: description}
	wrote, err := r.putRecord(ctx, "relation", name, st.GetRelation, st.PutRelationIf, func(oldRaw []byte) ([]byte, error) {
		rec = RelationRecord{Name: name, Depends: depends, Description: description, Version: 1}
		if oldRaw != nil {
			var old RelationRecord
			if err := json.Unmarshal(oldRaw, &old); err != nil {
				return nil, fmt.Errorf("stored relation %q: %w", name, err)
			}
			if old.Depends != depends {
				return nil, &fault.Error{Code: fault.Conflict,
					Detail: fmt.Sprintf("relation %q has depends=%t; it cannot change once registered (trust and acyclicity already rest on it): register a new relation name instead", name, old.Depends),
					Errors: []fault.FieldError{{Pointer: "/depends", Rule: "immutable", Detail: "depends cannot change"}}}
			}
			if old.Description == description {
				rec = old
				return nil, nil
			}
			rec.Version = old.Version + 1
		}
		return json.Marshal(rec)
	})
	if err != nil {
		return RelationRecord{}, false, err
	}
	r.installRelation(name, rec)
	return rec, wrote, nil
}

// installRelation makes rec, the record the store holds, the registry's
// entry of user relation name.
func (r *Registry) installRelation(name string, rec RelationRecord) {
	r.mu.Lock()
	r.userRels[name] = rec
	r.mu.Unlock()
}

// definitions returns the user definitions that ops use: what a commit of
// ops must record (store.CommitRequest.Types and Relations). A type is
// recorded as use holds it — the entry its puts were validated against —
// and a relation as registered now (its depends never changes). Built-in
// types and relations, and names the registry does not know (the commit
// refuses those), are left out.
func (r *Registry) definitions(ops []graph.Op, use typeUse) ([]graph.TypeDef, []graph.RelationDef) {
	var types []graph.TypeDef
	var rels []graph.RelationDef
	seen := map[string]bool{}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i := range ops {
		op := &ops[i]
		switch op.Op {
		case graph.OpPut:
			if seen["t"+op.Type] {
				continue
			}
			seen["t"+op.Type] = true
			e, ok := use[op.Type]
			if !ok {
				e = r.user[op.Type]
			}
			if e != nil && !e.rec.Builtin {
				types = append(types, graph.TypeDef{Name: e.rec.Name, Role: e.rec.Role, Description: e.rec.Description, Schema: e.rec.Schema})
			}
		case graph.OpLink:
			if seen["r"+op.Rel] {
				continue
			}
			seen["r"+op.Rel] = true
			if rec, ok := r.userRels[op.Rel]; ok {
				rels = append(rels, graph.RelationDef{Name: rec.Name, Depends: rec.Depends, Description: rec.Description})
			}
		}
	}
	return types, rels
}

// ---- handlers ----
