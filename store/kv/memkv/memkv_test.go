package memkv_test

import (
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/kvtest"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Driver { return memkv.New() })
}

func BenchmarkSeam(b *testing.B) {
	kvtest.Bench(b, func(b *testing.B) kv.Driver { return memkv.New() })
}
