package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// runQuarantine is `artifactd quarantine --context ID`: the trust report
// at a commit (poison roots with their blast radius, every quarantined
// artifact with its roots and one path), the same as GET .../quarantine.
func runQuarantine(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("quarantine", "--context ID [--data DIR | --store SPEC] [--at REF] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	at := fs.String("at", "", "commit or branch; default: main")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) > 0 {
		return fail(stderr, exitUsage, "quarantine: want --context ID and no other arguments")
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "quarantine: %v", err)
	}
	defer st.Close()
	var rep service.QuarantineReport
	if err := st.Read(ctx, *ctxID, *at, func(v *store.View) error {
		rep = service.QuarantineOf(v)
		return nil
	}); err != nil {
		return fail(stderr, exitUsage, "quarantine: %v", err)
	}
	if *asJSON {
		printJSON(stdout, rep)
		return exitOK
	}
	fmt.Fprintf(stdout, "context:      %s at %s\n", *ctxID, rep.Commit)
	fmt.Fprintf(stdout, "trust:        %d confirmed, %d quarantined, %d poison root(s)\n", rep.Summary.Confirmed, rep.Summary.Quarantined, rep.Summary.PoisonRoots)
	for _, r := range rep.PoisonRoots {
		fmt.Fprintf(stdout, "  root %-24s blast radius %d: %s\n", r.ID, r.BlastRadius, r.Reason)
	}
	for _, q := range rep.Quarantined {
		fmt.Fprintf(stdout, "  quarantined %-17s via %s\n", q.ID, strings.Join(q.Path, " -> "))
	}
	return exitOK
}
