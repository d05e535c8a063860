package httpapi

import (
	"testing"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/storetest"
)

// testBackend points so at the backend storetest.EnvStore selects
// (ARTIFACTD_TEST_STORE=postgres: a schema of its own per test).
func testBackend(t testing.TB, so *store.Options) {
	t.Helper()
	storetest.Backend(t, so, "httpapi")
}
