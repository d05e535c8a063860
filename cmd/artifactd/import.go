package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/artifactd/artifactd/store"
)

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("import", "[--data DIR | --store SPEC] [--as NEWID] [--quarantine enforce|observe] [--gate-rules FILE] BUNDLE", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store (created if missing)")
	as := fs.String("as", "", "import under this context id instead of the bundle's")
	quarantine := fs.String("quarantine", "", "the imported context's quarantine setting, enforce or observe (default: the bundle's; its header is covered by no hash, so set it for a bundle you do not trust)")
	gateRules := fs.String("gate-rules", "", "a gate ruleset file the bundle's server ran with (serve --gate-rules): verdicts whose receipts name it are re-derived with it")
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
	res, err := st.Import(ctx, b, *as)
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
		return fail(stderr, exitUsage, "import: %v", err)
	}
	fmt.Fprintf(stdout, "imported context %s: %d commits, %d blobs; quarantine %s (%s)\n", res.Context, res.Commits, res.Blobs, res.Quarantine, from)
	for _, br := range res.Branches {
		fmt.Fprintf(stdout, "  %-20s %s\n", br.Name, br.Head)
	}
	return exitOK
}
