package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/artifactd/artifactd/client"
	"github.com/artifactd/artifactd/service"
)

func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compare", "--context CTX[@REF] --against CTX[@REF] [--data DIR | --store SPEC | --server URL] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	server := fs.String("server", "", "ask a running server (GET /v1/compare) instead of opening --data; the token is $ARTIFACTD_TOKEN")
	a := fs.String("context", "", "the first run: a context, optionally @ a commit or branch (required)")
	b := fs.String("against", "", "the second run, in the same form (required)")
	asJSON := fs.Bool("json", false, "print the comparison as JSON (the body of GET /v1/compare)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *a == "" || *b == "" || len(pos) > 0 {
		return fail(stderr, exitUsage, "compare: want --context CTX[@REF] and --against CTX[@REF]")
	}
	ctxA, refA, err := service.ParseCompareSide("--context", *a)
	if err != nil {
		return fail(stderr, exitUsage, "compare: --context %q: want CTX or CTX@REF", *a)
	}
	ctxB, refB, err := service.ParseCompareSide("--against", *b)
	if err != nil {
		return fail(stderr, exitUsage, "compare: --against %q: want CTX or CTX@REF", *b)
	}
	if name := stf.given(); *server != "" && name != "" {
		return fail(stderr, exitUsage, "compare: %s is not used with --server (the server compares its own store): drop one", name)
	}
	var cmp service.Comparison
	if *server != "" {
		if cmp, err = compareRemote(ctx, serverURL(*server), *a, *b); err != nil {
			return fail(stderr, exitUsage, "compare: %v", err)
		}
	} else {
		st, err := openExisting(ctx, stf)
		if err != nil {
			return fail(stderr, exitUsage, "compare: %v", err)
		}
		defer st.Close()
		if cmp, err = service.CompareRuns(ctx, st, ctxA, refA, ctxB, refB); err != nil {
			return fail(stderr, exitUsage, "compare: %v", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(cmp)
	} else {
		printComparison(stdout, cmp)
	}
	if !cmp.Equal {
		return exitMismatch
	}
	return exitOK
}

// compareRemote asks a running server through the Go client.
func compareRemote(ctx context.Context, server, a, b string) (service.Comparison, error) {
	c := client.New(server, client.WithToken(os.Getenv("ARTIFACTD_TOKEN")))
	res, err := c.Compare(ctx, a, b)
	if err != nil {
		return service.Comparison{}, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return service.Comparison{}, err
	}
	var out service.Comparison
	if err := json.Unmarshal(raw, &out); err != nil {
		return service.Comparison{}, fmt.Errorf("decode comparison: %w", err)
	}
	return out, nil
}

func sideLabel(s service.CompareSide) string {
	if s.Ref == "" {
		return s.Context
	}
	return s.Context + "@" + s.Ref
}

// printComparison writes a comparison for people: both hashes, then per
// producer what diverges.
func printComparison(w io.Writer, c service.Comparison) {
	fmt.Fprintf(w, "a %-20s commit %s  context hash %s\n", sideLabel(c.A), c.A.Commit.Short(), c.A.ContextHash)
	fmt.Fprintf(w, "b %-20s commit %s  context hash %s\n", sideLabel(c.B), c.B.Commit.Short(), c.B.ContextHash)
	if c.Equal {
		fmt.Fprintln(w, "equal: the two runs reached the same state")
		return
	}
	fmt.Fprintf(w, "different: divergences by producer\n")
	for _, g := range c.Divergences {
		name := g.Producer
		if name == "" {
			name = "(no producer)"
		}
		fmt.Fprintf(w, "%s\n", name)
		for _, x := range g.OnlyInA {
			fmt.Fprintf(w, "  only in a  %s  %s v%d %s\n", x.ID, x.Type, x.Version, x.ContentHash.Short())
		}
		for _, x := range g.OnlyInB {
			fmt.Fprintf(w, "  only in b  %s  %s v%d %s\n", x.ID, x.Type, x.Version, x.ContentHash.Short())
		}
		for _, x := range g.Changed {
			fmt.Fprintf(w, "  changed    %s  (%s) a: v%d %s  b: v%d %s\n", x.ID, strings.Join(x.Fields, ", "), x.A.Version, x.A.ContentHash.Short(), x.B.Version, x.B.ContentHash.Short())
		}
		for _, e := range g.EdgesOnlyInA {
			fmt.Fprintf(w, "  edge only in a  %s\n", e)
		}
		for _, e := range g.EdgesOnlyInB {
			fmt.Fprintf(w, "  edge only in b  %s\n", e)
		}
		for _, e := range g.EdgesChanged {
			fmt.Fprintf(w, "  edge attrs differ  %s  a: %s  b: %s\n", e.EdgeKey, e.AAttrs, e.BAttrs)
		}
	}
}
