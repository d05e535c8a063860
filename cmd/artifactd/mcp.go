package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artifactd/artifactd/httpapi"
	"github.com/artifactd/artifactd/mcp"
	"github.com/artifactd/artifactd/store"
)

// runMCP is `artifactd mcp`: the MCP server over stdio, talking to a
// running server (--server URL, with --token or $ARTIFACTD_TOKEN) or
// opening a data directory itself (--data DIR; stop serve first).
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcp", "(--server URL [--token T] | (--data DIR | --store SPEC) [--gate-rules FILE] [--secrets FILE]) [--allow-fetch]", stderr)
	server := fs.String("server", "", "base URL of a running artifactd serve (e.g. http://127.0.0.1:7070)")
	token := fs.String("token", "", "bearer token for --server (default: $ARTIFACTD_TOKEN)")
	stf := addStoreFlags(fs, "", "data directory to open instead of --server (default "+defaultDataDir+" when --server is not given)")
	allowFetch := fs.Bool("allow-fetch", false, "add the fetch_url tool: with --server the server must run with --allow-fetch; with --data this process fetches (public addresses only)")
	gf := addGateFlags(fs) // with --data; a server has its own
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 0 {
		return fail(stderr, exitUsage, "mcp: unexpected argument %q", pos[0])
	}
	sp, err := stf.resolve()
	if err != nil {
		return fail(stderr, exitUsage, "mcp: %v", err)
	}
	if *server != "" && (*stf.data != "" || *stf.spec != "") {
		return fail(stderr, exitUsage, "mcp: give --server or --data (or --store), not both")
	}
	if *server != "" && gf.given() {
		return fail(stderr, exitUsage, "mcp: --gate-rules and --secrets are the server's flags with --server")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := mcp.Options{AllowFetch: *allowFetch, Version: mcpVersion(), Logger: logger}
	var backend mcp.Backend
	if *server != "" {
		backend = mcp.NewRemote(serverURL(*server), tokenOr(*token), nil)
	} else {
		if sp.isZero() {
			sp = storeSpec{Dir: defaultDataDir}
		}
		// The flags' files first: a refusal leaves no store behind.
		cfg := serveConfig{Logger: logger}
		if err := gf.load(&cfg); err != nil {
			return fail(stderr, exitUsage, "mcp: %v", err)
		}
		if err := gateTiers(&cfg, *allowFetch, false, false); err != nil {
			return fail(stderr, exitUsage, "mcp: %v", err)
		}
		st, reg, err := openAPISpec(ctx, sp, store.Options{Logger: logger}, false)
		if err != nil {
			return fail(stderr, exitUsage, "mcp: %v", err)
		}
		defer st.Close()
		backend = mcp.NewInProcess(newService(st, reg, cfg, nil), logger)
	}
	t := &sdk.IOTransport{Reader: io.NopCloser(os.Stdin), Writer: nopWriteCloser{stdout}}
	if err := mcp.NewServer(backend, opts).Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fail(stderr, exitUsage, "mcp: %v", err)
	}
	return exitOK
}

// withMCP mounts the MCP server at /mcp in front of the API (mcp.Mount):
// streamable HTTP whose tool calls are served by api itself in this
// process, each with the Authorization header of the request that carried
// it, so the API's tokens and scopes decide (read tools need read on the
// context, write tools write).
func withMCP(api *httpapi.Server, cfg serveConfig) http.Handler {
	return mcp.Mount(api, mcp.Options{AllowFetch: cfg.Fetcher != nil, Version: mcpVersion(), Logger: cfg.Logger})
}

// mcpVersion is the module version the binary was built from ("devel" for
// a source checkout).
func mcpVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// nopWriteCloser is an io.Writer that ignores Close (stdout stays open).
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
