package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mustExist refuses to create a data directory where a read was meant.
func mustExist(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data directory %s is not a directory", dir)
	}
	// A directory a store was never created in: opening it would make
	// one there (and report it healthy).
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return fmt.Errorf("data directory %s holds no artifactd store (no MANIFEST); check the path", dir)
	}
	return nil
}
