package gate

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPureImports keeps the package pure: no file outside the tests may
// import networking clients, the file system, logging or the clock.
func TestPureImports(t *testing.T) {
	forbidden := map[string]bool{
		"net": true, "net/http": true, "os": true, "os/exec": true, "io/ioutil": true,
		"log": true, "log/slog": true, "time": true, "math/rand": true, "math/rand/v2": true,
		"crypto/rand": true, "syscall": true, "unsafe": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbidden[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
