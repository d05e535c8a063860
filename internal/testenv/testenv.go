package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Missing ends t for want of a dependency that format and args describe:
// a failure when the CI environment variable is set, a skip otherwise.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so this test must run")
		return
	}
	t.Skip(msg)
}
