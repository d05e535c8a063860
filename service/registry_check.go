package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

// CheckRegistry checks the type and relation records st holds, as fsck
// does the rest of the store (store.Check): every record must decode as
// Load reads it — a record Load fails on keeps serve from starting — and
// name the type or relation its key names, with a version of at least 1;
// a type's role must be one a type can have (a schema this release
// refuses is not damage: Load keeps the type and refuses its artifacts
// until it is registered again). It reports each defect (kind
// "type" or "relation"), a record the driver cannot read among them, and
// fails only when the records cannot be scanned at all.
//
// A record changed into another valid one (a description, a schema, or
// a relation's depends flipped) cannot be told from a put: the chains
// hold the definitions each commit used, and trust reads those.
func CheckRegistry(ctx context.Context, st *store.Store) ([]store.Defect, error) {
	types, rels, err := st.CheckedRegistry(ctx)
	if err != nil {
		return nil, err
	}
	return append(registryDefects("type", types, checkTypeRecord), registryDefects("relation", rels, checkRelationRecord)...), nil
}

// registryDefects reports, in name order, each record of recs (of kind
// "type" or "relation") the driver could not read or check finds wrong.
func registryDefects(kind string, recs map[string]store.RegistryRecord, check func(name string, raw []byte) string) []store.Defect {
	var out []store.Defect
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		var why string
		if r := recs[name]; r.Unreadable != "" {
			why = kind + " record unreadable (serve will not start): " + r.Unreadable
		} else {
			why = check(name, r.Raw)
		}
		if why != "" {
			out = append(out, store.Defect{Kind: kind, ID: name, Detail: why})
		}
	}
	return out
}

// checkTypeRecord returns what is wrong with the record of type name, or
// "".
func checkTypeRecord(name string, raw []byte) string {
	var rec TypeRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "type record does not decode (serve will not start): " + err.Error()
	}
	switch {
	case graph.ValidateName("type", name) != nil:
		return fmt.Sprintf("type record keyed by a name no type can have: %v", graph.ValidateName("type", name))
	case rec.Name != name:
		return fmt.Sprintf("type record names %q, its key %q", rec.Name, name)
	case rec.Version < 1:
		return fmt.Sprintf("type record has version %d", rec.Version)
	}
	_, err := newTypeEntry(name, rec.Role, rec.Description, rec.Schema)
	var fe *fault.Error
	if err == nil || (errors.As(err, &fe) && fe.Code == fault.InvalidSchema) {
		return ""
	}
	return "type record does not load (serve will not start): " + err.Error()
}

// checkRelationRecord returns what is wrong with the record of relation
// name, or "".
func checkRelationRecord(name string, raw []byte) string {
	var rec RelationRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "relation record does not decode (serve will not start): " + err.Error()
	}
	switch {
	case graph.ValidateName("relation", name) != nil:
		return fmt.Sprintf("relation record keyed by a name no relation can have: %v", graph.ValidateName("relation", name))
	case rec.Name != name:
		return fmt.Sprintf("relation record names %q, its key %q", rec.Name, name)
	case rec.Version < 1:
		return fmt.Sprintf("relation record has version %d", rec.Version)
	}
	return ""
}
