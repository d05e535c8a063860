package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// TestChainDefinitionRefusalPointsAtTheWrite: a context imported from
// another server keeps the definitions its chain recorded; a write there
// of a type this server registered with another role is refused (the
// role cannot change once a context's history rests on it) — pointing at
// the write's own op and field, the put's /type or the link's /rel. The
// pointer named /data/role (a member the request does not have), and in a
// commit the request's first op, whatever op used the type.
func TestChainDefinitionRefusalPointsAtTheWrite(t *testing.T) {
	ctx := context.Background()
	there, _ := newService(t)
	here, _ := newService(t)
	for _, side := range []struct {
		s       *Service
		role    graph.Role
		depends bool
	}{{there, graph.RoleSource, true}, {here, graph.RoleDerived, false}} {
		if _, _, err := side.s.Types().Put(ctx, side.s.st, "ledger", side.role, "", []byte(`{"type":"object"}`)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := side.s.Types().PutRelation(ctx, side.s.st, "feeds", side.depends, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := there.PutArtifact(ctx, "o", ArtifactInput{ID: "l1", Type: "ledger", Data: json.RawMessage(`{}`),
		Edges: []EdgeInput{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := there.PutArtifact(ctx, "o", ArtifactInput{ID: "c1", Type: "claim", Data: json.RawMessage(`{"text":"x"}`),
		Edges: []EdgeInput{{Rel: "feeds", To: "l1"}}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := there.st.Export(ctx, "o", "main", &buf); err != nil {
		t.Fatal(err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := here.st.Import(ctx, b, "imp"); err != nil {
		t.Fatal(err)
	}
	headOf := func() string {
		var h string
		if err := here.st.Read(ctx, "imp", "main", func(v *store.View) error { h = v.Commit.ID.String(); return nil }); err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := headOf()
	claim := &PutInput{ID: "c2", Type: "claim", Data: json.RawMessage(`{"text":"y"}`)}
	for _, c := range []struct {
		name    string
		write   func() error
		pointer string
	}{
		{"put", func() error {
			_, err := here.PutArtifact(ctx, "imp", ArtifactInput{ID: "l2", Type: "ledger", Data: json.RawMessage(`{}`)})
			return err
		}, "/type"},
		{"put in a commit", func() error {
			_, err := here.Commit(ctx, "imp", CommitInput{Ops: []OpInput{{Op: "put", Artifact: claim},
				{Op: "put", Artifact: &PutInput{ID: "l2", Type: "ledger", Data: json.RawMessage(`{}`)}}}})
			return err
		}, "/ops/1/artifact/type"},
		{"edge", func() error {
			_, err := here.PutArtifact(ctx, "imp", ArtifactInput{ID: "c3", Type: "claim", Data: json.RawMessage(`{"text":"z"}`),
				Edges: []EdgeInput{{Rel: "mentions", To: "c1"}, {Rel: "feeds", To: "c1"}}})
			return err
		}, "/edges/1/rel"},
		{"link in a commit", func() error {
			_, err := here.Commit(ctx, "imp", CommitInput{Ops: []OpInput{{Op: "put", Artifact: claim},
				{Op: "link", From: "c2", Rel: "feeds", To: "c1"}}})
			return err
		}, "/ops/1/rel"},
	} {
		err := c.write()
		var fe *fault.Error
		if !errors.As(err, &fe) || len(fe.Errors) != 1 {
			t.Fatalf("%s: err %#v, want one field error", c.name, err)
		}
		if f := fe.Errors[0]; f.Pointer != c.pointer || f.Rule != "immutable" {
			t.Errorf("%s: field error %+v, want pointer %s, rule immutable", c.name, f, c.pointer)
		}
		if h := headOf(); h != before {
			t.Errorf("%s: a refused write moved the head", c.name)
		}
	}
}
