package hashing

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity keeps the package a pure function library (STYLE.md): only
// these standard packages, and no clock reads.
func TestPurity(t *testing.T) {
	allowed := map[string]bool{
		"bytes": true, "cmp": true, "crypto/sha256": true, "encoding/binary": true, "encoding/hex": true, "encoding/json": true,
		"errors": true, "fmt": true, "math": true, "math/bits": true, "slices": true,
		"strconv": true, "strings": true, "time": true, "unicode/utf16": true, "unicode/utf8": true,
		// Marks save and restore SHA-256 states (encoding, hash), and
		// big re-hashes spread buckets over goroutines (runtime, sync):
		// no I/O, and the bytes do not depend on the schedule.
		"encoding": true, "hash": true, "runtime": true, "sync": true, "sync/atomic": true,
	}
	forbiddenTime := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}

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
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %q; hashing must stay pure (no I/O, no clock, stdlib only)", name, path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && forbiddenTime[sel.Sel.Name] {
				t.Errorf("%s: time.%s reads the clock", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
