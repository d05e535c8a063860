package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store"
)

// TestImportRefusesSchemasRegistrationRefuses: a bundle's type
// definitions are untrusted, and import validates the bundle's puts with
// them; a schema the type registry would refuse (one whose expansion
// passes the cost bound, one of another draft than 2020-12) is refused by
// import too, before it validates anything with it and before anything is
// written.
func TestImportRefusesSchemasRegistrationRefuses(t *testing.T) {
	ctx := context.Background()
	// anyOf over two $refs, 24 levels: 2^24 subschemas for one value,
	// behind member "a", which the put does not have.
	defs := map[string]any{}
	const depth = 24
	for i := range depth {
		next := fmt.Sprintf("#/$defs/d%d", i+1)
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"anyOf": []any{
			map[string]any{"$ref": next}, map[string]any{"$ref": next, "type": "object"}}}
	}
	defs[fmt.Sprintf("d%d", depth)] = map[string]any{"type": "object"}
	bomb := map[string]any{"$defs": defs, "type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/d0"}}}
	draft4 := map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
		"properties": map[string]any{"n": map[string]any{"maximum": 5, "exclusiveMaximum": true}}}
	for i, tc := range []struct {
		name   string
		schema any
		want   string
	}{
		{"cost", bomb, "cost"},
		{"draft", draft4, "2020-12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mOpen(t, t.TempDir())
			if _, err := src.CreateContext(ctx, "evil", store.ModeObserve); err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := hashing.Canonicalize(js)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Commit(ctx, store.CommitRequest{Context: "evil", Branch: "main", Author: "t", Message: "m",
				Types: []graph.TypeDef{{Name: "t", Role: graph.RoleSource, Schema: raw}},
				Ops:   []graph.Op{mPut("x", "t", map[string]any{"n": 1})}}); err != nil {
				t.Fatal(err)
			}
			victim := mOpen(t, t.TempDir())
			b := readLines(t, bundleLines(t, src, "evil"))
			if _, err := victim.Import(ctx, b, fmt.Sprintf("copy%d", i)); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("import of a type schema the registry refuses: %v", err)
			}
			if _, err := victim.Resolve(ctx, fmt.Sprintf("copy%d", i), "main"); err == nil {
				t.Fatal("a refused import created the context")
			}
		})
	}
}
