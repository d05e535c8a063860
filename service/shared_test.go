package service

import (
	"context"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// TestRegistryFollowsAnotherProcess runs two services, each over its own
// store on one shared driver (two processes on one database). A type
// that one registers, and then changes, is what the other validates
// writes against on its next write, without a restart.
func TestRegistryFollowsAnotherProcess(t *testing.T) {
	ctx := context.Background()
	a, b := sharedServices(t, storetest.Shared{LockingDriver: memkv.New()})
	if _, err := a.st.CreateContext(ctx, "c", store.ModeObserve); err != nil {
		t.Fatal(err)
	}
	put := func(s *Service, data string) error {
		_, err := s.PutArtifact(ctx, "c", ArtifactInput{Type: "memo", Data: []byte(data)})
		return err
	}
	if _, _, err := a.types.Put(ctx, a.st, "memo", graph.RoleDerived, "", []byte(`{"type":"object","required":["text"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := put(b, `{"text":"from b"}`); err != nil {
		t.Fatalf("b writes a type a registered: %v", err)
	}
	if fe, ok := fault.As(put(b, `{"note":"no text"}`)); !ok || fe.Code != fault.Invalid {
		t.Fatalf("b writes against a's schema without the required field: %v, want invalid", fe)
	}
	// a changes the schema; b's next write follows.
	if _, _, err := a.types.Put(ctx, a.st, "memo", graph.RoleDerived, "", []byte(`{"type":"object","required":["note"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := put(b, `{"note":"now fine"}`); err != nil {
		t.Fatalf("b writes against a's changed schema: %v", err)
	}
	// b's own change versions from a's: 3, not 2.
	rec, _, err := b.types.Put(ctx, b.st, "memo", graph.RoleDerived, "changed by b", []byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != 3 {
		t.Fatalf("b's change of a type a changed twice is version %d, want 3", rec.Version)
	}
}
