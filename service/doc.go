// Package service holds artifactd's use cases over one store: every door —
// the HTTP API (httpapi), the browser UI (web), the CLI (cmd/artifactd)
// and the MCP server (mcp) — calls it, so a rule holds whichever door a
// request came through.
//
// It owns what used to live inside the HTTP package: the one-artifact
// write and the general commit with the client's rules (canonical data,
// schema validation, reserved types, quarantine mode, stale parents), the
// gate's recording of fetches (classify, render, store the body, commit a
// fetch_verdict that its receipt bears out) and of tool results, recorded
// model calls, the outbox state machine, the type and relation registry,
// merges with checked resolutions, verify while serving, run comparison,
// the trust reports and the structural evaluation (Eval keeps the one it
// made last per context and evaluates the next commit from it and what
// differs, so a dashboard polling a big context does not pass over it
// again after every commit), and the reads whose rules every door shares
// (reads.go: an artifact with its trust and writer, provenance within its
// bounds and formats, the audit, a diff's two ends and its field-level
// data), which httpapi and the MCP tools call on a view they opened. It does no I/O of its own: it reads and writes
// through *store.Store, fetches through a Fetcher and renders through a
// Renderer that the door supplies, and takes its time from Options.Clock.
// It imports no door and no net/http (store/kv's TestLayers keeps that).
//
// # Errors
//
// Every error is a *fault.Error or an error that Classify maps to one:
// Classify is the one function that turns the sentinels and typed errors
// of store, graph, replay, gate, hashing and store/kv into a code of the
// closed set in package fault (the vocabulary is a separate leaf package
// so that the core and the store can mark corruption with its one marker,
// fault.ErrCorrupt, without importing this layer). Doors map a code to
// their own terms once: httpapi.StatusOf for HTTP statuses and
// problem+json, which web and the MCP server reuse.
//
// # Glossary
//
//   - Service: the use cases over one store (New, Options).
//   - Registry: the artifact types (built-ins and user types) with their
//     compiled schemas and trust roles, and the relations; its RoleOf is
//     what the store must use to judge user types.
//   - Gate path: GatePutArtifact, the only way to write the reserved
//     fetch_verdict type; RecordFetch reaches it after classifying the
//     evidence itself. A verdict is refused unless its receipt and stored
//     body bear it out.
//   - Outbox: effects are artifacts whose status changes are commits
//     guarded by a compare-and-set inside the store's committer
//     (casCheck): pending → claimed → sent, or failed, or back to pending
//     on a retry or an expired lease. The committer picks a claim's
//     effects from a pool the claim read, passing over those other
//     claims took meanwhile. A claim answers a lease token (an
//     HMAC of the claimed version under Options.LeaseKey, never stored)
//     that complete and fail must present.
//   - Decoded variants (PutDecoded, CommitDecoded): the same writes for a
//     door that has already canonicalized and decoded the request body.
package service
