// Package mcp serves artifactd to AI agents as Model Context Protocol
// tools, over stdio or streamable HTTP, on top of a Backend that is either
// the store in this process or a running server reached over HTTP.
//
// Glossary:
//   - Tool: one MCP tool (record_artifact, link, check_trust, submit_fetch,
//     fetch_url, record_tool_result, provenance, audit, diff, verify). Its
//     arguments are the HTTP API's request body plus a "context" member
//     naming the context (and, for reads, the query parameters); its
//     structured result is the HTTP answer. Input and output JSON Schemas
//     are inferred from the Go types in types.go.
//   - Backend: what the tools call (backend.go). InProcess implements it
//     over an *httpapi.Server and its store; Remote over the /v1 HTTP API
//     of a running server (or, with NewHandlerBackend, of an http.Handler
//     in the same process, which is how `serve` mounts /mcp (Mount) so
//     that the API's own tokens and scopes authorize every tool call).
//   - Problem: a refusal of the API (RFC 9457 problem+json) as a Go error.
//     A tool that meets one returns a result with isError set whose text
//     names the status, the code, the detail and every field pointer; a
//     quarantine refusal (409 quarantined) also names the poison roots and
//     the path to them, so a model sees why its write was refused.
//
// A refused write changes nothing: the tools add no state of their own and
// every write is one commit of the API.
package mcp
