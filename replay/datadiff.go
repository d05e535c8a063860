package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/hashing"
)

// Kinds of a DataChange.
const (
	DataAdded   = "added"
	DataRemoved = "removed"
	DataChanged = "changed"
)

// DataChange is one JSON value that differs between two versions of an
// artifact's data, named by its RFC 6901 JSON pointer ("" is the whole
// document). Old is the canonical JSON of the value before (absent for an
// added value), New after (absent for a removed one).
type DataChange struct {
	Pointer string          `json:"pointer"`
	Kind    string          `json:"kind"`
	Old     json.RawMessage `json:"old,omitempty"`
	New     json.RawMessage `json:"new,omitempty"`
}

// DataDiff lists the field-level differences from the JSON document old
// to new. Objects are compared member by member and arrays element by
// element at the same index (elements past the shorter array are added or
// removed), recursively; any other pair of values that are not equal, or
// values of different JSON kinds, is one "changed" entry at that pointer.
// Equality is of canonical JSON (RFC 8785), so formatting, member order
// and number spelling never count as a change.
//
// The result is in document order: object members by key (byte order),
// array elements by index. It is empty (nil) when the documents are equal.
// Applying every change in order — setting New at Pointer, deleting
// removed members, truncating arrays from their last removed index —
// turns old into new. A nil or empty document counts as absent: against
// it every top-level value is added or removed. DataDiff has no I/O; the
// error reports a document that is not JSON.
func DataDiff(old, new []byte) ([]DataChange, error) {
	var a, b json.RawMessage
	var err error
	if len(bytes.TrimSpace(old)) > 0 {
		if a, err = hashing.Canonicalize(old); err != nil {
			return nil, fmt.Errorf("replay: data diff: old document: %w", err)
		}
	}
	if len(bytes.TrimSpace(new)) > 0 {
		if b, err = hashing.Canonicalize(new); err != nil {
			return nil, fmt.Errorf("replay: data diff: new document: %w", err)
		}
	}
	var out []DataChange
	switch {
	case a == nil && b == nil:
		return nil, nil
	case a == nil || b == nil:
		// One side absent: list the other side's members, as a diff
		// against an empty object would.
		side, kind := b, DataAdded
		if b == nil {
			side, kind = a, DataRemoved
		}
		if kindOf(side) != '{' {
			return []DataChange{entry("", kind, side)}, nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(side, &m); err != nil {
			return nil, fmt.Errorf("replay: data diff: %w", err)
		}
		for _, k := range sortedKeys(m) {
			out = append(out, entry("/"+fault.PointerToken(k), kind, m[k]))
		}
		return out, nil
	}
	if err := diffValue("", a, b, &out); err != nil {
		return nil, fmt.Errorf("replay: data diff: %w", err)
	}
	return out, nil
}

// entry makes an added or removed change.
func entry(ptr, kind string, v json.RawMessage) DataChange {
	if kind == DataAdded {
		return DataChange{Pointer: ptr, Kind: kind, New: v}
	}
	return DataChange{Pointer: ptr, Kind: kind, Old: v}
}

// diffValue appends the differences between canonical values a and b
// found at pointer ptr.
func diffValue(ptr string, a, b json.RawMessage, out *[]DataChange) error {
	if bytes.Equal(a, b) {
		return nil
	}
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case ka == '{' && kb == '{':
		var ma, mb map[string]json.RawMessage
		if err := json.Unmarshal(a, &ma); err != nil {
			return err
		}
		if err := json.Unmarshal(b, &mb); err != nil {
			return err
		}
		keys := sortedKeys(ma)
		for k := range mb {
			if _, ok := ma[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := ptr + "/" + fault.PointerToken(k)
			va, inA := ma[k]
			vb, inB := mb[k]
			switch {
			case !inA:
				*out = append(*out, entry(p, DataAdded, vb))
			case !inB:
				*out = append(*out, entry(p, DataRemoved, va))
			default:
				if err := diffValue(p, va, vb, out); err != nil {
					return err
				}
			}
		}
		return nil
	case ka == '[' && kb == '[':
		var la, lb []json.RawMessage
		if err := json.Unmarshal(a, &la); err != nil {
			return err
		}
		if err := json.Unmarshal(b, &lb); err != nil {
			return err
		}
		for i := range max(len(la), len(lb)) {
			p := ptr + "/" + strconv.Itoa(i)
			switch {
			case i >= len(la):
				*out = append(*out, entry(p, DataAdded, lb[i]))
			case i >= len(lb):
				*out = append(*out, entry(p, DataRemoved, la[i]))
			default:
				if err := diffValue(p, la[i], lb[i], out); err != nil {
					return err
				}
			}
		}
		return nil
	}
	*out = append(*out, DataChange{Pointer: ptr, Kind: DataChanged, Old: a, New: b})
	return nil
}

// kindOf returns the first byte of a canonical value: '{', '[', or the
// start of a scalar.
func kindOf(v json.RawMessage) byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
