package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

// replayBundle verifies a bundle file with no store: it reads the whole
// bundle, checks that it holds ctxID when one is given, and folds every
// commit in it (re-hashing every payload, whatever opts says), returning
// the state at ref. A broken bundle is an error naming the first commit
// that fails.
func replayBundle(ctx context.Context, path, ctxID, at string, opts replay.Options, rulesets *gate.Rulesets) (*replay.Result, string, error) {
	b, err := readBundleFile(path)
	if err != nil {
		return nil, "", err
	}
	if ctxID != "" && ctxID != b.Header.Context {
		return nil, "", fmt.Errorf("%s holds context %q, not %q", path, b.Header.Context, ctxID)
	}
	res, err := b.Verify(ctx, at, opts)
	if err == nil {
		// Hashes that verify are not enough: a forged verdict with every
		// hash recomputed must not replay as sound.
		if cerr := store.CheckBundle(ctx, b, rulesets); cerr != nil {
			return nil, "", fmt.Errorf("the bundle's hashes verify, but its content does not: %w", cerr)
		}
	}
	if err != nil {
		var ce *replay.ChainError
		if errors.As(err, &ce) || errors.Is(err, replay.ErrBundle) {
			return nil, "", fmt.Errorf("the bundle does not verify: %w", err)
		}
		return nil, "", err
	}
	return res, b.Header.Context, nil
}

// readBundleFile reads a bundle from path, or from standard input for "-".
func readBundleFile(path string) (*replay.Bundle, error) {
	if path == "-" {
		return replay.ReadBundle(os.Stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := replay.ReadBundle(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
