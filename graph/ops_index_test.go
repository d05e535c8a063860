package graph

import (
	"errors"
	"testing"
)

// TestOpErrorNamesTheOffendingOp checks that an invalid id in a later op
// is reported against that op, not op 0.
func TestOpErrorNamesTheOffendingOp(t *testing.T) {
	s := NewState(nil)
	ops := []Op{
		{Op: OpPut, ID: "ok", Type: "note", Data: []byte(`{}`)},
		{Op: OpPut, ID: "fine", Type: "note", Data: []byte(`{}`)},
		{Op: OpDelete, ID: "bad\x01id"},
	}
	_, err := s.ApplyOps(ops)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Index != 2 || oe.Field != "/id" {
		t.Fatalf("err = %#v, want op 2 field /id", err)
	}
	if s.NumArtifacts() != 0 {
		t.Fatal("a refused commit left artifacts behind")
	}
	_, err = s.ApplyOps([]Op{{Op: OpPut, ID: "x", Type: "note", Data: []byte(`{}`)}, {Op: OpPut, ID: "y", Type: "Bad Type", Data: []byte(`{}`)}})
	if !errors.As(err, &oe) || oe.Index != 1 || oe.Field != "/type" {
		t.Fatalf("err = %#v, want op 1 field /type", err)
	}
}
