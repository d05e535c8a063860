package kv_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/internal/testenv"
)

const module = "github.com/artifactd/artifactd"

// goList runs go list over the module; without the go tool the test skips,
// or fails under CI.
func goList(t *testing.T, format string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, module+"/...").Output()
	if err != nil {
		testenv.Missing(t, "go list unavailable: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestImportDirection keeps the seam's layering checkable (STYLE.md,
// "Import direction you can check"): only the Badger driver imports
// Badger (the store reaches it through the seam); only the
// PostgreSQL driver imports pgx; the seam, its suite and the in-memory
// driver depend on neither, and the seam itself does no I/O.
func TestImportDirection(t *testing.T) {
	engines := []struct {
		name    string
		marker  string
		allowed map[string]bool
		// tests may import the engine in these packages too.
		tests map[string]bool
	}{
		{"Badger", "github.com/dgraph-io/badger", map[string]bool{module + "/store/kv/badgerkv": true},
			// fsck's test corrupts a data directory on purpose.
			map[string]bool{module + "/cmd/artifactd": true}},
		{"pgx", "github.com/jackc/pgx", map[string]bool{module + "/store/kv/pgkv": true}, nil},
	}
	for _, line := range goList(t, `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`) {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		pkg := f[0]
		for _, e := range engines {
			if e.allowed[pkg] {
				continue
			}
			check := func(imports string, where string) {
				for _, imp := range strings.Fields(imports) {
					if strings.HasPrefix(imp, e.marker) {
						t.Errorf("%s%s imports %s: only %v may import %s", pkg, where, imp, keys(e.allowed), e.name)
					}
				}
			}
			check(f[1], "")
			if !e.tests[pkg] {
				check(f[2], " (tests)")
			}
		}
	}
	pure := map[string]bool{module + "/store/kv": true, module + "/store/kv/memkv": true, module + "/store/kv/kvtest": true}
	for _, line := range goList(t, `{{.ImportPath}} {{join .Deps " "}}`) {
		f := strings.Fields(line)
		if len(f) == 0 || !pure[f[0]] {
			continue
		}
		for _, dep := range f[1:] {
			for _, e := range engines {
				if strings.HasPrefix(dep, e.marker) {
					t.Errorf("%s depends on %s", f[0], dep)
				}
			}
		}
	}
}

// TestSeamIsPure: the seam's own package imports no I/O, logging or
// randomness package directly.
func TestSeamIsPure(t *testing.T) {
	banned := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "log": true,
		"log/slog": true, "syscall": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true, "time": true}
	for _, line := range goList(t, `{{.ImportPath}} {{join .Imports " "}}`) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != module+"/store/kv" {
			continue
		}
		for _, imp := range f[1:] {
			if banned[imp] {
				t.Errorf("the seam imports %s; it must stay free of I/O", imp)
			}
		}
		return
	}
	t.Fatal("go list did not list store/kv")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, strings.TrimPrefix(k, module+"/"))
	}
	return out
}
