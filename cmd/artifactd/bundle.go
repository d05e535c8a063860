package main

import (
	"context"
	"errors"

	"github.com/artifactd/artifactd/replay"
)

// replayBundle replays a bundle file. Bundles arrive with export/import.
func replayBundle(ctx context.Context, path, ctxID, at string, opts replay.Options) (*replay.Result, string, error) {
	return nil, "", errors.New("bundle files are not supported by this build yet")
}
