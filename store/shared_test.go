package store_test

import (
	"testing"

	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
	"github.com/artifactd/artifactd/store/storetest"
)

// TestStoresShareOneDriver runs three stores — three processes, as far as
// the store can tell — over one in-memory driver that reports itself
// shared: their commit groups race on the same ref and the losers decide
// again.
func TestStoresShareOneDriver(t *testing.T) {
	d := memkv.New()
	storetest.RunShared(t, func(t *testing.T) kv.Driver { return storetest.Shared{LockingDriver: d} }, 3, 12, 25)
}

// nopClose keeps one driver open across the stores that share it.
type nopClose struct{ kv.Driver }

func (nopClose) Close() error { return nil }

// TestStoreBigCommitInMemory is storetest.RunBigCommit over the memory
// driver, whose default limits make the commit go in two steps too.
func TestStoreBigCommitInMemory(t *testing.T) {
	d := memkv.New()
	storetest.RunBigCommit(t, func(t *testing.T) kv.Driver { return nopClose{d} }, 30_000)
}
