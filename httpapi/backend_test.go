package httpapi

import (
	"testing"

	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/storetest"
)

// testBackend points so at the backend storetest.EnvStore selects
// (ARTIFACTD_TEST_STORE=postgres: a schema of its own per test) and
// returns what points so at it again after a close (storetest.Backend).
func testBackend(t testing.TB, so *store.Options) (again func(*store.Options)) {
	t.Helper()
	return storetest.Backend(t, so, "httpapi")
}
