package store

import (
	"context"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
)

// TestCheckGoesOnPastADamagedRef: a ref that does not hold a commit id is
// reported, and the branches after it are still checked — a defect only
// a head's checks find (a tool output at main's head naming bytes no
// longer stored) is reported beside it. Before, the scan of the refs
// stopped at the damaged one ("exp" sorts before "main").
func TestCheckGoesOnPastADamagedRef(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "run", ModeObserve); err != nil {
			t.Fatal(err)
		}
		d, err := s.PutBlob(ctx, []byte("a tool's whole output"))
		if err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, "run", put("o", "tool_output", map[string]any{"model_view": "…", "full_blob": d.String()}))
		head := mustResolve(t, s, "run", DefaultBranch)
		if err := s.CreateBranch(ctx, "run", "exp", head.ID); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, s)
		rewrite(t, s, kv.Record{Key: keyRef("run", "exp"), Value: head.ID[:31]})
		lose(t, s, keyBlob(d))
		defects := checkDefects(t, s)
		var ref, blob bool
		for _, f := range defects {
			switch {
			case f.Kind == "ref" && f.ID == "exp" && strings.Contains(f.Detail, "31 bytes"):
				ref = true
			case f.Kind == "blob" && strings.Contains(f.Detail, `head of branch "main"`) && strings.Contains(f.Detail, "not stored"):
				blob = true
			default:
				t.Errorf("unexpected defect %v", f)
			}
		}
		if !ref || !blob {
			t.Fatalf("defects %v; want the ref exp and main's lost blob", defects)
		}
	})
}

// TestCheckGoesOnPastAnUndecodableContextRecord: a context record that no
// longer decodes is reported, and the context's chain is still checked —
// a lost ops chunk of one of its commits is reported too, once. Before,
// the context was left out of the check (no commit of it counted).
func TestCheckGoesOnPastAnUndecodableContextRecord(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.CreateContext(ctx, "run", ModeObserve); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, "run", put("a", "claim", map[string]any{"text": "a"}))
		c := mustResolve(t, s, "run", DefaultBranch)
		mustCommit(t, s, "run", put("b", "claim", map[string]any{"text": "b"}))
		mustCheck(t, s)
		v, err := s.kv.Get(ctx, keyCtx("run"))
		if err != nil {
			t.Fatal(err)
		}
		rewrite(t, s, kv.Record{Key: keyCtx("run"), Value: v[:len(v)-1]})
		lose(t, s, keyOps("run", c.ID, 0))
		s.states.Clear()
		rep, err := s.Check(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var record, ops int
		for _, f := range rep.Defects {
			switch {
			case f.Kind == "context" && strings.Contains(f.Detail, "does not decode"):
				record++
			case f.ID == c.ID.String() && strings.Contains(f.Detail, "ops"):
				ops++
			default:
				t.Errorf("unexpected defect %v", f)
			}
		}
		if record != 1 || ops != 1 {
			t.Fatalf("defects %v; want the context record and the lost ops of %s, once each", rep.Defects, c.ID.Short())
		}
		if rep.Commits != 3 {
			t.Errorf("checked %d commits, want the context's 3", rep.Commits)
		}
	})
}
