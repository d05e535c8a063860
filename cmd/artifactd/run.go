package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit codes shared by every command.
const (
	exitOK       = 0
	exitMismatch = 1 // a verification that ran and said no
	exitUsage    = 2 // usage error, unknown context or commit, broken chain, I/O
)

// command is one subcommand of the binary.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"replay":     {"rebuild the state at a commit from the commit chain and verify it", runReplay},
		"fsck":       {"check every hash, commit id and state map in a data directory", runFsck},
		"log":        {"list the commits of a branch", runLog},
		"export":     {"write a context as a self-contained JSON Lines bundle", runExport},
		"import":     {"restore a bundle as a new context (same commit ids and hashes)", runImport},
		"diff":       {"what changed between two commits: artifacts, edges, trust", runDiff},
		"branch":     {"list a context's branches, or create one at a commit", runBranch},
		"merge":      {"three-way merge a branch or commit into a branch", runMerge},
		"audit":      {"why did it say that: an answer's provenance and trust report", runAudit},
		"eval":       {"structural evaluation: supported answers, quarantine share", runEval},
		"quarantine": {"the trust report: poison roots, blast radius, quarantined artifacts", runQuarantine},
		"serve":      {"serve the HTTP API (and the UI) over a data directory", runServe},
		"demo":       {"load example contexts (the ten-step poison plan, an audit run)", runDemo},
		"bench":      {"load-test single-artifact commits over HTTP", runBench},
		"fetch":      {"fetch a URL under the gate's address policy and record its verdict", runFetch},
		"compare":    {"compare two runs: the same context hash, or where they diverge", runCompare},
		"version":    {"print the version, commit and Go version of this binary", runVersion},
		"migrate":    {"copy every context from one store to another (Badger, PostgreSQL) with identical commit ids and hashes", runMigrate},
		"mcp":        {"the MCP server over stdio (--server URL or --data DIR); serve also has it at /mcp", runMCP},
	}
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 {
		usage(stderr, cmds)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		// Asked-for help is output, not an error: stdout, exit 0.
		usage(stdout, cmds)
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(ctx, nil, stdout, stderr)
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "artifactd: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return exitUsage
	}
	if wantsHelp(args[1:]) {
		// A command's flag usage goes to stdout too when asked for.
		return c.run(ctx, args[1:], stdout, stdout)
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: artifactd <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'artifactd <command> -h' for a command's flags.")
}

// parseInterspersed parses flags that may appear before or after
// positional arguments, returning the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// Parse stops at a "--" of its own and drops it: what follows is
		// positional, even what looks like a flag.
		if droppedTerminator(fs, args, len(args)-len(rest)) {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// droppedTerminator reports whether fs.Parse(args), which consumed the
// first n, stopped at a "--" of its own (and dropped it) rather than
// taking that "--" as a flag's value ("--message --").
func droppedTerminator(fs *flag.FlagSet, args []string, n int) bool {
	if n == 0 || args[n-1] != "--" {
		return false
	}
	i := 0
	for i < n-1 {
		name := strings.TrimLeft(args[i], "-")
		i++
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value is the next argument
			}
		}
	}
	return i == n-1
}

// newFlagSet returns a flag set that reports errors to stderr and never
// exits the process.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: artifactd %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// flagExit maps a flag parse error to an exit code (help is not an error).
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

func fail(stderr io.Writer, code int, format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	fmt.Fprintln(stderr, "artifactd: "+strings.TrimSuffix(msg, "\n"))
	return code
}
