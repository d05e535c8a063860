package httpapi

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentMergesLoseNoAcknowledgedWrite: writers on main racing with
// branch-and-merge writers (many merges are fast-forwards) must never
// lose an acknowledged write. The crash harness found the loss first (an
// acknowledged artifact missing after a restart); it needs no crash: when
// a commit to a branch and a fast-forward of that branch land in one
// commit group, the fast-forward's compare-and-set reads the branch's
// durable ref, not the group's commit, and so moves the branch over it.
// (Fixed in store/commit.go: a commit records its ref move in the group.)
// Up to five rounds of 240 racing writes; the first loss fails.
func TestConcurrentMergesLoseNoAcknowledgedWrite(t *testing.T) {
	e := newEnv(t)
	e.createContext("c", "observe")
	for round := range 5 {
		var mu sync.Mutex
		acked := map[string]string{}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					tag := fmt.Sprintf("%d-%d-%d", round, g, i)
					if i%2 == 0 {
						id := "a-" + tag
						if r := e.post("/v1/contexts/c/artifacts", map[string]any{"id": id, "type": "note", "data": map[string]any{"text": id}}); r.status == 201 {
							mu.Lock()
							acked[id] = "a write on main"
							mu.Unlock()
						}
						continue
					}
					br, id := "b-"+tag, "m-"+tag
					if r := e.post("/v1/contexts/c/branches", map[string]any{"name": br}); r.status != 201 {
						continue
					}
					if r := e.post("/v1/contexts/c/artifacts", map[string]any{"id": id, "branch": br, "type": "note", "data": map[string]any{"text": id}}); r.status != 201 {
						continue
					}
					if r := e.post("/v1/contexts/c/merge", map[string]any{"theirs": br}); r.status == 200 || r.status == 201 {
						mu.Lock()
						acked[id] = "a merge (" + fmt.Sprint(r.obj(t)["kind"]) + ")"
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for id, how := range acked {
			if r := e.get("/v1/contexts/c/artifacts/" + id); r.status != 200 {
				t.Fatalf("round %d: %s, acknowledged by %s, is not on main (%d)", round, id, how, r.status)
			}
		}
	}
}
