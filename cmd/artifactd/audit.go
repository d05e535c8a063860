package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/store"
)

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit", "--context ID [--data DIR | --store SPEC] [--at REF] ANSWER_ID [--format json|markdown]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	at := fs.String("at", "", "commit or branch; default: main")
	format := fs.String("format", "json", "json or markdown")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) != 1 {
		return fail(stderr, exitUsage, "audit: want --context ID and one answer id")
	}
	if *format != "json" && *format != "markdown" {
		return fail(stderr, exitUsage, "audit: --format must be json or markdown, got %q", *format)
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "audit: %v", err)
	}
	defer st.Close()
	var rep *graph.AuditReport
	err = st.Read(ctx, *ctxID, *at, func(v *store.View) error {
		var err error
		rep, _, err = v.Audit(ctx, pos[0])
		return err
	})
	if errors.Is(err, graph.ErrNotFound) {
		return fail(stderr, exitUsage, "audit: no artifact %q in context %s at %s", pos[0], *ctxID, orMain(*at))
	}
	if fault.IsCorrupt(err) {
		return fail(stderr, exitUsage, "audit: %v (the store is damaged: run artifactd fsck)", err)
	}
	if err != nil {
		return fail(stderr, exitUsage, "audit: %v", err)
	}
	if *format == "markdown" {
		fmt.Fprint(stdout, rep.Markdown())
		return exitOK
	}
	printJSON(stdout, rep)
	return exitOK
}

func orMain(ref string) string {
	if ref == "" {
		return "main"
	}
	return ref
}
