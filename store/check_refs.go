package store

import (
	"context"
	"fmt"
)

// branches is Branches for fsck: a ref that does not read as a commit id
// is reported and the scan goes on, so that one damaged ref does not hide
// the checks of the branches after it. It fails only when the scan itself
// cannot run (I/O, a cancelled ctx).
func (k *checker) branches(ctx context.Context, ctxID string) ([]Branch, error) {
	var out []Branch
	p := prefixRefs(ctxID)
	err := k.scanAll(ctx, p, func(key, v []byte) error {
		b, ok := refBranch(p, key, v)
		if !ok {
			k.add(Defect{Kind: "ref", Context: ctxID, ID: b.Name, Detail: fmt.Sprintf("ref %q has %d bytes, not a commit id's %d", b.Name, len(v), len(b.Head))})
			return nil
		}
		out = append(out, b)
		return nil
	}, func(key []byte, why string) {
		k.add(Defect{Kind: "ref", Context: ctxID, ID: string(key[len(p):]), Detail: "ref unreadable: " + why})
	})
	if err != nil {
		return nil, fmt.Errorf("read the branches of %q: %w", ctxID, err)
	}
	return out, nil
}
