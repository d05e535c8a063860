package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

func runBranch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("branch", "--context ID [--data DIR | --store SPEC] [NAME [--at REF]] [--json]\n\n"+
		"NAME is 1-100 of [A-Za-z0-9._/-], starting with a letter, digit or _, and\n"+
		"not 8 to 64 hex digits: a REF of those is read as a commit id. A branch an\n"+
		"older store made with such a name stays; as a REF it is refused as ambiguous\n"+
		"where another commit's id starts with it (give sha256:DIGITS for the commit).", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	at := fs.String("at", "", "create the branch at this commit or branch; default: main")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) > 1 {
		return fail(stderr, exitUsage, "branch: want --context ID and at most one branch name")
	}
	if len(pos) == 0 && *at != "" {
		return fail(stderr, exitUsage, "branch: --at needs a branch NAME to create")
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "branch: %v", err)
	}
	defer st.Close()
	if len(pos) == 1 {
		c, err := st.Resolve(ctx, *ctxID, *at)
		if err != nil {
			return fail(stderr, exitUsage, "branch: %v", err)
		}
		if err := st.CreateBranch(ctx, *ctxID, pos[0], c.ID); err != nil {
			return fail(stderr, exitUsage, "branch: %v", err)
		}
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(map[string]any{"name": pos[0], "head": c.ID})
		} else {
			fmt.Fprintf(stdout, "created branch %s at %s\n", pos[0], c.ID)
		}
		return exitOK
	}
	branches, err := st.Branches(ctx, *ctxID)
	if err != nil {
		return fail(stderr, exitUsage, "branch: %v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(branches)
		return exitOK
	}
	for _, b := range branches {
		c, err := st.GetCommit(ctx, *ctxID, b.Head)
		if err != nil {
			return fail(stderr, exitUsage, "branch: %v", err)
		}
		fmt.Fprintf(stdout, "%-20s %s  %s  %s\n", b.Name, b.Head.Short(), c.Time, c.Message)
	}
	return exitOK
}
