package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"

	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/store"
)

const defaultDataDir = "./artifactd-data"

// replayReport is what `artifactd replay --json` prints.
type replayReport struct {
	Context     string         `json:"context"`
	Commit      hashing.Digest `json:"commit"`
	ContextHash hashing.Digest `json:"context_hash"`
	Commits     int            `json:"commits_replayed"`
	Ops         int            `json:"ops_replayed"`
	// replayCounts are what a replay here counts; nil (left out of the
	// JSON) for a replay a server made (--server), which reports none.
	*replayCounts
	Verify   string `json:"verify,omitempty"`
	Verified *bool  `json:"verified,omitempty"`
	// MatchesCommit names, on a mismatch, the newest older commit of the
	// same first-parent line whose state has the expected hash.
	MatchesCommit *hashing.Digest `json:"matches_commit,omitempty"`
	// Server is the server that replayed the chain (--server).
	Server string `json:"server,omitempty"`
}

// replayCounts are the counts of a replay made here.
type replayCounts struct {
	Objects   int            `json:"objects_checked"`
	Artifacts int            `json:"artifacts"`
	Edges     int            `json:"edges"`
	Types     map[string]int `json:"types"`
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "[BUNDLE] [--data DIR | --store SPEC | --server URL] --context ID [--at COMMIT|BRANCH] [--verify HASH] [--json]", stderr)
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context to replay (required with a data directory)")
	at := fs.String("at", "", "commit id, unique prefix (8+ hex digits) or branch; default: main")
	verify := fs.String("verify", "", "expected context hash: sha256:<hex>, bare hex or a prefix of 8+ hex digits")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	all := fs.Bool("all-objects", false, "re-hash the payload of every put in the chain, not only the final state's")
	server := fs.String("server", "", "replay through a running artifactd at this URL (POST /v1/contexts/{ctx}/verify) instead of opening the data directory")
	token := fs.String("token", "", "bearer token for --server (default: $ARTIFACTD_TOKEN)")
	gateRules := fs.String("gate-rules", "", "with a bundle: a gate ruleset file its server ran with (serve --gate-rules), to re-derive verdicts whose receipts name it")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	verifySet := set["verify"]
	// A flag the chosen source does not use is refused, never dropped: a
	// server re-hashes the final state's payloads with its own rulesets,
	// and a bundle is replayed with no store.
	var unused []string
	switch {
	case *server != "":
		unused = []string{"all-objects", "gate-rules", "data", "store"}
	case len(pos) > 0:
		unused = []string{"data", "store", "token"}
	default:
		unused = []string{"gate-rules", "token"}
	}
	for _, name := range unused {
		if set[name] {
			return fail(stderr, exitUsage, "replay: --%s is not used %s: drop it", name, replaySource(*server, pos))
		}
	}
	if verifySet {
		// An empty value is a usage error, never a pass: a script whose
		// variable came out empty must not be told "verified".
		if _, err := hashing.HexPrefix(*verify); err != nil {
			return fail(stderr, exitUsage, "--verify %q: %v (want sha256:<64 hex digits>, bare hex or a prefix of at least 8 hex digits)", *verify, err)
		}
	}
	if *server != "" {
		if len(pos) > 0 {
			return fail(stderr, exitUsage, "replay: --server replays the server's stored chain; a bundle file is replayed locally without it")
		}
		if *ctxID == "" || !verifySet {
			return fail(stderr, exitUsage, "replay --server: --context and --verify are required")
		}
		return replayServer(ctx, serverURL(*server), tokenOr(*token), *ctxID, *at, *verify, *asJSON, stdout, stderr)
	}
	opts := replay.Options{Objects: replay.ObjectsFinal}
	if *all {
		opts.Objects = replay.ObjectsAll
	}
	var res *replay.Result
	ctxName := *ctxID
	switch len(pos) {
	case 0:
		if *ctxID == "" {
			return fail(stderr, exitUsage, "replay: --context is required (or give a bundle file)")
		}
		var sp storeSpec
		if sp, err = stf.resolve(); err == nil {
			res, err = replayStore(ctx, sp, *ctxID, *at, opts)
		}
	case 1:
		rulesets, rerr := knownRulesets(*gateRules)
		if rerr != nil {
			return fail(stderr, exitUsage, "replay: --gate-rules: %v", rerr)
		}
		res, ctxName, err = replayBundle(ctx, pos[0], *ctxID, *at, opts, rulesets)
	default:
		return fail(stderr, exitUsage, "replay: at most one bundle file, got %d arguments", len(pos))
	}
	if err != nil {
		return fail(stderr, exitUsage, "replay: %v", err)
	}
	rep := replayReport{
		Context: ctxName, Commit: res.Commit.ID, ContextHash: res.State.Hash(),
		Commits: res.Commits, Ops: res.Ops, replayCounts: &replayCounts{Objects: res.Objects,
			Artifacts: res.State.NumArtifacts(), Edges: res.State.NumEdges(), Types: map[string]int{}},
	}
	for _, a := range res.State.Artifacts() {
		rep.Types[a.Type]++
	}
	code := exitOK
	if verifySet {
		ok, _ := replay.MatchHash(rep.ContextHash, *verify)
		rep.Verify, rep.Verified = *verify, &ok
		if !ok {
			code = exitMismatch
			rep.MatchesCommit = olderMatch(ctx, stf, ctxName, pos, res, *verify)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		printReplay(stdout, rep)
	}
	if code == exitMismatch {
		printMismatch(stderr, rep)
	}
	return code
}

// replaySource names where replay reads the chain from, for messages.
func replaySource(server string, pos []string) string {
	switch {
	case server != "":
		return "with --server (the server replays its stored chain, re-hashing the final state's payloads, with its own gate rulesets)"
	case len(pos) > 0:
		return "with a bundle file (it is replayed with no store and no server)"
	}
	return "with a store (--gate-rules is for a bundle file, --token for --server)"
}

// printMismatch explains a failed --verify on stderr.
func printMismatch(stderr io.Writer, rep replayReport) {
	fmt.Fprintf(stderr, "artifactd: replay: context hash mismatch\n  expected: %s\n  actual:   %s (at %s)\n", rep.Verify, rep.ContextHash, rep.Commit)
	if rep.MatchesCommit != nil {
		fmt.Fprintf(stderr, "  the expected hash is the state of the older commit %s of the same history: the branch moved on since (pass --at %s to verify that commit)\n", *rep.MatchesCommit, rep.MatchesCommit.Hex()[:12])
	}
}

// olderMatch finds, after a mismatch, the newest older commit on the
// replayed commit's first-parent line whose context hash matches want.
func olderMatch(ctx context.Context, stf *storeFlags, ctxID string, bundle []string, res *replay.Result, want string) *hashing.Digest {
	if len(bundle) > 0 {
		if bundle[0] == "-" {
			return nil // standard input cannot be read twice
		}
		b, err := readBundleFile(bundle[0])
		if err != nil {
			return nil
		}
		v, err := replay.VerifyHash(ctx, b, res.Commit.ID, want, replay.Options{Objects: replay.ObjectsNone})
		if err != nil || v.MatchesCommit == nil {
			return nil
		}
		return &v.MatchesCommit.ID
	}
	st, err := openExisting(ctx, stf)
	if err != nil {
		return nil
	}
	defer st.Close()
	log, err := st.Log(ctx, ctxID, res.Commit, 0)
	if err != nil {
		return nil
	}
	for _, c := range log[1:] {
		if ok, _ := replay.MatchHash(c.ContextHash, want); ok {
			return &c.ID
		}
	}
	return nil
}

func printReplay(w io.Writer, r replayReport) {
	fmt.Fprintf(w, "context:      %s\n", r.Context)
	fmt.Fprintf(w, "commit:       %s\n", r.Commit)
	fmt.Fprintf(w, "replayed:     %d commits, %d ops, %d payloads re-hashed\n", r.Commits, r.Ops, r.Objects)
	fmt.Fprintf(w, "artifacts:    %d\n", r.Artifacts)
	types := make([]string, 0, len(r.Types))
	for t := range r.Types {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(w, "  %-20s %d\n", t, r.Types[t])
	}
	fmt.Fprintf(w, "edges:        %d\n", r.Edges)
	fmt.Fprintf(w, "context hash: %s\n", r.ContextHash)
	if r.Verified != nil {
		if *r.Verified {
			fmt.Fprintf(w, "verify:       OK (matches %s)\n", r.Verify)
		} else {
			fmt.Fprintf(w, "verify:       MISMATCH (expected %s)\n", r.Verify)
		}
	}
}

func openStore(ctx context.Context, dir string) (*store.Store, error) {
	return openStoreWith(ctx, store.Options{Dir: dir, Logger: discardLogger()})
}

// openStoreWith opens a data directory for an offline command; a
// directory a running server holds is refused with what to do instead.
func openStoreWith(ctx context.Context, opts store.Options) (*store.Store, error) {
	st, err := store.Open(ctx, opts)
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("%s is in use by a running artifactd (the data directory is locked): stop it, or ask it instead with --server URL (replay --server, or the HTTP API): %w", opts.Dir, err)
	}
	return st, err
}

func replayStore(ctx context.Context, sp storeSpec, ctxID, at string, opts replay.Options) (*replay.Result, error) {
	st, err := openSpec(ctx, sp, store.Options{Logger: discardLogger()}, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := st.Resolve(ctx, ctxID, at)
	if err != nil {
		return nil, err
	}
	res, err := replay.Fold(ctx, st.Source(ctxID), c.ID, opts)
	if err != nil {
		var ce *replay.ChainError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("the chain does not verify: %w", err)
		}
		return nil, err
	}
	return res, nil
}
