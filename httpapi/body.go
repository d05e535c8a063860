package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/artifactd/artifactd/hashing"
)

// fromDoc fills the request struct of the writes agents make most — an
// artifact, a commit — from the body's document once the request schema
// has passed it, instead of parsing the canonical body a third time with
// json.Unmarshal: for a 5,000-artifact commit that parse was half of
// what decoding the body cost (BenchmarkDecodeCommitBody). Each fills
// exactly what json.Unmarshal of the canonical body would
// (TestFromDocMatchesUnmarshal): the schema leaves each member one type,
// the document's strings are its own (hashing.DecodeCanonical), and a
// payload's canonical bytes are written again from the document
// (hashing.AppendCanonical), which gives back the bytes it was read from.
// Other requests are few and small and keep json.Unmarshal.
var fromDoc = map[string]func(doc any, dst any) error{
	"artifact": filler(artifactInputOf),
	"commit":   filler(commitInputOf),
}

// filler adapts fill to fromDoc: dst must be a *T, else the route passes
// the wrong struct, which is an error, not a panic.
func filler[T any](fill func(doc any, in *T) error) func(doc any, dst any) error {
	return func(doc any, dst any) error {
		in, ok := dst.(*T)
		if !ok {
			return fmt.Errorf("decode into %T: want %T", dst, in)
		}
		return fill(doc, in)
	}
}

// artifactInputOf fills in from doc, a body valid against the artifact
// request schema.
func artifactInputOf(doc any, in *ArtifactInput) error {
	m, _ := doc.(map[string]any)
	if m == nil {
		return errors.New("the body is not an object")
	}
	in.ID, in.Type, in.ProducedBy = str(m, "id"), str(m, "type"), str(m, "produced_by")
	in.Parent, in.Branch, in.Quarantine = str(m, "parent"), str(m, "branch"), str(m, "quarantine")
	var a arena
	var err error
	if in.Data, err = a.raw(m, "data"); err != nil {
		return err
	}
	if edges, ok := m["edges"].([]any); ok {
		in.Edges = make([]EdgeInput, len(edges))
		for i, e := range edges {
			em, _ := e.(map[string]any)
			in.Edges[i] = EdgeInput{Rel: str(em, "rel"), To: str(em, "to")}
			if in.Edges[i].Attrs, err = a.raw(em, "attrs"); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitInputOf fills in from doc, a body valid against the commit
// request schema.
func commitInputOf(doc any, in *CommitInput) error {
	m, _ := doc.(map[string]any)
	if m == nil {
		return errors.New("the body is not an object")
	}
	in.Branch, in.Parent, in.Author = str(m, "branch"), str(m, "parent"), str(m, "author")
	in.Message, in.Quarantine = str(m, "message"), str(m, "quarantine")
	ops, ok := m["ops"].([]any)
	if !ok {
		return errors.New("the body has no ops")
	}
	in.Ops = make([]OpInput, len(ops))
	var a arena
	var err error
	for i, o := range ops {
		om, _ := o.(map[string]any)
		op := &in.Ops[i]
		op.Op, op.ID, op.From, op.Rel, op.To = str(om, "op"), str(om, "id"), str(om, "from"), str(om, "rel"), str(om, "to")
		if op.Attrs, err = a.raw(om, "attrs"); err != nil {
			return err
		}
		if am, ok := om["artifact"].(map[string]any); ok {
			op.Artifact = &PutInput{ID: str(am, "id"), Type: str(am, "type"), ProducedBy: str(am, "produced_by")}
			if op.Artifact.Data, err = a.raw(am, "data"); err != nil {
				return err
			}
		}
	}
	return nil
}

// str returns m's string member k, or "" (absent, as json.Unmarshal
// leaves a field it does not find).
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// arena writes the canonical bytes of a request's payloads into one
// scratch buffer and hands each out as a copy of its own size: a payload
// kept after the request (in a cache) keeps only itself alive.
type arena struct{ buf []byte }

// raw returns the canonical bytes of m's member k, or nil when m has
// none.
func (a *arena) raw(m map[string]any, k string) (json.RawMessage, error) {
	v, ok := m[k]
	if !ok {
		return nil, nil
	}
	out, err := hashing.AppendCanonical(a.buf[:0], v)
	if err != nil {
		return nil, err
	}
	a.buf = out
	return bytes.Clone(out), nil
}
