package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/artifactd/artifactd/replay"
)

func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("diff", "--context ID [--data DIR | --store SPEC] FROM TO [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	asJSON := fs.Bool("json", false, "print the diff as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) != 2 {
		return fail(stderr, exitUsage, "diff: want --context ID and two commits or branches, FROM and TO")
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return fail(stderr, exitUsage, "diff: %v", err)
	}
	defer st.Close()
	from, err := st.Resolve(ctx, *ctxID, pos[0])
	if err != nil {
		return fail(stderr, exitUsage, "diff: %v", err)
	}
	to, err := st.Resolve(ctx, *ctxID, pos[1])
	if err != nil {
		return fail(stderr, exitUsage, "diff: %v", err)
	}
	d, err := st.Diff(ctx, *ctxID, from, to)
	if err != nil {
		return fail(stderr, exitUsage, "diff: %v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d)
		return exitOK
	}
	printDiff(stdout, d)
	return exitOK
}

func printDiff(w io.Writer, d *replay.DiffResult) {
	fmt.Fprintf(w, "from %s (%s)\nto   %s (%s)\n", d.From.Short(), d.FromHash, d.To.Short(), d.ToHash)
	if d.Empty() {
		fmt.Fprintln(w, "no differences")
		return
	}
	fmt.Fprintf(w, "artifacts: %d added, %d removed, %d changed\n", len(d.Added), len(d.Removed), len(d.Changed))
	for _, c := range d.Added {
		fmt.Fprintf(w, "  + %s  %s v%d %s\n", c.ID, c.New.Type, c.New.Version, c.New.ContentHash.Short())
	}
	for _, c := range d.Removed {
		fmt.Fprintf(w, "  - %s  %s v%d %s\n", c.ID, c.Old.Type, c.Old.Version, c.Old.ContentHash.Short())
	}
	for _, c := range d.Changed {
		typ := c.New.Type
		if c.Old.Type != c.New.Type {
			typ = c.Old.Type + " -> " + c.New.Type
		}
		fmt.Fprintf(w, "  ~ %s  %s v%d -> v%d %s -> %s\n", c.ID, typ, c.Old.Version, c.New.Version, c.Old.ContentHash.Short(), c.New.ContentHash.Short())
	}
	fmt.Fprintf(w, "edges: %d added, %d removed, %d changed\n", len(d.EdgesAdded), len(d.EdgesRemoved), len(d.EdgesChanged))
	for _, e := range d.EdgesAdded {
		fmt.Fprintf(w, "  + %s%s\n", e.Key(), attrsSuffix(e.NewAttrs))
	}
	for _, e := range d.EdgesRemoved {
		fmt.Fprintf(w, "  - %s%s\n", e.Key(), attrsSuffix(e.OldAttrs))
	}
	for _, e := range d.EdgesChanged {
		fmt.Fprintf(w, "  ~ %s %s -> %s\n", e.Key(), orEmpty(e.OldAttrs), orEmpty(e.NewAttrs))
	}
	fmt.Fprintf(w, "trust: %d changed\n", len(d.Trust))
	for _, t := range d.Trust {
		old := string(t.Old)
		if old == "" {
			old = "(new)"
		}
		fmt.Fprintf(w, "  ! %s  %s -> %s\n", t.ID, old, t.New)
	}
}

func attrsSuffix(a json.RawMessage) string {
	if len(a) == 0 {
		return ""
	}
	return " " + string(a)
}

func orEmpty(a json.RawMessage) string {
	if len(a) == 0 {
		return "{}"
	}
	return string(a)
}
