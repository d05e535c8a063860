package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// mergeReport is what `artifactd merge --json` prints.
type mergeReport struct {
	Status    string             `json:"status"` // up_to_date, fast_forward, merge, conflict
	Into      string             `json:"into"`
	Theirs    string             `json:"theirs"`
	Result    *store.MergeResult `json:"result,omitempty"`
	Conflicts []replay.Conflict  `json:"conflicts,omitempty"`
}

func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("merge", "--context ID [--data DIR | --store SPEC] [--into BRANCH] THEIRS [--resolve KEY=ours|theirs ...] [--resolve-value KEY=JSON ...] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context (required)")
	into := fs.String("into", "main", "branch to merge into (ours)")
	author := fs.String("author", "", "author of the merge commit (default: artifactd)")
	message := fs.String("message", "", "message of the merge commit (default: merge THEIRS into BRANCH)")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	var takes, values stringList
	fs.Var(&takes, "resolve", "settle a conflict: KEY=ours or KEY=theirs (repeatable)")
	fs.Var(&values, "resolve-value", "settle a conflict with a value: KEY=JSON object, the artifact's new data or the edge's attrs (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) != 1 {
		return fail(stderr, exitUsage, "merge: want --context ID and one branch or commit to merge (THEIRS)")
	}
	res, err := parseResolutions(takes, values)
	if err != nil {
		return fail(stderr, exitUsage, "merge: %v", err)
	}
	sp, err := stf.resolve()
	if err != nil {
		return fail(stderr, exitUsage, "merge: %v", err)
	}
	st, reg, err := openAPISpec(ctx, sp, store.Options{Logger: discardLogger()}, true)
	if err != nil {
		return fail(stderr, exitUsage, "merge: %v", err)
	}
	defer st.Close()
	// Through the service, as the API merges: a value resolution follows
	// its type's schema and cannot replace or forge a gate output.
	svc := newService(st, reg, serveConfig{Logger: discardLogger()}, nil)
	rep := mergeReport{Into: *into, Theirs: pos[0]}
	out, err := svc.Merge(ctx, *ctxID, service.MergeInput{Ours: *into, Theirs: pos[0], Resolutions: res, Author: *author, Message: *message})
	var ce *replay.ConflictError
	switch {
	case errors.As(err, &ce):
		rep.Status, rep.Conflicts = "conflict", ce.Conflicts
		if *asJSON {
			printJSON(stdout, rep)
		} else {
			printConflicts(stdout, rep)
		}
		return fail(stderr, exitMismatch, "merge: %d unresolved conflict(s); nothing was changed", len(ce.Conflicts))
	case err != nil:
		return fail(stderr, exitUsage, "merge: %v", err)
	}
	rep.Status, rep.Result = string(out.Kind), out
	if *asJSON {
		printJSON(stdout, rep)
		return exitOK
	}
	switch out.Kind {
	case replay.MergeUpToDate:
		fmt.Fprintf(stdout, "%s is already up to date with %s (%s)\n", *into, pos[0], out.Commit.ID.Short())
	case replay.MergeFastForward:
		fmt.Fprintf(stdout, "fast-forwarded %s to %s\n", *into, out.Commit.ID)
	default:
		fmt.Fprintf(stdout, "merged %s into %s: commit %s, %d op(s), base %s\ncontext hash %s\n",
			pos[0], *into, out.Commit.ID, len(out.Ops), out.Base.Short(), out.Commit.ContextHash)
		for _, c := range out.Resolved {
			fmt.Fprintf(stdout, "  resolved %s (%s)\n", c.Key, c.Kind)
		}
	}
	for _, k := range out.Unused {
		fmt.Fprintf(stderr, "artifactd: merge: warning: resolution %q matched no conflict\n", k)
	}
	return exitOK
}

// parseResolutions reads --resolve KEY=ours|theirs (split at the last
// "=", as keys may hold one) and --resolve-value KEY=JSON
// (splitResolveValue).
func parseResolutions(takes, values []string) (map[string]replay.Resolution, error) {
	res := map[string]replay.Resolution{}
	for _, t := range takes {
		i := strings.LastIndexByte(t, '=')
		if i <= 0 {
			return nil, fmt.Errorf("--resolve %q: want KEY=ours or KEY=theirs", t)
		}
		key, take := t[:i], t[i+1:]
		if take != replay.TakeOurs && take != replay.TakeTheirs {
			return nil, fmt.Errorf("--resolve %q: %q is neither ours nor theirs (use --resolve-value for a value)", t, take)
		}
		if _, dup := res[key]; dup {
			return nil, fmt.Errorf("conflict %q is resolved twice", key)
		}
		res[key] = replay.Resolution{Take: take}
	}
	for _, v := range values {
		key, raw, err := splitResolveValue(v)
		if err != nil {
			return nil, err
		}
		if _, dup := res[key]; dup {
			return nil, fmt.Errorf("conflict %q is resolved twice", key)
		}
		res[key] = replay.Resolution{Value: json.RawMessage(raw)}
	}
	return res, nil
}

// splitResolveValue splits --resolve-value KEY=JSON at the first "={"
// after which the rest is one JSON object. A key may hold "={" itself (an
// artifact id may), so each is tried in turn; a JSON string cannot hold an
// unescaped quote, so at most one split leaves a valid object.
func splitResolveValue(v string) (key, raw string, err error) {
	for i := 0; ; {
		j := strings.Index(v[i:], "={")
		if j < 0 {
			break
		}
		at := i + j
		if at > 0 && json.Valid([]byte(v[at+1:])) {
			return v[:at], v[at+1:], nil
		}
		i = at + 1
	}
	if strings.Index(v, "={") <= 0 {
		return "", "", fmt.Errorf("--resolve-value %q: want KEY={...} (a JSON object)", v)
	}
	return "", "", fmt.Errorf("--resolve-value %q: the value is not valid JSON", v)
}

func printConflicts(w io.Writer, rep mergeReport) {
	fmt.Fprintf(w, "merging %s into %s: %d conflict(s); nothing was changed\n", rep.Theirs, rep.Into, len(rep.Conflicts))
	side := func(name string, v *replay.ArtifactVersion) {
		if v == nil {
			fmt.Fprintf(w, "      %-7s (absent)\n", name+":")
			return
		}
		fmt.Fprintf(w, "      %-7s %s v%d %s by %q\n", name+":", v.Type, v.Version, v.ContentHash.Short(), v.ProducedBy)
	}
	edge := func(name string, e *replay.EdgeSide) {
		switch {
		case e == nil:
			fmt.Fprintf(w, "      %-7s (absent)\n", name+":")
		default:
			fmt.Fprintf(w, "      %-7s %s\n", name+":", orEmpty(e.Attrs))
		}
	}
	for _, c := range rep.Conflicts {
		fmt.Fprintf(w, "\n  %s  [%s]\n      %s\n", c.Key, c.Kind, c.Detail)
		switch c.Kind {
		case replay.ConflictEdgeAttrs, replay.ConflictEdgeDeleteEdit:
			edge("base", c.BaseEdge)
			edge("ours", c.OursEdge)
			edge("theirs", c.TheirsEdge)
		case replay.ConflictCycle:
			fmt.Fprintf(w, "      cycle:  %s\n", strings.Join(c.Cycle, " -> "))
		default:
			side("base", c.Base)
			side("ours", c.Ours)
			side("theirs", c.Theirs)
			for _, e := range c.Edges {
				fmt.Fprintf(w, "      edge:   %s\n", e)
			}
		}
	}
	fmt.Fprintln(w, "\nresolve each with --resolve 'KEY=ours' or --resolve 'KEY=theirs', or --resolve-value 'KEY={...}' and merge again")
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
