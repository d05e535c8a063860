package service

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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
	if why := checkRecordKey("type", name, rec.Name, rec.Version); why != "" {
		return why
	}
	if _, err := storedTypeEntry(name, rec); err != nil {
		return "type record does not load (serve will not start): " + err.Error()
	}
	return ""
}

// checkRelationRecord returns what is wrong with the record of relation
// name, or "".
func checkRelationRecord(name string, raw []byte) string {
	var rec RelationRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "relation record does not decode (serve will not start): " + err.Error()
	}
	return checkRecordKey("relation", name, rec.Name, rec.Version)
}

// checkRecordKey returns what is wrong with a decoded record of kind
// ("type" or "relation") stored under key that names recName at version,
// or "": the key must be a name of its kind, the record must name it, and
// the version must be at least 1.
func checkRecordKey(kind, key, recName string, version int) string {
	switch err := graph.ValidateName(kind, key); {
	case err != nil:
		return fmt.Sprintf("%s record keyed by a name no %s can have: %v", kind, kind, err)
	case recName != key:
		return fmt.Sprintf("%s record names %q, its key %q", kind, recName, key)
	case version < 1:
		return fmt.Sprintf("%s record has version %d", kind, version)
	}
	return ""
}
