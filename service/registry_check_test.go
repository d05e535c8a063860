package service

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
	"github.com/artifactd/artifactd/store/kv"
	"github.com/artifactd/artifactd/store/kv/memkv"
)

// TestCheckRegistry: a type or relation record that does not load as
// Load reads it (serve would not start), names another type than its
// key, or has no valid version or role is reported, one defect each,
// naming the record; a healthy registry — and a type whose stored schema
// this release refuses, which Load keeps — has none.
func TestCheckRegistry(t *testing.T) {
	for _, c := range []struct {
		name, kind, key, record, want string
	}{
		{"type record not JSON", "type", "ledger", `{"name":"ledger","role":"sou`, "does not decode"},
		{"type role no type has", "type", "ledger", `{"name":"ledger","role":"never-ever","schema":{"type":"object"},"version":1}`, "does not load"},
		{"type record names another type", "type", "ledger", `{"name":"claim","role":"source","schema":{"type":"object"},"version":1}`, `names "claim"`},
		// Load keeps it (the type refuses its artifacts until registered
		// again): a schema another release accepted is no damage.
		{"type schema this release refuses", "type", "ledger", `{"name":"ledger","role":"source","schema":{"type":7},"version":1}`, ""},
		{"type version 0", "type", "ledger", `{"name":"ledger","role":"source","schema":{"type":"object"},"version":0}`, "version 0"},
		{"relation record not JSON", "relation", "feeds", `{"name":"feeds","depends":tr`, "does not decode"},
		{"relation record names another", "relation", "feeds", `{"name":"eats","depends":true,"version":1}`, `names "eats"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newService(t)
			ctx := t.Context()
			if _, _, err := s.types.Put(ctx, s.st, "ledger", graph.RoleSource, "", []byte(`{"type":"object"}`)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.types.PutRelation(ctx, s.st, "feeds", true, ""); err != nil {
				t.Fatal(err)
			}
			if defects, err := CheckRegistry(ctx, s.st); err != nil || len(defects) != 0 {
				t.Fatalf("a healthy registry: %v %v", defects, err)
			}
			var err error
			if c.kind == "type" {
				old, gerr := s.st.GetType(ctx, c.key)
				if gerr != nil {
					t.Fatal(gerr)
				}
				err = s.st.PutTypeIf(ctx, c.key, old, []byte(c.record))
			} else {
				old, gerr := s.st.GetRelation(ctx, c.key)
				if gerr != nil {
					t.Fatal(gerr)
				}
				err = s.st.PutRelationIf(ctx, c.key, old, []byte(c.record))
			}
			if err != nil {
				t.Fatal(err)
			}
			defects, err := CheckRegistry(ctx, s.st)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if len(defects) != 0 {
					t.Fatalf("defects %v; want none", defects)
				}
				return
			}
			if len(defects) != 1 || defects[0].Kind != c.kind || defects[0].ID != c.key || !strings.Contains(defects[0].Detail, c.want) {
				t.Fatalf("defects %v; want one %s defect of %q saying %q", defects, c.kind, c.key, c.want)
			}
		})
	}
}

// TestCheckRegistryStepsPastAnUnreadableRecord: a type record the driver
// cannot read (as the Badger driver reports a damaged value) is a
// defect of its own, and the other records are still checked — the
// check does not fail, so fsck reports it beside the store's other
// defects rather than giving up on the whole report.
func TestCheckRegistryStepsPastAnUnreadableRecord(t *testing.T) {
	ctx := context.Background()
	drv := &unreadableKey{Driver: memkv.New()}
	st, err := store.Open(ctx, store.Options{Driver: drv, ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"memo", "note"} {
		rec := `{"name":"` + name + `","role":"derived","schema":{"type":"object"},"version":1}`
		if err := st.PutTypeIf(ctx, name, nil, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	// note's record names another type: it must still be read and found.
	old, err := st.GetType(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutTypeIf(ctx, "note", old, []byte(`{"name":"memo","role":"derived","schema":{"type":"object"},"version":1}`)); err != nil {
		t.Fatal(err)
	}
	drv.bad = []byte("type\x00memo")
	defects, err := CheckRegistry(ctx, st)
	if err != nil {
		t.Fatalf("the check failed on one unreadable record: %v", err)
	}
	if len(defects) != 2 || defects[0].ID != "memo" || !strings.Contains(defects[0].Detail, "unreadable") ||
		defects[1].ID != "note" || !strings.Contains(defects[1].Detail, `names "memo"`) {
		t.Fatalf("defects %v; want memo unreadable and note naming memo", defects)
	}
}

// unreadableKey is a driver on which the value of key bad cannot be read:
// a scan meets a *kv.UnreadableError there, as the Badger driver reports
// a damaged value.
type unreadableKey struct {
	kv.Driver
	bad []byte
}

// Scan implements kv.Driver.
func (d *unreadableKey) Scan(ctx context.Context, prefix, start []byte, limit int, fn func(k, v []byte) error) error {
	return d.Driver.Scan(ctx, prefix, start, limit, func(k, v []byte) error {
		if d.bad != nil && bytes.Equal(k, d.bad) {
			return &kv.UnreadableError{Key: bytes.Clone(k), Why: "damaged"}
		}
		return fn(k, v)
	})
}
