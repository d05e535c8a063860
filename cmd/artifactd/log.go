package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

func runLog(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("log", "[--data DIR | --store SPEC] --context ID [--at REF] [-n N] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	at := fs.String("at", "", "commit or branch to start from; default: main")
	n := fs.Int("n", 20, "how many commits to show (0 = all)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	if *ctxID == "" {
		return fail(stderr, exitUsage, "log: --context is required")
	}
	if *n < 0 {
		return fail(stderr, exitUsage, "log: -n %d: give a count of commits, or 0 for all", *n)
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "log: %v", err)
	}
	defer st.Close()
	c, err := st.Resolve(ctx, *ctxID, *at)
	if err != nil {
		return fail(stderr, exitUsage, "log: %v", err)
	}
	commits, err := st.Log(ctx, *ctxID, c, *n)
	if err != nil {
		return fail(stderr, exitUsage, "log: %v", err)
	}
	enc := json.NewEncoder(stdout)
	for _, c := range commits {
		if *asJSON {
			_ = enc.Encode(c)
			continue
		}
		fmt.Fprintf(stdout, "commit %s\n", c.ID)
		if len(c.Parents) > 1 {
			ps := make([]string, len(c.Parents))
			for i, p := range c.Parents {
				ps[i] = p.Short()
			}
			fmt.Fprintf(stdout, "merge:   %s\n", strings.Join(ps, " "))
		}
		fmt.Fprintf(stdout, "author:  %s\ndate:    %s\nhash:    %s\nops:     %d (artifacts %d, edges %d)\n\n    %s\n\n",
			c.Author, c.Time, c.ContextHash, c.NumOps, c.Artifacts, c.Edges, c.Message)
	}
	return exitOK
}
