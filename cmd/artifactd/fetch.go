package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/gate"
	"github.com/artifactd/artifactd/service"
	"github.com/artifactd/artifactd/store"
)

// runFetch is `artifactd fetch URL --context ID`: fetch a URL under the
// gate's address policy, classify it and record the fetch_verdict, either
// through a running server (--server: POST .../fetches with "perform":
// true; the server must run with --allow-fetch) or directly against a
// data directory (--data; the fetch runs in this process). Exit 0 when the
// verdict is RETRIEVED, 1 when it was recorded as FAILED or UNKNOWN, 2 when
// nothing was recorded (usage, policy refusal, server or store error).
func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fetch", "URL --context ID [--id ID] [--server URL [--token T] | --data DIR | --store SPEC [--allow-private-fetch] [--render] [--gate-rules FILE] [--secrets FILE]] [--json]", stderr)
	ctxID := fs.String("context", "", "context to record the verdict in (required)")
	id := fs.String("id", "", "id of the fetch_verdict (default: derived from its content)")
	server := fs.String("server", "", "base URL of a running artifactd (started with --allow-fetch); default: use --data")
	token := fs.String("token", os.Getenv("ARTIFACTD_TOKEN"), "bearer token for --server (default $ARTIFACTD_TOKEN)")
	stf := addStoreFlags(fs, defaultDataDir, "data directory of the store, when no --server is given")
	allowPrivate := fs.Bool("allow-private-fetch", false, "with --data: also fetch loopback and private addresses (development only)")
	renderOn := fs.Bool("render", false, "with --data: render a script shell in headless chromium ($ARTIFACTD_CHROMIUM, else chromium or google-chrome on PATH) and classify it again")
	asJSON := fs.Bool("json", false, "print the whole answer as JSON")
	gf := addGateFlags(fs) // with --data; a server has its own
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *ctxID == "" || len(pos) != 1 {
		return fail(stderr, exitUsage, "fetch: want one URL and --context ID")
	}
	in := service.FetchInput{ID: *id, URL: pos[0], Perform: true}
	var out *service.FetchWrite
	if *server != "" {
		if *allowPrivate || *renderOn || gf.given() {
			return fail(stderr, exitUsage, "fetch: --allow-private-fetch, --render, --gate-rules and --secrets are the server's flags with --server")
		}
		if name := stf.given(); name != "" {
			return fail(stderr, exitUsage, "fetch: %s is not used with --server (the server records the verdict in its own store): drop one", name)
		}
		out, err = fetchThroughServer(ctx, serverURL(*server), *token, *ctxID, in)
	} else {
		var sp storeSpec
		if sp, err = stf.resolve(); err == nil {
			out, err = fetchIntoStore(ctx, sp, *ctxID, in, *allowPrivate, *renderOn, gf)
		}
	}
	if err != nil {
		return fail(stderr, exitUsage, "fetch: %v", err)
	}
	if *asJSON {
		printJSON(stdout, out)
	} else {
		a := out.Artifact
		trust := "unknown" // an answer without trust (its read after the write failed)
		if a.Trust != nil {
			trust = string(a.Trust.Status)
		}
		fmt.Fprintf(stdout, "%s %s", out.Verdict, trust)
		if out.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", out.Reason)
		}
		fmt.Fprintf(stdout, "\n  %s version %d in %s, commit %s\n  body %s\n", a.ID, a.Version, *ctxID, out.Commit, out.BodyBlob)
	}
	if out.Verdict != gate.Retrieved {
		return exitMismatch
	}
	return exitOK
}

// fetchThroughServer asks a running server to fetch.
func fetchThroughServer(ctx context.Context, base, token, ctxID string, in service.FetchInput) (*service.FetchWrite, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	u := strings.TrimSuffix(base, "/") + "/v1/contexts/" + url.PathEscape(ctxID) + "/fetches"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The server's own fetch is bounded; this only bounds a server that
	// does not answer.
	client := &http.Client{Timeout: 2 * time.Minute}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Detail != "" {
			return nil, fmt.Errorf("%s: %s", res.Status, p.Detail)
		}
		return nil, fmt.Errorf("%s: %s", res.Status, bytes.TrimSpace(raw))
	}
	var out service.FetchWrite
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("unexpected answer: %v", err)
	}
	return &out, nil
}

// fetchIntoStore fetches in this process and records the verdict in the
// data directory, through the same Go path as the server.
func fetchIntoStore(ctx context.Context, sp storeSpec, ctxID string, in service.FetchInput, allowPrivate, renderOn bool, gf gateFlags) (*service.FetchWrite, error) {
	cfg := serveConfig{Logger: discardLogger()}
	if err := gf.load(&cfg); err != nil {
		return nil, err
	}
	if err := gateTiers(&cfg, true, allowPrivate, renderOn); err != nil {
		return nil, err
	}
	st, reg, err := openAPISpec(ctx, sp, store.Options{Logger: cfg.Logger}, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out, err := newService(st, reg, cfg, nil).RecordFetch(ctx, ctxID, in)
	if e, ok := fault.As(err); ok && e.Code != fault.Internal && e.Detail != "" {
		return nil, errors.New(e.Detail)
	}
	return out, err
}
