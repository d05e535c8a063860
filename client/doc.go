// Package client is a small Go client of the artifactd HTTP API: typed
// requests and responses, problems as errors, and record/replay of model
// calls.
//
// Glossary:
//   - Problem: an RFC 9457 application/problem+json error; every non-2xx
//     answer becomes a *Problem carrying its type, title, status, detail and
//     field errors (pointer or parameter, rule).
//   - Parent: the head commit a write expects; a write whose parent is stale
//     is refused with the problem code "stale-parent". The client never
//     retries it on its own; PutArtifactCAS re-reads and retries when asked.
//   - Safe retry: GET requests (and the idempotent PUT of a context) are
//     retried on a transport error or a 503; other writes never are.
//   - Model call record: a model_call artifact keyed by the SHA-256 of the
//     canonical request (see ModelRecorder).
//
// A Client is safe for concurrent use.
package client
