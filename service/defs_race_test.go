package service

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
)

// TestWriteRecordsTheDefinitionItValidatedAgainst: a put of a type that
// lands after a write has validated its data and before the write decides
// what its commit records — here, deterministically, from the service's
// hook between the two — does not make the commit record the new
// definition: the commit records the one the data was checked against, so
// history never holds data its own definition refuses, and the context's
// export imports. Both ways of writing (an artifact, a commit of ops).
func TestWriteRecordsTheDefinitionItValidatedAgainst(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(ctx context.Context, s *Service) error
	}{
		{"PutArtifact", func(ctx context.Context, s *Service) error {
			_, err := s.PutArtifact(ctx, "o", ArtifactInput{ID: "m1", Type: "memo", Data: json.RawMessage(`{"a":1}`)})
			return err
		}},
		{"Commit", func(ctx context.Context, s *Service) error {
			_, err := s.Commit(ctx, "o", CommitInput{Ops: []OpInput{
				{Op: "put", Artifact: &PutInput{ID: "m1", Type: "memo", Data: json.RawMessage(`{"a":1}`)}},
				{Op: "put", Artifact: &PutInput{ID: "m2", Type: "memo", Data: json.RawMessage(`{"a":2}`)}},
			}})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newService(t)
			ctx := t.Context()
			putType := func(schema string) {
				t.Helper()
				if _, _, err := s.types.Put(ctx, s.st, "memo", graph.RoleDerived, "", []byte(schema)); err != nil {
					t.Fatal(err)
				}
			}
			putType(`{"type":"object","required":["a"]}`)
			s.validated = func() {
				s.validated = nil
				putType(`{"type":"object","required":["b"]}`)
			}
			if err := c.write(ctx, s); err != nil {
				t.Fatal(err)
			}
			if s.validated != nil {
				t.Fatal("the write did not reach the hook between validating and recording")
			}
			var buf bytes.Buffer
			if _, err := s.st.Export(ctx, "o", "", &buf); err != nil {
				t.Fatal(err)
			}
			b, err := replay.ReadBundle(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.st.Import(ctx, b, "o-copy"); err != nil {
				t.Fatalf("import of the written context: %v", err)
			}
		})
	}
}
