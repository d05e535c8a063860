package main

import (
	"context"
	"encoding/json"
	"errors"
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
	Objects     int            `json:"objects_checked"`
	Artifacts   int            `json:"artifacts"`
	Edges       int            `json:"edges"`
	Types       map[string]int `json:"types"`
	Verify      string         `json:"verify,omitempty"`
	Verified    *bool          `json:"verified,omitempty"`
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "[BUNDLE] [--data DIR] --context ID [--at COMMIT|BRANCH] [--verify HASH] [--json]", stderr)
	dataDir := fs.String("data", defaultDataDir, "data directory of the store")
	ctxID := fs.String("context", "", "context to replay (required with a data directory)")
	at := fs.String("at", "", "commit id, unique prefix (8+ hex digits) or branch; default: main")
	verify := fs.String("verify", "", "expected context hash: sha256:<hex>, bare hex or a prefix of 8+ hex digits")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	all := fs.Bool("all-objects", false, "re-hash the payload of every put in the chain, not only the final state's")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *verify != "" {
		if _, err := hashing.HexPrefix(*verify); err != nil {
			return fail(stderr, exitUsage, "--verify: %v", err)
		}
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
		res, err = replayStore(ctx, *dataDir, *ctxID, *at, opts)
	case 1:
		res, ctxName, err = replayBundle(ctx, pos[0], *ctxID, *at, opts)
	default:
		return fail(stderr, exitUsage, "replay: at most one bundle file, got %d arguments", len(pos))
	}
	if err != nil {
		return fail(stderr, exitUsage, "replay: %v", err)
	}
	rep := replayReport{
		Context: ctxName, Commit: res.Commit.ID, ContextHash: res.State.Hash(),
		Commits: res.Commits, Ops: res.Ops, Objects: res.Objects,
		Artifacts: res.State.NumArtifacts(), Edges: res.State.NumEdges(), Types: map[string]int{},
	}
	for _, a := range res.State.Artifacts() {
		rep.Types[a.Type]++
	}
	code := exitOK
	if *verify != "" {
		ok, _ := replay.MatchHash(rep.ContextHash, *verify)
		rep.Verify, rep.Verified = *verify, &ok
		if !ok {
			code = exitMismatch
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
		fmt.Fprintf(stderr, "artifactd: replay: context hash mismatch\n  expected: %s\n  actual:   %s\n", *verify, rep.ContextHash)
	}
	return code
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
	return store.Open(ctx, store.Options{Dir: dir, Logger: discardLogger()})
}

func replayStore(ctx context.Context, dir, ctxID, at string, opts replay.Options) (*replay.Result, error) {
	if err := mustExist(dir); err != nil {
		return nil, err
	}
	st, err := openStore(ctx, dir)
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
