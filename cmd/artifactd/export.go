package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("export", "--context ID [--data DIR | --store SPEC] [--at REF] [-o FILE]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context to export (required)")
	at := fs.String("at", "", "export this commit and its history only (commit id, prefix or branch); default: every commit and branch")
	out := fs.String("o", "", "write the bundle to this file (default: standard output)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) > 0 {
		return fail(stderr, exitUsage, "export: --context is required and takes no other arguments")
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "export: %v", err)
	}
	defer st.Close()
	if *out == "" {
		w := bufio.NewWriterSize(stdout, 1<<16)
		if _, err := st.Export(ctx, *ctxID, *at, w); err != nil {
			return fail(stderr, exitUsage, "export: %v", err)
		}
		if err := w.Flush(); err != nil {
			return fail(stderr, exitUsage, "export: %v", err)
		}
		return exitOK
	}
	h, err := exportFile(ctx, st, *ctxID, *at, *out)
	if err != nil {
		return fail(stderr, exitUsage, "export: %v", err)
	}
	fmt.Fprintf(stdout, "exported context %s to %s: %d commits, %d objects, %d blobs\n", *ctxID, *out, h.Commits, h.Objects, h.Blobs)
	return exitOK
}

// exportFile writes the bundle next to path and renames it into place, so
// that a failed export leaves no partial file.
func exportFile(ctx context.Context, st *store.Store, ctxID, at, path string) (h *replay.BundleHeader, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<16)
	hdr, err := st.Export(ctx, ctxID, at, w)
	if err != nil {
		return nil, err
	}
	if err = w.Flush(); err != nil {
		return nil, err
	}
	if err = tmp.Sync(); err != nil {
		return nil, err
	}
	if err = tmp.Close(); err != nil {
		return nil, err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	return hdr, nil
}

// openExisting opens the store the flags name, which must exist (a read
// never creates a store).
func openExisting(ctx context.Context, f *storeFlags) (*store.Store, error) {
	sp, err := f.resolve()
	if err != nil {
		return nil, err
	}
	return openSpec(ctx, sp, store.Options{Logger: discardLogger()}, true)
}
