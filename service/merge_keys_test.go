package service

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// keyHistory writes, on main, notes ids and the edges links (each with
// attrs {"v":0}), branches side from there, then changes each of
// changed on both branches differently: a note's text, or an edge's
// attrs (changed names an edge as "from|rel|to").
func keyHistory(t *testing.T, s *Service, ids []string, links []graph.EdgeKey, changed []string) {
	t.Helper()
	ctx := t.Context()
	commit := func(branch string, ops []OpInput) {
		t.Helper()
		if _, err := s.Commit(ctx, "o", CommitInput{Branch: branch, Ops: ops}); err != nil {
			t.Fatalf("commit on %s: %v", branch, err)
		}
	}
	var ops []OpInput
	for _, id := range ids {
		ops = append(ops, OpInput{Op: "put", Artifact: &PutInput{ID: id, Type: "note", Data: json.RawMessage(`{"text":"base"}`)}})
	}
	for _, k := range links {
		ops = append(ops, OpInput{Op: "link", From: k.From, Rel: k.Rel, To: k.To, Attrs: json.RawMessage(`{"v":0}`)})
	}
	commit("main", ops)
	head, err := s.st.Resolve(ctx, "o", "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.st.CreateBranch(ctx, "o", "side", head.ID); err != nil {
		t.Fatal(err)
	}
	for i, branch := range []string{"main", "side"} {
		var ops []OpInput
		for _, c := range changed {
			if k, ok := edgeOf(c, links); ok {
				ops = append(ops, OpInput{Op: "link", From: k.From, Rel: k.Rel, To: k.To, Attrs: json.RawMessage(`{"v":` + string(rune('1'+i)) + `}`)})
				continue
			}
			ops = append(ops, OpInput{Op: "put", Artifact: &PutInput{ID: c, Type: "note", Data: json.RawMessage(`{"text":"` + branch + `"}`)}})
		}
		commit(branch, ops)
	}
}

// edgeOf returns the edge of links that c, "from|rel|to", names.
func edgeOf(c string, links []graph.EdgeKey) (graph.EdgeKey, bool) {
	for _, k := range links {
		if k.From+"|"+k.Rel+"|"+k.To == c {
			return k, true
		}
	}
	return graph.EdgeKey{}, false
}

// conflictsOf returns the conflicts of a merge of side into main that
// conflicts, failing the test on any other outcome.
func conflictsOf(t *testing.T, s *Service) []replay.Conflict {
	t.Helper()
	_, err := s.Merge(t.Context(), "o", MergeInput{Theirs: "side"})
	var ce *replay.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("merge without resolutions: %v, want a merge conflict", err)
	}
	return ce.Conflicts
}

// settleEach checks that cs are two conflicts with keys of their own,
// then merges side into main taking ours for the first and theirs for
// the second, each by its key, and checks that each took its side: the
// first has main's change, the second side's.
func settleEach(t *testing.T, s *Service, cs []replay.Conflict) {
	t.Helper()
	if len(cs) != 2 || cs[0].Key == cs[1].Key {
		t.Fatalf("conflicts %+v, want two with keys of their own", cs)
	}
	res := map[string]replay.Resolution{cs[0].Key: {Take: replay.TakeOurs}, cs[1].Key: {Take: replay.TakeTheirs}}
	out, err := s.Merge(t.Context(), "o", MergeInput{Theirs: "side", Resolutions: res})
	if err != nil {
		t.Fatalf("resolved by %q and %q: %v", cs[0].Key, cs[1].Key, err)
	}
	if len(out.Resolved) != 2 || len(out.Unused) != 0 {
		t.Fatalf("resolved %d, unused %v; want both resolved", len(out.Resolved), out.Unused)
	}
	head, err := s.st.Resolve(t.Context(), "o", "main")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		want := []string{"main", "side"}[i]
		if c.Edge == nil {
			a, _, err := s.st.ArtifactAt(t.Context(), "o", head, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if a.ContentHash != hashing.ContentHash([]byte(`{"text":"`+want+`"}`)) {
				t.Fatalf("%s (%s) is not %s's after the merge", c.ID, c.Key, want)
			}
			continue
		}
		var attrs string
		if err := s.st.Read(t.Context(), "o", "main", func(v *store.View) error {
			if e := v.State.Edge(*c.Edge); e != nil {
				attrs = string(e.Attrs)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if wantAttrs := `{"v":` + string(rune('1'+i)) + `}`; attrs != wantAttrs {
			t.Fatalf("edge %s (%s) has attrs %s after the merge, want %s's %s", c.Edge, c.Key, attrs, want, wantAttrs)
		}
	}
}

// TestMergeConflictKeysNameOneConflictEach: artifact ids may hold ':',
// spaces and "->" (graph.ValidateID), so an id can read as an edge's
// key, and an edge whose end holds " -rel-> " can render as another
// edge. Every conflict of a merge still has a key of its own, and a
// resolution by that key settles that conflict as its kind is settled.
func TestMergeConflictKeysNameOneConflictEach(t *testing.T) {
	t.Run("an artifact named like an edge, both in conflict", func(t *testing.T) {
		s, _ := newService(t)
		ids := []string{"a", "b", "edge:a -cites-> b"}
		links := []graph.EdgeKey{{From: "a", Rel: "cites", To: "b"}}
		keyHistory(t, s, ids, links, []string{"edge:a -cites-> b", "a|cites|b"})
		settleEach(t, s, conflictsOf(t, s))
	})
	t.Run("two edges that render alike, both in conflict", func(t *testing.T) {
		s, _ := newService(t)
		ids := []string{"a", "a -cites-> b", "b", "b -cites-> c", "c"}
		links := []graph.EdgeKey{{From: "a -cites-> b", Rel: "cites", To: "c"}, {From: "a", Rel: "cites", To: "b -cites-> c"}}
		keyHistory(t, s, ids, links, []string{"a -cites-> b|cites|c", "a|cites|b -cites-> c"})
		settleEach(t, s, conflictsOf(t, s))
	})
	// An artifact whose id starts with "cycle:" or "edge:" is resolved
	// with a value (and a type) as any artifact is.
	for _, id := range []string{"cycle:n", "edge:n", "edge:a -cites-> b"} {
		t.Run("a value for "+id, func(t *testing.T) {
			s, _ := newService(t)
			keyHistory(t, s, []string{id}, nil, []string{id})
			cs := conflictsOf(t, s)
			if len(cs) != 1 || cs[0].ID != id {
				t.Fatalf("conflicts %+v, want one of %q", cs, id)
			}
			res := map[string]replay.Resolution{cs[0].Key: {Value: json.RawMessage(`{"text":"merged"}`), Type: "note"}}
			if _, err := s.Merge(t.Context(), "o", MergeInput{Theirs: "side", Resolutions: res}); err != nil {
				t.Fatalf("resolved by %q: %v", cs[0].Key, err)
			}
			head, err := s.st.Resolve(t.Context(), "o", "main")
			if err != nil {
				t.Fatal(err)
			}
			a, _, err := s.st.ArtifactAt(t.Context(), "o", head, id)
			if err != nil {
				t.Fatal(err)
			}
			if want := hashing.ContentHash([]byte(`{"text":"merged"}`)); a.ContentHash != want {
				t.Fatalf("%s is %s after the merge, want the value's %s", id, a.ContentHash, want)
			}
		})
	}
}
