package schema

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrInvalid marks data that does not match its schema, or a schema that
// does not compile.
var ErrInvalid = errors.New("schema validation failed")

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
	// fast checks data first when the schema has such a check (Fast);
	// the library then explains only a refusal.
	fast *Fast
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed; a type schema must be self-contained", url)
}

// NewCompiler returns a compiler for type schemas: draft 2020-12 by
// default, formats asserted, and every external reference (file or URL)
// refused instead of loaded. The HTTP door compiles with it too, so both
// judge a schema alike.
func NewCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.AssertFormat()
	return c
}

// Compile compiles the schema doc (JSON bytes) of type name as draft
// 2020-12. External references are refused, and so is what the type
// registry refuses: a $schema other than draft 2020-12, and a schema
// CheckCost refuses (the error wraps its *CostError).
func Compile(name string, doc []byte) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%w: schema of %q: %w", ErrInvalid, name, err)
	}
	if OtherDialect(v) {
		return nil, fmt.Errorf("%w: schema of %q: $schema must be %s (draft 2020-12)", ErrInvalid, name, jsonschema.Draft2020)
	}
	if ce := CheckCost(v); ce != nil {
		return nil, fmt.Errorf("%w: schema of %q: %w", ErrInvalid, name, ce)
	}
	c := NewCompiler()
	loc := "urn:artifactd:schema:" + name
	if err := c.AddResource(loc, v); err != nil {
		return nil, fmt.Errorf("%w: schema of %q: %w", ErrInvalid, name, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: schema of %q: %w", ErrInvalid, name, err)
	}
	return &Schema{s: s, fast: CompileFast(v)}, nil
}

// Validate checks data (JSON bytes) against the schema. The error wraps
// ErrInvalid and says where the data fails.
func (s *Schema) Validate(data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if s.fast != nil && s.fast.Valid(v) {
		return nil
	}
	if err := s.s.Validate(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
