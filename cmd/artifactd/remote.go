package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/service"
)

// serverURL is a --server value as a base URL: "host:port" (as curl takes
// it, and as the docs' examples write it) is http://host:port.
func serverURL(s string) string {
	if s == "" || strings.Contains(s, "://") {
		return s
	}
	return "http://" + s
}

// tokenOr returns token, or $ARTIFACTD_TOKEN when it is empty.
func tokenOr(token string) string {
	if token != "" {
		return token
	}
	return os.Getenv("ARTIFACTD_TOKEN")
}

// replayServer is `replay --server URL`: the running server replays its
// stored chain (POST /v1/contexts/{ctx}/verify) while it keeps serving.
// Exit codes are replay's: 0 match, 1 mismatch, 2 usage, server or
// integrity error.
func replayServer(ctx context.Context, base, token, ctxID, at, want string, asJSON bool, stdout, stderr io.Writer) int {
	body, err := json.Marshal(service.VerifyInput{Hash: want, At: at})
	if err != nil {
		return fail(stderr, exitUsage, "replay: %v", err)
	}
	u := strings.TrimSuffix(base, "/") + "/v1/contexts/" + url.PathEscape(ctxID) + "/verify"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fail(stderr, exitUsage, "replay: --server %q: %v", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fail(stderr, exitUsage, "replay: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fail(stderr, exitUsage, "replay: read the answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Detail != "" {
			return fail(stderr, exitUsage, "replay: the server answered %d %s: %s", resp.StatusCode, p.Title, p.Detail)
		}
		return fail(stderr, exitUsage, "replay: the server answered %s", resp.Status)
	}
	var v service.VerifyResult
	if err := json.Unmarshal(raw, &v); err != nil {
		return fail(stderr, exitUsage, "replay: the server's answer is not a verify result: %v", err)
	}
	// The verdict is this command's, from the hash the server rebuilt: a
	// server that says "match" for another hash is not taken at its word.
	ok, err := replay.MatchHash(v.ContextHash, want)
	if err != nil {
		return fail(stderr, exitUsage, "replay: --verify: %v", err)
	}
	if ok != v.Match {
		return fail(stderr, exitUsage, "replay: the server says match=%v for hash %s, which %s %q", v.Match, v.ContextHash, map[bool]string{true: "matches", false: "does not match"}[ok], want)
	}
	rep := replayReport{Context: ctxID, Commit: v.Commit, ContextHash: v.ContextHash, Commits: v.Commits, Ops: v.Ops,
		Verify: want, Verified: &ok, MatchesCommit: v.MatchesCommit, Server: base}
	if asJSON {
		printJSON(stdout, rep) // no counts: the server reports none
	} else {
		fmt.Fprintf(stdout, "context:      %s (replayed by %s)\n", ctxID, base)
		fmt.Fprintf(stdout, "commit:       %s\n", v.Commit)
		fmt.Fprintf(stdout, "replayed:     %d commits, %d ops\n", v.Commits, v.Ops)
		fmt.Fprintf(stdout, "context hash: %s\n", v.ContextHash)
		if ok {
			fmt.Fprintf(stdout, "verify:       OK (matches %s)\n", want)
		} else {
			fmt.Fprintf(stdout, "verify:       MISMATCH (expected %s)\n", want)
		}
	}
	if !ok {
		printMismatch(stderr, rep)
		return exitMismatch
	}
	return exitOK
}
