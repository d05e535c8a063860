package httpapi

import (
	"testing"

	"github.com/artifactd/artifactd/store"
)

// TestReserveRefusesRegistryWrites: below the free-space reserve, a type's
// or a relation's registration is refused with 507 like every other
// write, and nothing is registered. The reserve is a data directory's, so
// the test names one: it runs on Badger whichever backend the suite is
// given (a PostgreSQL store has no local disk to keep free).
func TestReserveRefusesRegistryWrites(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(_ *Options, so *store.Options) { so.Dir, so.ReserveBytes = dir, 1<<62 })
	if r := e.post("/v1/contexts", map[string]any{"id": "c"}); r.status != 507 {
		t.Fatalf("create context below the reserve: %d, want 507", r.status)
	}
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/types/widget", map[string]any{"schema": map[string]any{"type": "object"}, "role": "derived"}},
		{"/v1/relations/touches", map[string]any{"depends": false}},
	} {
		if r := e.send(req{method: "PUT", path: c.path, body: c.body}); r.status != 507 {
			t.Errorf("PUT %s below the reserve: %d %.200s, want 507", c.path, r.status, r.body)
		}
		if r := e.get(c.path); r.status != 404 {
			t.Errorf("GET %s after a refused PUT: %d, want 404", c.path, r.status)
		}
	}
}
