package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestPutRegistryRecordIf: PutTypeIf and PutRelationIf write a record
// only over the one the caller read (none, or those exact bytes), and
// move the registry stamp when they do; over any other they write
// nothing, the stamp included, and answer ErrStale.
func TestPutRegistryRecordIf(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	for _, k := range []struct {
		kind  string
		putIf func(ctx context.Context, name string, old, record []byte) error
		get   func(ctx context.Context, name string) ([]byte, error)
	}{
		{"type", s.PutTypeIf, s.GetType},
		{"relation", s.PutRelationIf, s.GetRelation},
	} {
		t.Run(k.kind, func(t *testing.T) {
			if _, err := k.get(ctx, "x"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get of no record: %v, want ErrNotFound", err)
			}
			stampIs := func(want []byte) []byte {
				t.Helper()
				got, err := s.RegistryStamp(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want != nil && !bytes.Equal(got, want) {
					t.Fatalf("stamp %x, want %x", got, want)
				}
				return got
			}
			holds := func(want string) {
				t.Helper()
				got, err := k.get(ctx, "x")
				if err != nil || string(got) != want {
					t.Fatalf("record %q (%v), want %q", got, err, want)
				}
			}
			if err := k.putIf(ctx, "x", nil, []byte(`{"v":1}`)); err != nil {
				t.Fatal(err)
			}
			holds(`{"v":1}`)
			stamp := stampIs(nil)
			// Expected none, or other bytes: nothing is written.
			for _, old := range [][]byte{nil, []byte(`{"v":0}`), {}} {
				if err := k.putIf(ctx, "x", old, []byte(`{"v":2}`)); !errors.Is(err, ErrStale) {
					t.Fatalf("put over %q: %v, want ErrStale", old, err)
				}
				holds(`{"v":1}`)
				stampIs(stamp)
			}
			if err := k.putIf(ctx, "x", []byte(`{"v":1}`), []byte(`{"v":2}`)); err != nil {
				t.Fatal(err)
			}
			holds(`{"v":2}`)
			if bytes.Equal(stampIs(nil), stamp) {
				t.Fatal("a write left the registry stamp as it was")
			}
			// Another writer's put makes the read stale.
			if err := k.putIf(ctx, "x", []byte(`{"v":2}`), []byte(`{"v":3}`)); err != nil {
				t.Fatal(err)
			}
			if err := k.putIf(ctx, "x", []byte(`{"v":2}`), []byte(`{"v":4}`)); !errors.Is(err, ErrStale) {
				t.Fatalf("put over a record another put replaced: %v, want ErrStale", err)
			}
			holds(`{"v":3}`)
		})
	}
}
