package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/artifactd/artifactd/store/kv"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, want []byte }{
		{nil, nil},
		{[]byte{}, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("ref\x00"), []byte("ref\x01")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{0x00, 0xff, 0xff}, []byte{0x01}},
	} {
		if got := kv.PrefixEnd(tc.prefix); !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", tc.prefix, got, tc.want)
		}
	}
}

func TestScanEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, end, want []byte }{
		{nil, nil, nil},
		{[]byte("a"), nil, []byte("b")},
		{[]byte("a"), []byte("a5"), []byte("a5")},
		{[]byte("a"), []byte("c"), []byte("b")},
		{[]byte{0xff}, nil, nil},
		{[]byte{0xff}, []byte{0xff, 0x10}, []byte{0xff, 0x10}},
		{nil, []byte("m"), []byte("m")},
	} {
		if got := kv.ScanEnd(tc.prefix, tc.end); !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("ScanEnd(%x, %x) = %x, want %x", tc.prefix, tc.end, got, tc.want)
		}
	}
}

// FuzzPrefixEnd checks the property drivers rely on for range scans: k has
// prefix p exactly when p <= k and (PrefixEnd(p) is nil or k < it).
func FuzzPrefixEnd(f *testing.F) {
	f.Add([]byte("a"), []byte("ab"))
	f.Add([]byte{0xff}, []byte{0xff, 0x00})
	f.Add([]byte{'a', 0xff}, []byte{'b'})
	f.Add([]byte{}, []byte{0x00})
	f.Fuzz(func(t *testing.T, p, k []byte) {
		end := kv.PrefixEnd(p)
		inRange := bytes.Compare(k, p) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
		if inRange != bytes.HasPrefix(k, p) {
			t.Fatalf("prefix %x, key %x: in range [%x, %x) = %v, has prefix = %v", p, k, p, end, inRange, bytes.HasPrefix(k, p))
		}
		if len(p) > 0 && bytes.Equal(p, kv.PrefixEnd(p)) {
			t.Fatalf("PrefixEnd(%x) returned its input", p)
		}
	})
}

func TestBatchValidate(t *testing.T) {
	long := bytes.Repeat([]byte{1}, kv.MaxKeySize+1)
	for _, tc := range []struct {
		name string
		b    kv.Batch
		ok   bool
	}{
		{"empty", kv.Batch{}, true},
		{"distinct", kv.Batch{Sets: []kv.Record{{Key: []byte("a")}}, Deletes: [][]byte{[]byte("b")}, Swaps: []kv.Swap{{Key: []byte("c"), Absent: true}}}, true},
		{"max key", kv.Batch{Deletes: [][]byte{long[:kv.MaxKeySize]}}, true},
		{"long key", kv.Batch{Deletes: [][]byte{long}}, false},
		{"empty key", kv.Batch{Sets: []kv.Record{{Key: nil}}}, false},
		{"set twice", kv.Batch{Sets: []kv.Record{{Key: []byte("a")}, {Key: []byte("a")}}}, false},
		{"set and delete", kv.Batch{Sets: []kv.Record{{Key: []byte("a")}}, Deletes: [][]byte{[]byte("a")}}, false},
		{"delete and swap", kv.Batch{Deletes: [][]byte{[]byte("a")}, Swaps: []kv.Swap{{Key: []byte("a")}}}, false},
	} {
		err := tc.b.Validate()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, kv.ErrInvalid)) {
			t.Errorf("%s: Validate() = %v, want ok=%v (else kv.ErrInvalid)", tc.name, err, tc.ok)
		}
	}
}

func TestSwapHolds(t *testing.T) {
	for _, tc := range []struct {
		s       kv.Swap
		exists  bool
		current string
		want    bool
	}{
		{kv.Swap{Absent: true}, false, "", true},
		{kv.Swap{Absent: true}, true, "", false},
		{kv.Swap{Old: []byte("a")}, true, "a", true},
		{kv.Swap{Old: []byte("a")}, true, "b", false},
		{kv.Swap{Old: []byte("a")}, false, "", false},
		{kv.Swap{Old: []byte{}}, true, "", true},
		{kv.Swap{Old: nil}, false, "", false}, // a nil Old is "empty value", not "absent"
	} {
		if got := tc.s.Holds(tc.exists, []byte(tc.current)); got != tc.want {
			t.Errorf("%+v.Holds(%v, %q) = %v, want %v", tc.s, tc.exists, tc.current, got, tc.want)
		}
	}
}

func TestConflictError(t *testing.T) {
	var err error = &kv.ConflictError{Conflicts: []kv.Conflict{
		{Key: []byte("ref\x00a"), Exists: true, Current: []byte{0xab}},
		{Key: []byte("ref\x00b")},
	}}
	wrapped := fmt.Errorf("commit: %w", err)
	if !errors.Is(wrapped, kv.ErrConflict) || errors.Is(wrapped, kv.ErrNotFound) {
		t.Errorf("errors.Is on a wrapped conflict: ErrConflict %v, ErrNotFound %v", errors.Is(wrapped, kv.ErrConflict), errors.Is(wrapped, kv.ErrNotFound))
	}
	want := `kv: conflict on "ref\x00a" (now ab), "ref\x00b" (now absent)`
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
