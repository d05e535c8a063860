package httpapi

import (
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentCommits: 16 writers × 200 commits to one branch without a
// parent are serialised and all applied.
func TestConcurrentCommits(t *testing.T) {
	e := newEnv(t)
	e.createContext("busy", "enforce")
	const writers, each = 16, 200
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := e.post("/v1/contexts/busy/artifacts", map[string]any{
					"id": fmt.Sprintf("w%02d-%03d", w, i), "type": "note", "data": map[string]any{"text": fmt.Sprint(w, i)}})
				if r.status != 201 {
					failed.Add(1)
					t.Errorf("writer %d commit %d: %d %s", w, i, r.status, r.body)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	d := e.must(e.get("/v1/contexts/busy"), 200)
	if n := d["counts"].(map[string]any)["artifacts"]; n != float64(writers*each) {
		t.Fatalf("%v artifacts, want %d", n, writers*each)
	}
	// Every commit is on main's first-parent chain: 3,200 plus the root.
	commits := 0
	cursor := ""
	for {
		p := e.must(e.get("/v1/contexts/busy/commits?limit=1000&cursor="+url.QueryEscape(cursor)), 200)
		commits += len(p["items"].([]any))
		c, _ := p["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	if commits != writers*each+1 {
		t.Fatalf("%d commits on main, want %d", commits, writers*each+1)
	}
	seen := map[string]bool{}
	cursor = ""
	for {
		p := e.must(e.get("/v1/contexts/busy/artifacts?limit=1000&cursor="+url.QueryEscape(cursor)), 200)
		for _, x := range p["items"].([]any) {
			seen[x.(map[string]any)["id"].(string)] = true
		}
		c, _ := p["next_cursor"].(string)
		if c == "" {
			break
		}
		cursor = c
	}
	for w := 0; w < writers; w++ {
		for i := 0; i < each; i++ {
			if id := fmt.Sprintf("w%02d-%03d", w, i); !seen[id] {
				t.Fatalf("%s is missing", id)
			}
		}
	}
}

// TestStaleParent: 16 writers increment one counter with read, then write
// with parent = the commit read. Stale writes get 409 and retry; no
// increment is lost.
func TestStaleParent(t *testing.T) {
	e := newEnv(t)
	e.createContext("counter", "enforce")
	e.must(e.post("/v1/contexts/counter/artifacts", map[string]any{"id": "n", "type": "claim", "data": map[string]any{"text": "count", "value": 0}}), 201)
	const writers, each = 16, 10
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				head := e.must(e.get("/v1/contexts/counter/hash"), 200)["commit"].(string)
				a := e.must(e.get("/v1/contexts/counter/artifacts/n?at="+url.QueryEscape(head)), 200)
				v := a["data"].(map[string]any)["value"].(float64)
				r := e.post("/v1/contexts/counter/artifacts", map[string]any{"id": "n", "type": "claim", "parent": head,
					"data": map[string]any{"text": "count", "value": v + 1}})
				switch r.status {
				case 201:
					i++
				case 409:
					p := r.obj(t)
					if p["type"] != ProblemTypePrefix+CodeStaleParent || p["head"] == nil {
						t.Errorf("409 problem %v", p)
						return
					}
					conflicts.Add(1)
				default:
					t.Errorf("status %d: %s", r.status, r.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	a := e.must(e.get("/v1/contexts/counter/artifacts/n"), 200)
	if v := a["data"].(map[string]any)["value"]; v != float64(writers*each) {
		t.Fatalf("counter is %v, want %d (lost updates)", v, writers*each)
	}
	if a["version"] != float64(writers*each+1) {
		t.Fatalf("version %v", a["version"])
	}
	if conflicts.Load() == 0 {
		t.Fatalf("no stale parent was refused: the test did not race")
	}
	t.Logf("%d stale writes refused", conflicts.Load())
}
