package store

import (
	"context"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/store/kv"
)

// TestCheckReportsNonCanonicalObjects: fsck reports a stored payload that
// matches its content hash but is not in canonical form (HASHING.md §2
// hashes the canonical JSON), as well as one that does not canonicalize
// at all; a canonical payload is no defect.
func TestCheckReportsNonCanonicalObjects(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close()
	bad := map[string]string{`{"b": 1, "a": 2.50}`: "canonical form", `{"a":1,"a":2}`: "not canonical JSON"}
	var recs []kv.Record
	for raw := range bad {
		recs = append(recs, kv.Record{Key: keyObj(hashing.ContentHash([]byte(raw))), Value: []byte(raw)})
	}
	good := []byte(`{"a":2.5,"b":1}`)
	recs = append(recs, kv.Record{Key: keyObj(hashing.ContentHash(good)), Value: good})
	if err := s.kv.Commit(ctx, kv.Batch{Sets: recs}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Defects) != len(bad) {
		t.Fatalf("defects %v, want one for each of %d payloads", rep.Defects, len(bad))
	}
	for raw, why := range bad {
		id := hashing.ContentHash([]byte(raw)).String()
		found := false
		for _, d := range rep.Defects {
			found = found || (strings.Contains(d.ID+d.Detail, id) || strings.Contains(d.ID+d.Detail, id[len("sha256:"):])) && strings.Contains(d.Detail, why)
		}
		if !found {
			t.Errorf("no defect naming %s (%s): %v", raw, why, rep.Defects)
		}
	}
}
