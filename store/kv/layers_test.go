package kv_test

import (
	"strings"
	"testing"
)

// TestLayers keeps the stage-two layering checkable (DESIGN.md, "Stage
// two"): the pure core — hashing, graph, replay, the gate's classifier and
// schema — imports no I/O package (network, process, log, database) and
// depends, however indirectly, on no storage engine or router (the brotli
// decoder the gate uses carries an HTTP helper the gate never calls, so
// net/http is checked on direct imports); only the doors (httpapi, web,
// mcp, client, cmd/artifactd) and the gate's own fetcher and renderer
// import net/http.
func TestLayers(t *testing.T) {
	core := map[string]bool{}
	for _, p := range []string{"hashing", "graph", "replay", "gate", "schema"} {
		core[module+"/"+p] = true
	}
	direct := []string{"net/http", "net", "os", "os/exec", "database/sql", "log", "log/slog", "syscall"}
	engines := []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx", "github.com/go-chi/chi", "database/sql"}
	doors := map[string]bool{}
	for _, p := range []string{"httpapi", "web", "mcp", "client", "client/example/agent", "client/internal/testserver", "cmd/artifactd", "gate/fetch", "gate/render"} {
		doors[module+"/"+p] = true
	}
	seen := 0
	for _, line := range goList(t, `{{.ImportPath}}|{{join .Deps " "}}|{{join .Imports " "}}`) {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		pkg := f[0]
		if core[pkg] {
			seen++
			for _, imp := range strings.Fields(f[2]) {
				for _, bad := range direct {
					if imp == bad {
						t.Errorf("core package %s imports %s", pkg, imp)
					}
				}
			}
			for _, dep := range strings.Fields(f[1]) {
				for _, bad := range engines {
					if dep == bad || strings.HasPrefix(dep, bad+"/") {
						t.Errorf("core package %s depends on %s", pkg, dep)
					}
				}
			}
		}
		if !doors[pkg] {
			for _, imp := range strings.Fields(f[2]) {
				if imp == "net/http" {
					t.Errorf("%s imports net/http: only the doors may", pkg)
				}
			}
		}
	}
	if seen != len(core) {
		t.Fatalf("found %d of the %d core packages", seen, len(core))
	}
}
