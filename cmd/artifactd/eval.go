package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eval", "--context ID [--data DIR | --store SPEC] [--at REF] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	at := fs.String("at", "", "commit or branch; default: main")
	asJSON := fs.Bool("json", false, "print the evaluation as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) > 0 {
		return fail(stderr, exitUsage, "eval: want --context ID and no other arguments")
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "eval: %v", err)
	}
	defer st.Close()
	var rep service.EvalReport
	err = st.Read(ctx, *ctxID, *at, func(v *store.View) error {
		rep = service.EvalOf(*ctxID, v)
		return nil
	})
	if err != nil {
		return fail(stderr, exitUsage, "eval: %v", err)
	}
	if *asJSON {
		printJSON(stdout, rep)
		return exitOK
	}
	e := rep.Evaluation
	fmt.Fprintf(stdout, "context:      %s at %s\n", rep.Context, rep.Commit)
	fmt.Fprintf(stdout, "artifacts:    %d (%d quarantined, %.1f%%; %d poison roots)\n", e.Artifacts, e.Quarantined, 100*e.QuarantinedShare, e.PoisonRoots)
	fmt.Fprintf(stdout, "answers:      %d, %d supported by a confirmed source (%.1f%%), %.2f sources per answer\n",
		len(e.Answers), e.SupportedAnswers, 100*e.SupportedShare, e.MeanSourcesPerAnswer)
	for _, a := range e.Answers {
		fmt.Fprintf(stdout, "  %-24s %-12s sources %d, confirmed %d\n", a.ID, a.Status, a.Sources, a.ConfirmedSources)
	}
	if len(e.UnsupportedAnswers) > 0 {
		fmt.Fprintf(stdout, "unsupported:  %s\n", strings.Join(e.UnsupportedAnswers, ", "))
	}
	if len(e.DanglingClaims) > 0 {
		fmt.Fprintf(stdout, "dangling claims (resting on nothing): %s\n", strings.Join(e.DanglingClaims, ", "))
	}
	return exitOK
}
