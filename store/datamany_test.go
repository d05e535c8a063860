package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestDataMany: the batched payload read gives each artifact its own data
// in order — payloads held, cached, read, and shared by several artifacts,
// across more than one read part — and reports a missing or altered
// payload as corruption.
func TestDataMany(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{Driver: memkv.New(), Clock: testClock(), ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateContext(ctx, "c", ModeObserve); err != nil {
		t.Fatal(err)
	}
	n := prefetchPart + 300 // two read parts
	var ops []graph.Op
	for i := range n {
		ops = append(ops, notePut(fmt.Sprintf("a%05d", i), i%(n-7), "same text")) // a few share a payload
	}
	for from := 0; from < n; from += 1000 {
		mustCommit(t, s, "c", ops[from:min(from+1000, n)]...)
	}
	s.objects.Clear()
	// Warm the cache with a few, and hand one artifact its data already.
	if err := s.Read(ctx, "c", "", func(v *View) error {
		arts := make([]*graph.Artifact, 0, n)
		for i := range n {
			arts = append(arts, v.State.Artifact(fmt.Sprintf("a%05d", i)))
		}
		for _, a := range arts[:50] {
			if _, err := v.Data(a); err != nil {
				return err
			}
		}
		held := *arts[60]
		held.Data = []byte(`{"held":true}`)
		arts[60] = &held
		got, err := v.DataMany(ctx, arts)
		if err != nil {
			return err
		}
		for i := range arts {
			want := ops[i].Data
			if i == 60 {
				want = held.Data
			}
			if string(got[i]) != string(want) {
				t.Fatalf("artifact %d: data %s, want %s", i, got[i], want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A cancelled read returns the cancellation, never payloads left out.
	s.objects.Clear()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Read(ctx, "c", "", func(v *View) error {
		_, err := v.DataMany(cancelled, []*graph.Artifact{v.State.Artifact("a00001"), v.State.Artifact("a00002")})
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DataMany on a cancelled context: %v", err)
	}

	// A missing and an altered payload are corruption.
	var victim *graph.Artifact
	if err := s.Read(ctx, "c", "", func(v *View) error { victim = v.State.Artifact("a00007"); return nil }); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]kv.Batch{
		"missing": {Deletes: [][]byte{keyObj(victim.ContentHash)}},
		"altered": {Sets: []kv.Record{{Key: keyObj(victim.ContentHash), Value: []byte(`{"n":-1}`)}}},
	} {
		if err := s.kv.Commit(ctx, b); err != nil {
			t.Fatal(err)
		}
		s.objects.Clear()
		err := s.Read(ctx, "c", "", func(v *View) error {
			_, err := v.DataMany(ctx, []*graph.Artifact{v.State.Artifact("a00001"), v.State.Artifact("a00007")})
			return err
		})
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s payload: %v, want corruption", name, err)
		}
	}
}
