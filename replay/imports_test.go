package replay

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps replay pure (STYLE.md, "Import direction you can
// check"): no storage, network, file, log or randomness package among its direct
// imports (time arrives inside commits, already formatted), and neither
// Badger nor an HTTP package anywhere below it.
// Bundles are read and written through io.Reader and io.Writer.
func TestImports(t *testing.T) {
	list := func(format string) []string {
		out, err := exec.Command("go", "list", "-f", format, ".").Output()
		if err != nil {
			t.Skipf("go list unavailable: %v", err)
		}
		return strings.Fields(string(out))
	}
	direct := map[string]bool{"os": true, "net": true, "net/http": true, "log": true, "log/slog": true,
		"math/rand": true, "math/rand/v2": true, "crypto/rand": true, "os/exec": true, "syscall": true}
	for _, p := range list(`{{join .Imports " "}}`) {
		if direct[p] {
			t.Errorf("replay imports %s; it must stay free of I/O and randomness", p)
		}
	}
	for _, p := range list(`{{join .Deps " "}}`) {
		if strings.Contains(p, "badger") || strings.Contains(p, "go-chi") || p == "net/http" || p == "net" {
			t.Errorf("replay depends on %s", p)
		}
	}
}
