package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/service"
)

func runFsck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fsck", "[--data DIR | --store SPEC] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "fsck: %v", err)
	}
	defer st.Close()
	rep, err := st.Check(ctx)
	if err != nil {
		return fail(stderr, exitUsage, "fsck: could not complete: %v", err)
	}
	reg, regErr := service.CheckRegistry(ctx, st)
	rep.Defects = append(rep.Defects, reg...)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "checked %d contexts, %d commits, %d ops, %d objects, %d blobs, %d state-map nodes\n",
			rep.Contexts, rep.Commits, rep.Ops, rep.Objects, rep.Blobs, rep.Nodes)
		for _, d := range rep.Defects {
			fmt.Fprintf(stdout, "DEFECT %s\n", d)
		}
	}
	if regErr != nil {
		// What the store's check found is printed all the same.
		return fail(stderr, exitUsage, "fsck: could not complete the registry's check: %v", regErr)
	}
	if len(rep.Defects) > 0 {
		return fail(stderr, exitMismatch, "fsck: %d defect(s) found", len(rep.Defects))
	}
	if !*asJSON {
		fmt.Fprintln(stdout, "ok")
	}
	return exitOK
}
