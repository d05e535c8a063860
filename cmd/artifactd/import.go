package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/store"
)

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("import", "[--data DIR] [--as NEWID] BUNDLE", stderr)
	dataDir := fs.String("data", defaultDataDir, "data directory of the store (created if missing)")
	as := fs.String("as", "", "import under this context id instead of the bundle's")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		return fail(stderr, exitUsage, "import: give one bundle file (or - for standard input)")
	}
	b, err := readBundleFile(pos[0])
	if err != nil {
		return fail(stderr, exitUsage, "import: %v", err)
	}
	st, err := openStore(ctx, *dataDir)
	if err != nil {
		return fail(stderr, exitUsage, "import: %v", err)
	}
	defer st.Close()
	res, err := st.Import(ctx, b, *as)
	if err != nil {
		if errors.Is(err, store.ErrExists) {
			return fail(stderr, exitUsage, "import: %v\n  hint: import it under another id with --as NEWID", err)
		}
		return fail(stderr, exitUsage, "import: %v", err)
	}
	fmt.Fprintf(stdout, "imported context %s: %d commits, %d blobs\n", res.Context, res.Commits, res.Blobs)
	for _, br := range res.Branches {
		fmt.Fprintf(stdout, "  %-20s %s\n", br.Name, br.Head)
	}
	return exitOK
}
