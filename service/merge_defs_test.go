package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// mergeDefsFixture: type "reading" is defined with any "v" on both
// branches ("side" from main), then redefined to need an integer "v", and
// main records that definition by a write. theirs holds "r1" and "r3",
// written under the first definition with a string "v".
func mergeDefsFixture(t *testing.T) (*Service, *store.Store) {
	t.Helper()
	s, _ := newService(t)
	ctx := t.Context()
	st := s.st
	put := func(branch, id, data string) { t.Helper(); putOn(t, s, branch, id, "reading", data) }
	if _, _, err := s.types.Put(ctx, st, "reading", graph.RoleDerived, "", []byte(`{"type":"object","required":["v"]}`)); err != nil {
		t.Fatal(err)
	}
	put("main", "r0", `{"v":1}`)
	head, err := st.Resolve(ctx, "o", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBranch(ctx, "o", "side", head.ID); err != nil {
		t.Fatal(err)
	}
	put("side", "r1", `{"v":"seven"}`)
	put("side", "r3", `{"v":"eight"}`)
	if _, _, err := s.types.Put(ctx, st, "reading", graph.RoleDerived, "", []byte(`{"type":"object","required":["v"],"properties":{"v":{"type":"integer"}}}`)); err != nil {
		t.Fatal(err)
	}
	put("main", "r2", `{"v":2}`)
	return s, st
}

// TestMergeKeepsEveryPutValidUnderTheMergedDefinition: a merge whose
// result would hold a put that the merged history's own definition of its
// type refuses (theirs' artifact under main's newer definition, or a
// value resolution the history's definition refuses) is refused with a
// validation problem naming it, and the context is unchanged; a merge of
// valid data lands, and the context then exports and imports (import
// checks every put against its type as the chain defines it there).
func TestMergeKeepsEveryPutValidUnderTheMergedDefinition(t *testing.T) {
	s, st := mergeDefsFixture(t)
	ctx := t.Context()
	before, _ := st.Resolve(ctx, "o", "main")
	_, err := s.Merge(ctx, "o", MergeInput{Theirs: "side"})
	p := Classify(err)
	if p.Code != fault.Invalid || !strings.Contains(p.Detail, `"r1" and 1 more`) {
		t.Fatalf("merge of r1 and r3 under main's definition: %v", err)
	}
	if len(p.Errors) != 2 || p.Errors[0].Pointer != "/theirs" || !strings.Contains(p.Errors[1].Detail, `"r3"`) {
		t.Fatalf("errors %+v", p.Errors)
	}
	if after, _ := st.Resolve(ctx, "o", "main"); after.ID != before.ID {
		t.Fatal("a refused merge moved main")
	}

	// Mended on its branch, theirs merges, and the context round-trips.
	for id, data := range map[string]string{"r1": `{"v":7}`, "r3": `{"v":8}`} {
		if _, err := s.PutArtifact(ctx, "o", ArtifactInput{ID: id, Type: "reading", Branch: "side", Data: json.RawMessage(data)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Merge(ctx, "o", MergeInput{Theirs: "side"}); err != nil {
		t.Fatalf("merge of valid data: %v", err)
	}
	var buf bytes.Buffer
	if _, err := st.Export(ctx, "o", "", &buf); err != nil {
		t.Fatal(err)
	}
	b, err := replay.ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, b, "o-copy"); err != nil {
		t.Fatalf("import of the merged context: %v", err)
	}
}

// TestMergeResolutionValueUnderTheHistorysDefinition: the registry's
// type has changed since the context recorded it; a value resolution the
// registry's definition accepts but the one the merged history holds
// refuses is refused at its resolution, and one both accept lands.
func TestMergeResolutionValueUnderTheHistorysDefinition(t *testing.T) {
	s, _ := newService(t)
	ctx := t.Context()
	st := s.st
	put := func(branch, data string) { t.Helper(); putOn(t, s, branch, "c0", "count", data) }
	if _, _, err := s.types.Put(ctx, st, "count", graph.RoleDerived, "", []byte(`{"type":"object","required":["w"]}`)); err != nil {
		t.Fatal(err)
	}
	put("main", `{"w":1}`)
	head, _ := st.Resolve(ctx, "o", "main")
	if err := st.CreateBranch(ctx, "o", "side", head.ID); err != nil {
		t.Fatal(err)
	}
	put("side", `{"w":2}`)
	put("main", `{"w":3}`)
	// The registry's definition changes; no write records it.
	if _, _, err := s.types.Put(ctx, st, "count", graph.RoleDerived, "", []byte(`{"type":"object","required":["v"]}`)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Merge(ctx, "o", MergeInput{Theirs: "side", Resolutions: map[string]replay.Resolution{"c0": {Value: json.RawMessage(`{"v":1}`)}}})
	p := Classify(err)
	if p.Code != fault.Invalid || len(p.Errors) != 1 || p.Errors[0].Pointer != "/resolutions/c0/value" || p.Errors[0].Rule != "schema" {
		t.Fatalf("a value only the registry's definition accepts: %v %+v", err, p.Errors)
	}
	if _, err := s.Merge(ctx, "o", MergeInput{Theirs: "side", Resolutions: map[string]replay.Resolution{"c0": {Value: json.RawMessage(`{"v":1,"w":1}`)}}}); err != nil {
		t.Fatalf("a value both accept: %v", err)
	}
}

// putOn puts artifact id of type typ with data on branch of context "o".
func putOn(t *testing.T, s *Service, branch, id, typ, data string) {
	t.Helper()
	if _, err := s.PutArtifact(t.Context(), "o", ArtifactInput{ID: id, Type: typ, Branch: branch, Data: json.RawMessage(data)}); err != nil {
		t.Fatalf("put %s on %s: %v", id, branch, err)
	}
}
