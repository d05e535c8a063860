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
// net/http is checked on direct imports); the error vocabulary (fault)
// imports nothing of artifactd, so every layer may mark errors with it;
// the service layer imports no door and no I/O package of its own; only
// the doors (httpapi, web, mcp, client, cmd/artifactd) and the gate's own
// fetcher and renderer import net/http.
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
	service := map[string]bool{module + "/service": true, module + "/fault": true}
	noDoor := []string{module + "/httpapi", module + "/web", module + "/mcp", module + "/client", module + "/cmd/", "net/http", "github.com/go-chi/chi"}
	seen, seenService := 0, 0
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
		if service[pkg] {
			seenService++
			for _, imp := range strings.Fields(f[2]) {
				for _, bad := range noDoor {
					if imp == bad || strings.HasPrefix(imp, bad) {
						t.Errorf("%s imports %s: the service layer calls no door", pkg, imp)
					}
				}
				for _, bad := range direct {
					if imp == bad && imp != "log/slog" {
						t.Errorf("%s imports %s: the service layer does no I/O of its own", pkg, imp)
					}
				}
				if pkg == module+"/fault" && strings.HasPrefix(imp, module+"/") {
					t.Errorf("fault imports %s: the vocabulary is a leaf", imp)
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
	if seenService != len(service) {
		t.Fatalf("found %d of the %d service-layer packages", seenService, len(service))
	}
	if seen != len(core) {
		t.Fatalf("found %d of the %d core packages", seen, len(core))
	}
}
