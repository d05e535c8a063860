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
//     retried on a transport error or a 503; other writes never are, with
//     one exception below.
//   - Retry-After: a refusal carrying it is sent again after that delay
//     (at most 3 times, never past the context's deadline, never after a
//     delay over 30 s; WithRetryAfter) when it says the request was not
//     processed: a 503 "overloaded", which the server answers before
//     routing the request (any method, writes included), or a 429 or
//     other 503 to a safe request. Problem.RetryAfter holds the delay.
//   - Proxies: the default transport takes HTTP_PROXY, HTTPS_PROXY and
//     NO_PROXY from the environment (http.ProxyFromEnvironment), and never
//     sends a request for localhost or a loopback address through a proxy.
//   - Model call record: a model_call artifact keyed by the SHA-256 of the
//     canonical request (see ModelRecorder).
//
// A Client is safe for concurrent use.
package client
