package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/artifactd/artifactd/store"
)

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("import", "[--data DIR | --store SPEC] [--as NEWID] [--quarantine enforce|observe] [--gate-rules FILE] [--rename-branch OLD=NEW ...] [--keep-hex-branches] BUNDLE\n\n"+
		"Every branch of the bundle becomes a new branch of the new context, so a\n"+
		"branch named with 8 to 64 hex digits, which `artifactd branch` refuses\n"+
		"since such a name reads as a commit id, refuses the import: rename it with\n"+
		"--rename-branch, or keep the name with --keep-hex-branches when the bundle\n"+
		"is the export of a store that made the branch before that rule.", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store (created if missing)")
	as := fs.String("as", "", "import under this context id instead of the bundle's")
	quarantine := fs.String("quarantine", "", "the imported context's quarantine setting, enforce or observe (default: the bundle's; its header is covered by no hash, so set it for a bundle you do not trust)")
	gateRules := fs.String("gate-rules", "", "a gate ruleset file the bundle's server ran with (serve --gate-rules): verdicts whose receipts name it are re-derived with it")
	var renames stringList
	fs.Var(&renames, "rename-branch", "create the bundle's branch OLD as NEW (repeatable; NEW is a name artifactd branch takes; not main)")
	keepHex := fs.Bool("keep-hex-branches", false, "create the bundle's branches named with 8 to 64 hex digits under those names, as the store it was exported from made them before such names were refused (as a ref, such a name is the branch, or refused as ambiguous where another commit's id starts with it)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		return fail(stderr, exitUsage, "import: give one bundle file (or - for standard input)")
	}
	switch *quarantine {
	case "", store.ModeEnforce, store.ModeObserve:
	default:
		return fail(stderr, exitUsage, "import: --quarantine %q: want %s or %s", *quarantine, store.ModeEnforce, store.ModeObserve)
	}
	opts := store.ImportOptions{As: *as, KeepHexBranches: *keepHex, RenameBranches: map[string]string{}}
	for _, r := range renames {
		old, name, ok := strings.Cut(r, "=")
		if !ok || old == "" || name == "" {
			return fail(stderr, exitUsage, "import: --rename-branch %q: want OLD=NEW", r)
		}
		if _, twice := opts.RenameBranches[old]; twice {
			return fail(stderr, exitUsage, "import: --rename-branch: branch %q is renamed twice", old)
		}
		opts.RenameBranches[old] = name
	}
	b, err := readBundleFile(pos[0])
	if err != nil {
		return fail(stderr, exitUsage, "import: %v", err)
	}
	from := "the bundle's setting"
	if *quarantine != "" {
		b.Header.Settings.Quarantine = *quarantine
		from = "--quarantine"
	}
	rulesets, err := knownRulesets(*gateRules)
	if err != nil {
		return fail(stderr, exitUsage, "import: --gate-rules: %v", err)
	}
	sp, err := stf.resolve()
	if err != nil {
		return fail(stderr, exitUsage, "import: %v", err)
	}
	// A data directory this import makes is removed again when the import
	// is refused: a mistyped --data leaves nothing behind.
	made := false
	if !sp.isPostgres() {
		if _, err := os.Stat(sp.Dir); os.IsNotExist(err) {
			made = true
		}
	}
	st, err := openSpec(ctx, sp, store.Options{Logger: discardLogger(), Rulesets: rulesets}, false)
	if err != nil {
		return fail(stderr, exitUsage, "import: %v", err)
	}
	res, err := st.ImportWith(ctx, b, opts)
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil && made {
		if rerr := os.RemoveAll(sp.Dir); rerr != nil {
			fmt.Fprintf(stderr, "artifactd: import: remove %s: %v\n", sp.Dir, rerr)
		}
	}
	if err != nil {
		if errors.Is(err, store.ErrExists) {
			if *as != "" {
				return fail(stderr, exitUsage, "import: %v\n  hint: %q is taken too; give --as an id no context has", err, *as)
			}
			return fail(stderr, exitUsage, "import: %v\n  hint: import it under another id with --as NEWID", err)
		}
		var hb *store.HexBranchError
		if errors.As(err, &hb) {
			flags := make([]string, len(hb.Branches))
			for i, br := range hb.Branches {
				flags[i] = "--rename-branch " + br.Name + "=NEWNAME"
			}
			the := "the branch"
			if len(flags) > 1 {
				the = "the branches"
			}
			return fail(stderr, exitUsage, "import: %v\n  hint: rename for this import with %s; or, for the export of a store that made %s before that rule, keep the names with --keep-hex-branches",
				err, strings.Join(flags, " "), the)
		}
		return fail(stderr, exitUsage, "import: %v", err)
	}
	fmt.Fprintf(stdout, "imported context %s: %d commits, %d blobs; quarantine %s (%s)\n", res.Context, res.Commits, res.Blobs, res.Quarantine, from)
	for _, br := range res.Branches {
		fmt.Fprintf(stdout, "  %-20s %s\n", br.Name, br.Head)
	}
	return exitOK
}
